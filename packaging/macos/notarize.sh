#!/usr/bin/env bash
# Notarise a signed .app or .dmg with Apple's notary service, staple the ticket, validate it.
#
#   TEACACHE_NOTARY_PROFILE=teacache-notary packaging/macos/notarize.sh PATH.app|PATH.dmg
#
# The profile holds the credentials in the keychain; create it once with
#   xcrun notarytool store-credentials teacache-notary \
#     --apple-id you@example.com --team-id ABCDE12345 --password <app-specific password>
# (or --key/--key-id/--issuer for an App Store Connect API key).
# Optional: TEACACHE_KEYCHAIN (the keychain file holding the profile, e.g. in CI),
#           TEACACHE_NOTARY_LOGS (where notary logs go; default build/notary).
#
# An .app is zipped with ditto (notarytool uploads zip, dmg and pkg files); the ticket is
# stapled to the .app itself. The notary log (JSON) is saved in build/notary even when
# notarisation succeeds: it lists warnings that become errors in later macOS releases.
set -euo pipefail
# shellcheck source=packaging/macos/common.sh
source "$(dirname "$0")/common.sh"

need_macos "xcrun notarytool and stapler"
need_env TEACACHE_NOTARY_PROFILE \
  "the keychain profile made by 'xcrun notarytool store-credentials PROFILE ...'"
need_tool xcrun "install the Xcode command line tools: xcode-select --install"
need_tool ditto "part of macOS"
need_tool plutil "part of macOS"
preflight

target="${1:-}"
[[ -n "$target" ]] || die "usage: notarize.sh PATH.app|PATH.dmg"
[[ -e "$target" ]] || die "no such file: $target"
target="$(cd "$(dirname "$target")" && pwd)/$(basename "$target")"
codesign --verify --strict "$target" 2>/dev/null ||
  die "$target is not validly signed: run packaging/macos/sign.sh (and make_dmg.sh) first"

logs="${TEACACHE_NOTARY_LOGS:-$repo_root/build/notary}"
mkdir -p "$logs"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

case "$target" in
  *.app)
    upload="$scratch/$(basename "$target" .app).zip"
    # --keepParent keeps the .app folder in the archive; --sequesterRsrc keeps metadata out
    # of the bundle, as Apple's notarisation guide recommends for ditto archives.
    ditto -c -k --sequesterRsrc --keepParent "$target" "$upload"
    assess=(spctl --assess --type execute --verbose=4 "$target")
    ;;
  *.dmg)
    upload="$target"
    assess=(spctl --assess --type open --context context:primary-signature --verbose=4 "$target")
    ;;
  *) die "notarise an .app or a .dmg, not $target" ;;
esac

profile=(--keychain-profile "$TEACACHE_NOTARY_PROFILE" ${keychain_opt[@]+"${keychain_opt[@]}"})
note "submitting $(basename "$upload") ($(du -h "$upload" | cut -f1)); waiting for the result"
started=$SECONDS
result="$(xcrun notarytool submit "$upload" "${profile[@]}" --wait --output-format json)" ||
  die "notarytool submit failed: $result"
submission="$(plutil -extract id raw -o - - <<<"$result")"
status="$(plutil -extract status raw -o - - <<<"$result")"
log_file="$logs/$(basename "$target")-$submission.json"
xcrun notarytool log "$submission" "${profile[@]}" "$log_file" >/dev/null ||
  note "could not fetch the notary log for $submission"
note "submission $submission: $status after $((SECONDS - started)) s (log: $log_file)"
if [[ "$status" != "Accepted" ]]; then
  die "notarisation $status; the log lists each problem: $log_file"
fi

xcrun stapler staple "$target"
xcrun stapler validate "$target"
"${assess[@]}"
note "notarised, stapled and accepted by Gatekeeper: $target"
