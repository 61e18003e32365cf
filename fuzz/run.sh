#!/usr/bin/env bash
# Build and run a fuzz target with libFuzzer on the stable toolchain: the same coverage
# instrumentation cargo-fuzz asks rustc for (SanitizerCoverage counters, PC table, comparison
# tracing), without a sanitizer (that part needs nightly).
#
#   fuzz/run.sh [TARGET] [SECONDS] [extra libFuzzer flags...]
#
# TARGET is `request` (default) or `resolve_path`; SECONDS (default 60) bounds the run. The
# committed seeds (fuzz/seeds/TARGET, written by hand) and the committed corpus of the long run
# (fuzz/corpus-min/TARGET, minimized with -merge=1) are read; what the run discovers goes to
# fuzz/corpus/TARGET (not committed), crashes to fuzz/artifacts/TARGET. The seed is fixed
# (-seed=1) unless a -seed=N flag is given. Example, the documented long run:
#   nice -n 19 fuzz/run.sh request 3600
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
target="${1:-request}"
seconds="${2:-60}"
shift $(( $# > 2 ? 2 : $# ))
triple="$(rustc -vV | sed -n 's/^host: //p')"
export RUSTFLAGS="--cfg fuzzing -Cpasses=sancov-module \
 -Cllvm-args=-sanitizer-coverage-level=4 \
 -Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
 -Cllvm-args=-sanitizer-coverage-pc-table \
 -Cllvm-args=-sanitizer-coverage-trace-compares \
 -Cdebug-assertions -Coverflow-checks"
# --target keeps the flags off build scripts and proc macros.
cargo build --manifest-path "$here/Cargo.toml" --release --target "$triple" --bin "$target"
bin="$here/target/$triple/release/$target"
mkdir -p "$here/corpus/$target" "$here/artifacts/$target"
seeds=()
[ -d "$here/seeds/$target" ] && seeds+=("$here/seeds/$target")
[ -d "$here/corpus-min/$target" ] && seeds+=("$here/corpus-min/$target")
dict=()
[ -f "$here/$target.dict" ] && dict=("-dict=$here/$target.dict")
seed_flag="-seed=1"
for a in "$@"; do case "$a" in -seed=*) seed_flag="";; esac; done
exec "$bin" $seed_flag -max_total_time="$seconds" -timeout=10 -rss_limit_mb=1024 \
  -max_len=8192 -artifact_prefix="$here/artifacts/$target/" "${dict[@]}" "$@" \
  "$here/corpus/$target" "${seeds[@]}"
