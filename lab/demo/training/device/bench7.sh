#!/usr/bin/env bash
# Session 7: the H200 rows on the shipped (run 8k) weights: cold-process demo and turbo latency,
# and the teacache bench (vanilla / gate off / gated) at the demo's defaults.
set -euo pipefail
export PYTHONPATH=/opt/mlxsite:$PWD PYTHONUNBUFFERED=1 TQDM_DISABLE=1 TEACACHE_STUDIO_NO_OPENBLAS=1
nvidia-smi -L
git log --oneline -1 2>/dev/null || true
python3 -m lab.demo.bench --variant demo --reps 5 --out "$OUT/bench-demo-h200.json"
python3 -m lab.demo.bench --variant demo-turbo --reps 5 --out "$OUT/bench-demo-turbo-h200.json"
python3 -m app bench --variant demo --reps 5 --quiet --out "$OUT/demo-h200.json"
ls -la "$OUT"
