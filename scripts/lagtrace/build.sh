#!/usr/bin/env bash
# build.sh DIR: build the lagtrace diagnostic (BPF object + loader) into DIR (default
# target/lagtrace). Needs clang, bpftool, libbpf-dev and /sys/kernel/btf/vmlinux.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-target/lagtrace}
mkdir -p "$out"
bpftool btf dump file /sys/kernel/btf/vmlinux format c >"$out/vmlinux.h"
clang -O2 -g -target bpf -D__TARGET_ARCH_x86 -I"$out" -c "$here/lagtrace.bpf.c" -o "$out/lagtrace.bpf.o"
cc -O2 -Wall -o "$out/lagtrace" "$here/lagtrace.c" -lbpf
echo "built $out/lagtrace"
