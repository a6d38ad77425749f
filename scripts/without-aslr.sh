#!/usr/bin/env bash
# Runs a command with address-space randomization off when the system allows it:
# GCC 12's ThreadSanitizer fails at start ("unexpected memory mapping") under the
# high mmap randomization of recent kernels.
set -euo pipefail
if setarch "$(uname -m)" -R true 2>/dev/null; then
  exec setarch "$(uname -m)" -R "$@"
fi
exec "$@"
