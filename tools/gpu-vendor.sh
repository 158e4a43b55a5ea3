#!/usr/bin/env bash
# Fills third_party/ (git-ignored) with what the GPU machine lacks: GoogleTest (from Debian's
# /usr/src/googletest), nlohmann-json headers, and Boost.Program_options for the CLIs (aim-train,
# aim-infer): the headers it includes (their closure under g++ and clang++, C++17 and C++20, plus
# boost/config and boost/predef whole, ~5 MB) and Debian's static libboost_program_options.a
# (position-independent; Debian ships no Boost sources, so the library is the compiled one, built
# by GCC 12: it links against the same or a newer libstdc++). CMakeLists.txt uses
# third_party/boost_po when find_package finds no Boost.Program_options. Run here before a GPU
# check and name third_party in the device tool's `carry`. OpenBLAS, libjpeg and libpng are
# optional in the build: without them cpu.blas / image decoding are absent or refuse with the
# package to install, and the summary says so.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tp="$root/third_party"
mkdir -p "$tp"
"$root/tools/deps.sh"
rm -rf "$tp/googletest" "$tp/nlohmann"
cp -r /usr/src/googletest "$tp/googletest"
mkdir -p "$tp/nlohmann/include"
cp -r /usr/include/nlohmann "$tp/nlohmann/include/"

# Boost.Program_options: headers (closure of <boost/program_options.hpp>) and the static library.
po="$tp/boost_po"
rm -rf "$po"
mkdir -p "$po/include" "$po/lib"
lib=$(find /usr/lib /usr/lib64 -name libboost_program_options.a 2>/dev/null | head -1)
if [ -z "$lib" ] || [ ! -e /usr/include/boost/program_options.hpp ]; then
  echo "[gpu-vendor] no libboost_program_options.a or its headers here (apt-get install" \
       "libboost-program-options-dev): the GPU build will not have the CLIs" >&2
else
  cp "$lib" "$po/lib/"
  {
    for cxx in g++ clang++; do
      command -v "$cxx" >/dev/null || continue
      for std in c++17 c++20; do
        echo '#include <boost/program_options.hpp>' |
          "$cxx" -std="$std" -M -x c++ - 2>/dev/null | tr ' \\' '\n\n' || true
      done
    done
    find /usr/include/boost/config /usr/include/boost/predef -type f
    echo /usr/include/boost/config.hpp /usr/include/boost/predef.h | tr ' ' '\n'
  } | grep '^/usr/include/boost/' | sort -u | while read -r h; do
    dst="$po/include/${h#/usr/include/}"
    mkdir -p "$(dirname "$dst")"
    cp "$h" "$dst"
  done
  # Every header the CLIs' include needs must now come from third_party, none from the system.
  leak=$(echo '#include <boost/program_options.hpp>' |
    g++ -std=c++17 -I"$po/include" -M -x c++ - | tr ' \\' '\n\n' | grep '^/usr/include/boost/' || true)
  if [ -n "$leak" ]; then
    echo "[gpu-vendor] boost_po is incomplete, still reads: $leak" >&2
    exit 1
  fi
fi
du -sh "$tp" "$tp"/*
