"""s - x for a scalar s and a DiskArray x (operands in the order x, s)."""
from .._jax.op import Op, apply, scalar_type
from .neg import Neg
from .sum import Sum


class RsubScalar(Op):
    name = "rsub_scalar"
    kernel = "rsub_scalar"

    def out_type(self, x, s):
        scalar_type(self.name, s)
        return x

    def vjp(self, ct, x, s, *, out, needs):
        return (apply(Neg, ct) if needs[0] else None,
                apply(Sum, ct).astype(s.dtype) if needs[1] else None)
