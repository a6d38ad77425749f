"""Elementwise activations and their relatives: log1p, expm1, sigmoid (jax.nn.relu, gelu and
softplus are built by jax from max, tanh, log1p and the others)."""

from ._pointwise import Unary
from .exp import Exp


class Log1p(Unary):
    name, instr = "log1p", "log1p"
    accepts = "float"
    primitives = ("log1p",)

    def slope(self, x, out):
        return 1.0 / (x + 1.0)


class Expm1(Unary):
    name, instr = "expm1", "expm1"
    accepts = "float"
    primitives = ("expm1",)

    def slope(self, x, out):
        return out + 1.0


class Sigmoid(Unary):
    name, instr = "sigmoid", "sigmoid"
    accepts = "float"
    primitives = ("logistic",)

    def slope(self, x, out):
        return out * (1.0 - out)


__all__ = ["Exp", "Expm1", "Log1p", "Sigmoid"]
