"""Cumulative reductions along one axis: lax.cumsum, cumprod, cummax, cummin and cumlogsumexp
(`reverse` runs from the end of the axis). The engine streams the array block by block with a
running value per line along the axis, carried across blocks, so any axis works while one value
per position of the axes after it fits the budget. Their rules (jask/_api/lax_reductions.py)
check that first.

Derivatives: cumsum is linear (its transpose is the cumsum the other way); the others have a
triangular Jacobian, so their slope holds what `tangent_term` and `cotangent_term` combine with
cumsums (or, for cummax and cummin, a gather and a scatter-add along the axis).
"""

import dataclasses
from typing import ClassVar

import numpy as np

from .._jax.diskarray import DiskArrayTy
from .._jax.op import Op, apply, describe
from .exp import Exp
from .sort import PutAlongRows, TakeAlongRows, along_axis


class Cumulative(Op):
    """out[..., k, ...] = the reduction of x[..., :k+1, ...] along `axis` (reverse: of
    x[..., k:, ...]), in x's dtype."""

    kernel = "cumulative"
    reduction: ClassVar[str]

    def out_type(self, x, *, axis, reverse):
        if not isinstance(x, DiskArrayTy) or not 0 <= axis < len(x.shape):
            raise ValueError(f"jax.lax.{self.name}: invalid axis {axis} for {describe(x)}")
        return DiskArrayTy(tuple(x.shape), x.dtype)

    def kernel_params(self):
        return {"reduction": self.reduction, "axis": self.axis, "reverse": self.reverse}

    def _cumsum(self, t, *, backward=False):
        """The cumsum of t along this op's axis, in this op's direction or the other."""
        return apply(Cumsum, t, axis=self.axis, reverse=self.reverse != backward)


class Cumsum(Cumulative):
    name = "cumsum"
    reduction = "sum"
    linear = True

    def transpose_rule(self, ct, x):
        return self._cumsum(ct, backward=True)


class Cumprod(Cumulative):
    """d out_k / d x_j = the product of x_i over i <= k but j, exact at zeros: out_k / x_j
    where x_j is not 0; at the first zero f of a line, the cumprod of x with x_f set to 1
    (`unzeroed`); 0 at later zeros (their products include x_f). Second derivatives are exact
    except where a line has two or more zeros (as jnp.prod's)."""

    name = "cumprod"
    reduction = "prod"

    def slope(self, x, out):
        zero = (x == 0.0).astype(x.dtype)
        first_zero = zero * (self._cumsum(zero) == 1.0).astype(x.dtype)
        # written so that a zero's own value does not enter its slope (second derivatives)
        unzeroed = apply(
            Cumprod, x * (1.0 - first_zero) + first_zero, axis=self.axis, reverse=self.reverse
        )
        return CumprodSlope(out, unzeroed, 1.0 - zero, first_zero, x * (1.0 - zero) + zero)

    def tangent_term(self, t, s):
        return s.out * self._cumsum(t * s.nonzero / s.safe) + s.unzeroed * self._cumsum(
            t * s.first_zero
        )

    def cotangent_term(self, ct, s, x):
        before = self._cumsum(ct * s.out, backward=True) * s.nonzero / s.safe
        return before + self._cumsum(ct * s.unzeroed, backward=True) * s.first_zero


@dataclasses.dataclass(frozen=True)
class CumprodSlope:
    out: object
    unzeroed: object  # the cumprod with each line's first zero replaced by 1
    nonzero: object  # 1 where x is not 0
    first_zero: object  # 1 at each line's first zero
    safe: object  # x with 1 in place of each 0


class Cumlogsumexp(Cumulative):
    """d out_k / d x_j = exp(x_j - out_k) for j up to k, computed as w_j / cumsum(w)_k with
    w = exp(x - the line's max): one cumsum each way. In float32 the derivative is finite where
    a line's elements are within about 87 of its max (w underflows below); JAX's is exact."""

    name = "cumlogsumexp"
    reduction = "logsumexp"

    def slope(self, x, out):
        weights = apply(Exp, x - x.max(axis=self.axis, keepdims=True))
        return weights, self._cumsum(weights)

    def tangent_term(self, t, slope):
        weights, total = slope
        return self._cumsum(t * weights) / total

    def cotangent_term(self, ct, slope, x):
        weights, total = slope
        return weights * self._cumsum(ct / total, backward=True)


class _RunningExtremum(Cumulative):
    """cummax / cummin: out_k = x at the index of the running extremum, so the derivative
    moves the tangent from that index (a gather along the axis) and the cotangent back to it
    (a scatter-add). The index is the last position j <= k where x_j equals out_j (the last
    of tied values; JAX splits ties between them)."""

    def slope(self, x, out):
        return running_index(x, out, self.axis, self.reverse)

    def tangent_term(self, t, slope):
        return along_axis(TakeAlongRows, t, slope, self.axis)

    def cotangent_term(self, ct, slope, x):
        return along_axis(PutAlongRows, ct, slope, self.axis, length=x.shape[self.axis])


class Cummax(_RunningExtremum):
    name = "cummax"
    reduction = "max"


class Cummin(_RunningExtremum):
    name = "cummin"
    reduction = "min"


def running_index(x, out, axis, reverse):
    """int32 positions along `axis`: for each k, the last j at or before k (after k when
    `reverse`) where x_j == out_j, the running extremum's index."""
    n = x.shape[axis]
    positions = _axis_positions(n, axis, len(x.shape), reverse)
    hits = (x == out).astype("float32")
    # positions counted from the start of the scan, + 1 so that misses (0) never win
    index = apply(Cummax, hits * positions, axis=axis, reverse=reverse)
    index = index - 1.0
    if reverse:
        index = (n - 1) - index
    return index.astype("int32")


def _axis_positions(n, axis, ndim, reverse):
    """1..n along `axis` (n..1 when `reverse`), shaped to broadcast against the array."""
    steps = np.arange(1, n + 1, dtype=np.float32)
    if reverse:
        steps = steps[::-1].copy()
    return steps.reshape((n,) + (1,) * (ndim - axis - 1))
