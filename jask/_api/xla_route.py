"""XLA computes, Jask moves the bytes: the route of every jax.lax primitive that has no Jask
rule of its own (convolution, pooling, linear algebra, FFT, special functions, ...).

The rule, for a primitive bound with DiskArray operands and no Jask rule:

1. **It fits**: when the DiskArray operands read into memory plus the primitive's results
   take at most half the memory budget (`fits_in_memory`), the DiskArray operands are read
   whole (`jask.materialize`, differentiable: the cotangent of a DiskArray is written back to
   a DiskArray) and JAX's own implementation runs the primitive, eagerly or inside the jitted
   program, under every transformation JAX has a rule for. The results are in-memory
   jax.Arrays (they fit the budget by construction).
2. **It is independent along an axis** (a convolution along its batch axis, pooling along an
   axis its window does not span, FFT over the axes it does not transform, batched linear
   algebra, an elementwise function): the operands stream through memory in blocks of that
   axis and XLA computes each block (`jask.ops.block_map`); the result is a DiskArray.
3. **It is linear in complex operands** (a sum, cumulative sum or product of matrices): it
   splits into real primitives on the real and imaginary parts, which stream
   (`jask/_api/complex_parts.py`).
4. Otherwise the primitive needs an out-of-core algorithm Jask does not have: a
   NotImplementedError names the primitive, the operands, the bytes it would need in memory
   and the budget.

The other half of the budget is left to XLA's temporaries and to the engine.
"""

from __future__ import annotations

import jax
import numpy as np
from jax.extend import core as jex_core

from .. import _runtime
from .._jax import compat
from .._jax.diskarray import DiskArray, DiskArrayTy, with_weak_type
from .._jax.op import apply
from ..ops import BroadcastTo
from ..ops.in_memory import FromInMemory, ToInMemory
from . import blocked, complex_parts
from .blocked import allowance, nbytes
from .operands import small_result


def out_avals(primitive, args, params) -> list:
    """The primitive's result types, as for in-memory operands of the same types."""
    structs = [_struct(compat.typeof(a)) for a in args]
    out = jax.eval_shape(lambda *xs: primitive.bind(*xs, **params), *structs)
    return list(out) if primitive.multiple_results else [out]


def _struct(aval):
    return jax.ShapeDtypeStruct(aval.shape, aval.dtype, weak_type=getattr(aval, "weak_type", False))


def in_memory_bytes(args, outs) -> int:
    """Bytes held in memory by the in-memory route: the DiskArray operands read whole and the
    results."""
    disk = sum(nbytes(compat.typeof(a)) for a in args if isinstance(a, DiskArray))
    return disk + sum(nbytes(o) for o in outs)


def route(primitive, args, params, rule_error: Exception | None = None):
    """The primitive applied to operands among which are DiskArrays, by the rule above (called
    at the primitive's trace). `rule_error`: what Jask's own rule raised for this case, raised
    again when XLA cannot compute it either."""
    args = spread_operands(primitive, args)
    outs = out_avals(primitive, args, params)
    needed = in_memory_bytes(args, outs)
    if needed <= allowance():
        in_memory = [apply(ToInMemory, a) if isinstance(a, DiskArray) else a for a in args]
        out = primitive.bind(*in_memory, **params)
        if primitive.name == "dot_general" and out.ndim and not small_result(out.shape, *args):
            # a product has the type Jask's own rule gives it (a complex one comes here): an
            # operator applied to a DiskArray vector gives a DiskArray, as custom_linear_solve
            # and linear_transpose require of a matvec
            out = with_weak_type(apply(FromInMemory, out), out.weak_type)
        return out
    result = blocked.route(primitive, args, params, outs)
    if result is None:
        result = complex_parts.route(primitive, args, params)
    if result is not None:  # JAX's weak_type flags (Jask's ops state dtypes and shapes)
        if not primitive.multiple_results:
            return with_weak_type(result, outs[0].weak_type)
        return type(result)(with_weak_type(r, o.weak_type) for r, o in zip(result, outs))
    if rule_error is not None:
        raise rule_error
    raise too_large(primitive.name, args, needed)


def spread_operands(primitive, args) -> list:
    """An elementwise primitive's operands spread to one shape where they differ by size-1 axes.

    Jask's rules take NumPy's broadcasting of size-1 axes (jnp.where's patch binds select_n on
    operands of one rank, so that a scalar next to a DiskArray is never spread in memory);
    JAX's primitive does not. A DiskArray operand is spread by Jask's broadcast (streamed), an
    in-memory one in memory when the result fits the route's allowance, else to a DiskArray."""
    shapes = {tuple(np.shape(a)) for a in args if np.ndim(a)}
    if primitive.name not in blocked.ELEMENTWISE or len(shapes) < 2:
        return list(args)
    shape = tuple(int(d) for d in np.broadcast_shapes(*shapes))
    widest = max(np.dtype(compat.typeof(a).dtype).itemsize for a in args)
    # in memory where the route computes in memory: every operand and the result at full size
    in_memory = (len(args) + 1) * int(np.prod(shape, dtype=np.int64)) * widest <= allowance()
    spread = []
    for x in args:
        if np.ndim(x) and tuple(np.shape(x)) != shape:
            if isinstance(x, DiskArray) or in_memory:
                x = jax.numpy.broadcast_to(x, shape)
            else:
                x = apply(BroadcastTo, x, shape=shape)
        spread.append(x)
    return spread


def too_large(name: str, args, needed: int) -> NotImplementedError:
    operands = ", ".join(compat.describe_operand(a) for a in args)
    return NotImplementedError(
        f"jax.lax.{name} on a DiskArray ({operands}){compat.user_frame()}: Jask computes it in "
        f"memory when its DiskArray operands and results fit half the memory budget "
        f"({needed} bytes needed, budget {_runtime.memory_budget()} bytes; "
        f"jask.set_memory_budget), or block by block along an axis it is independent along; "
        f"this one is neither (README.md lists the out-of-core algorithms Jask has)"
    )


def xla_computes(primitive, avals, params) -> bool:
    """True for a primitive Jask has a rule for that XLA computes all the same: complex operands
    or results. The engine stores and moves complex arrays, but its complex instructions are few
    (conversions, + - * /, exp, ==, select; no reductions or products): all complex arithmetic
    takes one route, XLA's."""
    if primitive.name in _MOVES_BYTES or _holds_jaxpr(params):
        return False  # a loop, branch, call or solve: its rule runs the body, whose ops route
    dtypes = [getattr(a, "dtype", None) for a in avals]
    dtypes.append(params.get("new_dtype"))
    # jax.dtypes.issubdtype knows extended dtypes (PRNG key types) that np.dtype refuses
    return any(d is not None and jax.dtypes.issubdtype(d, np.complexfloating) for d in dtypes)


def _holds_jaxpr(params) -> bool:
    """Whether a primitive's params hold a jaxpr typed on DiskArrays (a loop's body, a branch, a
    solve's operator: XLA cannot take the primitive whole with those operands in memory); a
    scalar combiner (a scatter's or reduction's) is not one."""
    for value in params.values():
        values = value if isinstance(value, (tuple, list)) else (value,)
        for v in values:
            jaxpr = v.jaxpr if isinstance(v, jex_core.ClosedJaxpr) else v
            if isinstance(jaxpr, jex_core.Jaxpr) and any(
                isinstance(x.aval, DiskArrayTy) for x in (*jaxpr.invars, *jaxpr.outvars)
            ):
                return True
    return False


# Rules that only move bytes (any dtype the engine stores).
_MOVES_BYTES = frozenset(
    """reshape squeeze expand_dims broadcast_in_dim transpose rev slice dynamic_slice
    dynamic_update_slice concatenate pad gather copy split tile unstack""".split()
)
