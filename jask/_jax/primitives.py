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
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

PrimitiveRule = Callable[..., object]

RULES: dict[str, PrimitiveRule] = {}
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
        raise ValueError(f"two Jask rules for jax.lax primitive {name!r}: {where} and {existing}")
    RULES[name] = fn
