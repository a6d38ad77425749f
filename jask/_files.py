"""Opening files Jask did not write: regular files only, never blocking, never read past a limit.

Every path a format opener reads from Python (an index, a header, a member, a chunk, a metadata
file) goes through `open_regular`: the open is O_NONBLOCK, so a FIFO cannot block it, and fstat
must then say "regular file", so a FIFO, a device (a link to /dev/zero) or a socket is refused
before a byte is read. The engine's `File` does the same for the files it opens (io/file.cpp).
"""

from __future__ import annotations

import errno
import os
import stat


def file_kind(mode: int) -> str:
    """What a `st_mode` names, in words: "a FIFO", "a folder", ..."""
    for test, name in (
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "of an unknown kind"


class UnsupportedFileError(NotImplementedError, ValueError):
    """A valid file asking for what Jask does not read: a codec, a filter, a layout, a zip
    method, a datatype's bit layout. A ValueError, as every refusal of a file's contents is."""


class NotInFileError(KeyError, ValueError):
    """A name asked for is not in the file or store (a dataset, an array of a group): a KeyError,
    as a missing key of a mapping is, and a ValueError, as every refusal of a file is."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class NotRegularFileError(OSError):
    """A path Jask reads names a FIFO, a device, a socket or a folder, not a regular file."""


def open_regular(path, what: str, *, follow_links: bool = True) -> int:
    """A read-only descriptor of the regular file at `path` (the caller closes it).

    Args:
      path: the file.
      what: what the file is, for messages ("safetensors index", "zarr chunk (0, 1)").
      follow_links: False refuses a symbolic link itself (files Jask wrote are never links).

    Raises:
      FileNotFoundError, PermissionError, ...: the open's own error, naming `what` and `path`.
      NotRegularFileError (an OSError): `path` is not a regular file (after links, when followed).
    """
    path = os.fspath(path)
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | (0 if follow_links else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        if e.errno == errno.ELOOP and not follow_links:
            raise NotRegularFileError(
                errno.ELOOP, f"{what} {path} is a symbolic link; Jask does not follow it here"
            ) from None
        if e.errno == errno.ENXIO:  # a socket, or a FIFO O_NONBLOCK cannot open for writing
            raise NotRegularFileError(
                e.errno, f"{what} {path} is not a regular file; Jask reads regular files only"
            ) from None
        raise type(e)(e.errno, f"{what}: cannot open {path}: {e.strerror}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            code = errno.EISDIR if stat.S_ISDIR(mode) else errno.EINVAL
            raise NotRegularFileError(
                code,
                f"{what} {path} is {file_kind(mode)}, not a regular file; "
                "Jask reads regular files only",
            )
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path, what: str, limit: int, *, follow_links: bool = True) -> bytes:
    """The whole of the regular file at `path`, refused unread if it is over `limit` bytes.

    Raises:
      ValueError: the file is over `limit` bytes (naming the file, its size and the limit).
      OSError: as `open_regular`.
    """
    fd = open_regular(path, what, follow_links=follow_links)
    with os.fdopen(fd, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > limit:
            raise ValueError(
                f"{what} {os.fspath(path)} is {size} bytes, over Jask's limit of {limit} bytes "
                "for it"
            )
        data = f.read(limit + 1)
    if len(data) > limit:  # grew while it was read
        raise ValueError(
            f"{what} {os.fspath(path)} grew past Jask's limit of {limit} bytes while it was read"
        )
    return data


def is_regular(path) -> bool:
    """Whether `path` (links followed) is a regular file; False if it does not exist."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False
