"""Row groups: ops over tall arrays that share their rows, run as one pass over row blocks.

A matrix product by a small matrix (`x @ w`), elementwise ops on arrays of the same shape,
a full sum, and the product of two tall arrays over their rows (`x.T @ g`, a gradient) all
compute each row of their result, or their contribution to it, from the same rows of their
operands. Under jit, a connected set of such ops on arrays with the same leading dimension
becomes one engine call (src/engine/kernels/row_group.cpp) that reads each tall input once, keeps
every intermediate in memory and writes only the results used elsewhere: a model's forward
and backward pass over a dataset on disk is one read of the data.

`find_groups` chooses the sets and `group_op` builds the op that replaces one, both by the
ops' declared roles (`Op.role`); graph.replace_groups does the program surgery.
"""

from __future__ import annotations

import math

import numpy as np

from .._dtypes import dtype_code
from .._jax.diskarray import DiskArrayTy
from .._jax.op import Op
from .._jax.op import Role as OpRole
from ..ops._elementwise import encode
from .graph import Group

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
# Node codes of the engine's encoding (see src/engine/kernels/row_group.hpp).
MAP, GEMM, GEMM_TN, SUM = 0, 1, 2, 3


class RowGroup(Op):
    """Several row-local ops in one pass; results are DiskArrays and 0-d sums."""

    name = "row_group"
    kernel = "row_group"
    result = "group"

    def out_type(self, *operands, encoding, out_avals, label):
        return tuple(out_avals)

    def kernel_params(self):
        return {"label": self.label, **dict(self.encoding)}


# -- what each op is to a row group ---------------------------------------------


def _is_float_disk(aval) -> bool:
    return isinstance(aval, DiskArrayTy) and np.dtype(aval.dtype) in _FLOATS


def _elementwise_parts(prim):
    """(expr, ends in a sum) of an elementwise op or full sum, or None."""
    if prim.role is OpRole.ELEMENTWISE:
        expression = prim.expression()
        return (expression.instructions, False) if expression.reduction == "none" else None
    if prim.role is OpRole.REDUCTION:
        expression = prim.expression()
        return (expression.instructions, True) if expression.reduction == "sum" else None
    return None


def role(prim):
    """(kind, rows, dtype) when `prim` is row-local, else None. Kinds: "map", "sum", "gemm",
    "gemm_tn", "fill"."""
    if prim.role is OpRole.MATMUL:
        a, b = prim.in_avals
        if a.ndim != 2 or b.ndim != 2 or not (_is_float_disk(a) and a.dtype == b.dtype):
            return None
        if not prim.trans_a:
            return "gemm", a.shape[0], np.dtype(a.dtype)
        if not prim.trans_b:
            return "gemm_tn", a.shape[0], np.dtype(a.dtype)
        return None
    if prim.role is OpRole.BROADCAST:
        out = prim.out_aval
        if not out.ndim or not _is_float_disk(out):
            return None
        return "fill", out.shape[0], np.dtype(out.dtype)
    parts = _elementwise_parts(prim)
    if parts is None:
        return None
    arrays = [a for a in prim.in_avals if isinstance(a, DiskArrayTy) or a.shape]
    if not arrays or not all(_is_float_disk(a) for a in arrays):
        return None
    shape, dtype = arrays[0].shape, np.dtype(arrays[0].dtype)
    if not shape or any(a.shape != shape or a.dtype != dtype for a in arrays):
        return None
    out = prim.out_aval
    if not parts[1] and (out.shape != shape or np.dtype(out.dtype) != dtype):
        return None
    return ("sum" if parts[1] else "map"), shape[0], dtype


def _tall_operands(prim, kind):
    """Operand positions read row by row (the rest are small matrices or scalars)."""
    if kind == "gemm":
        return (0,)
    if kind == "gemm_tn":
        return (0, 1)
    return tuple(i for i, a in enumerate(prim.in_avals) if isinstance(a, DiskArrayTy))


def _produces_tall(kind) -> bool:
    return kind in ("map", "gemm", "fill")


# -- choosing the groups ----------------------------------------------------------


def find_groups(nodes, last_use_order):
    """Index lists of the nodes (graph.Node, in program order) to fuse; `last_use_order(group)`
    says whether a group can run at the position of its last member (nothing outside reads
    its results earlier).
    A group has a matrix product and at least two ops."""
    roles = {i: role(node.op) for i, node in enumerate(nodes) if node.op is not None}
    roles = {i: r for i, r in roles.items() if r is not None}
    producer = {k: i for i, node in enumerate(nodes) for k in node.outputs}
    parent = {i: i for i in roles}

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for j, r in roles.items():
        prim, ins = nodes[j].op, nodes[j].inputs
        for pos in _tall_operands(prim, r[0]):
            i = producer.get(ins[pos])
            if i in roles and _produces_tall(roles[i][0]) and roles[i][1:] == r[1:]:
                parent[find(i)] = find(j)
    components: dict[int, list[int]] = {}
    for i in roles:
        components.setdefault(find(i), []).append(i)
    groups = []
    for members in components.values():
        members = _valid_prefix(sorted(members), nodes, roles, producer, last_use_order)
        if len(members) >= 2 and any(roles[i][0] in ("gemm", "gemm_tn") for i in members):
            groups.append(members)
    return groups


def _valid_prefix(members, nodes, roles, producer, last_use_order):
    """The longest prefix of `members` that can run as one pass: no member reads, other
    than row by row, a value the group computes; nothing outside reads its results before it
    ends."""
    while members:
        inside = set(members)
        late = next(
            (
                j
                for j in members
                if any(
                    producer.get(k) in inside
                    and pos not in _tall_operands(nodes[j].op, roles[j][0])
                    for pos, k in enumerate(nodes[j].inputs)
                )
            ),
            None,
        )
        if late is not None:
            members = [i for i in members if i < late]
            continue
        cut = last_use_order(members)
        if cut is None:
            return members
        members = [i for i in members if i < cut]
    return members


# -- the op that replaces a group ------------------------------------------------


def group_op(members, nodes, avals, used_outside):
    """The RowGroup op replacing the nodes `members`, with its input and output keys."""
    handles, scalars = [], []  # (key, kind, a, b) / key
    handle_index, scalar_index = {}, {}
    produced = {}  # key -> engine ref of values computed inside
    encoded, outputs = [], []
    first = members[0]
    _, rows, dtype = role(nodes[first].op)

    def ref(key, as_tall):
        if key in produced:
            return produced[key]
        aval = avals[key]
        if not isinstance(aval, DiskArrayTy):
            if key not in scalar_index:
                scalar_index[key] = len(scalars)
                scalars.append(key)
            return (1, scalar_index[key])
        kind = 0 if as_tall else 1
        if (key, kind) not in handle_index:
            handle_index[key, kind] = len(handles)
            a, b = (math.prod(aval.shape[1:]), 0) if as_tall else aval.shape
            handles.append((key, kind, a, b))
        return (0, handle_index[key, kind])

    def node(code, *fields):
        encoded.append((code, *fields))
        return (2, len(encoded) - 1)

    for i in members:
        prim, ins, outs = nodes[i].op, nodes[i].inputs, nodes[i].outputs
        kind = role(prim)[0]
        if kind in ("gemm", "gemm_tn"):
            a, b = prim.in_avals
            if kind == "gemm":
                n = b.shape[0] if prim.trans_b else b.shape[1]
                result = node(GEMM, ref(ins[0], True), ref(ins[1], False), int(prim.trans_b), n)
            else:
                result = node(GEMM_TN, ref(ins[0], True), ref(ins[1], True))
        else:
            if kind == "fill":
                expr, total = (("copy", (("in", 0),)),), False
                in_avals, args = prim.in_avals, [ref(ins[0], False)]
            else:
                expr, total = _elementwise_parts(prim)
                in_avals, args = prim.in_avals, [ref(k, True) for k in ins]
            shape = (rows, *(prim.out_aval.shape[1:] if not total else prim.in_avals[0].shape[1:]))
            program = encode(expr, in_avals, shape, dtype)
            order = [j for j, a in enumerate(in_avals) if isinstance(a, DiskArrayTy)] + [
                j for j, a in enumerate(in_avals) if not isinstance(a, DiskArrayTy)
            ]
            result = node(MAP, math.prod(shape[1:]), [args[j] for j in order], program)
            if total:
                result = node(SUM, result)
        (out_key,) = outs
        produced[out_key] = result
        if out_key in used_outside:
            outputs.append(out_key)

    fields = {
        name: []
        for name in (
            "input_kind",
            "input_a",
            "input_b",
            "node_kind",
            "node_width",
            "node_trans_b",
            "node_refs",
            "node_n_regs",
            "node_out_reg",
            "node_instrs",
            "ref_kind",
            "ref_index",
            "op",
            "dst",
            "a",
            "b",
            "c",
            "output_node",
            "output_rank",
            "output_dims",
        )
    }

    def add(**values):
        for name, value in values.items():
            fields[name].append(value)

    for _, kind, a, b in handles:
        add(input_kind=kind, input_a=a, input_b=b)
    for code, *node_fields in encoded:
        width, trans_b, program = 0, 0, None
        if code == MAP:
            width, node_refs, program = node_fields
        elif code == GEMM:
            t, small, trans_b, width = node_fields
            node_refs = [t, small]
        else:  # GEMM_TN reads two tall values, SUM one
            node_refs = list(node_fields)
        for ref_kind, ref_index in node_refs:
            add(ref_kind=ref_kind, ref_index=ref_index)
        for name in ("op", "dst", "a", "b", "c"):
            fields[name] += program[name] if program else ()
        add(
            node_kind=code,
            node_width=width,
            node_trans_b=trans_b,
            node_refs=len(node_refs),
            node_n_regs=program["n_regs"] if program else 0,
            node_out_reg=program["out_regs"][0] if program else 0,
            node_instrs=len(program["op"]) if program else 0,
        )
    for key in outputs:
        shape = avals[key].shape
        add(output_node=produced[key][1], output_rank=len(shape))
        fields["output_dims"] += shape
    encoding = (
        ("dtype", dtype_code(dtype)),
        ("rows", int(rows)),
        *((name, tuple(int(v) for v in values)) for name, values in fields.items()),
    )
    out_avals = tuple(avals[k] for k in outputs)
    label = "+".join(type(nodes[i].op).__name__.lower() for i in members)
    in_keys = [k for k, _, _, _ in handles] + scalars
    op = RowGroup(*(avals[k] for k in in_keys), encoding=encoding, out_avals=out_avals, label=label)
    return Group(op, tuple(in_keys), tuple(outputs))


class RowGroups:
    """The policy of the row-group pass (graph.GroupPolicy)."""

    find_groups = staticmethod(find_groups)
    group_op = staticmethod(group_op)
