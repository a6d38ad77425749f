"""jnp.searchsorted with a DiskArray among its operands (and so jnp.digitize, jnp.histogram and
jnp.interp), at the cost of a pass over the data.

JAX's searchsorted is a binary search: a scan of log2(n) steps, each a gather and a compare,
which on a DiskArray would be engine calls at every step. Jask's patch of it (compat's
"searchsorted_of_disk_arrays") calls `searchsorted` here instead, which lets XLA search blocks
in memory with JAX's own searchsorted (the same side, method and result dtype):

1. **It fits**: the DiskArray operands and the result fit the allowance (half the memory
   budget: the XLA route's rule). They are read whole and searched in memory; the result is
   in memory.
2. **The sorted array fits** (or is in memory): a `BlockMap` over blocks of the queries, the
   sorted array whole. One pass over the queries; the result is a DiskArray (in memory for
   in-memory queries).
3. **The sorted array is a larger DiskArray**: `SearchBlocks`. Cut into blocks of W rows, the
   first element of each block (`a[::W]`, one strided read) says which block holds each
   query's insertion point: for k = searchsorted(a[::W], q) - 1, every element of the blocks
   before k is on q's left and every element of the blocks after k on its right, so
   searchsorted(a, q) = s + searchsorted(a[s:s + W], q) for any s <= kW with s + W >= (k+1)W
   (0 for k = -1). Each block of queries reads only the blocks of `a` its values fall in:
   every block for random queries, a few for sorted ones. Where even a[::W] does not fit,
   each block of queries reads every block of `a` and adds the counts left of q in each.

Case 3 assumes what jnp.searchsorted assumes, that `a` is sorted (NaNs last); for an unsorted
`a` JAX's binary search and this one may return different positions.

The result is an integer (no derivative): the operands pass through stop_gradient, so that
no tangent reaches the blocks.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from .. import _runtime
from .._dtypes import storage_dtype
from .._jax import compat
from .._jax.diskarray import DiskArray, DiskArrayTy
from .._jax.op import Op, apply
from ..ops import ToInMemory
from ..ops.block_map import ROWS, SUM, BlockFn, BlockMap, Empty, is_traced, put_block, rows_reader
from .blocked import allowance, nbytes


def searchsorted(sorted_arr, query, *, side: str, method: str, dtype) -> jax.Array:
    """jnp.searchsorted(sorted_arr, query) for a 1-d `sorted_arr`, with a DiskArray (or its
    tracer) among the two, by the rules above. `dtype` is the result's (the one jnp picks)."""
    dtype = np.dtype(dtype)
    a, v = _without_derivative(sorted_arr), _without_derivative(query)
    if isinstance(v, DiskArray) and v.ndim == 0:
        v = apply(ToInMemory, v)
    held = sum(nbytes(compat.typeof(x)) for x in (a, v) if isinstance(x, DiskArray))
    out = compat.ShapedArray(np.shape(v), dtype)
    search = functools.partial(compat.searchsorted_by_jax, side=side, method=method, dtype=dtype)
    if held + nbytes(out) <= allowance():
        return search(_in_memory(a), _in_memory(v))
    if isinstance(a, DiskArray) and not _fits_whole(a):
        return _by_sorted_blocks(a, v, side=side, method=method, dtype=dtype)
    if not isinstance(v, DiskArray):  # in-memory queries: an in-memory result, `a` read whole
        return search(_in_memory(a), v)
    return _by_query_blocks(a, v, side=side, method=method, dtype=dtype)


def _without_derivative(x):
    # eager values have no tangents; a traced DiskArray's stop_gradient is a view
    return jax.lax.stop_gradient(x) if compat.is_tracer(x) else x


def _in_memory(x):
    return apply(ToInMemory, x) if isinstance(x, DiskArray) else x


def _fits_whole(a) -> bool:
    """Whether a DiskArray sorted array is held whole beside blocks of the queries: it leaves
    them at least an eighth of the allowance (reading it once beats reading it per block)."""
    return nbytes(compat.typeof(a)) <= allowance() - allowance() // 8


def _search_bytes(method: str, n_sorted: int) -> int:
    """XLA's bytes per query of JAX's searchsorted beyond the query and its result: the
    compare_all method holds a comparison with every sorted element."""
    return n_sorted if method == "compare_all" else 0


# -- rule 2: blocks of the queries, the sorted array whole ----------------------------


def _by_query_blocks(a, v, *, side, method, dtype):
    n_queries = int(np.prod(v.shape, dtype=np.int64))
    flat = jnp.reshape(v, (n_queries,))
    per_query = v.dtype.itemsize + dtype.itemsize + _search_bytes(method, a.shape[0])
    room = allowance() - (nbytes(compat.typeof(a)) if isinstance(a, DiskArray) else 0)
    block = int(max(1, min(n_queries, room // per_query)))
    (found,) = apply(
        BlockMap,
        flat,
        a,
        fn=_query_block_fn(side, method, dtype),
        blocked=(True, False),
        block=block,
    )
    return jnp.reshape(found, v.shape)


@functools.cache
def _query_block_fn(side: str, method: str, dtype: np.dtype) -> BlockFn:
    """JAX's searchsorted of a block of queries in the whole sorted array (made once per
    side, method and dtype: each compiles once per block shape)."""

    def fn(queries, sorted_arr):
        return (
            compat.searchsorted_by_jax(sorted_arr, queries, side=side, method=method, dtype=dtype),
        )

    return BlockFn(fn, (ROWS,), f"searchsorted[{side}]")


# -- rule 3: blocks of the sorted array ----------------------------------------------


def _by_sorted_blocks(a, v, *, side, method, dtype):
    n = a.shape[0]
    itemsize = a.dtype.itemsize
    quarter = allowance() // 4
    a_block = int(max(1, min(n, quarter // itemsize)))
    n_blocks = -(-n // a_block)
    bounded = n_blocks * itemsize <= quarter
    if not bounded:  # no room for a[::W]: larger blocks, each read per block of queries
        a_block = int(max(1, min(n, 2 * quarter // itemsize)))
        n_blocks = -(-n // a_block)
    n_queries = int(np.prod(np.shape(v), dtype=np.int64))
    flat = jnp.reshape(v, (n_queries,))
    bounds = ()
    if bounded:
        first = jax.lax.slice(a, (0,), (n,), (a_block,))  # one strided read
        bounds = (_in_memory(first),)
    if isinstance(v, DiskArray):
        per_query = v.dtype.itemsize + 4 * dtype.itemsize
        per_query += _search_bytes(method, a_block + (n_blocks if bounded else 0))
        room = allowance() - a_block * itemsize - (n_blocks * itemsize if bounded else 0)
        q_block = int(max(1, min(n_queries, room // per_query)))
    else:  # in-memory queries are searched whole: they and their result are in memory already
        q_block = max(1, n_queries)
    found = apply(
        SearchBlocks,
        a,
        flat,
        *bounds,
        side=side,
        method=method,
        dtype=dtype,
        a_block=a_block,
        q_block=q_block,
    )
    return jnp.reshape(found, np.shape(v))


class SearchBlocks(Op):
    """searchsorted(a, queries) of a sorted 1-d DiskArray `a` read in blocks of `a_block`
    rows, for 1-d queries (a DiskArray read in blocks of `q_block`, or in memory). With the
    third operand, a[::a_block], each block of queries reads the blocks of `a` its insertion
    points lie in; without it, every block. The result has the queries' kind: a DiskArray or an
    in-memory array."""

    name = "searchsorted_blocks"
    kernel = None  # no engine kernel of its own: expand drives `rows`, `empty` and `put_block`
    zero_derivative = True  # an integer result

    def out_type(self, a, queries, *bounds, side, method, dtype, a_block, q_block):
        if isinstance(queries, DiskArrayTy):
            return DiskArrayTy(queries.shape, storage_dtype(dtype))
        return compat.ShapedArray(queries.shape, dtype)

    def expand(self, a, queries, *bounds):
        _runtime.ensure_scratch()
        bounds = bounds[0] if bounds else None
        operands = [x for x in (a, queries, bounds) if x is not None]
        if compat.is_eager() and not any(is_traced(x) for x in operands):
            return self._run_eagerly(a, queries, bounds)
        return self._run_lowered(a, queries, bounds)

    def _query_start(self, index):
        """The first query of block `index` (an int, or traced): every block has q_block
        queries (one shape to compile), the last block the last q_block, which overlap the
        block before it (their positions are written twice, the same values)."""
        last = self.in_avals[1].shape[0] - self.q_block
        if compat.is_tracer(index):
            return jnp.minimum(index * self.q_block, last)
        return min(index * self.q_block, last)

    def _n_query_blocks(self) -> int:
        return -(-self.in_avals[1].shape[0] // self.q_block)

    def _a_start(self, index):
        """The first row read for block `index` of `a` (an int, or traced): the last block is
        read as the last a_block rows (one block shape), which start in the block before it."""
        last = self.in_avals[0].shape[0] - self.a_block
        if compat.is_tracer(index):
            return jnp.minimum(index * self.a_block, last)
        return min(int(index) * self.a_block, last)

    def _n_blocks(self) -> int:
        return -(-self.in_avals[0].shape[0] // self.a_block)

    def _search_params(self):
        return dict(side=self.side, method=self.method, dtype=self.dtype)

    # -- evaluation -------------------------------------------------------------
    def _run_eagerly(self, a, queries, bounds):
        if not isinstance(queries, DiskArray):
            return self._search_eagerly(a, bounds, jnp.asarray(queries))
        target = Empty(dtype=self.out_aval.dtype, shape=self.out_aval.shape)._run_eagerly(())
        for index in range(self._n_query_blocks()):
            start = self._query_start(index)
            block = rows_reader(queries.aval, self.q_block)._run_eagerly((queries, np.int32(start)))
            found = self._search_eagerly(a, bounds, block).astype(target.dtype)
            put_block(target, found)._run_eagerly((target, np.int32(start), found))
        return target

    def _search_eagerly(self, a, bounds, queries):
        found = jnp.zeros(queries.shape, self.dtype)
        if bounds is None:
            for index in range(self._n_blocks()):
                start = self._a_start(index)
                block = rows_reader(a.aval, self.a_block)._run_eagerly((a, np.int32(start)))
                first = index * self.a_block
                found = _add_count(block, queries, found, start, first, **self._search_params())
            return found
        which = _block_of(bounds, queries, **self._search_params())
        for index in np.unique(np.asarray(which)):
            if index < 0:  # before a[0]: position 0
                continue
            start = self._a_start(index)
            block = rows_reader(a.aval, self.a_block)._run_eagerly((a, np.int32(start)))
            found = _place(block, queries, which, found, int(index), start, **self._search_params())
        return found

    def _run_lowered(self, a, queries, bounds):
        if not isinstance(queries, DiskArray):
            return self._search_lowered(a, bounds, queries)
        aval = self.out_aval
        handle = Empty(dtype=aval.dtype, shape=aval.shape)._lower(())._lowered_handle()

        def step(index, handle):
            start = jnp.asarray(self._query_start(index), jnp.int32)
            block = rows_reader(queries.aval, self.q_block)._lower((queries, start))
            found = self._search_lowered(a, bounds, block).astype(aval.dtype)
            target = DiskArray(aval, handle)
            return put_block(target, found)._lower((target, start, found))._lowered_handle()

        handle = jax.lax.fori_loop(0, self._n_query_blocks(), step, handle)
        return DiskArray(aval, handle)

    def _search_lowered(self, a, bounds, queries):
        params = self._search_params()
        found = jnp.zeros(queries.shape, self.dtype)

        def read(index):
            start = self._a_start(index)
            block = rows_reader(a.aval, self.a_block)._lower((a, jnp.asarray(start, jnp.int32)))
            return block, start

        if bounds is None:

            def add(index, found):
                block, start = read(index)
                return _add_count(block, queries, found, start, index * self.a_block, **params)

            return jax.lax.fori_loop(0, self._n_blocks(), add, found)
        which = _block_of(bounds, queries, **params)
        order = jnp.sort(which)  # the blocks to read, each once: from one to the next greater

        def place(carry):
            position, found = carry
            index = order[position]
            block, start = read(index)
            found = _place(block, queries, which, found, index, start, **params)
            return jnp.sum(order <= index, dtype=jnp.int32), found

        first = jnp.sum(order < 0, dtype=jnp.int32)  # before a[0]: position 0
        _, found = jax.lax.while_loop(lambda c: c[0] < order.shape[0], place, (first, found))
        return found

    def __repr__(self):
        return f"jask.searchsorted_blocks[{self.side}, a_block={self.a_block}]"


@functools.partial(jax.jit, static_argnames=("side", "method", "dtype"))
def _block_of(bounds, queries, *, side, method, dtype):
    """The block of `a` holding each query's insertion point (-1: before a[0])."""
    found = compat.searchsorted_by_jax(bounds, queries, side=side, method=method, dtype=dtype)
    return found - 1


@functools.partial(jax.jit, static_argnames=("side", "method", "dtype"))
def _place(block, queries, which, found, index, start, *, side, method, dtype):
    """`found` with the positions of the queries in block `index` (which == index), read as
    the rows of `a` from `start` on: every row before `start` is on those queries' left."""
    within = compat.searchsorted_by_jax(block, queries, side=side, method=method, dtype=dtype)
    return jnp.where(which == index, (start + within).astype(dtype), found)


@functools.partial(jax.jit, static_argnames=("side", "method", "dtype"))
def _add_count(block, queries, found, start, first, *, side, method, dtype):
    """`found` plus, per query, the rows of `a` on its left among rows [first, start + len):
    the block read from `start` holds first - start rows of the block before it."""
    within = compat.searchsorted_by_jax(block, queries, side=side, method=method, dtype=dtype)
    return found + jnp.maximum(within - (first - start), 0).astype(dtype)


# -- counting: scatter-add at DiskArray indices into a small in-memory array ---------------
#
# jnp.histogram and jnp.bincount end in zeros(m).at[indices].add(weights) with the indices
# (and weights) as long as the data: a sum over blocks of the indices of the scatter-adds of
# each block into zeros, which is what a BlockMap's SUM result is.


def adds_by_blocks(x, updates, update_axis: int, operand_axis: int | None) -> bool:
    """Whether `scatter_add_by_blocks` takes a scatter-add at DiskArray indices into `x`: an
    in-memory operand small enough for two copies (the sum and a block's) in half the
    allowance, updates blocked along their leading axis with the indices', and no operand
    axis blocked with them."""
    if isinstance(x, DiskArray) or operand_axis is not None or update_axis != 0:
        return False
    return 2 * nbytes(compat.typeof(x)) <= allowance() // 2 and np.ndim(updates) >= 1


def scatter_add_by_blocks(x, indices, updates, dimension_numbers, mode, unique: bool):
    """lax.scatter_add(x, indices, updates) for DiskArray indices (axis 0: the index vectors)
    and updates of the same leading length (DiskArrays or in memory): one pass over both, XLA
    adding each block into zeros of x's type, the blocks' sums added to x. Float sums may
    round differently from one sequential scatter."""
    n = indices.shape[0]
    per_row = (nbytes(compat.typeof(indices)) + nbytes(compat.typeof(updates))) // max(1, n)
    room = allowance() - 2 * nbytes(compat.typeof(x))
    block = int(max(1, min(n, room // max(1, per_row))))
    fn = _scatter_add_fn(tuple(x.shape), np.dtype(x.dtype), dimension_numbers, mode, unique)
    (total,) = apply(BlockMap, indices, updates, fn=fn, blocked=(True, True), block=block)
    return x + total


@functools.cache
def _scatter_add_fn(shape, dtype, dimension_numbers, mode, unique) -> BlockFn:
    def fn(indices, updates):
        zeros = jnp.zeros(shape, dtype)
        added = jax.lax.scatter_add(
            zeros, indices, updates, dimension_numbers, mode=mode, unique_indices=unique
        )
        return (added,)

    return BlockFn(fn, (SUM,), "scatter_add")


# -- lookups: gathers at DiskArray indices from an in-memory array ------------------------
#
# jnp.interp ends in fp[i] and xp[i] with i = searchsorted(xp, x) as long as the data: each
# block of i gathers from the whole (small) table, a BlockMap whose derivative with respect
# to the table is the sum over blocks of their scatter-adds.


def gather_by_blocks(x, indices, dimension_numbers, slice_sizes, mode, fill_value):
    """lax.gather(x, indices) of an in-memory `x` at DiskArray indices whose leading axis (the
    index vectors) is the result's leading axis: one pass over the indices, XLA gathering each
    block, the result a DiskArray."""
    n = indices.shape[0]
    fn = _gather_fn(dimension_numbers, tuple(slice_sizes), mode, fill_value)
    row = jax.eval_shape(
        fn.fn,
        jax.ShapeDtypeStruct((1, *indices.shape[1:]), indices.dtype),
        jax.ShapeDtypeStruct(x.shape, x.dtype),
    )[0]
    per_row = nbytes(compat.typeof(indices)) // max(1, n) + nbytes(row)
    block = int(max(1, min(n, allowance() // max(1, per_row))))
    (found,) = apply(BlockMap, indices, x, fn=fn, blocked=(True, False), block=block)
    return found


def _gather_fn(dimension_numbers, slice_sizes, mode, fill_value) -> BlockFn:
    def fn(indices, x):
        found = jax.lax.gather(
            x, indices, dimension_numbers, slice_sizes, mode=mode, fill_value=fill_value
        )
        return (found,)

    try:
        key = (dimension_numbers, slice_sizes, mode, fill_value)
        hash(key)
    except TypeError:  # an array fill value: made per call
        return BlockFn(fn, (ROWS,), "gather")
    if key not in _GATHER_FNS:
        _GATHER_FNS[key] = BlockFn(fn, (ROWS,), "gather")
    return _GATHER_FNS[key]


_GATHER_FNS: dict = {}
