"""The dtypes Jask stores, and their codes in the engine.

The table is the engine's (src/engine/base/dtype.cpp, read through `_engine.dtypes()`):
codes, itemsizes and kinds are defined there once."""

from __future__ import annotations

import jax
import ml_dtypes
import numpy as np

from . import _engine


def _numpy_dtype(name: str) -> np.dtype:
    return np.dtype(getattr(ml_dtypes, name)) if hasattr(ml_dtypes, name) else np.dtype(name)


_TABLE = {_numpy_dtype(name): entry for name, entry in _engine.dtypes().items()}
_CODES = {dt: code for dt, (code, _, _) in _TABLE.items()}
_BY_CODE = {code: dt for dt, code in _CODES.items()}
SUPPORTED = tuple(str(dt) for dt in _CODES)
# Names by kind: "float", "signed", "unsigned", "bool", "complex".
KINDS = {
    kind: tuple(str(dt) for dt, (_, _, k) in _TABLE.items() if k == kind)
    for kind in ("float", "signed", "unsigned", "bool", "complex")
}
FLOATS = KINDS["float"]
INTEGERS = KINDS["signed"] + KINDS["unsigned"]
COMPLEX = KINDS["complex"]
assert all(dt.itemsize == size for dt, (_, size, _) in _TABLE.items()), "engine/numpy itemsizes"


class UnstorableDtypeError(TypeError):
    """A dtype Jask does not store (int4, float4, float8_e8m0fnu, big-endian, structured)."""


def storage_dtype(dtype) -> np.dtype:
    """The numpy dtype for `dtype`, if Jask can store it; UnstorableDtypeError (a TypeError)
    otherwise."""
    try:
        dt = np.dtype(dtype)
    except (TypeError, ValueError, SyntaxError):  # what np.dtype raises for garbage
        dt = None
    if dt is not None and dt.byteorder == ">":  # the engine stores little-endian values
        dt = None
    if dt not in _CODES:
        raise UnstorableDtypeError(
            f"dtype {dtype!r} is not supported; Jask stores {', '.join(SUPPORTED)}"
        )
    return dt


def dtype_code(dtype) -> int:
    return _CODES[storage_dtype(dtype)]


def dtype_from_code(code: int) -> np.dtype:
    return _BY_CODE[code]


def jax_dtype(dtype) -> np.dtype:
    """The dtype JAX gives values of `dtype` (jnp.asarray's): while jax_enable_x64 is off,
    float64 is float32, int64 int32, uint64 uint32 and complex128 complex64. A dtype JAX does
    not know is returned as it is."""
    try:
        return np.dtype(jax.dtypes.canonicalize_dtype(dtype))
    except (TypeError, ValueError):
        return np.dtype(dtype)
