#!/usr/bin/env bash
# Install Debian's Chromium and ChromeDriver for `make test-browser` when they are missing.
set -euo pipefail
if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
    exit 0
fi
echo "test-browser: Chromium is missing; installing chromium and chromium-driver with apt-get" >&2
sudo=$([ "$(id -u)" = 0 ] || echo sudo)
$sudo apt-get update -qq
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
