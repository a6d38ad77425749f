"""Lazy values written to disk (`jask.on_disk`): a plan of their row rules, compiled once per
structure, run as one `jask.ops.generate.GenerateRows` in blocks that fit the allowance.

A `RowPlan` orders a lazy value's graph: its leaves (the operands of GenerateRows), its nodes
(a rule and where its inputs are) and their units. Inside a jitted program the plan is one
function (XLA fuses it as it fuses fn run in memory there). Eagerly it runs as *stages*, one
compiled program per unit in the order fn made them, so that XLA fuses no more than JAX does
when it runs fn's primitives and jitted calls one by one in memory (a multiply-add split
between two of them is rounded twice, never contracted).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

import jax
import numpy as np

from .._jax import compat
from .._jax.op import apply
from ..ops.generate import GenerateRows, RowsFn
from . import blocked
from .row_rules import Lazy, Leaf

Slot = tuple[str, int]  # ("leaf", operand index) or ("node", node index)


def write(node: Lazy) -> None:
    """Writes a lazy value to disk (its `disk`) in one pass of blocks."""
    plan = RowPlan(node)
    operands = [leaf.value for leaf in plan.leaves]
    made = _made(plan, operands)
    (node.disk,) = apply(
        GenerateRows,
        *operands,
        fn=made.fn,
        rows=node.rows,
        blocked=tuple(leaf.blocked for leaf in plan.leaves),
        block=made.block,
    )


class RowPlan:
    """A lazy value's graph in evaluation order, and a signature of its structure (equal
    signatures compute equal functions of their operands)."""

    def __init__(self, output: Lazy):
        self.leaves: list[Leaf] = []
        self.nodes: list[tuple[Callable, tuple[Slot, ...]]] = []
        self.units: list[int] = []
        self._slots: dict[int, Slot] = {}
        self._signature: list = []
        self._cacheable = True
        self.output = self._visit(output, top=True)
        self.out = (tuple(output.aval.shape), np.dtype(output.aval.dtype))
        ranks = {u: r for r, u in enumerate(sorted(set(self.units)))}
        self.units = [ranks[u] for u in self.units]  # dense, in fn's order
        self.signature = None
        if self._cacheable:
            self.signature = (tuple(self._signature), tuple(self.units), self.output)

    def _visit(self, x, top=False) -> Slot:
        ident = id(x)
        if ident in self._slots:
            return self._slots[ident]
        if isinstance(x, Lazy) and x.disk is not None and not top:
            x = Leaf(x.disk, True)  # written already: its rows are read
        if isinstance(x, Leaf):
            aval = compat.typeof(x.value)
            self._signature.append(("leaf", x.blocked, tuple(aval.shape), str(aval.dtype)))
            self.leaves.append(x)
            slot = ("leaf", len(self.leaves) - 1)
        else:
            inputs = tuple(self._visit(i) for i in x.inputs)
            self._signature.append(("node", x.key, inputs))
            self._cacheable = self._cacheable and x.key is not None
            self.nodes.append((x.rule, inputs))
            self.units.append(x.unit)
            slot = ("node", len(self.nodes) - 1)
        self._slots[ident] = slot
        return slot

    def function(self) -> Callable:
        """fn(start, count, *operand blocks) -> (the output's block,): the whole plan."""
        nodes, output = list(self.nodes), self.output[1]

        def fn(start, count, *operands):
            known: dict = {}
            _evaluate(nodes, range(len(nodes)), start, count, operands, known)
            return (known[output],)

        return fn

    def stages(self) -> list[_Stage]:
        """One stage per unit: the nodes it computes, the earlier nodes it reads."""
        stages = []
        for unit in sorted(set(self.units)):
            which = [i for i, u in enumerate(self.units) if u == unit]
            reads = sorted(
                {j for i in which for kind, j in self.nodes[i][1] if kind == "node"} - set(which)
            )
            stages.append(_Stage(self, which, reads))
        for k, stage in enumerate(stages):
            later = {j for s in stages[k + 1 :] for j in s.reads}
            stage.keep = [i for i in stage.which if i in later or i == self.output[1]]
        return stages


def _evaluate(nodes, which, start, count, operands, known: dict) -> None:
    """The blocks of nodes `which` (in order) into `known`, from the operands' blocks and the
    nodes already in `known`."""
    for i in which:
        rule, inputs = nodes[i]
        args = [operands[j] if kind == "leaf" else known[j] for kind, j in inputs]
        known[i] = rule(start, count, *args)


class _Stage:
    """The nodes of one unit as one compiled program (a plan keeps no operand values: it is
    cached, and must not keep a DiskArray alive)."""

    def __init__(self, plan: RowPlan, which: list[int], reads: list[int]):
        self.which, self.reads, self.keep = which, reads, []
        nodes = list(plan.nodes)

        def fn(start, count, operands, read):
            known = dict(zip(reads, read))
            _evaluate(nodes, which, start, count, operands, known)
            return tuple(known[i] for i in self.keep)

        self.jitted = jax.jit(fn, static_argnums=(1,))


def _staged(plan: RowPlan, stages: list[_Stage]) -> Callable:
    """The plan run eagerly: its stages' compiled programs one after another."""
    output = plan.output[1]

    def run(start, count, *operands):
        known: dict = {}
        for stage in stages:
            values = stage.jitted(start, count, operands, tuple(known[i] for i in stage.reads))
            known.update(zip(stage.keep, values))
        return (known[output],)

    return run


class _Made:
    def __init__(self, fn: RowsFn, block: int):
        self.fn, self.block = fn, block


_CACHE: OrderedDict = OrderedDict()
_CACHE_SIZE = 256


def _made(plan: RowPlan, operands) -> _Made:
    """The plan's RowsFn and block size, made once per structure, operand types and allowance
    (later calls, and layers of one shape, reuse the compiled blocks)."""
    key = None
    if plan.signature is not None:
        key = (plan.signature, blocked.allowance())
        if key in _CACHE:
            _CACHE.move_to_end(key)
            return _CACHE[key]
    stages = plan.stages()
    name = f"on_disk[{len(plan.nodes)} rules, {len(stages)} stages]"
    fn = RowsFn(plan.function(), (plan.out,), name, eager=_staged(plan, stages))
    made = _Made(fn, _block_rows(plan, stages, operands))
    if key is not None:
        _CACHE[key] = made
        if len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return made


def _block_rows(plan: RowPlan, stages: list[_Stage], operands) -> int:
    """The most rows per block whose compiled stages (XLA's arguments, temporaries and results,
    from their memory analysis, all counted as held at once) fit the allowance: a first
    compilation at a block of a few rows gives the bytes per row (whole operands counted in
    them: an overestimate), a second one checks the block they give (the one that runs)."""
    allowance = blocked.allowance()
    shape, dtype = plan.out
    rows = shape[0]
    per_row = blocked.nbytes(compat.ShapedArray(shape, dtype)) // rows
    block = int(min(rows, max(1, allowance // max(8 * per_row, 1))))
    tried: dict[int, int] = {}
    while block not in tried:
        tried[block] = _compiled_bytes(plan, stages, block, operands)
        fits = [b for b, held in tried.items() if held <= allowance]
        if block == rows or allowance // 2 < tried[block] <= allowance:
            break
        block = int(min(rows, max(1, block * allowance // tried[block])))
        if fits and block <= max(fits):
            break
    fits = [b for b, held in tried.items() if held <= allowance]
    if not fits:
        raise NotImplementedError(
            f"jask.on_disk: one row of {dtype}{list(shape)} takes {min(tried.values())} bytes "
            f"of memory to compute, more than the allowance of {allowance} bytes (half the "
            f"memory budget); raise the budget with jask.set_memory_budget"
        )
    return max(fits)


def _compiled_bytes(plan: RowPlan, stages: list[_Stage], count: int, operands) -> int:
    args = []
    for x, leaf in zip(operands, plan.leaves):
        aval = compat.typeof(x)
        shape = (count, *aval.shape[1:]) if leaf.blocked else aval.shape
        args.append(jax.ShapeDtypeStruct(shape, aval.dtype))
    held = sum(blocked.nbytes(a) for a in args)
    start = jax.ShapeDtypeStruct((), np.int32)
    made: dict[int, jax.ShapeDtypeStruct] = {}
    for stage in stages:
        read = tuple(made[i] for i in stage.reads)
        lowered = stage.jitted.lower(start, count, tuple(args), read)
        analysis = lowered.compile().memory_analysis()
        outs = jax.tree_util.tree_leaves(lowered.out_info)
        made.update(zip(stage.keep, (jax.ShapeDtypeStruct(o.shape, o.dtype) for o in outs)))
        if analysis is None:  # no analysis on this platform: the results themselves
            held += sum(blocked.nbytes(o) for o in outs)
        else:
            held += int(analysis.temp_size_in_bytes + analysis.output_size_in_bytes)
    return held
