#!/usr/bin/env bash
# Three mirrors of one 64 MB object behind faultnet links of 6, 3 and 1 MB/s (20/30/40 ms
# each way), downloaded with `hydra get` from all three at once; prints hydra's summary and
# each link's byte count. Loopback only. Usage: bash bench/http-mirrors.sh [SIZE]
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE=${1:-64M}
cargo build -q --release -p hydra-cli -p faultnet
cargo build -q --release -p hydra-scheme-http --features origin --example serve
T=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$T"' EXIT
BIN=target/release
i=0
for spec in "6MB/s 20ms" "3MB/s 30ms" "1MB/s 40ms"; do
  set -- $spec
  port=$((28100 + i)); pport=$((28200 + i))
  $BIN/examples/serve "$SIZE" 5 $port > "$T/serve$i" &
  $BIN/faultnet proxy --listen 127.0.0.1:$pport --upstream 127.0.0.1:$port \
    --bandwidth "$1" --latency "$2" --seed 1 --stats "$T/stats$i.json" > "$T/proxy$i" 2>&1 &
  i=$((i + 1))
done
sleep 1
start=$(date +%s.%N)
HYDRA_STATE_DIR="$T/state" $BIN/hydra get -q http://127.0.0.1:28200/object http://127.0.0.1:28201/object \
  http://127.0.0.1:28202/object -o "$T/out.bin" --summary-json "$T/summary.json"
end=$(date +%s.%N)
echo "wall: $(echo "$end - $start" | bc) s"
cat "$T/summary.json"
# The object every origin serves is the same: compare against a direct copy.
curl -s -o "$T/direct.bin" http://127.0.0.1:28100/object
cmp "$T/out.bin" "$T/direct.bin" && echo "byte-exact: yes"
kill -INT $(jobs -p) 2>/dev/null || true
sleep 1
for j in 0 1 2; do
  python3 -c "import json,sys; d=json.load(open('$T/stats$j.json')); l=d['links'][0] if 'links' in d else d; print('link $j:', {k: l[k] for k in l if k in ('bytes_down','connections','excess_bytes')})" 2>/dev/null || true
done
