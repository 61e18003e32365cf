#!/usr/bin/env bash
# Fill DIR with what scripts/device-cgv2.sh needs on the device (which can install nothing):
# the release `triage`, `wrk` and its libluajit, and the os crate's real-v2 test binary.
#   cargo build --release -p triage && cargo test --release -p os --test cgroup_v2_real --no-run
#   scripts/device-cgv2-pack.sh results/cgv2-bin     (results/ is git-ignored: carry it)
# PROFILE=ci packs the ci-profile builds instead (cargo build --profile ci -p triage; cargo test
# --profile ci -p os --test cgroup_v2_real --no-run): no 15-minute LTO build.
set -euo pipefail
DIR=${1:?usage: $0 DIR}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PROFILE=${PROFILE:-release}
mkdir -p "$DIR"
strip -o "$DIR/triage" "$ROOT/target/$PROFILE/triage"   # debug info would not fit a device carry
if command -v wrk >/dev/null; then
  cp "$(command -v wrk)" "$DIR/"
  lj=$(ldd "$(command -v wrk)" | awk '/libluajit/ {print $3}')
  [ -n "$lj" ] && cp "$lj" "$DIR/"
fi
t=$(ls -t "$ROOT"/target/$PROFILE/deps/cgroup_v2_real-* 2>/dev/null | grep -v '\.d$' | head -1 || true)
[ -n "$t" ] && strip -o "$DIR/cgroup_v2_real" "$t"
ls -la "$DIR"; du -sh "$DIR"
