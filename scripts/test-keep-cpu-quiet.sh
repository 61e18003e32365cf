#!/usr/bin/env bash
# test-keep-cpu-quiet.sh: keep-cpu-quiet.sh never pauses a process its command started, however
# fast the command forks niced children (the cgi lab starts scripts at nice 19 many times a
# second). Runs the watch dry (KEEP_CPU_QUIET_DRY=1: it pauses nothing, not even other
# users' processes) over a command that starts a niced child every few milliseconds for 4 s;
# fails if the watch would have paused any of them. Exit 0: passed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d /tmp/test-keep-cpu-quiet.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/cmd.sh" <<'CMD'
end=$((SECONDS + 4))
while [ "$SECONDS" -lt "$end" ]; do
  nice -n 19 sleep 0.05 &
  echo "$!" >>"$1"
  sleep 0.003
done
wait
CMD
KEEP_CPU_QUIET_DRY=1 "$here/keep-cpu-quiet.sh" bash "$tmp/cmd.sh" "$tmp/children" 2>"$tmp/err"
started=$(wc -l <"$tmp/children")
bad=0
while read -r _ _ _ comm pid _; do
  if grep -qx "$pid" "$tmp/children"; then
    echo "would have paused its own child $comm $pid" >&2
    bad=$((bad + 1))
  fi
done < <(grep "would pause" "$tmp/err")
echo "$started niced children started, $bad of them would have been paused"
[ "$bad" -eq 0 ]
