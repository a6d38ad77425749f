"""Wiring Jask into JAX: one explicit `install()`, called once from jask/__init__.py.

Everything that registers a Jask object with JAX (or hands one layer the functions of a
layer above it) happens here, in this order, rather than as a side effect of importing a
module.
"""

from __future__ import annotations

from . import _debug, _runtime, _serialization, lowering
from ._api import (
    creation,
    indexing,
    io,
    lax,
    lax_elementwise,
    lax_reductions,
    lax_shape,
    loops,
    numpy,
    ragged,
    search,
    shape,
    tall_linalg,
    xla_route,
)
from ._dtypes import UnstorableDtypeError
from ._jax import compat, op, primitives
from ._jax.diskarray import (
    OPERATORS,
    DiskArray,
    DiskArrayTy,
    check_fits_in_memory,
    from_in_memory,
    install_methods,
    is_disk_array,
)
from .formats import zarr
from .ops import OPS, _batching
from .ops._elementwise import EngineDtypeError

_installed = False


def install() -> None:
    """Registers DiskArray with JAX, hands the op layer its vmap rule and DiskArray its
    operators, and installs the JAX patches (compat.PATCHES: among them the jit-time passes
    and the jax.numpy dispatch). Idempotent."""
    global _installed
    if _installed:
        return
    compat.register_hitype(DiskArray, lambda x: x._ty)
    op.set_batch_rule(_batching.batch)
    OPERATORS.update(_operators())
    install_methods()
    primitives.register_ops(OPS)
    # the rules of jask/_api/lax*.py registered themselves when imported above
    assert lax and lax_elementwise and lax_reductions and lax_shape
    assert ragged  # jax.lax.ragged_dot_general out of core
    assert loops  # jask/_api/loops.py: loops own their DiskArray carries
    assert tall_linalg  # jask/_api/tall_linalg.py: TSQR for qr and svd too large for memory
    assert _debug  # jax.debug.callback and jax.debug.print with DiskArrays
    compat.install_patches(
        compat.Hooks(
            hi_type=DiskArrayTy,
            is_hi=is_disk_array,
            broadcast=lambda x, size, axis: shape.stack([x] * size, axis),
            lowering_passes=lowering.passes(),
            full_like=creation.full_like,
            in_memory_tree=_serialization.in_memory_tree,
            when_imported=_serialization.when_imported,
            to_disk=from_in_memory,
            to_memory=_to_memory,
            in_memory_if_0d=_in_memory_if_0d,
            primitive_rules=primitives.RULES,
            xla_route=xla_route.route,
            xla_computes=xla_route.xla_computes,
            xla_route_errors=(UnstorableDtypeError, EngineDtypeError, NotImplementedError),
            new_program_slot=_runtime.new_program_slot,
            program_compiled=_runtime.note_program_memory,
            searchsorted=search.searchsorted,
            mask_positions=indexing.mask_positions,
            masked_update=indexing.masked_update,
        )
    )
    _serialization.install()  # orbax.checkpoint and flax.serialization, once imported
    _installed = True


def _to_memory(x, what: str):
    check_fits_in_memory(
        x, what, "pass the DiskArray itself (jax.jit, jax.grad and jax.numpy take it)"
    )
    return io.materialize(x)


def _in_memory_if_0d(x):
    return io.materialize(x) if is_disk_array(x) and x.ndim == 0 else x


def _operators() -> dict:
    """The functions DiskArray's own members call (diskarray.OPERATORS: written with ops, which
    sit above that module)."""
    return dict(
        add=numpy.add,
        zeros=creation.zeros,
        from_numpy=io.from_numpy,
        open=io.open_array,
        update_=io.update_,
        getitem=indexing.getitem,
        to_zarr=zarr.to_zarr,
    )
