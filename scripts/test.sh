#!/usr/bin/env bash
# The test command: make a virtual environment with the package and its test extras, install
# Chromium for the browser tests (Debian package; skipped when apt is unavailable), run pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${MGPU_LAB_VENV:-.venv}"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q -e ".[dev]"
if [ -f .ci/install-browser.sh ]; then
  bash .ci/install-browser.sh
fi
exec "$VENV/bin/python" -m pytest -q "$@"
