"""The next value after x toward y in x's dtype, elementwise (jax.lax.nextafter); like JAX,
Jask gives it no derivative."""

from ._pointwise import Binary


class Nextafter(Binary):
    name = instr = "nextafter"
    accepts = "float"
    primitives = ("nextafter",)
