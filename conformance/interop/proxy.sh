# Proxy step of the interop arm, sourced by run.sh once its servers are up (it uses run.sh's
# helpers and variables). Two tinyproxy instances on loopback — one open, one with Basic
# proxy authentication — each asked for tunnels to nginx (HTTP and HTTPS), vsftpd and sshd:
#
# * every source alone and HTTP+FTP+SFTP as mirrors at once, byte-exact, once chosen by
#   `--proxy` and once by the environment (`http_proxy`, `https_proxy`, `ftp_proxy`,
#   `sftp_proxy` for the single sources, `ALL_PROXY` for the mirrors);
# * after each of those phases, the proxy's own log shows a CONNECT to every server port
#   and to at least one of vsftpd's passive ports (FTP data connections are tunnelled too);
# * `NO_PROXY=127.0.0.1` and `--noproxy 127.0.0.1` go direct: no proxy logs a new CONNECT,
#   and `-v` names the entry that matched;
# * no credentials (407) and a wrong password (tinyproxy says 401): a non-zero exit, one line
#   naming the proxy and the status, nothing at FILE, no password printed.

proxy_user=hydra
proxy_pass=interop-proxy-pass

start_tinyproxy() { # name, port, extra configuration lines...
    local name=$1 port=$2
    shift 2
    # No ConnectPort line, so CONNECT to any port is allowed (the usual `ConnectPort 443` and
    # `563` lines would refuse vsftpd's control and passive ports and sshd's). No Allow line:
    # every client is served (it listens on loopback only).
    {
        echo "Port $port"
        echo "Listen 127.0.0.1"
        echo "Timeout 60"
        echo "MaxClients 64"
        echo "LogFile \"$work/$name.log\""
        echo "LogLevel Connect"
        echo "PidFile \"$work/$name.pid\""
        printf '%s\n' "$@"
    } >"$work/$name.conf"
    "$tinyproxy_bin" -d -c "$work/$name.conf" >"$work/$name.out" 2>&1 &
    pids+=($!)
    wait_port "$port" "$name"
}

log_lines() { # log: its current line count
    wc -l <"$1"
}

connects_since() { # log, first line, port: CONNECT requests to 127.0.0.1:port logged from then on
    tail -n "+$2" "$1" | grep -c "): CONNECT 127.0.0.1:$3 " || true
}

pasv_connects_since() { # log, first line: CONNECTs to vsftpd's passive ports from then on
    tail -n "+$2" "$1" | { grep -oE '\): CONNECT 127\.0\.0\.1:[0-9]+ ' || true; } |
        awk -F'[: ]' -v lo="$pasv_lo" -v hi="$((pasv_lo + 50))" \
            '$5 >= lo && $5 <= hi { n++ } END { print n + 0 }'
}

all_connects() { # log: every CONNECT request it holds
    grep -c "): CONNECT " "$1" || true
}

check_tunnels() { # phase, log, first line: a CONNECT to every server port since then
    local phase=$1 log=$2 from=$3 port name n
    for port in "$hp:nginx" "$hsp:nginx-https" "$fp:vsftpd" "$sp:sshd"; do
        name=${port#*:}
        port=${port%%:*}
        n=$(connects_since "$log" "$from" "$port")
        [[ $n -gt 0 ]] || die "$phase: tinyproxy's log has no CONNECT to 127.0.0.1:$port ($name)"
        printf 'interop: log  %-28s %3d x CONNECT 127.0.0.1:%s (%s)\n' "$phase" "$n" "$port" "$name"
    done
    n=$(pasv_connects_since "$log" "$from")
    [[ $n -gt 0 ]] || die "$phase: tinyproxy's log has no CONNECT to a vsftpd passive port"
    printf 'interop: log  %-28s %3d x CONNECT to passive ports %s-%s (vsftpd data)\n' \
        "$phase" "$n" "$pasv_lo" "$((pasv_lo + 50))"
}

through() { # name, proxy URL, log: the --proxy phase then the environment phase
    local name=$1 url=$2 log=$3 from
    from=$(($(log_lines "$log") + 1))
    fetch "$name-arg-http" --proxy "$url" "$http_url"
    fetch "$name-arg-https" --proxy "$url" --cacert "$work/ca.crt" "$https_url"
    fetch "$name-arg-ftp" --proxy "$url" "$ftp_url"
    fetch "$name-arg-sftp" --proxy "$url" "${sftp_flags[@]}" "$sftp_url"
    fetch "$name-arg-all-three" --proxy "$url" "${sftp_flags[@]}" "$http_url" "$ftp_url" "$sftp_url"
    check_tunnels "$name --proxy" "$log" "$from"

    from=$(($(log_lines "$log") + 1))
    http_proxy=$url fetch "$name-env-http" "$http_url"
    https_proxy=$url fetch "$name-env-https" --cacert "$work/ca.crt" "$https_url"
    ftp_proxy=$url fetch "$name-env-ftp" "$ftp_url"
    sftp_proxy=$url fetch "$name-env-sftp" "${sftp_flags[@]}" "$sftp_url"
    ALL_PROXY=$url fetch "$name-env-all-three" "${sftp_flags[@]}" "$http_url" "$ftp_url" "$sftp_url"
    check_tunnels "$name environment" "$log" "$from"
}

tpo=$(free_port)
tpa=$(free_port)
start_tinyproxy tinyproxy-open "$tpo"
start_tinyproxy tinyproxy-auth "$tpa" "BasicAuth $proxy_user $proxy_pass"
open_url="http://127.0.0.1:$tpo"
auth_url="http://$proxy_user:$proxy_pass@127.0.0.1:$tpa"

through tp-open "$open_url" "$work/tinyproxy-open.log"
through tp-auth "$auth_url" "$work/tinyproxy-auth.log"

# The route lines of -v for the environment's choice.
FETCH_VERBOSE_TO=$work/routes.err ALL_PROXY=$open_url \
    fetch tp-open-env-verbose "${sftp_flags[@]}" "$http_url" "$ftp_url" "$sftp_url"
n=$(grep -c ": proxy http://127.0.0.1:$tpo from ALL_PROXY$" "$work/routes.err" || true)
[[ $n == 3 ]] || die "tp-open-env-verbose: $n of 3 sources routed from ALL_PROXY: $(cat "$work/routes.err")"

# NO_PROXY and --noproxy: direct, no new tunnel in either proxy's log.
before_open=$(all_connects "$work/tinyproxy-open.log")
before_auth=$(all_connects "$work/tinyproxy-auth.log")
FETCH_VERBOSE_TO=$work/noproxy.err ALL_PROXY=$open_url NO_PROXY=127.0.0.1 \
    fetch tp-open-env-no-proxy "${sftp_flags[@]}" "$http_url" "$ftp_url" "$sftp_url"
n=$(grep -c ": direct: 127.0.0.1 matches NO_PROXY entry 127.0.0.1$" "$work/noproxy.err" || true)
[[ $n == 3 ]] || die "tp-open-env-no-proxy: $n of 3 sources direct by NO_PROXY: $(cat "$work/noproxy.err")"
fetch tp-auth-arg-noproxy --proxy "$auth_url" --noproxy 127.0.0.1 "${sftp_flags[@]}" \
    "$http_url" "$ftp_url" "$sftp_url"
[[ $(all_connects "$work/tinyproxy-open.log") == "$before_open" ]] ||
    die "NO_PROXY=127.0.0.1: tinyproxy-open logged a new CONNECT"
[[ $(all_connects "$work/tinyproxy-auth.log") == "$before_auth" ]] ||
    die "--noproxy 127.0.0.1: tinyproxy-auth logged a new CONNECT"
say "ok   NO_PROXY and --noproxy went direct: CONNECTs stayed at $before_open (open) and $before_auth (auth)"

# Refused credentials: a non-zero exit, one line naming the proxy and its status, nothing
# written. tinyproxy 1.11 answers a CONNECT without credentials with 407 and one with a wrong
# password with 401 (not 407); each is checked against what the proxy sent.
refused() { # name, proxy URL, the status line expected in the message
    local name=$1 url=$2 status=$3 rc=0
    timeout 60 "$hydra" get --timeout 10 -o "$work/out.$name" --proxy "$url" "$http_url" \
        </dev/null >"$work/$name.out" 2>"$work/$name.err" || rc=$?
    [[ $rc != 0 ]] || die "$name: hydra exited 0"
    [[ $rc != 124 ]] || die "$name: hydra did not exit within 60 s"
    [[ -z $(compgen -G "$work/out.$name*") ]] || die "$name: something was written at FILE"
    [[ $(wc -l <"$work/$name.err") == 1 ]] || die "$name: not one line on stderr: $(cat "$work/$name.err")"
    grep -q "proxy 127.0.0.1:$tpa refused the tunnel: $status$" "$work/$name.err" ||
        die "$name: the line does not name the proxy and $status: $(cat "$work/$name.err")"
    ! grep -q "wrong-pass\|$proxy_pass" "$work/$name.err" "$work/$name.out" ||
        die "$name: a password was printed"
    say "ok   $name, exit $rc: $(cat "$work/$name.err")"
}
refused tp-auth-no-credentials "http://127.0.0.1:$tpa" "407 Proxy Authentication Required"
refused tp-auth-wrong-password "http://$proxy_user:wrong-pass@127.0.0.1:$tpa" "401 Unauthorized"
