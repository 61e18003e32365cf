#!/usr/bin/env bash
# Pure cgroup v2 for the cpu controller on the hybrid development VM, and back (issue 19's
# pure-v2 case reproduced here; the device machine is pure v2 already).
#
#   scripts/cgv2-local.sh on        unmount the v1 cpu, cpuacct and cpuset hierarchies (each
#                                   must hold only its root cgroup) and enable +cpu +cpuset in
#                                   the v2 root's cgroup.subtree_control
#   scripts/cgv2-local.sh off       undo: remove leftover v2 cgroups with cpu enabled below the
#                                   root (only empty ones), disable cpu and cpuset, mount the
#                                   three v1 hierarchies again; checks the mounts are as before
#   scripts/cgv2-local.sh status    which of the two the VM is in
#   scripts/cgv2-local.sh run CMD…  on, CMD, off (off also on failure or a signal); the exit
#                                   status is CMD's
#
# Root only. Run it under `flock /tmp/lab.lock` (other helpers' labs must not see v2 mode), and
# never leave the VM in v2 mode: CI here is cgroup v1.
set -u
V1=/sys/fs/cgroup
V2=${CGV2_MOUNT:-/sys/fs/cgroup/unified}
CTLS="cpu cpuacct cpuset"

say() { echo "cgv2-local: $*" >&2; }

mode() {
  if mount | grep -q " on $V1/cpu type cgroup "; then echo v1; else echo v2; fi
}

on() {
  [ "$(id -u)" -eq 0 ] || { say "needs root"; return 2; }
  [ "$(mode)" = v1 ] || { say "already in v2 mode"; return 0; }
  # Removed cgroups are freed asynchronously (a lab that just ended still counts): wait a little.
  for c in $CTLS; do
    for _ in $(seq 40); do
      n=$(awk -v c="$c" '$1 == c { print $3 }' /proc/cgroups)
      [ "$n" = 1 ] && break
      sleep 0.25
    done
    [ "$n" = 1 ] || { say "v1 $c holds $n cgroups (only its root may exist): not switching"; return 1; }
  done
  for c in $CTLS; do
    umount "$V1/$c" || { say "umount $V1/$c failed"; off; return 1; }
  done
  # The kernel frees an unmounted hierarchy asynchronously: its controllers show up on the v2
  # root a moment later.
  for _ in $(seq 40); do
    grep -qw cpu "$V2/cgroup.controllers" && grep -qw cpuset "$V2/cgroup.controllers" && break
    sleep 0.25
  done
  echo "+cpu +cpuset" > "$V2/cgroup.subtree_control" || { say "could not enable cpu on $V2 (controllers: $(cat $V2/cgroup.controllers))"; off; return 1; }
  say "v2 mode: $V2 controllers [$(cat $V2/cgroup.controllers)], subtree_control [$(cat $V2/cgroup.subtree_control)]"
}

# Remove the empty cgroups of triage, its labs and the device script's box below $V2 (deepest
# first) that a failed run may have left; a cgroup still holding processes is reported, not
# touched, and nothing else is looked at.
sweep() {
  find "$V2" -mindepth 1 -maxdepth 1 -type d \( -name 'triage*' -o -name 'cgv2-box-*' \) 2>/dev/null \
    | while read -r top; do find "$top" -depth -type d; done | while read -r d; do
    [ -s "$d/cgroup.procs" ] || rmdir "$d" 2>/dev/null
  done
}

off() {
  [ "$(id -u)" -eq 0 ] || { say "needs root"; return 2; }
  # A lab started outside /tmp/lab.lock (a test's) may have put its tree on v2 meanwhile: the
  # controllers cannot be disabled until it is gone. Wait for it (up to 3 minutes), so that the
  # caller, holding the lock, does not hand over a VM in v2 mode.
  for i in $(seq 180); do
    sweep
    for c in cpuset cpu; do
      grep -qw "$c" "$V2/cgroup.subtree_control" && echo "-$c" > "$V2/cgroup.subtree_control" 2>/dev/null
    done
    grep -qw cpu "$V2/cgroup.subtree_control" || grep -qw cpuset "$V2/cgroup.subtree_control" || break
    [ "$i" = 1 ] && say "cgroups on $V2 keep cpu enabled (a lab still running?): waiting for them to go"
    sleep 1
  done
  for c in $CTLS; do
    mount | grep -q " on $V1/$c type cgroup " && continue
    mkdir -p "$V1/$c"
    # The controller is released from v2 a moment after its last v2 use; retry a little.
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      mount -t cgroup -o "$c" cgroup "$V1/$c" 2>/dev/null && break
      sleep 0.5
    done
    mount | grep -q " on $V1/$c type cgroup " || say "could not mount v1 $c at $V1/$c"
  done
  if [ "$(mode)" = v1 ] && mount | grep -q " on $V1/cpuacct type cgroup " \
    && mount | grep -q " on $V1/cpuset type cgroup "; then
    say "v1 mode restored: $(mount | grep -c ' type cgroup ') v1 hierarchies, $V2 subtree_control [$(cat $V2/cgroup.subtree_control)]"
  else
    say "RESTORE INCOMPLETE: $(mount | grep cgroup | tr '\n' ';')"
    return 1
  fi
}

case "${1:-}" in
  on) on ;;
  off) off ;;
  status) mode ;;
  run)
    shift
    on || exit $?
    trap 'off' EXIT
    trap 'exit 130' INT TERM
    "$@"
    rc=$?
    exit $rc
    ;;
  *) sed -n '2,17p' "$0"; exit 2 ;;
esac
