#!/usr/bin/env bash
# Where a server's CPU per request goes as it gets more cores: nginx (N workers, reuseport) and
# triage (N serving threads; fifo and gate off) serve a 1 KB file to wrk, pinned as in
# `triage bench static --cores` (server on CPUs 0..N-1, wrk on W). For each run: req/s, the
# server's CPU per request (utime + stime of every process of it, from /proc) and a flat
# `perf record -e cpu-clock` profile of the server's CPUs (kernel and user symbols).
#
#   EXTRA=/usr/bin/perf scripts/device-pack.sh DIR && scripts/device-profile.sh DIR OUT
#
# OUT/profile.txt: the figures and each run's top symbols; OUT/perf.tgz: the perf.data files
# and the machine's kallsyms, to read again elsewhere (`perf report -i F --kallsyms K`, with the
# unstripped triage of the same build added by `perf buildid-cache -a`).
# Env: W (wrk CPUs, default 8-15), NS (core counts, default "1 2 4"), SECS (measured seconds,
# default 3), TARGETS (default "nginx fifo off"; also pos, posK: pos with `--event-interval K`,
# pos-nowq: pos with `--wake-queue off`, pos-roff: pos with `--rounds off`); FILE (serve this
# file instead of 1 KB of x) and GZIP (a level: triage compresses with `--gzip-level GZIP` and
# wrk asks for gzip; nginx is not configured for it, leave it out). Without DIR/bin/perf (a pack made without EXTRA)
# the runs are measured and not profiled.
# On a 2-CPU machine: W=1 NS=1.
set -u
D=$(readlink -f "${1:?usage: $0 DIR OUT}")
O=${2:?usage: $0 DIR OUT}
mkdir -p "$O"; O=$(readlink -f "$O")
B=$D/bin
W=${W:-8-15}; NS=${NS:-1 2 4}; SECS=${SECS:-3}
wt=$(taskset -c "$W" nproc)
tmp=$(mktemp -d /tmp/device-profile.XXXXXX)
mkdir -p "$tmp/www" "$tmp/ng/logs" "$tmp/data"
if [ -n "${FILE:-}" ]; then
    url=/$(basename "$FILE"); cp "$FILE" "$tmp/www/"
else
    url=/f.html; head -c 1024 /dev/zero | tr '\0' x > "$tmp/www/f.html"
fi
zargs=(); hdr=()
[ -n "${GZIP:-}" ] && { zargs=(--gzip-level "$GZIP"); hdr=(-H 'Accept-Encoding: gzip'); }
rep=$O/profile.txt
: > "$rep"
say() { echo "$*" | tee -a "$rep"; }
cpu_of() { # total utime+stime ticks of every process in group $1
    local t=0 p s
    for p in $(pgrep -g "$1"); do
        s=$(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null) && t=$((t + s))
    done
    echo "$t"
}
nginx_conf() { # workers
    cat > "$tmp/ng/n.conf" <<EOF
worker_processes $1;
daemon off;
user root;
pid $tmp/ng/nginx.pid;
error_log $tmp/ng/logs/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_requests 1000000;
  client_body_temp_path $tmp/ng/cb;
  proxy_temp_path $tmp/ng/px;
  fastcgi_temp_path $tmp/ng/fc;
  uwsgi_temp_path $tmp/ng/uw;
  scgi_temp_path $tmp/ng/sc;
  server { listen 127.0.0.1:18995 reuseport; root $tmp/www; }
}
EOF
}
say "== $(date -u +%FT%TZ) $(uname -r), $(nproc) CPUs; wrk on $W ($wt threads); perf: $([ -x "$B/perf" ] && $B/perf --version 2>&1 || echo none)"
for n in $NS; do
    cpus="0-$((n - 1))"
    for t in ${TARGETS:-nginx fifo off}; do
        case $t in
        nginx) nginx_conf "$n"; cmd=("$B/nginx" -c "$tmp/ng/n.conf" -p "$tmp/ng") ;;
        fifo) cmd=("$B/triage" serve --listen 127.0.0.1:18995 --root "$tmp/www" --threads "$n" --slots "$n") ;;
        off) cmd=("$B/triage" serve --listen 127.0.0.1:18995 --root "$tmp/www" --threads "$n" --slots "$n" --gate off) ;;
        pos) cmd=("$B/triage" serve --listen 127.0.0.1:18995 --root "$tmp/www" --threads "$n" --slots "$n" --policy pos) ;;
        pos-nowq) cmd=("$B/triage" serve --listen 127.0.0.1:18995 --root "$tmp/www" --threads "$n" --slots "$n" --policy pos --wake-queue off) ;;
        pos-roff) cmd=("$B/triage" serve --listen 127.0.0.1:18995 --root "$tmp/www" --threads "$n" --slots "$n" --policy pos --rounds off) ;;
        pos[0-9]*) # posK: pos with the runtime looking at arrivals every K ticks
            cmd=("$B/triage" serve --listen 127.0.0.1:18995 --root "$tmp/www" --threads "$n" --slots "$n" --policy pos --event-interval "${t#pos}") ;;
        *) say "unknown target $t"; continue ;;
        esac
        name=$t-$n
        [ "$t" = nginx ] || cmd+=("${zargs[@]}")
        setsid taskset -c "$cpus" "${cmd[@]}" > "$tmp/$name.log" 2>&1 &
        pg=$!
        sleep 0.7
        conns=$((50 * n))
        taskset -c "$W" "$B/wrk" -t"$wt" -c"$conns" -d1s "${hdr[@]}" "http://127.0.0.1:18995$url" > /dev/null 2>&1
        c0=$(cpu_of "$pg")
        taskset -c "$W" "$B/wrk" -t"$wt" -c"$conns" -d"${SECS}s" "${hdr[@]}" "http://127.0.0.1:18995$url" > "$tmp/$name.wrk" 2>&1 &
        wp=$!
        sleep 0.3
        if [ -x "$B/perf" ]; then
            "$B/perf" record -q -a -C "$cpus" -e cpu-clock -F 2999 -o "$tmp/data/$name.data" -- sleep $((SECS - 1)) > /dev/null 2>&1
        fi
        wait $wp
        c1=$(cpu_of "$pg")
        kill -- -"$pg" 2> /dev/null; wait "$pg" 2> /dev/null
        req=$(awk '/requests in/ {print $1}' "$tmp/$name.wrk")
        if [ -z "$req" ] || [ "$req" = 0 ]; then
            say "== $name: no requests served"; tail -3 "$tmp/$name.log" | tee -a "$rep"; continue
        fi
        tick=$(getconf CLK_TCK)
        say "== $name cpus=$cpus conns=$conns: $((req / SECS)) req/s, $(((c1 - c0) * 1000000000 / tick / req)) ns CPU/req; p99 $(awk '/99%/ {print $2}' "$tmp/$name.wrk")"
        [ -x "$B/perf" ] || continue
        "$B/perf" report -i "$tmp/data/$name.data" --stdio --no-children --sort dso,sym --percent-limit 0.8 2> /dev/null |
            grep -v '^#' | grep -v '^$' | head -40 | tee -a "$rep"
    done
done
cp /proc/kallsyms "$tmp/data/kallsyms" 2> /dev/null
tar czf "$O/perf.tgz" -C "$tmp" data
rm -rf "$tmp"
say "== done $(date -u +%T)"
