#!/usr/bin/env bash
# Joins the four parts copied to /opt/mlxq by the earlier calls, checks and installs MLX CUDA.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd /opt/mlxq
cp "$here"/part_ad "$here"/cuda.sha256 "$here"/*.whl .
cat part_aa part_ab part_ac part_ad > "$(awk '{print $2}' cuda.sha256)"
sha256sum -c cuda.sha256
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /opt/mlxsite ./*.whl
PYTHONPATH=/opt/mlxsite python3 -c "import mlx.core as mx; print('mlx', mx.__version__, mx.default_device())"
