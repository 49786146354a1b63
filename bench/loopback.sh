#!/usr/bin/env bash
# One local HTTP origin at full speed, no shaping: `hydra get` against `curl -o` on the same
# nginx (sendfile on), both writing to a tmpfs. Per client and repetition: wall time,
# throughput, CPU seconds per GiB (user + sys from /usr/bin/time -v) and peak RSS; then the
# medians of REPS repetitions, curl and hydra interleaved. Every output is compared with the
# object byte for byte. Loopback only.
#
# Usage: bash bench/loopback.sh [SIZE_MIB] [REPS]     (default 1024 MiB, 3 repetitions)
# Env:   HYDRA=path/to/hydra   measure another build (default: target/dist/hydra, built)
#        LOOPBACK_DIR=DIR      where the object and outputs live (default: a dir in /dev/shm)
# Installs nginx and time with apt-get when missing (needs root).
set -euo pipefail
cd "$(dirname "$0")/.."
size_mib=${1:-1024}
reps=${2:-3}
unset http_proxy https_proxy all_proxy no_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY NO_PROXY HYDRA_PROXY

nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
if [[ ! -x $nginx_bin || ! -x /usr/bin/time ]]; then
    [[ $(id -u) == 0 ]] || { echo "loopback: nginx or /usr/bin/time missing; run as root to install" >&2; exit 1; }
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx time >/dev/null
    nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
fi
if [[ -z ${HYDRA:-} ]]; then
    cargo build -q --profile dist --locked -p hydra-cli
    HYDRA=target/dist/hydra
fi

base=${LOOPBACK_DIR:-/dev/shm}
work=$(mktemp -d "$base/hydra-loopback.XXXXXX")
chmod 755 "$work"
nginx_pid=
cleanup() {
    [[ -n $nginx_pid ]] && { kill "$nginx_pid" 2>/dev/null || true; wait "$nginx_pid" 2>/dev/null || true; }
    rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/www"
head -c $((size_mib * 1048576)) /dev/urandom >"$work/www/object.bin"
chmod 644 "$work/www/object.bin"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$work/nginx.conf" <<CONF
daemon off;
worker_processes 1;
pid $work/nginx.pid;
error_log $work/nginx.err warn;
events { worker_connections 64; }
http {
    access_log off;
    sendfile on;
    client_body_temp_path $work/t-body;
    proxy_temp_path $work/t-proxy;
    fastcgi_temp_path $work/t-fastcgi;
    uwsgi_temp_path $work/t-uwsgi;
    scgi_temp_path $work/t-scgi;
    server { listen 127.0.0.1:$port; root $work/www; }
}
CONF
"$nginx_bin" -p "$work" -c "$work/nginx.conf" &
nginx_pid=$!
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
url=http://127.0.0.1:$port/object.bin

# One run of a client: "client rep wall_s user_s sys_s rss_kib" on stdout.
measure() {
    local client=$1 rep=$2 out=$work/out.bin
    rm -f "$out"
    case $client in
        curl) /usr/bin/time -v -o "$work/time" curl -s -o "$out" "$url" ;;
        hydra) HYDRA_STATE_DIR=$work/state /usr/bin/time -v -o "$work/time" \
            "$HYDRA" get -q --no-host-memory "$url" -o "$out" ;;
    esac
    cmp -s "$out" "$work/www/object.bin" || { echo "loopback: $client rep $rep: output differs" >&2; exit 1; }
    rm -f "$out"
    python3 - "$client" "$rep" "$work/time" <<'PY'
import sys
client, rep, path = sys.argv[1:4]
f = {}
for line in open(path):
    k, _, v = line.strip().rpartition(": ")
    f[k] = v
wall = 0.0
for part in f["Elapsed (wall clock) time (h:mm:ss or m:ss)"].split(":"):
    wall = wall * 60 + float(part)
print(client, rep, wall, f["User time (seconds)"], f["System time (seconds)"],
      f["Maximum resident set size (kbytes)"])
PY
}

{
    for rep in $(seq "$reps"); do
        measure curl "$rep"
        measure hydra "$rep"
    done
} >"$work/runs"

python3 - "$work/runs" "$size_mib" <<'PY'
import statistics, sys
runs, size_mib = sys.argv[1], int(sys.argv[2])
gib = size_mib / 1024
rows = {}
for line in open(runs):
    c, rep, wall, user, sys_, rss = line.split()
    rows.setdefault(c, []).append((float(wall), float(user) + float(sys_), int(rss)))
print(f"object: {size_mib} MiB from one nginx on 127.0.0.1, written to tmpfs; {len(rows['curl'])} repetitions, medians")
print()
print("| client | wall s | MiB/s | CPU s (user+sys) | CPU s/GiB | peak RSS MB | per rep: wall s / CPU s / RSS MB |")
print("|---|---:|---:|---:|---:|---:|---|")
med = {}
for c in ("curl", "hydra"):
    r = rows[c]
    wall = statistics.median(x[0] for x in r)
    cpu = statistics.median(x[1] for x in r)
    rss = statistics.median(x[2] for x in r) / 1000
    med[c] = (wall, cpu, rss)
    reps = ", ".join(f"{w:.2f} / {u:.2f} / {k / 1000:.1f}" for w, u, k in r)
    print(f"| {c} | {wall:.2f} | {size_mib / wall:.0f} | {cpu:.2f} | {cpu / gib:.2f} | {rss:.1f} | {reps} |")
(hw, hc, hr), (cw, cc, cr) = med["hydra"], med["curl"]
print()
print(f"hydra/curl: throughput {cw / hw:.2f}x, CPU {hc / cc:.2f}x, peak RSS {hr:.1f} MB against {cr:.1f} MB")
PY
