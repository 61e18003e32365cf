#!/usr/bin/env bash
# Issue 19 finding 0 on a pure cgroup v2 machine (the device): triage's labs started as root
# from a leaf cgroup whose parent delegates only `memory` (what a container runtime or a
# service manager typically gives a process), then a check that nothing is left behind.
#
#   scripts/device-cgv2.sh BIN_DIR        (writes under $OUT, default /tmp/cgv2-out)
#
# BIN_DIR holds `triage` (release build) and, optionally, `wrk` with `libluajit-5.1.so.2`
# (scripts/device-cgv2-pack.sh fills it from this machine) and `cgroup_v2_real` (the os
# crate's real-v2 test binary, run with the `cpu` controller itself). Absent peers (Apache)
# are dropped by the labs. CG (default /sys/fs/cgroup) and BOX_CTL (default memory) name the v2
# mount and what the box delegates (scripts/cgv2-local.sh's v2 mode on the development VM:
# CG=/sys/fs/cgroup/unified BOX_CTL=hugetlb); CONTAINERS_ARGS (default `--quick --reps 1`)
# replaces the containers lab's arguments (CONTAINERS_LIMIT, default 150 s, its time limit); SKIP_LABS or SKIP_RESERVATIONS leave labs out. Bounded: about 3 minutes (timeouts 60 + 150 + 120 s). Exit status 0 only if every step passed.
set -u
BIN=$(cd "${1:?usage: $0 BIN_DIR}" && pwd)
OUT=${OUT:-/tmp/cgv2-out}
mkdir -p "$OUT"
export PATH="$BIN:$PATH"
export LD_LIBRARY_PATH="$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
CG=${CG:-/sys/fs/cgroup}
BOX_CTL=${BOX_CTL:-memory}   # what the leaf's parent delegates
BOX=$CG/cgv2-box-$$
FAIL=0
log() { echo "[$(date -u +%T)] $*" | tee -a "$OUT/log.txt"; }
bad() { log "FAIL: $*"; FAIL=1; }
snapshot() { find "$CG" -mindepth 1 -maxdepth 4 -type d 2>/dev/null | sort; }

[ "$(id -u)" -eq 0 ] || { log "needs root"; exit 2; }
[ -f "$CG/cgroup.controllers" ] || { log "$CG is not a cgroup v2 mount"; exit 2; }
log "kernel $(uname -r); $CG controllers: $(cat $CG/cgroup.controllers); root subtree_control: $(cat $CG/cgroup.subtree_control)"
log "this shell is in $(grep '^0::' /proc/self/cgroup)"
command -v wrk >/dev/null || log "no wrk: the containers lab will refuse to run"
snapshot > "$OUT/cgroups-before.txt"

# The leaf: $BOX enables only memory for its children; $BOX/leaf holds this shell.
cleanup_box() {
  echo $$ > "$CG/cgroup.procs" 2>/dev/null
  rmdir "$BOX/leaf" "$BOX" 2>/dev/null
  [ -n "${ROOT_ADDED:-}" ] && echo "-$BOX_CTL" > "$CG/cgroup.subtree_control" 2>/dev/null
  ROOT_ADDED=
}
trap cleanup_box EXIT
ROOT_ADDED=
if ! grep -qw "$BOX_CTL" "$CG/cgroup.subtree_control"; then
  echo "+$BOX_CTL" > "$CG/cgroup.subtree_control" && ROOT_ADDED=1 \
    || log "could not enable $BOX_CTL at $CG (a cgroup namespace root holding processes?)"
fi
mkdir "$BOX" && echo "+$BOX_CTL" > "$BOX/cgroup.subtree_control" && mkdir "$BOX/leaf" \
  && echo $$ > "$BOX/leaf/cgroup.procs" || { log "could not build $BOX/leaf"; exit 2; }
log "moved into $BOX/leaf: controllers [$(cat $BOX/leaf/cgroup.controllers)] (no cpu), $(grep '^0::' /proc/self/cgroup)"

if [ -x "$BIN/cgroup_v2_real" ]; then
  log "os real-v2 placement test with the ${TEST_CTL:-cpu} controller"
  TRIAGE_TEST_CTL=${TEST_CTL:-cpu} timeout 60 "$BIN/cgroup_v2_real" --nocapture > "$OUT/cgroup_v2_real.log" 2>&1 \
    || bad "cgroup_v2_real (see cgroup_v2_real.log)"
  tail -3 "$OUT/cgroup_v2_real.log" | tee -a "$OUT/log.txt"
fi

# triage serve with a capped container, from the leaf: it must find a place, apply the cap,
# and remove its tree on SIGTERM.
mkdir -p "$OUT/serve/www" && echo hello > "$OUT/serve/www/index.html"
cat > "$OUT/serve/triage.toml" <<EOF
listen = "127.0.0.1:18481"
admin = "127.0.0.1:18482"
[[site]]
name = "s"
root = "$OUT/serve/www"
[[container]]
name = "box"
cpu_max = 0.3
sites = ["s"]
EOF
triage serve --config "$OUT/serve/triage.toml" > "$OUT/serve/server.log" 2>&1 &
SRV=$!
for _ in $(seq 50); do
  (exec 3<>/dev/tcp/127.0.0.1/18482) 2>/dev/null && break
  sleep 0.1
done
CAPS=$(find "$CG" -path '*triage*' -name cpu.max -path '*/box/*' 2>/dev/null | head -1)
if [ -n "$CAPS" ]; then log "serve: $CAPS = $(cat "$CAPS")"; else bad "serve: no cgroup for container box (see serve/server.log)"; fi
grep -i "cgroup\|container" "$OUT/serve/server.log" | head -5 | tee -a "$OUT/log.txt"
kill -TERM $SRV; wait $SRV
log "serve exited $?"

if [ -n "${SKIP_LABS:-}" ]; then log "SKIP_LABS: labs not run"; else
log "lab containers ${CONTAINERS_ARGS:---quick --reps 1}"
timeout ${CONTAINERS_LIMIT:-150} triage lab containers ${CONTAINERS_ARGS:---quick --reps 1} --out "$OUT/containers" > "$OUT/containers.log" 2>&1 \
  || bad "lab containers exited $? (see containers.log)"
grep -E "^goal|cgroup" "$OUT/containers.log" | tee -a "$OUT/log.txt"
if [ -n "${SKIP_RESERVATIONS:-}" ]; then log "SKIP_RESERVATIONS: lab reservations not run"; else
log "lab reservations --quick"
timeout 300 triage lab reservations --quick --out "$OUT/reservations" > "$OUT/reservations.log" 2>&1 \
  || bad "lab reservations exited $? (see reservations.log)"
grep -E "^goal|cgroup" "$OUT/reservations.log" | tee -a "$OUT/log.txt"
fi
fi

# Nothing left behind: no triage cgroup anywhere, nothing in the box but our leaf, no process.
sleep 1
LEFT=$(find "$CG" -type d \( -name 'triage*' -o -name 'run-*' \) 2>/dev/null)
[ -z "$LEFT" ] || bad "cgroups left behind: $LEFT"
[ "$(ls -d "$BOX"/*/ 2>/dev/null)" = "$BOX/leaf/" ] || bad "the box holds more than its leaf: $(ls -d "$BOX"/*/)"
[ "$(cat "$BOX/cgroup.subtree_control")" = "$BOX_CTL" ] || bad "the box's subtree_control changed: $(cat $BOX/cgroup.subtree_control)"
pgrep -f "^$BIN/triage" >/dev/null && bad "triage processes left: $(pgrep -a -f "^$BIN/triage")"
ip netns list 2>/dev/null | grep -q triage && bad "network namespaces left: $(ip netns list | grep triage)"
cleanup_box
trap - EXIT
snapshot > "$OUT/cgroups-after.txt"
diff "$OUT/cgroups-before.txt" "$OUT/cgroups-after.txt" > "$OUT/cgroups-diff.txt" \
  || bad "cgroup tree differs from before (cgroups-diff.txt)"
[ $FAIL -eq 0 ] && log "ALL PASSED" || log "SOME STEPS FAILED"
exit $FAIL
