"""Parsing a .npy header that Jask did not write, with NumPy's own parser, checked.

NumPy's header parser lets more than ValueError out of a hostile header (tokenize.TokenError,
SyntaxError, UnicodeDecodeError, ...): here every such failure is one ValueError naming the
file, so no internal exception type escapes an opener.
"""

from __future__ import annotations

import numpy as np
from numpy.lib import format as npy_format

MAX_HEADER = 10_000  # numpy.load's own default limit on a header's text


def read_header(fp, where: str) -> tuple[tuple[int, ...], bool, np.dtype]:
    """The (shape, fortran_order, dtype) of the .npy file `fp` is positioned at the start of.

    Args:
      fp: a binary file object at the file's first byte; left after the header.
      where: the file (and member or leaf), for messages.

    Raises:
      ValueError: the bytes are no .npy header NumPy reads, naming `where` and why.
      MemoryError: as NumPy raises it.
    """
    try:
        version = npy_format.read_magic(fp)
        if version == (1, 0):
            return npy_format.read_array_header_1_0(fp, max_header_size=MAX_HEADER)
        if version in ((2, 0), (3, 0)):
            return npy_format.read_array_header_2_0(fp, max_header_size=MAX_HEADER)
        raise ValueError(f"unknown .npy format version {version}")
    except MemoryError:
        raise
    except Exception as e:  # numpy's parser lets tokenize, syntax and unicode errors out
        raise ValueError(f"{where} is not a readable .npy file: {type(e).__name__}: {e}") from None
