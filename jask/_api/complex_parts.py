"""Complex numbers through their real and imaginary parts: the linear primitives of complex
DiskArrays too large for XLA's in-memory route (rule 3 of jask/_api/xla_route.py's order).

The engine has no complex arithmetic, so a complex sum, cumulative sum or product of matrices
goes to XLA, which needs its operands in memory or a leading axis they are independent along.
Where neither holds, these primitives are linear in the parts of their operands, so they split
exactly into real ones:

- `reduce_sum(x) = complex(reduce_sum(re x), reduce_sum(im x))`, the same for `cumsum`, and
  for a scatter or scatter-add of updates u into x, of both parts of x and u;
- `dot_general(a, b) = complex(ar.br - ai.bi, ar.bi + ai.br)` (two products where one operand
  is real).

`real`, `imag` and `complex` stream block by block through XLA, the real primitives through
the engine's own routes, all within the budget, and JAX differentiates the pieces. The values
are XLA's up to the rounding of a different order of additions.
"""

from __future__ import annotations

import jax
import numpy as np

from .._jax import compat

# Per primitive linear in the parts of some operands: those operands' positions (the others,
# such as a scatter's indices, are given to both parts as they are).
SPLIT = {"reduce_sum": (0,), "cumsum": (0,), "scatter": (0, 2), "scatter-add": (0, 2)}
LINEAR = frozenset({*SPLIT, "dot_general"})


def _is_complex(x) -> bool:
    return np.issubdtype(np.dtype(compat.typeof(x).dtype), np.complexfloating)


def _real_dtype(dtype):
    return np.finfo(np.dtype(dtype)).dtype


def route(primitive, args, params):
    """The primitive on complex operands by its real parts, or None when it is not one of
    these linear primitives or has no complex operand."""
    if primitive.name not in LINEAR or not any(_is_complex(a) for a in args):
        return None
    if primitive.name in SPLIT:
        split = SPLIT[primitive.name]
        if not all(_is_complex(args[i]) for i in split):
            return None
        re = primitive.bind(
            *(jax.lax.real(a) if i in split else a for i, a in enumerate(args)), **params
        )
        im = primitive.bind(
            *(jax.lax.imag(a) if i in split else a for i, a in enumerate(args)), **params
        )
        return jax.lax.complex(re, im)
    a, b = args
    out = params.get("preferred_element_type")
    real_params = dict(params)
    if out is not None and np.issubdtype(np.dtype(out), np.complexfloating):
        real_params["preferred_element_type"] = _real_dtype(out)

    def parts(x):
        if not _is_complex(x):
            return x, None
        return jax.lax.real(x), jax.lax.imag(x)

    def dot(x, y):
        return jax.lax.dot_general_p.bind(x, y, **real_params)

    (ar, ai), (br, bi) = parts(a), parts(b)
    re = dot(ar, br)
    if ai is not None and bi is not None:
        re = re - dot(ai, bi)
    im = None
    if bi is not None:
        im = dot(ar, bi)
    if ai is not None:
        im = dot(ai, br) if im is None else im + dot(ai, br)
    result = jax.lax.complex(re, im)
    if out is not None and np.dtype(out) != result.dtype:
        result = jax.lax.convert_element_type(result, out)
    return result
