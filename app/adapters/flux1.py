"""FLUX.1 (dev, schnell, Krea dev): the gate sits inside the transformer call.

mflux calls ``Flux1.transformer`` eagerly once per step, so the adapter swaps the transformer's
class for a per-installation subclass whose ``__call__`` re-walks ``Transformer.__call__`` with the
gate between body and tail. The swap touches neither the parameter tree nor the instance
attributes; the gate state lives on the subclass (a class attribute, not a module child).

Re-walk of mflux 0.24.0 ``Transformer.__call__`` (fingerprinted in tests/test_mflux_fingerprint.py):

- prelude: ``x_embedder``, ``context_embedder``, ``compute_text_embeddings`` (runs every step);
- signal: ``transformer_blocks[0].norm1(hidden_states, text_embeddings)[0]``, the AdaLN-Zero
  modulated block-0 image input (upstream TeaCache4FLUX's signal);
- body: rotary embeddings, the joint blocks, concat ``[text, image]``, the single blocks; the
  residual is taken over that concatenated sequence;
- tail: slice the image tokens, ``norm_out``, ``proj_out``.

The block-0 split (the first-block probe, ``common.probe_stack``): ``_first_block`` runs the
rotary embeddings and joint block 0; its residual is taken on the image stream (``hidden_states``
out minus in); ``_rest_blocks`` runs joint blocks 1.. and the single blocks and returns the image
tokens the tail reads. A vanilla (observing) pass records the same residual after block 0.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
from mflux.models.flux.model.flux_transformer.transformer import Transformer

from app.adapters.base import Installation
from app.adapters.common import COND, GateState, install_class_swap, probe_stack
from app.families.flux1 import FAMILY
from app.gate import LiveGate


class GatedFlux1Transformer(Transformer):
    """Base of the per-installation subclasses; never instantiated."""

    _teacache: GateState

    def __call__(  # type: ignore[override]
        self,
        t: int,
        config: Any,
        hidden_states: mx.array,
        prompt_embeds: mx.array,
        pooled_prompt_embeds: mx.array,
        controlnet_block_samples: list[mx.array] | None = None,
        controlnet_single_block_samples: list[mx.array] | None = None,
        kontext_image_ids: mx.array | None = None,
    ) -> mx.array:
        state = type(self)._teacache
        if not state.gating:
            return Transformer.__call__(
                self, t, config, hidden_states, prompt_embeds, pooled_prompt_embeds,
                controlnet_block_samples, controlnet_single_block_samples, kontext_image_ids,
            )  # fmt: skip
        gate = state.gate
        if not gate.needs_signal:
            # Threshold 0: mflux's own forward, no signal, no residual, no extra concat.
            gate.decide(None)
            noise = Transformer.__call__(
                self, t, config, hidden_states, prompt_embeds, pooled_prompt_embeds,
                controlnet_block_samples, controlnet_single_block_samples, kontext_image_ids,
            )  # fmt: skip
            state.record(noise)
            return noise

        # 1. Prelude (every step).
        hs = self.x_embedder(hidden_states)
        ehs = self.context_embedder(prompt_embeds)
        temb = Transformer.compute_text_embeddings(
            t, pooled_prompt_embeds, self.time_text_embed, config
        )
        text_len = ehs.shape[1]
        if gate.probes_first_block:  # the first-block probe: split after block 0
            rope = Transformer.compute_rotary_embeddings(
                prompt_embeds, self.pos_embed, config, kontext_image_ids
            )
            blocks = (temb, rope, controlnet_block_samples, controlnet_single_block_samples)
            ehs1, hs1 = self._first_block(hs, ehs, *blocks)
            out = probe_stack(gate, hs, hs1, lambda: self._rest_blocks(ehs1, hs1, *blocks))
            noise = self.proj_out(self.norm_out(out, temb))
            state.record(noise)
            return noise
        # 2. Signal and decision.
        signal = self.transformer_blocks[0].norm1(hidden_states=hs, text_embeddings=temb)[0]
        verdict = gate.decide(signal)
        # 3. Body, or the cached residual.
        if verdict.decision.computes:
            rope = Transformer.compute_rotary_embeddings(
                prompt_embeds, self.pos_embed, config, kontext_image_ids
            )
            body_ehs, body_hs = ehs, hs
            for idx, block in enumerate(self.transformer_blocks):
                body_ehs, body_hs = self._apply_joint_transformer_block(
                    idx=idx,
                    block=block,
                    hidden_states=body_hs,
                    encoder_hidden_states=body_ehs,
                    text_embeddings=temb,
                    image_rotary_embeddings=rope,
                    controlnet_block_samples=controlnet_block_samples,  # type: ignore[arg-type]
                )
                if idx == 0 and gate.records_first_block:  # the probe's vanilla trace
                    gate.record_first_block(body_hs - hs)
            out = mx.concatenate([body_ehs, body_hs], axis=1)
            for idx, block in enumerate(self.single_transformer_blocks):
                out = self._apply_single_transformer_block(
                    idx=idx,
                    block=block,
                    hidden_states=out,
                    encoder_hidden_states=body_ehs,
                    text_embeddings=temb,
                    image_rotary_embeddings=rope,
                    controlnet_single_block_samples=controlnet_single_block_samples,  # type: ignore[arg-type]
                )
            if verdict.store_residual:
                gate.store_residual(out, mx.concatenate([ehs, hs], axis=1), COND)
        else:
            out = gate.reuse(mx.concatenate([ehs, hs], axis=1), COND)
        # 4. Tail.
        out = out[:, text_len:, ...]
        out = self.norm_out(out, temb)
        noise = self.proj_out(out)
        state.record(noise)
        return noise

    # -- the block-0 split (the first-block probe) ---------------------------------------------
    def _first_block(
        self,
        hs: mx.array,
        ehs: mx.array,
        temb: mx.array,
        rope: mx.array,
        controlnet_block_samples: list[mx.array] | None,
        controlnet_single_block_samples: list[mx.array] | None,
    ) -> tuple[mx.array, mx.array]:
        """Joint block 0: (text stream, image stream) after it."""
        return self._apply_joint_transformer_block(
            idx=0,
            block=self.transformer_blocks[0],
            hidden_states=hs,
            encoder_hidden_states=ehs,
            text_embeddings=temb,
            image_rotary_embeddings=rope,
            controlnet_block_samples=controlnet_block_samples,  # type: ignore[arg-type]
        )

    def _rest_blocks(
        self,
        ehs: mx.array,
        hs: mx.array,
        temb: mx.array,
        rope: mx.array,
        controlnet_block_samples: list[mx.array] | None,
        controlnet_single_block_samples: list[mx.array] | None,
    ) -> mx.array:
        """Joint blocks 1.., concat, single blocks: the image tokens the tail reads."""
        for idx, block in enumerate(self.transformer_blocks):
            if idx == 0:
                continue
            ehs, hs = self._apply_joint_transformer_block(
                idx=idx,
                block=block,
                hidden_states=hs,
                encoder_hidden_states=ehs,
                text_embeddings=temb,
                image_rotary_embeddings=rope,
                controlnet_block_samples=controlnet_block_samples,  # type: ignore[arg-type]
            )
        out = mx.concatenate([ehs, hs], axis=1)
        for idx, block in enumerate(self.single_transformer_blocks):
            out = self._apply_single_transformer_block(
                idx=idx,
                block=block,
                hidden_states=out,
                encoder_hidden_states=ehs,
                text_embeddings=temb,
                image_rotary_embeddings=rope,
                controlnet_single_block_samples=controlnet_single_block_samples,  # type: ignore[arg-type]
            )
        return out[:, ehs.shape[1] :, ...]


def install(pipeline: Any, gate: LiveGate) -> Installation:
    return install_class_swap(
        pipeline,
        gate,
        family=FAMILY,
        expected=Transformer,
        gated_base=GatedFlux1Transformer,
    )
