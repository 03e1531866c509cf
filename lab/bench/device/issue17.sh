#!/usr/bin/env bash
# Issue #17 on the lent H200: `teacache-studio bench` (vanilla mflux / gate off / gated, each
# repetition a cold subprocess) for FLUX.1 dev, FLUX.2 Klein 4B (1024² and 512²), Z-Image and
# Qwen-Image at their real dimensions with random weights, bfloat16, a forced skip pattern (one
# skip after every computed step: 9 of 20), first-generation (compile) time reported; beside
# TeaCache's gated condition, the first-block probe's (condition gated-firstblock, `bench
# --also-gate firstblock`: the same forced pattern from the probe's own forced mode, with the probe's
# work per step: its first block, the change and its host sync), so one run gives both gates'
# skipped step / computed step and measured / ideal (issue #28). Writes $OUT/<case>.json (+ .md,
# + .chunks/ with every run and its worker log) and $OUT/issue17-plan.txt.
#
# On the device (MLX CUDA installed as /work/shared/device/README.md says), from the repo root:
#   export PYTHONPATH=/opt/mlxsite:$PWD TEACACHE_GIT_COMMIT=<the commit the tree is at>
#   bash lab/bench/device/issue17.sh CASE...
# (the device's copy carries stale git metadata: every report records TEACACHE_GIT_COMMIT).
# Back here: `uv run python -m lab.bench.device_figures DIR` (DIR: $OUT as it came back) copies
# each report where the README's figures read it and regenerates them.
# Cases: flux2-1024 flux2-512 z-image-1024 flux1-1024 qwen-1024 (none given: all five), and
# profile-skip (lab/bench/device/profile_skip.py: the parts of a skipped step in isolation and
# inside mflux's loop, TeaCache and MagCache, FLUX.2 Klein 4B 1024² and 512², Z-Image 1024² with
# captions that pad alike (PROFILE_LONG_CAPTION=1 adds the row whose captions pad apart); writes
# $OUT/profile-skip.json, from which the README's profile tables render).
# Conditions run rep-outer in alternating direction (vanilla, gate_off, gated, gated-firstblock,
# then gated-firstblock, gated, gate_off, vanilla, ...), so no condition always runs right after
# another. ALSO_GATES (default "firstblock"; empty: TeaCache alone, as before #28) names the
# further gated conditions.
# Per-case overrides: REPS_<case> / STEPS_<case> / WARMUP_STEPS_<case> (case with - → _), e.g.
#   REPS_qwen_1024=1 STEPS_flux1_1024=10.
# Resume a case cut off by a call's time limit: carry its .chunks folder back in and set
#   RESUME_FROM=<folder holding CASE.chunks/>; finished runs are kept, the rest run.
# Dry run on the CPU (tiny random weights, 64², float32, 1 repetition, 8 steps, OUT defaulting to
# ./issue17-dry): TINY=1 bash lab/bench/device/issue17.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 TQDM_DISABLE=1
PY=${PYTHON:-python3}
TINY=${TINY:-0}
ALSO_GATES=${ALSO_GATES-firstblock}
if [ "$TINY" = 1 ]; then
  OUT=${OUT:-$PWD/issue17-dry}
  WEIGHTS=tiny DTYPE=float32
else
  OUT=${OUT:?set OUT (the device sets it)}
  WEIGHTS=full DTYPE=bfloat16
  export TEACACHE_STUDIO_NO_OPENBLAS=1
  : "${TEACACHE_GIT_COMMIT:?set TEACACHE_GIT_COMMIT to the commit the tree is at (the git metadata of the device copy is stale)}"
fi
mkdir -p "$OUT"
cases=("$@")
[ ${#cases[@]} -eq 0 ] && cases=(flux2-1024 flux2-512 z-image-1024 flux1-1024 qwen-1024)

# case -> variant, size, default steps, default reps, default warm-up steps.
# Device-time estimates (per-step figures from /work/shared/research/README.md and the committed
# FLUX.2 run; each process ~5 s start-up + random init (2.5 s for 4B, ~12 s for Qwen's 20B) + a
# 4-step warm-up + the timed generation; the first process of a case on a fresh machine also
# JIT-compiles CUDA kernels: 76 s for FLUX.2's first vanilla process last time):
#   flux2-1024   74 ms/step,  3 reps -> 9 processes ~ 2.8 min + JIT ~1.3 min  = ~4 min
#   flux2-512    ~25 ms/step, 3 reps -> 9 processes ~ 1.3 min                 = ~1.5 min
#   z-image-1024 256 ms/step (CFG), 3 reps -> 9 processes ~ 3.2 min + JIT     = ~3.5-4 min
#   flux1-1024   460 ms/step, 2 reps -> 6 processes ~ 2.1 min + JIT           = ~2.5 min
#   qwen-1024    1.2 s/step (measured), 2 reps -> 6 processes ~ 3.4 min + JIT  = ~4 min
#                (STEPS_qwen_1024=10: ~2.5 min)
# The probe's condition adds one process per repetition: about a third more per case. For issue
# #28's rows (FLUX.1 dev, Klein 4B, Z-Image, Qwen-Image at 1024²) within ~15 minutes of device
# time: `REPS_flux2_1024=2 REPS_qwen_1024=1 STEPS_qwen_1024=10 bash lab/bench/device/issue17.sh
# flux2-1024 z-image-1024 flux1-1024 qwen-1024` (the committed runs' spread across repetitions was
# within a few per cent, so two repetitions, and one for Qwen's 20B, keep the medians honest).
#   profile-skip 20 timed calls per part (PROFILE_CALLS); per row 4 generations of 12 steps
#                for each gate (TeaCache, MagCache), 3 rows; shells built 3 times
#                (~10 s each for Z-Image)                                          = ~2.5 min
# (The committed H200 runs: 18.5 s per FLUX.2 1024² process, 8.5 s at 512², 21 s Z-Image, 21 s
# FLUX.1 dev, 34 s Qwen-Image at 20 steps.)
plan() {
  case "$1" in
    flux2-1024) echo "flux2-klein-4b 1024x1024 20 3 4" ;;
    flux2-512) echo "flux2-klein-4b 512x512 20 3 4" ;;
    z-image-1024) echo "z-image 1024x1024 20 3 4" ;;
    flux1-1024) echo "flux1-dev 1024x1024 20 2 4" ;;
    qwen-1024) echo "qwen-image 1024x1024 20 2 4" ;;
    *) echo "unknown case $1" >&2; return 1 ;;
  esac
}

{
  echo "issue17 batch: cases ${cases[*]}; weights $WEIGHTS, dtype $DTYPE; $(date -u +%FT%TZ)"
  nvidia-smi -L 2>/dev/null || echo "no nvidia-smi (CPU dry run)"
  echo "commit ${TEACACHE_GIT_COMMIT:-$(git log --oneline -1 2>/dev/null || true)}"
  "$PY" -c "import mlx.core as mx, mflux; print('mlx', mx.__version__, mx.default_device())"
} | tee -a "$OUT/issue17-plan.txt"

for name in "${cases[@]}"; do
  if [ "$name" = profile-skip ]; then
    echo "== profile-skip" | tee -a "$OUT/issue17-plan.txt"
    started=$(date +%s)
    status=0
    TINY=$TINY "$PY" lab/bench/device/profile_skip.py "$OUT/profile-skip.json" \
      >"$OUT/profile-skip.stdout" 2>"$OUT/profile-skip.stderr" || status=$?
    echo "== profile-skip: exit $status after $(( $(date +%s) - started )) s" | tee -a "$OUT/issue17-plan.txt"
    grep -v "it/s\|s/it" "$OUT/profile-skip.stdout" || true
    tail -n 3 "$OUT/profile-skip.stderr" || true
    continue
  fi
  read -r variant size steps reps warm <<<"$(plan "$name")"
  key=${name//-/_}
  steps=$(eval echo "\${STEPS_$key:-$steps}")
  reps=$(eval echo "\${REPS_$key:-$reps}")
  warm=$(eval echo "\${WARMUP_STEPS_$key:-$warm}")
  # 8 steps: past the probe's 4-step warm-up, so its forced skips are timed too
  if [ "$TINY" = 1 ]; then size=64x64 steps=8 reps=1 warm=4; fi
  also=()
  for gate in $ALSO_GATES; do also+=(--also-gate "$gate"); done
  note="Timing only: random weights ($WEIGHTS size, $DTYPE) and a forced skip pattern (1 skipped after each computed step, from a constant gate polynomial; the first-block probe's from its own forced mode), says nothing about image quality; $steps steps, $reps cold repetition(s), each after a $warm-step warm-up (issue #17/#28 device batch; repetitions and warm-up steps chosen to fit the session's device time)"
  if [ -n "${RESUME_FROM:-}" ] && [ -d "$RESUME_FROM/$name.chunks" ] && [ ! -d "$OUT/$name.chunks" ]; then
    cp -r "$RESUME_FROM/$name.chunks" "$OUT/"
  fi
  echo "== $name: $variant $size, $steps steps, $reps reps, warm-up $warm steps" | tee -a "$OUT/issue17-plan.txt"
  started=$(date +%s)
  status=0
  "$PY" -m app bench --variant "$variant" --size "$size" --steps "$steps" --reps "$reps" \
    --warmup-steps "$warm" --random-weights "$WEIGHTS" --dtype "$DTYPE" --forced-skips 1 \
    ${also[@]+"${also[@]}"} --label "$note" --out "$OUT/$name.json" --quiet \
    >"$OUT/$name.stdout" 2>"$OUT/$name.stderr" || status=$?
  echo "== $name: exit $status after $(( $(date +%s) - started )) s" | tee -a "$OUT/issue17-plan.txt"
  tail -n 3 "$OUT/$name.stderr" || true
  [ -f "$OUT/$name.md" ] && sed -n '/^Speedup/p;/^gated (/p' "$OUT/$name.md"
done
ls -la "$OUT"
