#!/usr/bin/env bash
# Wait (up to WAIT s) for run NAME (/opt/NAME) to end, then copy its results to $OUT.
name=$1; wait=${2:-560}
for i in $(seq 1 $((wait / 10))); do pgrep -f "work /opt/$name " >/dev/null || break; sleep 10; done
tail -n 25 /opt/$name.log
other=$([ "$name" = a ] && echo b || echo a); tail -n 3 /opt/$other.log
if ! pgrep -f "work /opt/$name " >/dev/null; then
  cd /opt/$name/out && cp demo*-*.safetensors report.json samples.png $OUT/ 2>/dev/null
  tar czf $OUT/$name-logs.tgz -C /opt $name.log
  ls -la $OUT
fi
