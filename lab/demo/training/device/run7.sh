#!/usr/bin/env bash
# Run 7 (nvidia-h200-x2), written before it ran. GPU 0: G, the shipped demo (run 6b) grown from 4
# to 8 single-stream blocks (the added ones start as identities) and trained on, then its turbo by
# 6c's recipe. GPU 1, side by side: E, the same-size control (the shipped demo continued as long,
# no turbo), and F, an on-policy turbo from the shipped demo, step-matched to 6c (11,558 steps).
# Needs the MLX CUDA wheel parts in /opt/mlxq (device calls 1-3) and .devq/4 carried (install.sh).
set -euo pipefail
bash .devq/4/install.sh
export PYTHONPATH=/opt/mlxsite:$PWD PYTHONUNBUFFERED=1 TQDM_DISABLE=1 TEACACHE_STUDIO_NO_OPENBLAS=1
mkdir -p /opt/cont && cp resources/demo/codec.safetensors resources/demo/demo.safetensors /opt/cont/
nvidia-smi -L
demo_seconds=${DEMO_SECONDS:-780}
common=(--codec /opt/cont/codec.safetensors --init-from /opt/cont/demo.safetensors
  --turbo-guidance 3 --turbo-lr 2e-4)
grow=(--prerender --demo-seconds "$demo_seconds" --star-weight 2 --lr 3e-4)
CUDA_VISIBLE_DEVICES=0 setsid nohup python3 -m lab.demo.train all --work /opt/g --out /opt/g/out \
  "${common[@]}" "${grow[@]}" --single-layers 8 --workers 12 --turbo-steps 20000 \
  --turbo-seconds "${G_TURBO_SECONDS:-270}" >/opt/g.log 2>&1 </dev/null &
CUDA_VISIBLE_DEVICES=1 setsid nohup python3 -m lab.demo.train all --work /opt/e --out /opt/e/out \
  "${common[@]}" "${grow[@]}" --workers 8 --turbo-steps 0 >/opt/e.log 2>&1 </dev/null &
CUDA_VISIBLE_DEVICES=1 setsid nohup python3 -m lab.demo.train all --work /opt/f --out /opt/f/out \
  "${common[@]}" --demo-seconds 0 --pool 200000 --workers 8 --turbo-steps 11558 \
  --turbo-seconds 700 --turbo-on-policy 0.5 --turbo-refresh 1000 --turbo-refresh-samples 8192 \
  >/opt/f.log 2>&1 </dev/null &
sleep "${FIRST_WAIT:-540}"
tail -n 4 /opt/g.log /opt/e.log /opt/f.log
