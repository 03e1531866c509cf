#!/usr/bin/env bash
# Run 9 (nvidia-h200-x2): two longer on-policy turbos of the shipped run-8k demo (its turbo had
# 300 s): A refreshes the student's own states every 1,000 steps as 8k did, B every 500.
# Needs the MLX CUDA wheels installed (.devq/5/install.sh, an earlier call) and the demo weights.
set -euo pipefail
export PYTHONPATH=/opt/mlxsite:$PWD PYTHONUNBUFFERED=1 TQDM_DISABLE=1 TEACACHE_STUDIO_NO_OPENBLAS=1
mkdir -p /opt/cont && cp resources/demo/codec.safetensors resources/demo/demo.safetensors /opt/cont/
nvidia-smi -L
common=(--codec /opt/cont/codec.safetensors --init-from /opt/cont/demo.safetensors
  --demo-seconds 0 --pool 200000 --workers 14 --turbo-guidance 3 --turbo-lr 2e-4
  --turbo-steps 40000 --turbo-seconds "${TURBO_SECONDS:-600}" --turbo-on-policy 0.5
  --turbo-refresh-samples 8192)
CUDA_VISIBLE_DEVICES=0 setsid nohup python3 -m lab.demo.train all --work /opt/a --out /opt/a/out \
  "${common[@]}" --turbo-refresh 1000 >/opt/a.log 2>&1 </dev/null &
CUDA_VISIBLE_DEVICES=1 setsid nohup python3 -m lab.demo.train all --work /opt/b --out /opt/b/out \
  "${common[@]}" --turbo-refresh 500 >/opt/b.log 2>&1 </dev/null &
sleep "${FIRST_WAIT:-500}"
tail -n 4 /opt/a.log /opt/b.log
