#!/usr/bin/env bash
# Run 6 (x2): GPU 0 re-distils demo-turbo from the shipped demo with a CFG-3 teacher (A);
# GPU 1 continues the shipped demo on the tilted-star data, then distils its turbo at CFG 3 (B).
set -euo pipefail
bash .devq/4/install.sh
mkdir -p /opt/cont && cp resources/demo/codec.safetensors resources/demo/demo.safetensors /opt/cont/
export PYTHONPATH=/opt/mlxsite:$PWD PYTHONUNBUFFERED=1 TQDM_DISABLE=1 TEACACHE_STUDIO_NO_OPENBLAS=1
nvidia-smi -L
common="--codec /opt/cont/codec.safetensors --init-from /opt/cont/demo.safetensors --turbo-guidance 3"
CUDA_VISIBLE_DEVICES=0 setsid nohup python3 -m lab.demo.train all --work /opt/a --out /opt/a/out $common --demo-seconds 0 --pool 200000 --workers 12 --turbo-seconds ${A_TURBO_SECONDS:-300} >/opt/a.log 2>&1 < /dev/null &
CUDA_VISIBLE_DEVICES=1 setsid nohup python3 -m lab.demo.train all --work /opt/b --out /opt/b/out $common --prerender --demo-seconds ${B_DEMO_SECONDS:-660} --workers 16 --star-weight 2 --lr 3e-4 --compute float32 --turbo-seconds ${B_TURBO_SECONDS:-200} >/opt/b.log 2>&1 < /dev/null &
sleep ${FIRST_WAIT:-520}
tail -n 4 /opt/a.log /opt/b.log
