#!/usr/bin/env bash
# Test-only Python references that Debian does not package (pycocotools), in a venv over the
# system site packages (torch, numpy stay Debian's). Prints the venv's python on stdout when it has
# them; a failed install (no network) is reported on stderr and the tests that need it skip with
# the reason. The venv: $AIM_PYDEPS_VENV, default ~/.cache/aim-pydeps.
set -uo pipefail
venv="${AIM_PYDEPS_VENV:-${HOME:-/tmp}/.cache/aim-pydeps}"
if ! "$venv/bin/python" -c 'import pycocotools' >/dev/null 2>&1; then
  { /usr/bin/python3 -m venv --system-site-packages "$venv" &&
      "$venv/bin/pip" install -q --disable-pip-version-check --timeout 30 --retries 2 pycocotools; } >&2 ||
    { echo "[pydeps] could not install pycocotools into $venv: its comparison test will skip" >&2; exit 0; }
fi
echo "$venv/bin/python"
