"""x converted to another storage dtype, elementwise (jax.lax.convert_element_type, as XLA's
CPU backend converts: float to int32 truncates toward zero and saturates, NaN gives 0; to
bool is x != 0)."""

import jax.numpy as jnp

from .._dtypes import storage_dtype
from .._jax.diskarray import DiskArrayTy
from .._jax.op import apply
from ._elementwise import Elementwise, operand_shape, single_instruction


def _is_float(dtype) -> bool:
    return jnp.issubdtype(dtype, jnp.floating)


class Astype(Elementwise):
    name = "astype"
    linear = True

    def out_type(self, x, *, dtype):
        shape, _ = operand_shape(self.name, (x,))
        return DiskArrayTy(shape, storage_dtype(dtype))

    def expr(self) -> tuple:
        return single_instruction(f"convert_{self.out_aval.dtype.name}", 1)

    def _differentiable(self) -> bool:
        """Only a float-to-float conversion carries a derivative (JAX's integer and bool
        values have none)."""
        return _is_float(self.in_avals[0].dtype) and _is_float(self.out_aval.dtype)

    # The linear rules apply between float dtypes only: written out for that guard.
    def tangent(self, out, operands, tangents):
        return super().tangent(out, operands, tangents) if self._differentiable() else None

    def vjp(self, ct, *operands, out, needs):
        return (
            super().vjp(ct, *operands, out=out, needs=needs) if self._differentiable() else (None,)
        )

    def transpose_rule(self, ct, x):
        return apply(Astype, ct, dtype=x.dtype)
