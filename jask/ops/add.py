"""x + y, elementwise on two DiskArrays of one shape and dtype."""
from .._jax.op import Op, same_type


class Add(Op):
    name = "add"
    kernel = "add"

    def out_type(self, x, y):
        return same_type(self.name, x, y)

    def vjp(self, ct, x, y, *, out, needs):
        return ct, ct
