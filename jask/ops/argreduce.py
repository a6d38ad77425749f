"""The index of the largest or smallest element along one axis (lax.argmax, lax.argmin): the
first of ties, and the first NaN if there is one (as jnp.argmax). One pass, streamed with the
best value and its index per line along the axis; piecewise constant, so no derivative."""

import jax

from .._jax import compat
from .._jax.diskarray import DiskArrayTy
from .._jax.op import Op, describe


class ArgReduce(Op):
    name = "argreduce"
    kernel = "arg_reduce"
    zero_derivative = True

    def out_type(self, x, *, axis, reduction, index_dtype):
        if not isinstance(x, DiskArrayTy) or not 0 <= axis < len(x.shape) or not x.shape[axis]:
            raise ValueError(f"jax.lax.arg{reduction}: invalid axis {axis} for {describe(x)}")
        if jax.dtypes.canonicalize_dtype(index_dtype) != "int32":
            raise NotImplementedError(
                f"jax.lax.arg{reduction} with index_dtype {index_dtype} (Jask gives int32)"
            )
        return self.result_type(tuple(d for i, d in enumerate(x.shape) if i != axis))

    def result_type(self, shape):
        return DiskArrayTy(shape, "int32")

    def kernel_params(self):
        return {"reduction": self.reduction, "axis": self.axis}


class ArgReduceInMemory(ArgReduce):
    result = "in_memory"

    def result_type(self, shape):
        return compat.ShapedArray(shape, jax.numpy.int32)
