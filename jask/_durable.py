"""Making what Python writes durable: the folder flush that follows a rename."""

from __future__ import annotations

import os


def fsync_folder(folder) -> None:
    """Flushes a folder's entries (a rename or a new file in it) to disk."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
