#!/usr/bin/env bash
# The compressors of chunked arrays (Zarr, HDF5, .npz): Debian's libzstd-dev,
# libblosc-dev and zlib1g-dev. Installed when missing and this user is root (or
# has sudo); otherwise a warning: Jask builds without them, and their codecs
# raise NotImplementedError when used.
set -uo pipefail
missing=()
[ -f /usr/include/zstd.h ] || missing+=(libzstd-dev)
[ -f /usr/include/blosc.h ] || missing+=(libblosc-dev)
[ -f /usr/include/zlib.h ] || missing+=(zlib1g-dev)
[ ${#missing[@]} -eq 0 ] && exit 0
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo"; else
    echo "warning: ${missing[*]} missing and this user cannot install them; Jask builds" \
      "without those codecs (run: apt-get install ${missing[*]})" >&2
    exit 0
  fi
fi
if ! { $SUDO apt-get update -qq &&
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null; }; then
  echo "warning: could not install ${missing[*]}; Jask builds without those codecs" >&2
fi
exit 0
