#!/usr/bin/env bash
# Install what triage's builds, tests and labs need on Debian: the peers (nginx, Apache httpd,
# HAProxy, lighttpd, php-fpm behind nginx), wrk, iproute2 (netns, veth, tc), interpreters for the CGI tests, cmake for native
# crates. Idempotent: installs only what is missing. Needs root (or sudo) for apt-get.
set -euo pipefail

pkgs=(build-essential cmake pkg-config nginx apache2 haproxy lighttpd wrk iproute2 procps psmisc curl
      perl python3 util-linux
      # `triage lab pos --variants php-fpm,php-fpm+pos`: Debian's php-fpm (the peer) and
      # php-cgi (the lab's test of its PHP scripts).
      php8.2-fpm php8.2-cgi
      # os::proctrace's BPF logger (cargo feature `bpf`): clang -target bpf, the kernel's BTF
      # through bpftool, libbpf's headers; libbpf-sys builds its vendored libbpf with libelf
      # and zlib. Without them the build goes on with the /proc logger only.
      clang llvm bpftool libbpf-dev libelf-dev zlib1g-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ! command -v cargo >/dev/null 2>&1; then
  missing+=(cargo rustc)
fi
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Debian starts the peers as system services on install; the labs run their own instances on
# their own ports, so the system ones are stopped to keep the CPUs quiet.
for svc in nginx apache2 haproxy lighttpd php8.2-fpm; do
  if command -v service >/dev/null 2>&1; then service "$svc" stop >/dev/null 2>&1 || true; fi
done
echo "deps: ok"
