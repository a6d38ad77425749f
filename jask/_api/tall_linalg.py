"""QR and SVD of tall DiskArrays out of core (TSQR), and what jax.numpy builds on them: lstsq,
pinv, matrix_rank, norm(ord=2 / 'nuc'), cond, PCA.

jax.lax's `qr` and `svd` of a DiskArray take the XLA route (jask/_api/xla_route.py) when it
fits half the memory budget or is a batch of matrices that each fit. A 2-D matrix larger than
that, tall (m >= n) with n x n small, takes the rules here:

- **TSQR** (`TSQR`): X's rows in blocks of b rows (b >= n, sized to the allowance). Pass 1,
  one `BlockMap` (each block told its number by an int32 DiskArray of the rows' block
  numbers, written by `GenerateRows`: a BlockMap's blocks do not know where they are): the R
  factor of each block's QR, stacked in memory (nb*n x n). The stack's
  QR in memory, Qs R, gives X's R (the stack is [R_1; ...; R_nb] = Qs R). Pass 2 (only when
  Q is wanted): Q's rows of block k are Q_k @ Qs[k*n:(k+1)*n], Q_k the block's own Q
  (computed again: a read of X costs less than writing and reading every Q_k). Q is a
  DiskArray, R an in-memory jax.Array. When the stack does not fit a quarter of the
  allowance, the rows are taken in groups whose stacks do (one more level: the groups'
  R factors stacked and factored in memory, each group's Q multiplied by its slice of that
  QR's Q, the groups' Qs concatenated).
- **Signs** are LAPACK's: a QR is unique only up to the signs of Q's columns and R's rows.
  Householder QR (LAPACK geqrf, jnp.linalg.qr) picks them so that each reflector's pivot is
  away from zero; the same choice is a sign-choosing LU of Q's top n x n block (Ballard et
  al., "Reconstructing Householder vectors from TSQR"), which needs only the first block's
  rows. So Q and R here are jnp.linalg.qr's up to rounding (where a pivot is near zero, as for
  a rank-deficient X, LAPACK's own choice is rounding-dependent too).
- **SVD** of a tall X: TSQR's R, the SVD of R in memory (U_r s Vt, by JAX's svd with the
  primitive's own params), U = Q U_r, streamed as pass 2 with Qs U_r in place of Qs.
  `compute_uv=False` runs pass 1 only. A wide X (m < n) is transposed (one streamed copy):
  X = L Q^T with L = R^T, as LAPACK's gesdd takes a wide matrix's LQ; U s Vt_l = svd(L), and
  Vt = (Q Vt_l^T)^T (pass 2, then one more transposing copy). The singular vectors' signs are
  those of LAPACK's SVD of the small factor: for a tall X they are jnp.linalg.svd's where
  gesdd itself starts with a QR (m at least about 11n/6); for a wide X they may differ from
  jnp's (each pair u_i, v_i flipped together: U s Vt is the same matrix).
- **Wide QR** (m < n, m x m small): the QR of the first m columns in memory, R = Q^T X
  streamed (a DiskArray, its first m columns replaced by the exactly triangular R_1).

A batch of matrices each too large for memory is taken one matrix (a view) at a time, the
results stacked. Refused with a NotImplementedError naming the shapes and the budget:
full_matrices=True with a huge dimension (Q or U would be m x m; jnp.linalg.svd's default, so
it says to pass full_matrices=False), pivoting, an n x n factor that does not fit.

Every piece is a differentiable Jask op, BlockMap or jax.numpy function of in-memory arrays,
so jax.grad and jax.jvp of these rules come from the pieces (each pass's derivative is a
BlockMap of the block function's own).
"""

from __future__ import annotations

import functools

import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.lax.linalg import qr_p, svd_p

from .. import _runtime
from .._jax import compat
from .._jax.diskarray import is_disk_array
from .._jax.op import apply, describe
from .._jax.primitives import rule
from ..ops.block_map import ROWS, SUM, BlockFn, BlockMap
from ..ops.generate import GenerateRows, RowsFn
from ..ops.in_memory import ToInMemory
from . import xla_route
from .blocked import allowance

_HIGHEST = lax.Precision.HIGHEST


class _NotHere(NotImplementedError):
    """A case the XLA route takes (in memory, or block by block over a batch axis)."""


# -- the plan: how many rows per block ------------------------------------------------


def _row_block(m: int, n: int, itemsize: int, room: int) -> int:
    """Rows per block: a block of X, its Q, the block's result and XLA's temporaries, and
    those of the block's derivative (the QR's JVP holds several more; eight copies of a row in
    all), and its block number fit `room`; at least n rows (each block's R is n x n)."""
    per_row = 8 * n * itemsize + 4
    return int(min(m, max(n, room // per_row)))


def _stack_bytes(blocks: int, n: int, itemsize: int) -> int:
    """Memory held by pass 1's stacked R factors: the sum, a block's update and XLA's copy."""
    return 3 * blocks * n * n * itemsize


def _too_large(what: str, x, detail: str) -> NotImplementedError:
    return NotImplementedError(
        f"{what} of {describe(x)}{compat.user_frame()}: {detail} (memory budget "
        f"{_runtime.memory_budget()} bytes, half of it for XLA's blocks; jask.set_memory_budget)"
    )


# -- TSQR -------------------------------------------------------------------------------


class TSQR:
    """The reduced QR of a tall 2-D DiskArray x (m >= n) by TSQR: `r` (n x n, in memory,
    computed on construction: pass 1) and `q(right)`, Q @ right as a DiskArray (pass 2;
    `right` n x k in memory, default the identity), so that an SVD's U = Q U_r costs no more
    passes than Q. With signs=True, LAPACK's signs (one more read of x's first block)."""

    def __init__(self, x, *, signs: bool = True):
        m, n = x.shape
        itemsize = np.dtype(x.dtype).itemsize
        quarter = allowance() // 4
        if _stack_bytes(1, n, itemsize) > quarter:
            raise _too_large(
                "jax.lax.qr (TSQR)",
                x,
                f"the {n} x {n} R factor and its copies need {_stack_bytes(1, n, itemsize)} "
                f"bytes, more than a quarter of the XLA route's allowance ({quarter} bytes)",
            )
        self.x, self.n = x, n
        self.block = b = _row_block(m, n, itemsize, 3 * quarter)
        blocks = -(-m // b)
        if _stack_bytes(blocks, n, itemsize) <= quarter:
            self.groups = [x]
            self.inner = [None]
            self.numbers = [_block_numbers(m, b)]
            qs, r = jnp.linalg.qr(_stacked_r(x, self.numbers[0], b))
        else:  # one more level: groups of blocks whose stacks fit (views of x's rows)
            per_group = max(1, quarter // _stack_bytes(1, n, itemsize))
            starts = range(0, m, per_group * b)
            if _stack_bytes(len(starts), n, itemsize) > quarter:
                raise _too_large(
                    "jax.lax.qr (TSQR)",
                    x,
                    f"{len(starts)} groups of {per_group} blocks of {b} rows: their stacked "
                    f"{n} x {n} R factors need {_stack_bytes(len(starts), n, itemsize)} bytes, "
                    f"more than a quarter of the XLA route's allowance ({quarter} bytes)",
                )
            self.groups = [lax.slice(x, (s, 0), (min(m, s + per_group * b), n)) for s in starts]
            self.numbers = [_block_numbers(g.shape[0], b) for g in self.groups]
            factors = [
                jnp.linalg.qr(_stacked_r(g, k, b)) for g, k in zip(self.groups, self.numbers)
            ]
            self.inner = [q for q, _ in factors]
            qs, r = jnp.linalg.qr(jnp.concatenate([r for _, r in factors]))
        self.qs = qs
        if signs:
            first = qs[:n] if self.inner[0] is None else self.inner[0] @ qs[:n]
            d = _lapack_signs(_top_rows(x, b, first, n))
            self.r, self.qs = d[:, None] * r, qs * d[None, :]
        else:
            self.r = r

    def q(self, right=None):
        w = self.qs if right is None else jnp.matmul(self.qs, right, precision=_HIGHEST)
        w = w.astype(self.x.dtype)
        n = self.n
        if self.inner[0] is None:
            return _q_times(self.x, self.numbers[0], self.block, w)
        parts = [
            _q_times(g, k, self.block, jnp.matmul(qi, w[i * n : (i + 1) * n], precision=_HIGHEST))
            for i, (g, k, qi) in enumerate(zip(self.groups, self.numbers, self.inner))
        ]
        return jnp.concatenate(parts, axis=0)


def _stacked_r(x, numbers, b: int):
    """Pass 1: [R_1; ...; R_nb] (nb*n x n, in memory), R_k the R of rows [k*b, (k+1)*b) of x
    (zero rows below it when the last block has fewer than n rows); `numbers`: x's rows' block
    numbers."""
    m, n = x.shape
    blocks = -(-m // b)
    (stack,) = apply(
        BlockMap,
        x,
        numbers,
        fn=_r_fn(blocks, n, np.dtype(x.dtype)),
        blocked=(True, True),
        block=b,
    )
    return stack


def _q_times(x, numbers, b: int, w):
    """Pass 2: the rows of Q @ right, block k's being Q_k @ w[k*n:(k+1)*n] (a DiskArray)."""
    m, n = x.shape
    (q,) = apply(
        BlockMap,
        x,
        numbers,
        w.astype(x.dtype),
        fn=_q_fn(n),
        blocked=(True, True, False),
        block=b,
    )
    return q


def _top_rows(x, b: int, qs, n: int):
    """The first n rows of X's Q as TSQR makes it (block 1's Q times Qs's first n rows), out of
    the derivative: only their signs are used."""
    first = _in_memory(lax.slice(x, (0, 0), (min(b, x.shape[0]), n)))
    q1, _ = jnp.linalg.qr(lax.stop_gradient(first))
    return jnp.matmul(q1[:n], lax.stop_gradient(qs[:n]), precision=_HIGHEST)


def _in_memory(x):
    """x in memory (a slice small enough is one already: jask's slice rule picks by size)."""
    return apply(ToInMemory, x) if is_disk_array(x) else x


def _lapack_signs(q_top):
    """The column signs that make Q Householder QR's (LAPACK's): LU of Q's top n x n block
    minus a diagonal of signs, each sign the opposite of its pivot's."""
    n = q_top.shape[0]
    a = q_top.astype(jnp.promote_types(q_top.dtype, jnp.float32))
    index = jnp.arange(n)

    def step(i, carry):
        a, signs = carry
        pivot = a[i, i]
        sign = jnp.where(pivot < 0, 1.0, -1.0).astype(a.dtype)
        a = a.at[i, i].add(-sign)
        below = index > i
        column = jnp.where(below, a[:, i] / a[i, i], 0.0)
        a = a - jnp.outer(column, jnp.where(below, a[i], 0.0))
        return a, signs.at[i].set(sign)

    _, signs = lax.fori_loop(0, n, step, (a, jnp.zeros(n, a.dtype)))
    return lax.stop_gradient(signs.astype(q_top.dtype))


@functools.cache
def _block_numbers_fn(m: int, b: int) -> RowsFn:
    def fn(start, count):
        return ((start + lax.iota(np.int32, count)) // b,)

    return RowsFn(fn, (((m,), np.dtype(np.int32)),), f"block_numbers[{b}]")


def _block_numbers(m: int, b: int):
    """A DiskArray of m int32s, row i's block number i // b (what a BlockMap's block function
    is told of where its rows are)."""
    block = int(max(1, min(m, allowance() // 8)))
    (numbers,) = apply(GenerateRows, fn=_block_numbers_fn(m, b), rows=m, blocked=(), block=block)
    return numbers


@functools.cache
def _r_fn(blocks: int, n: int, dtype: np.dtype) -> BlockFn:
    def fn(rows, numbers):
        r = jnp.linalg.qr(rows, mode="r")
        r = jnp.pad(r, ((0, n - r.shape[0]), (0, 0)))
        stack = jnp.zeros((blocks * n, n), dtype)
        return (lax.dynamic_update_slice(stack, r.astype(dtype), (numbers[0] * n, jnp.int32(0))),)

    return BlockFn(fn, (SUM,), "tsqr_r")


@functools.cache
def _q_fn(n: int) -> BlockFn:
    def fn(rows, numbers, w):
        q, _ = jnp.linalg.qr(rows)
        part = lax.dynamic_slice(w, (numbers[0] * n, jnp.int32(0)), (n, w.shape[1]))[: q.shape[1]]
        return (jnp.matmul(q, part, precision=_HIGHEST),)

    return BlockFn(fn, (ROWS,), "tsqr_q")


# -- the rules --------------------------------------------------------------------------


def _per_matrix(name: str, primitive, of_matrix, x, params):
    """The primitive's results: of_matrix(x) for a 2-D x; for a batch of matrices each too
    large for memory, of_matrix of each matrix (a view of x), the results stacked. Raises
    _NotHere for the cases the XLA route takes: it fits, or a batch whose matrices each fit
    (block by block over the batch)."""
    outs = xla_route.out_avals(primitive, [x], params)
    needed = xla_route.in_memory_bytes([x], outs)
    if needed <= allowance():
        raise _NotHere(f"jax.lax.{name} of {describe(x)} fits in memory")
    if len(x.shape) == 2:
        return of_matrix(x)
    batch, (m, n) = tuple(x.shape[:-2]), tuple(x.shape[-2:])
    count = int(np.prod(batch, dtype=np.int64))
    if needed // max(1, count) <= allowance():
        raise _NotHere(f"jax.lax.{name} of {describe(x)}: block by block over the batch")
    flat = jnp.reshape(x, (count, m, n))
    each = [of_matrix(lax.index_in_dim(flat, i, keepdims=False)) for i in range(count)]
    return [
        jnp.reshape(jnp.stack(parts), (*batch, *out.shape[len(batch) :]))
        for parts, out in zip(zip(*each), outs)
    ]


@rule("qr")
def qr(x, *, pivoting, full_matrices, use_magma=None):
    """jax.lax.linalg.qr_p of a DiskArray too large for memory: TSQR (see the module)."""
    params = dict(pivoting=pivoting, full_matrices=full_matrices, use_magma=use_magma)
    return _per_matrix("qr", qr_p, lambda a: _qr(a, pivoting, full_matrices), x, params)


def _qr(x, pivoting: bool, full_matrices: bool):
    m, n = x.shape
    if pivoting:
        raise _too_large(
            "jax.lax.qr with pivoting=True",
            x,
            "column-pivoted QR is computed in memory only, and this matrix does not fit",
        )
    if full_matrices and m > n:
        raise _too_large(
            "jnp.linalg.qr(mode='complete')",
            x,
            f"the complete Q is {m} x {m}; Jask computes the reduced QR out of core "
            f"(mode='reduced', jnp.linalg.qr's default: Q {m} x {n}, R {n} x {n})",
        )
    if m >= n:
        factor = TSQR(x)
        return [factor.q(), factor.r]
    return list(_wide_qr(x))


def _wide_qr(x):
    """QR of a wide matrix (m < n, m x m small): Q from its first m columns, R = Q^T X."""
    m, n = x.shape
    itemsize = np.dtype(x.dtype).itemsize
    if 4 * m * m * itemsize > allowance():
        raise _too_large(
            "jax.lax.qr",
            x,
            f"a wide matrix's Q is {m} x {m}, more than a quarter of the XLA route's allowance",
        )
    first = _in_memory(lax.slice(x, (0, 0), (m, m)))
    q, r1 = jnp.linalg.qr(first)
    r = jnp.matmul(q.T.astype(x.dtype), x, precision=_HIGHEST)
    r = lax.dynamic_update_slice(r, r1.astype(x.dtype), (0, 0))
    return q, r


@rule("svd")
def svd(x, *, full_matrices, compute_uv, subset_by_index=None, algorithm=None):
    """jax.lax.linalg.svd_p of a DiskArray too large for memory: TSQR, then the SVD of R in
    memory (see the module). Results in svd_p's order: s, then U and Vt."""
    params = dict(
        full_matrices=full_matrices,
        compute_uv=compute_uv,
        subset_by_index=subset_by_index,
        algorithm=algorithm,
    )
    return _per_matrix("svd", svd_p, lambda a: _svd(a, params), x, params)


def _svd(x, params):
    m, n = x.shape
    if params["full_matrices"] and params["compute_uv"] and m != n:
        big = max(m, n)
        raise _too_large(
            "jnp.linalg.svd with full_matrices=True",
            x,
            f"the full {'U' if m > n else 'Vt'} is {big} x {big}; pass full_matrices=False "
            f"(jnp.linalg.svd's default is True) for the reduced SVD, which Jask computes out "
            f"of core: U {m} x {min(m, n)}, s {min(m, n)}, Vt {min(m, n)} x {n}",
        )
    small = dict(params, full_matrices=False)
    tall = x if m >= n else jnp.transpose(x)  # wide: X = R^T Q^T, an LQ as LAPACK's gelqf
    if not params["compute_uv"]:  # s only: pass 1, no signs (s does not depend on them)
        return list(svd_p.bind(TSQR(tall, signs=False).r, **small))
    factor = TSQR(tall)
    if m >= n:  # X = Q R = (Q U_r) s Vt
        s, u_r, vt = svd_p.bind(factor.r, **small)
        return [s, factor.q(u_r), vt]
    s, u, vt_l = svd_p.bind(factor.r.T, **small)  # X = L Q^T = U s (Q Vt_l^T)^T
    return [s, u, jnp.transpose(factor.q(vt_l.T))]
