#!/usr/bin/env bash
# Build the Linux onedir bundle with PyInstaller, then check it: what the analysis collected
# (check_analysis.py), the layout, a real MLX operation in the frozen self-check, and the frozen
# app's --smoke-test (main window offscreen, one demo generation) (verify_bundle.py).
#
#   packaging/linux/build_and_smoke.sh [verify_bundle.py options, e.g. --skip-smoke-test]
#
# Environment: TEACACHE_DIST (default dist), TEACACHE_WORK (default build/pyinstaller).
# Needs uv; installs the `packaging` dependency group (PyInstaller) into the project venv.
set -euo pipefail

cd "$(dirname "$0")/../.."
dist="${TEACACHE_DIST:-dist}"
work="${TEACACHE_WORK:-build/pyinstaller}"

if ! command -v uv >/dev/null 2>&1; then
  echo "build_and_smoke: uv is required (pip install uv)" >&2
  exit 2
fi
case "$(uname -s)" in
  Linux) ;;
  *) echo "build_and_smoke: this script builds the Linux bundle; on macOS use packaging/macos/build.sh" >&2
     exit 2 ;;
esac

executable="$(uv run --locked --group packaging python packaging/bundle_config.py executable)"
started=$SECONDS
uv run --locked --group packaging pyinstaller --noconfirm --clean --log-level WARN \
  --distpath "$dist" --workpath "$work" packaging/teacache-studio.spec
built=$SECONDS
echo "build_and_smoke: PyInstaller took $((built - started)) s"

# What the analysis collected (required modules present, excluded ones absent), read from the
# work folder of this build rather than by a second analysis.
uv run --locked --group packaging python packaging/check_analysis.py --from-workpath "$work"

bundle="$dist/$executable"
du -sh "$bundle"
uv run --locked --group packaging python packaging/verify_bundle.py "$bundle" "$@"
echo "build_and_smoke: verification took $((SECONDS - built)) s; $((SECONDS - started)) s in all"
