"""op(a) @ op(b) for 2-D DiskArrays, op(x) = x or x.T per the trans_* flags.

The flags let backward rules multiply by a transpose without writing it out.
"""
from .._jax.diskarray import DiskArrayTy
from .._jax.op import Op, add_terms, apply, describe


class Matmul(Op):
    name = "matmul"
    kernel = "matmul"

    def out_type(self, a, b, *, trans_a=False, trans_b=False):
        if a.ndim != 2 or b.ndim != 2:
            raise ValueError(f"jask.matmul: operands must be 2-D, got {describe(a)} and {describe(b)}")
        if a.dtype != b.dtype:
            raise TypeError(f"jask.matmul: dtypes differ: {describe(a)} and {describe(b)}")
        m, k = a.shape[::-1] if trans_a else a.shape
        k2, n = b.shape[::-1] if trans_b else b.shape
        if k != k2:
            raise ValueError(f"jask.matmul: contracted dimensions differ ({k} vs {k2}) for "
                             f"{describe(a)}{'.T' if trans_a else ''} @ "
                             f"{describe(b)}{'.T' if trans_b else ''}")
        return DiskArrayTy((m, n), a.dtype)

    def kernel_params(self):
        return (int(self.trans_a), int(self.trans_b))

    def vjp(self, ct, a, b, *, out, needs):
        ta, tb = self.trans_a, self.trans_b
        ga = gb = None
        if needs[0]:  # d op(a) = ct @ op(b).T
            ga = (apply(Matmul, ct, b, trans_a=False, trans_b=not tb) if not ta
                  else apply(Matmul, b, ct, trans_a=tb, trans_b=True))
        if needs[1]:  # d op(b) = op(a).T @ ct
            gb = (apply(Matmul, a, ct, trans_a=not ta, trans_b=False) if not tb
                  else apply(Matmul, ct, a, trans_a=True, trans_b=ta))
        return ga, gb

    def tangent(self, out, operands, tangents):
        (a, b), (ta, tb) = operands, tangents
        flags = dict(trans_a=self.trans_a, trans_b=self.trans_b)
        return add_terms(None if ta is None else apply(Matmul, ta, b, **flags),
                         None if tb is None else apply(Matmul, a, tb, **flags))
