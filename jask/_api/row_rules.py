"""Large values by their rows, for `jask.on_disk`: the *row rules* of the primitives that make
them, each a function of rows [start, start + count) of its inputs.

A `Lazy` value is not computed yet: `rule(start, count, *input blocks)` gives its rows, from
its inputs (other lazy values, and `Leaf` operands: rows of an in-memory array or DiskArray
of the same length, or a whole in-memory array such as a key or a scalar). The rules:
`random_bits` (jax.random's counters at each block's flat positions: `random_rows.py`),
`iota`, `broadcast_in_dim`, elementwise primitives, and reshapes that keep the leading axis.
A rule returns None where it does not apply (the caller writes the inputs to disk and binds
the primitive to them instead).
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax import lax

from .._jax import compat
from .._jax.diskarray import DiskArray
from . import blocked, random_rows

# Primitives whose value at a position is a function of their operands' values there (lax
# broadcasts 0-d operands and size-1 axes): a block of rows is the primitive of the blocks.
ELEMENTWISE = blocked.ELEMENTWISE | frozenset(
    """bitcast_convert_type clamp copy copy_p erf erfc erf_inv lgamma digamma shift_left
    shift_right_logical shift_right_arithmetic""".split()
)


class Leaf:
    """An operand of a lazy value's blocks: `blocked` (rows [start, start + count) of an
    in-memory array or DiskArray of the value's length) or whole (an in-memory array)."""

    def __init__(self, value, blocked: bool):
        self.value, self.blocked = value, blocked


class Lazy:
    """A large value by its rows: `rule(start, count, *blocks of inputs)` is rows
    [start, start + count). `key` identifies the rule for caching (None: not cacheable);
    `unit` is the program it belongs to in fn run in memory (an eager primitive, or a jitted
    call): values of one unit may be computed by one XLA program, as JAX computes them; those
    of different units are not (XLA would contract a multiply in one and an add in the next
    into one rounding, a fused multiply-add, where JAX rounds twice)."""

    def __init__(self, aval, rule, key, inputs, unit: int):
        self.aval, self.rule, self.key, self.inputs = aval, rule, key, tuple(inputs)
        self.unit = unit
        self.disk: DiskArray | None = None  # once written

    @property
    def rows(self) -> int:
        return self.aval.shape[0]


def row_rule(eqn, values, unit: int) -> Lazy | None:
    """The equation's result as a lazy value, or None where no row rule makes it."""
    if len(eqn.outvars) != 1:
        return None
    out = eqn.outvars[0].aval
    if not isinstance(out, compat.ShapedArray) or not out.shape:
        return None
    if jax.dtypes.issubdtype(out.dtype, jax.dtypes.extended):
        return None  # key arrays are made in memory (random_split), or refused
    rule = _RULES.get(eqn.primitive.name)
    if rule is None and eqn.primitive.name in ELEMENTWISE:
        rule = _elementwise
    if rule is None:
        return None
    made = rule(eqn, values, out)
    if made is None:
        return None
    aval, fn, key, inputs = made
    return Lazy(aval, fn, key, inputs, unit)


def _input(x, out, axis0_maps: bool):
    """x as an input of a lazy value of type `out`: itself (lazy, its rows), a blocked leaf (an
    array whose leading axis is the rows), a whole leaf (an in-memory array the same for every
    block), or None (none of these)."""
    rows = out.shape[0]
    if isinstance(x, Lazy):
        return x if axis0_maps and x.rows == rows else None
    shape = np.shape(x)
    if axis0_maps and shape and shape[0] == rows and rows != 1:
        return Leaf(x, True)
    if isinstance(x, DiskArray):  # a whole DiskArray would be read into every block
        return None
    return Leaf(x, False)


def _elementwise(eqn, values, out):
    prim, params = eqn.primitive, dict(eqn.params)
    if prim.name == "bitcast_convert_type":
        if np.dtype(eqn.invars[0].aval.dtype).itemsize != np.dtype(out.dtype).itemsize:
            return None
    inputs = []
    for x in values:
        shape = tuple(x.aval.shape) if isinstance(x, Lazy) else np.shape(x)
        if shape and len(shape) != len(out.shape):
            return None  # lax broadcasts only 0-d operands and size-1 axes
        if isinstance(x, (Lazy, DiskArray)) and shape != tuple(out.shape):
            return None
        inputs.append(_input(x, out, axis0_maps=bool(shape) and shape[0] != 1))
    if any(i is None for i in inputs):
        return None

    def rule(start, count, *blocks):
        return prim.bind(*blocks, **params)

    return out, rule, _key("elementwise", prim, params, out), inputs


def _random_bits(eqn, values, out):
    (keys,) = values
    if isinstance(keys, (Lazy, DiskArray)) or np.shape(keys) != ():
        return None  # a batch of keys (vmap) is not blocked
    bit_width, shape = eqn.params["bit_width"], tuple(eqn.params["shape"])
    partitionable = bool(jax.config.jax_threefry_partitionable)
    random_rows.check_supported(str(jax.random.key_impl(keys)), bit_width, shape, partitionable)

    def rule(start, count, key_data):
        return random_rows.bits_rows(key_data, start, count, shape, bit_width, partitionable)

    params = {"shape": shape, "bits": bit_width, "partitionable": partitionable}
    return (
        out,
        rule,
        _key("random_bits", None, params, out),
        [Leaf(jax.random.key_data(keys), False)],
    )


def _iota(eqn, values, out):
    dtype, dimension = eqn.params["dtype"], eqn.params["dimension"]
    rest = tuple(out.shape[1:])

    def rule(start, count):
        if dimension != 0:
            return lax.broadcasted_iota(dtype, (count, *rest), dimension)
        positions = lax.iota(np.int32, count) + start  # the row numbers, exact, then converted
        positions = lax.broadcast_in_dim(positions, (count, *rest), (0,))
        return lax.convert_element_type(positions, dtype)

    return out, rule, _key("iota", None, {"dimension": dimension}, out), []


def _broadcast_in_dim(eqn, values, out):
    if len(values) != 1:
        return None  # dynamic shapes
    dims = tuple(eqn.params["broadcast_dimensions"])
    operand = _input(values[0], out, axis0_maps=bool(dims) and dims[0] == 0)
    if operand is None:
        return None
    rest = tuple(out.shape[1:])

    def rule(start, count, block):
        return lax.broadcast_in_dim(block, (count, *rest), dims)

    return out, rule, _key("broadcast_in_dim", None, {"dims": dims}, out), [operand]


def _reshape(eqn, values, out):
    x = values[0]
    if not isinstance(x, Lazy) or eqn.params.get("dimensions") is not None or len(values) > 1:
        return None
    if x.rows != out.shape[0]:
        return None  # rows of the result would not be rows of the operand
    rest = tuple(out.shape[1:])

    def rule(start, count, block):
        return lax.reshape(block, (count, *rest))

    return out, rule, _key("reshape", None, {}, out), [x]


_RULES = {
    "random_bits": _random_bits,
    "iota": _iota,
    "broadcast_in_dim": _broadcast_in_dim,
    "reshape": _reshape,
}


def _key(kind: str, prim, params: dict[str, Any], out):
    """A hashable identity of a rule (None where its params are not hashable)."""
    key = (kind, prim, tuple(sorted(params.items())), tuple(out.shape), str(out.dtype))
    try:
        hash(key)
    except TypeError:
        return None
    return key
