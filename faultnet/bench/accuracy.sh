#!/usr/bin/env bash
# Accuracy and throughput of the faultnet binary, measured with curl on loopback.
# Reproduces the figures in docs/results/faultnet.md:
#
#   bash faultnet/bench/accuracy.sh
#
# Everything runs on 127.0.0.1 with ports chosen by the kernel; every process it starts is
# stopped on exit. Needs curl and awk. Takes about a minute.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}
cargo build -q --release -p faultnet --bins --examples
BIN=$CARGO_TARGET_DIR/release/faultnet
EX=$CARGO_TARGET_DIR/release/examples
WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# wait_addr FILE: prints the address on the line that announces it (bounded: 5 s).
wait_addr() {
  for _ in $(seq 100); do
    if grep -qE 'listening on' "$1" 2>/dev/null; then
      grep -m1 -oE 'listening on [0-9.:]+' "$1" | awk '{print $3}'
      return
    fi
    sleep 0.05
  done
  echo "no address in $1" >&2; cat "$1" >&2; exit 1
}

# origin SIZE: starts an origin serving SIZE bytes; sets ORIGIN.
origin() {
  local log=$WORK/origin.$RANDOM
  "$EX/origin" 127.0.0.1:0 "$1" >"$log" 2>&1 &
  PIDS+=($!)
  ORIGIN=$(wait_addr "$log")
}

# proxy ARGS...: starts `faultnet proxy ARGS`; sets PROXY and PROXY_PID.
proxy() {
  local log=$WORK/proxy.$RANDOM
  echo "\$ faultnet proxy $*" | sed "s#$ORIGIN#ORIGIN#g"
  "$BIN" proxy --listen 127.0.0.1:0 "$@" >"$log" 2>&1 &
  PROXY_PID=$!
  PIDS+=($PROXY_PID)
  PROXY=$(wait_addr "$log")
  grep -m1 seed "$log"
}

stop_proxy() { kill -TERM "$PROXY_PID"; wait "$PROXY_PID" 2>/dev/null || true; }

W='%{size_download} %{time_starttransfer} %{time_total}\n'
MIB=1048576

echo "## 1. one stream through --bandwidth 2MiB/s (8 MiB body, 3 runs)"
origin 8MiB
proxy --upstream "$ORIGIN" --bandwidth 2MiB/s --seed 1
for i in 1 2 3; do
  curl -s -o /dev/null -w "$W" "http://$PROXY/f" |
    awk -v c=$((2 * MIB)) '{r=$1/($3-$2); printf "run: %d B in %.3f s after first byte: %.0f B/s = %+.2f %% of 2MiB/s\n", $1, $3-$2, r, (r/c-1)*100}'
done
stop_proxy

echo
echo "## 2. four concurrent streams through --bandwidth 2MiB/s (4 x 4 MiB)"
origin 4MiB
proxy --upstream "$ORIGIN" --bandwidth 2MiB/s --seed 1
CURLS=()
for i in 1 2 3 4; do
  curl -s -o /dev/null -w "$W" "http://$PROXY/f" >"$WORK/par.$i" &
  CURLS+=($!)
done
wait "${CURLS[@]}"
cat "$WORK"/par.* | awk '{printf "stream: %d B in %.3f s: %.0f B/s\n", $1, $3, $1/$3}'
cat "$WORK"/par.* | awk -v c=$((2 * MIB)) \
  '{s+=$1; if ($3>m) m=$3} END {printf "sum: %d B in %.3f s (slowest stream): %.0f B/s = %+.2f %% of 2MiB/s (4x would be +300 %%)\n", s, m, s/m, (s/m/c-1)*100}'
stop_proxy

echo
echo "## 3. time to first byte through --latency 50ms (1 KiB body, 10 runs)"
origin 1KiB
curl -s -o /dev/null -w "direct: %{time_starttransfer} s\n" "http://$ORIGIN/f"
proxy --upstream "$ORIGIN" --latency 50ms --seed 1
for i in $(seq 10); do curl -s -o /dev/null -w '%{time_starttransfer}\n' "http://$PROXY/f"; done |
  sort -n | awk '{a[NR]=$1} END {printf "ttfb: min %.1f ms, median %.1f ms, max %.1f ms (floor 100 ms, ceiling 120 ms)\n", a[1]*1000, a[int((NR+1)/2)]*1000, a[NR]*1000}'
stop_proxy

echo
echo "## 4. collapse to 25 % at 4 MiB of a 2MiB/s link (6 MiB body, 200 ms windows)"
origin 6MiB
cat >"$WORK/collapse.toml" <<TOML
name = "collapse-at-bytes"
object_size = "6MiB"
[[link]]
name = "origin"
capacity = "2MiB/s"
upstream = "$ORIGIN"
[[event]]
link = "origin"
at_bytes = "4MiB"
kind = "collapse"
fraction = 0.25
target = "link"
TOML
sed "s#$ORIGIN#ORIGIN#" "$WORK/collapse.toml" | sed 's/^/    /'
proxy --scenario "$WORK/collapse.toml" --seed 1
# The mark is in body bytes; at_bytes counts the response header too (about 120 bytes).
"$EX/probe" "$PROXY" /f $((4 * MIB)) 200ms | grep -E 'mark|window|rate'
echo "expected: 2097152 B/s before the mark, 524288 B/s after"
stop_proxy

echo
echo "## 5. throughput ceiling, no faults (2 GiB body, 3 runs each)"
origin 2GiB
for i in 1 2 3; do
  curl -s -o /dev/null -w "direct: %{speed_download} B/s\n" "http://$ORIGIN/f"
done | awk '{printf "direct: %.0f MB/s\n", $2/1e6}'
proxy --upstream "$ORIGIN" --seed 1
for i in 1 2 3; do
  curl -s -o /dev/null -w "proxied: %{speed_download} B/s\n" "http://$PROXY/f"
done | awk '{printf "through faultnet: %.0f MB/s\n", $2/1e6}'
stop_proxy
