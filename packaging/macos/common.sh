# shellcheck shell=bash
# shellcheck disable=SC2034  # variables here are read by the scripts that source this file
# Shared helpers for packaging/macos/*.sh. Source it, don't run it. Written for the bash 3.2
# that macOS ships as /bin/bash (no mapfile, no namerefs, empty arrays guarded).
#
# Every script first collects everything it needs (macOS, tools, environment variables) and
# reports all that is missing at once, before doing any work.

script_name="$(basename "$0")"
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build_venv="$repo_root/build/venv-macos-arm64"
problems=()

on_macos() { [[ "$(uname -s)" == Darwin ]]; }

need_macos() {
  on_macos || problems+=("needs macOS ($1); this machine runs $(uname -s)")
}

need_arm64() {
  if on_macos && [[ "$(uname -m)" != arm64 ]]; then
    problems+=("needs an Apple silicon Mac: MLX ships arm64 wheels only (uname -m: $(uname -m))")
  fi
}

need_tool() {  # need_tool NAME HOW-TO-GET-IT; checked on macOS only (elsewhere need_macos says it)
  if on_macos && ! command -v "$1" >/dev/null 2>&1; then
    problems+=("$1 not found: $2")
  fi
}

need_env() {  # need_env NAME WHAT-IT-IS
  [[ -n "${!1:-}" ]] || problems+=("set $1: $2")
}

preflight() {
  if ((${#problems[@]})); then
    echo "$script_name: cannot run:" >&2
    printf '  - %s\n' "${problems[@]}" >&2
    exit 1
  fi
}

die() {
  echo "$script_name: $*" >&2
  exit 1
}

note() {
  echo "$script_name: $*"
}

# One value from packaging/bundle_config.py (app-name, version, min-macos, ...). It needs
# Python 3.11+ (tomllib): the build environment's, a python3 that is new enough, or one from uv.
config_value() {
  local python
  for python in "$build_venv/bin/python" python3; do
    if command -v "$python" >/dev/null 2>&1 && "$python" -c 'import tomllib' 2>/dev/null; then
      "$python" "$repo_root/packaging/bundle_config.py" "$1"
      return
    fi
  done
  uv run --no-project --python '>=3.11' python "$repo_root/packaging/bundle_config.py" "$1"
}

# Mach-O by its magic number (thin 64-bit, or universal), without relying on file(1).
is_macho() {
  case "$(od -An -tx1 -N4 "$1" 2>/dev/null | tr -d ' \n')" in
    cffaedfe | cafebabe | cafebabf) return 0 ;;
    *) return 1 ;;
  esac
}

default_app() {
  echo "$repo_root/dist/$(config_value app-name).app"
}

# codesign, notarytool and security search a keychain file instead of the default keychains
# when TEACACHE_KEYCHAIN is set (CI: a temporary keychain holding the Developer ID certificate).
# Expand as ${keychain_opt[@]+"${keychain_opt[@]}"}: macOS's bash 3.2 treats an empty array
# as unset under `set -u`.
keychain_opt=()
if [[ -n "${TEACACHE_KEYCHAIN:-}" ]]; then
  keychain_opt=(--keychain "$TEACACHE_KEYCHAIN")
fi
