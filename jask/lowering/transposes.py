"""Transposes folded into matrix products: `x @ w.T` reads w as it is stored.

jax.numpy writes `w.T` as a transpose primitive, which on a DiskArray is a pass writing the
transposed copy (a tied embedding's (V, D) table: one read and one write of it per step, and
again for its gradient, which JAX's autodiff transposes back). A matrix product reads either
operand transposed at no cost (`Matmul`'s trans flags), so after autodiff:

- a product reading a transpose of the last two axes reads the transpose's operand with its
  flag flipped;
- a transpose of the last two axes of a product used only there is the product with its
  operands swapped and both flags flipped: (op(a) @ op(b)).T = op'(b) @ op'(a);
- a transpose nothing reads any more is dropped (Jask ops have no other effect).
"""

from __future__ import annotations

from .._jax import compat
from .._jax.op import Role
from .graph import jask_op, until_fixed_point, users_and_producers


def _is(op, role) -> bool:
    return op is not None and op.role is role


def _swaps_last_two(op) -> bool:
    perm = tuple(op.perm)
    n = len(perm)
    return n >= 2 and perm == (*range(n - 2), n - 1, n - 2)


def _fold_one(eqns, outvars):
    users, producer_at = users_and_producers(eqns, outvars)

    def made_by(v, role):
        i = producer_at.get(id(v)) if compat.is_var(v) else None
        op = None if i is None else jask_op(eqns[i])
        return (i, op) if _is(op, role) else (None, None)

    for i, e in enumerate(eqns):
        op = jask_op(e)
        if _is(op, Role.MATMUL):  # a product reading a transpose
            for k in (0, 1):
                ti, t = made_by(e.invars[k], Role.TRANSPOSE)
                if t is None or not _swaps_last_two(t):
                    continue
                flags = [bool(op.trans_a), bool(op.trans_b)]
                flags[k] = not flags[k]
                avals = list(op.in_avals)
                avals[k] = t.in_avals[0]
                new = type(op)(
                    *avals, trans_a=flags[0], trans_b=flags[1], weak_type=op.out_aval.weak_type
                )
                invars = list(e.invars)
                invars[k] = eqns[ti].invars[0]
                return _replaced(eqns, outvars, {i: compat.hi_equation(invars, e.outvars, new, e)})
        elif _is(op, Role.TRANSPOSE) and _swaps_last_two(op):  # a transposed product
            pi, m = made_by(e.invars[0], Role.MATMUL)
            if m is None or len(users.get(id(e.invars[0]), ())) != 1:
                continue
            a, b = m.in_avals
            if a.ndim != 2 or b.ndim != 2:  # a batched product's broadcasting stays as it is
                continue
            new = type(m)(
                b,
                a,
                trans_a=not m.trans_b,
                trans_b=not m.trans_a,
                weak_type=op.out_aval.weak_type,
            )
            invars = list(reversed(eqns[pi].invars))
            fused = compat.hi_equation(invars, e.outvars, new, e)
            # at the product's place: it reads what the product read
            return [fused if j == pi else x for j, x in enumerate(eqns) if j != i]
    return None


fold_transposes = until_fixed_point(_fold_one)
"""The pass (returns the program itself when nothing folds)."""


def _replaced(eqns, outvars, replacements):
    """`eqns` with the replacements made and every transpose nothing reads dropped."""
    eqns = [replacements.get(j, x) for j, x in enumerate(eqns)]
    users, _ = users_and_producers(eqns, outvars)
    return [
        x for x in eqns if not (_is(jask_op(x), Role.TRANSPOSE) and not users.get(id(x.outvars[0])))
    ]
