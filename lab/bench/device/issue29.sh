#!/usr/bin/env bash
# Issue #29 on the lent H200: `teacache-studio bench` (vanilla mflux / gate off / gated, each
# repetition a cold subprocess) for this year's families at their real dimensions with random
# weights, bfloat16, 1024², a forced skip pattern (one skip after every computed step):
#   flux3-1024   FLUX.3 Image Klein (distilled flow map), 16 steps (its default), no CFG
#   qwen21-1024  Qwen-Image 2.1 (base), 20 steps (of its 40), no CFG (mflux's default)
#   krea2-1024   Krea 2 Turbo, 8 steps (its default), no CFG
#   flux3-base-1024  FLUX.3 Image Klein base, 20 steps (of its 50), CFG 3.5 (not in the default
#                list: run it when device time is left)
# The gated condition is TeaCache's seam (the signal before block 0: a skipped step runs only the
# prelude and the tail) on the forced pattern; a fourth condition, gated-firstblock, runs the
# first-block probe (these families' default gate: it needs no calibration, and a skipped step
# runs block 0 too) on its own forced pattern. Writes $OUT/<case>.json (+ .md, + .chunks/ with
# every run and its worker log) and $OUT/issue29-plan.txt.
#
# On the device (MLX CUDA installed as /work/shared/device/README.md says), from the repo root:
#   export PYTHONPATH=/opt/mlxsite:$PWD && bash lab/bench/device/issue29.sh CASE...
# Cases: flux3-1024 qwen21-1024 krea2-1024 (none given: these three), flux3-base-1024.
# Conditions run rep-outer in alternating direction, as issue17.sh's. Per-case overrides:
# REPS_<case> / STEPS_<case> / WARMUP_STEPS_<case> (case with - → _), e.g. REPS_krea2_1024=3.
# ALSO_GATE= (empty) drops the probe's condition. Resume a case cut off by a call's time limit:
# carry its .chunks folder back in and set RESUME_FROM=<folder holding CASE.chunks/>.
# Dry run on the CPU (tiny random weights, 64², float32, 1 repetition, 4 steps, OUT defaulting
# to ./issue29-dry): TINY=1 bash lab/bench/device/issue29.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 TQDM_DISABLE=1
PY=${PYTHON:-python3}
TINY=${TINY:-0}
ALSO_GATE=${ALSO_GATE-firstblock}
if [ "$TINY" = 1 ]; then
  OUT=${OUT:-$PWD/issue29-dry}
  WEIGHTS=tiny DTYPE=float32
else
  OUT=${OUT:?set OUT (the device sets it)}
  WEIGHTS=full DTYPE=bfloat16
  export TEACACHE_STUDIO_NO_OPENBLAS=1
fi
mkdir -p "$OUT"
cases=("$@")
[ ${#cases[@]} -eq 0 ] && cases=(flux3-1024 qwen21-1024 krea2-1024)

# case -> variant, size, steps, reps, warm-up steps.
# Device-time estimates (4 conditions × reps cold processes; each ~5 s start-up + random init at
# bf16 (about 0.6 s per billion parameters, from the committed batches) + a 4-step warm-up + the
# timed generation; the first process of a case also JIT-compiles CUDA kernels, ~1.5 min):
#   flux3-1024   134 ms/step (measured: /work/shared/research/turn3/h200-rerun/flux3-probe.json),
#                16 steps ~2.2 s; init ~3.5 s; 8 processes × ~13 s ~ 1.7 min + JIT   = ~3 min
#   qwen21-1024  ~0.2 s/step (estimated: 7.1B × 4096 tokens, text keys/values cached), 20 steps
#                ~4 s; init ~4.5 s; 8 processes × ~16 s ~ 2.1 min + JIT              = ~3.5 min
#   krea2-1024   ~0.35 s/step (estimated: 12.8B × 4100 tokens), 8 steps ~2.8 s; init ~8 s;
#                8 processes × ~18 s ~ 2.4 min + JIT                                = ~4 min
#   flux3-base-1024  ~0.28 s/step (two branches), 20 steps ~5.6 s; 8 × ~16 s        = ~3.5 min
# The three default cases: ~10.5 min of device time; keep REPS at 2 unless time is left.
plan() {
  case "$1" in
    flux3-1024) echo "flux3-image-klein 1024x1024 16 2 4" ;;
    qwen21-1024) echo "qwen-image-2.1 1024x1024 20 2 4" ;;
    krea2-1024) echo "krea-2 1024x1024 8 2 4" ;;
    flux3-base-1024) echo "flux3-image-klein-base 1024x1024 20 2 4" ;;
    *) echo "unknown case $1" >&2; return 1 ;;
  esac
}

{
  echo "issue29 batch: cases ${cases[*]}; weights $WEIGHTS, dtype $DTYPE; also-gate ${ALSO_GATE:-none}; $(date -u +%FT%TZ)"
  nvidia-smi -L 2>/dev/null || echo "no nvidia-smi (CPU dry run)"
  git log --oneline -1 2>/dev/null || true
  "$PY" -c "import mlx.core as mx, mflux; print('mlx', mx.__version__, mx.default_device())"
} | tee -a "$OUT/issue29-plan.txt"

for name in "${cases[@]}"; do
  read -r variant size steps reps warm <<<"$(plan "$name")"
  key=${name//-/_}
  steps=$(eval echo "\${STEPS_$key:-$steps}")
  reps=$(eval echo "\${REPS_$key:-$reps}")
  warm=$(eval echo "\${WARMUP_STEPS_$key:-$warm}")
  if [ "$TINY" = 1 ]; then size=64x64 steps=4 reps=1 warm=4; fi
  also=()
  [ -n "$ALSO_GATE" ] && also=(--also-gate "$ALSO_GATE")
  note="Timing only: random weights ($WEIGHTS size, $DTYPE) and a forced skip pattern (1 skipped after each computed step: TeaCache's from a constant gate polynomial${ALSO_GATE:+, the first-block probe's from its forced mode}), says nothing about image quality; $steps steps, $reps cold repetition(s), each after a $warm-step warm-up (issue #29 device batch; repetitions and warm-up steps chosen to fit the session's device time)"
  if [ -n "${RESUME_FROM:-}" ] && [ -d "$RESUME_FROM/$name.chunks" ] && [ ! -d "$OUT/$name.chunks" ]; then
    cp -r "$RESUME_FROM/$name.chunks" "$OUT/"
  fi
  echo "== $name: $variant $size, $steps steps, $reps reps, warm-up $warm steps" | tee -a "$OUT/issue29-plan.txt"
  started=$(date +%s)
  status=0
  "$PY" -m app bench --variant "$variant" --size "$size" --steps "$steps" --reps "$reps" \
    --warmup-steps "$warm" --random-weights "$WEIGHTS" --dtype "$DTYPE" --gate teacache \
    --forced-skips 1 "${also[@]}" --label "$note" --out "$OUT/$name.json" --quiet \
    >"$OUT/$name.stdout" 2>"$OUT/$name.stderr" || status=$?
  echo "== $name: exit $status after $(( $(date +%s) - started )) s" | tee -a "$OUT/issue29-plan.txt"
  tail -n 3 "$OUT/$name.stderr" || true
  [ -f "$OUT/$name.md" ] && sed -n '/^Speedup/p' "$OUT/$name.md"
done
ls -la "$OUT"
