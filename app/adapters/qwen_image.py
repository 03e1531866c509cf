"""Qwen-Image: the gate sits inside the transformer call, shared by the two calls per step.

mflux 0.24.0 ``QwenImage.generate_image`` calls the transformer twice per step with the same
``t`` — the positive caption, then the negative — and combines them outside (norm-rescaled CFG).
The adapter swaps the transformer's class (as for FLUX.1) and pairs the two calls on one
decision: the first call of a step decides, the second reuses the decision; each keeps its own
residual (``"cond"``/``"uncond"``).

Re-walk of ``QwenTransformer.__call__``:

- prelude: ``img_in``, the timestep, ``time_text_embed`` (timestep-only, so the signal is
  caption-independent and the shared decision exact for both branches);
- signal ("signal A"): block 0's modulated image input, ``_modulate(img_norm1(x), mod1)``;
- body: caption embedding, rotary embeddings, the dual-stream blocks; residual over the image
  stream (the tail reads only that stream);
- tail: ``norm_out``, ``proj_out``.

The block-0 split (the first-block probe, ``common.probe_stack``): ``_caption`` and ``_block(0,
…)`` run the caption embedding, the rotary embeddings and block 0; its residual is taken on the
image stream; ``_rest_blocks`` runs blocks 1... The conditional call decides; the unconditional
call of the same step reads that verdict and keeps the whole stack's residual (as under
TeaCache). A vanilla (observing) pass records the same residual after block 0 of the conditional
call.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
from mflux.models.qwen.model.qwen_transformer.qwen_transformer import QwenTransformer
from mflux.models.qwen.model.qwen_transformer.qwen_transformer_block import QwenTransformerBlock

from app.adapters.base import Installation
from app.adapters.common import COND, GateState, install_class_swap, probe_stack
from app.families.qwen_image import FAMILY
from app.gate import LiveGate


class GatedQwenTransformer(QwenTransformer):
    """Base of the per-installation subclasses; never instantiated."""

    _teacache: GateState

    def __call__(  # type: ignore[override]
        self,
        t: int,
        config: Any,
        hidden_states: mx.array,
        encoder_hidden_states: mx.array,
        encoder_hidden_states_mask: mx.array,
        qwen_image_ids: mx.array | None = None,
        cond_image_grid: tuple[int, int, int] | None = None,
    ) -> mx.array:
        state = type(self)._teacache
        plain = (
            not state.gating
            or qwen_image_ids is not None
            or cond_image_grid is not None  # edit paths: ungated
        )
        if plain:
            return QwenTransformer.__call__(
                self, t, config, hidden_states, encoder_hidden_states, encoder_hidden_states_mask,
                qwen_image_ids, cond_image_grid,
            )  # fmt: skip
        gate = state.gate
        branch = state.branch_of_call()
        if not gate.needs_signal:
            gate.decide(None)
            noise = QwenTransformer.__call__(
                self, t, config, hidden_states, encoder_hidden_states, encoder_hidden_states_mask
            )
            if branch == "cond":
                state.record(noise)
            return noise

        # 1. Prelude.
        hs = self.img_in(hidden_states)
        batch_size = hs.shape[0]
        timestep = QwenTransformer._compute_timestep(t, config)
        timestep = mx.broadcast_to(timestep, (batch_size,)).astype(hs.dtype)
        temb = self.time_text_embed(timestep, hs)
        if gate.probes_first_block and branch == COND:  # the probe: split after block 0
            ehs, rope = self._caption(config, encoder_hidden_states, encoder_hidden_states_mask)
            mask = encoder_hidden_states_mask
            ehs1, hs1 = self._block(0, hs, ehs, mask, temb, rope)
            out = probe_stack(gate, hs, hs1, lambda: self._rest_blocks(hs1, ehs1, mask, temb, rope))
            noise = self.proj_out(self.norm_out(out, temb))
            state.record(noise)
            return noise
        # 2. Signal and decision: decided on the first call of the step, reused on the second.
        signal = None
        if branch == "cond":
            block0 = self.transformer_blocks[0]
            mod1, _ = mx.split(block0.img_mod_linear(block0.img_mod_silu(temb)), 2, axis=-1)
            signal, _ = QwenTransformerBlock._modulate(block0.img_norm1(hs), mod1)
        verdict = gate.decide(signal)
        # 3. Body, or the cached residual.
        if verdict.decision.computes:
            ehs = self.txt_in(self.txt_norm(encoder_hidden_states))
            rope = QwenTransformer._compute_rotary_embeddings(
                encoder_hidden_states_mask=encoder_hidden_states_mask,
                pos_embed=self.pos_embed,
                config=config,
                cond_image_grid=None,
            )
            out = hs
            for idx, block in enumerate(self.transformer_blocks):
                ehs, out = QwenTransformer._apply_transformer_block(
                    idx=idx,
                    block=block,
                    hidden_states=out,
                    encoder_hidden_states=ehs,
                    encoder_hidden_states_mask=encoder_hidden_states_mask,
                    text_embeddings=temb,
                    image_rotary_embeddings=rope,
                    cond_embeddings=None,
                    is_cond_token=None,
                )
                if idx == 0 and branch == COND and gate.records_first_block:
                    gate.record_first_block(out - hs)  # the probe's vanilla trace
            if verdict.store_residual:
                gate.store_residual(out, hs, branch)
        else:
            out = gate.reuse(hs, branch)
        # 4. Tail.
        out = self.norm_out(out, temb)
        noise = self.proj_out(out)
        if branch == "cond":
            state.record(noise)  # calibration pairs follow the conditional branch
        return noise

    # -- the block-0 split (the first-block probe) ---------------------------------------------
    def _caption(
        self, config: Any, encoder_hidden_states: mx.array, mask: mx.array
    ) -> tuple[mx.array, Any]:
        ehs = self.txt_in(self.txt_norm(encoder_hidden_states))
        rope = QwenTransformer._compute_rotary_embeddings(
            encoder_hidden_states_mask=mask,
            pos_embed=self.pos_embed,
            config=config,
            cond_image_grid=None,
        )
        return ehs, rope

    def _block(
        self, idx: int, hs: mx.array, ehs: mx.array, mask: mx.array, temb: mx.array, rope: Any
    ) -> tuple[mx.array, mx.array]:
        """Block ``idx``: (text stream, image stream) after it."""
        return QwenTransformer._apply_transformer_block(
            idx=idx,
            block=self.transformer_blocks[idx],
            hidden_states=hs,
            encoder_hidden_states=ehs,
            encoder_hidden_states_mask=mask,
            text_embeddings=temb,
            image_rotary_embeddings=rope,
            cond_embeddings=None,
            is_cond_token=None,
        )

    def _rest_blocks(
        self, hs: mx.array, ehs: mx.array, mask: mx.array, temb: mx.array, rope: Any
    ) -> mx.array:
        for idx in range(1, len(self.transformer_blocks)):
            ehs, hs = self._block(idx, hs, ehs, mask, temb, rope)
        return hs


def install(pipeline: Any, gate: LiveGate) -> Installation:
    return install_class_swap(
        pipeline,
        gate,
        family=FAMILY,
        expected=QwenTransformer,
        gated_base=GatedQwenTransformer,
    )
