"""-x, elementwise."""
from .._jax.op import Op, apply


class Neg(Op):
    name = "negative"
    kernel = "neg"

    def out_type(self, x):
        return x

    def vjp(self, ct, x, *, out, needs):
        return (apply(Neg, ct),)
