#!/usr/bin/env bash
# Wait (up to WAIT s) for the run in /opt/NAME to end, then copy its results to $OUT: both
# variants' transformer and text-encoder halves, report, sample sheet and a tarball of the log
# (at most 8 files, each under the 16 MiB transfer limit). Run 6 used it with NAME a, b, c, d.
name=$1
wait=${2:-560}
for _ in $(seq 1 $((wait / 10))); do pgrep -f "work /opt/$name " >/dev/null || break; sleep 10; done
tail -n 25 "/opt/$name.log"
for log in /opt/*.log; do [ "$log" = "/opt/$name.log" ] || tail -n 3 "$log"; done
if ! pgrep -f "work /opt/$name " >/dev/null; then
  cd "/opt/$name/out" && cp demo*-*.safetensors report.json samples.png "$OUT"/ 2>/dev/null
  tar czf "$OUT/$name-logs.tgz" -C /opt "$name.log"
  ls -la "$OUT"
fi
