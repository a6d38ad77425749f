"""The next value after x toward y in x's dtype, elementwise (jax.lax.nextafter); like JAX,
Jask gives it no derivative."""

from ._pointwise import Binary


class Nextafter(Binary):
    name = instr = "nextafter"
    accepts = "float"
    primitives = ("nextafter",)

    def slopes(self, x, y, out):
        def missing():  # asked for only when an operand needs a derivative
            raise NotImplementedError(
                "jax.grad of jask.nextafter needs a derivative rule, and jax.lax.nextafter "
                "has none (JAX's own raises too)"
            )

        return missing, missing
