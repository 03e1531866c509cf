#!/usr/bin/env bash
# Run 7 (nvidia-h200-x2), written before it ran: GPU 0 continues the shipped demo (run 6b) on the
# tilted-star data and distils its turbo with the long guided recipe (E); GPU 1 distils an
# on-policy turbo from the shipped demo, otherwise exactly as 6c (F), to measure that one change.
# Needs the MLX CUDA wheel parts in /opt/mlxq (device calls 1-3) and .devq/4 carried (install.sh).
set -euo pipefail
bash .devq/4/install.sh
export PYTHONPATH=/opt/mlxsite:$PWD PYTHONUNBUFFERED=1 TQDM_DISABLE=1 TEACACHE_STUDIO_NO_OPENBLAS=1
mkdir -p /opt/cont && cp resources/demo/codec.safetensors resources/demo/demo.safetensors /opt/cont/
nvidia-smi -L
common=(--codec /opt/cont/codec.safetensors --init-from /opt/cont/demo.safetensors
  --turbo-guidance 3 --turbo-steps 20000 --turbo-lr 2e-4)
CUDA_VISIBLE_DEVICES=0 setsid nohup python3 -m app.demo.train all --work /opt/e --out /opt/e/out \
  "${common[@]}" --prerender --demo-seconds "${E_DEMO_SECONDS:-840}" --workers 16 --star-weight 2 \
  --lr 3e-4 --turbo-seconds 300 >/opt/e.log 2>&1 </dev/null &
CUDA_VISIBLE_DEVICES=1 setsid nohup python3 -m app.demo.train all --work /opt/f --out /opt/f/out \
  "${common[@]}" --demo-seconds 0 --pool 200000 --workers 12 --turbo-seconds 330 \
  --turbo-on-policy 0.5 --turbo-refresh 1000 --turbo-refresh-samples 8192 >/opt/f.log 2>&1 </dev/null &
sleep "${FIRST_WAIT:-530}"
tail -n 4 /opt/e.log /opt/f.log
