"""Elementwise activations and their relatives: log1p, expm1, sigmoid, relu, gelu, softplus."""

import math

from .._jax.op import apply
from ._pointwise import Pointwise, Unary
from .exp import Exp
from .tanh import Tanh


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


class Relu(Unary):
    """max(x, 0); its derivative at 0 is 0, as in jax.nn.relu."""

    name, instr = "relu", "relu"

    def slope(self, x, out):
        return (x > 0.0).astype(x.dtype)


class Softplus(Unary):
    """log(1 + exp(x)), computed stably; its derivative is sigmoid(x)."""

    name, instr = "softplus", "softplus"
    accepts = "float"

    def slope(self, x, out):
        return apply(Sigmoid, x)


_K = math.sqrt(2.0 / math.pi)


def _gelu_slope(x):
    """d/dx of 0.5 x (1 + tanh(k (x + 0.044715 x^3))), the tanh approximation."""
    inner = (x + (x * x * x) * 0.044715) * _K
    t = apply(Tanh, inner)
    d_inner = ((x * x) * (3 * 0.044715) + 1.0) * _K
    return (t + 1.0) * 0.5 + (x * 0.5) * ((1.0 - t * t) * d_inner)


class Gelu(Pointwise):  # jask.gelu takes `approximate`: its function is written in _api
    """jax.nn.gelu with approximate=True (its default)."""

    name, instr = "gelu", "gelu"
    accepts = "float"

    def slope(self, x, out):
        return _gelu_slope(x)


__all__ = ["Exp", "Expm1", "Gelu", "Log1p", "Relu", "Sigmoid", "Softplus"]
