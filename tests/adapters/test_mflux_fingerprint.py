"""Fingerprints of the private mflux code the adapters re-walk or rely on.

The adapters copy parts of mflux's forward passes and lean on private seams (``_predict``,
``_apply_*`` helpers, the callback registry, prompt-cache keys). An mflux upgrade that changes any
of them could silently change numbers, so each is pinned here by a hash of its source. When one
fails: read the new source, update the adapter named in the message (and its parity tests) if the
behaviour changed, then refresh the hash (``uv run python -m tests.adapters.test_mflux_fingerprint``
prints them).
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import sys
from importlib.metadata import version
from typing import Any

PINNED_MFLUX = "0.24.0"

# (module, attribute path) -> (sha256 of the source, what depends on it)
FINGERPRINTS: dict[tuple[str, str], tuple[str, str]] = {
    ("mflux.models.flux.variants.txt2img.flux", "Flux1.generate_image"): (
        "2d092554c6a8f67d",
        "app/adapters/flux1.py (loop: one transformer call per step, t = step index)",
    ),
    ("mflux.models.flux.model.flux_transformer.transformer", "Transformer.__call__"): (
        "77d2e3f648cbdc09",
        "app/adapters/flux1.py (re-walk: prelude, body, tail)",
    ),
    (
        "mflux.models.flux.model.flux_transformer.transformer",
        "Transformer._apply_joint_transformer_block",
    ): (
        "5a765856c6d7fe05",
        "app/adapters/flux1.py (body helper)",
    ),
    (
        "mflux.models.flux.model.flux_transformer.transformer",
        "Transformer._apply_single_transformer_block",
    ): (
        "63f1452b5621d247",
        "app/adapters/flux1.py (body helper)",
    ),
    (
        "mflux.models.flux.model.flux_transformer.transformer",
        "Transformer.compute_text_embeddings",
    ): (
        "acb2bf9afb864b71",
        "app/adapters/flux1.py (prelude)",
    ),
    (
        "mflux.models.flux.model.flux_transformer.transformer",
        "Transformer.compute_rotary_embeddings",
    ): (
        "7210086502bcc484",
        "app/adapters/flux1.py (body)",
    ),
    ("mflux.models.flux.model.flux_transformer.ada_layer_norm_zero", "AdaLayerNormZero.__call__"): (
        "5322761d3122ff06",
        "app/adapters/flux1.py (signal = norm1(...)[0])",
    ),
    ("mflux.models.flux.model.flux_text_encoder.prompt_encoder", "PromptEncoder.encode_prompt"): (
        "b956098a6fbf6835",
        "app/adapters/shells.py (FLUX.1 prompt-cache bypass)",
    ),
    ("mflux.models.flux2.variants.txt2img.flux2_klein", "Flux2Klein.generate_image"): (
        "55fdd5ce9b42d0b1",
        "app/adapters/flux2.py (predict built once per run from self._predict; the lookahead's "
        "next timestep = config.scheduler.timesteps[t], Flux2Anatomy.next_timestep)",
    ),
    ("mflux.models.flux2.variants.txt2img.flux2_klein", "Flux2Klein._predict"): (
        "395d6edc9170b58c",
        "app/adapters/flux2.py (predict signature, CFG combine neg + g·(pos−neg))",
    ),
    ("mflux.models.flux2.variants.txt2img.flux2_klein", "Flux2Klein._encode_prompt_pair"): (
        "c9d66ec44dbe8e5c",
        "app/adapters/shells.py (FLUX.2 prompt bypass)",
    ),
    ("mflux.models.flux2.model.flux2_transformer.transformer", "Flux2Transformer.__call__"): (
        "0b4577f95744c6e2",
        "app/adapters/flux2.py (re-walk: prelude, body, tail)",
    ),
    (
        "mflux.models.flux2.model.flux2_transformer.transformer_block",
        "Flux2TransformerBlock.__call__",
    ): (
        "ce97f11232f3a1c3",
        "app/adapters/flux2.py (signal copies its modulated norm1 input)",
    ),
    (
        "mflux.models.flux2.model.flux2_transformer.single_transformer_block",
        "Flux2SingleTransformerBlock.__call__",
    ): (
        "359aaf44a4b29f68",
        "app/adapters/flux2.py (body call keywords)",
    ),
    ("mflux.models.flux2.model.flux2_transformer.modulation", "Flux2Modulation.__call__"): (
        "664a7214be62e85f",
        "app/adapters/flux2.py (mod_img[0] = shift, scale, gate)",
    ),
    ("mflux.models.z_image.variants.z_image", "ZImage.generate_image"): (
        "7e145e8bd3a606c9",
        "app/adapters/z_image.py (predict built once per run, timestep = 1 − sigma, as the "
        "lookahead's ZImageAnatomy.next_timestep builds it)",
    ),
    ("mflux.models.z_image.variants.z_image", "ZImage._predict"): (
        "9a96f2feef6e5b84",
        "app/adapters/z_image.py (predict signature, CFG combine pos + g·(pos−neg))",
    ),
    ("mflux.models.z_image.variants.z_image", "ZImage._encode_prompts"): (
        "75161ccc2f0051be",
        "app/adapters/shells.py (Z-Image prompt bypass)",
    ),
    ("mflux.models.z_image.model.z_image_transformer.transformer", "ZImageTransformer.__call__"): (
        "238601b667b86e84",
        "app/adapters/z_image.py (re-walk: prelude, layers, tail, negation)",
    ),
    (
        "mflux.models.z_image.model.z_image_transformer.context_block",
        "ZImageContextBlock.__call__",
    ): (
        "ebf0cdd266f9ff69",
        "app/adapters/z_image.py (no timestep: the caption refined once per generation)",
    ),
    ("mflux.models.z_image.model.z_image_transformer.transformer", "ZImageTransformer._patchify"): (
        "58a87f8ed3545802",
        "app/adapters/z_image.py (prelude)",
    ),
    (
        "mflux.models.z_image.model.z_image_transformer.transformer",
        "ZImageTransformer._unpatchify",
    ): (
        "f8f88e7204431229",
        "app/adapters/z_image.py (tail)",
    ),
    (
        "mflux.models.z_image.model.z_image_transformer.transformer",
        "ZImageTransformer.stream_t_emb",
    ): (
        "29f6bae7766b9559",
        "app/adapters/z_image.py (prelude)",
    ),
    ("mflux.models.qwen.variants.txt2img.qwen_image", "QwenImage.generate_image"): (
        "bb1b63a29148b9fd",
        "app/adapters/qwen_image.py (two calls per step: positive then negative, same t)",
    ),
    ("mflux.models.qwen.model.qwen_transformer.qwen_transformer", "QwenTransformer.__call__"): (
        "8b08d69717283b94",
        "app/adapters/qwen_image.py (re-walk)",
    ),
    (
        "mflux.models.qwen.model.qwen_transformer.qwen_transformer",
        "QwenTransformer._apply_transformer_block",
    ): (
        "1e9658e684845d43",
        "app/adapters/qwen_image.py (body helper)",
    ),
    (
        "mflux.models.qwen.model.qwen_transformer.qwen_transformer",
        "QwenTransformer._compute_timestep",
    ): (
        "4d422ea635442e3a",
        "app/adapters/qwen_image.py (prelude)",
    ),
    (
        "mflux.models.qwen.model.qwen_transformer.qwen_transformer",
        "QwenTransformer._compute_rotary_embeddings",
    ): (
        "fe4c67af5f951d57",
        "app/adapters/qwen_image.py (body)",
    ),
    (
        "mflux.models.qwen.model.qwen_transformer.qwen_transformer_block",
        "QwenTransformerBlock.__call__",
    ): (
        "c029039743cd09eb",
        "app/adapters/qwen_image.py (signal copies its modulated img_norm1 input)",
    ),
    (
        "mflux.models.qwen.model.qwen_transformer.qwen_transformer_block",
        "QwenTransformerBlock._modulate",
    ): (
        "ca2a0cea705557da",
        "app/adapters/qwen_image.py (signal)",
    ),
    (
        "mflux.models.qwen.model.qwen_text_encoder.qwen_prompt_encoder",
        "QwenPromptEncoder.encode_prompt",
    ): (
        "f30822fc3ce30347",
        "app/adapters/shells.py (Qwen prompt-cache key)",
    ),
    ("mflux.models.qwen21.variants.txt2img.qwen_image_21", "QwenImage21.generate_image"): (
        "252f352971635657",
        "app/adapters/qwen_image21.py (one call per step, two under true CFG; the lookahead's next "
        "latents: scale_model_input returns them as is, in_loop before mflux's own mx.eval)",
    ),
    (
        "mflux.models.qwen21.model.qwen21_transformer.qwen21_transformer",
        "Qwen21Transformer.__call__",
    ): (
        "14bad1356554c612",
        "app/adapters/qwen_image21.py (its uncompiled part kept verbatim: geometry, text cache)",
    ),
    (
        "mflux.models.qwen21.model.qwen21_transformer.qwen21_transformer",
        "Qwen21Transformer._compute_timestep",
    ): (
        "ad8afeed23216a04",
        "app/adapters/qwen_image21.py (the lookahead's _Split.next_timestep calls it)",
    ),
    (
        "mflux.models.qwen21.model.qwen21_transformer.qwen21_transformer",
        "Qwen21Transformer._image_forward",
    ): (
        "3d8c20daf196a9c3",
        "app/adapters/qwen_image21.py (split: prelude, blocks, tail of the text-cache path)",
    ),
    (
        "mflux.models.qwen21.model.qwen21_transformer.qwen21_transformer",
        "Qwen21Transformer._forward",
    ): (
        "0173371c97c049f1",
        "app/adapters/qwen_image21.py (split: prelude, blocks, tail of the joint path)",
    ),
    ("mflux.callbacks.callback_registry", "CallbackRegistry.register"): (
        "17bbf6bc2951d7fe",
        "app/adapters/base.py (GateLifecycle filing and removal by identity)",
    ),
    ("mflux.callbacks.generation_context", "GenerationContext.before_loop"): (
        "bcb22f1d28f6c51b",
        "app/adapters/base.py (GateLifecycle.call_before_loop keywords)",
    ),
    ("mflux.callbacks.generation_context", "GenerationContext.in_loop"): (
        "50224259d9138a1a",
        "app/adapters/base.py (in_loop runs before mflux's own mx.eval)",
    ),
    ("mflux.callbacks.generation_context", "GenerationContext.after_loop"): (
        "18b517940a0e69f3",
        "app/adapters/base.py (residuals released before decode)",
    ),
    ("mflux.callbacks.generation_context", "GenerationContext.interruption"): (
        "d977c21125f51cd2",
        "app/adapters/base.py",
    ),
    ("mflux.utils.apple_silicon", "AppleSiliconUtil.is_m1_or_m2"): (
        "6b54c196e3db58cc",
        "tests/test_adapter_*.py (eager vs compiled vanilla)",
    ),
    ("mflux.models.common.vae.vae_util", "VAEUtil.decode"): (
        "6629b13480d568bc",
        "app/adapters/shells.py (stub VAE reached without tiling)",
    ),
    ("mflux.models.common.resolution.model_revisions", "ModelRevisions"): (
        "40e6d34193eb5504",
        "app/variants/weights.py (pinned revisions)",
    ),
    ("mflux.models.common.resolution.path_resolution", "PathResolution._check"): (
        "5dc8de93d011ad92",
        "app/engine/loader.py (a local snapshot path loads as 'local')",
    ),
    ("mflux.models.common.tokenizer.tokenizer_loader", "TokenizerLoader._resolve_root_path"): (
        "93bac461791245fb",
        "app/engine/loader.py (tokenizers read from the same local snapshot)",
    ),
    ("mflux.models.flux.weights.flux_weight_definition", "FluxWeightDefinition"): (
        "94ba964ab785b276",
        "app/variants/weights.py (download patterns)",
    ),
    ("mflux.models.flux2.weights.flux2_weight_definition", "Flux2KleinWeightDefinition"): (
        "e0ba0fe37532718f",
        "app/variants/weights.py (download patterns)",
    ),
    ("mflux.models.z_image.weights.z_image_weight_definition", "ZImageWeightDefinition"): (
        "af05e81b7f047f2b",
        "app/variants/weights.py (download patterns)",
    ),
    ("mflux.models.qwen.weights.qwen_weight_definition", "QwenWeightDefinition"): (
        "fbdefa1d24dc8c37",
        "app/variants/weights.py (download patterns)",
    ),
}


def _resolve(module: str, path: str) -> Any:
    obj: Any = importlib.import_module(module)
    for part in path.split("."):
        obj = inspect.getattr_static(obj, part) if isinstance(obj, type) else getattr(obj, part)
        if isinstance(obj, (staticmethod, classmethod)):
            obj = obj.__func__
    return obj


def source_hash(module: str, path: str) -> str:
    return hashlib.sha256(inspect.getsource(_resolve(module, path)).encode()).hexdigest()[:16]


def test_mflux_version_is_the_verified_one() -> None:
    assert version("mflux") == PINNED_MFLUX, (
        f"mflux {version('mflux')} is installed; the adapters were verified against "
        f"{PINNED_MFLUX}. Re-verify every entry of FINGERPRINTS before bumping the pin."
    )


def test_private_mflux_code_is_unchanged() -> None:
    changed = []
    for (module, path), (expected, depends) in FINGERPRINTS.items():
        try:
            actual = source_hash(module, path)
        except (ImportError, AttributeError, OSError, TypeError) as exc:
            changed.append(
                f"{module}.{path}: gone ({exc.__class__.__name__}) — re-verify {depends}"
            )
            continue
        if actual != expected:
            changed.append(f"{module}.{path}: source changed — re-verify {depends}")
    assert not changed, "mflux changed under the adapters:\n  " + "\n  ".join(changed)


if __name__ == "__main__":  # print current hashes, for a deliberate refresh
    for (module, path), (_, depends) in FINGERPRINTS.items():
        print(f'    ("{module}", "{path}"): ("{source_hash(module, path)}", "{depends}"),')
    sys.exit(0)
