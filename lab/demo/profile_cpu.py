"""Where a demo transformer call spends its time on this machine (a measurement, not a test).

    python -m lab.demo.profile_cpu --out lab/demo/results/profile-cpu.json

One call of the shipped demo's transformer (batch 1, 64 image + 24 text tokens, float32), its
parts timed alone (each the median of ``--reps`` evaluations after a warm-up): all its matrix
products, one single-stream block and the SiLU and softmax inside it, one double-stream block,
and the per-element cost of ``exp`` against a multiply. Then a guided step's two calls (the CFG
pair): one after the other; side by side on two CPU streams with one-thread OpenBLAS (the
demo's path on the CPU, ``app.adapters.branch_streams``); and on two streams with two-thread
OpenBLAS.
"""

from __future__ import annotations

import argparse
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.blas import blas_threads, preload_openblas
from lab.demo.reports import emit_json

BLAS = preload_openblas()

import mlx.core as mx  # noqa: E402
import numpy as np  # noqa: E402
from mlx import nn  # noqa: E402

PROMPT = "a red circle at the left on a blue background"


def _median_ms(fn: Callable[[], Any], reps: int) -> float:
    for _ in range(3):
        mx.eval(fn())
    times = []
    for _ in range(reps):
        started = time.perf_counter()
        mx.eval(fn())
        times.append(time.perf_counter() - started)
    return round(float(np.median(times)) * 1e3, 3)


def _linear_tokens(name: str) -> int:
    """How many tokens each linear layer sees in one call (the modulations see one vector)."""
    if name.startswith("single_transformer_blocks"):
        return 88
    if "context" in name or "add_" in name:
        return 24
    if name.startswith("transformer_blocks") or name in ("x_embedder", "proj_out"):
        return 64
    return 1


def profile(reps: int = 50) -> dict[str, Any]:
    from app.adapters.branch_streams import concurrent_branches
    from app.demo.model import VARIANT_FILES, image_ids, load_model, text_ids
    from app.demo.pipeline import eager_predict, float32_precision
    from app.paths import DEMO_DIR
    from lab.demo.scenes import tokenize

    with float32_precision():
        model = load_model(DEMO_DIR / VARIANT_FILES["demo"])
        tr = model.transformer
        context = model.text_encoder(mx.array([tokenize(PROMPT)]))
        uncond = model.text_encoder(mx.zeros_like(mx.array([tokenize(PROMPT)])))
        x = mx.random.normal((1, 64, 128), key=mx.random.key(0))
        img, txt = image_ids(64), text_ids(context)
        mx.eval(context, uncond, x, img, txt)

        def call(ctx: mx.array) -> mx.array:
            return tr(
                hidden_states=x,
                encoder_hidden_states=ctx,
                timestep=mx.array([500.0]),
                img_ids=img,
                txt_ids=txt,
                guidance=None,
            )

        linears = [
            (mx.random.normal((1, _linear_tokens(name), module.weight.shape[1])), module.weight)
            for name, module in tr.named_modules()
            if isinstance(module, nn.Linear)
        ]
        mx.eval(linears)
        img_1d = img[0] if img.ndim == 3 else img
        txt_1d = txt[0] if txt.ndim == 3 else txt
        image_rope, text_rope = tr.pos_embed(img_1d), tr.pos_embed(txt_1d)
        rope = (
            mx.concatenate([text_rope[0], image_rope[0]]),
            mx.concatenate([text_rope[1], image_rope[1]]),
        )
        temb = tr.time_guidance_embed(mx.array([500.0]), None)
        mod_single = tr.single_stream_modulation(temb)[0]
        mod_img = tr.double_stream_modulation_img(temb)
        mod_txt = tr.double_stream_modulation_txt(temb)
        hidden = mx.random.normal((1, 88, 256))
        mlp_in = mx.random.normal((1, 88, 1536))
        scores = mx.random.normal((1, 8, 88, 88))
        wide = mx.random.normal((88, 768))
        mx.eval(rope, mod_single, mod_img, mod_txt, hidden, mlp_in, scores, wide)
        single = tr.single_transformer_blocks[0]
        double = tr.transformer_blocks[0]

        predict = eager_predict(tr)  # the demo's own vanilla predict, its branch streams included

        def pair() -> mx.array:  # one guided step (guidance 3): both calls and the combination
            return predict(x, img, context, txt, uncond, txt, 3.0, mx.array([500.0]))

        result: dict[str, Any] = {
            "call_ms": _median_ms(lambda: call(context), reps),
            "all_matrix_products_ms": _median_ms(lambda: [v @ w.T for v, w in linears], reps),
            "single_block_ms": _median_ms(
                lambda: single(
                    hidden_states=hidden, temb_mod_params=mod_single, image_rotary_emb=rope
                ),
                reps,
            ),
            "single_blocks": len(tr.single_transformer_blocks),
            "silu_of_one_single_block_ms": _median_ms(lambda: single.attn.mlp_act(mlp_in), reps),
            "softmax_of_one_attention_ms": _median_ms(lambda: mx.softmax(scores, axis=-1), reps),
            "double_block_ms": _median_ms(
                lambda: double(
                    hidden_states=hidden[:, 24:],
                    encoder_hidden_states=hidden[:, :24],
                    temb_mod_params_img=mod_img,
                    temb_mod_params_txt=mod_txt,
                    image_rotary_emb=rope,
                ),
                reps,
            ),
            "double_blocks": len(tr.transformer_blocks),
            "exp_88x768_ms": _median_ms(lambda: mx.exp(wide), reps),
            "multiply_88x768_ms": _median_ms(lambda: wide * wide, reps),
            "cfg_pair_serial_ms": _median_ms(pair, reps // 2),
        }
        with concurrent_branches():
            result["cfg_pair_two_streams_one_thread_blas_ms"] = _median_ms(pair, reps // 2)
            with blas_threads(2):  # streams alone: the GEMM threads then take the second core
                result["cfg_pair_two_streams_two_thread_blas_ms"] = _median_ms(pair, reps // 2)
    result.update(
        openblas=BLAS,
        machine={"platform": platform.platform(), "processor": platform.processor()},
        reps=reps,
    )
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    emit_json(profile(args.reps), args.out)


if __name__ == "__main__":
    main()
