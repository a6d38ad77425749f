"""Sorting along the last axis, one row in memory at a time: `ArgsortRows` finds each row's
order (int32 positions; lax.sort's order, NaNs last and -0.0 == 0.0, or `descending` in
lax.top_k's, IEEE totalOrder largest first), and
`TakeAlongRows` / `PutAlongRows` apply such positions and their transpose to any array of the
same rows. A sort's outputs are its operands taken along its order, so its derivative flows
through `TakeAlongRows` (linear in the values) while the order itself has none. `along_axis`
runs them along another axis, moved last and back.

These hold whole rows in memory: rows longer than the budget holds are sorted by
jask/ops/merge_sort.py instead.
"""

from .._jax.diskarray import DiskArrayTy
from .._jax.op import Op, apply, describe
from .transpose import Transpose

INDEX_DTYPE = "int32"


def _check_rows(name, x, indices):
    if (
        not isinstance(x, DiskArrayTy)
        or not isinstance(indices, DiskArrayTy)
        or len(x.shape) == 0
        or tuple(x.shape[:-1]) != tuple(indices.shape[:-1])
        or indices.dtype != INDEX_DTYPE
    ):
        raise ValueError(
            f"jask.{name}: positions {describe(indices)} do not index the rows of {describe(x)}"
        )


class ArgsortRows(Op):
    """The first `keep` positions of each row's stable order by the keys (the first key
    primary): ascending with NaNs last, as lax.sort, or `descending` in IEEE totalOrder (NaN
    first, 0.0 before -0.0), as lax.top_k."""

    name = "argsort"
    kernel = "argsort_rows"
    zero_derivative = True

    def out_type(self, *keys, descending, keep):
        first = keys[0]
        if any(not isinstance(k, DiskArrayTy) or k.shape != first.shape for k in keys):
            raise ValueError(
                "jask.argsort: keys must be DiskArrays of one shape, got "
                + ", ".join(describe(k) for k in keys)
            )
        if not len(first.shape) or not 0 <= keep <= first.shape[-1]:
            raise ValueError(f"jask.argsort: cannot keep {keep} positions of {describe(first)}")
        return DiskArrayTy(tuple(first.shape[:-1]) + (keep,), INDEX_DTYPE)

    def kernel_params(self):
        return {"descending": self.descending, "keep": self.keep}


class TakeAlongRows(Op):
    """out[..., j] = x[..., indices[..., j]]."""

    name = "take_along_rows"
    kernel = "take_along_rows"
    linear = (0,)

    def out_type(self, x, indices):
        _check_rows(self.name, x, indices)
        return DiskArrayTy(tuple(indices.shape), x.dtype)

    def transpose_rule(self, ct, x, indices):
        return apply(PutAlongRows, ct, indices, length=x.shape[-1])


class PutAlongRows(Op):
    """Zeros of rows of `length`, with out[..., indices[..., j]] += x[..., j]."""

    name = "put_along_rows"
    kernel = "put_along_rows"
    linear = (0,)

    def out_type(self, x, indices, *, length):
        _check_rows(self.name, x, indices)
        if tuple(x.shape) != tuple(indices.shape):
            raise ValueError(
                f"jask.{self.name}: values {describe(x)} and positions {describe(indices)} differ"
            )
        return DiskArrayTy(tuple(x.shape[:-1]) + (length,), x.dtype)

    def kernel_params(self):
        return {"length": self.length}

    def transpose_rule(self, ct, x, indices):
        return apply(TakeAlongRows, ct, indices)


def to_last(x, axis):
    """x with `axis` moved last (x itself when it is last already)."""
    ndim = len(x.shape)
    if axis == ndim - 1:
        return x
    return apply(Transpose, x, perm=tuple(d for d in range(ndim) if d != axis) + (axis,))


def from_last(x, axis):
    """The inverse of `to_last`."""
    ndim = len(x.shape)
    if axis == ndim - 1:
        return x
    perm = tuple(d for d in range(ndim) if d != axis) + (axis,)
    return apply(Transpose, x, perm=tuple(sorted(range(ndim), key=lambda i: perm[i])))


def along_axis(op, values, indices, axis, **params):
    """`op` (TakeAlongRows or PutAlongRows) applied along `axis`."""
    moved = apply(op, to_last(values, axis), to_last(indices, axis), **params)
    return from_last(moved, axis)
