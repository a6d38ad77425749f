"""Wiring Jask into JAX: one explicit `install()`, called once from jask/__init__.py.

Everything that registers a Jask object with JAX (or hands one layer the functions of a
layer above it) happens here, in this order, rather than as a side effect of importing a
module.
"""

from __future__ import annotations

from . import lowering
from ._api import creation, elementwise, indexing, io, linalg, numpy_dispatch, reductions, shape
from ._jax import compat, op
from ._jax.diskarray import OPERATORS, DiskArray, DiskArrayTy
from .ops import _batching

_installed = False


def install() -> None:
    """Registers DiskArray with JAX and installs the jit-time passes, the operators and the
    jax.numpy dispatch. Idempotent."""
    global _installed
    if _installed:
        return
    compat.register_hitype(DiskArray, lambda x: x._ty)
    compat.defer_dense_operators_to(DiskArrayTy)
    compat.raise_remat_outputs()
    op.set_batch_rule(_batching.run_per_element)
    compat.install_lowering_passes(*lowering.passes())
    OPERATORS.update(_operators())
    is_disk = numpy_dispatch.is_disk
    compat.install_numpy_dispatch(numpy_dispatch.TABLE, is_disk)
    compat.install_numpy_dispatch(numpy_dispatch.SEQUENCE_TABLE, numpy_dispatch.holds_disk)
    compat.accept_in_optax_abs_sq(is_disk, elementwise.square)
    compat.name_unsupported_primitives(is_disk)
    compat.broadcast_unbatched_outputs(is_disk,
                                       lambda x, size, axis: shape.stack([x] * size, axis))
    _installed = True


def _operators() -> dict:
    """The functions DiskArray's operators and methods call (diskarray.OPERATORS)."""
    return dict(
        add=elementwise.add, sub=elementwise.sub, mul=elementwise.mul,
        divide=elementwise.divide, power=elementwise.power, negative=elementwise.negative,
        abs=elementwise.abs, astype=elementwise.astype, less=elementwise.less,
        less_equal=elementwise.less_equal, greater=elementwise.greater,
        greater_equal=elementwise.greater_equal, equal=elementwise.equal,
        not_equal=elementwise.not_equal,
        dot=linalg.dot, matmul=linalg.matmul, transpose=shape.transpose, sum=reductions.sum,
        zeros=creation.zeros, from_numpy=io.from_numpy, open=io.open_array, update_=io.update_,
        getitem=indexing.getitem,
    )
