#!/usr/bin/env bash
# Sign the app inside-out with a Developer ID, the hardened runtime and secure timestamps, then
# verify the result as strictly as notarisation will.
#
#   TEACACHE_SIGN_IDENTITY="Developer ID Application: Jane Doe (ABCDE12345)" \
#     packaging/macos/sign.sh ["dist/TeaCache Studio.app"]
#
# Optional: TEACACHE_TEAM_ID (the signature's TeamIdentifier must match it),
#           TEACACHE_KEYCHAIN (a keychain file holding the identity, e.g. a temporary CI one).
#
# Order (Apple TN2206, "sign from the inside out"): every loose Mach-O file (dylibs, Python
# extensions, Qt plugins; no entitlements, libraries inherit their host's), then nested
# .framework bundles deepest first, then the executables in Contents/MacOS with the
# entitlements, then the .app itself. Never `codesign --deep` to sign: it applies one set of
# options to everything and skips code outside the standard locations.
set -euo pipefail
# shellcheck source=packaging/macos/common.sh
source "$(dirname "$0")/common.sh"

need_macos "codesign"
need_env TEACACHE_SIGN_IDENTITY \
  "your 'Developer ID Application: NAME (TEAMID)' identity (list: security find-identity -v -p codesigning)"
need_tool codesign "install the Xcode command line tools: xcode-select --install"
preflight

app="${1:-$(default_app)}"
entitlements="$repo_root/packaging/entitlements.plist"
[[ -d "$app/Contents/MacOS" ]] || die "no app bundle at $app: run packaging/macos/build.sh first"
[[ -f "$entitlements" ]] || die "missing $entitlements"
if [[ "$TEACACHE_SIGN_IDENTITY" != "Developer ID Application:"* ]]; then
  die "TEACACHE_SIGN_IDENTITY must be a 'Developer ID Application: ...' identity (notarisation accepts no other); got '$TEACACHE_SIGN_IDENTITY'"
fi
identities="$(security find-identity -v -p codesigning ${TEACACHE_KEYCHAIN:+"$TEACACHE_KEYCHAIN"})"
if ! grep -qF "\"$TEACACHE_SIGN_IDENTITY\"" <<<"$identities"; then
  die "identity '$TEACACHE_SIGN_IDENTITY' not found or not valid; security find-identity lists:
$identities"
fi

sign() {  # sign [extra codesign options] PATH
  codesign --force --timestamp --options runtime --sign "$TEACACHE_SIGN_IDENTITY" \
    ${keychain_opt[@]+"${keychain_opt[@]}"} "$@"
}

# Deepest paths first, so nested code is signed before whatever contains it.
deepest_first() {
  awk -F/ '{ print NF "\t" $0 }' | sort -rn | cut -f2-
}

started=$SECONDS
# Finder metadata and resource forks make codesign fail ("resource fork, Finder information,
# or similar detritus not allowed").
xattr -cr "$app"

count=0
while IFS= read -r path; do
  if is_macho "$path"; then
    sign "$path"
    count=$((count + 1))
  fi
done < <(find "$app/Contents" -type f ! -path "$app/Contents/MacOS/*" | deepest_first)
note "signed $count nested Mach-O files"

while IFS= read -r framework; do
  sign "$framework"
  note "signed ${framework#"$app/"}"
done < <(find "$app/Contents" -type d -name '*.framework' | deepest_first)

for program in "$app/Contents/MacOS/"*; do
  if [[ -f "$program" && ! -L "$program" ]] && is_macho "$program"; then
    sign --entitlements "$entitlements" "$program"
    note "signed ${program#"$app/"} with the entitlements"
  fi
done

sign --entitlements "$entitlements" "$app"
note "signed $app in $((SECONDS - started)) s; verifying"

# The checks notarisation applies, here and now rather than after an upload.
codesign --verify --deep --strict --verbose=2 "$app"
details="$(codesign --display --verbose=4 "$app" 2>&1)"
grep -q 'flags=.*runtime' <<<"$details" || die "the app's signature lacks the hardened runtime"
grep -q '^Timestamp=' <<<"$details" || die "the app's signature has no secure timestamp"
if [[ -n "${TEACACHE_TEAM_ID:-}" ]]; then
  grep -qx "TeamIdentifier=$TEACACHE_TEAM_ID" <<<"$details" ||
    die "signed by team $(grep '^TeamIdentifier=' <<<"$details"), expected $TEACACHE_TEAM_ID"
fi
unsigned=0
while IFS= read -r path; do
  if is_macho "$path"; then
    info="$(codesign --display --verbose=4 "$path" 2>&1 || true)"
    if ! grep -q 'flags=.*runtime' <<<"$info" || ! grep -q '^Timestamp=' <<<"$info"; then
      echo "  not signed for notarisation: ${path#"$app/"}" >&2
      unsigned=$((unsigned + 1))
    fi
  fi
done < <(find "$app/Contents" -type f)
((unsigned == 0)) || die "$unsigned Mach-O file(s) lack the hardened runtime or a timestamp"
granted="$(codesign --display --entitlements - "$app/Contents/MacOS/$(config_value executable)" 2>&1)"
grep -q 'com.apple.security.cs.disable-library-validation' <<<"$granted" ||
  die "the executable does not carry packaging/entitlements.plist"
note "signature verified (deep, strict, hardened runtime, timestamps)"
