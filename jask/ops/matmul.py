"""op(a) @ op(b) for DiskArrays of 2 or more axes, op(x) = x or x with its last two axes swapped
per the trans_* flags. Leading (batch) axes broadcast as in jnp.matmul.

The flags let backward rules multiply by a transpose without writing it out.
"""

from .._jax.diskarray import DiskArrayTy
from .._jax.op import Op, Role, apply, describe
from .reduce import reduce_to


def matmul_type(a, b, trans_a=False, trans_b=False, fn="matmul") -> DiskArrayTy:
    """The type of op(a) @ op(b); errors name jask.`fn` and both operands."""
    pair = f"{describe(a)}{'.mT' if trans_a else ''} @ {describe(b)}{'.mT' if trans_b else ''}"
    if a.ndim < 2 or b.ndim < 2:
        raise ValueError(f"jask.{fn}: operands must have 2 or more axes, got {pair}")
    if a.dtype != b.dtype:
        raise TypeError(f"jask.{fn}: dtypes differ: {pair}")
    m, k = a.shape[-2:][::-1] if trans_a else a.shape[-2:]
    k2, n = b.shape[-2:][::-1] if trans_b else b.shape[-2:]
    if k != k2:
        raise ValueError(f"jask.{fn}: contracted dimensions differ ({k} vs {k2}) for {pair}")
    batch_a, batch_b = a.shape[:-2], b.shape[:-2]
    width = max(len(batch_a), len(batch_b))
    batch_a = (1,) * (width - len(batch_a)) + batch_a
    batch_b = (1,) * (width - len(batch_b)) + batch_b
    if any(x != y and 1 not in (x, y) for x, y in zip(batch_a, batch_b)):
        raise ValueError(
            f"jask.{fn}: batch dimensions {a.shape[:-2]} and {b.shape[:-2]} do not "
            f"broadcast in {pair}"
        )
    batch = tuple(y if x == 1 else x for x, y in zip(batch_a, batch_b))
    return DiskArrayTy(batch + (m, n), a.dtype)


class Matmul(Op):
    name = "matmul"
    kernel = "matmul"
    role = Role.MATMUL
    bilinear = True

    def out_type(self, a, b, *, trans_a=False, trans_b=False):
        return matmul_type(a, b, trans_a, trans_b)

    def kernel_params(self):
        return {"trans_a": bool(self.trans_a), "trans_b": bool(self.trans_b)}

    def transpose_rule(self, ct, a, b, *, needs):
        # The products have the broadcast batch shape; reduce_to sums them back over the
        # batch axes along which an operand was broadcast.
        ta, tb = self.trans_a, self.trans_b
        ga = gb = None
        if needs[0]:  # d op(a) = ct @ op(b).T
            ga = (
                apply(Matmul, ct, b, trans_a=False, trans_b=not tb)
                if not ta
                else apply(Matmul, b, ct, trans_a=tb, trans_b=True)
            )
        if needs[1]:  # d op(b) = op(a).T @ ct
            gb = (
                apply(Matmul, a, ct, trans_a=not ta, trans_b=False)
                if not tb
                else apply(Matmul, ct, a, trans_a=True, trans_b=ta)
            )
        return reduce_to(ga, a), reduce_to(gb, b)
