#!/usr/bin/env bash
# GoogleTest for the engine's C++ tests comes from Debian's libgtest-dev.
set -euo pipefail
if [ -f /usr/include/gtest/gtest.h ] && ls /usr/lib/*/libgtest.a /usr/lib/libgtest.a >/dev/null 2>&1; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "libgtest-dev is missing and this user cannot install it; run: apt-get install libgtest-dev" >&2
    exit 1
  fi
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq libgtest-dev cmake >/dev/null
