"""The graph mechanics of the jit-time passes: a hi jaxpr as equations with users and
producers, and the four rewrites (merge a producer into its only consumer, merge it into a
consumer while keeping its results, replace a set of equations by one, insert releases).

What may merge is not decided here: each rewrite asks a policy (the Protocols below), which
sees Jask ops only. JAX's jaxpr classes are reached through `compat` alone.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from .._jax import compat
from .._jax.op import Op

Pass = Callable[[object], object]
"""A rewrite of a ClosedJaxpr (returns the same object when nothing changes)."""


# -- the policies each rewrite asks ---------------------------------------------------


class ChainPolicy(Protocol):
    def fuse(self, consumer: Op, k: int, producer: Op) -> Op | None:
        """The op computing `consumer` with its operand k replaced by `producer`'s
        computation (whose operands take its place), or None: not fusible."""

    def merge_operands(self, op: Op, keep: int, drop: int) -> Op:
        """`op` with operand `drop` read from operand `keep` instead (the same value)."""


class SharedResultPolicy(Protocol):
    def fuse_results(
        self, consumer: Op, ks: tuple[int, ...], producer: Op, consumed: int, kept: tuple[int, ...]
    ) -> Op | None:
        """One op computing `producer` and `consumer`, whose operands at positions `ks` are
        the producer's result number `consumed`; it also returns the producer's results
        numbered in `kept`, before the consumer's. None: not fusible."""

    def merge_operands(self, op: Op, keep: int, drop: int) -> Op:
        """As ChainPolicy.merge_operands."""


@dataclass(frozen=True)
class Node:
    """One equation as a group policy sees it: its Jask op (None for any other equation)
    and the keys of the values it reads and writes."""

    op: Op | None
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]


@dataclass(frozen=True)
class Group:
    """The op replacing a set of equations, with the keys of its operands and results."""

    op: Op
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]


class GroupPolicy(Protocol):
    def find_groups(
        self, nodes: Sequence[Node], late_reader: Callable[[list[int]], int | None]
    ) -> list[list[int]]:
        """Index lists of the nodes to replace, one list per group. `late_reader(members)`
        is None when the set can run at the position of its last member, else the position
        of a node outside it that both depends on its results and feeds it."""

    def group_op(
        self,
        members: list[int],
        nodes: Sequence[Node],
        avals: dict[int, object],
        used_outside: set[int],
    ) -> Group:
        """The op replacing the nodes `members`; `used_outside` are the keys of the results
        read after the group."""


class ReleasePolicy(Protocol):
    def is_intermediate(self, aval) -> bool:
        """Whether a value of this type, made by a Jask op and not a program output, holds
        storage to free after its last reader."""

    def release(self, avals: list) -> object:
        """The primitive freeing a value of type avals[0] once the values of types
        avals[1:] (its readers' results) exist."""

    def owned_results(self, eqn) -> tuple[int, ...]:
        """Positions of the equation's results that are new storage owned by the program."""

    def borrows(self, eqn, k: int) -> bool:
        """Whether the equation only reads its operand k (neither returns it as a result nor
        frees it), so the operand may be freed once the equation has run."""

    def owned_inputs(self, closed_jaxpr) -> tuple[int, ...]:
        """Positions of the program's inputs that it owns and frees (a loop body's carries:
        each iteration frees the carry the previous one made)."""


# -- users and producers --------------------------------------------------------------


def jask_op(eqn) -> Op | None:
    """The Jask op an equation applies, or None."""
    prim = compat.hi_primitive(eqn)
    return prim if isinstance(prim, Op) else None


def users_and_producers(eqns, outvars) -> tuple[dict[int, list[int]], dict[int, int]]:
    """(var id -> positions of the eqns reading it, len(eqns) for a program output;
    var id -> position of the eqn computing it)."""
    users: dict[int, list[int]] = {}
    for i, e in enumerate(eqns):
        for x in e.invars:
            if compat.is_var(x):
                users.setdefault(id(x), []).append(i)
    for x in outvars:
        if compat.is_var(x):
            users.setdefault(id(x), []).append(len(eqns))
    return users, {id(v): i for i, e in enumerate(eqns) for v in e.outvars}


def until_fixed_point(step) -> Pass:
    """A pass applying `step(eqns, outvars)` (new eqns, or None when nothing merges) until
    it returns None."""

    def rewrite(closed_jaxpr):
        eqns, outvars = compat.program_of(closed_jaxpr)
        changed = False
        while (merged := step(eqns, outvars)) is not None:
            eqns, changed = merged, True
        return compat.with_equations(closed_jaxpr, eqns) if changed else closed_jaxpr

    return rewrite


def _drop_repeated_operands(op, invars, merge_operands):
    i = 0
    while i < len(invars):
        for j in range(i + 1, len(invars)):
            if compat.is_var(invars[i]) and invars[j] is invars[i]:
                op = merge_operands(op, i, j)
                invars = invars[:j] + invars[j + 1 :]
                break
        else:
            i += 1
    return op, invars


# -- merging a producer into its only consumer -------------------------------------------


def fuse_chains(policy: ChainPolicy) -> Pass:
    """A pass merging an op into its only consumer wherever `policy.fuse` allows."""
    return until_fixed_point(lambda eqns, outvars: _fuse_one(eqns, outvars, policy))


def _fuse_one(eqns, outvars, policy: ChainPolicy):
    """Eqns with one producer merged into its consumer, or None when nothing fuses."""
    users, producer_at = users_and_producers(eqns, outvars)
    uses = {k: len(v) for k, v in users.items()}
    for ci, consumer in enumerate(eqns):
        consumer_op = jask_op(consumer)
        if consumer_op is None:
            continue
        for k, v in enumerate(consumer.invars):
            if not compat.is_var(v) or uses.get(id(v)) != 1 or id(v) not in producer_at:
                continue
            producer = eqns[producer_at[id(v)]]
            producer_op = jask_op(producer)
            if producer_op is None or len(producer.outvars) != 1:
                continue
            op = policy.fuse(consumer_op, k, producer_op)
            if op is None:
                continue
            invars = [*consumer.invars[:k], *producer.invars, *consumer.invars[k + 1 :]]
            op, invars = _drop_repeated_operands(op, invars, policy.merge_operands)
            fused = compat.hi_equation(invars, consumer.outvars, op, consumer)
            return [fused if i == ci else e for i, e in enumerate(eqns) if i != producer_at[id(v)]]
    return None


# -- merging a producer into a consumer, keeping its results --------------------------------


def share_results(policy: SharedResultPolicy) -> Pass:
    """A pass merging an op into a consumer of its result when the result has other users
    too, wherever `policy.fuse_results` allows."""
    return until_fixed_point(lambda eqns, outvars: _share_one(eqns, outvars, policy))


def _share_one(eqns, outvars, policy: SharedResultPolicy):
    users, producer_at = users_and_producers(eqns, outvars)
    for ci, consumer in enumerate(eqns):
        consumer_op = jask_op(consumer)
        if consumer_op is None:
            continue
        for k, v in enumerate(consumer.invars):
            if not compat.is_var(v) or id(v) not in producer_at:
                continue
            pi = producer_at[id(v)]
            producer = eqns[pi]
            producer_op = jask_op(producer)
            results = producer.outvars
            if producer_op is None or any(o is not v and o in consumer.invars for o in results):
                continue
            # The merged op runs where the consumer did: nothing between may read the results.
            later = [u for o in results for u in users.get(id(o), []) if u != ci]
            if any(u < ci for u in later):
                continue
            kept = tuple(
                j for j, o in enumerate(results) if any(u != ci for u in users.get(id(o), []))
            )
            ks = tuple(i for i, x in enumerate(consumer.invars) if x is v)
            op = policy.fuse_results(consumer_op, ks, producer_op, results.index(v), kept)
            if op is None:
                continue
            invars = [
                *consumer.invars[:k],
                *producer.invars,
                *(x for i, x in enumerate(consumer.invars) if i > k and i not in ks),
            ]
            op, invars = _drop_repeated_operands(op, invars, policy.merge_operands)
            fused = compat.hi_equation(
                invars, [results[j] for j in kept] + list(consumer.outvars), op, consumer
            )
            return [fused if i == ci else e for i, e in enumerate(eqns) if i != pi]
    return None


# -- replacing sets of equations by one ------------------------------------------------------


def replace_groups(policy: GroupPolicy) -> Pass:
    """A pass replacing the sets of equations `policy.find_groups` chooses by one op each;
    the equations are then reordered (stably) so that each runs after what it reads."""

    def rewrite(closed_jaxpr):
        eqns, outvars = compat.program_of(closed_jaxpr)
        keys: dict[int, object] = {}
        avals: dict[int, object] = {}

        def key(v):
            keys[id(v)], avals[id(v)] = v, v.aval
            return id(v)

        nodes = [
            Node(jask_op(e), tuple(key(v) for v in e.invars), tuple(key(v) for v in e.outvars))
            for e in eqns
        ]
        users, producer = users_and_producers(eqns, outvars)

        def late_reader(members):
            inside = set(members)
            downstream: set[int] = set()  # outside equations that depend on the set's results
            for i in range(min(members), len(nodes)):
                if i not in inside and any(
                    producer.get(k) in inside or producer.get(k) in downstream
                    for k in nodes[i].inputs
                ):
                    downstream.add(i)
            feeding = [
                producer[k]
                for j in members
                for k in nodes[j].inputs
                if producer.get(k) in downstream
            ]
            return min(feeding) if feeding else None

        groups = policy.find_groups(nodes, late_reader)
        if not groups:
            return closed_jaxpr
        units = []  # (position, eqn) with the members of a group replaced by one eqn
        grouped = set()
        for members in groups:
            inside = set(members)
            used_outside = {
                k
                for i in members
                for k in nodes[i].outputs
                if any(u not in inside for u in users.get(k, ()))
            }
            grouped |= inside
            if not used_outside:  # nothing reads its results: Jask ops have no other effect
                continue
            group = policy.group_op(members, nodes, avals, used_outside)
            units.append(
                (
                    min(members),
                    compat.hi_equation(
                        [keys[k] for k in group.inputs],
                        [keys[k] for k in group.outputs],
                        group.op,
                        eqns[max(members)],
                    ),
                )
            )
        units += [(i, e) for i, e in enumerate(eqns) if i not in grouped]
        return compat.with_equations(closed_jaxpr, stable_topological_order(units))

    return rewrite


def stable_topological_order(units):
    """The equations of (position, eqn) pairs ordered so each follows the equations whose
    results it reads, keeping program order where dependencies allow."""
    made = {id(v): n for n, (_, e) in enumerate(units) for v in e.outvars}
    waits = [
        {made[id(v)] for v in e.invars if compat.is_var(v) and id(v) in made} for _, e in units
    ]
    readers: dict[int, list[int]] = {}
    for n, deps in enumerate(waits):
        for d in deps:
            readers.setdefault(d, []).append(n)
    ready = [(units[n][0], n) for n, deps in enumerate(waits) if not deps]
    heapq.heapify(ready)
    order = []
    while ready:
        _, n = heapq.heappop(ready)
        order.append(units[n][1])
        for r in readers.get(n, ()):
            waits[r].discard(n)
            if not waits[r]:
                heapq.heappush(ready, (units[r][0], r))
    if len(order) != len(units):
        raise AssertionError("jask's row-group reordering found a cycle in a jitted program")
    return order


# -- freeing intermediates -------------------------------------------------------------------
#
# An op inside a jitted program writes its result to a new file that no Python object owns.
# This pass inserts a release after the last use of each such intermediate; the release runs
# after every consumer (it takes their outputs as operands) and frees the file. Program
# outputs are not released: Python adopts them on return. A loop body also owns its carried
# inputs (the policy says which): each iteration frees the carry the previous one made.


def insert_releases(policy: ReleasePolicy) -> Pass:
    """A pass freeing the intermediates of Jask ops that only Jask ops read."""

    def rewrite(closed_jaxpr):
        eqns, outvars = compat.program_of(closed_jaxpr)
        invars = closed_jaxpr.jaxpr.invars
        owned = [invars[k] for k in policy.owned_inputs(closed_jaxpr)]
        new_eqns = _with_releases(eqns, outvars, policy, owned)
        return closed_jaxpr if new_eqns is None else compat.with_equations(closed_jaxpr, new_eqns)

    return rewrite


def _with_releases(eqns, outvars, policy: ReleasePolicy, owned_inputs=()):
    outputs = {id(v) for v in outvars if compat.is_var(v)}
    produced = {id(v): (-1, v) for v in owned_inputs if id(v) not in outputs}
    for i, eqn in enumerate(eqns):
        for k in policy.owned_results(eqn):
            v = eqn.outvars[k]
            if policy.is_intermediate(v.aval) and id(v) not in outputs:
                produced[id(v)] = (i, v)
    if not produced or not eqns:
        return None
    uses: dict[int, list[tuple[int, int]]] = {k: [] for k in produced}
    for i, eqn in enumerate(eqns):
        for k, v in enumerate(eqn.invars):
            if compat.is_var(v) and id(v) in uses:
                uses[id(v)].append((i, k))
    releases_after: dict[int, list] = {}
    for key, (producer, var) in produced.items():
        if not all(policy.borrows(eqns[i], k) for i, k in uses[key]):
            continue
        users = sorted({i for i, _ in uses[key]})
        last = max(users, default=producer)
        deps = [o for i in (users or [producer] * (producer >= 0)) for o in eqns[i].outvars]
        releases_after.setdefault(last, []).append((var, [o for o in deps if o is not var]))
    new_eqns = []
    for i in range(-1, len(eqns)):
        if i >= 0:
            new_eqns.append(eqns[i])
        for var, deps in releases_after.get(i, ()):
            prim = policy.release([var.aval] + [d.aval for d in deps])
            out = compat.new_var(prim.out_avals_flat[0])
            like = eqns[max(i, 0)]
            new_eqns.append(
                compat.hi_equation([var, *deps], [out], prim, like, effects=frozenset())
            )
    return new_eqns
