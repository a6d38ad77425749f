"""Permutes axes (reverses them by default), writing the permuted array."""

from .._jax.diskarray import DiskArrayTy
from .._jax.op import Op, Role, apply, describe


class Transpose(Op):
    name = "transpose"
    kernel = "transpose"
    linear = True
    role = Role.TRANSPOSE

    def out_type(self, x, *, perm):
        if sorted(perm) != list(range(x.ndim)):
            raise ValueError(
                f"jask.transpose: axes {perm} are not a permutation of the "
                f"{x.ndim} axes of {describe(x)}"
            )
        return DiskArrayTy(tuple(x.shape[p] for p in perm), x.dtype)

    def kernel_params(self):
        return {"perm": self.perm}

    def transpose_rule(self, ct, x):
        inverse = tuple(sorted(range(len(self.perm)), key=lambda i: self.perm[i]))
        return apply(Transpose, ct, perm=inverse)
