#!/usr/bin/env bash
# hydra side by side with the tools users would pick instead (aria2c, axel, lftp pget,
# rclone, curl), through faultnet links on loopback.
#
# For each scenario in bench/peers/*.toml: start one reference origin per mirror, of the
# scenario's protocol (`# bench: protocol=ftp|sftp`, default http: schemes/http/examples/
# serve.rs, schemes/ftp/examples/serve.rs = serve-ftp, schemes/sftp/examples/serve.rs =
# serve-sftp; one size and seed, so the same object everywhere) and, for every single run, a
# fresh `faultnet proxy --scenario` (`--ftp` for FTP, so passive data connections cross the
# same link; events replay and the link stats are that run's alone); run each tool that
# speaks the protocol in turn, rotating the order every repetition (the others are skipped
# with a note); verify every output's sha256 against a direct unshaped copy from an HTTP
# origin of the same size and seed; record wall time, wire bytes (sum of bytes_down over
# the links) and connections. Then peak RSS of every tool on 1 MB, 32 MB and 1 GiB unshaped
# loopback downloads (`/usr/bin/time -v`). Ends with a markdown report (bench/peers/report.py).
#
# Every tool invocation runs under `timeout` (10 × the fluid oracle + 30 s): a run that is
# killed is recorded as `dnf`, and that tool's remaining repetitions of the scenario are
# skipped (noted). Loopback only; every process started here is stopped on exit.
#
# Usage: bash bench/peers.sh [--reps N] [--scenarios a,b,...] [--tools t1,t2,...]
#                            [--out DIR] [--no-memory] [--no-build] [--no-install]
#   --reps N        repetitions per scenario and tool (default 3)
#   --scenarios     names of bench/peers/NAME.toml (default: the seven HTTP ones, in the order
#                   below; the FTP/SFTP variants are named explicitly: saturated-ftp,
#                   headroom-ftp, saturated-sftp, headroom-sftp)
#   --tools         subset of: hydra hydra-warm aria2c axel lftp rclone curl (default: all)
#                   hydra runs with an empty host memory every time (a first download);
#                   hydra-warm with the memory one untimed hydra run through the same links
#                   left before the scenario's repetitions (a second download from the same
#                   hosts: it opens the connection count that run found, within a day);
#                   hydra-base a first download by the binary HYDRA_BASE names (another
#                   build, e.g. the parent commit's), in the same rotation as hydra: the
#                   runs of a change and of its base alternate
#   --out DIR       keep raw results there (runs.tsv, stats, hydra summaries, report.md);
#                   default a temporary directory, removed on exit
#   --no-memory     skip the peak-RSS runs
#   --no-build      use the binaries already in ${CARGO_TARGET_DIR:-target}/release
#   --no-install    do not apt-get install missing peer tools
# Environment: HYDRA_BASE (the binary hydra-base runs); HYDRA_EXTRA (words added to
#   `hydra get`, for diagnostics, e.g.
#   HYDRA_EXTRA='--fixed-connections 4' bash bench/peers.sh --scenarios headroom --tools hydra);
#   ARIA2C_FLAGS (aria2c's connection options, default '-x 16 -s 16 -k 1M
#   --uri-selector=adaptive'; issue #29 measured '-x 4 -s 8 -k 1M');
#   PEERS_PORTS=ORIGIN_BASE,PROXY_BASE (default 28400,28500: origins on ORIGIN_BASE+i, +50
#   and +60; links on PROXY_BASE+i) for a second run on the same machine.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)

REPS=3
SCENARIOS="saturated,headroom,mirrors,opening,collapse,die,rtt150"
TOOLS="hydra,hydra-warm,aria2c,axel,lftp,rclone,curl"
OUT=""
MEMORY=1
BUILD=1
INSTALL=1
HYDRA_EXTRA=${HYDRA_EXTRA:-}
ARIA2C_FLAGS=${ARIA2C_FLAGS:--x 16 -s 16 -k 1M --uri-selector=adaptive}
while [ $# -gt 0 ]; do
  case "$1" in
    --reps) REPS=$2; shift 2 ;;
    --scenarios) SCENARIOS=$2; shift 2 ;;
    --tools) TOOLS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --no-memory) MEMORY=0; shift ;;
    --no-build) BUILD=0; shift ;;
    --no-install) INSTALL=0; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    *) echo "peers.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
case "$REPS" in ''|*[!0-9]*) echo "peers.sh: --reps wants a number" >&2; exit 2 ;; esac
[ "$REPS" -ge 1 ] && [ "$REPS" -le 50 ] || { echo "peers.sh: --reps 1..50" >&2; exit 2; }

if [ "$BUILD" = 1 ]; then
  cargo build -q --release -p hydra-cli -p faultnet
  cargo build -q --release -p hydra-scheme-http -p hydra-scheme-ftp -p hydra-scheme-sftp \
    --features hydra-scheme-http/origin,hydra-scheme-ftp/origin,hydra-scheme-sftp/origin \
    --example serve --example serve-ftp --example serve-sftp
fi
BIN=${CARGO_TARGET_DIR:-$REPO/target}/release
for b in "$BIN/hydra" "$BIN/faultnet" "$BIN/examples/serve"; do
  [ -x "$b" ] || { echo "peers.sh: missing $b (build first)" >&2; exit 1; }
done
HELPER="python3 $REPO/bench/peers/report.py"

T=$(mktemp -d)
KEEP=0
if [ -n "$OUT" ]; then mkdir -p "$OUT"; KEEP=1; else OUT="$T/out"; mkdir -p "$OUT"; fi
OUT=$(cd "$OUT" && pwd)
PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && wait "$p" 2>/dev/null || true; done
  rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

note() { printf '%s\n' "$*" >> "$OUT/notes.tsv"; echo "peers.sh: $*" >&2; }
: > "$OUT/runs.tsv"; : > "$OUT/commands.tsv"; : > "$OUT/scenarios.tsv"; : > "$OUT/notes.tsv"
: > "$OUT/memory.tsv"
printf '# scenario\ttool\trep\tstatus\twall_s\twire_bytes\tconnections\trc\n' >> "$OUT/runs.tsv"

# --- the peer tools ----------------------------------------------------------------------
declare -A PKG=([aria2c]=aria2 [axel]=axel [lftp]=lftp [rclone]=rclone [curl]=curl)
IFS=, read -r -a TOOL_LIST <<< "$TOOLS"
missing=()
for t in "${TOOL_LIST[@]}"; do
  case $t in hydra|hydra-warm|hydra-base) continue ;; esac
  [ -n "${PKG[$t]:-}" ] || { echo "peers.sh: unknown tool $t" >&2; exit 2; }
  command -v "$t" >/dev/null || missing+=("${PKG[$t]}")
done
if [ ${#missing[@]} -gt 0 ] && [ "$INSTALL" = 1 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "peers.sh: installing ${missing[*]}" >&2
  timeout 300 apt-get update -qq >/dev/null 2>&1 || true
  DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1 || true
fi
ACTIVE=()
for t in "${TOOL_LIST[@]}"; do
  if [ "$t" = hydra-base ]; then
    if [ -x "${HYDRA_BASE:-}" ]; then ACTIVE+=("$t")
    else note "skipped hydra-base: HYDRA_BASE names no executable"; fi
  elif [ "$t" = hydra ] || [ "$t" = hydra-warm ] || command -v "$t" >/dev/null; then ACTIVE+=("$t")
  else note "skipped $t: not installed (package ${PKG[$t]})"; fi
done
{
  echo "versions:"
  "$BIN/hydra" --version 2>/dev/null | head -1 || echo "hydra $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null)"
  for t in "${ACTIVE[@]}"; do
    case $t in
      aria2c) aria2c --version | head -1 ;;
      axel) axel --version | head -1 ;;
      lftp) lftp --version | head -1 ;;
      rclone) rclone version | head -1 ;;
      curl) curl --version | head -1 ;;
      hydra-base) echo "hydra-base: $HYDRA_BASE" ;;
    esac
  done
} > "$OUT/versions.txt" 2>&1 || true
: > "$T/rclone.conf"

# speaks TOOL PROTOCOL: whether the tool can fetch over that protocol at all.
speaks() {
  case "$2:$1" in
    http:*|ftp:*) return 0 ;;
    sftp:axel) return 1 ;;    # axel: http, https, ftp, ftps only
    sftp:*) return 0 ;;       # aria2c and curl via libssh2, lftp via ssh, rclone's sftp backend
  esac
  return 1
}

# Credentials of the FTP/SFTP scenarios (set per scenario): FTP logs in as hydra/hydra (the
# origin takes any login); SFTP as the origin's user with its password, the host key checked
# against $T/known_hosts (written for the proxy ports) by every tool that can check it.
FTP_USER=hydra; FTP_PASS=hydra
SFTP_USER=""; SFTP_PASS=""; SFTP_SHA1=""; SFTP_SHA256=""

# tool_cmd TOOL OUTFILE URL... -> fills the array CMD. Single-source tools get the first URL
# (the scenarios list the fastest, healthy mirror first: their best case).
tool_cmd() {
  local tool=$1 out=$2; shift 2
  local first=$1
  local hostport=${first#*://}; hostport=${hostport#*@}; hostport=${hostport%%/*}
  local host=${hostport%:*} port=${hostport##*:}
  case $PROTOCOL:$tool in
    *:hydra|*:hydra-warm|*:hydra-base)
      # the host memory: an empty one per run (hydra, hydra-base), or the scenario's
      # (hydra-warm)
      local state="$(dirname "$out")/state" bin="$BIN/hydra"
      [ "$tool" = hydra-warm ] && state="$T/warm-$SCEN"
      [ "$tool" = hydra-base ] && bin=$HYDRA_BASE
      CMD=(env HYDRA_STATE_DIR="$state" "$bin" get -q $HYDRA_EXTRA "$@" -o "$out"
           --summary-json "$out.summary.json")
      if [ "$PROTOCOL" = sftp ]; then CMD+=(--known-hosts "$T/known_hosts"); fi ;;
    *:aria2c)
      CMD=(aria2c -q --allow-overwrite=true --auto-file-renaming=false
           --file-allocation=none --console-log-level=error
           $ARIA2C_FLAGS)
      if [ "$PROTOCOL" = sftp ]; then CMD+=(--ssh-host-key-md="sha-1=$SFTP_SHA1"); fi
      CMD+=(-d "$(dirname "$out")" -o "$(basename "$out")" "$@") ;;
    *:axel) CMD=(axel -q -n 8 -o "$out" "$@") ;;
    sftp:lftp)
      # lftp runs `ssh` per connection; the password from the URL answers its prompt
      CMD=(lftp -c "set sftp:connect-program 'ssh -a -x -o UserKnownHostsFile=$T/known_hosts -o StrictHostKeyChecking=yes -o PubkeyAuthentication=no'; set xfer:clobber on; pget -n 8 '$first' -o '$out'") ;;
    *:lftp) CMD=(lftp -c "set xfer:clobber on; pget -n 8 '$first' -o '$out'") ;;
    http:rclone)
      CMD=(rclone --config "$T/rclone.conf" -q copyto
           --http-url "${first%/*}/" ":http:${first##*/}" "$out"
           --multi-thread-streams 8 --multi-thread-cutoff 1M) ;;
    ftp:rclone)
      CMD=(rclone --config "$T/rclone.conf" -q copyto
           ":ftp,host=$host,port=$port,user=$FTP_USER,pass=$RCLONE_PASS:${first##*/}" "$out"
           --multi-thread-streams 8 --multi-thread-cutoff 1M) ;;
    sftp:rclone)
      # shell_type=none, disable_hashcheck: the origin runs no remote commands (md5sum…)
      CMD=(rclone --config "$T/rclone.conf" -q copyto
           ":sftp,host=$host,port=$port,user=$SFTP_USER,pass=$RCLONE_PASS,known_hosts_file=$T/known_hosts,shell_type=none,disable_hashcheck=true:${first##*/}"
           "$out" --multi-thread-streams 8 --multi-thread-cutoff 1M) ;;
    sftp:curl) CMD=(curl -sSf --hostpubsha256 "$SFTP_SHA256" -o "$out" "$first") ;;
    *:curl) CMD=(curl -sSf -o "$out" "$first") ;;
  esac
}

show_cmd() { # CMD as one shell line, temporary paths shortened
  python3 -c 'import shlex, sys
q = lambda a: chr(34) + a + chr(34) if "\x27" in a and not any(c in a for c in "\"$`\\") else shlex.quote(a)
print(" ".join(q(a) for a in sys.argv[1:]))' "${CMD[@]}" |
    sed "s#$T/run#DIR#g; s#$BIN/##g; s#$T/#TMP/#g"
}

# --- processes ---------------------------------------------------------------------------
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
wait_lines() { # FILE PATTERN COUNT: up to 10 s
  local i
  for i in $(seq 1 200); do
    [ "$(grep -c "$2" "$1" 2>/dev/null || true)" -ge "$3" ] 2>/dev/null && return 0
    sleep 0.05
  done
  echo "peers.sh: timed out waiting for $2 in $1" >&2; cat "$1" >&2; return 1
}
wait_port() { # PORT: up to 10 s
  local i
  for i in $(seq 1 200); do
    (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0
    sleep 0.05
  done
  echo "peers.sh: port $1 never opened" >&2; return 1
}

# origins on OBASE+i (+50 the reference copy, +60 the memory runs), links on PBASE+i;
# PEERS_PORTS=OBASE,PBASE moves them (two runs on one machine must not share ports)
IFS=, read -r OBASE PBASE <<< "${PEERS_PORTS:-28400,28500}"
case "$OBASE$PBASE" in ''|*[!0-9]*) echo "peers.sh: PEERS_PORTS wants two numbers" >&2; exit 2 ;; esac

# --- scenarios ---------------------------------------------------------------------------
IFS=, read -r -a SCEN_LIST <<< "$SCENARIOS"
for s in "${SCEN_LIST[@]}"; do
  f="$REPO/bench/peers/$s.toml"
  [ -f "$f" ] || { echo "peers.sh: no scenario $f" >&2; exit 2; }
  eval "$($HELPER prepare "$f" "$T/$s.live.toml" $OBASE $PBASE)"
  "$BIN/faultnet" check "$T/$s.live.toml" > /dev/null
  TO=$(python3 -c "print(int(10 * $ORACLE + 30))")
  printf '%s\t%s\t%s\t%s\t%s\n' "$s" "$SIZE" "$ORACLE" "$NLINKS" "$DESCRIPTION" >> "$OUT/scenarios.tsv"
  echo "== $s ($PROTOCOL): $DESCRIPTION (oracle ${ORACLE} s, timeout ${TO} s)" >&2
  case $PROTOCOL in
    ftp|sftp) [ -x "$BIN/examples/serve-$PROTOCOL" ] || {
      echo "peers.sh: missing $BIN/examples/serve-$PROTOCOL (build first)" >&2; exit 1; } ;;
  esac
  SCEN_TOOLS=()
  for t in "${ACTIVE[@]}"; do
    if speaks "$t" "$PROTOCOL"; then SCEN_TOOLS+=("$t")
    else note "$s: $t skipped: it does not speak $PROTOCOL"; fi
  done
  PROXY_EXTRA=()
  if [ "$PROTOCOL" = ftp ]; then PROXY_EXTRA=(--ftp); fi
  ORIGINS=()
  URLS=()
  : > "$T/known_hosts"
  for i in $(seq 0 $((NLINKS - 1))); do
    case $PROTOCOL in
      http)
        start_bg "$T/serve$i.log" "$BIN/examples/serve" "$SIZE" 5 $((OBASE + i)) $ORIGIN_RATE
        URLS+=("http://127.0.0.1:$((PBASE + i))/object") ;;
      ftp)
        start_bg "$T/serve$i.log" "$BIN/examples/serve-ftp" "$SIZE" 5 $((OBASE + i))
        URLS+=("ftp://$FTP_USER:$FTP_PASS@127.0.0.1:$((PBASE + i))/object.bin") ;;
      sftp)
        start_bg "$T/serve$i.log" "$BIN/examples/serve-sftp" "$SIZE" 5 $((OBASE + i)) ;;
    esac
    ORIGINS+=("$LASTPID")
  done
  for i in $(seq 0 $((NLINKS - 1))); do wait_port $((OBASE + i)); done
  case $PROTOCOL in
    ftp) RCLONE_PASS=$(rclone obscure "$FTP_PASS" 2>/dev/null || true) ;;
    sftp)
      for i in $(seq 0 $((NLINKS - 1))); do
        wait_lines "$T/serve$i.log" "^known_hosts " 1
        SFTP_USER=$(sed -n 's/^user //p' "$T/serve$i.log")
        SFTP_PASS=$(sed -n 's/^password //p' "$T/serve$i.log")
        hk=$(sed -n 's/^host_key //p' "$T/serve$i.log")
        # the clients reach the origin at the proxy's port: that is the port the key is for
        echo "[127.0.0.1]:$((PBASE + i)) $hk" >> "$T/known_hosts"
        URLS+=("sftp://$SFTP_USER:$SFTP_PASS@127.0.0.1:$((PBASE + i))/object.bin")
      done
      # aria2c checks a SHA-1 of the first host key, curl a base64 SHA-256 (every origin has
      # the same key: host-key seed 1)
      SFTP_SHA1=$(python3 -c 'import base64, hashlib, sys
print(hashlib.sha1(base64.b64decode(sys.argv[1].split()[1])).hexdigest())' "$hk")
      SFTP_SHA256=$(sed -n 's/^fingerprint SHA256://p' "$T/serve0.log")
      RCLONE_PASS=$(rclone obscure "$SFTP_PASS" 2>/dev/null || true) ;;
  esac
  # the reference copy: unshaped, straight from the first origin (no rate limit on it would be
  # nicer, but a 1 MB/s origin still gives the right bytes); for FTP and SFTP, from an HTTP
  # origin of the same size and seed (the origins share one content generator, so this also
  # checks that the protocols serve the same bytes)
  if [ -z "$ORIGIN_RATE" ] && [ "$PROTOCOL" = http ]; then
    curl -sSf -o "$T/ref.bin" "http://127.0.0.1:$OBASE/object"
    REF=$(sha256sum "$T/ref.bin" | cut -d' ' -f1)
  else
    # same object, same seed, from an unlimited origin of the same size
    start_bg "$T/serve-ref.log" "$BIN/examples/serve" "$SIZE" 5 $((OBASE + 50))
    refpid=$LASTPID
    wait_port $((OBASE + 50))
    curl -sSf -o "$T/ref.bin" "http://127.0.0.1:$((OBASE + 50))/object"
    REF=$(sha256sum "$T/ref.bin" | cut -d' ' -f1)
    stop_pid "$refpid"
  fi
  rm -f "$T/ref.bin"
  SCEN=$s
  if [[ " ${SCEN_TOOLS[*]} " == *" hydra-warm "* ]]; then
    # one untimed run teaches hydra-warm's host memory
    d="$T/run"; rm -rf "$d"; mkdir -p "$d"; rm -rf "$T/warm-$s"
    tool_cmd hydra-warm "$d/out.bin" "${URLS[@]}"
    start_bg "$d/proxy.log" "$BIN/faultnet" proxy --scenario "$T/$s.live.toml" --seed 1 \
      --stats "$d/stats.json" "${PROXY_EXTRA[@]}"
    proxy=$LASTPID
    wait_lines "$d/proxy.log" "listening on" "$NLINKS"
    (cd "$d" && timeout -k 5 "$TO" "${CMD[@]}" > "$d/tool.log" 2>&1) || true
    stop_pid "$proxy"
    note "$s: hydra-warm's memory: $(tr -d ' \n' < "$T/warm-$s/hosts.json" 2>/dev/null || echo none)"
    rm -rf "$d"
  fi
  declare -A DNF=()
  for rep in $(seq 1 "$REPS"); do
    n=${#SCEN_TOOLS[@]}
    for k in $(seq 0 $((n - 1))); do
      tool=${SCEN_TOOLS[$(((k + rep - 1) % n))]}
      if [ -n "${DNF[$tool]:-}" ]; then
        note "$s: $tool repetition $rep skipped (did not finish in repetition ${DNF[$tool]})"
        continue
      fi
      d="$T/run"; rm -rf "$d"; mkdir -p "$d"
      out="$d/out.bin"
      tool_cmd "$tool" "$out" "${URLS[@]}"
      printf '%s\t%s\t%s\n' "$s" "$tool" "$(show_cmd)" >> "$OUT/commands.tsv"
      start_bg "$d/proxy.log" "$BIN/faultnet" proxy --scenario "$T/$s.live.toml" --seed 1 \
        --stats "$d/stats.json" "${PROXY_EXTRA[@]}"
      proxy=$LASTPID
      wait_lines "$d/proxy.log" "listening on" "$NLINKS"
      t0=$EPOCHREALTIME
      rc=0
      (cd "$d" && timeout -k 5 "$TO" "${CMD[@]}" > "$d/tool.log" 2>&1) || rc=$?
      t1=$EPOCHREALTIME
      stop_pid "$proxy"
      wall=$(python3 -c "print(f'{$t1 - $t0:.3f}')")
      wl=$($HELPER wire "$d/stats.json" 2>/dev/null || echo "0 0")
      read -r wirebytes conns <<< "${wl%%$'\n'*}"
      if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then status=dnf; DNF[$tool]=$rep
      elif [ "$rc" != 0 ]; then status=fail
      elif [ ! -f "$out" ] || [ "$(sha256sum "$out" | cut -d' ' -f1)" != "$REF" ]; then status=bad
      else status=ok; fi
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$s" "$tool" "$rep" "$status" "$wall" \
        "$wirebytes" "$conns" "$rc" >> "$OUT/runs.tsv"
      echo "   rep $rep $tool: $status ${wall} s, wire $wirebytes, $conns conn" >&2
      if [ "$status" != ok ]; then
        note "$s rep $rep $tool: $status (exit $rc): $(tail -c 300 "$d/tool.log" | tr '\n\t' '  ')"
      fi
      mkdir -p "$OUT/raw/$s"
      cp "$d/stats.json" "$OUT/raw/$s/$tool-$rep.stats.json" 2>/dev/null || true
      case $tool in hydra|hydra-warm|hydra-base)
        cp "$out.summary.json" "$OUT/raw/$s/$tool-$rep.summary.json" 2>/dev/null || true ;;
      esac
      rm -rf "$d"
    done
  done
  unset DNF
  for p in "${ORIGINS[@]}"; do stop_pid "$p"; done
done

# --- memory --------------------------------------------------------------------------------
if [ "$MEMORY" = 1 ]; then
  PROTOCOL=http
  printf '# size\ttool\tstatus\tmaxrss_kb\twall_s\n' >> "$OUT/memory.tsv"
  for sz in 1M 32M 1Gi; do
    port=$((OBASE + 60))
    start_bg "$T/serve-mem.log" "$BIN/examples/serve" "$sz" 3 $port
    mempid=$LASTPID
    wait_port $port
    url="http://127.0.0.1:$port/object"
    curl -sSf -o "$T/ref.bin" "$url"
    REF=$(sha256sum "$T/ref.bin" | cut -d' ' -f1); rm -f "$T/ref.bin"
    for tool in "${ACTIVE[@]}"; do
      [ "$tool" = hydra-warm ] && continue   # the same process as hydra here
      d="$T/run"; rm -rf "$d"; mkdir -p "$d"; out="$d/out.bin"
      tool_cmd "$tool" "$out" "$url"
      printf '%s\t%s\t%s\n' "memory" "$tool" "$(show_cmd)" >> "$OUT/commands.tsv"
      rc=0
      (cd "$d" && /usr/bin/time -v -o "$d/time.txt" timeout -k 5 300 "${CMD[@]}" > "$d/tool.log" 2>&1) || rc=$?
      rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$d/time.txt" 2>/dev/null || echo 0)
      el=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$d/time.txt" 2>/dev/null | \
        python3 -c "import sys; p=sys.stdin.read().strip().split(':'); print(sum(float(x)*60**i for i,x in enumerate(reversed(p))) if p!=[''] else 0)")
      if [ "$rc" != 0 ]; then status="fail($rc)"
      elif [ "$(sha256sum "$out" | cut -d' ' -f1)" != "$REF" ]; then status=bad
      else status=ok; fi
      printf '%s\t%s\t%s\t%s\t%s\n' "$sz" "$tool" "$status" "${rss:-0}" "${el:-0}" >> "$OUT/memory.tsv"
      echo "   memory $sz $tool: $status rss ${rss:-?} kB, ${el:-?} s" >&2
      rm -rf "$d"
    done
    stop_pid "$mempid"
  done
fi

# --- report --------------------------------------------------------------------------------
{
  echo "# peers: $(date -u +%Y-%m-%dT%H:%MZ), $REPS repetitions, $(nproc) cores"
  echo
  echo '```'
  cat "$OUT/versions.txt"
  echo '```'
  echo
  $HELPER report "$OUT"
} > "$OUT/report.md"
cat "$OUT/report.md"
[ "$KEEP" = 1 ] && echo "peers.sh: raw results in $OUT" >&2
exit 0
