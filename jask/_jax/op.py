"""The base class of every Jask op, and how ops reach the engine.

An op file subclasses `Op` and states: the output type, the engine kernel and
its parameters (named fields, as the kernel's schema in the engine declares
them), and the backward rule written with other Jask ops.
Everything JAX needs (eager evaluation, lowering to an XLA FFI call under
jit, the VJP plumbing) is derived here once.
"""

from __future__ import annotations

import enum
import functools
import inspect
from collections.abc import Callable
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.core.primitives import convert_element_type_p

from .. import _engine, _progress, _runtime
from . import compat
from .diskarray import DiskArray, DiskArrayTy, from_in_memory, with_weak_type

# How a kernel's result comes back, per Op.result:
#   "array"     a new DiskArray (an int32 handle)
#   "scalar"    a 0-d in-memory value (a reduction)
#   "in_memory" an in-memory jax.Array of the op's output type (materialize, row slices)
#   "arrays"    a tuple of new DiskArrays (a fused program with several outputs)
#   "group"     a tuple of new DiskArrays and 0-d values (a row group, lowering/row_groups.py)
# Operands reach the engine as handles (DiskArrays), scalars (0-d) and
# in-memory buffers (other in-memory arrays), in that order; parameters as the
# kernel's named fields: XLA FFI attributes under jit, a dict eagerly.
#
# Each result kind's engine entry points: the XLA FFI target (jitted programs) and the
# nanobind function (eager calls), one per kind in the engine too.
_ENGINE_CALLS = {
    "array": ("jask_array_op", "array_op"),
    "arrays": ("jask_arrays_op", "arrays_op"),
    "scalar": ("jask_scalar_op", "scalar_op"),
    "in_memory": ("jask_in_memory_op", "in_memory_op"),
    "group": ("jask_group_op", "group_op"),
}
RELEASE_TARGET = "jask_release"


def _ffi_target(result: str) -> str:
    return _ENGINE_CALLS[result][0]


@functools.cache  # wrapped once per kind of result, not per call
def _eager_call(result: str):
    return _progress.settled(getattr(_engine, _ENGINE_CALLS[result][1]))


def _attribute(value):
    """A parameter as an XLA FFI attribute: int64 scalars and arrays, bools, strings."""
    if isinstance(value, (bool, np.bool_)):
        return np.bool_(value)
    if isinstance(value, (int, np.integer)):
        return np.int64(value)
    if isinstance(value, str):
        return value
    return np.asarray(value, np.int64).reshape(-1)


def _eager_value(value):
    """The same parameter as the engine's eager entry takes it."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, str):
        return value
    return tuple(int(v) for v in value)


class Role(enum.Enum):
    """What an op is to the jit-time passes (jask/lowering): which blocks of its operands
    each block of its result needs, and so what it may be merged with."""

    OTHER = "other"
    """Anything else: the passes leave it alone."""
    ELEMENTWISE = "elementwise"
    """Each element from the same element of each operand (scalars and NumPy broadcasting
    allowed): one engine expression, `Op.expression()`."""
    ELEMENTWISE_MULTI = "elementwise_multi"
    """An elementwise expression that stores several of its instructions' results."""
    BROADCAST = "broadcast"
    """One scalar written to every element (`Op.expression()` copies it)."""
    REDUCTION = "reduction"
    """A full reduction (sum, max, min, prod) of an elementwise expression, `Op.expression()`."""
    MATMUL = "matmul"
    """A matrix product: row-local in its left operand (or in both, for a.T @ b). Its params
    `trans_a` and `trans_b` say which operand it reads transposed (the last two axes)."""
    TRANSPOSE = "transpose"
    """A permutation of its operand's axes, param `perm`: a product may read the operand
    instead, transposed."""


class Op(compat.VJPHiPrimitive):
    """One Jask op applied to operands of given types, with given static params.

    Subclasses set `name` and `kernel`, implement `out_type`, declare their derivative, and
    may override `kernel_params`, `result` and `role`.

    The derivative is declared once, in the first of these forms that fits; `vjp` (reverse
    mode), `tangent` (forward mode: jvp, linearize, checkpoint) and the transpose of a tangent
    computation all follow from it:
      zero_derivative = True   the output is piecewise constant in the operands (sign, ==).
      linear = True            linear in its operands jointly (a tuple: in those operands; the
                               others are indices or conditions), with `transpose_rule`; the
                               tangent is the op applied to the tangents.
      bilinear = True          linear in each operand separately (a product), with
                               `transpose_rule`; the tangent is the sum over operands of the op
                               with that operand's tangent in its place.
      slope / slopes           d out / d operand (a family combines it with a tangent in
                               `tangent_term`, with a cotangent in `cotangent_term`).
    Only an op whose two rules really differ writes `vjp` and `tangent` itself.
    """

    name: ClassVar[str]
    kernel: ClassVar[str]
    result: ClassVar[str] = "array"
    zero_derivative: ClassVar[bool] = False
    linear: ClassVar[bool | tuple[int, ...]] = False
    bilinear: ClassVar[bool] = False
    role: ClassVar[Role] = Role.OTHER
    scalars: ClassVar[str] = "double"
    """How the kernel takes 0-d in-memory operands: "double" as scalars (the engine's scalars
    are doubles: start indices, a fill value); "exact" as scalars where a double holds every
    value of their dtype, else (int64, uint64, complex) as one-element buffers of their bytes
    (the elementwise programs, whose encoding says which: ops._elementwise.encode); "bytes"
    always as buffers (a kernel that copies them)."""
    # The jax.lax primitives (by name: "sin", "reduce_sum") this op implements: binding one of
    # them to a DiskArray (or its tracer) applies this op, through `from_primitive`.
    primitives: ClassVar[tuple[str, ...]] = ()

    def __init__(self, *in_avals, **params):
        """`params` may hold `weak_type`, the weak_type flag of the op's results (see
        `weak_result`); the others are the op's own, passed to `out_type`."""
        self.in_avals = tuple(in_avals)
        self.params = params
        stated = {k: v for k, v in params.items() if k != "weak_type"}
        out = self.out_type(*in_avals, **stated)
        weak = params.get("weak_type")
        weak = self.weak_result(out, *in_avals) if weak is None else bool(weak)
        self.out_aval = _with_weak_type(out, weak)
        super().__init__()

    # -- what an op file states -------------------------------------------
    def out_type(self, *in_avals, **params):
        raise NotImplementedError(f"jask.{self.name} must state its output type")

    @staticmethod
    def weak_result(out, *in_avals) -> bool:
        """The weak_type flag of the results (of type `out`) when no `weak_type` param says:
        JAX's rule for most primitives, weak when every operand is, counting the operands of
        the result's dtype where there are any (a selection's indices, a where's condition do
        not decide it). Never weak without a DiskArray operand: an array made from in-memory
        values alone (from a file or NumPy) is not. A primitive whose rule differs gets its
        results' flags from JAX's abstract evaluation (jask/_jax/primitives.py)."""
        if not any(isinstance(a, DiskArrayTy) for a in in_avals):
            return False
        first = (out or (None,))[0] if isinstance(out, tuple) else out
        deciding = [a for a in in_avals if a.dtype == first.dtype] or in_avals
        return all(getattr(a, "weak_type", False) for a in deciding)

    @classmethod
    def from_primitive(cls, *operands, **params):
        """This op for a bind of one of its `primitives` to `operands` with the primitive's
        `params`. Default: the op of the operands (the primitive's params, such as an accuracy
        hint, change nothing Jask computes); ops whose params matter override this."""
        return apply(cls, *operands)

    def kernel_params(self) -> dict[str, Any]:
        """The kernel's parameters by field name: ints, bools, strings, tuples of ints."""
        return {}

    def transpose_rule(self, ct, *operands, needs=None):
        """Linear and bilinear ops: the cotangent of the linear operand given the output's (the
        op's transpose; a rule linear in an operand never reads that operand's value). An op
        linear in several operands gets `needs` and returns one cotangent per operand (None
        where not needed)."""
        raise NotImplementedError(f"jax.grad of jask.{self.name} needs a transpose rule")

    def slope(self, x, out):
        """Ops of one operand: d out / d x, written with Jask ops (None: no derivative)."""
        raise NotImplementedError(
            f"jax.grad of jask.{self.name} needs a derivative rule "
            f"(a slope, a transpose rule, or vjp and tangent)"
        )

    def slopes(self, *operands_and_out):
        """d out / d operand, one per operand (None: no derivative); `out` comes last. Each is
        a value, a number (1 and -1 cost no op), or a zero-argument function for a slope worth
        computing only when its operand needs a derivative."""
        *operands, out = operands_and_out
        return (self.slope(*operands, out),)

    def tangent_term(self, t, slope):
        """One operand's share of the output's tangent (families say how a slope applies)."""
        raise NotImplementedError(f"jax.jvp of jask.{self.name} needs a forward rule")

    def cotangent_term(self, ct, slope, operand):
        """The operand's cotangent given the output's (families say how a slope applies)."""
        raise NotImplementedError(f"jax.grad of jask.{self.name} needs a backward rule")

    def zero_tangent(self, aval):
        """A zero tangent for an operand of type `aval` (the op applied to tangents needs one
        for each operand without a tangent)."""
        return _zeros_like(aval)

    def tangent_like(self, t, out):
        """A sum of tangent terms as the output's tangent (a family may broadcast it)."""
        return t

    # -- derived: the derivative rules -----------------------------------------
    def linear_operands(self) -> tuple[int, ...]:
        if self.linear is True or self.bilinear:
            return tuple(range(len(self.in_avals)))
        return tuple(self.linear) if self.linear else ()

    def expression(self):
        """The engine expression (an `ops._elementwise.Expression`) of an op whose role is
        ELEMENTWISE, ELEMENTWISE_MULTI, BROADCAST or REDUCTION: what the fusion passes splice."""
        raise NotImplementedError(f"jask.{self.name} (role {self.role.name}) has no expression")

    def vjp(self, ct, *operands, out, needs):
        """Cotangents of the operands, one per operand (None where not needed)."""
        if self.zero_derivative:
            return (None,) * len(operands)
        if self.linear or self.bilinear:
            return self._transposed(ct, operands, needs)
        slopes = self.slopes(*operands, out)
        return tuple(
            self.cotangent_term(ct, _resolved(s), x) if need and s is not None else None
            for s, x, need in zip(slopes, operands, needs)
        )

    def _transposed(self, ct, operands, needs):
        linear = self.linear_operands()
        if len(linear) == 1 and not _rule_takes_needs(type(self)):
            cts = [None] * len(operands)
            if needs[linear[0]]:
                cts[linear[0]] = self.transpose_rule(ct, *operands)
            return tuple(cts)
        needs = tuple(n and i in linear for i, n in enumerate(needs))
        return tuple(self.transpose_rule(ct, *operands, needs=needs))

    def tangent(self, out, operands, tangents):
        """The output's tangent given the operands' (None for a zero tangent); None if zero."""
        if self.zero_derivative:
            return None
        if self.bilinear:
            return add_terms(
                *(self._rebound(operands, {i: t}) for i, t in enumerate(tangents) if t is not None)
            )
        if self.linear:
            linear = self.linear_operands()
            if all(tangents[i] is None for i in linear):
                return None
            filled = {
                i: self.zero_tangent(self.in_avals[i]) if tangents[i] is None else tangents[i]
                for i in linear
            }
            if not any(isinstance(filled.get(i, x), DiskArray) for i, x in enumerate(operands)):
                # the DiskArray operands' tangents all zero or in memory (a family's zero may be
                # a broadcast scalar): one written out, so the op gives its output's type
                disk = [i for i in linear if isinstance(self.in_avals[i], DiskArrayTy)]
                if disk and tangents[disk[0]] is None:
                    filled[disk[0]] = _zeros_like(self.in_avals[disk[0]])
            return self._rebound(operands, filled)
        slopes = self.slopes(*operands, out)
        terms = [
            self.tangent_term(t, _resolved(s))
            for t, s in zip(tangents, slopes)
            if t is not None and s is not None
        ]
        total = add_terms(*terms)
        return None if total is None else self.tangent_like(total, out)

    def _rebound(self, operands, replaced):
        """This op (same params) applied to `operands` with those at `replaced`'s keys replaced."""
        args = [replaced.get(i, x) for i, x in enumerate(operands)]
        return apply(type(self), *args, **self.params)

    # -- derived: evaluation ------------------------------------------------
    def expand(self, *operands):
        # Concrete operands inside a lowering (constants) still go into the
        # program: the op must run when the program runs, not now. A program
        # may be the process's first use of Jask (arrays opened, none made).
        _runtime.ensure_scratch()
        if compat.is_eager() and not any(is_traced(x) for x in operands):
            return self._run_eagerly(operands)
        return self._lower(operands)

    def _in_memory(self, operands) -> tuple[list, list]:
        """The in-memory operands the kernel takes as scalars, and those it takes as buffers,
        each with its type (see `scalars`)."""
        scalars, buffers = [], []
        for x, aval in zip(operands, self.in_avals):
            if isinstance(x, DiskArray):
                continue
            as_scalar = not aval.shape and (
                self.scalars == "double" or (self.scalars == "exact" and double_holds(aval.dtype))
            )
            (scalars if as_scalar else buffers).append((x, aval))
        return scalars, buffers

    def _run_eagerly(self, operands):
        handles = [x.handle for x in operands if isinstance(x, DiskArray)]
        in_scalars, in_buffers = self._in_memory(operands)
        scalars = [float(np.asarray(x)) for x, _ in in_scalars]
        buffers = [
            np.ascontiguousarray(np.asarray(x, aval.dtype)).reshape(-1).view(np.uint8)
            for x, aval in in_buffers
        ]
        params = {k: _eager_value(v) for k, v in self.kernel_params().items()}
        call = _eager_call(self.result)
        if self.result == "array":
            h = call(self.kernel, handles, scalars, buffers, params)
            return DiskArray(self.out_aval, h)
        if self.result == "arrays":
            hs = call(self.kernel, handles, scalars, buffers, params)
            return tuple(DiskArray(aval, h) for aval, h in zip(self.out_aval, hs))
        if self.result == "group":
            hs, values = call(self.kernel, handles, scalars, buffers, params)
            return _group_results(self.out_aval, hs, values)
        if self.result == "scalar":
            value = call(self.kernel, handles, scalars, buffers, params)
            return weakly_typed(jnp.asarray(value, self.out_aval.dtype), self.out_aval.weak_type)
        out = np.empty(self.out_aval.shape, self.out_aval.dtype)
        call(self.kernel, handles, scalars, buffers, params, out.reshape(-1).view(np.uint8))
        return weakly_typed(jnp.asarray(out), self.out_aval.weak_type)

    def _lower(self, operands):
        handles = [x._lowered_handle() for x in operands if isinstance(x, DiskArray)]
        # the FFI call takes 0-d operands as scalars, the others as buffers
        in_scalars, in_buffers = self._in_memory(operands)
        in_memory = [jnp.asarray(x) for x, _ in in_scalars] + [
            jnp.asarray(x, aval.dtype).reshape(aval.shape or (1,)) for x, aval in in_buffers
        ]
        out = self.out_aval
        if self.result == "array":
            result_type = jax.ShapeDtypeStruct((), jnp.int32)
        elif self.result == "arrays":
            result_type = jax.ShapeDtypeStruct((len(out),), jnp.int32)
        elif self.result == "group":  # handles, then the 0-d values (at least one slot each)
            n_arrays = sum(isinstance(a, DiskArrayTy) for a in out)
            values = [a for a in out if not isinstance(a, DiskArrayTy)]
            result_type = (
                jax.ShapeDtypeStruct((max(1, n_arrays),), jnp.int32),
                jax.ShapeDtypeStruct(
                    (max(1, len(values)),), values[0].dtype if values else jnp.float32
                ),
            )
        else:
            result_type = jax.ShapeDtypeStruct(out.shape, out.dtype)
        call = jax.ffi.ffi_call(_ffi_target(self.result), result_type, has_side_effect=True)
        attributes = {k: _attribute(v) for k, v in self.kernel_params().items()}
        value = call(
            *handles,
            *in_memory,
            kernel=self.kernel,
            num_handles=np.int64(len(handles)),
            jask_program=np.int64(compat.program_slot()),
            **attributes,
        )
        if self.result == "arrays":
            return tuple(DiskArray(aval, value[i]) for i, aval in enumerate(out))
        if self.result == "group":
            return _group_results(out, *value)
        return (
            DiskArray(out, value) if self.result == "array" else weakly_typed(value, out.weak_type)
        )

    # -- derived: reverse mode ----------------------------------------------
    def vjp_fwd(self, nzs_in, *operands):
        out = self(*operands)
        needs = tuple(
            bool(nz) and not _has_no_tangent(aval) for nz, aval in zip(nzs_in, self.in_avals)
        )
        return out, (needs, operands, out)

    def vjp_bwd_retval(self, res, ct):
        needs, operands, out = res
        if isinstance(ct, compat.Zero):
            return tuple(None for _ in operands)
        ct = _cotangent_like(ct, self.out_aval)
        cts = self.vjp(ct, *operands, out=out, needs=needs)
        return tuple(
            _typed_as(c, aval) if need else None for c, need, aval in zip(cts, needs, self.in_avals)
        )

    def transpose(self, out_ct, *maybe_accums):
        # Used when JAX transposes a tangent computation (jax.checkpoint, linearize):
        # the backward rule with the linear operands' types in place of their values
        # (a rule linear in an operand never reads that operand).
        linear = tuple(compat.is_accumulator(a) for a in maybe_accums)
        if isinstance(out_ct, compat.Zero):
            return
        out_ct = _cotangent_like(out_ct, self.out_aval)
        operands = [aval if lin else a for a, lin, aval in zip(maybe_accums, linear, self.in_avals)]
        cts = self.vjp(out_ct, *operands, out=None, needs=linear)
        for accum, ct, lin, aval in zip(maybe_accums, cts, linear, self.in_avals):
            if lin and ct is not None:
                accum.accum(_typed_as(ct, aval))

    # -- derived: forward mode (jax.jvp, jax.linearize, jax.checkpoint) -------
    def jvp(self, primals, tangents):
        out = self(*primals)
        tangents = [
            None if isinstance(t, compat.Zero) or _has_no_tangent(a) else _tangent_of(t, a)
            for t, a in zip(tangents, self.in_avals)
        ]
        if all(t is None for t in tangents):
            return out, _symbolic_zero(self.out_aval)
        t_out = self.tangent(out, primals, tangents)
        return out, _symbolic_zero(self.out_aval) if t_out is None else t_out

    def batch(self, axis_data, args, dims):
        # the op's batched form on the whole batch (or one fori_loop over it):
        # jask/ops/_batching.py
        if all(d is None for d in dims):  # nothing batched: JAX asks when binding under vmap
            out = self(*args)
            return out, (tuple(None for _ in out) if isinstance(out, tuple) else None)
        if _batch_rule is None:
            raise NotImplementedError(
                f"jax.vmap of jask.{self.name} needs jask's batching rule; "
                f"import jask to install it"
            )
        return _batch_rule(self, axis_data.size, args, dims)

    def lin(self, nzs_in, *primals):
        out = self(*primals)
        return out, (primals, out)

    def linearized(self, residuals, *tangents):
        primals, out = residuals
        tangents = [
            None if isinstance(t, compat.Zero) else _tangent_of(t, a)
            for t, a in zip(tangents, self.in_avals)
        ]
        t_out = None if all(t is None for t in tangents) else self.tangent(out, primals, tangents)
        return _zeros_like(out) if t_out is None else t_out

    def __repr__(self):
        return f"jask.{self.name}{self.params or ''}"


BatchRule = Callable[[Op, int, tuple, tuple], tuple]
"""(op, batch size, operands, their batch axes) -> (results, their batch axes)."""
_batch_rule: BatchRule | None = None


def set_batch_rule(rule: BatchRule) -> None:
    """Installs the vmap rule of every op (jask.ops._batching: it is written with ops)."""
    global _batch_rule
    _batch_rule = rule


def _group_results(out_avals, handles, values):
    """The outputs of a row group in order, from its handles and its 0-d values."""
    results, h, v = [], iter(range(len(handles))), iter(range(len(values)))
    for aval in out_avals:
        if isinstance(aval, DiskArrayTy):
            results.append(DiskArray(aval, handles[next(h)]))
        else:
            results.append(weakly_typed(jnp.asarray(values[next(v)], aval.dtype), aval.weak_type))
    return tuple(results)


def _with_weak_type(aval, weak: bool):
    """A result type (or a tuple of them) with JAX's weak_type flag `weak`."""
    if isinstance(aval, tuple):
        return tuple(_with_weak_type(a, weak) for a in aval)
    return aval.update(weak_type=weak)


def weakly_typed(x, weak: bool):
    """An in-memory value with JAX's weak_type flag `weak` (a conversion to its own dtype, as
    jax.numpy makes one)."""
    if getattr(compat.typeof(x), "weak_type", False) == weak:
        return x
    return convert_element_type_p.bind(x, new_dtype=x.dtype, weak_type=weak, sharding=None)


def _has_no_tangent(aval) -> bool:
    """Boolean and integer values have no derivative (JAX gives them float0 tangents)."""
    return compat.has_float0_tangents(aval.dtype)


@functools.cache
def _rule_takes_needs(op_cls) -> bool:
    """True when the op's transpose rule always returns one cotangent per operand (it requires
    `needs`), even for one operand."""
    needs = inspect.signature(op_cls.transpose_rule).parameters.get("needs")
    return needs is not None and needs.default is inspect.Parameter.empty


def _tangent_of(t, aval):
    """A DiskArray operand's tangent as a DiskArray: JAX may hand an in-memory one (the basis of
    jax.jacfwd, a tangent given to jax.jvp), which is written to a file first, of the operand's
    tangent type (weakly typed where the operand is, as JAX types it)."""
    full = tuple(np.shape(t)) == tuple(aval.shape)
    if isinstance(aval, DiskArrayTy) and not isinstance(t, DiskArray) and full:
        return with_weak_type(from_in_memory(t), aval.weak_type)
    return t


def _cotangent_like(ct, aval):
    """A cotangent of the op's output type: JAX may hand an in-memory one for a DiskArray output
    (where the program's in-memory values meet it: an XLA-computed primitive's transpose), which
    is written to a file first."""
    if isinstance(aval, tuple):
        if not isinstance(ct, (tuple, list)):
            return ct
        return type(ct)(_cotangent_like(c, a) for c, a in zip(ct, aval))
    if isinstance(ct, compat.Zero):
        return ct
    return _tangent_of(ct, aval)


def _typed_as(ct, aval):
    """An operand's cotangent with the weak_type flag of the operand's type, as JAX's rules give
    it (a weak operand's gradient is weak)."""
    if ct is None or isinstance(ct, compat.Zero):
        return ct
    return with_weak_type(ct, getattr(aval, "weak_type", False))


def _symbolic_zero(aval):
    """JAX's symbolic zero tangent for an output of type `aval` (a tuple for several): no
    file of zeros, and what JAX's own rules check for (a stop_gradient's tangent)."""
    if isinstance(aval, tuple):
        return tuple(_symbolic_zero(a) for a in aval)
    return compat.Zero(aval.to_tangent_aval())


def _zeros_like(x):
    """Zeros of the type of `x`, a value or a type."""
    if isinstance(x, DiskArrayTy):
        return x.vspace_zero()
    if isinstance(x, DiskArray):
        return x.aval.vspace_zero()
    return jnp.zeros(x.shape, x.dtype)


def _resolved(slope):
    """A slope given as a function (computed only when needed) evaluated; others as they are."""
    return slope() if callable(slope) else slope


def scaled(t, slope):
    """t * slope with the DiskArray first (two in-memory and DiskArray tracers of one trace have
    no common operator); a slope of 1 or -1 costs no multiply."""
    if isinstance(slope, (int, float)) and slope in (1, -1):
        return t if slope == 1 else -t
    return t * slope if isinstance(t, DiskArray) or not isinstance(slope, DiskArray) else slope * t


def add_terms(*terms):
    """The sum of the tangent terms that are not None (None if all are)."""
    present = [t for t in terms if t is not None]
    if not present:
        return None
    total = present[0]
    for t in present[1:]:
        total = total + t
    return total


def double_holds(dtype) -> bool:
    """Whether a double holds every value of `dtype` exactly (the engine's scalars are doubles):
    every dtype but int64, uint64 and the complex ones."""
    dtype = np.dtype(dtype)
    return dtype.kind not in "iuc" or (dtype.kind in "iu" and dtype.itemsize < 8)


def double_scalar(value):
    """A 0-d in-memory `value` as a scalar operand whose double stands for exactly that value of
    `value`'s dtype (a complex with a +0 imaginary part as its real part; an int64 or uint64
    within 2**53 as it is), or None where there is none: a traced value of such a dtype, or one
    a double does not hold."""
    dtype = np.dtype(value.dtype)
    if double_holds(dtype):
        return value
    if compat.is_tracer(value):
        return None
    v = np.asarray(value)[()]
    if dtype.kind == "c":
        return None if v.imag != 0 or np.signbit(v.imag) else np.asarray(v.real)
    return value if abs(int(v)) <= 2**53 else None


def is_traced(x) -> bool:
    """Whether x (a DiskArray or an in-memory value) is a tracer."""
    if isinstance(x, DiskArray):
        return compat.is_tracer(x._handle)
    return compat.is_tracer(x)


def apply(op_cls: type[Op], *operands, **params):
    """Binds `op_cls` to operands (DiskArrays and in-memory scalars) and runs it."""
    avals = [compat.typeof(x) for x in operands]
    return op_cls(*avals, **params)(*operands)


# -- shared type rules ------------------------------------------------------


def describe(x) -> str:
    """'float32[4,6] DiskArray' style description for error messages."""
    aval = x if isinstance(x, (DiskArrayTy, compat.ShapedArray)) else compat.typeof(x)
    kind = "DiskArray" if isinstance(aval, DiskArrayTy) else "array"
    return f"{aval.dtype.name}[{','.join(map(str, aval.shape))}] {kind}"


def same_type(op_name: str, x: DiskArrayTy, y: DiskArrayTy) -> DiskArrayTy:
    """The output type of an elementwise op on two DiskArrays of one shape and dtype."""
    if x.dtype != y.dtype:
        raise TypeError(
            f"jask.{op_name}: dtypes differ: {describe(x)} and {describe(y)}; "
            f"convert one of them first"
        )
    if x.shape != y.shape:
        raise ValueError(
            f"jask.{op_name}: shapes differ: {describe(x)} and {describe(y)}; "
            f"elementwise ops need equal shapes"
        )
    return x


def scalar_type(op_name: str, s) -> None:
    if not isinstance(s, compat.ShapedArray) or s.shape != ():
        raise TypeError(f"jask.{op_name}: expected a scalar operand, got {describe(s)}")
