"""The block route (rule 2 of jask/_api/xla_route.py): which primitives are independent along
leading axes of their operands, and how they stream through XLA in blocks of those axes.

Per primitive, each operand is *blocked* along its leading batch axes (merged into one axis of
n blocks' rows, a free reshape of a DiskArray) or *whole* (given to every block). A primitive
whose results all start with the same batch axes then runs as `jask.ops.block_map.BlockMap`:
XLA computes each block; the engine reads the blocks and writes the results' rows.

- elementwise primitives: every axis (operands and result flattened);
- linear algebra: the batch axes before the matrix axes (cholesky, eigh, svd, qr, lu,
  triangular_solve, ...); FFT: the axes before the transformed ones;
- convolution: the batch axis (axis 0 of lhs and of the result); the kernel whole. With G batch
  groups, lhs's batch is G groups of the result's rows: a block is the same rows of each group
  (G views of lhs's file), joined in group order before XLA computes it;
- reduce_window*, select_and_scatter_add, select_and_gather_add: axis 0 where the window
  neither spans, strides, pads nor dilates it;
- reduce (a reduction by any computation): axis 0 where it is not reduced.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax

from .. import _runtime
from .._jax import compat
from .._jax.diskarray import DiskArrayTy
from .._jax.op import apply
from ..ops.block_map import ROWS, BlockFn, BlockMap

# Elementwise primitives Jask has no rule of its own for (XLA computes them).
ELEMENTWISE = frozenset(
    """igamma igammac igamma_grad_a random_gamma_grad bessel_i0e bessel_i1e polygamma zeta
    regularized_incomplete_beta population_count clz reduce_precision complex real imag conj
    mulhi erf_inv is_finite exp2 cbrt logistic
    add sub mul div rem pow neg sign abs exp expm1 log log1p sqrt rsqrt sin cos tan tanh sinh
    cosh asin acos atan asinh acosh atanh atan2 integer_pow square convert_element_type eq ne
    lt le gt ge max min select_n nextafter floor ceil round and or xor not""".split()
)

# Linear algebra: the number of trailing (matrix) axes of each operand; the rest are batch axes.
LINALG_CORE = {
    "cholesky": (2,),
    "eigh": (2,),
    "eig": (2,),
    "svd": (2,),
    "qr": (2,),
    "geqrf": (2,),
    "geqp3": (2, 1),
    "householder_product": (2, 1),
    "lu": (2,),
    "lu_pivots_to_permutation": (1,),
    "triangular_solve": (2, 2),
    "schur": (2,),
    "hessenberg": (2,),
    "tridiagonal": (2,),
    "tridiagonal_solve": (1, 1, 1, 2),
    "symmetric_product": (2, 2),
}


def nbytes(aval) -> int:
    return int(np.prod(aval.shape, dtype=np.int64)) * np.dtype(aval.dtype).itemsize


def allowance() -> int:
    """The bytes the XLA routes may hold in memory at once: half the memory budget (the other
    half is left to XLA's temporaries and to the engine)."""
    return _runtime.memory_budget() // 2


def _leading_axis_free(params, ndim: int) -> bool:
    """A windowed primitive's axis 0 neither spanned, strided, padded nor dilated."""
    if params.get("window_dimensions", (1,))[0] != 1:
        return False
    if params.get("window_strides", (1,))[0] != 1:
        return False
    padding = params.get("padding", ((0, 0),) * ndim)
    if tuple(padding[0]) != (0, 0):
        return False
    return all(params.get(k, (1,) * ndim)[0] == 1 for k in ("base_dilation", "window_dilation"))


_WINDOWED = frozenset(
    """reduce_window reduce_window_sum reduce_window_max reduce_window_min
    select_and_scatter_add select_and_gather_add cumsum fft conv_general_dilated
    bitcast_convert_type""".split()
)


def may_block(name: str) -> bool:
    """Whether the block route knows the primitive (for some params and shapes)."""
    return name in ELEMENTWISE or name in LINALG_CORE or name in _WINDOWED


def batch_axes(name: str, args, params) -> tuple[list, bool] | None:
    """Per operand, how many leading axes are its batch axes (None: whole), and whether they
    may be merged into one (the primitive takes any number of batch axes); None when the
    primitive is not independent along a leading axis."""
    if name in ELEMENTWISE:  # 0-d operands (scalars lax broadcasts) are whole
        return [len(a.shape) or None for a in args], True
    if name == "bitcast_convert_type":  # elementwise between dtypes of one width
        same = np.dtype(args[0].dtype).itemsize == np.dtype(params["new_dtype"]).itemsize
        return ([len(args[0].shape) or None], True) if same else None
    if name in LINALG_CORE:
        core = LINALG_CORE[name]
        if len(core) != len(args):
            return None
        return [len(a.shape) - c for a, c in zip(args, core)], True
    if name in ("fft",):
        return [len(args[0].shape) - len(params["fft_lengths"])], True
    if name == "conv_general_dilated":
        dn = params["dimension_numbers"]
        if params.get("batch_group_count", 1) != 1 or dn.lhs_spec[0] != 0 or dn.out_spec[0] != 0:
            return None
        return [1, None], False
    if name == "cumsum":  # independent along axis 0 only when it sums along another axis
        return ([1], False) if len(args[0].shape) > 1 and int(params["axis"]) != 0 else None
    if name in ("reduce_window_sum", "reduce_window_max", "reduce_window_min"):
        ndim = len(args[0].shape)
        return ([1], False) if ndim > 1 and _leading_axis_free(params, ndim) else None
    if name == "reduce_window":
        half = len(args) // 2
        ndim = len(args[0].shape)
        if ndim < 2 or not _leading_axis_free(params, ndim):
            return None
        return [1] * half + [None] * half, False
    if name == "reduce":  # a reduction (any computation) over axes other than the first
        half = len(args) // 2
        if len(args[0].shape) < 2 or 0 in params["dimensions"]:
            return None
        return [1] * half + [None] * half, False
    if name in ("select_and_scatter_add", "select_and_gather_add"):
        ndim = len(args[0].shape)
        if ndim < 2 or not _leading_axis_free(params, ndim):
            return None
        return [1, 1], False
    return None


def route(primitive, args, params, outs):
    """The primitive applied block by block (a list of results, or one), or None when it is not
    independent along a leading axis or one row of every blocked operand and result does not fit
    the route's allowance."""
    if primitive.name == "conv_general_dilated" and params.get("batch_group_count", 1) != 1:
        return _batch_grouped_conv(primitive, args, params, outs)
    found = batch_axes(primitive.name, args, params)
    if found is None:
        return None
    counts, mergeable = found
    fn = _block_fn(primitive, params, len(outs))
    return _in_blocks(primitive, args, counts, mergeable, fn, outs)


def _batch_grouped_conv(primitive, args, params, outs):
    """conv_general_dilated with G batch groups: lhs's batch is G groups of m rows, and the
    result's row b reads row b of every group. Each group is a view of lhs's file (a range of
    its rows), blocked alike; a block fn joins the groups' blocks in group order, which is the
    conv's own grouping of a batch of G blocks."""
    lhs, rhs = args
    dn = params["dimension_numbers"]
    groups = int(params["batch_group_count"])
    if dn.lhs_spec[0] != 0 or dn.out_spec[0] != 0 or lhs.shape[0] % groups:
        return None
    m = lhs.shape[0] // groups
    parts = [lhs[g * m : (g + 1) * m] for g in range(groups)]
    fn = _block_fn(primitive, params, len(outs), groups=groups)
    return _in_blocks(primitive, [*parts, rhs], [1] * groups + [None], False, fn, outs)


def _in_blocks(primitive, args, counts, mergeable, fn, outs):
    """`fn` applied to blocks of the leading `counts` axes of the operands (None: whole)."""
    avals = [compat.typeof(a) for a in args]
    batches = {tuple(a.shape[:k]) for a, k in zip(avals, counts) if k is not None}
    if len(batches) != 1:
        return None
    batch = batches.pop()
    n = int(np.prod(batch, dtype=np.int64))
    if not batch or n < 2 or (len(batch) > 1 and not mergeable):
        return None
    if any(tuple(o.shape[: len(batch)]) != batch for o in outs):
        return None
    per_row = sum(nbytes(a) // n for a, k in zip(avals, counts) if k is not None)
    per_row += sum(nbytes(o) // n for o in outs)
    whole = sum(
        nbytes(a) for a, k in zip(avals, counts) if k is None and isinstance(a, DiskArrayTy)
    )
    room = allowance() - whole
    if per_row == 0 or room < per_row:
        return None
    block = int(min(n, room // per_row))
    # each blocked operand with its batch axes merged into one of n rows (a view of a file)
    operands = [
        _shaped(x, (n, *x.shape[len(batch) :])) if k is not None else x
        for x, k in zip(args, counts)
    ]
    results = apply(
        BlockMap,
        *operands,
        fn=fn,
        blocked=tuple(k is not None for k in counts),
        block=block,
    )
    shaped = [_shaped(r, o.shape) for r, o in zip(results, outs)]
    return shaped if primitive.multiple_results else shaped[0]


def _shaped(x, shape):
    return x if tuple(x.shape) == tuple(shape) else jnp.reshape(x, shape)


_FNS: dict = {}


def _block_fn(primitive, params, n_out: int, groups: int = 0) -> BlockFn:
    """The primitive as a function of blocks, made once per (primitive, params) where the params
    are hashable (each compiles once per block shape); with `groups`, its first operand comes as
    that many blocks, joined along axis 0."""
    try:
        key = (primitive, tuple(sorted(params.items())), groups)
        hash(key)
    except TypeError:
        key = None
    if key is not None and key in _FNS:
        return _FNS[key]

    def fn(*blocks):
        if groups:
            blocks = (lax.concatenate(blocks[:groups], 0), *blocks[groups:])
        out = primitive.bind(*blocks, **params)
        return tuple(out) if primitive.multiple_results else (out,)

    made = BlockFn(fn, (ROWS,) * n_out, primitive.name)
    if key is not None:
        _FNS[key] = made
    return made
