#!/usr/bin/env bash
# Interop arm of the conformance suite: hydra against servers nobody here wrote —
# nginx (HTTP), vsftpd (FTP) and OpenSSH's sshd + sftp-server (SFTP) — started on 127.0.0.1
# on unprivileged ports, each fetched with `hydra get` (4 connections, sha256 checked), then
# all three at once as mirrors of one object, directly and through faultnet links.
#
# Usage: conformance/interop/run.sh            (from anywhere; builds hydra and faultnet)
# Env:   CARGO_TARGET_DIR   where cargo builds (default: <repo>/target)
#        INTEROP_SIZE       object size in bytes (default 8388608)
#        INTEROP_NO_INSTALL set to 1 to never call apt-get
# Installs nginx, vsftpd and openssh-server with apt-get when missing (needs root). Every
# server and proxy is stopped and the work directory removed on exit. Exit 0 = every fetch
# was byte-exact.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
size=${INTEROP_SIZE:-8388608}
target=${CARGO_TARGET_DIR:-$repo/target}
work=$(mktemp -d /tmp/hydra-interop.XXXXXX)
chmod 755 "$work"
pids=()

cleanup() {
    local p
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

say() { printf 'interop: %s\n' "$*"; }
die() { say "FAIL: $*"; exit 1; }

find_bin() { # first existing of: PATH lookup, then the given absolute paths
    local name=$1; shift
    command -v "$name" 2>/dev/null && return 0
    local c
    for c in "$@"; do [[ -x $c ]] && { echo "$c"; return 0; }; done
    return 1
}

nginx_bin=$(find_bin nginx /usr/sbin/nginx || true)
vsftpd_bin=$(find_bin vsftpd /usr/sbin/vsftpd || true)
sshd_bin=$(find_bin sshd /usr/sbin/sshd || true)
sftp_server=$(find_bin sftp-server /usr/lib/openssh/sftp-server /usr/libexec/openssh/sftp-server /usr/libexec/sftp-server || true)
if [[ -z $nginx_bin || -z $vsftpd_bin || -z $sshd_bin || -z $sftp_server ]]; then
    [[ ${INTEROP_NO_INSTALL:-0} == 1 ]] && die "nginx, vsftpd or sshd missing and INTEROP_NO_INSTALL=1"
    [[ $(id -u) == 0 ]] || die "nginx, vsftpd or sshd missing; run as root to install them"
    say "installing nginx vsftpd openssh-server"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx vsftpd openssh-server >/dev/null
    nginx_bin=$(find_bin nginx /usr/sbin/nginx) || die "no nginx after install"
    vsftpd_bin=$(find_bin vsftpd /usr/sbin/vsftpd) || die "no vsftpd after install"
    sshd_bin=$(find_bin sshd /usr/sbin/sshd) || die "no sshd after install"
    sftp_server=$(find_bin sftp-server /usr/lib/openssh/sftp-server /usr/libexec/openssh/sftp-server) || die "no sftp-server after install"
fi

say "building hydra and faultnet"
(cd "$repo" && CARGO_TARGET_DIR=$target cargo build -q -p hydra-cli -p faultnet)
hydra=$target/debug/hydra
faultnet=$target/debug/faultnet

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
wait_port() { # port, name: up to 10 s
    local i
    for i in $(seq 1 100); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.1
    done
    die "$2 did not listen on 127.0.0.1:$1"
}

# The object, readable by the servers' unprivileged workers.
mkdir -p "$work/www" "$work/empty"
head -c "$size" /dev/urandom >"$work/www/object.bin"
chmod 755 "$work/www" && chmod 644 "$work/www/object.bin"
sha=$(sha256sum "$work/www/object.bin" | cut -d' ' -f1)
say "object: $size bytes, sha256 $sha"

# nginx
hp=$(free_port)
cat >"$work/nginx.conf" <<CONF
daemon off;
worker_processes 1;
pid $work/nginx.pid;
error_log $work/nginx.err warn;
events { worker_connections 64; }
http {
    access_log off;
    client_body_temp_path $work/nginx-body;
    proxy_temp_path $work/nginx-proxy;
    fastcgi_temp_path $work/nginx-fastcgi;
    uwsgi_temp_path $work/nginx-uwsgi;
    scgi_temp_path $work/nginx-scgi;
    server { listen 127.0.0.1:$hp; root $work/www; }
}
CONF
"$nginx_bin" -p "$work" -c "$work/nginx.conf" &
pids+=($!)

# vsftpd: anonymous, read-only, passive ports on loopback.
fp=$(free_port)
pasv_lo=$(( (fp % 20000) + 30000 ))
cat >"$work/vsftpd.conf" <<CONF
listen=YES
listen_ipv6=NO
listen_address=127.0.0.1
listen_port=$fp
background=NO
anonymous_enable=YES
no_anon_password=YES
anon_root=$work/www
local_enable=NO
write_enable=NO
pasv_enable=YES
pasv_address=127.0.0.1
pasv_min_port=$pasv_lo
pasv_max_port=$((pasv_lo + 50))
secure_chroot_dir=$work/empty
seccomp_sandbox=NO
xferlog_enable=NO
vsftpd_log_file=$work/vsftpd.log
CONF
[[ $(id -u) == 0 ]] || echo "run_as_launching_user=YES" >>"$work/vsftpd.conf"
"$vsftpd_bin" "$work/vsftpd.conf" &
pids+=($!)

# sshd with OpenSSH's sftp-server; a fresh host key and client key.
sp=$(free_port)
ssh-keygen -q -t ed25519 -N '' -f "$work/host_key"
ssh-keygen -q -t ed25519 -N '' -f "$work/id_ed25519"
cp "$work/id_ed25519.pub" "$work/authorized_keys"
chmod 600 "$work/authorized_keys"
echo "[127.0.0.1]:$sp $(cut -d' ' -f1,2 "$work/host_key.pub")" >"$work/known_hosts"
cat >"$work/sshd_config" <<CONF
Port $sp
ListenAddress 127.0.0.1
HostKey $work/host_key
PidFile $work/sshd.pid
AuthorizedKeysFile $work/authorized_keys
StrictModes no
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
Subsystem sftp $sftp_server
CONF
[[ $(id -u) == 0 ]] && mkdir -p /run/sshd
"$sshd_bin" -D -e -f "$work/sshd_config" 2>"$work/sshd.log" &
pids+=($!)

wait_port "$hp" nginx
wait_port "$fp" vsftpd
wait_port "$sp" sshd
user=$(id -un)
http_url="http://127.0.0.1:$hp/object.bin"
ftp_url="ftp://127.0.0.1:$fp/object.bin"
sftp_url="sftp://$user@127.0.0.1:$sp$work/www/object.bin"
sftp_flags=(--known-hosts "$work/known_hosts" -i "$work/id_ed25519")

fetch() { # name, hydra get arguments...
    local name=$1; shift
    local out="$work/out.$name"
    local t0 rc=0
    t0=$(date +%s%N)
    timeout 120 "$hydra" get -q --timeout 10 --fixed-connections 4 \
        --checksum "sha256=$sha" -o "$out" "$@" || rc=$?
    [[ $rc == 0 ]] || die "$name: hydra get failed (exit $rc)"
    local got
    got=$(sha256sum "$out" | cut -d' ' -f1)
    [[ $got == "$sha" ]] || die "$name: sha256 $got, want $sha"
    printf 'interop: ok   %-28s %6d ms  sha256 verified\n' "$name" $(( ($(date +%s%N) - t0) / 1000000 ))
    rm -f "$out"
}

fetch nginx "$http_url"
fetch vsftpd "$ftp_url"
fetch openssh-sftp "${sftp_flags[@]}" "$sftp_url"
fetch all-three-as-mirrors "${sftp_flags[@]}" "$http_url" "$ftp_url" "$sftp_url"

# The same three behind faultnet links (20 ms each way, 3 MB/s each; FTP-aware for vsftpd).
proxy() { # proxy port, upstream port, extra flags... (runs in this shell, so it is cleaned up)
    "$faultnet" proxy --listen "127.0.0.1:$1" --upstream "127.0.0.1:$2" \
        --latency 20ms --bandwidth 3MB/s --seed 7 "${@:3}" >"$work/faultnet.$2.log" 2>&1 &
    pids+=($!)
    wait_port "$1" faultnet
}
php=$(free_port); proxy "$php" "$hp"
pfp=$(free_port); proxy "$pfp" "$fp" --ftp
psp=$(free_port); proxy "$psp" "$sp"
echo "[127.0.0.1]:$psp $(cut -d' ' -f1,2 "$work/host_key.pub")" >>"$work/known_hosts"
fetch mirrors-through-faultnet "${sftp_flags[@]}" \
    "http://127.0.0.1:$php/object.bin" "ftp://127.0.0.1:$pfp/object.bin" \
    "sftp://$user@127.0.0.1:$psp$work/www/object.bin"

say "all fetches byte-exact"
