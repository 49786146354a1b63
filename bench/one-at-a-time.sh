#!/usr/bin/env bash
# A lone HTTP source that serves one connection at a time (bench/one-at-a-time/serve.py, a
# single-threaded Python server with keep-alive and ranges): the sessions hydra opens ahead
# and its search's second connection wait in the server's backlog. Each run fetches a random
# 20 MB object with `hydra get --no-host-memory URL -o FILE`, straight over loopback and
# through a faultnet link of 4 MB/s and 10 ms each way (one proxy for all runs), compares the
# output with the object byte for byte and prints the wall time.
#
# Usage: bash bench/one-at-a-time.sh [RUNS]   (default 4)
# Environment: HYDRA=path to the binary (default: target/release/hydra, built unless
# NO_BUILD=1). Loopback only; the server and the proxy take ports the kernel picks.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
RUNS=${1:-4}
if [ "${NO_BUILD:-0}" != 1 ]; then
  cargo build -q --release -p hydra-cli -p faultnet
fi
BIN=${CARGO_TARGET_DIR:-$REPO/target}/release
HYDRA=${HYDRA:-$BIN/hydra}
T=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$T"' EXIT

# The first match of PATTERN in FILE, waiting at most 10 s.
first() { # FILE PATTERN
  local k
  for k in $(seq 1 100); do
    if grep -qE "$2" "$1" 2>/dev/null; then grep -oE "$2" "$1" | head -1; return 0; fi
    sleep 0.1
  done
  echo "one-at-a-time.sh: no '$2' in $1 after 10 s:" >&2; cat "$1" >&2; exit 1
}

head -c 20000000 /dev/urandom > "$T/object"
python3 "$REPO/bench/one-at-a-time/serve.py" "$T/object" > "$T/serve" 2>&1 &
ORIGIN=$(first "$T/serve" '127\.0\.0\.1:[0-9]+')
"$BIN/faultnet" proxy --listen 127.0.0.1:0 --upstream "$ORIGIN" --bandwidth 4MB/s \
  --latency 10ms --seed 1 > "$T/proxy" 2>&1 &
LINK=$(first "$T/proxy" 'listening on 127\.0\.0\.1:[0-9]+' | cut -d' ' -f3)

echo "hydra: $("$HYDRA" --version | head -1)"
echo "path       run  wall s  bytes"
for r in $(seq 1 "$RUNS"); do
  for path in loopback link; do
    addr=$ORIGIN; [ "$path" = link ] && addr=$LINK
    rm -f "$T/out"
    start=$EPOCHREALTIME
    rc=0
    timeout 300 "$HYDRA" get -q --no-host-memory "http://$addr/object" -o "$T/out" || rc=$?
    end=$EPOCHREALTIME
    same=differ; cmp -s "$T/out" "$T/object" && same=exact
    [ "$rc" = 0 ] || same="exit $rc"
    printf '%-10s %3d  %6.2f  %s\n' "$path" "$r" "$(awk "BEGIN { print $end - $start }")" "$same"
  done
done
