#!/usr/bin/env bash
# hydra's SFTP against OpenSSH's sftp-server through an emulated 50 ms round trip, next to
# OpenSSH's own `sftp` client on the same path in the same run, with and without pipelining.
#
# A throwaway sshd on 127.0.0.1 (generated host key, user key, authorized_keys, known_hosts;
# as in conformance/interop/run.sh) serves one object of deterministic, incompressible
# content. For every single run a fresh `faultnet proxy` sits in front of it (one bottleneck
# per direction of --rate, --latency each way), so its stats are that run's alone. Arms, in an
# order rotated every repetition:
#   sftp         OpenSSH `sftp -b` batch `get`, default settings (-R 64; read size: see below)
#   sftp-R1      the same with -R 1: one read at a time, the no-pipelining baseline
#   hydra        `hydra get` with default settings
#   hydra-1conn  `hydra get --fixed-connections 1`
#   lib-default  hydra's SFTP scheme (library), one session, default window (adaptive 16..64)
#   lib-w1       the same with a window of 1 read (`hydra get` has no pipeline-depth flag, so
#                this runs schemes/sftp/examples/openssh_bench.rs)
# Every output's sha256 is checked against the served file; wall time is measured around the
# whole process (connect, authentication and, for hydra, the probe included). Outputs are
# written under /dev/shm when it exists, so no arm pays for a disk (hydra fsyncs, sftp does
# not). One extra unshaped `sftp -vvv` run records OpenSSH's actual read size and depth.
#
# Usage: bash bench/sftp-openssh.sh [--reps N] [--size-mib N] [--rate RATE] [--latency DUR]
#                                   [--arms a,b,...] [--timeout SECS] [--out DIR]
#                                   [--no-build] [--no-install]
#   --reps N       repetitions per arm (default 3)
#   --size-mib N   object size in MiB (default 64)
#   --rate RATE    faultnet --bandwidth, shared link capacity per direction (default 12.5MB/s,
#                  i.e. 100 Mbit/s)
#   --latency DUR  faultnet --latency, one way (default 25ms: a 50 ms round trip)
#   --arms         subset of the arms above (default: all)
#   --timeout SECS per command (default 300); a killed run is recorded as `dnf`
#   --out DIR      keep raw results (runs.tsv, logs, faultnet stats, report.md) there;
#                  default a temporary directory, removed on exit
#   --no-build     use the binaries already built in ${CARGO_TARGET_DIR:-target}
#   --no-install   never apt-get install openssh-server / openssh-client
# Environment: CARGO_TARGET_DIR (where cargo builds; default <repo>/target).
# Loopback only; every process started here is stopped, and the work directory removed, on
# exit. Ends with a markdown report on stdout (bench/sftp/report.py).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)

REPS=3
SIZE_MIB=64
RATE=12.5MB/s
LATENCY=25ms
ARMS="sftp,sftp-R1,hydra,hydra-1conn,lib-default,lib-w1"
TO=300
OUT=""
BUILD=1
INSTALL=1
while [ $# -gt 0 ]; do
  case "$1" in
    --reps) REPS=$2; shift 2 ;;
    --size-mib) SIZE_MIB=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --latency) LATENCY=$2; shift 2 ;;
    --arms) ARMS=$2; shift 2 ;;
    --timeout) TO=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    --no-install) INSTALL=0; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    *) echo "sftp-openssh.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
for v in "$REPS" "$SIZE_MIB" "$TO"; do
  case "$v" in ''|*[!0-9]*) echo "sftp-openssh.sh: --reps, --size-mib, --timeout want numbers" >&2; exit 2 ;; esac
done
[ "$REPS" -ge 1 ] && [ "$REPS" -le 50 ] || { echo "sftp-openssh.sh: --reps 1..50" >&2; exit 2; }
[ "$SIZE_MIB" -ge 1 ] && [ "$SIZE_MIB" -le 4096 ] || { echo "sftp-openssh.sh: --size-mib 1..4096" >&2; exit 2; }
case "$LATENCY" in *ms) LAT_MS=${LATENCY%ms} ;; *) echo "sftp-openssh.sh: --latency in ms (e.g. 25ms)" >&2; exit 2 ;; esac
SIZE=$((SIZE_MIB * 1024 * 1024))
HELPER="python3 $REPO/bench/sftp/report.py"
COMMIT=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)
say() { echo "sftp-openssh.sh: $*" >&2; }
die() { say "FAIL: $*"; exit 1; }

declare -A WHAT=(
  [sftp]='`sftp -b` (OpenSSH defaults, -R 64)'
  [sftp-R1]='`sftp -R 1 -b`'
  [hydra]='`hydra get`'
  [hydra-1conn]='`hydra get --fixed-connections 1`'
  [lib-default]='scheme, 1 session, window 16..64'
  [lib-w1]='scheme, 1 session, window 1'
)
IFS=, read -r -a ARM_LIST <<< "$ARMS"
for a in "${ARM_LIST[@]}"; do
  [ -n "${WHAT[$a]:-}" ] || { echo "sftp-openssh.sh: unknown arm $a" >&2; exit 2; }
done

# --- OpenSSH ---------------------------------------------------------------------------------
find_bin() { # first existing of: PATH lookup, then the given absolute paths
  local name=$1 c; shift
  command -v "$name" 2>/dev/null && return 0
  for c in "$@"; do [ -x "$c" ] && { echo "$c"; return 0; }; done
  return 1
}
SFTP_SERVER_PATHS=(/usr/lib/openssh/sftp-server /usr/libexec/openssh/sftp-server /usr/libexec/sftp-server)
sshd_bin=$(find_bin sshd /usr/sbin/sshd || true)
sftp_server=$(find_bin sftp-server "${SFTP_SERVER_PATHS[@]}" || true)
sftp_bin=$(find_bin sftp || true)
if [ -z "$sshd_bin" ] || [ -z "$sftp_server" ] || [ -z "$sftp_bin" ] || ! command -v ssh-keygen >/dev/null; then
  [ "$INSTALL" = 1 ] || die "sshd, sftp-server or sftp missing and --no-install"
  [ "$(id -u)" = 0 ] || die "sshd, sftp-server or sftp missing; run as root to install them"
  say "installing openssh-server openssh-client"
  DEBIAN_FRONTEND=noninteractive timeout 300 apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -qq openssh-server openssh-client >/dev/null
  sshd_bin=$(find_bin sshd /usr/sbin/sshd) || die "no sshd after install"
  sftp_server=$(find_bin sftp-server "${SFTP_SERVER_PATHS[@]}") || die "no sftp-server after install"
  sftp_bin=$(find_bin sftp) || die "no sftp after install"
fi

# --- builds ----------------------------------------------------------------------------------
TARGET=${CARGO_TARGET_DIR:-$REPO/target}
BIN=$TARGET/release
need_lib=0
for a in "${ARM_LIST[@]}"; do case $a in lib-*) need_lib=1 ;; esac; done
if [ "$BUILD" = 1 ]; then
  say "building hydra and faultnet (release)"
  timeout 3600 cargo build -q --release -p hydra-cli -p faultnet
fi
LIBBENCH=""
if [ "$need_lib" = 1 ]; then
  if [ "$BUILD" = 1 ]; then
    say "building the scheme's bench driver (release)"
    timeout 3600 cargo build -q --release -p hydra-scheme-sftp --example openssh_bench
  fi
  LIBBENCH=$BIN/examples/openssh_bench
  [ -x "$LIBBENCH" ] || die "could not build schemes/sftp/examples/openssh_bench.rs"
fi
for b in "$BIN/hydra" "$BIN/faultnet"; do [ -x "$b" ] || die "missing $b (build first)"; done

# --- work directory and processes ------------------------------------------------------------
if [ -d /dev/shm ] && [ -w /dev/shm ]; then W=$(mktemp -d /dev/shm/hydra-sftp-bench.XXXXXX)
else W=$(mktemp -d /tmp/hydra-sftp-bench.XXXXXX); fi
chmod 755 "$W"
KEEP=0
if [ -n "$OUT" ]; then mkdir -p "$OUT"; KEEP=1; else OUT="$W/out"; mkdir -p "$OUT"; fi
OUT=$(cd "$OUT" && pwd)
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && wait "$p" 2>/dev/null || true; done
  rm -rf "$W"
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
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
wait_port() { # PORT NAME: up to 10 s
  local i
  for i in $(seq 1 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.1
  done
  die "$2 did not listen on 127.0.0.1:$1"
}
wait_lines() { # FILE PATTERN: up to 10 s
  local i
  for i in $(seq 1 200); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    sleep 0.05
  done
  cat "$1" >&2; die "timed out waiting for '$2' in $1"
}

# --- the object and sshd ---------------------------------------------------------------------
mkdir -p "$W/www"
$HELPER object "$SIZE" "$W/www/object.bin"
chmod 755 "$W/www" && chmod 644 "$W/www/object.bin"
SHA=$(sha256sum "$W/www/object.bin" | cut -d' ' -f1)
say "object: $SIZE bytes, sha256 $SHA"

SP=$(free_port)
PP=$(free_port)
ssh-keygen -q -t ed25519 -N '' -f "$W/host_key"
ssh-keygen -q -t ed25519 -N '' -f "$W/id_ed25519"
cp "$W/id_ed25519.pub" "$W/authorized_keys"
chmod 600 "$W/authorized_keys"
{
  echo "[127.0.0.1]:$SP $(cut -d' ' -f1,2 "$W/host_key.pub")"
  echo "[127.0.0.1]:$PP $(cut -d' ' -f1,2 "$W/host_key.pub")"
} > "$W/known_hosts"
cat > "$W/sshd_config" <<CONF
Port $SP
ListenAddress 127.0.0.1
HostKey $W/host_key
PidFile $W/sshd.pid
AuthorizedKeysFile $W/authorized_keys
StrictModes no
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
LogLevel DEBUG1
MaxStartups 50
Subsystem sftp $sftp_server
CONF
[ "$(id -u)" = 0 ] && mkdir -p /run/sshd
start_bg "$W/sshd.log" "$sshd_bin" -D -e -f "$W/sshd_config"
wait_port "$SP" sshd
USER_NAME=$(id -un)
RPATH="$W/www/object.bin"
URL_PROXY="sftp://$USER_NAME@127.0.0.1:$PP$RPATH"
SSH_OPTS=(-F /dev/null -i "$W/id_ed25519" -o IdentitiesOnly=yes -o BatchMode=yes
          -o UserKnownHostsFile="$W/known_hosts" -o GlobalKnownHostsFile=/dev/null
          -o StrictHostKeyChecking=yes)

# OpenSSH sftp's read size and depth, from its debug3 "Request range" lines (unshaped).
echo "get $RPATH $W/calib.bin" > "$W/calib.batch"
timeout 120 "$sftp_bin" -vvv "${SSH_OPTS[@]}" -P "$SP" -b "$W/calib.batch" "$USER_NAME@127.0.0.1" \
  > "$W/calib.log" 2>&1 || { tail -20 "$W/calib.log" >&2; die "unshaped sftp get failed"; }
[ "$(sha256sum "$W/calib.bin" | cut -d' ' -f1)" = "$SHA" ] || die "unshaped sftp get: wrong bytes"
rm -f "$W/calib.bin"
read -r SFTP_READ SFTP_OUT <<< "$($HELPER calib "$W/calib.log")"
say "OpenSSH sftp reads $SFTP_READ bytes, up to $SFTP_OUT outstanding (unshaped -vvv run)"

ORACLE=$(python3 -c "
import re
m = re.fullmatch(r'([0-9.]+)\s*([KMG]i?B?|B)?/s', '$RATE')
u = {None: 1, 'B': 1, 'KB': 1e3, 'MB': 1e6, 'GB': 1e9, 'KiB': 1024, 'MiB': 1024**2, 'GiB': 1024**3,
     'K': 1e3, 'M': 1e6, 'G': 1e9, 'Ki': 1024, 'Mi': 1024**2, 'Gi': 1024**3}[m.group(2)]
print(f'{2 * $LAT_MS / 1000 + $SIZE / (float(m.group(1)) * u):.3f}')")

{
  printf 'size\t%s\nrate\t%s\nlatency\t%s\nlatency_ms\t%s\nreps\t%s\noracle\t%s\n' \
    "$SIZE" "$RATE" "$LATENCY" "$LAT_MS" "$REPS" "$ORACLE"
  printf 'sftp_read\t%s\nsftp_outstanding\t%s\n' "$SFTP_READ" "$SFTP_OUT"
} > "$OUT/meta.tsv"
: > "$OUT/arms.tsv"
for a in "${ARM_LIST[@]}"; do printf '%s\t%s\n' "$a" "${WHAT[$a]}" >> "$OUT/arms.tsv"; done
printf '# arm\trep\tstatus\twall_s\tbytes_down\tbytes_up\tconnections\tcipher\n' > "$OUT/runs.tsv"
{
  echo "versions:"
  "$BIN/hydra" --version 2>/dev/null | head -1 || true
  echo "hydra commit $COMMIT (at the start of the run)"
  ssh -V 2>&1
  "$BIN/faultnet" --version 2>/dev/null | head -1 || true
} > "$OUT/versions.txt" 2>&1 || true

# --- the runs --------------------------------------------------------------------------------
arm_cmd() { # ARM OUTFILE -> CMD (and ENVS for the library driver)
  local out=$2
  ENVS=()
  case $1 in
    sftp|sftp-R1)
      echo "get $RPATH $out" > "$out.batch"
      CMD=("$sftp_bin" "${SSH_OPTS[@]}" -P "$PP")
      [ "$1" = sftp-R1 ] && CMD+=(-R 1)
      CMD+=(-b "$out.batch" "$USER_NAME@127.0.0.1") ;;
    hydra|hydra-1conn)
      CMD=("$BIN/hydra" get -q --no-host-memory --known-hosts "$W/known_hosts"
           -i "$W/id_ed25519" -o "$out" --summary-json "$out.summary.json")
      [ "$1" = hydra-1conn ] && CMD+=(--fixed-connections 1)
      CMD+=("$URL_PROXY") ;;
    lib-default|lib-w1)
      ENVS=(HYDRA_SFTP_BENCH_URL="$URL_PROXY" HYDRA_SFTP_BENCH_OUT="$out"
            HYDRA_SFTP_BENCH_KNOWN_HOSTS="$W/known_hosts" HYDRA_SFTP_BENCH_IDENTITY="$W/id_ed25519")
      [ "$1" = lib-w1 ] && ENVS+=(HYDRA_SFTP_BENCH_WINDOW=1)
      CMD=("$LIBBENCH") ;;
  esac
}
show_cmd() {
  python3 -c 'import shlex, sys; print(" ".join(shlex.quote(a) for a in sys.argv[1:]))' \
    "${ENVS[@]}" "${CMD[@]}" | sed "s#$W/#WORK/#g; s#$BIN/##g; s#$TARGET/#TARGET/#g"
}

: > "$OUT/commands.tsv"
n=${#ARM_LIST[@]}
for rep in $(seq 1 "$REPS"); do
  for k in $(seq 0 $((n - 1))); do
    arm=${ARM_LIST[$(((k + rep - 1) % n))]}
    d="$W/run"; rm -rf "$d"; mkdir -p "$d"
    out="$d/out.bin"
    arm_cmd "$arm" "$out"
    [ "$rep" = 1 ] && printf '%s\t%s\n' "$arm" "$(show_cmd)" >> "$OUT/commands.tsv"
    start_bg "$d/proxy.log" "$BIN/faultnet" proxy --listen "127.0.0.1:$PP" \
      --upstream "127.0.0.1:$SP" --bandwidth "$RATE" --latency "$LATENCY" --seed "$rep" \
      --stats "$d/stats.json"
    proxy=$LASTPID
    wait_lines "$d/proxy.log" "listening on"
    logpos=$(stat -c %s "$W/sshd.log")
    rc=0
    t0=$EPOCHREALTIME
    (cd "$d" && env "${ENVS[@]}" timeout -k 5 "$TO" "${CMD[@]}" > "$d/tool.log" 2>&1) || rc=$?
    t1=$EPOCHREALTIME
    stop_pid "$proxy"
    wall=$(python3 -c "print(f'{$t1 - $t0:.3f}')")
    read -r down up conns <<< "$($HELPER wire "$d/stats.json" 2>/dev/null || echo "0 0 0")"
    cipher=$(tail -c +$((logpos + 1)) "$W/sshd.log" | sed -n 's/.*kex: server->client cipher: \([^ ]*\).*/\1/p' | sort -u | paste -sd/ -)
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then status=dnf
    elif [ "$rc" != 0 ]; then status=fail
    elif [ ! -f "$out" ] || [ "$(sha256sum "$out" | cut -d' ' -f1)" != "$SHA" ]; then status=bad
    else status=ok; fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$arm" "$rep" "$status" "$wall" "$down" "$up" \
      "$conns" "${cipher:-}" >> "$OUT/runs.tsv"
    say "rep $rep $arm: $status ${wall} s ($(python3 -c "print(f'{$SIZE / 1048576 / $wall:.2f}')") MiB/s), wire down $down, $conns conn"
    if [ "$status" != ok ]; then
      say "  $(tail -c 400 "$d/tool.log" | tr '\n\t' '  ')"
    fi
    mkdir -p "$OUT/raw"
    cp "$d/stats.json" "$OUT/raw/$arm-$rep.stats.json" 2>/dev/null || true
    cp "$d/tool.log" "$OUT/raw/$arm-$rep.log" 2>/dev/null || true
    cp "$out.summary.json" "$OUT/raw/$arm-$rep.summary.json" 2>/dev/null || true
    rm -rf "$d"
  done
done

# --- report ----------------------------------------------------------------------------------
{
  echo "# sftp-openssh: $(date -u +%Y-%m-%dT%H:%MZ), commit $COMMIT, $(nproc) cores"
  echo
  echo '```'
  cat "$OUT/versions.txt"
  echo '```'
  echo
  $HELPER report "$OUT"
  echo
  echo "Commands (WORK = the temporary work directory; first repetition):"
  echo
  echo '```'
  cut -f2 "$OUT/commands.tsv"
  echo '```'
} > "$OUT/report.md"
cat "$OUT/report.md"
[ "$KEEP" = 1 ] && say "raw results in $OUT"
exit 0
