"""jax.numpy (and jax.lax) functions on DiskArrays: what `jnp.sqrt(g)` does when g is a DiskArray.

Libraries written for jax arrays (optax above all) call these on their
leaves. Each entry takes the jax.numpy signature and maps it to Jask ops;
an argument Jask does not support yet raises an error naming the function.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from . import _api
from ._jax import compat
from ._jax.diskarray import DiskArray, DiskArrayTy


def _is_disk(x) -> bool:
    return type(x) is DiskArray or (compat.is_tracer(x) and isinstance(x.aval, DiskArrayTy))


def _unsupported(fn: str, what: str):
    raise NotImplementedError(f"jnp.{fn} on a DiskArray does not support {what} yet")


def _no_extra(fn: str, **kwargs) -> None:
    for name, value in kwargs.items():
        if value is not None and value is not False:
            _unsupported(fn, f"{name}={value!r}")


def _cast(x, dtype):
    return x if dtype is None else _api.astype(x, dtype)


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


def _reduction(fn, name):
    def apply(a, axis=None, dtype=None, out=None, keepdims=False, **kwargs):
        _no_extra(name, out=out, **{k: v for k, v in kwargs.items() if k != "where" or v is not None})
        result = fn(a, axis, keepdims)
        return result if dtype is None else result.astype(dtype)
    return apply


def _var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kwargs):
    if ddof:
        _unsupported("var", f"ddof={ddof}")
    return _reduction(_api.var, "var")(a, axis, dtype, out, keepdims, **kwargs)


def _logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False, where=None):
    _no_extra("logsumexp", b=b, return_sign=return_sign, where=where)
    return _api.logsumexp(a, axis, keepdims)


def _softmax_like(fn, name):
    def apply(x, axis=-1, where=None, **kwargs):
        _no_extra(name, where=where, **kwargs)
        return fn(x, axis)
    return apply


def _norm(x, ord=None, axis=None, keepdims=False):
    if ord not in (None, 2, "fro") or axis is not None:
        _unsupported("linalg.norm", f"ord={ord!r}, axis={axis!r} (only the 2-norm of all elements)")
    result = jnp.sqrt(_api.vdot(x, x))
    return jnp.reshape(result, (1,) * x.ndim) if keepdims else result


def _like(fn, name):
    def apply(a, *args, dtype=None, shape=None, **kwargs):
        _no_extra(name, **kwargs)
        if shape is not None and tuple(shape) != a.shape:
            _unsupported(name, f"shape={shape!r}")
        return fn(a, *args, dtype=dtype)
    return apply


def _asarray(a, dtype=None, order=None, *, copy=None, **kwargs):
    # DiskArrays are immutable values (update_ aside), so no copy is needed
    if not _is_disk(a):
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
    return _api.where(condition, x, y)


def _clip(arr=None, /, min=None, max=None, **kwargs):  # noqa: A002
    _no_extra("clip", **{k: v for k, v in kwargs.items() if k not in ("a", "a_min", "a_max")})
    arr = kwargs.get("a", arr)
    return _api.clip(arr, kwargs.get("a_min", min), kwargs.get("a_max", max))


def _transpose(a, axes=None):
    return _api.transpose(a, axes)


def _two_operand(fn, name):
    def apply(a, b, *, precision=None, preferred_element_type=None, **kwargs):
        _no_extra(name, preferred_element_type=preferred_element_type, **kwargs)
        return fn(a, b)
    return apply


def _dynamic_slice_in_dim(operand, start_index, slice_size, axis=0, **kwargs):
    if axis != 0:
        _unsupported("lax.dynamic_slice_in_dim", f"axis={axis} (only the leading axis)")
    return _api.rows(operand, start_index, slice_size)


def _dynamic_slice(operand, start_indices, slice_sizes, **kwargs):
    start_indices, slice_sizes = list(start_indices), list(slice_sizes)
    if list(slice_sizes[1:]) != list(operand.shape[1:]) or any(
            not (isinstance(s, int) and s == 0) for s in start_indices[1:]):
        _unsupported("lax.dynamic_slice", "slices of axes other than the leading one")
    return _api.rows(operand, start_indices[0], slice_sizes[0])


def _take(a, indices, axis=None, out=None, mode=None, unique_indices=False, indices_are_sorted=False,
          fill_value=None):
    # mode=None follows jask.take (IndexError on concrete indices out of range, traced ones
    # clamped), not jnp's NaN fill; 'fill' is refused rather than silently clamped.
    _no_extra("take", out=out, fill_value=fill_value)
    if axis is None:  # jnp.take's default: the flattened array
        a, axis = _api.reshape(a, (a.size,)), 0
    if mode in ("clip", "wrap"):  # out-of-range indices are defined: clamp (no wrap) or modulo
        n = a.shape[0] if a.ndim else 1
        if compat.is_tracer(indices) or isinstance(indices, jax.Array):
            indices = jnp.clip(indices, 0, n - 1) if mode == "clip" else jnp.mod(indices, n)
        else:
            indices = np.clip(indices, 0, n - 1) if mode == "clip" else np.mod(indices, n)
    elif mode not in (None, "promise_in_bounds"):
        _unsupported("take", f"mode={mode!r} (None, 'clip' and 'wrap' are supported)")
    return _api.take(a, indices, axis)


def _holds_disk(x) -> bool:
    """A DiskArray, or a list or tuple with one (the operands of jnp.concatenate and kin)."""
    return _is_disk(x) or (isinstance(x, (list, tuple)) and any(_is_disk(v) for v in x))


def _concatenate(arrays, axis=0, dtype=None):
    _no_extra("concatenate", dtype=dtype)
    if axis is None:  # jnp's: the flattened arrays
        arrays = [_api.reshape(a, (a.size,)) if _is_disk(a) else jnp.ravel(a) for a in arrays]
        axis = 0
    return _api.concatenate(list(arrays), axis)


def _stack(arrays, axis=0, out=None, dtype=None):
    _no_extra("stack", out=out, dtype=dtype)
    return _api.stack(list(arrays), axis)


def _at_least(a, ndim):
    """a with leading axes of size 1 added up to `ndim` (jnp.atleast_1d / atleast_2d)."""
    if np.ndim(a) >= ndim:
        return a
    shape = (1,) * (ndim - np.ndim(a)) + tuple(np.shape(a))
    return _api.reshape(a, shape) if _is_disk(a) else jnp.reshape(jnp.asarray(a), shape)


def _vstack(tup, dtype=None):
    _no_extra("vstack", dtype=dtype)
    return _api.concatenate([_at_least(a, 2) for a in tup], 0)


def _hstack(tup, dtype=None):
    _no_extra("hstack", dtype=dtype)
    arrays = [_at_least(a, 1) for a in tup]
    return _api.concatenate(arrays, 0 if arrays and np.ndim(arrays[0]) == 1 else 1)


# Functions whose first argument is a sequence of arrays: dispatched when it holds a DiskArray.
SEQUENCE_TABLE = {
    "jnp.concatenate": _concatenate,
    "jnp.stack": _stack,
    "jnp.vstack": _vstack,
    "jnp.hstack": _hstack,
}

TABLE = {
    **{f"jnp.{n}": _unary(f, n) for n, f in {
        "sqrt": _api.sqrt, "abs": _api.abs, "absolute": _api.abs, "sign": _api.sign,
        "exp": _api.exp, "log": _api.log, "tanh": _api.tanh, "square": _api.square,
        "negative": _api.negative, "log1p": _api.log1p, "expm1": _api.expm1,
        "conj": lambda x: x, "conjugate": lambda x: x,
        "real": lambda x: x}.items()},
    **{f"jnp.{n}": _binary(f, n) for n, f in {
        "add": _api.add, "subtract": _api.sub, "multiply": _api.mul, "divide": _api.divide,
        "true_divide": _api.divide, "power": _api.power, "pow": _api.power,
        "maximum": _api.maximum, "minimum": _api.minimum, "less": _api.less,
        "less_equal": _api.less_equal, "greater": _api.greater, "greater_equal": _api.greater_equal,
        "equal": _api.equal, "not_equal": _api.not_equal}.items()},
    **{f"lax.{n}": _unary(f, n) for n, f in {
        "rsqrt": _api.rsqrt, "sqrt": _api.sqrt, "abs": _api.abs, "sign": _api.sign,
        "exp": _api.exp, "log": _api.log, "tanh": _api.tanh, "neg": _api.negative,
        "square": _api.square}.items()},
    **{f"lax.{n}": _binary(f, n) for n, f in {
        "add": _api.add, "sub": _api.sub, "mul": _api.mul, "div": _api.divide,
        "max": _api.maximum, "min": _api.minimum, "pow": _api.power}.items()},
    **{f"nn.{n}": _unary(f, n) for n, f in {
        "relu": _api.relu, "sigmoid": _api.sigmoid, "softplus": _api.softplus}.items()},
    "nn.gelu": lambda x, approximate=True: _api.gelu(x, approximate),
    "jnp.sum": _reduction(_api.sum, "sum"),
    "jnp.max": _reduction(_api.max, "max"),
    "jnp.min": _reduction(_api.min, "min"),
    "jnp.prod": _reduction(_api.prod, "prod"),
    "jnp.sin": _unary(_api.sin, "sin"), "jnp.cos": _unary(_api.cos, "cos"),
    "lax.sin": _unary(_api.sin, "sin"), "lax.cos": _unary(_api.cos, "cos"),
    "jnp.mean": _reduction(_api.mean, "mean"),
    "jnp.var": _var,
    "nn.logsumexp": _logsumexp,
    "nn.softmax": _softmax_like(_api.softmax, "softmax"),
    "nn.log_softmax": _softmax_like(_api.log_softmax, "log_softmax"),
    "jnp.broadcast_to": lambda array, shape, **kwargs: _api.broadcast_to(array, shape),
    "jnp.linalg.norm": _norm,
    "jnp.vdot": _two_operand(_api.vdot, "vdot"),
    "jnp.dot": _two_operand(_api.dot, "dot"),
    "jnp.matmul": _two_operand(_api.matmul, "matmul"),
    "jnp.transpose": _transpose,
    "jnp.outer": lambda a, b, **kwargs: _api.outer(a, b),
    "jnp.einsum": lambda subscripts, *operands, **kwargs: _api.einsum(subscripts, *operands),
    "jnp.where": _where,
    "lax.select": lambda pred, on_true, on_false: _api.where(pred, on_true, on_false),
    "lax.dynamic_slice_in_dim": _dynamic_slice_in_dim,
    "lax.dynamic_slice": _dynamic_slice,
    "lax.stop_gradient": lambda x: _api.stop_gradient(x),
    "jnp.clip": _clip,
    "jnp.zeros_like": _like(_api.zeros_like, "zeros_like"),
    "jnp.ones_like": _like(_api.ones_like, "ones_like"),
    "jnp.full_like": _like(_api.full_like, "full_like"),
    "jnp.asarray": _asarray,
    "jnp.array": _array,
    "jnp.take": _take,
}

compat.install_numpy_dispatch(TABLE, _is_disk)
compat.install_numpy_dispatch(SEQUENCE_TABLE, _holds_disk)
compat.accept_in_optax_abs_sq(_is_disk, _api.square)
compat.name_unsupported_primitives(_is_disk)
compat.broadcast_unbatched_outputs(_is_disk, lambda x, size, axis: _api.stack([x] * size, axis))
