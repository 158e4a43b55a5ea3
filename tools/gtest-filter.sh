#!/usr/bin/env bash
# Prints the gtest patterns of a tier file (tests/tiers/*.txt: one per line, # comments) joined
# by ':' for --gtest_filter.   tools/gtest-filter.sh tests/tiers/plain_only.txt
set -euo pipefail
sed -e 's/#.*//' -e 's/[[:space:]]//g' "$1" | grep -v '^$' | paste -sd: -
