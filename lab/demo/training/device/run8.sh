#!/usr/bin/env bash
# Run 8 (nvidia-h200-x2). GPU 0: K, the shipped demo (run 7g, 8 single blocks) continued 780 s,
# then its turbo by run 7h's on-policy recipe with a longer budget. GPU 1: L, the same
# continuation with star scenes drawn 3x as often (stars are the weakest shape: 25/42 on 7g),
# then its turbo with three quarters of each batch on the student's own states (7h used half).
# Needs the MLX CUDA wheel parts in /opt/mlxq (copied by earlier device calls: training README,
# "Next run") and .devq/4 carried (install.sh).
set -euo pipefail
bash .devq/4/install.sh
export PYTHONPATH=/opt/mlxsite:$PWD PYTHONUNBUFFERED=1 TQDM_DISABLE=1 TEACACHE_STUDIO_NO_OPENBLAS=1
mkdir -p /opt/cont && cp resources/demo/codec.safetensors resources/demo/demo.safetensors /opt/cont/
nvidia-smi -L
common=(--codec /opt/cont/codec.safetensors --init-from /opt/cont/demo.safetensors
  --turbo-guidance 3 --turbo-lr 2e-4 --turbo-refresh 1000 --turbo-refresh-samples 8192)
CUDA_VISIBLE_DEVICES=0 setsid nohup python3 -m lab.demo.train all --work /opt/k --out /opt/k/out \
  "${common[@]}" --prerender --demo-seconds "${DEMO_SECONDS:-780}" --star-weight 2 --lr 3e-4 \
  --workers 16 --turbo-steps 20000 --turbo-seconds 300 --turbo-on-policy 0.5 \
  >/opt/k.log 2>&1 </dev/null &
CUDA_VISIBLE_DEVICES=1 setsid nohup python3 -m lab.demo.train all --work /opt/l --out /opt/l/out \
  "${common[@]}" --prerender --demo-seconds "${DEMO_SECONDS:-780}" --star-weight 3 --lr 3e-4 \
  --workers 14 --turbo-steps 20000 --turbo-seconds 300 --turbo-on-policy 0.75 \
  >/opt/l.log 2>&1 </dev/null &
sleep "${FIRST_WAIT:-500}"
tail -n 4 /opt/k.log /opt/l.log
