"""Elementwise activations and their relatives: log1p, expm1, sigmoid, relu, gelu, softplus."""
import math

from .._jax.op import apply
from ._elementwise import Elementwise
from .exp import Exp
from .tanh import Tanh


class Log1p(Elementwise):
    name, instr = "log1p", "log1p"

    def vjp(self, ct, x, *, out, needs):
        return (ct / (x + 1.0),)

    def tangent(self, out, operands, tangents):
        return tangents[0] / (operands[0] + 1.0)


class Expm1(Elementwise):
    name, instr = "expm1", "expm1"

    def vjp(self, ct, x, *, out, needs):
        return (ct * (out + 1.0),)

    def tangent(self, out, operands, tangents):
        return tangents[0] * (out + 1.0)


class Sigmoid(Elementwise):
    name, instr = "sigmoid", "sigmoid"

    def vjp(self, ct, x, *, out, needs):
        return (ct * (out * (1.0 - out)),)

    def tangent(self, out, operands, tangents):
        return tangents[0] * (out * (1.0 - out))


class Relu(Elementwise):
    """max(x, 0); its derivative at 0 is 0, as in jax.nn.relu."""
    name, instr = "relu", "relu"

    def vjp(self, ct, x, *, out, needs):
        return (ct * (x > 0.0).astype(ct.dtype),)

    def tangent(self, out, operands, tangents):
        return tangents[0] * (operands[0] > 0.0).astype(tangents[0].dtype)


class Softplus(Elementwise):
    """log(1 + exp(x)), computed stably; its derivative is sigmoid(x)."""
    name, instr = "softplus", "softplus"

    def vjp(self, ct, x, *, out, needs):
        return (ct * apply(Sigmoid, x),)

    def tangent(self, out, operands, tangents):
        return tangents[0] * apply(Sigmoid, operands[0])


_K = math.sqrt(2.0 / math.pi)


def _gelu_slope(x):
    """d/dx of 0.5 x (1 + tanh(k (x + 0.044715 x^3))), the tanh approximation."""
    inner = (x + (x * x * x) * 0.044715) * _K
    t = apply(Tanh, inner)
    d_inner = ((x * x) * (3 * 0.044715) + 1.0) * _K
    return (t + 1.0) * 0.5 + (x * 0.5) * ((1.0 - t * t) * d_inner)


class Gelu(Elementwise):
    """jax.nn.gelu with approximate=True (its default)."""
    name, instr = "gelu", "gelu"

    def vjp(self, ct, x, *, out, needs):
        return (ct * _gelu_slope(x),)

    def tangent(self, out, operands, tangents):
        return tangents[0] * _gelu_slope(operands[0])


__all__ = ["Exp", "Expm1", "Gelu", "Log1p", "Relu", "Sigmoid", "Softplus"]
