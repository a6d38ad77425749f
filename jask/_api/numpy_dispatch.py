"""jax.numpy (and jax.lax) functions on DiskArrays: what `jnp.sqrt(g)` does when g is a DiskArray.

Libraries written for jax arrays (optax above all) call these on their
leaves. Each entry takes the jax.numpy signature and maps it to Jask ops;
an argument Jask does not support yet raises an error naming the function.
The entries of simple ops come from their declarations (`numpy_names` on a `Unary` or
`Binary` op); the rest, whose signatures need adapting, are written below.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .._jax import compat
from .._jax.diskarray import DiskArray, DiskArrayTy
from ..ops import OPS
from ..ops._pointwise import Binary, Unary
from . import creation, elementwise, indexing, linalg, reductions
from . import shape as shapes


def is_disk(x) -> bool:
    return type(x) is DiskArray or (compat.is_tracer(x) and isinstance(x.aval, DiskArrayTy))


def _unsupported(fn: str, what: str):
    raise NotImplementedError(f"jnp.{fn} on a DiskArray does not support {what} yet")


def _no_extra(fn: str, **kwargs) -> None:
    for name, value in kwargs.items():
        if value is not None and value is not False:
            _unsupported(fn, f"{name}={value!r}")


def _cast(x, dtype):
    return x if dtype is None else elementwise.astype(x, dtype)


def _unary(fn, name):
    def apply(x, /, **kwargs):
        _no_extra(name, **kwargs)
        return fn(x)

    return apply


def _binary(fn, name):
    def apply(x, y, /, **kwargs):
        _no_extra(name, **kwargs)
        return fn(x, y)

    return apply


def _like(fn, name):
    def apply(a, *args, dtype=None, shape=None, **kwargs):
        _no_extra(name, **kwargs)
        if shape is not None and tuple(shape) != a.shape:
            _unsupported(name, f"shape={shape!r}")
        return fn(a, *args, dtype=dtype)

    return apply


def _asarray(a, dtype=None, order=None, *, copy=None, **kwargs):
    # DiskArrays are immutable values (update_ aside), so no copy is needed
    if not is_disk(a):
        return jnp.asarray(a, dtype=dtype)
    _no_extra("asarray", order=order, **kwargs)
    return _cast(a, dtype)


def _array(object, dtype=None, copy=True, order="K", ndmin=0, **kwargs):
    if ndmin:
        _unsupported("array", f"ndmin={ndmin}")
    return _cast(object, dtype)


def _where(condition, x=None, y=None, /, **kwargs):
    if x is None or y is None:
        _unsupported("where", "the one-argument form")
    _no_extra("where", **kwargs)
    return elementwise.where(condition, x, y)


def _clip(arr=None, /, min=None, max=None, **kwargs):  # noqa: A002
    _no_extra("clip", **{k: v for k, v in kwargs.items() if k not in ("a", "a_min", "a_max")})
    arr = kwargs.get("a", arr)
    return elementwise.clip(arr, kwargs.get("a_min", min), kwargs.get("a_max", max))


def _transpose(a, axes=None):
    return shapes.transpose(a, axes)


def _two_operand(fn, name):
    def apply(a, b, *, precision=None, preferred_element_type=None, **kwargs):
        _no_extra(name, preferred_element_type=preferred_element_type, **kwargs)
        return fn(a, b)

    return apply


def _dynamic_slice_in_dim(operand, start_index, slice_size, axis=0, **kwargs):
    if axis != 0:
        _unsupported("lax.dynamic_slice_in_dim", f"axis={axis} (only the leading axis)")
    return indexing.rows(operand, start_index, slice_size)


def _dynamic_slice(operand, start_indices, slice_sizes, **kwargs):
    start_indices, slice_sizes = list(start_indices), list(slice_sizes)
    if list(slice_sizes[1:]) != list(operand.shape[1:]) or any(
        not (isinstance(s, int) and s == 0) for s in start_indices[1:]
    ):
        _unsupported("lax.dynamic_slice", "slices of axes other than the leading one")
    return indexing.rows(operand, start_indices[0], slice_sizes[0])


def _take(
    a,
    indices,
    axis=None,
    out=None,
    mode=None,
    unique_indices=False,
    indices_are_sorted=False,
    fill_value=None,
):
    # mode=None follows jask.take (IndexError on concrete indices out of range, traced ones
    # clamped), not jnp's NaN fill; 'fill' is refused rather than silently clamped.
    _no_extra("take", out=out, fill_value=fill_value)
    if axis is None:  # jnp.take's default: the flattened array
        a, axis = shapes.reshape(a, (a.size,)), 0
    if mode in ("clip", "wrap"):  # out-of-range indices are defined: clamp (no wrap) or modulo
        n = a.shape[0] if a.ndim else 1
        if compat.is_tracer(indices) or isinstance(indices, jax.Array):
            indices = jnp.clip(indices, 0, n - 1) if mode == "clip" else jnp.mod(indices, n)
        else:
            indices = np.clip(indices, 0, n - 1) if mode == "clip" else np.mod(indices, n)
    elif mode not in (None, "promise_in_bounds"):
        _unsupported("take", f"mode={mode!r} (None, 'clip' and 'wrap' are supported)")
    return indexing.take(a, indices, axis)


def holds_disk(x) -> bool:
    """A DiskArray, or a list or tuple with one (the operands of jnp.concatenate and kin)."""
    return is_disk(x) or (isinstance(x, (list, tuple)) and any(is_disk(v) for v in x))


def _concatenate(arrays, axis=0, dtype=None):
    _no_extra("concatenate", dtype=dtype)
    if axis is None:  # jnp's: the flattened arrays
        arrays = [shapes.reshape(a, (a.size,)) if is_disk(a) else jnp.ravel(a) for a in arrays]
        axis = 0
    return shapes.concatenate(list(arrays), axis)


def _stack(arrays, axis=0, out=None, dtype=None):
    _no_extra("stack", out=out, dtype=dtype)
    return shapes.stack(list(arrays), axis)


def _at_least(a, ndim):
    """a with leading axes of size 1 added up to `ndim` (jnp.atleast_1d / atleast_2d)."""
    if np.ndim(a) >= ndim:
        return a
    shape = (1,) * (ndim - np.ndim(a)) + tuple(np.shape(a))
    return shapes.reshape(a, shape) if is_disk(a) else jnp.reshape(jnp.asarray(a), shape)


def _vstack(tup, dtype=None):
    _no_extra("vstack", dtype=dtype)
    return shapes.concatenate([_at_least(a, 2) for a in tup], 0)


def _hstack(tup, dtype=None):
    _no_extra("hstack", dtype=dtype)
    arrays = [_at_least(a, 1) for a in tup]
    return shapes.concatenate(arrays, 0 if arrays and np.ndim(arrays[0]) == 1 else 1)


# Functions whose first argument is a sequence of arrays: dispatched when it holds a DiskArray.
SEQUENCE_TABLE = {
    "jnp.concatenate": _concatenate,
    "jnp.stack": _stack,
    "jnp.vstack": _vstack,
    "jnp.hstack": _hstack,
}


def _declared_entries() -> dict:
    """Each `numpy_names` name of a Unary or Binary op, calling `jask.<op name>`."""
    entries = {}
    for op in OPS:
        adapt = _unary if issubclass(op, Unary) else _binary if issubclass(op, Binary) else None
        if op.numpy_names and adapt is None:
            raise TypeError(
                f"jask.ops.{op.__name__} declares numpy_names but is neither a Unary "
                f"nor a Binary op: write its jax.numpy entry in {__name__}"
            )
        for name in op.numpy_names:
            entries[name] = adapt(getattr(elementwise, op.name), name.split(".", 1)[1])
    return entries


TABLE = {
    **_declared_entries(),
    **{f"jnp.{n}": _unary(lambda x: x, n) for n in ("conj", "conjugate", "real")},
    "nn.gelu": lambda x, approximate=True: elementwise.gelu(x, approximate),
    "jnp.broadcast_to": lambda array, shape, **kwargs: shapes.broadcast_to(array, shape),
    "jnp.vdot": _two_operand(linalg.vdot, "vdot"),
    "jnp.dot": _two_operand(linalg.dot, "dot"),
    "jnp.matmul": _two_operand(linalg.matmul, "matmul"),
    "jnp.transpose": _transpose,
    "jnp.outer": lambda a, b, **kwargs: linalg.outer(a, b),
    "jnp.einsum": lambda subscripts, *operands, **kwargs: linalg.einsum(subscripts, *operands),
    "jnp.where": _where,
    "lax.select": lambda pred, on_true, on_false: elementwise.where(pred, on_true, on_false),
    "lax.dynamic_slice_in_dim": _dynamic_slice_in_dim,
    "lax.dynamic_slice": _dynamic_slice,
    "lax.stop_gradient": lambda x: reductions.stop_gradient(x),
    "jnp.clip": _clip,
    "jnp.zeros_like": _like(creation.zeros_like, "zeros_like"),
    "jnp.ones_like": _like(creation.ones_like, "ones_like"),
    "jnp.full_like": _like(creation.full_like, "full_like"),
    "jnp.asarray": _asarray,
    "jnp.array": _array,
    "jnp.take": _take,
}
