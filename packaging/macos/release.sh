#!/usr/bin/env bash
# Cut a macOS release: build, verify, sign, notarise and staple the app, re-verify it under the
# hardened runtime, then make, sign, notarise and staple the DMG.
#
#   TEACACHE_SIGN_IDENTITY="Developer ID Application: Jane Doe (ABCDE12345)" \
#   TEACACHE_TEAM_ID=ABCDE12345 TEACACHE_NOTARY_PROFILE=teacache-notary \
#     packaging/macos/release.sh [verify_bundle.py options, e.g. --allow-cpu on a VM]
#
# Optional: TEACACHE_KEYCHAIN, TEACACHE_PYTHON, TEACACHE_BUILD_NUMBER (see the other scripts).
# Everything it needs is checked before the build starts.
set -euo pipefail
# shellcheck source=packaging/macos/common.sh
source "$(dirname "$0")/common.sh"

need_macos "the whole release runs on a Mac"
need_arm64
need_env TEACACHE_SIGN_IDENTITY \
  "your 'Developer ID Application: NAME (TEAMID)' identity (list: security find-identity -v -p codesigning)"
need_env TEACACHE_TEAM_ID "your 10-character Apple Developer Team ID"
need_env TEACACHE_NOTARY_PROFILE \
  "the keychain profile made by 'xcrun notarytool store-credentials PROFILE ...'"
need_tool uv "install it: brew install uv (or pip install uv)"
need_tool xcrun "install the Xcode command line tools: xcode-select --install"
need_tool codesign "install the Xcode command line tools: xcode-select --install"
preflight
if [[ "$TEACACHE_SIGN_IDENTITY" != *"($TEACACHE_TEAM_ID)" ]]; then
  die "TEACACHE_SIGN_IDENTITY '$TEACACHE_SIGN_IDENTITY' does not belong to team $TEACACHE_TEAM_ID"
fi
if [[ -n "$(git -C "$repo_root" status --porcelain --untracked-files=no)" ]]; then
  die "the work tree has uncommitted changes: release from a clean checkout of the tag"
fi

here="$(dirname "$0")"
started=$SECONDS
"$here/build.sh" "$@"
app="$(default_app)"
"$here/sign.sh" "$app"
"$here/notarize.sh" "$app"
# The signed app runs under the hardened runtime with our entitlements: check it again.
"$build_venv/bin/python" "$repo_root/packaging/verify_bundle.py" "$app" "$@"
dmg="$("$here/make_dmg.sh" "$app" | tail -n 1)"
"$here/notarize.sh" "$dmg"

note "release ready after $((SECONDS - started)) s:"
shasum -a 256 "$dmg"
