#!/usr/bin/env bash
# Test-only Python references that Debian does not package (pycocotools, sacrebleu), in a venv over the
# system site packages (torch, numpy stay Debian's). Prints the venv's python on stdout when it has
# them; a failed install (no network) is reported on stderr and the tests that need it skip with
# the reason. The venv: $AIM_PYDEPS_VENV, default ~/.cache/aim-pydeps.
set -uo pipefail
venv="${AIM_PYDEPS_VENV:-${HOME:-/tmp}/.cache/aim-pydeps}"
if ! "$venv/bin/python" -c 'import pycocotools, sacrebleu' >/dev/null 2>&1; then
  { /usr/bin/python3 -m venv --system-site-packages "$venv" &&
      "$venv/bin/pip" install -q --disable-pip-version-check --timeout 30 --retries 2 pycocotools sacrebleu; } >&2 ||
    echo "[pydeps] could not install pycocotools/sacrebleu into $venv: their comparison tests skip" >&2
fi
"$venv/bin/python" -c 'import pycocotools' >/dev/null 2>&1 || "$venv/bin/python" -c 'import sacrebleu' >/dev/null 2>&1 || exit 0
echo "$venv/bin/python"
