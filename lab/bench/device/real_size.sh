#!/usr/bin/env bash
# Any family at its real size on the lent GPU (issues #38, #40, #41): `teacache-studio bench`
# (vanilla mflux / gate off / gated, each repetition a cold subprocess) for the variants named,
# built at mflux's dimensions with random weights (`bench --random-weights full`), bfloat16,
# TeaCache's seam on a forced skip pattern (one skip after every computed step, from a constant
# polynomial: no calibration needed, timing only); ALSO_GATE=firstblock adds the first-block probe's
# forced pattern as a fourth condition. Unlike issue29.sh it knows no family: a case is a variant id
# of the registry, optionally with its size and steps (`VARIANT[:SIZE[:STEPS[:REPS]]]`, defaults
# 1024x1024, the variant's default steps capped at 12, 2 repetitions; a 4-step warm-up each).
#
# On the device (MLX CUDA installed as /work/shared/device/README.md says), from the repo root:
#   export PYTHONPATH=/opt/mlxsite:$PWD TEACACHE_GIT_COMMIT=<the commit the tree is at>
#   bash lab/bench/device/real_size.sh flux2-klein-4b z-image qwen-image-2.1:1024x1024:12:3 ...
# Writes $OUT/<variant>-<size>-random-<card>.json and .md (card: h200 or h100, from nvidia-smi; the
# names they are committed by under resources/benchmarks/), <stem>.chunks/ (every run, for a
# resume: RESUME_FROM=<folder holding them>) and $OUT/real-size-plan.txt.
# Dry run on the CPU (tiny random weights, 64², float32, 1 repetition, 8 steps; OUT defaulting to
# ./real-size-dry; files named <variant>-64-tiny-cpu.*): TINY=1 bash lab/bench/device/real_size.sh V...
set -euo pipefail
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 TQDM_DISABLE=1
PY=${PYTHON:-python3}
TINY=${TINY:-0}
ALSO_GATE=${ALSO_GATE-}
if [ "$TINY" = 1 ]; then
  OUT=${OUT:-$PWD/real-size-dry}
  WEIGHTS=tiny DTYPE=float32 CARD=cpu
else
  OUT=${OUT:?set OUT (the device sets it)}
  WEIGHTS=full DTYPE=bfloat16
  export TEACACHE_STUDIO_NO_OPENBLAS=1
  : "${TEACACHE_GIT_COMMIT:?set TEACACHE_GIT_COMMIT to the commit the tree is at (the git metadata of the device copy is stale)}"
  CARD=h200
  nvidia-smi -L 2>/dev/null | grep -q H100 && CARD=h100
fi
mkdir -p "$OUT"
[ $# -gt 0 ] || { echo "name at least one variant" >&2; exit 2; }
{
  echo "real-size batch: $*; weights $WEIGHTS, dtype $DTYPE, card $CARD; also-gate ${ALSO_GATE:-none}; $(date -u +%FT%TZ)"
  nvidia-smi -L 2>/dev/null || echo "no nvidia-smi (CPU dry run)"
  echo "commit ${TEACACHE_GIT_COMMIT:-$(git log --oneline -1 2>/dev/null || true)}"
  "$PY" -c "import mlx.core as mx, mflux; print('mlx', mx.__version__, mx.default_device())"
} | tee -a "$OUT/real-size-plan.txt"

for spec in "$@"; do
  IFS=: read -r variant size steps reps <<<"$spec"
  size=${size:-1024x1024}
  steps=${steps:-$("$PY" -c "from app.variants import get_variant; print(min(get_variant('$variant').default_steps, 12))")}
  reps=${reps:-2}
  warm=4
  if [ "$TINY" = 1 ]; then size=64x64 steps=8 reps=1; fi
  stem="$variant-${size%%x*}-random-$CARD"
  [ "$TINY" = 1 ] && stem="$variant-${size%%x*}-tiny-cpu"
  also=()
  [ -n "$ALSO_GATE" ] && also=(--also-gate "$ALSO_GATE")
  pattern="TeaCache's from a constant gate polynomial"
  [ -n "$ALSO_GATE" ] && pattern="$pattern; $ALSO_GATE's from its forced mode"
  note="Timing only: random weights ($WEIGHTS size, $DTYPE) and a forced skip pattern (1 skipped after each computed step: $pattern), says nothing about image quality; $steps steps, $reps cold repetition(s), each after a $warm-step warm-up (real-size device batch; repetitions and warm-up steps chosen to fit the session's device time)"
  if [ -n "${RESUME_FROM:-}" ] && [ -d "$RESUME_FROM/$stem.chunks" ] && [ ! -d "$OUT/$stem.chunks" ]; then
    cp -r "$RESUME_FROM/$stem.chunks" "$OUT/"
  fi
  echo "== $variant $size, $steps steps, $reps reps, warm-up $warm steps -> $stem.json" | tee -a "$OUT/real-size-plan.txt"
  started=$(date +%s)
  status=0
  "$PY" -m app bench --variant "$variant" --size "$size" --steps "$steps" --reps "$reps" \
    --warmup-steps "$warm" --random-weights "$WEIGHTS" --dtype "$DTYPE" --gate teacache \
    --forced-skips 1 ${also[@]+"${also[@]}"} --label "$note" --out "$OUT/$stem.json" --quiet \
    >"$OUT/$stem.stdout" 2>"$OUT/$stem.stderr" || status=$?
  echo "== $variant: exit $status after $(( $(date +%s) - started )) s" | tee -a "$OUT/real-size-plan.txt"
  tail -n 3 "$OUT/$stem.stderr" || true
  [ -f "$OUT/$stem.md" ] && sed -n '/^Speedup/p' "$OUT/$stem.md"
done
ls -la "$OUT"
