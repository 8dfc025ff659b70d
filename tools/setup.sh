#!/usr/bin/env bash
# Installs what tidemark needs to build and test on Debian 12, and nothing
# when everything is already there.  Run as root (or with sudo available).
set -euo pipefail

packages=(g++ cmake ninja-build pkg-config libtbb-dev libabsl-dev libgtest-dev libgmock-dev
          libbenchmark-dev tzdata libopenmpi-dev openmpi-bin libcpp-httplib-dev
          libjemalloc-dev librocksdb-dev)
# --with-chromium: also the headless browser that the timeline and live view
# tests render with (each calls this itself, only when it runs).
if [ "${1:-}" = "--with-chromium" ]; then
  packages=(chromium fonts-dejavu-core)
fi
# --with-fuzz: clang and its libFuzzer runtime, for tools/fuzz.sh.
if [ "${1:-}" = "--with-fuzz" ]; then
  packages=(clang libclang-rt-14-dev)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all build dependencies are installed"
  exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "setup: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
