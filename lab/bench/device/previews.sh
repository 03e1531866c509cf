#!/usr/bin/env bash
# Issue #20 on the lent H200: what a live step preview costs next to a 1024² FLUX.2 Klein 4B step
# (random weights at the real dimensions, bfloat16; the issue asks ≤ 2 %). lab/bench/previews.py
# runs each repetition as two cold subprocesses, previews off and on; writes
# $OUT/previews-h200-flux2-1024.json (+ .log).
#
# On the device (MLX CUDA installed as /work/shared/device/README.md says), from the repo root:
#   export PYTHONPATH=/opt/mlxsite:$PWD && bash lab/bench/device/previews.sh
# Device time: 3 reps × 2 processes, each ~5 s start-up + 2.5 s random init + a 4-step warm-up
# + 8 timed steps at ~74 ms/step, plus ~1.5 min of first-process CUDA JIT: about 3 minutes.
# Overrides: REPS (3), STEPS (8).
# Dry run on the CPU (tiny random weights, 128², float32, 1 repetition, 6 steps, OUT defaulting
# to ./previews-dry): TINY=1 bash lab/bench/device/previews.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 TQDM_DISABLE=1
PY=${PYTHON:-python3}
if [ "${TINY:-0}" = 1 ]; then
  OUT=${OUT:-$PWD/previews-dry}
  args=(--random-weights tiny --dtype float32 --size 128x128 --steps 6 --reps 1)
else
  OUT=${OUT:?set OUT (the device sets it)}
  export TEACACHE_STUDIO_NO_OPENBLAS=1
  args=(--random-weights full --dtype bfloat16 --size 1024x1024 --steps "${STEPS:-8}"
        --reps "${REPS:-3}")
fi
mkdir -p "$OUT"
{
  echo "previews batch: ${args[*]}; $(date -u +%FT%TZ)"
  nvidia-smi -L 2>/dev/null || echo "no nvidia-smi (CPU dry run)"
  git log --oneline -1 2>/dev/null || true
  "$PY" -c "import mlx.core as mx, mflux; print('mlx', mx.__version__, mx.default_device())"
} | tee "$OUT/previews-h200-flux2-1024.log"
"$PY" -m lab.bench.previews --variant flux2-klein-4b "${args[@]}" \
  --label "Timing only: random weights, forced skip pattern (FSCSCS…F); issue #20 device batch" \
  --out "$OUT/previews-h200-flux2-1024.json" 2>&1 | tee -a "$OUT/previews-h200-flux2-1024.log"
