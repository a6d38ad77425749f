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
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.extend.core import primitives as lax_primitives

from .._jax import compat
from .._jax.diskarray import DiskArray, DiskArrayTy
from .._jax.op import apply
from .._jax.primitives import rule
from ..lowering.release import register_loop
from ..ops import Reshape, Rows


@rule("scan")
def scan(*operands, jaxpr, num_consts, num_carry, **params):
    scanned = [
        k
        for k in range(num_consts + num_carry, len(operands))
        if isinstance(compat.typeof(operands[k]), DiskArrayTy)
    ]
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


def _slice(x, row):
    """Leading-axis slice `row` of DiskArray x, in memory."""
    return apply(Rows, x, jnp.asarray(row, jnp.int32), count=1).reshape(x.shape[1:])


@rule("while")
def while_loop(*operands, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    n_carry = len(body_jaxpr.in_avals) - body_nconsts
    carried = [
        j for j in range(n_carry) if isinstance(body_jaxpr.in_avals[body_nconsts + j], DiskArrayTy)
    ]
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
