"""`Release`: frees an intermediate DiskArray of a compiled program (the op the lowering's
release pass inserts, jask/lowering/release.py, and the external sort's scratch runs use)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .._jax import compat
from .._jax.diskarray import DiskArray
from .._jax.op import RELEASE_TARGET


class Release(compat.VJPHiPrimitive):
    """Frees an intermediate DiskArray of a compiled program after its consumers ran.

    Inserted by the release pass, never called by users. The first operand is the
    intermediate; the rest are its consumers' results, which order this call after them.
    """

    def __init__(self, *in_avals):
        self.in_avals = tuple(in_avals)
        self.out_aval = compat.ShapedArray((), jnp.int32)
        self.params = {}
        super().__init__()

    def expand(self, dead, *deps):
        operands = [x._lowered_handle() if isinstance(x, DiskArray) else x for x in (dead, *deps)]
        call = jax.ffi.ffi_call(
            RELEASE_TARGET, jax.ShapeDtypeStruct((), jnp.int32), has_side_effect=True
        )
        return call(*operands, num_handles=np.int64(1))
