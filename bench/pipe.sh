#!/usr/bin/env bash
# `hydra get MIRRORS… -o - | sha256sum` on the collapse scenario (bench/peers/collapse.toml:
# three mirrors behind faultnet links, the 3 MB/s one collapsing to 5 % of its capacity at
# 30 % progress): is the pipe's hash the object's, and what is hydra's peak RSS against the
# --stream-buffer bound?
#
# Runs, each through a fresh faultnet proxy (the collapse replays): hydra to a file (-o FILE:
# no reorder buffer; the baseline), then hydra to a pipe with each --stream-buffer size given.
# Peak RSS is /usr/bin/time -v's "Maximum resident set size" of the hydra process. The bound
# a pipe run is held to: its peak RSS ≤ the file run's peak RSS + the --stream-buffer size +
# one connection's buffers (464 KiB: hyper's read buffer, at most 408 KiB, and the writer's
# coalescing buffer, 64 KiB, rounded up) per mirror, for the second connection a stream opens
# on each mirror where a file's search starts at one (docs/cli.md, "A stream to a pipe").
# Loopback only; every origin and proxy takes a port the kernel picks (port 0).
#
# Usage: bash bench/pipe.sh [BUFFER…]   (default: 16M 4M; suffixes as --stream-buffer)
# Environment: NO_BUILD=1 uses the binaries already in ${CARGO_TARGET_DIR:-target}/release.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
BUFFERS=("$@")
[ ${#BUFFERS[@]} -gt 0 ] || BUFFERS=(16M 4M)
if [ "${NO_BUILD:-0}" != 1 ]; then
  cargo build -q --release -p hydra-cli -p faultnet
  cargo build -q --release -p hydra-scheme-http --features origin --example serve
fi
[ -x /usr/bin/time ] || { echo "pipe.sh: /usr/bin/time missing (apt-get install time)" >&2; exit 1; }
BIN=${CARGO_TARGET_DIR:-$REPO/target}/release
SCEN=$REPO/bench/peers/collapse.toml
T=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$T"' EXIT

# The lines of FILE that match PATTERN once there are COUNT of them, waiting at most 10 s.
matches() { # FILE PATTERN COUNT
  local k
  for k in $(seq 1 100); do
    if [ "$(grep -cE "$2" "$1" 2>/dev/null || true)" -ge "$3" ]; then
      grep -oE "$2" "$1"
      return 0
    fi
    sleep 0.1
  done
  echo "pipe.sh: fewer than $3 lines matching '$2' in $1 after 10 s:" >&2; cat "$1" >&2; exit 1
}

SIZE=$(python3 -c "import tomllib; print(tomllib.load(open('$SCEN', 'rb'))['object_size'])")
NLINKS=$(grep -c '^\[\[link\]\]' "$SCEN")
ORIGINS=()
for i in $(seq 0 $((NLINKS - 1))); do
  $BIN/examples/serve "$SIZE" 5 0 > "$T/serve$i" &
  ORIGINS+=("$(matches "$T/serve$i" '127\.0\.0\.1:[0-9]+' 1)")
done
# The scenario with each link listening on port 0 and forwarding to its origin.
python3 - "$SCEN" "$T/live.toml" "${ORIGINS[@]}" <<'PY'
import sys
scen, live, origins = sys.argv[1], sys.argv[2], sys.argv[3:]
out, i = [], 0
for line in open(scen).read().splitlines():
    out.append(line)
    if line.strip() == "[[link]]":
        out += ['listen = "127.0.0.1:0"', f'upstream = "{origins[i]}"']
        i += 1
open(live, "w").write("\n".join(out) + "\n")
PY
$BIN/faultnet check "$T/live.toml" > /dev/null
REF=$(curl -sSf "http://${ORIGINS[0]}/object" | sha256sum | cut -d' ' -f1)

# One run: a fresh proxy, hydra under /usr/bin/time with OUTPUT (a path or -) and the extra
# words; prints one result line.
run() { # NAME OUTPUT [EXTRA…]
  local name=$1 out=$2; shift 2
  $BIN/faultnet proxy --scenario "$T/live.toml" --seed 1 > "$T/proxy.$name" 2>&1 &
  local proxy=$!
  local urls=()
  for a in $(matches "$T/proxy.$name" 'listening on 127\.0\.0\.1:[0-9]+' "$NLINKS" | cut -d' ' -f3); do
    urls+=("http://$a/object")
  done
  local rc=0 hash start end
  start=$EPOCHREALTIME
  if [ "$out" = - ]; then
    hash=$( { HYDRA_STATE_DIR="$T/state" timeout 600 /usr/bin/time -v -o "$T/time.$name" \
      $BIN/hydra get "${urls[@]}" -o - --no-host-memory "$@" 2> "$T/err.$name" || \
      echo "$?" > "$T/rc.$name"; } | sha256sum | cut -d' ' -f1)
  else
    HYDRA_STATE_DIR="$T/state" timeout 600 /usr/bin/time -v -o "$T/time.$name" \
      $BIN/hydra get "${urls[@]}" -o "$T/out.bin" --no-host-memory "$@" 2> "$T/err.$name" || \
      echo "$?" > "$T/rc.$name"
    hash=$(sha256sum "$T/out.bin" | cut -d' ' -f1)
    rm -f "$T/out.bin"
  fi
  end=$EPOCHREALTIME
  kill "$proxy"; wait "$proxy" 2>/dev/null || true
  [ -f "$T/rc.$name" ] && rc=$(cat "$T/rc.$name")
  local rss
  rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$T/time.$name")
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$rc" "$rss" \
    "$(python3 -c "print(f'{$end - $start:.2f}')")" "$([ "$hash" = "$REF" ] && echo yes || echo no)"
  if [ "$rc" != 0 ]; then tail -3 "$T/err.$name" >&2; fi
}

echo "object: $SIZE bytes, sha256 $REF; scenario $(basename "$SCEN"); commit $(git rev-parse --short HEAD)"
printf 'run\texit\tpeak_rss_kib\twall_s\thash_equal\n'
BASE_LINE=$(run file "$T/out.bin")
echo "$BASE_LINE"
BASE=$(echo "$BASE_LINE" | cut -f3)
for b in "${BUFFERS[@]}"; do
  line=$(run "pipe-$b" - --stream-buffer "$b")
  echo "$line"
  rss=$(echo "$line" | cut -f3)
  python3 - "$b" "$rss" "$BASE" "$NLINKS" <<'PY'
import sys
b, rss, base, links = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
units = {"k": 1 << 10, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
n = int(b[:-1]) * units[b[-1]] if b[-1] in units else int(b)
conns = 464 * links
bound = base + n // 1024 + conns
print(f"  bound for {b}: {base} + {n // 1024} + {conns} = {bound} KiB; peak {rss} KiB: "
      f"{'within' if rss <= bound else 'OVER'} ({rss - base:+d} KiB over the file run)")
PY
done
