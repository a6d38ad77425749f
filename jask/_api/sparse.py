"""Row-sparse optimizer updates of tables on disk: row_sparse.

The gradient of a loss of `table[idx]` is zero outside rows `idx`, but a dense optax step still
reads and rewrites the whole table and every table-shaped state leaf (adam: p, g, m, v read, p,
m, v written: about 7x the table's bytes per step). `row_sparse` runs the transformation on the
rows a batch touched only, reading and writing those rows of the table and of its state in
place (jask.ops.write_rows: journaled, one step a crash cannot tear).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import _runtime
from .._jax import compat
from .._jax.diskarray import DiskArray, is_disk_array
from .._jax.op import apply, describe
from ..ops import TakeInMemory
from ..ops.write_rows import WriteRows
from .io import from_numpy

# Primitives that compute each element of their result from the same element of their
# operands (scalars broadcast): an update built from these alone treats rows independently.
_ELEMENTWISE = frozenset(
    """abs acos acosh add and asin asinh atan atan2 atanh cbrt ceil clamp convert_element_type
    copy copy_p cos cosh div eq erf erf_inv erfc exp exp2 expm1 floor ge gt integer_pow
    is_finite le lgamma digamma log log1p logistic lt max min mul ne neg nextafter not or pow
    rem round rsqrt select_n sign sin sinh sqrt square stop_gradient sub tan tanh xor""".split()
)


def _leaf_name(path) -> str:
    return f"state{jax.tree_util.keystr(path)}"


def _vars(eqn):
    return [v for v in (*eqn.invars, *eqn.outvars) if hasattr(v, "aval")]


def _sub_jaxprs(eqn):
    for value in eqn.params.values():
        for v in value if isinstance(value, (tuple, list)) else (value,):
            if isinstance(v, jax.extend.core.ClosedJaxpr):
                yield v.jaxpr
            elif isinstance(v, jax.extend.core.Jaxpr):
                yield v


def _check_elementwise_jaxpr(jaxpr, shape, what):
    for eqn in jaxpr.eqns:
        subs = list(_sub_jaxprs(eqn))
        if subs:  # jit, custom_jvp_call, ...: what matters is in their bodies
            for sub in subs:
                _check_elementwise_jaxpr(sub, shape, what)
            continue
        shapes = [tuple(v.aval.shape) for v in _vars(eqn)]
        if all(s == () for s in shapes):
            continue  # scalar arithmetic (the step count, a schedule)
        name = eqn.primitive.name
        if name in _ELEMENTWISE and all(s in ((), shape) for s in shapes):
            continue
        if name == "broadcast_in_dim" and eqn.invars[0].aval.shape == ():
            continue
        raise TypeError(
            f"jask.row_sparse: {what} applies {name} to "
            f"{', '.join(str(list(s)) for s in shapes)} (on parameters of shape {list(shape)}, "
            "two rows of the table): "
            "it mixes elements of different rows (as a global-norm clip does), so the update "
            "of some rows needs the others; a row-sparse update needs an elementwise "
            "transformation (sgd, momentum, adam, rmsprop, adagrad, ...)"
        )


class _Layout(NamedTuple):
    """Where the table-shaped leaves of a state are (its treedef and, per leaf, whether it is
    shaped like the table), as init made them."""

    treedef: Any
    row_leaves: tuple[bool, ...]
    dtypes: tuple[Any, ...]


def _layout(inner, row_shape, dtype) -> _Layout:
    """The state's layout for tables with rows of `row_shape` and `dtype`, after checking that
    `inner` is elementwise: every state leaf shaped like the parameters or a scalar, and its
    update built from elementwise primitives (both on a small stand-in of the rows)."""
    probe = jax.ShapeDtypeStruct((2, *row_shape), dtype)
    state = jax.eval_shape(inner.init, probe)
    keyed, treedef = jax.tree_util.tree_flatten_with_path(state)
    for path, leaf in keyed:
        if tuple(leaf.shape) not in ((), probe.shape):
            raise TypeError(
                f"jask.row_sparse: the transformation's {_leaf_name(path)} has shape "
                f"{list(leaf.shape)} for parameters of shape {list(probe.shape)} (two rows of "
                "the table): a row-sparse "
                "update needs each state leaf shaped like the parameters (one value per "
                "element) or a scalar; a factored or per-axis statistic (adafactor) is not "
                "elementwise"
            )
    update = jax.make_jaxpr(lambda g, s, p: inner.update(g, s, p))(probe, state, probe)
    _check_elementwise_jaxpr(update.jaxpr, probe.shape, "the transformation's update")
    return _Layout(
        treedef,
        tuple(tuple(leaf.shape) == probe.shape for _, leaf in keyed),
        tuple(leaf.dtype for _, leaf in keyed),
    )


def _check_table(fn, table):
    if not is_disk_array(table) or table.ndim == 0:
        raise TypeError(
            f"jask.row_sparse: {fn} expects the table as a DiskArray with rows, got "
            f"{describe(table) if hasattr(table, 'shape') else type(table).__name__}"
        )


def _row_indices(idx, n):
    """The indices as an int32/int64 vector; negative ones count from the end (as for
    table[idx]); concrete ones outside [-n, n) raise, traced ones are sent to row n, which the
    write refuses."""
    if not compat.is_tracer(idx):
        idx = np.asarray(idx)
        if idx.dtype.name not in ("int32", "int64") or idx.ndim != 1:
            raise TypeError(
                f"jask.row_sparse: update_'s idx must be an int32 or int64 vector, got "
                f"{idx.dtype.name}{list(idx.shape)}"
            )
        bad = (idx < -n) | (idx >= n)
        if bad.any():
            raise IndexError(
                f"jask.row_sparse: index {int(idx[bad][0])} is out of bounds for a table of "
                f"{n} rows"
            )
        if n > np.iinfo(np.int32).max and not jax.config.jax_enable_x64:
            raise ValueError(
                f"jask.row_sparse: a table of {n} rows needs int64 indices: enable jax_enable_x64"
            )
        idx = np.where(idx < 0, idx + n, idx)
        return jnp.asarray(idx.astype(np.int64) if n > np.iinfo(np.int32).max else idx)
    if idx.dtype.name not in ("int32", "int64") or idx.ndim != 1:
        raise TypeError(
            f"jask.row_sparse: update_'s idx must be an int32 or int64 vector, got "
            f"{idx.dtype.name}{list(idx.shape)}"
        )
    idx = jnp.where(idx < 0, idx + n, idx)
    return jnp.where((idx < 0) | (idx >= n), n, idx)


def _distinct_rows(idx, row_grads):
    """(rows, grads): the distinct indices ascending, then -1 in the slots left over (under jit
    their number is not static), and per slot the sum of the gradients of its index (zero in
    unused slots), as the dense gradient's scatter-add sums duplicates."""
    b = idx.shape[0]
    order = jnp.argsort(idx, stable=True)
    ordered = idx[order]
    first = jnp.concatenate([jnp.ones((min(b, 1),), bool), ordered[1:] != ordered[:-1]])
    slot = jnp.cumsum(first) - 1
    grads = row_grads[order]
    wide = jnp.float32 if jnp.finfo(grads.dtype).bits < 32 else grads.dtype
    summed = jax.ops.segment_sum(grads.astype(wide), slot, num_segments=b).astype(grads.dtype)
    rows = jnp.full((b,), -1, idx.dtype).at[slot].set(ordered)
    return rows, summed


class RowSparse:
    """An elementwise optax transformation applied to the rows of a table a batch touched
    (see `row_sparse`)."""

    def __init__(self, inner):
        if not (
            callable(getattr(inner, "init", None)) and callable(getattr(inner, "update", None))
        ):
            raise TypeError(
                f"jask.row_sparse expects an optax GradientTransformation (init and update), "
                f"got {type(inner).__name__}"
            )
        self.inner = inner
        self._layouts: dict[tuple, _Layout] = {}
        # One compiled computation, eagerly and inside a jitted step, so both give the same
        # bits (XLA's fused code may round differently from op-by-op evaluation).
        self._rows_step = jax.jit(self._rows_update)

    def _rows_update(self, grads, row_state, params):
        updates, new_row_state = self.inner.update(grads, row_state, params)
        return (params + updates).astype(params.dtype), new_row_state  # optax.apply_updates

    def _layout_for(self, table) -> _Layout:
        key = (tuple(table.shape[1:]), jnp.dtype(table.dtype))
        if key not in self._layouts:
            self._layouts[key] = _layout(self.inner, *key)
        return self._layouts[key]

    def init(self, table):
        """The inner transformation's state for `table`: its table-shaped leaves DiskArrays
        (zeros in scratch, as `jnp.zeros_like` of a DiskArray gives), its scalars (the step
        count) in memory."""
        _check_table("init", table)
        layout = self._layout_for(table)
        state = self.inner.init(table)
        leaves, treedef = jax.tree_util.tree_flatten(state)
        leaves = [
            from_numpy(leaf) if row and not is_disk_array(leaf) else leaf
            for leaf, row in zip(leaves, layout.row_leaves)
        ]
        return jax.tree_util.tree_unflatten(treedef, leaves)

    def update_(self, table, state, idx, row_grads):
        """One step on the rows `idx` of `table` and of `state`'s table-shaped leaves, in
        place; returns (table, state).

        Args:
          table: the DiskArray being trained (scratch, or a file opened with mode="r+").
          state: what `init` (or the last `update_`) returned.
          idx: int32 or int64[B] row indices; duplicates' gradients are summed first.
          row_grads: [B, *table.shape[1:]] in memory, of table's dtype: the gradient with
            respect to `table[idx]` (`jnp.take(table, idx, axis=0)`).

        Returns:
          (table, state): eagerly the same DiskArray objects (the scalar leaves new values);
          under jit DiskArrays of the same files, to return from the jitted step.
        """
        _check_table("update_", table)
        layout = self._layout_for(table)
        n, row_shape = table.shape[0], tuple(table.shape[1:])
        leaves, treedef = jax.tree_util.tree_flatten(state)
        if treedef != layout.treedef:
            raise ValueError(
                f"jask.row_sparse: update_'s state has the structure {treedef}, not that of "
                f"init's state for a {describe(table)}: {layout.treedef}"
            )
        for (path, leaf), row, dtype in zip(
            jax.tree_util.tree_flatten_with_path(state)[0], layout.row_leaves, layout.dtypes
        ):
            want = tuple(table.shape) if row else ()
            if tuple(jnp.shape(leaf)) != want or jnp.dtype(leaf.dtype) != dtype:
                raise ValueError(
                    f"jask.row_sparse: {_leaf_name(path)} is {describe(leaf)}; init made a "
                    f"{dtype.name}{list(want)} for a {describe(table)}"
                )
            if row and not is_disk_array(leaf):
                raise TypeError(
                    f"jask.row_sparse: {_leaf_name(path)} must be a DiskArray (as init makes "
                    f"it), got an in-memory {describe(leaf)}"
                )
        grads_shape = tuple(jnp.shape(row_grads))
        if len(grads_shape) != 1 + len(row_shape) or grads_shape[1:] != row_shape:
            raise ValueError(
                f"jask.row_sparse: row_grads {describe(row_grads)} must have shape "
                f"[B, {', '.join(map(str, row_shape))}] for a {describe(table)}"
            )
        if jnp.dtype(row_grads.dtype) != jnp.dtype(table.dtype):
            raise TypeError(
                f"jask.row_sparse: row_grads {describe(row_grads)} must have the table's dtype "
                f"({describe(table)})"
            )
        if jnp.shape(idx) != grads_shape[:1]:
            raise ValueError(
                f"jask.row_sparse: idx of shape {list(jnp.shape(idx))} does not match row_grads "
                f"{describe(row_grads)}: one index per gradient row"
            )
        self._check_budget(table, leaves, layout, grads_shape[0])
        rows, grads = _distinct_rows(_row_indices(idx, n), jnp.asarray(row_grads))
        gather_at = jnp.where(rows < 0, 0, rows)
        targets = [table] + [leaf for leaf, row in zip(leaves, layout.row_leaves) if row]
        gathered = [apply(TakeInMemory, t, gather_at) for t in targets]
        it = iter(gathered[1:])
        row_state = jax.tree_util.tree_unflatten(
            treedef, [next(it) if row else leaf for leaf, row in zip(leaves, layout.row_leaves)]
        )
        new_rows, new_row_state = self._rows_step(grads, row_state, gathered[0])
        new_leaves = jax.tree_util.tree_leaves(new_row_state)
        values = [new_rows] + [
            new.astype(old.dtype)
            for new, old, row in zip(new_leaves, leaves, layout.row_leaves)
            if row
        ]
        written = apply(WriteRows, *targets, rows, *values)
        if all(type(w) is DiskArray and not compat.is_tracer(w._handle) for w in written):
            written = targets  # eagerly: the arrays themselves (the op's results are aliases)
        it = iter(written[1:])
        state = jax.tree_util.tree_unflatten(
            treedef,
            [next(it) if row else new for new, row in zip(new_leaves, layout.row_leaves)],
        )
        return written[0], state

    def _check_budget(self, table, leaves, layout, b):
        """The rows in memory: gathered, updated and new, of the table and every table-shaped
        leaf, plus the gradients; they must fit the memory budget."""
        row_bytes = [
            int(np.prod(table.shape[1:], dtype=np.int64)) * jnp.dtype(table.dtype).itemsize
        ]
        row_bytes += [
            int(np.prod(leaf.shape[1:], dtype=np.int64)) * jnp.dtype(leaf.dtype).itemsize
            for leaf, row in zip(leaves, layout.row_leaves)
            if row
        ]
        needed = b * (4 * sum(row_bytes) + 2 * row_bytes[0])
        budget = _runtime.memory_budget()
        if needed > budget:
            raise ValueError(
                f"jask.row_sparse: a batch of {b} rows of a {describe(table)} and its "
                f"{len(row_bytes) - 1} table-shaped state leaves holds {needed} bytes in memory, "
                f"more than the memory budget of {budget} bytes; use smaller batches or "
                f"jask.set_memory_budget({needed})"
            )


def row_sparse(inner) -> RowSparse:
    """An elementwise optax transformation applied to the rows of an embedding table a batch
    touched, in place on disk: only those rows of the table and of its optimizer state are read
    and written.

    `opt.init(table)` gives the inner transformation's state: leaves shaped like the table are
    DiskArrays (zeros in scratch), scalars (adam's count) in memory.
    `opt.update_(table, state, idx, row_grads)` gathers rows `idx` of the table and of every
    table-shaped state leaf, runs the inner update on them (with the gradients of duplicate
    indices summed, as the dense gradient sums them), and writes the new rows back in place;
    the scalars advance once per step. It works eagerly and inside `jax.jit` (return the table
    and state it gives from the jitted step; the step compiles once).

    Semantics are lazy (TensorFlow's LazyAdam): rows a step does not touch, and their state,
    do not change. A dense step on the full gradient (zero outside `idx`) differs for every
    transformation whose update of a zero gradient is not zero: dense adam decays m and v of
    untouched rows every step (m <- b1 m, v <- b2 v) and so still moves them (by
    -lr m_hat / (sqrt(v_hat) + eps)); momentum keeps moving them with the decayed velocity; the
    lazy step leaves them as they were, and a row's m and v decay only on steps that touch it.
    The bias corrections use the global step count, as TensorFlow's LazyAdam does. For
    transformations whose update of a zero gradient is zero and leaves the state unchanged
    (`optax.sgd` without momentum, adagrad's accumulator of squares, `optax.scale`), lazy equals
    dense: the touched rows get the dense step's values and the others are unchanged by both.

    A crash at any moment leaves the table and its state all old or all new for that step: the
    new rows of a table in a lasting file go to a flushed journal beside it first (replayed at
    the next open), and a state in scratch dies with the process. Readers in this process never
    see half a step. At most one of the table and its state leaves may be a lasting file.

    Args:
      inner: an elementwise optax GradientTransformation: each state leaf shaped like the
        parameters or a scalar, and its update built from elementwise operations (sgd, momentum,
        adam, adamw without masks, rmsprop, adagrad, ...). Others (a global-norm clip, factored
        adafactor) raise TypeError when the table is first seen (at init), naming what mixes rows.

    Returns:
      A `RowSparse` with `init(table)` and `update_(table, state, idx, row_grads)`.

    >>> import numpy as np, optax, jask
    >>> table = jask.DiskArray.from_numpy(np.ones((6, 2), np.float32))
    >>> opt = jask.row_sparse(optax.sgd(0.5))
    >>> state = opt.init(table)
    >>> table, state = opt.update_(table, state, np.array([4, 1, 4]), np.ones((3, 2), np.float32))
    >>> np.asarray(table)[:, 0].tolist()
    [1.0, 0.5, 1.0, 1.0, 0.0, 1.0]
    """
    return RowSparse(inner)
