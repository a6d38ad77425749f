#!/usr/bin/env bash
# clang-format for `make lint-cpp` comes from Debian's clang-format package (version 14):
# other versions format some constructs differently, so the check pins the major version.
set -euo pipefail
if command -v clang-format >/dev/null 2>&1 && clang-format --version | grep -q 'version 14\.'; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "clang-format 14 is missing and this user cannot install it; run: apt-get install clang-format" >&2
    exit 1
  fi
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq clang-format >/dev/null
if ! clang-format --version | grep -q 'version 14\.'; then
  echo "make lint-cpp expects clang-format 14 (Debian 12's); found: $(clang-format --version)" >&2
  exit 1
fi
