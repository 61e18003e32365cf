#!/usr/bin/env bash
# keep-cpu-quiet.sh CMD...: run CMD, and while it runs pause (SIGSTOP), every 250 ms, each
# compiler, linker or cargo process and each niced (nice > 0) user process that is running
# (those running when it starts, and those started later: another build beside the
# measurement ran on the server's CPU too, 20-45% of CPU 0 in runs of 2026-11-27,
# docs/results-log.md); resume them all when CMD ends. CMD's own descendants are never paused: a
# lab lowers some of its own processes below nice 0 (`triage lab pos --site cgi` puts scripts
# and the server's threads at the back of the ready queue, nice 19), and a CMD that builds
# before it measures (scripts/run.sh) must not stop its own cargo. Nor are the tasks whose nice
# value an attach daemon set (journaled in /run/triage/lever/, `os::lever`): a server that
# daemonizes (Apache) is no descendant of CMD, and a floor above 0 (`--floor-nice 19`) puts
# its children above nice 0. The watch itself runs on
# the last CPU (the lab's client CPU), not on the server's. KEEP_CPU_QUIET_DRY=1: print what
# it would pause and pause nothing (scripts/test-keep-cpu-quiet.sh). On a machine shared by
# several measurers, take a lock around it:
#   flock /tmp/lab.lock scripts/keep-cpu-quiet.sh target/ci/triage lab events ...
set -u
paused=()
resume() {
  for p in "${paused[@]}"; do kill -CONT "$p" 2>/dev/null; done
}
trap resume EXIT
"$@" &
cmd=$!
trap 'kill -TERM "$cmd" 2>/dev/null' INT TERM
taskset -pc "$(($(nproc) - 1))" $$ >/dev/null
names=" rustc cargo cc1 cc1plus ld ld.lld collect2 clang clippy-driver rust-lld cc rustdoc "
# Whether PID descends from CMD now (its parents read live from /proc, walked up to CMD or to
# init): the last look before a stop.
descends() {
  local q=$1 st
  while [ "$q" -gt 1 ] && [ "$q" != "$cmd" ]; do
    st=$(cat "/proc/$q/stat" 2>/dev/null) || return 1
    st=${st##*) }
    set -- $st
    q=$2
  done
  [ "$q" = "$cmd" ]
}
while kill -0 "$cmd" 2>/dev/null; do
  # One snapshot for both CMD's descendants and the candidates: with two, a process CMD forked
  # between them (a CGI script the lab starts at nice 19) was a candidate but no descendant,
  # and was stopped until CMD ended (its page failed, and with it the lever's tail).
  snap=$(ps -eo pid=,ppid=,ni=,stat=,comm=)
  # CMD's descendants (each process's ancestry walked up to CMD or to init).
  own=" $(awk -v root="$cmd" '{ up[$1] = $2 }
    END { for (p in up) { q = p; while (q != root && (q in up) && q > 1) q = up[q];
          if (q == root) printf "%s ", p } }' <<<"$snap")"
  # Tasks an attach daemon holds at a level of its own (its journal's raises).
  lever=" $(cat /run/triage/lever/*.lever 2>/dev/null | awk '$1 == "R" { printf "%s ", $2 }') "
  while read -r pid ppid ni stat comm; do
    if [ "$pid" = "$$" ] || [ "$pid" = "$cmd" ] || [ "$pid" = 2 ] || [ "$ppid" = 2 ]; then
      continue
    fi
    if [[ "$own" == *" $pid "* ]] || [[ "$lever" == *" $pid "* ]]; then
      continue
    fi
    case "$stat" in T*) continue ;; esac
    if [[ "$names" == *" $comm "* ]] || { [[ "$ni" =~ ^[0-9]+$ ]] && [ "$ni" -gt 0 ]; }; then
      if descends "$pid"; then
        continue
      fi
      if [ -n "${KEEP_CPU_QUIET_DRY:-}" ]; then
        echo "keep-cpu-quiet: would pause $comm $pid (nice $ni)" >&2
      elif kill -STOP "$pid" 2>/dev/null; then
        paused+=("$pid")
        echo "keep-cpu-quiet: paused $comm $pid (nice $ni)" >&2
      fi
    fi
  done <<<"$snap"
  sleep 0.25
done
wait "$cmd"
