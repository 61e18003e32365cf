#!/usr/bin/env bash
# Build the folder that scripts/device-bench-cores.sh runs from, on a machine where nothing can be
# installed and nothing reached (the `device` tool's 16-core machine): the triage binary, nginx and
# wrk, each with every shared library `ldd` lists and the dynamic loader, started through small
# wrappers in DIR/bin that run the carried loader on the carried libraries (so the machine's own
# C library, whatever its version, is not used).
#
# Usage (from the repository root, after `cargo build --release -p triage`):
#   scripts/device-pack.sh [DIR]        # DIR defaults to device-pack (git-ignored)
# Then carry DIR with the `run` call (its `carry` list) and run scripts/device-bench-cores.sh DIR.
# EXTRA="/usr/bin/perf ..." packs more programs the same way (scripts/device-profile.sh needs perf);
# TAR=1 also writes DIR.tar.xz (a pack with perf is over the tool's 64 MiB; the archive is not).
set -euo pipefail
dir=${1:-device-pack}
triage=${TRIAGE:-target/release/triage}
nginx=${NGINX:-/usr/sbin/nginx}
wrk=${WRK:-/usr/bin/wrk}
progs=("$triage" "$nginx" "$wrk")
for e in ${EXTRA:-}; do progs+=("$e"); done
for p in "${progs[@]}"; do
    [ -x "$p" ] || { echo "device-pack: $p is missing (build triage; scripts/deps.sh installs nginx and wrk)" >&2; exit 1; }
done
rm -rf "$dir"
mkdir -p "$dir/bin" "$dir/real" "$dir/lib"
loader=
for prog in "${progs[@]}"; do
    name=$(basename "$prog")
    # Symbols are not needed to run (and the carried tree is limited to 64 MiB).
    strip -o "$dir/real/$name" "$prog" 2>/dev/null || cp "$prog" "$dir/real/$name"
    chmod 755 "$dir/real/$name"
    while read -r lib; do
        [ -n "$lib" ] || continue
        cp -L "$lib" "$dir/lib/"
        case "$lib" in */ld-linux*) loader=$(basename "$lib") ;; esac
    done < <(ldd "$prog" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}')
done
[ -n "$loader" ] || { echo "device-pack: no dynamic loader in ldd's output" >&2; exit 1; }
for prog in "${progs[@]}"; do
    name=$(basename "$prog")
    cat > "$dir/bin/$name" <<EOF
#!/bin/sh
# Runs the carried $name on the carried libraries (scripts/device-pack.sh).
d=\$(dirname "\$(readlink -f "\$0")")/..
exec "\$d/lib/$loader" --library-path "\$d/lib" "\$d/real/$name" "\$@"
EOF
    chmod 755 "$dir/bin/$name"
done
du -sh "$dir"
if [ -n "${TAR:-}" ]; then
    tar -C "$(dirname "$dir")" -cJf "$dir.tar.xz" "$(basename "$dir")"
    du -sh "$dir.tar.xz"
fi
echo "device-pack: $dir ready ($(cd "$dir/bin" && echo *))"
