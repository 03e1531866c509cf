#!/usr/bin/env bash
# Build "dist/TeaCache Studio.app" (arm64, macOS 14+, unsigned) and verify it.
#
#   packaging/macos/build.sh [verify_bundle.py options: --skip-smoke-test, --allow-cpu]
#
# Wheels are installed for MACOSX_DEPLOYMENT_TARGET = LSMinimumSystemVersion into a separate
# environment (build/venv-macos-arm64): on a newer host, uv would otherwise take mlx-metal's
# macosx_26_0 wheel, whose mlx.metallib macOS 14 and 15 refuse to load.
# Optional: TEACACHE_PYTHON (the interpreter uv builds the environment with, e.g. 3.12),
# TEACACHE_BUILD_NUMBER (CFBundleVersion; defaults to the version).
set -euo pipefail
# shellcheck source=packaging/macos/common.sh
source "$(dirname "$0")/common.sh"

need_macos "PyInstaller builds a .app for the platform it runs on"
need_arm64
need_tool uv "install it: brew install uv (or pip install uv)"
need_tool xcrun "install the Xcode command line tools: xcode-select --install"
preflight

cd "$repo_root"
started=$SECONDS
MACOSX_DEPLOYMENT_TARGET="$(config_value min-macos)"
export MACOSX_DEPLOYMENT_TARGET
note "installing arm64 wheels for macOS $MACOSX_DEPLOYMENT_TARGET into $build_venv"
python_args=()
if [[ -n "${TEACACHE_PYTHON:-}" ]]; then
  python_args=(--python "$TEACACHE_PYTHON")
fi
UV_PROJECT_ENVIRONMENT="$build_venv" uv sync --locked --no-dev --group packaging \
  --python-platform aarch64-apple-darwin ${python_args[@]+"${python_args[@]}"}

work="$repo_root/build/pyinstaller-macos"
app="$(default_app)"
rm -rf "$app"
"$build_venv/bin/pyinstaller" --noconfirm --clean --log-level WARN \
  --distpath "$repo_root/dist" --workpath "$work" packaging/teacache-studio.spec
[[ -d "$app" ]] || die "PyInstaller finished but $app is missing"
note "PyInstaller took $((SECONDS - started)) s; $(du -sh "$app" | cut -f1) in $app"

"$build_venv/bin/python" packaging/check_analysis.py --from-workpath "$work"
"$build_venv/bin/python" packaging/verify_bundle.py "$app" "$@"
note "built and verified $app in $((SECONDS - started)) s"
