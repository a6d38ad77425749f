"""jax.lax loops over DiskArray carries: each iteration frees the carry it replaced.

(And jax.lax.cond, whose branches are registered the same way, so that a program may free a
cond's DiskArray operands and results like a Jask op's.)

A loop's body makes a new file for each DiskArray carry on every iteration. Without help
the program would keep them all until it ends (a 1,000-step scan: 1,000 files and their
descriptors). These rules make the loop the owner of its carries (see
jask/lowering/release.py): the loop starts from a handle of its own for each initial carry
(a view of the caller's array, so the caller's handle is never freed by the loop), and its
body is registered so that the release pass frees each carry after its last reader in the
next iteration. The loop itself then runs as JAX runs it.

The carry rule. JAX requires a loop body (scan, while_loop, fori_loop, map) to return a carry
of the type it took, and every branch of a cond or switch to return the same types. Whether
an operation gives a DiskArray or an in-memory array depends on sizes (a small reduction,
slice or product is in memory; anything with a DiskArray operand may be a DiskArray), so a
body written for jax.Arrays can turn an in-memory carry into a DiskArray of the same shape
and dtype, or back. Such a carry (or branch output) takes one kind, by its size alone:

- in memory when it fits: at most `operands.IN_MEMORY_LIMIT` elements and at most the memory
  budget in bytes (a small carry is not worth a file each iteration);
- a DiskArray otherwise.

The body's new carry is moved to that kind (read into memory, or written to a file) on every
iteration; where the initial carry has the other kind, it is moved too and the body traced
again (once), so the types are the same in every iteration and the loop's result has the
chosen kind. A cond's branches move their outputs the same way. Values and dtypes are those
of the same program on jax.Arrays. Carries whose types already agree are left alone; types
that differ in shape or dtype raise JAX's own error. The mechanism is
jask/_jax/jaxtype_checks.py; `CarryKinds` below is the policy.

Derivatives. jax.grad, jvp and linearize of a scan (fori_loop with a fixed trip count, map)
whose body computes on DiskArrays run the body once per iteration (`_scan_unrolled`), so
each op is differentiated as it is outside a loop: JAX's own scan derivative stacks
residuals per iteration, which a DiskArray residual cannot be.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax.extend.core import primitives as lax_primitives

from .. import _runtime
from .._jax import compat, jaxtype_checks
from .._jax.diskarray import (
    DiskArray,
    DiskArrayTy,
    check_fits_in_memory,
    from_in_memory,
    is_disk_array,
)
from .._jax.op import apply
from .._jax.primitives import rule
from ..lowering.release import register_loop
from ..ops import Reshape, Rows, ToInMemory
from . import operands


@rule("scan")
def scan(*operands, jaxpr, num_consts, num_carry, **params):
    scanned = [
        k
        for k in range(num_consts + num_carry, len(operands))
        if isinstance(compat.typeof(operands[k]), DiskArrayTy)
    ]
    if (
        params["length"]
        and jaxtype_checks.is_differentiating()
        and jaxtype_checks.computes_on(jaxpr, DiskArrayTy)
    ):
        return _scan_unrolled(operands, scanned, jaxpr, num_consts, num_carry, params)
    if scanned:
        return _scan_disk_xs(operands, scanned, jaxpr, num_consts, num_carry, params)
    carries = range(num_consts, num_consts + num_carry)
    carried = [i for i in carries if isinstance(jaxpr.in_avals[i], DiskArrayTy)]
    if carried and register_loop(jaxpr, carried, [i - num_consts for i in carried], carried):
        operands = _own_handles(operands, carried)
    return _bind_as_jax_does(
        lax_primitives.scan_p,
        *operands,
        jaxpr=jaxpr,
        num_consts=num_consts,
        num_carry=num_carry,
        **params,
    )


def _scan_disk_xs(operands, scanned, jaxpr, num_consts, num_carry, params):
    """A scan over DiskArray xs as a scan that reads slice i of each into memory in iteration i.

    The body was traced with each DiskArray's slice as an in-memory array (DiskArrayTy.dec_rank);
    the DiskArrays become constants of a loop that counts its iterations and reads slice
    i (reverse: length - 1 - i) with the engine's row reader, so one slice of each is in
    memory at a time and consecutive reads are read ahead.
    """
    length, reverse, unroll = params["length"], params["reverse"], params["unroll"]
    consts, carry = operands[:num_consts], operands[num_consts : num_consts + num_carry]
    xs = operands[num_consts + num_carry :]
    disk = {k - num_consts - num_carry: operands[k] for k in scanned}
    memory = [x for j, x in enumerate(xs) if j not in disk]

    def body(state, memory_slices):
        i, carry = state
        row = length - 1 - i if reverse else i
        slices = iter(memory_slices)
        x = [_slice(disk[j], row) if j in disk else next(slices) for j in range(len(xs))]
        out = compat.eval_closed_jaxpr(jaxpr, *consts, *carry, *x)
        return (i + 1, out[:num_carry]), out[num_carry:]

    (_, carry), ys = jax.lax.scan(
        body, (jnp.int32(0), list(carry)), memory, length=length, reverse=reverse, unroll=unroll
    )
    return [*carry, *ys]


def _scan_unrolled(operands, scanned, jaxpr, num_consts, num_carry, params):
    """A scan being differentiated whose body computes on DiskArrays, as its body once per
    iteration.

    JAX differentiates a scan by stacking each iteration's residuals as ys and scanning the
    transposed body over them; a DiskArray residual (any op of the body on a DiskArray) has
    no stacked form, and a transposed body hands Jask's ops JAX's accumulators. Unrolled,
    each op is differentiated as outside a loop; under jit the program holds `length`
    copies of the body.
    """
    length, reverse = params["length"], params["reverse"]
    consts, carry = operands[:num_consts], operands[num_consts : num_consts + num_carry]
    xs = operands[num_consts + num_carry :]
    disk = {k - num_consts - num_carry for k in scanned}
    ys = []
    for i in range(length):
        row = length - 1 - i if reverse else i
        x = [_slice(xj, row) if j in disk else xj[row] for j, xj in enumerate(xs)]
        out = compat.eval_closed_jaxpr(jaxpr, *consts, *carry, *x)
        carry = out[:num_carry]
        ys.append(out[num_carry:])
    if reverse:
        ys.reverse()
    return [*carry, *(jnp.stack(y) for y in zip(*ys))]


def _slice(x, row):
    """Leading-axis slice `row` of DiskArray x, in memory."""
    return apply(Rows, x, jnp.asarray(row, jnp.int32), count=1).reshape(x.shape[1:])


@rule("while")
def while_loop(*operands, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    n_carry = len(body_jaxpr.in_avals) - body_nconsts
    carried = [
        j for j in range(n_carry) if isinstance(body_jaxpr.in_avals[body_nconsts + j], DiskArrayTy)
    ]
    if carried and cond_jaxpr.out_avals[0].shape:
        return _while_any(operands, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts)
    consumed = [cond_nconsts + body_nconsts + j for j in carried]
    if carried and register_loop(
        body_jaxpr, [body_nconsts + j for j in carried], carried, consumed
    ):
        operands = _own_handles(operands, consumed)
    return _bind_as_jax_does(
        lax_primitives.while_p,
        *operands,
        cond_jaxpr=cond_jaxpr,
        body_jaxpr=body_jaxpr,
        cond_nconsts=cond_nconsts,
        body_nconsts=body_nconsts,
    )


@rule("cond")
def cond(index, *operands, branches, **params):
    # Each branch reads its operands and returns fresh handles, so the program owns the
    # cond's DiskArray results (and may free its operands after it) as for a Jask op.
    results = [k for k, aval in enumerate(branches[0].out_avals) if isinstance(aval, DiskArrayTy)]
    if results and all(branch.jaxpr.eqns for branch in branches):
        for branch in branches:
            register_loop(branch, (), results, ())
    return _bind_as_jax_does(lax_primitives.cond_p, index, *operands, branches=branches, **params)


def _own_handles(operands, positions) -> list:
    """`operands` with a view (a new handle on the same file) at each of `positions`."""
    operands = list(operands)
    for i in positions:
        x = operands[i]
        if isinstance(x, DiskArray):
            operands[i] = apply(Reshape, x, shape=x.shape)
    return operands


def _bind_as_jax_does(primitive, *operands, **params):
    # Binds the loop without this rule (which would run again); the primitives of its body
    # reach their rules. What JAX cannot do with DiskArray carries (jax.grad of a loop) fails
    # naming the primitive.
    try:
        return compat.bind_without_rules(primitive, *operands, **params)
    except (ValueError, TypeError, AttributeError, AssertionError) as error:
        raise compat.unsupported_primitive(primitive.name, operands) from error


def _while_any(operands, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    """jax.vmap of a while_loop whose predicate differs per batch element, with DiskArray
    carries (jax.scipy.linalg.polar of a batch: qdwh's loop). JAX lowers it by selecting, per
    element, the new carry or the old one, which a DiskArray's handle cannot be; here the loop
    runs while any element's predicate holds and the body keeps each finished element's carry
    with jnp.where (streamed for DiskArrays): the same values. The carries' batch axes lead,
    as JAX's batching rule puts them."""
    cond_consts = operands[:cond_nconsts]
    body_consts = operands[cond_nconsts : cond_nconsts + body_nconsts]
    init = list(operands[cond_nconsts + body_nconsts :])
    pred_shape = tuple(cond_jaxpr.out_avals[0].shape)
    for x in init:
        if tuple(x.shape[: len(pred_shape)]) != pred_shape:
            raise NotImplementedError(
                f"jax.lax.while_loop under jax.vmap with a batched predicate of shape "
                f"{pred_shape} and a carry of shape {tuple(x.shape)} whose batch axes do not lead"
            )

    def pred(carry):
        return compat.eval_closed_jaxpr(cond_jaxpr, *cond_consts, *carry)[0]

    def body(carry):
        going = pred(carry)
        new = compat.eval_closed_jaxpr(body_jaxpr, *body_consts, *carry)
        return [
            jnp.where(
                jnp.reshape(going, pred_shape + (1,) * (len(n.shape) - len(pred_shape))), n, o
            )
            for n, o in zip(new, carry)
        ]

    return jax.lax.while_loop(lambda carry: jnp.any(pred(carry)), body, init)


class CarryKinds:
    """The carry rule (see the module docstring): where an array lives when a loop's carry or
    a cond's branches disagree on it."""

    def unified_kind(self, avals: list) -> str | None:
        kinds = {_kind(a) for a in avals}
        if len(kinds) < 2 or None in kinds:
            return None
        if len({(tuple(a.shape), a.dtype) for a in avals}) != 1:
            return None  # JAX's error
        return "memory" if _fits_in_memory(avals[0]) else "disk"

    def as_kind(self, x, kind: str):
        if kind == "memory" and is_disk_array(x):
            return apply(ToInMemory, x)
        if kind == "disk" and not is_disk_array(x):
            return from_in_memory(jnp.asarray(x))
        return x

    def stackable(self, x):
        if not is_disk_array(x):
            return x
        check_fits_in_memory(
            x,
            "a jax.lax.scan body's output (JAX stacks the ys in memory)",
            "carry it instead of returning it as a y",
        )
        return apply(ToInMemory, x)


def _kind(aval) -> str | None:
    if isinstance(aval, DiskArrayTy):
        return "disk"
    if isinstance(aval, compat.ShapedArray):
        return "memory"
    return None


def _fits_in_memory(aval) -> bool:
    size = math.prod(aval.shape)
    return size <= operands.in_memory_limit() and (
        size * aval.dtype.itemsize <= _runtime.memory_budget()
    )


jaxtype_checks.set_carry_policy(CarryKinds())
