"""Freeing the intermediates of compiled programs: the policy of graph.insert_releases.

Who owns a DiskArray value inside a program:
- a Jask op's result: the program, until its last reader has run (then a `Release`);
- a program input: whoever passed it (Python, or the enclosing program), never freed here;
- the result of a jax.lax.cond bound through jask/_api/loops.py: the program (each branch is
  registered to return fresh handles, and reads its operands without freeing them);
- a loop's carry (jax.lax.scan, while_loop, fori_loop) whose loop was bound through
  jask/_api/loops.py: the loop. The rule gives the loop a handle of its own for each initial
  carry (a view: same file, new handle), and registers the body here (`register_loop`): the
  body frees each carry it receives after its last reader, and hands on fresh handles only
  (`fresh_carries` puts a view where a body would return a carry it did not make), so the
  files of an iteration's carries go with the next iteration and a loop of any length holds
  one set of carries. Loops JAX builds itself (in transformations) are not registered; their
  carries are kept, as before, until the program ends.
"""

from __future__ import annotations

import weakref
from collections import Counter
from dataclasses import dataclass

from .._jax import compat
from .._jax.diskarray import DiskArrayTy
from .._jax.op import Op
from ..ops import Reshape
from ..ops.release import Release

# -- loops whose carries the loop owns -----------------------------------------------------


@dataclass(frozen=True)
class Loop:
    """A loop bound through jask/_api/loops.py, as the release pass sees it.

    Attributes:
      body_invars, body_outvars: the body's variables when it was registered (the lowering
        of the body is recognised by them: JAX's rewrites before lowering keep the variables
        and make new jaxpr objects).
      carried_in, carried_out: positions of the DiskArray carries among the body's inputs and
        among its outputs.
      consumed: positions of the loop's operands it takes over (its initial carries).
    """

    body_invars: tuple
    body_outvars: tuple
    carried_in: tuple[int, ...]
    carried_out: tuple[int, ...]
    consumed: tuple[int, ...]


_LOOPS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # body ClosedJaxpr -> Loop


def register_loop(body, carried_in, carried_out, consumed) -> bool:
    """Records that the loop binding `body` (a ClosedJaxpr) owns its DiskArray carries.

    A body without equations (it returns inputs or constants as they are) is not registered:
    there is no equation to place its views beside. Returns whether it was registered."""
    if not body.jaxpr.eqns:
        return False
    _LOOPS[body] = Loop(
        tuple(body.jaxpr.invars),
        tuple(body.jaxpr.outvars),
        tuple(carried_in),
        tuple(carried_out),
        tuple(consumed),
    )
    return True


# The loop primitives' parameters naming their body.
_BODY_PARAM = {"scan": "jaxpr", "while": "body_jaxpr"}


def loop_of_equation(eqn) -> Loop | None:
    """The registered loop (or cond, whose branches are registered as bodies run once) an
    equation runs, or None."""
    if eqn.primitive.name == "cond":
        branches = [_LOOPS.get(branch) for branch in eqn.params["branches"]]
        return branches[0] if branches and all(branches) else None
    param = _BODY_PARAM.get(eqn.primitive.name)
    return _LOOPS.get(eqn.params[param]) if param else None


def loop_of_body(closed_jaxpr) -> Loop | None:
    """The registered loop whose body `closed_jaxpr` is (as JAX hands it to lowering)."""
    invars, outvars = closed_jaxpr.jaxpr.invars, closed_jaxpr.jaxpr.outvars
    for loop in list(_LOOPS.values()):
        if (
            len(loop.body_invars) == len(invars)
            and len(loop.body_outvars) == len(outvars)
            and all(a is b for a, b in zip(loop.body_invars, invars))
        ):
            return loop
    return None


def fresh_carries(closed_jaxpr):
    """A pass over loop bodies: every carried DiskArray output is a handle the body made.

    A body that returns a carry it did not make (its input, a constant, the result of a
    nested non-Jask equation or the same value twice) returns a view of it instead, so the
    next iteration may free its input without freeing what it hands on."""
    loop = loop_of_body(closed_jaxpr)
    if loop is None:
        return closed_jaxpr
    eqns, outvars = compat.program_of(closed_jaxpr)
    made = {id(v) for e in eqns if isinstance(compat.hi_primitive(e), Op) for v in e.outvars}
    returned = Counter(id(v) for v in outvars)
    new_eqns, new_outvars = list(eqns), list(outvars)
    for k in loop.carried_out:
        v = outvars[k]
        if id(v) in made and returned[id(v)] == 1:
            continue
        view = Reshape(v.aval, shape=v.aval.shape)
        out = compat.new_var(v.aval)
        new_eqns.append(compat.hi_equation([v], [out], view, eqns[-1], effects=frozenset()))
        new_outvars[k] = out
    if new_eqns == eqns:
        return closed_jaxpr
    jaxpr = closed_jaxpr.jaxpr.replace(eqns=new_eqns, outvars=new_outvars)
    return closed_jaxpr.replace(jaxpr=jaxpr)


class ReleaseDiskArrays:
    """The policy of the release pass (graph.ReleasePolicy): DiskArray intermediates hold
    files."""

    @staticmethod
    def is_intermediate(aval) -> bool:
        return isinstance(aval, DiskArrayTy)

    @staticmethod
    def release(avals):
        return Release(*avals)

    @staticmethod
    def owned_results(eqn) -> tuple[int, ...]:
        if isinstance(compat.hi_primitive(eqn), Op):
            return tuple(range(len(eqn.outvars)))
        loop = loop_of_equation(eqn)
        return loop.carried_out if loop is not None else ()

    @staticmethod
    def borrows(eqn, k: int) -> bool:
        # Only Jask ops, registered loops and primitives that say so (jask._debug's
        # HostCallback) are known not to alias operands to results.
        prim = compat.hi_primitive(eqn)
        if isinstance(prim, Op) or getattr(prim, "borrows_operands", False):
            return True
        loop = loop_of_equation(eqn)
        return loop is not None and k not in loop.consumed

    @staticmethod
    def owned_inputs(closed_jaxpr) -> tuple[int, ...]:
        loop = loop_of_body(closed_jaxpr)
        return loop.carried_in if loop is not None else ()
