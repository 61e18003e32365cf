#!/usr/bin/env bash
# The POS attach lab's Apache check on a pure cgroup v2 machine that can install nothing (the
# device): Debian's Apache prefork and triage carried there with their libraries.
#
#   scripts/device-pos-v2.sh pack DIR   # here: fill DIR (git-ignored; carry it) from this machine
#   scripts/device-pos-v2.sh run DIR    # there, as root: writes $OUT/v2 (summary.json, report)
#
# `pack` takes target/ci/triage (cargo build --profile ci -p triage), /usr/sbin/apache2, the five
# modules the lab's Apache loads and every library they need beyond libc/libm/libgcc_s (about
# 28 MB). `run` copies the modules where the lab's configuration loads them
# (/usr/lib/apache2/modules; a fresh machine, given back after) and runs
# `triage lab pos --exp 1 --quick --variants apache,apache+pos` (about 100 s). Without `ip` and
# `tc` there the testbed is loopback with client-side throttled reading (the summary says so).
set -euo pipefail
MODE=${1:?usage: $0 pack|run DIR}
DIR=${2:?usage: $0 pack|run DIR}
MODS="mod_mpm_prefork mod_authz_core mod_mime mod_filter mod_deflate"
case "$MODE" in
pack)
  ROOT=$(cd "$(dirname "$0")/.." && pwd)
  mkdir -p "$DIR/bin" "$DIR/lib" "$DIR/modules"
  strip -o "$DIR/bin/triage" "$ROOT/target/ci/triage"
  cp /usr/sbin/apache2 "$DIR/bin/"
  files="/usr/sbin/apache2 $ROOT/target/ci/triage"
  for m in $MODS; do cp "/usr/lib/apache2/modules/$m.so" "$DIR/modules/"; files="$files /usr/lib/apache2/modules/$m.so"; done
  # shellcheck disable=SC2086
  ldd $files | awk '/=>/ {print $3}' | grep -Ev 'lib(c|m|gcc_s)\.so' | sort -u | xargs -I{} cp -L {} "$DIR/lib/"
  du -sh "$DIR" ;;
run)
  DIR=$(cd "$DIR" && pwd)
  OUT=${OUT:-/tmp/pos-v2-out}
  export PATH="$DIR/bin:$PATH" LD_LIBRARY_PATH="$DIR/lib"
  [ "$(id -u)" -eq 0 ] || { echo "needs root"; exit 2; }
  mkdir -p /usr/lib/apache2/modules
  for m in $MODS; do [ -e "/usr/lib/apache2/modules/$m.so" ] || cp "$DIR/modules/$m.so" /usr/lib/apache2/modules/; done
  grep cgroup /proc/self/mountinfo
  triage lab pos --exp 1 --quick --variants apache,apache+pos --out "$OUT/v2" ;;
*) echo "usage: $0 pack|run DIR"; exit 2 ;;
esac
