"""Special functions, elementwise: erf, erfc, erf_inv, lgamma, digamma (and trigamma, the
derivative of digamma)."""

import math

from .._jax.op import apply
from ._pointwise import Pointwise, Unary
from .exp import Exp


class Erf(Unary):
    """The error function, elementwise."""

    name = instr = "erf"
    accepts = "float"
    primitives = ("erf",)

    def slope(self, x, out):
        return apply(Exp, -(x * x)) * (2.0 / math.sqrt(math.pi))


class Erfc(Unary):
    """The complementary error function 1 - erf(x), elementwise."""

    name = instr = "erfc"
    accepts = "float"
    primitives = ("erfc",)

    def slope(self, x, out):
        return apply(Exp, -(x * x)) * (-2.0 / math.sqrt(math.pi))


class ErfInv(Unary):
    """The inverse of erf on (-1, 1), elementwise."""

    name = instr = "erf_inv"
    accepts = "float"
    primitives = ("erf_inv",)

    def slope(self, x, out):
        return apply(Exp, out * out) * (math.sqrt(math.pi) / 2.0)


class Lgamma(Unary):
    """log |Gamma(x)|, elementwise."""

    name = instr = "lgamma"
    accepts = "float"
    primitives = ("lgamma",)

    def slope(self, x, out):
        return apply(Digamma, x)


class Digamma(Unary):
    """The digamma function, d/dx log Gamma(x), elementwise."""

    name = instr = "digamma"
    accepts = "float"
    primitives = ("digamma",)

    def slope(self, x, out):
        return apply(Trigamma, x)


class Trigamma(Pointwise):  # polygamma(1, x): only digamma's derivative uses it
    """The trigamma function, the derivative of digamma, elementwise."""

    name = instr = "trigamma"
    accepts = "float"
