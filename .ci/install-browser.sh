#!/usr/bin/env bash
# Installs Debian's Chromium for the widget browser tests (tests/browser), if it is not there.
# Playwright drives this browser (executable_path=/usr/bin/chromium); it never downloads one.
# Idempotent: does nothing when /usr/bin/chromium exists. Needs root (or sudo) and apt.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
    echo "chromium already installed: $(/usr/bin/chromium --version 2>/dev/null || echo /usr/bin/chromium)"
    exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "install-browser: need root or sudo to apt-get install chromium" >&2; exit 1; }
    sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q chromium
/usr/bin/chromium --version
