"""Every use of JAX internals in Jask lives in this module.

hijax is experimental and changes between releases, so Jask pins jax 0.10.2
and refuses to import on any other version rather than misbehave.
"""

from __future__ import annotations

import jax
from jax._src import core as _core
from jax.experimental import hijax as _hijax

PINNED_JAX = "0.10.2"
if jax.__version__ != PINNED_JAX:
    raise ImportError(f"jask needs jax=={PINNED_JAX} (its hijax interface is experimental and "
                      f"changes between releases); found jax {jax.__version__}")

HiType = _hijax.HiType
VJPHiPrimitive = _hijax.VJPHiPrimitive
register_hitype = _hijax.register_hitype
aval_method = _hijax.aval_method
aval_property = _hijax.aval_property
Zero = _hijax.Zero
ShapedArray = _core.ShapedArray
Tracer = _core.Tracer
typeof = _core.typeof


def is_tracer(x) -> bool:
    return isinstance(x, Tracer)


def is_eager() -> bool:
    """True when JAX evaluates ops now, False while it stages them into a program."""
    return isinstance(_core.trace_ctx.trace, _core.EvalTrace)
