#!/usr/bin/env bash
# A batch of objects over HTTP, FTP and SFTP mirrors through faultnet links: `hydra get
# --input-file -j J` against the same objects downloaded one after the other (`hydra get`
# per object) and against `aria2c -i` with the same -j (when aria2c is installed; installed
# with apt-get when missing and running as root).
#
# One origin per protocol (schemes/http/examples/serve.rs, serve-ftp, serve-sftp: one SIZE
# and seed, so the same bytes everywhere), each behind its own faultnet link (--bandwidth,
# --latency; --ftp for the FTP one so passive data crosses the link too). Object k's mirrors
# rotate through {http, ftp}, {ftp, sftp}, {sftp, http}, {http, ftp, sftp}, so every link is
# shared by many objects. Every output's sha256 is checked against an unshaped copy from a
# fourth (HTTP) origin of the same size and seed. Wall time is the whole run's. Fresh links
# and an empty hydra host memory for every run.
#
# Usage: bash bench/batch.sh [--objects N] [-j J] [--size SIZE] [--link RATE] [--delay D]
#                            [--report FILE] [--no-build] [--no-install]
#   --objects N   objects in the batch (default 20)
#   -j J          objects at once, hydra and aria2c (default 5)
#   --size SIZE   each object's size (default 4M; k, M, G powers of 1000)
#   --link RATE   each link's capacity, shared by its connections (default 4MB/s)
#   --delay D     each link's one-way delay (default 20ms)
#   --report FILE the markdown report (default docs/results/batch.md)
#   --no-build    use the binaries already in ${CARGO_TARGET_DIR:-target}/release
#   --no-install  do not apt-get install aria2
# Environment: BATCH_PORTS=ORIGIN_BASE,PROXY_BASE (default 28700,28800).
# Loopback only; every process started here is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)

OBJECTS=20
JOBS=5
SIZE=4M
LINK=4MB/s
DELAY=20ms
REPORT="$REPO/docs/results/batch.md"
BUILD=1
INSTALL=1
ARGS="$*"
while [ $# -gt 0 ]; do
  case "$1" in
    --objects) OBJECTS=$2; shift 2 ;;
    -j) JOBS=$2; shift 2 ;;
    --size) SIZE=$2; shift 2 ;;
    --link) LINK=$2; shift 2 ;;
    --delay) DELAY=$2; shift 2 ;;
    --report) REPORT=$2; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    --no-install) INSTALL=0; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    *) echo "batch.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
for v in "$OBJECTS" "$JOBS"; do
  case "$v" in ''|*[!0-9]*) echo "batch.sh: --objects and -j want numbers" >&2; exit 2 ;; esac
done
[ "$OBJECTS" -ge 1 ] && [ "$OBJECTS" -le 500 ] || { echo "batch.sh: --objects 1..500" >&2; exit 2; }
[ "$JOBS" -ge 1 ] && [ "$JOBS" -le 64 ] || { echo "batch.sh: -j 1..64" >&2; exit 2; }

if [ "$BUILD" = 1 ]; then
  cargo build -q --release -p hydra-cli -p faultnet
  cargo build -q --release -p hydra-scheme-http -p hydra-scheme-ftp -p hydra-scheme-sftp \
    --features hydra-scheme-http/origin,hydra-scheme-ftp/origin,hydra-scheme-sftp/origin \
    --example serve --example serve-ftp --example serve-sftp
fi
BIN=${CARGO_TARGET_DIR:-$REPO/target}/release
for b in hydra faultnet examples/serve examples/serve-ftp examples/serve-sftp; do
  [ -x "$BIN/$b" ] || { echo "batch.sh: missing $BIN/$b (build first)" >&2; exit 1; }
done

if ! command -v aria2c >/dev/null && [ "$INSTALL" = 1 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "batch.sh: installing aria2" >&2
  timeout 300 apt-get update -qq >/dev/null 2>&1 || true
  DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -qq aria2 >/dev/null 2>&1 || true
fi

T=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && wait "$p" 2>/dev/null || true; done
  rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start_bg() { # LOG CMD... ; sets LASTPID
  "${@:2}" > "$1" 2>&1 &
  LASTPID=$!
  PIDS+=("$LASTPID")
}
stop_pid() { # PID: SIGINT, wait up to 5 s, then SIGKILL
  local p=$1 i
  kill -INT "$p" 2>/dev/null || return 0
  for i in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$p" 2>/dev/null || true
  wait "$p" 2>/dev/null || true
}
wait_port() { # PORT: up to 10 s
  local i
  for i in $(seq 1 200); do
    (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0
    sleep 0.05
  done
  echo "batch.sh: port $1 never opened" >&2; return 1
}
wait_line() { # FILE PATTERN: up to 10 s
  local i
  for i in $(seq 1 200); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.05; done
  echo "batch.sh: timed out waiting for $2 in $1" >&2; cat "$1" >&2; return 1
}
now() { date +%s.%N; }

IFS=, read -r OBASE PBASE <<< "${BATCH_PORTS:-28700,28800}"
case "$OBASE$PBASE" in ''|*[!0-9]*) echo "batch.sh: BATCH_PORTS wants two numbers" >&2; exit 2 ;; esac

# --- origins: http on OBASE, ftp on +1, sftp on +2, the unshaped reference on +3 ----------
start_bg "$T/http.log" "$BIN/examples/serve" "$SIZE" 5 "$OBASE"
start_bg "$T/ftp.log" "$BIN/examples/serve-ftp" "$SIZE" 5 $((OBASE + 1))
start_bg "$T/sftp.log" "$BIN/examples/serve-sftp" "$SIZE" 5 $((OBASE + 2))
start_bg "$T/ref.log" "$BIN/examples/serve" "$SIZE" 5 $((OBASE + 3))
for i in 0 1 2 3; do wait_port $((OBASE + i)); done
wait_line "$T/sftp.log" "^known_hosts "
SFTP_USER=$(sed -n 's/^user //p' "$T/sftp.log")
SFTP_PASS=$(sed -n 's/^password //p' "$T/sftp.log")
HOST_KEY=$(sed -n 's/^host_key //p' "$T/sftp.log")
echo "[127.0.0.1]:$((PBASE + 2)) $HOST_KEY" > "$T/known_hosts"
SFTP_SHA1=$(python3 -c 'import base64, hashlib, sys
print(hashlib.sha1(base64.b64decode(sys.argv[1].split()[1])).hexdigest())' "$HOST_KEY")
curl -sSf -o "$T/ref.bin" "http://127.0.0.1:$((OBASE + 3))/object"
REF=$(sha256sum "$T/ref.bin" | cut -d' ' -f1)
rm -f "$T/ref.bin"

HTTP_URL() { echo "http://127.0.0.1:$PBASE/obj$1.bin"; }
FTP_URL() { echo "ftp://hydra:hydra@127.0.0.1:$((PBASE + 1))/object.bin"; }
SFTP_URL() { echo "sftp://$SFTP_USER:$SFTP_PASS@127.0.0.1:$((PBASE + 2))/obj$1.bin"; }
mirrors() { # K: object k's mirrors, TAB-separated
  case $(($1 % 4)) in
    0) printf '%s\t%s' "$(HTTP_URL "$1")" "$(FTP_URL "$1")" ;;
    1) printf '%s\t%s' "$(FTP_URL "$1")" "$(SFTP_URL "$1")" ;;
    2) printf '%s\t%s' "$(SFTP_URL "$1")" "$(HTTP_URL "$1")" ;;
    3) printf '%s\t%s\t%s' "$(HTTP_URL "$1")" "$(FTP_URL "$1")" "$(SFTP_URL "$1")" ;;
  esac
}
: > "$T/list.txt"
for k in $(seq 0 $((OBJECTS - 1))); do
  printf '%s\n  out=obj%02d.bin\n' "$(mirrors "$k")" "$k" >> "$T/list.txt"
done

# --- one run through fresh links ----------------------------------------------------------
PROXIES=()
links_up() {
  PROXIES=()
  local i extra
  for i in 0 1 2; do
    extra=()
    [ "$i" = 1 ] && extra=(--ftp)
    start_bg "$T/link$i.log" "$BIN/faultnet" proxy --listen "127.0.0.1:$((PBASE + i))" \
      --upstream "127.0.0.1:$((OBASE + i))" --bandwidth "$LINK" --latency "$DELAY" --seed 1 \
      "${extra[@]}"
    PROXIES+=("$LASTPID")
  done
  for i in 0 1 2; do wait_port $((PBASE + i)); done
}
links_down() { local p; for p in "${PROXIES[@]}"; do stop_pid "$p"; done; }

verify() { # DIR: how many of the objects are there and byte-exact
  local d=$1 k ok=0
  for k in $(seq 0 $((OBJECTS - 1))); do
    f=$(printf '%s/obj%02d.bin' "$d" "$k")
    [ -f "$f" ] && [ "$(sha256sum "$f" | cut -d' ' -f1)" = "$REF" ] && ok=$((ok + 1))
  done
  echo "$ok"
}

ROWS=()
record() { # NAME WALL RC DIR COMMAND
  local good
  good=$(verify "$4")
  ROWS+=("| $1 | $(printf '%.2f' "$2") | $good/$OBJECTS | $3 | \`$5\` |")
  echo "batch.sh: $1: $(printf '%.2f' "$2") s, $good/$OBJECTS byte-exact, exit $3" >&2
}

run_hydra_batch() {
  local d="$T/batch" rc=0 t0 t1
  mkdir -p "$d"; links_up
  t0=$(now)
  HYDRA_STATE_DIR="$d/state" timeout -k 5 600 "$BIN/hydra" get -q --input-file "$T/list.txt" \
    -j "$JOBS" -P "$d" --known-hosts "$T/known_hosts" 2> "$d/stderr" || rc=$?
  t1=$(now); links_down
  record "hydra --input-file -j $JOBS" "$(echo "$t1 - $t0" | bc)" "$rc" "$d" \
    "hydra get --input-file LIST -j $JOBS -P DIR --known-hosts KH"
}

run_hydra_serial() {
  local d="$T/serial" rc=0 r k t0 t1 urls
  mkdir -p "$d"; links_up
  t0=$(now)
  for k in $(seq 0 $((OBJECTS - 1))); do
    IFS=$'\t' read -r -a urls <<< "$(mirrors "$k")"
    r=0
    HYDRA_STATE_DIR="$d/state" timeout -k 5 600 "$BIN/hydra" get -q "${urls[@]}" \
      -o "$(printf '%s/obj%02d.bin' "$d" "$k")" --known-hosts "$T/known_hosts" 2>> "$d/stderr" || r=$?
    [ "$r" -gt "$rc" ] && rc=$r
  done
  t1=$(now); links_down
  record "hydra get, one object after the other" "$(echo "$t1 - $t0" | bc)" "$rc" "$d" \
    "for each object: hydra get MIRRORS... -o DIR/objK.bin --known-hosts KH"
}

run_aria2c() {
  local d="$T/aria2c" rc=0 t0 t1
  if ! command -v aria2c >/dev/null; then
    ROWS+=("| aria2c -i -j $JOBS | - | - | - | not installed: skipped |")
    echo "batch.sh: aria2c not installed: skipped" >&2
    return 0
  fi
  mkdir -p "$d"; links_up
  t0=$(now)
  timeout -k 5 600 aria2c -q -i "$T/list.txt" -j "$JOBS" -d "$d" -x 4 -s 4 -k 1M \
    --allow-overwrite=true --auto-file-renaming=false --file-allocation=none \
    --console-log-level=error --ssh-host-key-md="sha-1=$SFTP_SHA1" 2> "$d/stderr" || rc=$?
  t1=$(now); links_down
  record "aria2c -i -j $JOBS -x 4 -s 4" "$(echo "$t1 - $t0" | bc)" "$rc" "$d" \
    "aria2c -i LIST -j $JOBS -d DIR -x 4 -s 4 -k 1M --ssh-host-key-md=sha-1=HEX"
}

run_hydra_batch
run_hydra_serial
run_aria2c

COMMIT=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)
DIRTY=""
git -C "$REPO" diff --quiet HEAD 2>/dev/null || DIRTY=" with uncommitted changes"
{
  echo "# Batches: $OBJECTS objects, -j $JOBS, over HTTP, FTP and SFTP mirrors"
  echo
  echo "\`bash bench/batch.sh${ARGS:+ $ARGS}\` at commit \`$COMMIT\`$DIRTY, $(date -u +%Y-%m-%d)."
  echo
  echo "$OBJECTS objects of $SIZE (one content, checked by sha256 against an unshaped copy);"
  echo "three origins (HTTP, FTP, SFTP), each behind its own faultnet link of $LINK shared by"
  echo "its connections, $DELAY each way. Object k's mirrors rotate through {http, ftp},"
  echo "{ftp, sftp}, {sftp, http} and {http, ftp, sftp}. hydra: defaults (--per-host 4,"
  echo "--max-connections 16, shared by the batch), an empty host memory at the start of each"
  echo "run. Wall time of the whole run, one repetition, $(nproc) cores shared with other work."
  echo
  echo "| run | wall s | byte-exact | exit | command |"
  echo "|---|---|---|---|---|"
  printf '%s\n' "${ROWS[@]}"
  echo
  echo "Versions: $("$BIN/hydra" --version 2>/dev/null | head -1)$(command -v aria2c >/dev/null && echo "; $(aria2c --version | head -1)")."
} > "$REPORT"
echo "batch.sh: report in $REPORT" >&2
