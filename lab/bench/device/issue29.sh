#!/usr/bin/env bash
# Issue #29 on the lent H200: `teacache-studio bench` (vanilla mflux / gate off / gated, each
# repetition a cold subprocess) for this year's families at their real dimensions with random
# weights, bfloat16, 1024², TeaCache's seam on a forced skip pattern (one skip after every
# computed step, from a constant polynomial: no calibration needed, timing only):
#   flux3-1024   FLUX.3 Image Klein (distilled flow map), 16 steps (its default), no CFG
#   qwen21-1024  Qwen-Image 2.1 (base), 12 steps (of its 40), no CFG (mflux's default)
#   krea2-1024   Krea 2 Turbo, 8 steps (its default), no CFG
#   flux3-base-1024  FLUX.3 Image Klein base, 16 steps (of its 50), CFG 3.5 (not in the default
#                list: run it when device time is left)
# Writes $OUT/<variant>-1024-random-h200.json and .md (the names they are committed by under
# resources/benchmarks/; `uv run python -m lab.bench.device_figures $OUT` takes them in, refusing
# a CPU dry run's, and renders the README's table rows and its "This year's models" ratios from
# them), <stem>.chunks/ (every run and its worker log, for a resume) and $OUT/issue29-plan.txt.
#
# On the device (MLX CUDA installed as /work/shared/device/README.md says), from the repo root:
#   export PYTHONPATH=/opt/mlxsite:$PWD TEACACHE_GIT_COMMIT=<the commit the tree is at>
#   bash lab/bench/device/issue29.sh CASE...
# (the device's copy carries stale git metadata: every report records TEACACHE_GIT_COMMIT).
# Cases: flux3-1024 qwen21-1024 krea2-1024 (none given: these three), flux3-base-1024.
# Conditions run rep-outer in alternating direction, as issue17.sh's. Per-case overrides:
# REPS_<case> / STEPS_<case> / WARMUP_STEPS_<case> (case with - → _), e.g. REPS_krea2_1024=3.
# ALSO_GATE=firstblock adds the first-block probe's forced pattern as a fourth condition
# (gated-firstblock: each family's block-0 split, compiled where mflux compiles; a third more
# device time). Resume a case cut off by
# a call's time limit: carry its .chunks folder back in and set RESUME_FROM=<folder holding it>.
# Dry run on the CPU (tiny random weights, 64², float32, 1 repetition, 8 steps: past the probe's
# 4-step warm-up, so its forced skips are timed too; OUT defaulting to ./issue29-dry; files named
# <variant>-64-tiny-cpu.*): TINY=1 [ALSO_GATE=firstblock] bash lab/bench/device/issue29.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 TQDM_DISABLE=1
PY=${PYTHON:-python3}
TINY=${TINY:-0}
ALSO_GATE=${ALSO_GATE-}
if [ "$TINY" = 1 ]; then
  OUT=${OUT:-$PWD/issue29-dry}
  WEIGHTS=tiny DTYPE=float32
else
  OUT=${OUT:?set OUT (the device sets it)}
  WEIGHTS=full DTYPE=bfloat16
  export TEACACHE_STUDIO_NO_OPENBLAS=1
  : "${TEACACHE_GIT_COMMIT:?set TEACACHE_GIT_COMMIT to the commit the tree is at (the git metadata of the device copy is stale)}"
fi
mkdir -p "$OUT"
cases=("$@")
[ ${#cases[@]} -eq 0 ] && cases=(flux3-1024 qwen21-1024 krea2-1024)

# case -> variant, size, steps, reps, warm-up steps.
# Device-time estimate, from the committed H200 batches (resources/benchmarks/*-random-h200.json):
# a cold process costs ~15 s beyond its denoising loops (start-up, random init at real size, the
# VAE decode), plus its warm-up (4 steps) and timed loop; the first process of a case may add
# kernel JIT (Qwen-Image 0.5 s, Z-Image 0.7 s, FLUX.2 Klein 78 s). 3 conditions × 2 repetitions:
#   flux3-1024   134 ms/step (measured: /work/shared/research/turn3/h200-rerun/flux3-probe.json):
#                ~17 s a process, 6 processes                                   = ~1.7 min
#   qwen21-1024  ~0.45 s/step (Qwen-Image's 68 ms per billion parameters at 1024², 7.1B), 12
#                steps: ~22 s a process, 6 processes                            = ~2.2 min
#   krea2-1024   ~0.6 s/step (12.8B, ~45 ms per billion), 8 steps: ~22 s a process  = ~2.2 min
#   flux3-base-1024  ~0.28 s/step (two branches), 16 steps: ~22 s a process     = ~2.2 min
# The three default cases: ~6 min, up to ~8 with JIT. A case cut off by the time limit keeps its
# finished runs in <stem>.chunks/: carry it back in and rerun with RESUME_FROM (see above).
plan() {
  case "$1" in
    flux3-1024) echo "flux3-image-klein 1024x1024 16 2 4" ;;
    qwen21-1024) echo "qwen-image-2.1 1024x1024 12 2 4" ;;
    krea2-1024) echo "krea-2 1024x1024 8 2 4" ;;
    flux3-base-1024) echo "flux3-image-klein-base 1024x1024 16 2 4" ;;
    *) echo "unknown case $1" >&2; return 1 ;;
  esac
}

{
  echo "issue29 batch: cases ${cases[*]}; weights $WEIGHTS, dtype $DTYPE; also-gate ${ALSO_GATE:-none}; $(date -u +%FT%TZ)"
  nvidia-smi -L 2>/dev/null || echo "no nvidia-smi (CPU dry run)"
  echo "commit ${TEACACHE_GIT_COMMIT:-$(git log --oneline -1 2>/dev/null || true)}"
  "$PY" -c "import mlx.core as mx, mflux; print('mlx', mx.__version__, mx.default_device())"
} | tee -a "$OUT/issue29-plan.txt"

for name in "${cases[@]}"; do
  read -r variant size steps reps warm <<<"$(plan "$name")"
  key=${name//-/_}
  steps=$(eval echo "\${STEPS_$key:-$steps}")
  reps=$(eval echo "\${REPS_$key:-$reps}")
  warm=$(eval echo "\${WARMUP_STEPS_$key:-$warm}")
  if [ "$TINY" = 1 ]; then size=64x64 steps=8 reps=1 warm=4; fi
  # The report's name: the file to commit under resources/benchmarks/ (lab/bench/device_figures.py)
  stem="$variant-${size%%x*}-random-h200"
  [ "$TINY" = 1 ] && stem="$variant-${size%%x*}-tiny-cpu"
  also=()
  [ -n "$ALSO_GATE" ] && also=(--also-gate "$ALSO_GATE")
  pattern="TeaCache's from a constant gate polynomial"
  [ -n "$ALSO_GATE" ] && pattern="$pattern; $ALSO_GATE's from its forced mode"
  note="Timing only: random weights ($WEIGHTS size, $DTYPE) and a forced skip pattern (1 skipped after each computed step: $pattern), says nothing about image quality; $steps steps, $reps cold repetition(s), each after a $warm-step warm-up (issue #29 device batch; repetitions and warm-up steps chosen to fit the session's device time)"
  if [ -n "${RESUME_FROM:-}" ] && [ -d "$RESUME_FROM/$stem.chunks" ] && [ ! -d "$OUT/$stem.chunks" ]; then
    cp -r "$RESUME_FROM/$stem.chunks" "$OUT/"
  fi
  echo "== $name: $variant $size, $steps steps, $reps reps, warm-up $warm steps -> $stem.json" | tee -a "$OUT/issue29-plan.txt"
  started=$(date +%s)
  status=0
  "$PY" -m app bench --variant "$variant" --size "$size" --steps "$steps" --reps "$reps" \
    --warmup-steps "$warm" --random-weights "$WEIGHTS" --dtype "$DTYPE" --gate teacache \
    --forced-skips 1 ${also[@]+"${also[@]}"} --label "$note" --out "$OUT/$stem.json" --quiet \
    >"$OUT/$stem.stdout" 2>"$OUT/$stem.stderr" || status=$?
  echo "== $name: exit $status after $(( $(date +%s) - started )) s" | tee -a "$OUT/issue29-plan.txt"
  tail -n 3 "$OUT/$stem.stderr" || true
  [ -f "$OUT/$stem.md" ] && sed -n '/^Speedup/p' "$OUT/$stem.md"
done
ls -la "$OUT"
