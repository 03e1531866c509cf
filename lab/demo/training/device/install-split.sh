#!/usr/bin/env bash
# Joins the four MLX CUDA wheel parts (three copied to /opt/mlxq earlier, part_ad here), checks
# and installs them with mflux and piexif into /opt/mlxsite.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p /opt/mlxq && cd /opt/mlxq
cp "$here"/part_ad "$here"/cuda.sha256 "$here"/*.whl .
cat part_aa part_ab part_ac part_ad > "$(awk '{print $2}' cuda.sha256)"
sha256sum -c cuda.sha256
rm -f part_a?
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /opt/mlxsite ./*.whl
PYTHONPATH=/opt/mlxsite python3 -c "import mlx.core as mx; print('mlx', mx.__version__, mx.default_device())"
