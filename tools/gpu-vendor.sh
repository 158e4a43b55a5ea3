#!/usr/bin/env bash
# Fills third_party/ (git-ignored) with the sources the GPU machine lacks: GoogleTest (from
# Debian's /usr/src/googletest) and nlohmann-json headers. Run here before a GPU check and name
# third_party in the device tool's `carry`. Boost and OpenBLAS are optional in the build: without
# them the CLIs / cpu.blas are not built, and the summary says so.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tp="$root/third_party"
mkdir -p "$tp"
"$root/tools/deps.sh"
rm -rf "$tp/googletest" "$tp/nlohmann"
cp -r /usr/src/googletest "$tp/googletest"
mkdir -p "$tp/nlohmann/include"
cp -r /usr/include/nlohmann "$tp/nlohmann/include/"
du -sh "$tp"
