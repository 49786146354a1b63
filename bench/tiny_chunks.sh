#!/usr/bin/env bash
# Peak memory of `hydra get` against a server that sends its body as one-byte frames (HTTP
# chunked, `1\r\nX\r\n` per byte) and against the same server sending it normally
# (Content-Length, large writes). Loopback only. Prints one line per run: mode, peak RSS
# (KiB, from /usr/bin/time -v), wall seconds, and whether the file is byte-exact.
# Usage: bash bench/tiny_chunks.sh [SIZE]   (default 32MiB)
# HYDRA=path/to/hydra measures another build of the client (e.g. one from an older commit).
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE=${1:-32MiB}
if [ ! -x /usr/bin/time ]; then
  echo "skip: /usr/bin/time missing (apt-get install time)" >&2
  exit 1
fi
cargo build -q --release -p hydra-cli
cargo build -q --release -p hydra-scheme-http --example tiny_chunks
T=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$T"' EXIT
BIN=target/release
HYDRA=${HYDRA:-$BIN/hydra}
for mode in normal tiny; do
  $BIN/examples/tiny_chunks "$SIZE" $mode > "$T/url.$mode" &
  for _ in $(seq 50); do [ -s "$T/url.$mode" ] && break; sleep 0.1; done
  url=$(head -1 "$T/url.$mode")
  start=$(date +%s.%N)
  HYDRA_STATE_DIR="$T/state" /usr/bin/time -v -o "$T/time.$mode" \
    "$HYDRA" get -q "$url" -o "$T/out.$mode" --no-host-memory
  end=$(date +%s.%N)
  rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$T/time.$mode")
  kill $! 2>/dev/null || true
  wait 2>/dev/null || true
  echo "$mode peak_rss_kib=$rss wall_s=$(echo "$end - $start" | bc)"
done
cmp "$T/out.normal" "$T/out.tiny" && echo "byte-exact: tiny == normal"
python3 - "$T/out.normal" <<'PY'
import sys
data = open(sys.argv[1], 'rb').read()
ok = all(b == (i * 31 + 7) % 251 for i, b in enumerate(data))
print("content: " + ("as served" if ok else "WRONG"))
PY
