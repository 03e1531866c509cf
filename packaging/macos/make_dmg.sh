#!/usr/bin/env bash
# Put the app into a compressed disk image with a link to /Applications, and sign the image.
#
#   packaging/macos/make_dmg.sh ["dist/TeaCache Studio.app"]
#   -> dist/TeaCache-Studio-<version>-macOS-arm64.dmg (its path is the last line printed)
#
# Signs the image when TEACACHE_SIGN_IDENTITY is set (release.sh sets it); notarise it after.
# Uses hdiutil, which every Mac has; ULMO (LZMA) needs macOS 10.15+ to open, below our minimum.
set -euo pipefail
# shellcheck source=packaging/macos/common.sh
source "$(dirname "$0")/common.sh"

need_macos "hdiutil"
need_tool hdiutil "part of macOS"
need_tool ditto "part of macOS"
preflight

app="${1:-$(default_app)}"
[[ -d "$app/Contents/MacOS" ]] || die "no app bundle at $app: run packaging/macos/build.sh first"
app_name="$(config_value app-name)"
version="$(config_value version)"
arch="$(config_value arch)"
dmg="$repo_root/dist/${app_name// /-}-$version-macOS-$arch.dmg"

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
# ditto keeps symlinks, permissions and the code signature (cp -R would follow links).
ditto "$app" "$stage/$(basename "$app")"
ln -s /Applications "$stage/Applications"

rm -f "$dmg"
# hdiutil sometimes fails with "Resource busy" when Spotlight touches the fresh image.
for attempt in 1 2 3 4 5; do
  if hdiutil create -volname "$app_name $version" -srcfolder "$stage" -fs HFS+ \
    -format ULMO -ov "$dmg"; then
    break
  fi
  ((attempt < 5)) || die "hdiutil create failed $attempt times"
  note "hdiutil create failed (attempt $attempt); retrying in 5 s"
  sleep 5
done

if [[ -n "${TEACACHE_SIGN_IDENTITY:-}" ]]; then
  codesign --force --timestamp --sign "$TEACACHE_SIGN_IDENTITY" \
    ${keychain_opt[@]+"${keychain_opt[@]}"} "$dmg"
  codesign --verify --strict --verbose=2 "$dmg"
else
  note "TEACACHE_SIGN_IDENTITY is not set: the image is unsigned (fine for testing only)"
fi
hdiutil verify "$dmg" >/dev/null
note "$(du -h "$dmg" | cut -f1) disk image:"
echo "$dmg"
