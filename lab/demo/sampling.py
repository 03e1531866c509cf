"""Do stronger guidance or more steps buy prompt adherence? A sweep of the demo's sampling settings.

    python -m lab.demo.sampling --out lab/demo/results/sampling-sweep.json

Every row scores the same 100 evaluation prompts and seeds through the real pipeline
(:func:`lab.demo.evaluate.evaluate_pipeline`, vanilla, 0 skips), so rows differ only in their
setting. ``median_seconds`` is the evaluation's own per-image time on this machine, not a benchmark.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from app.blas import preload_openblas
from app.fileio.jsonio import dumps_json
from lab.demo.reports import write_json

preload_openblas()  # before MLX loads

# (guidance, steps): the default first, then stronger guidance, then more steps.
SETTINGS: tuple[tuple[float, int], ...] = ((3.0, 28), (4.0, 28), (5.0, 28), (6.0, 28), (3.0, 50))


def sweep(
    settings: tuple[tuple[float, int], ...] = SETTINGS,
    n_prompts: int = 100,
    resources: Path | None = None,
) -> dict[str, Any]:
    from lab.demo.evaluate import evaluate_pipeline

    rows = []
    for guidance, steps in settings:
        report = evaluate_pipeline("demo", n_prompts, steps, guidance, resources)
        rows.append(
            {
                "guidance": guidance,
                "steps": steps,
                "scores": report["scores"],
                "shape_seen_as": report["shape_seen_as"],
                "median_seconds": report["median_seconds"],
                "per_prompt": report["per_prompt"],
            }
        )
    return {
        "variant": "demo",
        "prompts": n_prompts,
        "sampler": "real pipeline (load_demo_pipeline(...).generate_image), vanilla",
        "question": "do stronger guidance or more steps buy shape adherence at the default?",
        "rows": rows,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--prompts", type=int, default=100)
    parser.add_argument("--weights", default=None, help="a label for the weights, kept in the file")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    result = sweep(n_prompts=args.prompts)
    if args.weights:
        result["weights"] = args.weights
    if args.out:
        write_json(args.out, result)
    print(dumps_json([{k: r[k] for k in ("guidance", "steps", "scores")} for r in result["rows"]]))


if __name__ == "__main__":
    main()
