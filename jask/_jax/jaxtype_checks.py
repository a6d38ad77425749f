"""Where JAX (or a library on it) checks types, DiskArrays pass as JAX arrays.

Two places, each installed as a named patch of jask._jax.compat:

- `disk_array_structs`: jax.eval_shape (and `.trace(...).out_info`, ShapeDtypeStruct.like)
  gives a `DiskArrayStruct` for a DiskArray output, a jax.ShapeDtypeStruct whose JAX type is
  the DiskArray's. It gave the DiskArrayTy itself, which is neither an array nor a
  ShapeDtypeStruct: optimistix (`tree_full_like(f_struct, 0, allow_static=True)`) kept it as
  static data and later handed it to jnp.conj ("... DiskArrayTy is not a valid JAX type"),
  and lineax refused a DiskArray vector ("Vector and operator structures do not match").
  DiskArrays and their tracers already pass JAX's own checks (core.valid_jaxtype,
  jnp.asarray, eqx.is_array, isinstance(x, jax.Array)).
- `loop_carry_kinds`: the carries of loops and the outputs of conds, below.

jax.lax.scan, while_loop (so fori_loop and map) and cond/switch require the carry a body
returns to have the type of the carry it took, and every branch to return the same types.
A DiskArray and an in-memory array of one shape and dtype are two types to JAX
(`disk:float32[n]` and `float32[n]`), and whether an operation on DiskArrays gives a
DiskArray depends on the result's size, so a body written for jax.Arrays may turn an
in-memory carry into a DiskArray (or back). These wrappers give each such carry one kind,
chosen by a `CarryPolicy` (jask/_api/loops.py states the rule): the body's result is moved
to the carry's kind, or, where the carry must change kind instead, the loop is traced
again from an initial carry moved to that kind. A loop or cond whose types already agree
is traced once and runs unchanged; one whose types differ in anything but where an array
lives raises JAX's own error.

This module touches JAX internals (jax._src.stages, jax._src.lax.control_flow); it
registers its two installers in compat's registry of patches (compat.PATCHES).
"""

from __future__ import annotations

import functools
from typing import Protocol

import jax
from jax._src import config as _config
from jax._src import core as _core
from jax._src import dtypes as _dtypes
from jax._src import stages as _stages
from jax._src.interpreters import ad as _ad
from jax._src.lax.control_flow import conditionals as _conditionals
from jax._src.lax.control_flow import loops as _loops

from . import compat


class CarryPolicy(Protocol):
    def unified_kind(self, avals: list) -> str | None:
        """The kind ("memory" or "disk") every value of `avals` (one carry's types before
        and after the body, or one output's type in each branch) must take, or None when
        they need no change or differ in more than where they live."""

    def as_kind(self, x, kind: str):
        """`x` (a value or tracer) as an array of that kind: read into memory or written to a
        DiskArray, unchanged when it has that kind already."""

    def stackable(self, x):
        """A scan body's output `x` as JAX can stack it into the ys: a DiskArray read into
        memory (an error naming the budget where it does not fit), anything else as it is."""


_policy: CarryPolicy | None = None


class DiskArrayStruct(jax.ShapeDtypeStruct):
    """What jax.eval_shape gives for a DiskArray: a jax.ShapeDtypeStruct (equal to one of the
    same shape and dtype, as libraries compare structures), whose JAX type is the DiskArray's,
    so tracing a function on it traces it on a DiskArray."""

    __slots__ = ()


@compat._patch(
    "disk_array_structs",
    "jax._src.stages.Traced.out_info (jax.eval_shape), jax.ShapeDtypeStruct.like",
    "eval_shape gave a DiskArray's type itself, which libraries take for static data; a "
    "DiskArray's is a DiskArrayStruct, a jax.ShapeDtypeStruct whose JAX type is DiskArrayTy",
)
def _install_disk_array_structs(hooks: compat.Hooks) -> None:
    install_disk_array_structs(hooks.hi_type)


def install_disk_array_structs(hi_type: type) -> None:
    """DiskArrayStruct as the shape of every hi_type output of eval_shape. Idempotent."""
    if DiskArrayStruct in _core.pytype_aval_mappings:
        return
    _core.pytype_aval_mappings[DiskArrayStruct] = lambda s: hi_type(s.shape, s.dtype)
    _dtypes.register_canonicalize_value_handler(DiskArrayStruct, None)

    def as_struct(x):
        return DiskArrayStruct(x.shape, x.dtype) if isinstance(x, hi_type) else x

    original_out_info = _stages._traced_out_info

    def out_info(self):
        return jax.tree_util.tree_map(as_struct, original_out_info(self))

    for cls in (_stages.Traced, _stages.LoJax):
        cls.out_info = property(out_info)

    original_like = jax.ShapeDtypeStruct.like.__func__

    def like(cls, x):
        aval = _core.shaped_abstractify(x)
        if isinstance(aval, hi_type) and cls is jax.ShapeDtypeStruct:
            return DiskArrayStruct(aval.shape, aval.dtype)
        return original_like(cls, x)

    like._jask_original = original_like
    jax.ShapeDtypeStruct.like = classmethod(like)


def set_carry_policy(policy: CarryPolicy) -> None:
    """The policy the loops use (jask/_api/loops.py sets it when imported)."""
    global _policy
    _policy = policy


@compat._patch(
    "loop_carry_kinds",
    "jax.lax.scan, while_loop, cond and switch (jax._src.lax.control_flow)",
    "a loop body or cond branch written for jax.Arrays may turn an in-memory carry into a "
    "DiskArray or back; the carry takes one kind (jask/_api/loops.py) instead of JAX's type error",
)
def _install(hooks: compat.Hooks) -> None:
    install_carry_unification()


def install_carry_unification() -> None:
    """Replaces jax.lax.scan, while_loop, cond and switch (and the names JAX's own modules
    call them by, so fori_loop and map go through them) with versions that unify the kinds
    of carries and branch outputs. Idempotent."""
    if getattr(_loops.scan, "_jask_original", None):
        return
    replacements = {}
    for module, name, make in (
        (_loops, "scan", _scan),
        (_loops, "while_loop", _while_loop),
        (_conditionals, "cond", _cond),
        (_conditionals, "switch", _switch),
    ):
        original = getattr(module, name)
        replacements[original] = make(original)
    # every loaded module's name for one of them: JAX's own modules import them under several
    # (jax.lax, jax._src.lax, which jax.scipy.linalg.expm calls cond through, lax.special's
    # while_loop, ...); found by identity, so jnp.linalg.cond is left alone
    compat.replace_everywhere(replacements)


def _scan(original):
    @functools.wraps(original)
    def scan(f, init, xs=None, length=None, reverse=False, unroll=1, _split_transpose=False):
        if not callable(f) or _config.disable_jit.value:
            return original(f, init, xs, length, reverse, unroll, _split_transpose)
        kinds: dict[int, str] = {}

        @functools.wraps(f)
        def body(carry, x):
            taken = jax.tree_util.tree_flatten(carry)  # before f: f may consume the carry
            out = f(carry, x)
            if not isinstance(out, (tuple, list)) or len(out) != 2:
                return out  # JAX's error
            new, y = out
            return type(out)((_unify_carry(taken, new, kinds), _ys_in_memory(y)))

        return _retrying(
            kinds,
            lambda: original(
                body, _moved(init, kinds), xs, length, reverse, unroll, _split_transpose
            ),
        )

    scan._jask_original = original
    return scan


def _while_loop(original):
    @functools.wraps(original)
    def while_loop(cond_fun, body_fun, init_val):
        if not callable(body_fun) or _config.disable_jit.value:
            return original(cond_fun, body_fun, init_val)
        kinds: dict[int, str] = {}

        @functools.wraps(body_fun)
        def body(carry):
            taken = jax.tree_util.tree_flatten(carry)  # before body_fun, which may consume it
            return _unify_carry(taken, body_fun(carry), kinds)

        return _retrying(kinds, lambda: original(cond_fun, body, _moved(init_val, kinds)))

    while_loop._jask_original = original
    return while_loop


def _ys_in_memory(y):
    """A body's per-iteration outputs, each DiskArray among them read into memory: JAX stacks
    them into the in-memory ys (a DiskArray cannot be stacked), and a Jask op gives a
    DiskArray for a small product of DiskArrays (an RNN's output from weights on disk)."""
    if _policy is None:
        return y
    leaves, tree = jax.tree_util.tree_flatten(y)
    moved = [_policy.stackable(v) for v in leaves]
    return jax.tree_util.tree_unflatten(tree, moved)


def _retrying(kinds: dict, run):
    """run(), traced again (at most twice more) while a failed trace chose new kinds for the
    initial carry."""
    for _ in range(2):
        before = dict(kinds)
        try:
            return run()
        except TypeError:
            if kinds == before:
                raise
    return run()


def _unify_carry(taken, new, kinds: dict):
    """The body's new carry with each leaf moved to the kind chosen for it; a leaf whose kind
    differs from the carry's chooses one (recorded in `kinds`).

    `taken` is the carry the body took, flattened before the body ran: a body may empty a
    mutable container of its carry (flax's nnx.scan pops its graph state from a deque), so
    the carry flattened afterwards need not have the structure JAX traced it with.
    """
    in_leaves, in_tree = taken
    out_leaves, out_tree = jax.tree_util.tree_flatten(new)
    if in_tree != out_tree or _policy is None:
        return new  # JAX's error
    for k, (a, b) in enumerate(zip(in_leaves, out_leaves)):
        kind = kinds.get(k) or _policy.unified_kind(_avals_of(a, b))
        if kind is not None:
            kinds[k] = kind
            out_leaves[k] = _policy.as_kind(b, kind)
    return jax.tree_util.tree_unflatten(out_tree, out_leaves)


def _moved(init, kinds: dict):
    """The initial carry with each leaf of `kinds` moved to its kind."""
    if not kinds:
        return init
    leaves, tree = jax.tree_util.tree_flatten(init)
    for k, kind in kinds.items():
        leaves[k] = _policy.as_kind(leaves[k], kind)
    return jax.tree_util.tree_unflatten(tree, leaves)


def _avals_of(*values) -> list:
    try:
        return [_core.typeof(v) for v in values]
    except TypeError:
        return []  # not JAX values: JAX's error


def _cond(original):
    @functools.wraps(original)
    def cond(pred, true_fun, false_fun, *operands, **kwargs):
        if not (callable(true_fun) and callable(false_fun)):
            return original(pred, true_fun, false_fun, *operands, **kwargs)
        branches = _Branches(2)
        return branches.run(
            lambda: original(
                pred, branches.wrap(1, true_fun), branches.wrap(0, false_fun), *operands, **kwargs
            )
        )

    cond._jask_original = original
    return cond


def _switch(original):
    @functools.wraps(original)
    def switch(index, branches, *operands, **kwargs):
        try:
            funs = list(branches)
        except TypeError:
            return original(index, branches, *operands, **kwargs)
        if not all(callable(f) for f in funs):
            return original(index, branches, *operands, **kwargs)
        unify = _Branches(len(funs))
        wrapped = lambda: [unify.wrap(i, f) for i, f in enumerate(funs)]
        return unify.run(lambda: original(index, wrapped(), *operands, **kwargs))

    switch._jask_original = original
    return switch


class _Branches:
    """The branches of one cond or switch: each records the types of its outputs when traced
    and moves each output to the kind chosen for it."""

    def __init__(self, count: int):
        self.outputs: list = [None] * count  # per branch: (tree, avals) of its last trace
        self.kinds: dict[int, str] = {}

    def wrap(self, i: int, fun):
        @functools.wraps(fun)
        def branch(*args, **kwargs):
            leaves, tree = jax.tree_util.tree_flatten(fun(*args, **kwargs))
            self.outputs[i] = (tree, _avals_of(*leaves))
            for k, kind in self.kinds.items():
                leaves[k] = _policy.as_kind(leaves[k], kind)
            return jax.tree_util.tree_unflatten(tree, leaves)

        return branch

    def run(self, run):
        try:
            return run()
        except TypeError:
            if not self._choose_kinds():
                raise
            return run()

    def _choose_kinds(self) -> bool:
        traced = [o for o in self.outputs if o is not None]
        if _policy is None or len(traced) < 2 or len({tree for tree, _ in traced}) != 1:
            return False
        avals = [a for _, a in traced]
        if len({len(a) for a in avals}) != 1:
            return False
        for k, leaf_avals in enumerate(zip(*avals)):
            kind = _policy.unified_kind(list(leaf_avals))
            if kind is not None:
                self.kinds[k] = kind
        return bool(self.kinds)


def is_differentiating() -> bool:
    """True while the current trace is a derivative's (jax.grad, jvp, linearize, vjp)."""
    return isinstance(_core.trace_ctx.trace, (_ad.JVPTrace, _ad.LinearizeTrace))


def computes_on(closed_jaxpr, hi_type: type) -> bool:
    """True when an equation of the jaxpr (or of one nested in it) takes or makes a value of
    hi_type."""

    def walk(jaxpr) -> bool:
        for eqn in jaxpr.eqns:
            if any(isinstance(v.aval, hi_type) for v in (*eqn.invars, *eqn.outvars)):
                return True
        return any(walk(sub) for sub in _core.subjaxprs(jaxpr))

    return walk(closed_jaxpr.jaxpr)
