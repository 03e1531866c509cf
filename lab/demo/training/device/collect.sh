#!/usr/bin/env bash
# Wait (up to WAIT s) for the run in /opt/NAME to end, then copy its results to $OUT: both
# variants' transformer and text-encoder halves (files over 15 MiB split into parts, since one
# returned file may hold at most 16 MiB; join them with cat before install-weights) and one
# tarball of the report, the sample sheet and the log. Run 6 used it with NAME a, b, c, d.
name=$1
wait=${2:-560}
# A bracketed first letter: the pattern must not match a command line that merely contains it
# (run 7's watcher waited on itself that way).
running="work /opt/[${name:0:1}]${name:1} "
for _ in $(seq 1 $((wait / 10))); do pgrep -f "$running" >/dev/null || break; sleep 10; done
tail -n 25 "/opt/$name.log"
for log in /opt/*.log; do [ "$log" = "/opt/$name.log" ] || tail -n 3 "$log"; done
if ! pgrep -f "$running" >/dev/null; then
  cd "/opt/$name/out" || exit 1
  for file in demo*-*.safetensors; do
    if [ "$(stat -c %s "$file")" -gt $((15 * 1024 * 1024)) ]; then
      split -b 15M "$file" "$OUT/$file.part_"
    else
      cp "$file" "$OUT"/
    fi
  done
  cp "/opt/$name.log" train.log
  files=(report.json train.log)
  [ -f samples.png ] && files+=(samples.png)
  tar czf "$OUT/$name-results.tgz" "${files[@]}"
  ls -la "$OUT"
fi
