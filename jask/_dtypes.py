"""The dtypes Jask stores, and their codes in the engine."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

_CODES = {
    np.dtype(np.float32): 0,
    np.dtype(np.float64): 1,
    np.dtype(np.float16): 2,
    np.dtype(jnp.bfloat16): 3,
    np.dtype(np.int32): 4,
    np.dtype(np.bool_): 5,
}
_BY_CODE = {code: dt for dt, code in _CODES.items()}
SUPPORTED = tuple(str(dt) for dt in _CODES)


class UnstorableDtypeError(TypeError):
    """A dtype Jask cannot store in a file. A jax.lax primitive whose rule meets one computes
    in XLA instead (jask/_api/xla_route.py)."""


def storage_dtype(dtype) -> np.dtype:
    """The numpy dtype for `dtype`, if Jask can store it; UnstorableDtypeError otherwise."""
    try:
        dt = np.dtype(dtype)
    except (TypeError, ValueError, SyntaxError):  # what np.dtype raises for garbage
        dt = None
    if dt not in _CODES:
        raise UnstorableDtypeError(f"dtype {dtype!r} is not supported; Jask stores {', '.join(SUPPORTED)}")
    return dt


def dtype_code(dtype) -> int:
    return _CODES[storage_dtype(dtype)]


def dtype_from_code(code: int) -> np.dtype:
    return _BY_CODE[code]


def jax_dtype(dtype) -> np.dtype:
    """The dtype JAX gives values of `dtype` (jnp.asarray's): float64 is float32 and int64 is
    int32 while jax_enable_x64 is off. A dtype JAX does not know is returned as it is."""
    try:
        return np.dtype(jax.dtypes.canonicalize_dtype(dtype))
    except (TypeError, ValueError):
        return np.dtype(dtype)
