"""Every use of JAX internals in Jask lives in this module.

hijax is experimental and changes between releases, so Jask pins jax 0.10.2
and refuses to import on any other version rather than misbehave. The changes
Jask makes to JAX functions are the named patches in `PATCHES`, each
written for one version of its library; `install_patches` checks that version
and installs them all (jask._setup calls it once).
"""

from __future__ import annotations

import collections
import contextvars
import functools
import importlib
import importlib.metadata
import importlib.util
import os
import pkgutil
import re
import sys
import threading
import types
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax._src.lax as _lax_package
import jax.numpy
import numpy as np
from jax._src import ad_checkpoint as _ad_checkpoint
from jax._src import ad_util as _ad_util
from jax._src import api as _api
from jax._src import api_util as _api_util
from jax._src import core as _core
from jax._src import custom_derivatives as _custom_derivatives
from jax._src import debugging as _debugging
from jax._src import dtypes as _jax_dtypes
from jax._src import hijax as _hijax_src
from jax._src import linear_util as _lu
from jax._src import pjit as _pjit
from jax._src import util as _util
from jax._src.interpreters import ad as _ad
from jax._src.interpreters import batching as _batching
from jax._src.interpreters import partial_eval as _pe
from jax._src.interpreters import pxla as _pxla
from jax._src.lax import lax as _lax
from jax._src.lax import slicing as _slicing
from jax._src.lax.control_flow import solves as _solves
from jax._src.numpy import array_methods as _array_methods
from jax._src.numpy import hijax as _numpy_hijax
from jax._src.numpy import indexing as _numpy_indexing
from jax._src.numpy import util as _numpy_util
from jax._src.ops import scatter as _scatter
from jax.experimental import hijax as _hijax

PINNED_JAX = "0.10.2"
if jax.__version__ != PINNED_JAX:
    raise ImportError(
        f"jask needs jax=={PINNED_JAX} (its hijax interface is experimental and "
        f"changes between releases); found jax {jax.__version__}"
    )

HiType = _hijax.HiType
VJPHiPrimitive = _hijax.VJPHiPrimitive
register_hitype = _hijax.register_hitype
aval_method = _hijax.aval_method
aval_property = _hijax.aval_property
Zero = _hijax.Zero
MappingSpec = _hijax_src.MappingSpec
ShapedArray = _core.ShapedArray
Tracer = _core.Tracer
typeof = _core.typeof
# jax.Array's checks before bool(), int(), float() and operator.index() of an array (the errors
# JAX raises for an array that is not one element, or not an integer scalar)
check_bool_conversion = _core.check_bool_conversion
check_scalar_conversion = _core.check_scalar_conversion
check_integer_conversion = _core.check_integer_conversion


def dot_general_dtype(lhs_dtype, rhs_dtype, preferred_element_type=None):
    """The dtype jax.lax.dot_general gives operands of these dtypes (XLA's rule: the operand
    type of higher precision, not NumPy's promotion; TypeError for two it does not order)."""
    lhs, rhs = ShapedArray((), lhs_dtype), ShapedArray((), rhs_dtype)
    return _lax._dot_general_dtype_rule(
        lhs,
        rhs,
        dimension_numbers=None,
        precision=None,
        preferred_element_type=preferred_element_type,
        out_sharding=None,
    )


def is_tracer(x) -> bool:
    return isinstance(x, Tracer)


def is_accumulator(x) -> bool:
    """True for the gradient accumulators JAX passes for the linear inputs of a transpose."""
    return isinstance(x, _ad.GradAccum)


def staged_equation(x):
    """(primitive name, params, operands) of the equation that makes x where x is a value being
    staged into a jitted program (the operands are tracers too); None for other values."""
    made_by = getattr(x, "parent", None) if isinstance(x, _pe.DynamicJaxprTracer) else None
    if made_by is None:
        return None
    return made_by.primitive.name, made_by.params, tuple(made_by.in_tracers)


def eval_closed_jaxpr(closed, *args) -> list:
    """Runs a ClosedJaxpr's equations on `args` at the current trace (each primitive binds again)."""
    return _core.eval_jaxpr(closed.jaxpr, closed.consts, *args)


def is_eager() -> bool:
    """True when JAX evaluates ops now, False while it stages them into a program."""
    return isinstance(_core.trace_ctx.trace, _core.EvalTrace)


# -- the jit-time passes' view of a hi jaxpr ---------------------------------------
#
# jask/lowering rewrites hi jaxprs before JAX lowers them; these are the only
# pieces of that which touch JAX's jaxpr classes.

_call_hi_primitive_p = _hijax_src.call_hi_primitive_p


def is_var(x) -> bool:
    """True for a jaxpr variable (not a literal constant)."""
    return isinstance(x, _core.Var)


def new_var(aval):
    return _core.Var(aval)


def lax_primitive(name: str):
    """The primitive of jax.lax's modules named `name` (split, stack, tile, unstack,
    ragged_dot_general: jax.lax primitives jax.extend does not name), or None."""
    return _lax_primitives().get(name)


def hi_primitive(eqn):
    """The hijax primitive (a VJPHiPrimitive instance) an equation applies, or None."""
    if eqn.primitive is _call_hi_primitive_p:
        return eqn.params.get("_prim")
    return None


def hi_equation(invars, outvars, prim, like, effects=None):
    """A new equation applying hijax primitive `prim`, with `like`'s source info and context
    (and effects, unless given)."""
    return _core.new_jaxpr_eqn(
        invars,
        outvars,
        _call_hi_primitive_p,
        {"_prim": prim},
        like.effects if effects is None else effects,
        like.source_info,
        like.ctx,
    )


def program_of(closed_jaxpr):
    """(equations, output variables) of a closed jaxpr."""
    return list(closed_jaxpr.jaxpr.eqns), list(closed_jaxpr.jaxpr.outvars)


def with_equations(closed_jaxpr, eqns):
    """`closed_jaxpr` with its equations replaced."""
    return closed_jaxpr.replace(jaxpr=closed_jaxpr.jaxpr.replace(eqns=list(eqns)))


# -- the patch registry ------------------------------------------------------------


@dataclass(frozen=True)
class Hooks:
    """The pieces of Jask the patches call (compat imports no other Jask module)."""

    hi_type: type
    """The hijax type (DiskArrayTy)."""
    is_hi: Callable[[object], bool]
    """True for a DiskArray or a tracer of one."""
    broadcast: Callable
    """(x, size, axis) -> `size` copies of x stacked along `axis`."""
    lowering_passes: tuple[Callable, ...]
    """ClosedJaxpr -> ClosedJaxpr rewrites, in order (jask.lowering.passes())."""
    full_like: Callable
    """(x, fill_value, dtype) -> a DiskArray of x's shape holding fill_value (jask.full_like)."""
    in_memory_tree: Callable
    """(tree, what) -> the tree with each DiskArray leaf read into memory, a ValueError naming
    `what`, the size and the budget for a leaf larger than the memory budget."""
    when_imported: Callable
    """(module name, register) -> calls register(module) once that module is imported."""
    to_disk: Callable
    """An in-memory array (or its tracer) written to a new DiskArray."""
    to_memory: Callable
    """(x, what) -> the DiskArray x (or its tracer) read into an in-memory jax.Array, a
    ValueError naming `what`, the size and the budget when x is larger than the memory
    budget."""
    in_memory_if_0d: Callable
    """A rule's result as the primitive returns it: a 0-d DiskArray as a 0-d jax.Array (what
    jax.grad differentiates; a scalar is never worth a file), anything else as it is."""
    primitive_rules: dict[str, Callable]
    """jax.lax primitive name -> the Jask rule applying it to DiskArrays (primitives.RULES)."""
    xla_route: Callable
    """(primitive, args, params) -> the primitive applied to DiskArray operands it has no rule
    for, at the current trace: in memory by JAX's implementation when that fits the budget,
    block by block through XLA when it is independent along an axis (jask/_api/xla_route.py);
    NotImplementedError otherwise."""
    xla_computes: Callable
    """(primitive, avals, params) -> True when XLA computes the primitive (xla_route) even
    though Jask has a rule for it: operands or results of a dtype the engine has no arithmetic
    for (complex numbers)."""
    xla_route_errors: tuple[type[Exception], ...]
    """Errors a rule raises for a case it does not take (a dtype Jask does not store, a
    NotImplementedError): the primitive takes the xla_route instead, which raises the rule's
    error when XLA cannot compute it either."""
    new_program_slot: Callable[[], int]
    """A new slot for the memory a jitted program holds (the engine's program slots)."""
    program_compiled: Callable
    """(calls, bytes) -> called when XLA has compiled a program that calls Jask's engine:
    {program slot its calls name: how many calls name it, 0 where a loop, branch or function
    call in the program makes a run's count unknown}, and the bytes XLA holds in memory while
    it runs (temporaries and in-memory results)."""
    searchsorted: Callable | None = None
    """(sorted_arr, query, side, method, dtype) -> jnp.searchsorted of a 1-d sorted array with
    a DiskArray (or its tracer) among the two (jask/_api/search.py)."""
    mask_positions: Callable | None = None
    """(shape, key) -> the index tuple `key` into an array of `shape` with each DiskArray boolean
    mask replaced by the integer arrays of its True elements (jask/_api/indexing.py); JAX's
    NonConcreteBooleanIndexError for a traced one."""
    masked_update: Callable | None = None
    """(x, key, y, combine) -> x.at[key].<combine>(y) (combine: set, add, sub, mul, min, max)
    as one streamed select where key is a DiskArray mask of a DiskArray's leading axes; None
    for any other update (jask/_api/indexing.py)."""


@dataclass(frozen=True)
class Patch:
    """One change Jask makes to a function of JAX (or of another library it works with)."""

    name: str
    library: str
    """The package it changes ("jax")."""
    version: str
    """The version of that package it is written for: any other refuses to install."""
    target: str
    """What it replaces."""
    reason: str
    install: Callable[[Hooks], None]


PATCHES: dict[str, Patch] = {}
"""Every patch, by name, in installation order."""

_installed: list[str] = []


def _patch(name: str, target: str, reason: str, library: str = "jax", version: str = PINNED_JAX):
    def register(install: Callable[[Hooks], None]):
        PATCHES[name] = Patch(name, library, version, target, reason, install)
        return install

    return register


def library_version(library: str) -> str | None:
    """The installed version of `library`, or None when it is not installed."""
    try:
        return importlib.metadata.version(library)  # without importing it
    except importlib.metadata.PackageNotFoundError:
        return None


def check_version(patch: Patch) -> bool:
    """True when the patch's library is installed at the version the patch is written for,
    False when it is not installed (an optional library); ImportError for another version."""
    found = library_version(patch.library)
    if found is None:
        return False
    if found != patch.version:
        raise ImportError(
            f"jask's patch {patch.name!r} of {patch.target} is written for "
            f"{patch.library}=={patch.version}; found {patch.library} {found}"
        )
    return True


def install_patches(hooks: Hooks) -> tuple[str, ...]:
    """Installs every patch whose library is present (once each); returns the names of the
    installed patches."""
    for patch in PATCHES.values():
        if patch.name not in _installed and check_version(patch):
            patch.install(hooks)
            _installed.append(patch.name)
    return installed_patches()


def installed_patches() -> tuple[str, ...]:
    return tuple(_installed)


# -- jit: Jask's passes before lowering ------------------------------------------------------


@_patch(
    "lowering_passes",
    "jax._src.interpreters.partial_eval.lower_jaxpr",
    "run jask.lowering's passes (fusion, row groups, releases) on every hi jaxpr before JAX "
    "lowers it",
)
def _install_lowering_passes(hooks: Hooks) -> None:
    install_lowering_passes(*hooks.lowering_passes, new_program_slot=hooks.new_program_slot)


def install_lowering_passes(*passes, new_program_slot: Callable[[], int] = lambda: 0) -> None:
    """Runs `passes` (ClosedJaxpr -> ClosedJaxpr, in order) on every hi jaxpr before JAX
    lowers it; the engine calls of one program (nested jaxprs included) name one program slot
    (`program_slot`)."""
    global _original_lower_jaxpr
    if _original_lower_jaxpr is not None:
        return
    _original_lower_jaxpr = original = _pe.lower_jaxpr

    @_util.weakref_lru_cache
    def lower_jaxpr(hi_jaxpr, lo_avals):
        for rewrite in passes:
            hi_jaxpr = rewrite(hi_jaxpr)
        if _program_slot.get():
            return original(hi_jaxpr, lo_avals)
        token = _program_slot.set(new_program_slot())
        try:
            return original(hi_jaxpr, lo_avals)
        finally:
            _program_slot.reset(token)

    _pe.lower_jaxpr = lower_jaxpr


_program_slot = contextvars.ContextVar("jask_program_slot", default=0)


def program_slot() -> int:
    """The program slot of the jitted program being lowered (0 outside a lowering)."""
    return _program_slot.get()


_original_lower_jaxpr = None


@_patch(
    "vmap_broadcast",
    "jax._src.interpreters.batching.broadcast",
    "vmap gives an unbatched DiskArray output its batch axis with a function that only knows "
    "JAX arrays",
)
def _broadcast_unbatched_outputs(hooks: Hooks) -> None:
    """jax.vmap gives an output that does not depend on the batch (a function returning one
    of its unbatched DiskArray inputs) a batch axis with `batching.broadcast`, which only knows
    JAX arrays; for hi values it calls `broadcast(x, size, axis)` instead."""
    is_hi, broadcast = hooks.is_hi, hooks.broadcast
    original = _batching.broadcast
    if getattr(original, "_jask_original", None):
        return

    @functools.wraps(original)
    def batching_broadcast(x, sz, axis, mesh_axis=None):
        if not is_hi(x):
            return original(x, sz, axis, mesh_axis)
        # x is not batched: build the copies below the vmap (when vmap finishes its outputs the
        # current trace is its own; batching rules already run one level down)
        trace = _core.trace_ctx.trace
        if isinstance(trace, _batching.BatchTrace):
            trace = trace.parent_trace
        with _core.set_current_trace(trace):
            return broadcast(x, sz, axis)

    batching_broadcast._jask_original = original
    _batching.broadcast = batching_broadcast


# -- jax.lax primitives on DiskArrays -------------------------------------------------
#
# A primitive bound with a DiskArray (or a tracer of one) among its operands runs the Jask
# rule for that primitive (jask/_jax/primitives.py) instead of JAX's implementation, which
# knows nothing of files. Higher-order primitives (jit, custom_jvp_call, scan, cond) have no
# rule: JAX traces their bodies, and the primitives inside reach their rules.


@_patch(
    "primitive_dispatch",
    "jax._src.core.Primitive.bind_with_trace",
    "a jax.lax primitive bound to a DiskArray runs Jask's rule for it; one without a rule "
    "raises NotImplementedError naming the primitive and its operands",
)
def _dispatch_primitives(hooks: Hooks) -> None:
    hi_type, rules, in_memory_if_0d = hooks.hi_type, hooks.primitive_rules, hooks.in_memory_if_0d
    xla_route, route_errors = hooks.xla_route, hooks.xla_route_errors
    original = _core.Primitive.bind_with_trace
    if getattr(original, "_jask_original", None):
        return

    @functools.wraps(original)
    def bind_with_trace(self, trace, args, avals, params, /):
        if self is _call_hi_primitive_p:
            if getattr(params["_prim"], "zero_derivative", False) and isinstance(
                trace, (_ad.JVPTrace, _ad.LinearizeTrace)
            ):
                # JAX's symbolic zero tangent, as for jax.lax.stop_gradient (lineax checks for
                # it): a Jask op without a derivative (StopGradient, the comparisons) staged
                # in a jaxpr that is evaluated under differentiation runs on the primals
                primals = [trace.to_primal_tangent_pair(x)[0] for x in args]
                return self.bind_with_trace(trace.parent_trace, primals, avals, params)
            with _core.set_current_trace(trace):
                moved = _as_stated_kinds(params["_prim"], args, avals, hooks)
            if any(m is not x for m, x in zip(moved, args)):
                args, avals = moved, [_core.typeof(x) for x in moved]
            return original(self, trace, args, avals, params)
        if not any(isinstance(a, hi_type) for a in avals):
            return original(self, trace, args, avals, params)
        if getattr(_unruled, "primitive", None) is self:  # bind_without_rules
            _unruled.primitive = None
            return original(self, trace, args, avals, params)
        if self.name == "jit" and not isinstance(trace, (_core.EvalTrace, _pe.DynamicJaxprTrace)):
            # a jitted function of DiskArrays under grad, jvp or vmap: JAX would lower its
            # program first (and cannot, holding tracers); its equations run at this trace
            closed = params["jaxpr"]
            with _core.set_current_trace(trace):
                return _core.eval_jaxpr(closed.jaxpr, closed.consts, *args)
        if isinstance(trace, _batching.BatchTrace) and _batched_here(trace, args):
            # vmap: JAX's batching rule restates the primitive on the unbatched values (one
            # dot_general, one reduction) and binds that one level down, where it gets here
            # again. Where JAX's rule cannot (select_n's asserts cases of one shape, Jask's
            # broadcast) Jask's rule runs at this trace, its ops batched whole (ops/_batching.py)
            try:
                return original(self, trace, args, avals, params)
            except (TypeError, ValueError, AttributeError, NotImplementedError, AssertionError):
                if self.name not in rules:
                    raise
        rule = rules.get(self.name)
        if rule is not None and hooks.xla_computes(self, avals, params):
            rule = None  # a dtype the engine does not compute: XLA does
        if rule is not None:
            with _core.set_current_trace(trace):
                try:
                    out = rule(*args, **params)
                except route_errors as error:  # a case the rule does not take: XLA's
                    return xla_route(self, args, params, error)
                return (
                    [in_memory_if_0d(o) for o in out]
                    if self.multiple_results
                    else (in_memory_if_0d(out))
                )
        if self.name in _lax_defined_names() or self.name in rules:
            # a jax.lax primitive without a Jask rule: XLA computes it (eagerly JAX would jit
            # the primitive, which comes back here)
            with _core.set_current_trace(trace):
                return xla_route(self, args, params)
        if _is_foreign_leaf(self, params):
            # a library's own primitive (lineax, equinox), no function inside: XLA computes it
            with _core.set_current_trace(trace):
                return xla_route(self, args, params)
        try:
            return original(self, trace, args, avals, params)
        except (ValueError, TypeError, AttributeError, AssertionError) as error:
            raise unsupported_primitive(self.name, args) from error

    bind_with_trace._jask_original = original
    _core.Primitive.bind_with_trace = bind_with_trace


def _is_foreign_leaf(primitive, params) -> bool:
    """A primitive no module of JAX defines, with no jaxpr among its params (not a call or a
    control-flow primitive whose body JAX traces)."""
    if primitive.name in _jax_primitive_names() or primitive.name.startswith("call_hi_primitive"):
        return False
    jaxprs = (_core.Jaxpr, _core.ClosedJaxpr)
    for value in params.values():
        values = value if isinstance(value, (tuple, list)) else (value,)
        if any(isinstance(v, jaxprs) or isinstance(v, _lu.WrappedFun) for v in values):
            return False
    return True


_JAX_PRIMITIVES: set[str] = set()
_SCANNED_MODULES: set[str] = set()
_MODULES_SEEN = [0]  # len(sys.modules) at the last scan


def _jax_primitive_names() -> set[str]:
    """The names of the primitives JAX's own modules define (those imported so far; the modules
    are scanned again only when more have been imported)."""
    if len(sys.modules) == _MODULES_SEEN[0]:
        return _JAX_PRIMITIVES
    _MODULES_SEEN[0] = len(sys.modules)
    for name, module in list(sys.modules.items()):
        if name in _SCANNED_MODULES or not (name == "jax" or name.startswith(("jax.", "jaxlib."))):
            continue
        _SCANNED_MODULES.add(name)
        for value in list(vars(module).values()) if module is not None else ():
            if isinstance(value, _core.Primitive):
                _JAX_PRIMITIVES.add(value.name)
    return _JAX_PRIMITIVES


_unruled = threading.local()  # .primitive: the one bind_without_rules is binding (per thread)


def at_evaluation_or_staging() -> bool:
    """True when the current trace evaluates or stages (eager, jit), False under a
    transformation (jvp, linearize, vmap)."""
    return isinstance(_core.trace_ctx.trace, (_core.EvalTrace, _pe.DynamicJaxprTrace))


def stop_gradient_by_jax(x):
    """lax.stop_gradient's primitive bound under a transformation by JAX's own rule (a symbolic
    zero tangent, as JAX's rules of other primitives check for), not by Jask's op."""
    return bind_without_rules(_ad_util.stop_gradient_p, x)


def rewriting_take(arr, idx, **kwargs):
    """jnp's own x[idx] (jax._src.numpy.indexing.rewriting_take): jnp's whole indexing, which
    binds gather, slice and friends, so a DiskArray reaches Jask's rules for them."""
    return _numpy_indexing.rewriting_take(arr, idx, **kwargs)


def custom_linear_solve(*args, const_lengths, jaxprs):
    """lax.custom_linear_solve bound to DiskArrays: evaluated or staged (eagerly, under jit), its
    `solve` function applied to the right-hand side (the primitive's own implementation); under
    jvp, linearize or vmap, JAX's own rule for it, which binds it again on the primal and the
    tangent (so its derivative is its own, not that of the solve's steps)."""
    if isinstance(_core.trace_ctx.trace, _core.EvalTrace):  # staged: inline_linear_solves
        return _solves._custom_linear_solve_impl(*args, const_lengths=const_lengths, jaxprs=jaxprs)
    return bind_without_rules(
        _solves.linear_solve_p, *args, const_lengths=const_lengths, jaxprs=jaxprs
    )


def inline_linear_solves(closed_jaxpr, convert_equation):
    """A jit-time pass: each custom_linear_solve whose functions take DiskArrays is replaced by
    the equations of its `solve` function applied to its operands (its value; no derivative is
    taken after lowering). It stays a primitive while JAX differentiates the program, so every
    order of derivative is JAX's rule's, not that of the solve's steps (`custom_linear_solve`).
    An operand or result that is in memory where a DiskArray is wanted, or the reverse, goes
    through `convert_equation(var, to_disk, like) -> (equation, new var)`."""

    def solve_of(eqn):
        lengths = eqn.params["const_lengths"]
        solve = eqn.params["jaxprs"].solve
        start = lengths.matvec + lengths.vecmat
        operands = eqn.invars[start : start + lengths.solve] + eqn.invars[-len(eqn.outvars) :]
        return solve, operands

    return _inline_equations(closed_jaxpr, _is_hi_solve, solve_of, convert_equation)


def inline_library_primitives(closed_jaxpr, convert_equation):
    """A jit-time pass: each equation of a library's own primitive (lineax's linear_solve_p,
    equinox's filter primitives) with DiskArray operands, which JAX's lowering does not know as
    a hi primitive, is replaced by the equations of its implementation (`primitive.impl`,
    traced on the operands' types: the function the library lowers it by), so Jask's rules
    apply to them. Like inline_linear_solves, it runs after differentiation."""
    return _inline_equations(closed_jaxpr, _is_library_call_on_disk, _impl_of, convert_equation)


def _is_library_call_on_disk(eqn) -> bool:
    if eqn.primitive is _call_hi_primitive_p:
        return False
    if not any(_is_high(v) for v in eqn.invars):
        return False
    return not eqn.primitive.is_high(*[v.aval for v in eqn.invars], **eqn.params)


def _impl_of(eqn):
    """(ClosedJaxpr of the primitive's implementation on the equation's operand types, the
    operands)."""
    primitive, params = eqn.primitive, eqn.params

    def impl(*args):
        out = primitive.impl(*args, **params)
        return list(out) if primitive.multiple_results else [out]

    avals = [v.aval for v in eqn.invars]
    debug = _api_util.debug_info(f"jask: {primitive.name}'s implementation", impl, avals, {})
    jaxpr, _, consts = _pe.trace_to_jaxpr_dynamic(_lu.wrap_init(impl, debug_info=debug), avals)
    return _core.ClosedJaxpr(jaxpr, consts), list(eqn.invars)


def _inline_equations(closed_jaxpr, chosen, body_of, convert_equation):
    """closed_jaxpr with each equation `chosen(eqn)` replaced by the equations of the closed
    jaxpr `body_of(eqn)` gives, applied to the operands it names; an operand or result whose
    kind (DiskArray or in memory) differs from the body's goes through convert_equation."""
    jaxpr = closed_jaxpr.jaxpr
    if not any(chosen(e) for e in jaxpr.eqns):
        return closed_jaxpr
    eqns, subst = [], {}
    constvars, consts = list(jaxpr.constvars), list(closed_jaxpr.consts)

    def sub(v):
        return subst.get(v, v) if isinstance(v, _core.Var) else v

    for eqn in jaxpr.eqns:
        eqn = eqn.replace(invars=[sub(v) for v in eqn.invars])
        if not chosen(eqn):
            eqns.append(eqn)
            continue
        body, operands = body_of(eqn)
        env = {}
        for var, operand in zip(body.jaxpr.invars, operands, strict=True):
            if _is_high(var) and not _is_high(operand):
                convert, operand = convert_equation(operand, True, eqn)
                eqns.append(convert)
            env[var] = operand
        for var, value in zip(body.jaxpr.constvars, body.consts, strict=True):
            env[var] = new = _core.Var(var.aval)
            constvars.append(new)
            consts.append(value)
        for inner in body.jaxpr.eqns:
            outs = [_core.Var(v.aval) for v in inner.outvars]
            ins = [env.get(v, v) if isinstance(v, _core.Var) else v for v in inner.invars]
            env.update(zip(inner.outvars, outs))
            eqns.append(inner.replace(invars=ins, outvars=outs))
        for out, result in zip(eqn.outvars, body.jaxpr.outvars, strict=True):
            result = env.get(result, result) if isinstance(result, _core.Var) else result
            if _is_high(out) != _is_high(result):
                convert, result = convert_equation(result, _is_high(out), eqn)
                eqns.append(convert)
            subst[out] = result
    outvars = [sub(v) for v in jaxpr.outvars]
    new = jaxpr.replace(constvars=constvars, eqns=eqns, outvars=outvars)
    return closed_jaxpr.replace(jaxpr=new, consts=consts)


def _is_high(var) -> bool:
    return getattr(var.aval, "is_high", False)


def _is_hi_solve(eqn) -> bool:
    if eqn.primitive is not _solves.linear_solve_p:
        return False
    solve = eqn.params["jaxprs"].solve
    avals = [v.aval for v in eqn.invars] + list(solve.in_avals) + list(solve.out_avals)
    return any(getattr(a, "is_high", False) for a in avals)


def bind_without_rules(primitive, *args, **params):
    """Binds `primitive` as JAX does, without Jask's rule for it: for a rule that prepares its
    operands and then lets JAX run the primitive (the loops' rules). The primitives inside it
    (a loop's body) still reach their rules."""
    _unruled.primitive = primitive
    try:
        return primitive.bind(*args, **params)
    finally:
        _unruled.primitive = None


def _batched_here(trace, args) -> bool:
    return any(
        isinstance(a, _batching.BatchTracer) and a._trace is trace and a.batch_dim is not None
        for a in args
    )


@_patch(
    "library_jits_run_inline",
    "jax._src.pjit._infer_params, _run_python_pjit and jit_trace",
    "jax.numpy's own jitted functions called with a DiskArray run their Python body at the "
    "caller's trace: eagerly op by op (no compilation), under vmap each primitive batched, "
    "under jit inlined where the fusion passes see it; `.trace`, `.lower` and `.eval_shape` "
    "of one (jax.jit(jnp.sum).lower(x)) trace its program as JAX does",
)
def _inline_library_jits(hooks: Hooks) -> None:
    is_hi = hooks.is_hi
    original_infer, original_run = _pjit._infer_params, _pjit._run_python_pjit
    original_trace = _pjit.jit_trace
    if getattr(original_run, "_jask_original", None):
        return

    @functools.wraps(original_infer)
    def infer_params(fun, jit_info, args, kwargs):
        if getattr(_explicit_trace, "pending", False):
            # this call only: the library functions called inside the program still inline
            _explicit_trace.pending = False
            return original_infer(fun, jit_info, args, kwargs)
        if _is_library_function(fun, jit_info) and any(
            is_hi(leaf) for leaf in jax.tree_util.tree_leaves((args, kwargs))
        ):
            return _RUN_DIRECTLY, []  # no program to trace: the body runs at the caller's trace
        return original_infer(fun, jit_info, args, kwargs)

    @functools.wraps(original_trace)
    def jit_trace(jit_func, *args, **kwargs):
        # the user asked for the program itself (its first step infers its params)
        _explicit_trace.pending = True
        try:
            return original_trace(jit_func, *args, **kwargs)
        finally:
            _explicit_trace.pending = False

    @functools.wraps(original_run)
    def run_python_pjit(p, args_flat, fun, args, kwargs):
        if p is not _RUN_DIRECTLY:
            return original_run(p, args_flat, fun, args, kwargs)
        outs = fun(*args, **kwargs)
        out_flat, out_tree = jax.tree_util.tree_flatten(outs)
        return outs, out_flat, out_tree, args_flat, _NO_PROGRAM, None, None, []

    infer_params._jask_original = original_infer
    run_python_pjit._jask_original = original_run
    jit_trace._jask_original = original_trace
    _pjit._infer_params = infer_params
    _pjit._run_python_pjit = run_python_pjit
    _pjit.jit_trace = jit_trace


# .pending: jit_trace (`.trace`, `.lower`, `.eval_shape`) is about to infer its program's params
_explicit_trace = threading.local()


class _RunDirectly:
    """What `_infer_params` returns for a library function of DiskArrays (its PjitParams)."""

    params = {"inline": True}


_RUN_DIRECTLY = _RunDirectly()
_NO_PROGRAM = types.SimpleNamespace(effects=(), consts=[])
"""The jaxpr fields jit reads after running a function: none, as no program was made."""


def _is_library_function(fun, jit_info) -> bool:
    """jit(inline=True) or a function of JAX's own modules (jnp, jax.nn, lax)."""
    module = getattr(fun, "__module__", None) or ""
    return bool(jit_info.inline) or module.startswith("jax.")


def unsupported_primitive(name: str, args) -> NotImplementedError:
    """The error for a jax.lax primitive Jask does not implement on DiskArrays, naming the
    primitive, the user's function that called it (where known) and the operands."""
    operands = ", ".join(describe_operand(a) for a in args)
    where = user_frame()
    return NotImplementedError(
        f"jax.lax.{name} on a DiskArray is not supported ({operands}){where}; README.md lists "
        f"the jax.lax primitives Jask implements (jask.materialize brings a small array into "
        f"memory)"
    )


def describe_operand(x) -> str:
    aval = typeof(x) if not hasattr(x, "aval") else x.aval
    shape = ",".join(map(str, getattr(aval, "shape", ())))
    kind = "DiskArray" if getattr(aval, "is_high", False) else "array"
    return f"{getattr(aval, 'dtype', '?')}[{shape}] {kind}"


_LIBRARY_PACKAGES = ("jax", "jaxlib", "jask", "optax", "flax", "equinox")


@functools.cache
def _library_folders() -> tuple[str, ...]:
    """The install folders of the library packages (each with a trailing separator).

    A frame is the library's by where its package is installed, not by a folder's name: user
    code in a folder named `jask` or `jax` is still the user's.
    """
    folders = []
    for package in _LIBRARY_PACKAGES:
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            continue
        for folder in (spec.submodule_search_locations or []) if spec else []:
            folders.append(os.path.join(os.path.realpath(folder), ""))
    return tuple(folders)


def _is_library_file(filename: str) -> bool:
    return os.path.realpath(filename).startswith(_library_folders())


def user_frame() -> str:
    """' in f (file.py:12)' for the innermost frame outside the library packages, or ''."""
    frame = sys._getframe(2)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not _is_library_file(filename):
            return f" in {frame.f_code.co_name} ({filename}:{frame.f_lineno})"
        frame = frame.f_back
    return ""


@_patch(
    "scan_length_of_disk_arrays",
    "jax._src.lax.control_flow.loops._infer_scan_length",
    "jax.lax.scan asks for `length` when an xs is a hi type; a DiskArray's leading axis is "
    "its length, as for a jax.Array",
)
def _scan_length_of_disk_arrays(hooks: Hooks) -> None:
    from jax._src.lax.control_flow import loops

    hi_type = hooks.hi_type
    original = loops._infer_scan_length
    if getattr(original, "_jask_original", None):
        return

    def _infer_scan_length(xs_flat, xs_avals, length):
        if length is None and any(isinstance(a, hi_type) for a in xs_avals):
            if not all(isinstance(a, (ShapedArray, hi_type)) and a.shape for a in xs_avals):
                return original(xs_flat, xs_avals, length)
            lengths = {a.shape[0] for a in xs_avals}
            if len(lengths) != 1:
                raise ValueError(
                    "scan got xs with different leading axis sizes: "
                    + ", ".join(a.str_short() for a in xs_avals)
                )
            length = lengths.pop()
        return original(xs_flat, xs_avals, length)

    _infer_scan_length._jask_original = original
    loops._infer_scan_length = _infer_scan_length


@_patch(
    "traced_array_check",
    "jax._src.core.Tracer._is_traced_array",
    "isinstance(tracer, jax.Array) is True only for ShapedArray avals; a DiskArray's tracer "
    "is a jax.Array too, so jax.numpy's array checks accept it",
)
def _traced_disk_arrays_are_arrays(hooks: Hooks) -> None:
    hi_type = hooks.hi_type
    original = _core.Tracer._is_traced_array
    if getattr(original, "_jask_original", None):
        return

    def _is_traced_array(self):
        return isinstance(self.aval, (ShapedArray, hi_type))

    _is_traced_array._jask_original = original
    _core.Tracer._is_traced_array = _is_traced_array


@_patch(
    "device_put",
    "jax.device_put",
    "device_put only knows in-memory arrays; a DiskArray put on a device is its values in "
    "memory there, as for a jax.Array, within the memory budget (a ValueError naming its "
    "size and the budget past it)",
)
def _device_put_disk_arrays(hooks: Hooks) -> None:
    is_hi, to_memory = hooks.is_hi, hooks.to_memory
    original = _api.device_put
    if getattr(original, "_jask_original", None):
        return

    @functools.wraps(original)
    def device_put(x, device=None, *args, **kwargs):
        leaves, treedef = jax.tree_util.tree_flatten(x)
        if not any(is_hi(leaf) for leaf in leaves):
            return original(x, device, *args, **kwargs)
        leaves = [to_memory(v, "jax.device_put") if is_hi(v) else v for v in leaves]
        return original(jax.tree_util.tree_unflatten(treedef, leaves), device, *args, **kwargs)

    device_put._jask_original = original
    _api.device_put = device_put
    jax.device_put = device_put


@_patch(
    "device_get",
    "jax.device_get",
    "device_get reads an array through its __array__, which for a DiskArray reads it whole "
    "whatever its size; within the memory budget it gives the NumPy array as for a jax.Array, "
    "past it a ValueError naming its size and the budget",
)
def _device_get_disk_arrays(hooks: Hooks) -> None:
    is_hi, to_memory = hooks.is_hi, hooks.to_memory
    original = _api.device_get
    if getattr(original, "_jask_original", None):
        return

    @functools.wraps(original)
    def device_get(x):
        leaves, treedef = jax.tree_util.tree_flatten(x)
        if not any(is_hi(leaf) and not is_tracer(leaf) for leaf in leaves):
            return original(x)
        leaves = [
            to_memory(v, "jax.device_get") if is_hi(v) and not is_tracer(v) else v for v in leaves
        ]
        return original(jax.tree_util.tree_unflatten(treedef, leaves))

    device_get._jask_original = original
    _api.device_get = device_get
    jax.device_get = device_get


@_patch(
    "full_like_of_disk_arrays",
    "jax._src.lax.lax.full_like (jnp.zeros_like, ones_like, full_like, empty_like)",
    "full_like builds an in-memory array of x's shape; for a DiskArray that is the whole array "
    "in memory, so it writes a DiskArray of the fill value instead",
)
def _fill_like_disk_arrays(hooks: Hooks) -> None:
    is_hi, full_like = hooks.is_hi, hooks.full_like
    original = _lax.full_like
    if getattr(original, "_jask_original", None):
        return

    @functools.wraps(original)
    def lax_full_like(x, fill_value, dtype=None, shape=None, sharding=None):
        # a DiskArray, its type, or a struct of that type (eval_shape of a DiskArray)
        mapped = _core.pytype_aval_mappings.get(type(x))
        disk = (
            is_hi(x)
            or isinstance(x, hooks.hi_type)
            or (mapped is not None and isinstance(mapped(x), hooks.hi_type))
        )
        float0 = dtype is not None and np.dtype(dtype) == FLOAT0
        if float0 and disk:
            # the tangent of an integer value (jnp.frexp's exponent): JAX's zeros of no
            # storage, never a file
            x = jax.ShapeDtypeStruct(x.shape, x.dtype)
        elif disk and not is_hi(fill_value) and (shape is None or tuple(shape) == x.shape):
            return full_like(x, fill_value, dtype)
        return original(x, fill_value, dtype, shape, sharding)

    lax_full_like._jask_original = original
    _lax.full_like = lax_full_like
    jax.lax.full_like = lax_full_like


@_patch(
    "scalar_init_values_in_memory",
    "jax.lax.reduce and jax.lax.reduce_window (and every loaded module's name for them)",
    "their computation is traced on the init values' types, so a 0-d DiskArray init value "
    "made a reducer typed on DiskArrays, which XLA cannot lower; such an init value (a scalar) "
    "is read into memory first",
)
def _scalar_init_values_in_memory(hooks: Hooks) -> None:
    from jax._src.lax import windowed_reductions as _windowed

    is_hi, to_memory = hooks.is_hi, hooks.to_memory

    def in_memory(values, what):
        def move(x):
            return to_memory(x, what) if is_hi(x) and not np.shape(x) else x

        return jax.tree_util.tree_map(move, values)

    def wrap(original, what):
        if getattr(original, "_jask_original", None):
            return original

        @functools.wraps(original)
        def wrapped(operands, init_values, *args, **kwargs):
            return original(operands, in_memory(init_values, what), *args, **kwargs)

        wrapped._jask_original = original
        return wrapped

    replace_everywhere(
        {
            _lax.reduce: wrap(_lax.reduce, "jax.lax.reduce's init value"),
            _windowed.reduce_window: wrap(_windowed.reduce_window, "jax.lax.reduce_window's init"),
        }
    )


@_patch(
    "empty_disk_residuals",
    "jax._src.ad_util.empty_like_aval (the residuals a cond branch does not produce)",
    "the linearized cond fills a residual its branch does not produce with an empty value, "
    "made for a hi type by raising its lowered value: a DiskArray around an int32 tracer, "
    "which the branch's trace then holds as a constant and leaks into the outer program "
    "(reverse over reverse of a cond: 'No constant handler for DynamicJaxprTracer'); for a "
    "DiskArray type it is a DiskArray of zeros made at the current trace",
)
def _empty_disk_residuals(hooks: Hooks) -> None:
    original = _ad_util.empty_like_aval
    if getattr(original, "_jask_original", None):
        return

    @functools.wraps(original)
    def empty_like_aval(aval):
        if isinstance(aval, hooks.hi_type):
            return aval.vspace_zero()
        return original(aval)

    empty_like_aval._jask_original = original
    _ad_util.empty_like_aval = empty_like_aval


def replace_everywhere(replacements: dict) -> None:
    """Each key function replaced by its value under every name a loaded module has for it
    (found by identity: JAX's modules import a function under several names)."""
    by_id = {id(old): (old, new) for old, new in replacements.items() if old is not new}
    for module in list(sys.modules.values()):
        names = getattr(module, "__dict__", None)
        if not isinstance(names, dict):
            continue
        for name, value in list(names.items()):
            found = by_id.get(id(value))
            if found is not None and found[0] is value:
                setattr(module, name, found[1])


@_patch(
    "where_keeps_disk_shapes",
    "jax._src.numpy.util._where (jnp.where and the jax.numpy functions written with it)",
    "jnp.where broadcasts every operand to the result's shape, in memory for a scalar next to a "
    "DiskArray; with a DiskArray among them each operand only gains the result's rank and "
    "Jask's select broadcasts the size-1 axes as it streams",
)
def _where_to_rank_only(hooks: Hooks) -> None:
    is_hi = hooks.is_hi
    original = _numpy_util._where
    if getattr(original, "_jask_original", None):
        return

    @functools.wraps(original)
    def where(condition, x, y):
        if not any(is_hi(a) for a in (condition, x, y)):
            return original(condition, x, y)
        # util._where's steps, with rank promotion in place of broadcasting
        condition, x, y = _numpy_util.ensure_arraylike("where", condition, x, y)
        if not jax.numpy.issubdtype(condition.dtype, jax.numpy.bool_):
            condition = _lax.ne(condition, _lax._zero(condition))
        x, y = _numpy_util.promote_dtypes(x, y)
        rank = max(len(jax.numpy.shape(a)) for a in (condition, x, y))
        if jax.numpy.ndim(condition) != 0:
            condition = _lax.broadcast_to_rank(condition, rank)
        return _lax.select(condition, *(_lax.broadcast_to_rank(a, rank) for a in (x, y)))

    where._jask_original = original
    for module in list(sys.modules.values()):  # util and the modules that imported its _where
        if module.__name__.startswith("jax.") and getattr(module, "_where", None) is original:
            module._where = where


_jax_searchsorted = _numpy_hijax.searchsorted_via_expand


def searchsorted_by_jax(sorted_arr, query, *, side: str, method: str, dtype):
    """JAX's own searchsorted of a 1-d sorted array (jnp.searchsorted's computation), whatever
    Jask's patch of it routes: for in-memory blocks."""
    return _jax_searchsorted(sorted_arr, query, side=side, method=method, dtype=dtype)


@_patch(
    "searchsorted_of_disk_arrays",
    "jax._src.numpy.hijax.searchsorted_via_expand (jnp.searchsorted and the jax.numpy "
    "functions written with it: digitize, histogram, interp)",
    "JAX's binary search is a scan of log2(n) steps of gathers and compares: on a DiskArray, "
    "engine calls at every step; with a DiskArray among the operands XLA searches blocks in "
    "memory instead, in one pass over the data (jask/_api/search.py)",
)
def _searchsorted_of_disk_arrays(hooks: Hooks) -> None:
    is_hi, search = hooks.is_hi, hooks.searchsorted
    original = _numpy_hijax.searchsorted_via_expand
    if search is None or getattr(original, "_jask_original", None):
        return

    @functools.wraps(original)
    def searchsorted_via_expand(
        sorted_arr,
        query,
        /,
        *,
        side="left",
        dimension=0,
        batch_dims=0,
        method="scan",
        dtype="int32",
    ):
        plain = dimension == 0 and batch_dims == 0 and np.ndim(sorted_arr) == 1
        if not (plain and (is_hi(sorted_arr) or is_hi(query))):
            return original(
                sorted_arr,
                query,
                side=side,
                dimension=dimension,
                batch_dims=batch_dims,
                method=method,
                dtype=dtype,
            )
        out_dtype = _jax_dtypes._maybe_canonicalize_explicit_dtype(np.dtype(dtype), "searchsorted")
        # JAX's checks of the arguments, with its errors (side, method, dtypes)
        _numpy_hijax.SearchSorted(
            ShapedArray(np.shape(sorted_arr), sorted_arr.dtype),
            ShapedArray(np.shape(query), query.dtype),
            side=side,
            dimension=0,
            batch_dims=0,
            method=method,
            out_dtype=out_dtype,
        )
        return search(sorted_arr, query, side=side, method=method, dtype=out_dtype)

    searchsorted_via_expand._jask_original = original
    _numpy_hijax.searchsorted_via_expand = searchsorted_via_expand


@_patch(
    "disk_boolean_masks",
    "jax._src.numpy.indexing.NDIndexer.from_raw_indices (x[mask], x.at[mask] and the jax.numpy "
    "functions that index with a mask: compress, extract)",
    "JAX takes a boolean index only of a ShapedArray type (_is_boolean_index), so a DiskArray "
    "mask is its TypeError 'Indexer must have integer or boolean type'; a DiskArray mask becomes "
    "the integer arrays of its True elements, found by streaming it, as JAX expands an "
    "in-memory one (a traced one is JAX's NonConcreteBooleanIndexError)",
)
def _disk_boolean_masks(hooks: Hooks) -> None:
    is_hi, positions = hooks.is_hi, hooks.mask_positions
    original = _numpy_indexing.NDIndexer.from_raw_indices  # a classmethod, bound
    if positions is None or getattr(original, "_jask_original", None):
        return

    def from_raw_indices(cls, indices, shape):
        indices = _numpy_indexing.eliminate_deprecated_list_indexing(indices)
        if any(is_hi(i) and i.dtype == np.bool_ for i in indices):
            indices = positions(tuple(shape), indices)
        return original.__func__(cls, indices, shape)

    from_raw_indices._jask_original = original
    _numpy_indexing.NDIndexer.from_raw_indices = classmethod(from_raw_indices)


@_patch(
    "disk_mask_updates",
    "jax._src.ops.scatter._scatter_update (x.at[mask].set, add, subtract, multiply, min, max)",
    "a scatter at a mask's positions into a DiskArray passes over it once per block of "
    "positions; where the mask covers its leading axes the update is one streamed select "
    "(jnp.where of the mask, the combined values and x), the same values and gradients",
)
def _disk_mask_updates(hooks: Hooks) -> None:
    is_hi, update = hooks.is_hi, hooks.masked_update
    original = _scatter._scatter_update
    if update is None or getattr(original, "_jask_original", None):
        return
    combines = {
        jax.lax.scatter: "set",
        jax.lax.scatter_add: "add",
        jax.lax.scatter_sub: "sub",
        jax.lax.scatter_mul: "mul",
        jax.lax.scatter_min: "min",
        jax.lax.scatter_max: "max",
    }

    @functools.wraps(original)
    def _scatter_update(x, idx, y, scatter_op, *args, **kwargs):
        combine = combines.get(scatter_op)
        if combine is not None and is_hi(x) and kwargs.get("out_sharding") is None:
            mode = kwargs.get("mode", args[2] if len(args) > 2 else None)
            _slicing.GatherScatterMode.from_any(mode)  # JAX's error for a mode it has not
            out = update(x, idx, y, combine)
            if out is not None and not _jax_dtypes.safe_to_cast(y, x):  # _scatter_impl's
                warnings.warn(
                    "scatter inputs have incompatible types: cannot safely cast value from "
                    f"dtype={jax.numpy.result_type(y)} to dtype={x.dtype} with "
                    f"jax_numpy_dtype_promotion={jax.config.jax_numpy_dtype_promotion}. In "
                    "future JAX releases this will result in an error.",
                    FutureWarning,
                    stacklevel=2,
                )
            if out is not None:
                return out
        return original(x, idx, y, scatter_op, *args, **kwargs)

    _scatter_update._jask_original = original
    _scatter._scatter_update = _scatter_update


def _as_stated_kinds(op, args, avals, hooks: Hooks) -> list:
    """The operands of a Jask op, each moved to the kind (DiskArray or in memory) of the type
    the op was built for. A jaxpr traced for one kind may be evaluated on the other: a
    library that traces a loop body once (equinox's while loops) and runs it again after
    the carry rule moved its carry, or vmap, whose batched values may take another kind by
    their size than one element did."""
    stated = getattr(op, "in_avals", None)
    if not isinstance(stated, tuple) or len(stated) != len(args):
        return list(args)
    moved = []
    for x, aval, want in zip(args, avals, stated):
        same = tuple(aval.shape) == tuple(want.shape) and aval.dtype == want.dtype
        if same and isinstance(want, hooks.hi_type) and isinstance(aval, ShapedArray):
            x = hooks.to_disk(x)
        elif same and isinstance(want, ShapedArray) and isinstance(aval, hooks.hi_type):
            x = hooks.to_memory(x, f"an in-memory operand of {op}")
        moved.append(x)
    return moved


HIGHER_ORDER_PRIMITIVES = frozenset(
    {
        "jit",
        "closed_call",
        "core_call",
        "custom_jvp_call",
        "custom_vjp_call",
        "custom_lin",
        "checkpoint",
        "remat",
        "scan",
        "while",
        "cond",
        "shard_map",
        "custom_transpose_call",
        "linear_call",
    }
)
"""Primitives whose operands flow into a body JAX traces: the primitives inside reach Jask."""


def lax_primitive_names() -> list[str]:
    """The names of every primitive defined in jax.lax's modules (and stop_gradient's), sorted."""
    names = set(_lax_primitives())
    for module in (_ad_util, _ad_checkpoint, _custom_derivatives, _debugging, _pjit):
        names.update(v.name for v in vars(module).values() if isinstance(v, _core.Primitive))
    return sorted(names)


@functools.cache
def _lax_primitives() -> dict:
    """Name -> primitive, of every primitive jax.lax's own modules define."""
    return {
        v.name: v
        for module in _lax_modules(_lax_package)
        for v in vars(module).values()
        if isinstance(v, _core.Primitive)
    }


@functools.cache
def _lax_defined_names() -> frozenset:
    """The primitives jax.lax's own modules define (not the call primitives JAX's transformations
    make, such as call_hi_primitive_linearized or remat, which run their bodies)."""
    return frozenset(set(_lax_primitives()) - HIGHER_ORDER_PRIMITIVES)


def _lax_modules(package):
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        try:
            yield importlib.import_module(info.name)
        except ImportError:  # a backend-specific module (GPU, TPU)
            continue


@_patch(
    "vjp_in_memory_cotangents",
    "jax._src.api._vjp3_bwd",
    "jax.vjp's pullback checks each cotangent against its output's type; an in-memory cotangent "
    "of a DiskArray output (jax.jacrev's basis) is written to a DiskArray first",
)
def _accept_in_memory_cotangents(hooks: Hooks) -> None:
    hi_type, is_hi, to_disk = hooks.hi_type, hooks.is_hi, hooks.to_disk
    original = _api._vjp3_bwd
    if getattr(original, "_jask_original", None):
        return

    @functools.wraps(original)
    def vjp3_bwd(in_tree, out_tree, out_known, jaxpr, out_primal_avals, residuals, accums, ct):
        leaves, treedef = jax.tree_util.tree_flatten(ct, is_leaf=lambda x: isinstance(x, Zero))
        if len(leaves) == len(out_primal_avals):
            leaves = [
                to_disk(c)
                if isinstance(aval, hi_type) and not isinstance(c, Zero) and not is_hi(c)
                else c
                for c, aval in zip(leaves, out_primal_avals)
            ]
            ct = jax.tree_util.tree_unflatten(treedef, leaves)
        return original(
            in_tree, out_tree, out_known, jaxpr, out_primal_avals, residuals, accums, ct
        )

    vjp3_bwd._jask_original = original
    _api._vjp3_bwd = vjp3_bwd


@_patch(
    "accumulate_in_memory_cotangents",
    "jax._src.interpreters.ad.ValAccum.accum",
    "the backward pass checks each cotangent against its value's type; an in-memory cotangent "
    "of a DiskArray (a transpose rule of JAX's own, such as custom_linear_solve's, meeting one) "
    "is written to a DiskArray first, and a DiskArray cotangent of an in-memory value (a Jask "
    "op's backward rule for an in-memory operand of a DiskArray's shape) read into memory",
)
def _accumulate_in_memory_cotangents(hooks: Hooks) -> None:
    hi_type, is_hi = hooks.hi_type, hooks.is_hi
    to_disk, to_memory = hooks.to_disk, hooks.to_memory
    original = _ad.ValAccum.accum
    if getattr(original, "_jask_original", None):
        return

    @functools.wraps(original)
    def accum(self, x):
        if (
            x is not None
            and not isinstance(x, Zero)
            and tuple(np.shape(x)) == tuple(self.aval.shape)
        ):
            if isinstance(self.aval, hi_type) and not is_hi(x):
                x = to_disk(x)
            elif isinstance(self.aval, ShapedArray) and is_hi(x):
                x = to_memory(x, "a cotangent of an in-memory array")
        return original(self, x)

    accum._jask_original = original
    _ad.ValAccum.accum = accum


@_patch(
    "custom_jvp_disk_tangents",
    "jax._src.interpreters.ad.JVPTrace.process_custom_jvp_call, "
    "jax._src.custom_derivatives._flatten_jvp and _flatten_bwd",
    "a custom_jvp rule gets a DiskArray's tangent as a DiskArray (jax.jvp takes in-memory ones "
    "for DiskArrays), and its tangents must have its primal outputs' types: one in memory for a "
    "DiskArray primal, or the reverse (Jask's size rules give each result its kind), is moved "
    "to the primal's kind; so is a custom_vjp rule's cotangent, to its primal input's kind",
)
def _custom_jvp_disk_tangents(hooks: Hooks) -> None:
    is_hi, to_disk, to_memory = hooks.is_hi, hooks.to_disk, hooks.to_memory
    original_call = _ad.JVPTrace.process_custom_jvp_call
    original_flatten = _custom_derivatives._flatten_jvp
    original_flatten_bwd = _custom_derivatives._flatten_bwd
    if getattr(original_call, "_jask_original", None):
        return

    @functools.wraps(original_call)
    def process_custom_jvp_call(self, primitive, fun, jvp, tracers, /, **params):
        moved = []
        for x in tracers:
            if isinstance(x, _ad.JVPTracer) and x._trace is self:
                # a tangent lives at the trace below this one (writing it at this one would
                # make it a JVPTracer of its own trace)
                with _core.set_current_trace(self.parent_trace):
                    tangent = _kind_of(
                        x.primal, x.tangent, is_hi, to_disk, to_memory, disk_only=True
                    )
                if tangent is not x.tangent:
                    x = _ad.JVPTracer(self, x.primal, tangent)
            moved.append(x)
        return original_call(self, primitive, fun, jvp, moved, **params)

    like_primals = _lu.transformation2(
        functools.partial(_tangents_like_primals, is_hi, to_disk, to_memory)
    )

    @functools.wraps(original_flatten)
    def flatten_jvp(jvp, *args, **kwargs):
        return original_flatten(like_primals(jvp), *args, **kwargs)

    cts_like_primals = _lu.transformation2(
        functools.partial(_cotangents_like_primals, hooks.hi_type, is_hi, to_disk, to_memory)
    )

    @functools.wraps(original_flatten_bwd)
    def flatten_bwd(bwd, in_tree, in_avals, out_trees):
        return original_flatten_bwd(
            cts_like_primals(bwd, in_tree, in_avals), in_tree, in_avals, out_trees
        )

    process_custom_jvp_call._jask_original = original_call
    flatten_jvp._jask_original = original_flatten
    flatten_bwd._jask_original = original_flatten_bwd
    _ad.JVPTrace.process_custom_jvp_call = process_custom_jvp_call
    _custom_derivatives._flatten_jvp = flatten_jvp
    _custom_derivatives._flatten_bwd = flatten_bwd


def _kind_of(primal, tangent, is_hi, to_disk, to_memory, disk_only=False):
    """`tangent` as a DiskArray where `primal` is one, in memory where it is not (only the
    former where `disk_only`); anything else (a symbolic zero, another shape or dtype) as it
    is."""
    arrays = (jax.Array, np.ndarray, Tracer)
    if not (isinstance(tangent, arrays) and isinstance(primal, arrays)):
        return tangent
    if is_hi(primal) == is_hi(tangent) or np.shape(primal) != np.shape(tangent):
        return tangent
    if np.dtype(primal.dtype) != np.dtype(tangent.dtype):
        return tangent
    if is_hi(primal):
        return to_disk(tangent)
    return tangent if disk_only else to_memory(tangent, "a custom_jvp rule's tangent")


def _tangents_like_primals(is_hi, to_disk, to_memory, f, *args):
    """A custom_jvp rule `f` whose (primals, tangents) pair has each tangent of its primal's
    kind; what JAX refuses anyway (another tree, shape or dtype) is left for JAX's error."""
    pair = f(*args)
    if not isinstance(pair, (list, tuple)) or len(pair) != 2:
        return pair
    primals, tangents = pair
    p_leaves, p_tree = jax.tree_util.tree_flatten(primals)
    t_leaves, t_tree = jax.tree_util.tree_flatten(tangents)
    if p_tree != t_tree:
        return pair
    moved = [_kind_of(p, t, is_hi, to_disk, to_memory) for p, t in zip(p_leaves, t_leaves)]
    return type(pair)((primals, jax.tree_util.tree_unflatten(t_tree, moved)))


def _cotangents_like_primals(hi_type, is_hi, to_disk, to_memory, f, in_tree, in_avals, *args):
    """A custom_vjp rule `f` whose cotangents each have the kind of the primal input they
    belong to (a rule batched by vmap, or written for jax.Arrays, may give a DiskArray's in
    memory or the reverse); what JAX refuses anyway (another tree, shape or dtype) is left
    for JAX's error."""
    cts = f(*args)
    if isinstance(cts, list):
        cts = tuple(cts)
    # each leaf's place in the flat inputs, as JAX matches the cotangents (a None for a
    # subtree: no cotangents there)
    places = jax.tree_util.tree_unflatten(in_tree, range(in_tree.num_leaves))

    def move(ct, place):
        if ct is None or not isinstance(place, int):
            return ct
        return _cotangent_kind(ct, in_avals[place], hi_type, is_hi, to_disk, to_memory)

    try:
        return jax.tree_util.tree_map(move, cts, places, is_leaf=lambda x: x is None)
    except (ValueError, TypeError):
        return cts


def _cotangent_kind(ct, aval, hi_type, is_hi, to_disk, to_memory):
    if not isinstance(ct, (jax.Array, np.ndarray, Tracer)):
        return ct
    if np.shape(ct) != tuple(aval.shape) or np.dtype(ct.dtype) != np.dtype(aval.dtype):
        return ct
    if isinstance(aval, hi_type) and not is_hi(ct):
        return to_disk(ct)
    if isinstance(aval, ShapedArray) and is_hi(ct):
        return to_memory(ct, "a custom_vjp rule's cotangent")
    return ct


# -- the jax.Array interface of a hijax type ---------------------------------------------


def install_array_methods(array_cls: type, aval_cls: type, keep=frozenset()) -> None:
    """Gives `array_cls` (concrete values) and `aval_cls` (their type, which tracers forward
    to) jax.Array's operators, methods and properties, as jax.numpy defines them for its own
    arrays, except the names in `keep` (the array class's own) and those `aval_cls` defines."""
    own = set(vars(aval_cls))

    def install(array_name, aval_name, array_value, aval_value):
        if array_name not in keep:
            setattr(array_cls, array_name, array_value)
        if aval_name not in own:
            setattr(aval_cls, aval_name, aval_value)

    for name, function in _array_methods._array_operators.items():
        install(f"__{name}__", f"_{name}", function, staticmethod(function))
    for name, method in _array_methods._array_methods.items():
        install(name, name, method, aval_method(method))
    for name, prop in _array_methods._array_properties.items():
        install(name, name, property(prop), aval_property(prop))


def default_sharding(ndim: int):
    """The sharding JAX gives an array outside any mesh (what ShapedArray.sharding holds)."""
    return _core.ShapedArray((1,) * ndim, "float32").sharding


FLOAT0 = _jax_dtypes.float0
"""The dtype of the tangents of integer and boolean values (no storage)."""


def has_float0_tangents(dtype) -> bool:
    """True for the dtypes JAX gives float0 tangents (integers, booleans): no derivative."""
    return _core.primal_dtype_to_tangent_dtype(np.dtype(dtype)) == FLOAT0


EMPTY_MAT = _core.ShapedArray((), "float32").mat
"""An array's manual-axis type outside shard_map (ShapedArray.mat)."""
DEVICE_MEMORY = _core.ShapedArray((), "float32").memory_space


# -- flax ---------------------------------------------------------------------------

PINNED_FLAX = "0.12.8"


@_patch(
    "flax_msgpack_budget",
    "flax.serialization.msgpack_serialize",
    "msgpack reads every array leaf into memory; DiskArray leaves are read within the memory "
    "budget, and a larger one is a ValueError naming its size and the budget",
    library="flax",
    version=PINNED_FLAX,
)
def _budget_flax_msgpack(hooks: Hooks) -> None:
    hooks.when_imported(
        "flax.serialization", lambda module: _wrap_msgpack_serialize(module, hooks.in_memory_tree)
    )


def _wrap_msgpack_serialize(serialization, in_memory_tree) -> None:
    original = serialization.msgpack_serialize
    if getattr(original, "_jask_original", None):
        return

    @functools.wraps(original)
    def msgpack_serialize(pytree, in_place: bool = False):
        tree = in_memory_tree(pytree, "flax.serialization.msgpack_serialize")
        return original(tree, in_place=True)  # in_memory_tree made new containers

    msgpack_serialize._jask_original = original
    serialization.msgpack_serialize = msgpack_serialize


# -- lineax ---------------------------------------------------------------------------

PINNED_LINEAX = "0.1.1"


@_patch(
    "lineax_disk_structs",
    "lineax._solve._to_struct",
    "linear_solve_p's abstract evaluation refuses every abstract value but a ShapedArray, so an "
    "operator closing over a DiskArray (a FunctionLinearOperator of `a @ v`) could not be "
    "solved; a DiskArray's type gives the ShapeDtypeStruct of its shape and dtype (the solve's "
    "results are in memory; inline_library_primitives gives the staged solve its value)",
    library="lineax",
    version=PINNED_LINEAX,
)
def _lineax_disk_structs(hooks: Hooks) -> None:
    hooks.when_imported("lineax._solve", lambda module: _wrap_to_struct(module, hooks.hi_type))


def _wrap_to_struct(solve_module, hi_type) -> None:
    original = solve_module._to_struct
    if getattr(original, "_jask_original", None):
        return

    @functools.wraps(original)
    def to_struct(x):
        if isinstance(x, hi_type):
            return jax.ShapeDtypeStruct(x.shape, x.dtype)
        return original(x)

    to_struct._jask_original = original
    solve_module._to_struct = to_struct


# -- jax.checkpoint of hijax values ---------------------------------------------
#
# At 0.10.2 remat's lowering returns its outputs in their low-level form
# (int32 handles) where the enclosing program expects hijax values. Raise
# them back, as every other hijax lowering does.


@_patch(
    "remat_outputs",
    "jax._src.ad_checkpoint.remat_p.to_lojax",
    "jax.checkpoint's lowering returns hijax outputs as their int32 handles; raise them back",
)
def _raise_remat_outputs(hooks: Hooks) -> None:
    original = _ad_checkpoint.remat_p.to_lojax
    if getattr(original, "_jask_original", None):
        return

    @functools.wraps(original)
    def to_lojax(*hi_args, jaxpr, **params):
        lo_outs = iter(original(*hi_args, jaxpr=jaxpr, **params))
        outs = []
        for aval in jaxpr.out_avals:
            if getattr(aval, "is_high", False):
                outs.append(aval.raise_val(*[next(lo_outs) for _ in aval.lo_ty()]))
            else:
                outs.append(next(lo_outs))
        return outs

    to_lojax._jask_original = original
    _ad_checkpoint.remat_p.to_lojax = to_lojax


# -- the memory XLA holds for a program Jask lowers ------------------------------------------


@_patch(
    "compiled_memory",
    "jax._src.interpreters.pxla._cached_compilation",
    "the budget counts the memory XLA holds while a program that calls Jask's engine runs, "
    "known from its compiled memory analysis",
)
def _report_compiled_memory(hooks: Hooks) -> None:
    original = _pxla._cached_compilation
    if getattr(original, "_jask_original", None):
        return

    @functools.wraps(original)
    def cached_compilation(computation, name, *args, **kwargs):
        executable = original(computation, name, *args, **kwargs)
        # Constants elided: the text is only searched for the engine's FFI targets.
        text = _module_text(computation)
        calls = collections.Counter(int(n) for n in _PROGRAM_SLOT_ATTRIBUTE.findall(text))
        if calls:
            if _REPEATING_OPS.search(text):
                calls = {slot: 0 for slot in calls}
            stats = executable.get_compiled_memory_stats()
            hooks.program_compiled(
                dict(calls), stats.temp_size_in_bytes + stats.output_size_in_bytes
            )
        return executable

    cached_compilation._jask_original = original
    _pxla._cached_compilation = cached_compilation


# The attribute Op._lower gives every engine call (jask_program = <slot> : i64).
_PROGRAM_SLOT_ATTRIBUTE = re.compile(r"\bjask_program = (\d+)")
# Ops that may run a call written once in the text more or fewer times than once.
_REPEATING_OPS = re.compile(r"\bstablehlo\.(while|case|if)\b|\bcall @")


def _module_text(computation) -> str:
    # Constants elided: the text is only searched for the engine calls' attributes.
    return computation.operation.get_asm(large_elements_limit=16)
