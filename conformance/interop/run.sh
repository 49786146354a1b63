#!/usr/bin/env bash
# Interop arm of the conformance suite: hydra against servers nobody here wrote —
# nginx (HTTP and HTTPS), vsftpd (FTP) and OpenSSH's sshd + sftp-server (SFTP) — started on
# 127.0.0.1 on unprivileged ports, each fetched with `hydra get` (4 connections, sha256
# checked), then all three at once as mirrors of one object, directly, through faultnet links
# and through tinyproxy, a real HTTP CONNECT proxy (proxy.sh).
#
# Usage: conformance/interop/run.sh            (from anywhere; builds hydra and faultnet)
# Env:   CARGO_TARGET_DIR   where cargo builds (default: <repo>/target)
#        INTEROP_SIZE       object size in bytes (default 8388608)
#        INTEROP_NO_INSTALL set to 1 to never call apt-get
# Installs nginx, vsftpd, openssh-server, tinyproxy and openssl with apt-get when missing
# (needs root). Proxy variables of the caller's environment are ignored. Every
# server and proxy is stopped and the work directory removed on exit. Exit 0 = every fetch
# was byte-exact.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
size=${INTEROP_SIZE:-8388608}
target=${CARGO_TARGET_DIR:-$repo/target}
work=$(mktemp -d /tmp/hydra-interop.XXXXXX)
chmod 755 "$work"
pids=()
# The arm chooses every route itself: an inherited proxy setting would send loopback
# fetches elsewhere.
unset http_proxy https_proxy ftp_proxy ftps_proxy sftp_proxy all_proxy no_proxy \
    HTTP_PROXY HTTPS_PROXY FTP_PROXY FTPS_PROXY SFTP_PROXY ALL_PROXY NO_PROXY HYDRA_PROXY

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
tinyproxy_bin=$(find_bin tinyproxy /usr/bin/tinyproxy /usr/sbin/tinyproxy || true)
openssl_bin=$(find_bin openssl /usr/bin/openssl || true)
if [[ -z $nginx_bin || -z $vsftpd_bin || -z $sshd_bin || -z $sftp_server || -z $tinyproxy_bin || -z $openssl_bin ]]; then
    [[ ${INTEROP_NO_INSTALL:-0} == 1 ]] && die "nginx, vsftpd, sshd, tinyproxy or openssl missing and INTEROP_NO_INSTALL=1"
    [[ $(id -u) == 0 ]] || die "nginx, vsftpd, sshd, tinyproxy or openssl missing; run as root to install them"
    say "installing nginx vsftpd openssh-server tinyproxy openssl"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx vsftpd openssh-server tinyproxy openssl >/dev/null
    nginx_bin=$(find_bin nginx /usr/sbin/nginx) || die "no nginx after install"
    vsftpd_bin=$(find_bin vsftpd /usr/sbin/vsftpd) || die "no vsftpd after install"
    sshd_bin=$(find_bin sshd /usr/sbin/sshd) || die "no sshd after install"
    sftp_server=$(find_bin sftp-server /usr/lib/openssh/sftp-server /usr/libexec/openssh/sftp-server) || die "no sftp-server after install"
    tinyproxy_bin=$(find_bin tinyproxy /usr/bin/tinyproxy /usr/sbin/tinyproxy) || die "no tinyproxy after install"
    openssl_bin=$(find_bin openssl /usr/bin/openssl) || die "no openssl after install"
fi
# aria2c: cli/tests/metalink.rs feeds it the .meta4 it feeds hydra (that check skips without it).
if ! command -v aria2c >/dev/null && [[ ${INTEROP_NO_INSTALL:-0} != 1 && $(id -u) == 0 ]]; then
    say "installing aria2"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq aria2 >/dev/null || say "aria2 not installed"
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

# A private CA and a certificate for 127.0.0.1 signed by it, for nginx's HTTPS listener
# (hydra trusts the CA with --cacert).
tls_ext=$'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth'
{
    "$openssl_bin" req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
        -subj /CN=hydra-interop-ca -keyout "$work/ca.key" -out "$work/ca.crt" &&
        "$openssl_bin" req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
            -subj /CN=127.0.0.1 -keyout "$work/tls.key" -out "$work/tls.csr" &&
        "$openssl_bin" x509 -req -in "$work/tls.csr" -CA "$work/ca.crt" -CAkey "$work/ca.key" \
            -CAcreateserial -days 2 -extfile <(printf '%s\n' "$tls_ext") -out "$work/tls.crt"
} 2>"$work/openssl.err" || die "openssl could not make the HTTPS certificate: $(tail -1 "$work/openssl.err")"

# nginx
hp=$(free_port)
hsp=$(free_port)
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
    server {
        listen 127.0.0.1:$hsp ssl;
        root $work/www;
        ssl_certificate $work/tls.crt;
        ssl_certificate_key $work/tls.key;
    }
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
wait_port "$hsp" nginx-https
wait_port "$fp" vsftpd
wait_port "$sp" sshd
user=$(id -un)
http_url="http://127.0.0.1:$hp/object.bin"
https_url="https://127.0.0.1:$hsp/object.bin"
ftp_url="ftp://127.0.0.1:$fp/object.bin"
sftp_url="sftp://$user@127.0.0.1:$sp$work/www/object.bin"
sftp_flags=(--known-hosts "$work/known_hosts" -i "$work/id_ed25519")

fetch() { # name, hydra get arguments... (FETCH_VERBOSE_TO=FILE: -v, stderr to FILE)
    local name=$1; shift
    local out="$work/out.$name"
    local t0 rc=0
    local cmd=(timeout 120 "$hydra" get --timeout 10 --fixed-connections 4
        --checksum "sha256=$sha" -o "$out" "$@")
    t0=$(date +%s%N)
    if [[ -n ${FETCH_VERBOSE_TO:-} ]]; then
        "${cmd[@]}" -v 2>"$FETCH_VERBOSE_TO" || rc=$?
    else
        "${cmd[@]}" -q || rc=$?
    fi
    [[ $rc == 0 ]] || die "$name: hydra get failed (exit $rc)"
    local got
    got=$(sha256sum "$out" | cut -d' ' -f1)
    [[ $got == "$sha" ]] || die "$name: sha256 $got, want $sha"
    printf 'interop: ok   %-28s %6d ms  sha256 verified\n' "$name" $(( ($(date +%s%N) - t0) / 1000000 ))
    rm -f "$out"
}

fetch nginx "$http_url"
fetch nginx-https --cacert "$work/ca.crt" "$https_url"
fetch vsftpd "$ftp_url"
fetch openssh-sftp "${sftp_flags[@]}" "$sftp_url"
fetch all-three-as-mirrors "${sftp_flags[@]}" "$http_url" "$ftp_url" "$sftp_url"

# SFTP by an ssh config alias: host (HostName), port, user, key and known_hosts come from
# ~/.ssh/config of a temporary HOME alone; the key is passphrase-protected and signed by an
# ssh-agent that holds it (loaded through SSH_ASKPASS). Each host's own block comes first, a
# shared `Host interop-*` block next, and `Host *` last sets a port nothing listens on: the
# first value obtained must win.
ssh-keygen -q -t ed25519 -N 'interop-passphrase' -f "$work/id_agent"
cat "$work/id_agent.pub" >>"$work/authorized_keys"
mkdir -p "$work/home/.ssh"
cat >"$work/home/.ssh/config" <<CONF
Host interop-behind
    ProxyJump interop-bastion
Host interop-agent
    IdentityAgent $work/agent.sock
Host interop-bastion
    IdentityFile $work/id_ed25519
    StrictHostKeyChecking yes
    BatchMode yes
Host interop-*
    HostName 127.0.0.1
    Port $sp
    User $user
    IdentityFile $work/id_agent
    IdentitiesOnly yes
    UserKnownHostsFile $work/known_hosts
Host *
    Port 1
    User nobody-here
CONF
printf '#!/bin/sh\necho interop-passphrase\n' >"$work/askpass"
chmod 700 "$work/askpass"
ssh-agent -D -a "$work/agent.sock" >/dev/null 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do [[ -S $work/agent.sock ]] && break; sleep 0.1; done
[[ -S $work/agent.sock ]] || die "ssh-agent did not create its socket"
SSH_AUTH_SOCK=$work/agent.sock SSH_ASKPASS=$work/askpass SSH_ASKPASS_REQUIRE=force DISPLAY=none \
    ssh-add -q "$work/id_agent" </dev/null || die "ssh-add of the passphrase-protected key failed"
alias_url="sftp://interop-alias$work/www/object.bin"
# Without the agent the encrypted key is skipped (no terminal to ask): refused, key named.
if HOME=$work/home SSH_AUTH_SOCK= timeout 60 "$hydra" get -q --timeout 10 -o "$work/out.noagent" \
    "$alias_url" </dev/null 2>"$work/noagent.err"; then
    die "openssh-sftp-alias: fetched without the agent holding the encrypted key"
fi
grep -q "id_agent" "$work/noagent.err" || die "openssh-sftp-alias: the skipped key is not named: $(cat "$work/noagent.err")"
HOME=$work/home SSH_AUTH_SOCK=$work/agent.sock fetch openssh-sftp-alias "$alias_url" </dev/null

# SFTP through a jump host (ProxyJump): hydra runs `ssh -W` through interop-bastion, configured
# by the same file, and speaks SSH to interop-behind over its pipes. An `ssh` first on PATH
# records its arguments, so the fetch cannot pass by dialling the host directly.
ssh_bin=$(command -v ssh) || die "no ssh client"
mkdir -p "$work/bin"
printf '#!/bin/sh\necho "$@" >>"%s"\nexec "%s" "$@"\n' "$work/ssh.calls" "$ssh_bin" >"$work/bin/ssh"
chmod 755 "$work/bin/ssh"
PATH=$work/bin:$PATH HOME=$work/home SSH_AUTH_SOCK=$work/agent.sock \
    fetch openssh-sftp-proxyjump "sftp://interop-behind$work/www/object.bin" </dev/null
grep -q -- "-W \[127.0.0.1\]:$sp interop-bastion" "$work/ssh.calls" ||
    die "openssh-sftp-proxyjump: ssh -W through interop-bastion was not run: $(cat "$work/ssh.calls" 2>/dev/null)"

# The agent named by IdentityAgent, with SSH_AUTH_SOCK empty: the encrypted key is signed by it.
HOME=$work/home SSH_AUTH_SOCK= fetch openssh-sftp-identityagent \
    "sftp://interop-agent$work/www/object.bin" </dev/null

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

# Through tinyproxy, a real HTTP CONNECT proxy.
source "$repo/conformance/interop/proxy.sh"

say "all fetches byte-exact"
