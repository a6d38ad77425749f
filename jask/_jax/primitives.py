"""Which Jask code implements each jax.lax primitive on DiskArrays.

Jask works at the level of JAX's primitives: every jax.numpy, jax.nn or library function is
built from them, so a DiskArray reaches Jask wherever its values meet a primitive. When a
primitive is bound with a DiskArray (or a tracer of one) among its operands, the bind calls
the rule registered here for the primitive's name instead (the `primitive_dispatch` patch in
compat.py), with the primitive's operands and params. A rule returns what the primitive would
(a list for primitives with several results).

Rules come from two places: an op declares the primitives it implements (`Op.primitives`,
applied by `Op.from_primitive`), and a rule that combines several ops is a function decorated
with `@rule("name")` (jask/_api/lax.py and its neighbours).

A rule's results get the weak_type flags JAX's own abstract evaluation of the primitive gives
for operands of the same types (`jax_weak_types`): a rule states dtypes and shapes, JAX decides
which results are weakly typed, as it does for jax.Arrays.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
from collections.abc import Callable, Iterable

import jax.extend.core.primitives as _jax_primitives
import numpy as np
from jax.extend.core import Primitive

from . import compat
from .diskarray import DiskArrayTy, with_weak_type

PrimitiveRule = Callable[..., object]


@dataclasses.dataclass(frozen=True, eq=False)
class TypedRule:
    """A registered rule whose results get JAX's weak_type flags (`jax_weak_types`). It equals
    the rule it wraps: it is that rule, as the dispatch calls it."""

    name: str
    rule: PrimitiveRule

    def __call__(self, *args, **params):
        out = self.rule(*args, **params)
        weak = jax_weak_types(self.name, args, params)
        if weak is None:
            return out
        if isinstance(out, (list, tuple)):
            return type(out)(with_weak_type(o, w) for o, w in zip(out, weak))
        return with_weak_type(out, weak[0])

    def __eq__(self, other):
        return self.rule == (other.rule if isinstance(other, TypedRule) else other)

    def __hash__(self):
        return hash(self.rule)


RULES: dict[str, TypedRule] = {}
"""Primitive name -> the rule that applies it to DiskArrays."""


def rule(*names: str):
    """Registers the decorated function as the rule of the named primitives."""

    def register(fn: PrimitiveRule) -> PrimitiveRule:
        for name in names:
            _register(name, fn, f"{fn.__module__}.{fn.__qualname__}")
        return fn

    return register


def register_ops(ops: Iterable[type]) -> None:
    """Registers `op.from_primitive` for every primitive each op declares."""
    for op in ops:
        for name in op.primitives:
            _register(name, op.from_primitive, f"jask.ops {op.__name__}")


def _register(name: str, fn: PrimitiveRule, where: str) -> None:
    existing = RULES.get(name)
    if existing is not None and existing != fn:
        raise ValueError(
            f"two Jask rules for jax.lax primitive {name!r}: {where} and {existing.rule}"
        )
    RULES[name] = TypedRule(name, fn)


@functools.cache
def _jax_primitive(name: str):
    """JAX's primitive of that name: those jax.extend names, then jax.lax's own module (split,
    stack, tile, unstack, ragged_dot_general, which jax.extend does not name); None for the
    debug ones, whose results keep the types Jask's ops state."""
    for value in vars(_jax_primitives).values():
        if isinstance(value, Primitive) and value.name == name:
            return value
    return compat.lax_primitive(name)


def jax_weak_types(name: str, args, params) -> list[bool | None] | None:
    """The weak_type flag of each result of primitive `name` bound to `args`, by JAX's abstract
    evaluation on in-memory types (a DiskArray's as a ShapedArray of its shape, dtype and
    weak_type); None where that cannot say (a primitive JAX does not name publicly, one whose
    rule takes jaxprs traced on DiskArrays), and None for a result that is not an array."""
    primitive = _jax_primitive(name)
    if primitive is None:
        return None
    avals = tuple(_in_memory_type(compat.typeof(a)) for a in args)
    if not all(_plain(v) for v in params.values()):
        # a jaxpr (whose constants a cache would keep alive, DiskArrays among them), a function
        return _weak_types(primitive, avals, params)
    weak = _weak_types_of(primitive, (avals, tuple(sorted(params.items()))))
    return None if weak is None else list(weak)


@functools.lru_cache(maxsize=4096)  # JAX's abstract rules cost more than the bind around them
def _weak_types_of(primitive, key) -> tuple:
    avals, params = key
    weak = _weak_types(primitive, avals, dict(params))
    return None if weak is None else tuple(weak)


def _plain(value) -> bool:
    """A param value that holds no arrays or functions: numbers, names, dtypes, tuples of them."""
    if isinstance(value, (tuple, list)):
        return all(_plain(v) for v in value)
    return value is None or isinstance(value, (bool, int, float, str, np.dtype, enum.Enum))


def _weak_types(primitive, avals, params) -> list[bool | None] | None:
    try:
        out, _ = primitive.abstract_eval(*avals, **params)
    except Exception:
        # Jask's elementwise rules broadcast size-1 axes, JAX's primitives do not (jnp.where
        # binds select_n on operands of one rank): the weak_type rules do not read shapes
        try:
            out, _ = primitive.abstract_eval(*_spread(avals), **params)
        except Exception:  # a rule that needs more than types (a loop's body): Jask's stand
            return None
    outs = out if primitive.multiple_results else [out]
    return [o.weak_type if isinstance(o, compat.ShapedArray) else None for o in outs]


def _spread(avals) -> list:
    """The array types among `avals` at their common (NumPy-broadcast) shape."""
    arrays = [a for a in avals if isinstance(a, compat.ShapedArray)]
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    return [a.update(shape=shape) if isinstance(a, compat.ShapedArray) else a for a in avals]


def _in_memory_type(aval):
    if isinstance(aval, DiskArrayTy):
        return compat.ShapedArray(aval.shape, aval.dtype, weak_type=aval.weak_type)
    return aval
