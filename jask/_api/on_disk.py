"""`jask.on_disk(fn)`: fn's arrays larger than memory made straight to disk (random
initializations, embedding tables, whole models), with exactly the values fn gives in memory.

fn is traced to a jaxpr and evaluated equation by equation. A value no larger than the
allowance (half the memory budget, `blocked.allowance()`) is computed in memory as usual. A
larger one that a row rule can make (`row_rules.py`: random bits, iota, broadcasts,
elementwise primitives of them) is kept lazy, a function of its rows, and written to disk
block by block (`row_plans.py`) when fn returns it or when an equation without a row rule
takes it; that equation then binds to the DiskArray, as any JAX code on DiskArrays does. A
large value that neither a row rule nor a DiskArray operand makes is refused: it would be
whole in memory.
"""

from __future__ import annotations

import functools
import itertools
import sys
from collections.abc import Callable

import jax
import numpy as np
from jax.extend.core import Literal

from .._jax import compat
from .._jax.diskarray import DiskArray
from . import blocked, row_plans
from .row_rules import Lazy, row_rule

# Calls whose jaxprs are evaluated inline where they make or take large values (their
# equations get the row rules too); a custom derivative rule is not needed to make values.
_INLINE = {"jit": "jaxpr", "pjit": "jaxpr", "closed_call": "call_jaxpr", "core_call": "call_jaxpr"}
_INLINE |= {"custom_jvp_call": "call_jaxpr", "custom_vjp_call": "call_jaxpr", "checkpoint": "jaxpr"}


def on_disk(fn: Callable) -> Callable:
    """fn with its large arrays made straight to disk: a function that takes fn's arguments and
    returns fn's result, where every array larger than half the memory budget is a DiskArray
    computed block by block, with exactly the values (and dtypes) fn gives in memory.

    fn is traced (as `jax.make_jaxpr` does) with its array arguments abstract (PRNG keys, typed
    or legacy uint32, arrays, DiskArrays, the arrays inside flax `nnx.Rngs` and modules); its
    other arguments (shapes, Python numbers, functions) are static. Random bits
    (`jax.random.*`'s `random_bits`, threefry2x32 keys, either `jax_threefry_partitionable`
    setting), `iota` (`jnp.arange`, `jnp.eye`), broadcasts (`jnp.zeros`, `jnp.full`) and
    elementwise functions of them are computed a block of rows at a time and written once; any
    other operation on such an array runs on the DiskArray, as JAX code on DiskArrays does. The
    result is fn's pytree (a dict of parameters, a flax nnx or equinox module) with its large
    leaves DiskArrays and the others in memory. A flax nnx object among the arguments (an
    `nnx.Rngs`) is updated as fn left it, as `nnx.jit` does.

    Eagerly, each primitive and each jitted call of fn's own code is compiled apart, as JAX
    runs them in memory (one XLA program across them could fuse a multiply and the next add
    into one rounding); inside `jax.jit` the blocks are a loop of the jitted program. Refused
    with a NotImplementedError: an operation that makes a large array from in-memory values
    only and has no row rule (`jax.nn.initializers.orthogonal`'s QR of the whole matrix, a
    large array of keys from `jax.random.split`), random bits of other generators than
    threefry2x32, and a row whose computation does not fit the allowance. A sort of a large
    array (`jax.random.permutation`) runs as Jask's sort of the DiskArray. fn's arrays are not
    differentiable through `on_disk`.

    Args:
      fn: a function of JAX arrays and static values that returns a pytree.

    Returns:
      A function with fn's signature returning fn's pytree, its large arrays on disk.

    >>> import jax, jask
    >>> jask.set_memory_budget("64KB")
    >>> embed = jask.on_disk(lambda k: jax.random.normal(k, (1000, 64)) * 0.02)
    >>> table = embed(jax.random.key(0))
    >>> type(table).__name__, table.shape
    ('DiskArray', (1000, 64))
    >>> bool((table == jax.random.normal(jax.random.key(0), (1000, 64)) * 0.02).all())
    True
    """

    @functools.wraps(fn)
    def made_on_disk(*args, **kwargs):
        return _call(fn, args, kwargs)

    return made_on_disk


def _is_array(x) -> bool:
    return isinstance(x, (jax.Array, np.ndarray))


def _abstract(x):
    """What an array argument is traced as: a DiskArray as an in-memory array of its type (its
    equations are evaluated on the DiskArray itself)."""
    if isinstance(x, DiskArray):
        return jax.ShapeDtypeStruct(x.shape, x.dtype)
    return x


def _call(fn, args, kwargs):
    leaves, tree = jax.tree_util.tree_flatten((args, kwargs))
    dynamic = [i for i, x in enumerate(leaves) if _is_array(x)]
    nnx_args = _nnx_objects(args, kwargs)
    found = {}

    def traced(*values):
        filled = list(leaves)
        for i, v in zip(dynamic, values):
            filled[i] = v
        a, k = jax.tree_util.tree_unflatten(tree, filled)
        out = fn(*a, **k)
        out_leaves, out_tree = jax.tree_util.tree_flatten(out)
        found["out"] = (out_leaves, out_tree)
        after = [_object_at(a, k, where) for where, _ in nnx_args]
        after_flat = [jax.tree_util.tree_flatten(obj) for obj in after]
        found["after"] = after_flat
        results = [x for x in out_leaves if _is_array(x)]
        for obj_leaves, _ in after_flat:
            results += [x for x in obj_leaves if _is_array(x)]
        return results

    closed = jax.make_jaxpr(traced)(*(_abstract(leaves[i]) for i in dynamic))
    evaluation = _Evaluation(eager=compat.is_eager())
    values = evaluation.run(closed.jaxpr, closed.consts, [leaves[i] for i in dynamic])
    values = iter(_written(values))

    out_leaves, out_tree = found["out"]
    result = jax.tree_util.tree_unflatten(
        out_tree, [next(values) if _is_array(x) else x for x in out_leaves]
    )
    for (_, original), (obj_leaves, obj_tree) in zip(nnx_args, found["after"]):
        filled = [next(values) if _is_array(x) else x for x in obj_leaves]
        _nnx().update(original, _nnx().state(jax.tree_util.tree_unflatten(obj_tree, filled)))
    return result


# -- flax nnx objects among the arguments (mutated by fn, as nnx.Rngs are) -------------------


def _nnx():
    return sys.modules.get("flax.nnx")


def _nnx_objects(args, kwargs) -> list:
    """(position, object) of each flax nnx object passed as an argument."""
    nnx = _nnx()
    if nnx is None:
        return []
    found = [((0, i), a) for i, a in enumerate(args) if isinstance(a, nnx.Pytree)]
    return found + [((1, k), v) for k, v in kwargs.items() if isinstance(v, nnx.Pytree)]


def _object_at(args, kwargs, where):
    return (args, kwargs)[where[0]][where[1]]


# -- the evaluation ----------------------------------------------------------------------------


class _Evaluation:
    """fn's jaxpr evaluated with large values lazy or on disk. Eagerly each equation of fn's
    own jaxpr is a unit (JAX runs each primitive, and each jitted call, as its own program);
    under a transformation or jit the whole of fn is one."""

    def __init__(self, eager: bool):
        self._units = itertools.count() if eager else itertools.repeat(0)

    def run(self, jaxpr, consts, args, unit: int | None = None) -> list:
        env: dict = {}

        def read(v):
            if isinstance(v, Literal):
                return np.asarray(v.val, v.aval.dtype)
            return env[v]

        env.update(zip(jaxpr.constvars, consts))
        env.update(zip(jaxpr.invars, args))
        for eqn in jaxpr.eqns:
            eqn_unit = next(self._units) if unit is None else unit
            outs = self.equation(eqn, [read(v) for v in eqn.invars], eqn_unit)
            env.update(zip(eqn.outvars, outs))
        return [read(v) for v in jaxpr.outvars]

    def equation(self, eqn, values, unit: int) -> list:
        name = eqn.primitive.name
        out_avals = [v.aval for v in eqn.outvars]
        large = any(_large(a) for a in out_avals)
        values = [_settled(x) for x in values]
        lazy_in = any(isinstance(x, Lazy) for x in values)
        on_disk_in = any(isinstance(x, DiskArray) for x in values)
        if name in _INLINE and _INLINE[name] in eqn.params and (large or lazy_in or on_disk_in):
            inner = eqn.params[_INLINE[name]]  # a call of small values runs as one program
            consts = getattr(inner, "consts", [])
            return self.run(getattr(inner, "jaxpr", inner), consts, values, unit)
        if lazy_in or (large and not on_disk_in):
            made = row_rule(eqn, values, unit)
            if made is not None:
                return [made]
        values = _written(values)
        if large and not any(isinstance(x, DiskArray) for x in values):
            raise NotImplementedError(
                f"jask.on_disk: `{name}` makes {', '.join(map(_describe, out_avals))} from "
                f"in-memory values, more than the allowance of {blocked.allowance()} bytes (half "
                f"the memory budget), and has no rule to compute it a block of rows at a time "
                f"(jask.on_disk has them for random_bits, iota, broadcast_in_dim, elementwise "
                f"primitives and reshapes that keep the leading axis)"
            )
        params = eqn.primitive.get_bind_params(eqn.params)
        with eqn.ctx.manager:
            out = eqn.primitive.bind(*values, **params)
        return list(out) if eqn.primitive.multiple_results else [out]


def _written(values) -> list:
    """Values with the lazy ones written to disk."""
    for x in values:
        if isinstance(x, Lazy) and x.disk is None:
            row_plans.write(x)
    return [_settled(x) for x in values]


def _nbytes(aval) -> int:
    """Bytes of a value of type `aval` (a key array's too: its dtype has an itemsize)."""
    return int(np.prod(aval.shape, dtype=np.int64)) * aval.dtype.itemsize


def _large(aval) -> bool:
    return isinstance(aval, compat.ShapedArray) and _nbytes(aval) > blocked.allowance()


def _settled(x):
    """A lazy value once written is its DiskArray."""
    return x.disk if isinstance(x, Lazy) and x.disk is not None else x


def _describe(aval) -> str:
    return f"{aval.dtype}{list(aval.shape)} ({_nbytes(aval)} bytes)"
