#!/usr/bin/env bash
# A Metalink with sha-256 piece hashes, two mirrors of one object behind faultnet links: an
# honest one (4 MB/s) and a faster one that serves one damaged byte in every fourth piece
# (8 MB/s). The same .meta4 goes to `hydra get` and to `aria2c --metalink-file`; prints, for
# each: exit code, wall time, byte-exactness, wire bytes per link (faultnet's bytes_down), and
# for hydra its summary's piece counters. Loopback only.
# Usage: bash bench/metalink.sh [SIZE] [PIECE]   (defaults 64MiB, 1MiB; powers of 1024)
# Environment: NO_BUILD=1 uses the binaries already in target/release.
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE=${1:-64MiB}
PIECE=${2:-1MiB}
if [ "${NO_BUILD:-0}" != 1 ]; then
  cargo build -q --release -p hydra-cli -p faultnet
  cargo build -q --release -p hydra-scheme-http --features origin --example serve
fi
command -v aria2c >/dev/null || echo "aria2c not installed: its run is skipped (apt-get install aria2)"
T=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$T"' EXIT
BIN=target/release
bytes() { python3 -c "import sys; n,u=sys.argv[1],{'KiB':1<<10,'MiB':1<<20,'GiB':1<<30}
for k,v in u.items():
    if n.endswith(k): print(int(n[:-len(k)])*v); break
else: print(int(n))" "$1"; }
PIECE_B=$(bytes "$PIECE")
# The first line FILE prints that matches PATTERN, waiting at most 10 s for it.
first_match() { # FILE PATTERN
  local k
  for k in $(seq 1 100); do
    grep -m1 -oE "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "metalink.sh: nothing matching '$2' in $1 after 10 s:" >&2; cat "$1" >&2; exit 1
}
# Origins and links on ports the kernel picks (port 0): each prints the address it took.
$BIN/examples/serve "$SIZE" 9 0 > "$T/serve0" &
SERVE_CORRUPT="${PIECE_B}/4" $BIN/examples/serve "$SIZE" 9 0 > "$T/serve1" &
PROXIES=()
LINKS=()
i=0
for spec in "4MB/s 20ms" "8MB/s 20ms"; do
  set -- $spec
  origin=$(first_match "$T/serve$i" '127\.0\.0\.1:[0-9]+')
  $BIN/faultnet proxy --listen 127.0.0.1:0 --upstream "$origin" \
    --bandwidth "$1" --latency "$2" --seed 1 --stats "$T/stats$i.json" > "$T/proxy$i" 2>&1 &
  PROXIES+=($!)
  LINKS+=("$(first_match "$T/proxy$i" 'listening on 127\.0\.0\.1:[0-9]+' | cut -d' ' -f3)")
  i=$((i + 1))
done
curl -s -o "$T/direct.bin" "$(head -1 "$T/serve0")"
python3 - "$T/direct.bin" "$PIECE_B" "${LINKS[@]}" > "$T/obj.meta4" <<'PY'
import hashlib, sys
data = open(sys.argv[1], "rb").read(); L = int(sys.argv[2]); honest, damaged = sys.argv[3:5]
pieces = "".join(f"      <hash>{hashlib.sha256(data[i:i+L]).hexdigest()}</hash>\n"
                 for i in range(0, len(data), L))
print(f'''<?xml version="1.0" encoding="UTF-8"?>
<metalink xmlns="urn:ietf:params:xml:ns:metalink">
  <file name="obj.bin">
    <size>{len(data)}</size>
    <hash type="sha-256">{hashlib.sha256(data).hexdigest()}</hash>
    <pieces length="{L}" type="sha-256">
{pieces}    </pieces>
    <url priority="1" location="de">http://{honest}/object</url>
    <url priority="2" location="fr">http://{damaged}/object</url>
  </file>
</metalink>''')
PY
snapshot() { # writes each link's stats, then prints their bytes_down
  # SIGUSR1 goes to the faultnet proxies alone: it would end the origins.
  for p in "${PROXIES[@]}"; do kill -USR1 "$p"; done
  sleep 1
  python3 -c "import json; print(' '.join(str(json.load(open('$T/stats%d.json' % j))['links'][0]['bytes_down']) for j in (0, 1)))"
}
run() { # NAME CMD...: exit code, wall time, byte-exactness, wire bytes per link
  local name=$1; shift
  local before after start end rc=0
  before=$(snapshot)
  start=$(date +%s.%N)
  timeout 600 "$@" > "$T/$name.out" 2> "$T/$name.err" || rc=$?
  end=$(date +%s.%N)
  after=$(snapshot)
  python3 - "$name" "$rc" "$start" "$end" "$before" "$after" "$T/$name.bin" "$T/direct.bin" <<'PY'
import sys
name, rc, s, e, b, a, out, ref = sys.argv[1:]
b = list(map(int, b.split())); a = list(map(int, a.split()))
wire = [y - x for x, y in zip(b, a)]
try: exact = open(out, "rb").read() == open(ref, "rb").read()
except OSError: exact = False
size = len(open(ref, "rb").read())
print(f"{name}: exit {rc}, {float(e) - float(s):.2f} s, byte-exact: {'yes' if exact else 'no'}, "
      f"wire bytes: honest {wire[0]}, damaged {wire[1]}, total {sum(wire)} "
      f"({sum(wire) - size:+d} over the object, headers included)")
PY
}
run hydra env HYDRA_STATE_DIR="$T/state" $BIN/hydra get "$T/obj.meta4" -o "$T/hydra.bin" \
  --summary-json "$T/summary.json"
grep -E "piece|dropped" "$T/hydra.err" || true
python3 -c "
import json; s = json.load(open('$T/summary.json')); L = $PIECE_B
over = sum(x['bytes'] for x in s['sources']) + s['waste_bytes'] - s['size']
print('hydra summary: revoked_bytes', s['revoked_bytes'], '(%.2f pieces),' % (s['revoked_bytes'] / L),
      'payload over the object', over, '(%.2f pieces),' % (over / L), 'waste_bytes', s['waste_bytes'],
      'per source', [(x['url'], x['bytes']) for x in s['sources']])
import re
bad = len(set(re.findall(r': piece (\d+) \(', open('$T/hydra.err').read())))
bound = (bad + 1) * L
print(f'hydra bound: {bad} damaged pieces + 1 = {bound} bytes; payload over the object {over}:',
      'within' if over <= bound else 'OVER')"
if command -v aria2c >/dev/null; then
  # aria2c as it comes (it takes mirrors in priority order), then told to prefer the damaged
  # mirror's location (--metalink-location=fr), so that its piece checks are exercised too.
  for variant in aria2c aria2c-fr; do
    ln -s "$variant/obj.bin" "$T/$variant.bin" # aria2c names a Metalink's file itself
    extra=()
    [ "$variant" = aria2c ] || extra=(--metalink-location=fr)
    run "$variant" aria2c --enable-color=false --console-log-level=error --summary-interval=0 --show-console-readout=false --no-conf --allow-overwrite=true --file-allocation=none \
      --dir="$T/$variant" ${extra[@]+"${extra[@]}"} --metalink-file="$T/obj.meta4"
    grep -hE "ERR|error|rror" "$T/$variant.out" "$T/$variant.err" | head -3 || true
  done
fi
