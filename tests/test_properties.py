"""Random expressions over DiskArrays against jax.numpy on in-memory copies: values eager and
under jax.jit, and gradients of a scalar loss under jax.grad and jax.jit(jax.grad)."""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import jask

from conftest import DEFAULT_BUDGET, assert_close

# Odd sizes, so that no shape is a multiple of a block or tile size.
ROWS = (5, 13, 37)
COLS = (3, 7, 11)
SIZES = ROWS + COLS
MAX_DEPTH = 3
MAX_OPS = 10  # bounds one expression's size, and so the time jax.jit spends compiling it
SCALARS = (-1.5, 0.5, 2.0, 3.0)  # exact in float32 and nonzero, so they are safe divisors
BUDGETS = ("4KB", "64KB")  # a few blocks per op; many blocks per op


# -- expressions ---------------------------------------------------------------
#
# A node evaluates with jax.numpy calls only, so the same tree runs on DiskArrays (through
# Jask's jax.numpy dispatch) and on the reference jnp arrays.


@dataclass(frozen=True)
class Operand:
    """Argument `index` of the expression: a DiskArray when `disk`, else an in-memory array."""

    index: int
    shape: tuple[int, ...]
    disk: bool

    def evaluate(self, args):
        return args[self.index]

    def __repr__(self):
        return f"{'x' if self.disk else 'm'}{self.index}"


@dataclass(frozen=True)
class Scalar:
    """A Python float."""

    value: float

    def evaluate(self, args):
        return self.value

    def __repr__(self):
        return repr(self.value)


UNARY: dict[str, Callable] = {
    "sqrt(abs({}) + 0.5)": lambda x: jnp.sqrt(jnp.abs(x) + 0.5),
    "exp(tanh({}))": lambda x: jnp.exp(jnp.tanh(x)),  # tanh keeps exp's input in [-1, 1]
    "log(abs({}) + 0.5)": lambda x: jnp.log(jnp.abs(x) + 0.5),
    "tanh({})": jnp.tanh,
    "abs({})": jnp.abs,
    "square({})": jnp.square,
    "relu({})": jax.nn.relu,
    "sigmoid({})": jax.nn.sigmoid,
    "softplus({})": jax.nn.softplus,
    "gelu({})": jax.nn.gelu,
    "({}) ** 2": lambda x: x**2,
    "-({})": operator.neg,
}
# Divisors: bounded away from zero, for DiskArray and in-memory operands alike.
POSITIVE = "(1.0 + square({}))"
UNARY[POSITIVE] = lambda x: 1.0 + jnp.square(x)

BINARY: dict[str, Callable] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "maximum": jnp.maximum,
    "minimum": jnp.minimum,
}

REDUCTIONS: dict[str, Callable] = {"sum": jnp.sum, "mean": jnp.mean, "max": jnp.max}
LOSSES = ("sum", "mean", "max", "vdot")


@dataclass(frozen=True)
class Unary:
    name: str
    x: Node

    def evaluate(self, args):
        return UNARY[self.name](self.x.evaluate(args))

    def __repr__(self):
        return self.name.format(self.x)


@dataclass(frozen=True)
class Binary:
    name: str
    x: Node
    y: Node

    def evaluate(self, args):
        return BINARY[self.name](self.x.evaluate(args), self.y.evaluate(args))

    def __repr__(self):
        if self.name.isalpha():
            return f"{self.name}({self.x}, {self.y})"
        return f"({self.x} {self.name} {self.y})"


@dataclass(frozen=True)
class Select:
    """jnp.where(left > right, then, otherwise)."""

    left: Node
    right: Node
    then: Node
    otherwise: Node

    def evaluate(self, args):
        return jnp.where(
            self.left.evaluate(args) > self.right.evaluate(args),
            self.then.evaluate(args),
            self.otherwise.evaluate(args),
        )

    def __repr__(self):
        return f"where({self.left} > {self.right}, {self.then}, {self.otherwise})"


@dataclass(frozen=True)
class Transpose:
    x: Node

    def evaluate(self, args):
        return self.x.evaluate(args).T

    def __repr__(self):
        return f"({self.x}).T"


@dataclass(frozen=True)
class Dot:
    x: Node
    y: Node

    def evaluate(self, args):
        return jnp.dot(self.x.evaluate(args), self.y.evaluate(args))

    def __repr__(self):
        return f"dot({self.x}, {self.y})"


@dataclass(frozen=True)
class Reduction:
    """jnp.sum / mean / max over all axes (axis None) or one; on a DiskArray the result is an
    in-memory jax.Array."""

    name: str
    x: Node
    axis: int | None = None
    keepdims: bool = False

    def evaluate(self, args):
        return REDUCTIONS[self.name](self.x.evaluate(args), axis=self.axis, keepdims=self.keepdims)

    def __repr__(self):
        if self.axis is None:
            return f"{self.name}({self.x})"
        return (
            f"{self.name}({self.x}, axis={self.axis}{', keepdims=True' if self.keepdims else ''})"
        )


Node = Operand | Scalar | Unary | Binary | Select | Transpose | Dot | Reduction


# -- the strategy --------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    expression: Node  # evaluates to a 2-D DiskArray
    operands: tuple[Operand, ...]  # in argument order
    loss: str  # how the expression becomes a scalar for jax.grad
    coarse: bool  # data on a grid of quarters: exact zeros and ties

    def __repr__(self):
        shapes = ", ".join(
            f"{o}: {'DiskArray' if o.disk else 'jax.Array'}{list(o.shape)}" for o in self.operands
        )
        data = "quarters" if self.coarse else "uniform"
        return f"Case(loss={self.loss}, {data} data, {self.expression}; {shapes})"


class _Builder:
    """Draws one expression, numbering its operands and counting its ops."""

    def __init__(self, draw, unary_names):
        self.draw = draw
        self.unary_names = unary_names
        self.operands: list[Operand] = []
        self.ops_left = MAX_OPS

    def operand(self, shape, disk):
        """An operand of `shape`: sometimes one drawn before (its cotangents must add up)."""
        same = [o for o in self.operands if o.shape == shape and o.disk == disk]
        if same and self.draw(st.booleans()):
            return self.draw(st.sampled_from(same))
        new = Operand(len(self.operands), shape, disk)
        self.operands.append(new)
        return new

    def _take_op(self, depth) -> bool:
        """Whether the node at `depth` is an op (else an operand): the root always is, others
        three times in four, while depth and the op count allow."""
        if depth == 0 or self.ops_left == 0:
            return False
        if depth < MAX_DEPTH and not self.draw(st.integers(0, 3)):
            return False
        self.ops_left -= 1
        return True

    def disk(self, shape, depth):
        """A DiskArray-valued expression of `shape`."""
        if not self._take_op(depth):
            return self.operand(shape, disk=True)
        kind = self.draw(
            st.sampled_from(["unary", "binary", "divide", "where", "transpose", "dot"])
        )
        rows, cols = shape
        if kind == "unary":
            name = self.draw(st.sampled_from(self.unary_names))
            return Unary(name, self.disk(shape, depth - 1))
        if kind == "binary":
            name = self.draw(st.sampled_from(["+", "-", "*", "maximum", "minimum"]))
            x, y = self.disk(shape, depth - 1), self.other(shape, depth - 1)
            return Binary(name, *self._maybe_swapped(x, y))
        if kind == "divide":
            x, y = self.disk(shape, depth - 1), self.other(shape, depth - 1)
            x, y = self._maybe_swapped(x, y)
            return Binary("/", x, y if isinstance(y, Scalar) else Unary(POSITIVE, y))
        if kind == "where":
            left, right = self._maybe_swapped(
                self.disk(shape, depth - 1), self.other(shape, depth - 1)
            )
            return Select(
                left,
                right,
                self.other(shape, depth - 1, disk_first=True),
                self.other(shape, depth - 1, disk_first=True),
            )
        if kind == "transpose":
            return Transpose(self.disk((cols, rows), depth - 1))
        inner = self.draw(st.sampled_from(SIZES))
        return Dot(self.disk((rows, inner), depth - 1), self.disk((inner, cols), depth - 1))

    def other(self, shape, depth, disk_first=False):
        """The second operand of an elementwise op on a DiskArray of `shape`: a DiskArray of that
        shape, an in-memory array that broadcasts to it, or a scalar."""
        kinds = ["disk", "memory", "scalar"]
        kind = self.draw(st.sampled_from(kinds if disk_first else kinds[::-1]))
        if kind == "disk":
            return self.disk(shape, depth)
        if kind == "memory":
            return self.in_memory(shape, depth)
        return self.scalar(depth)

    def in_memory(self, shape, depth):
        """An in-memory array that broadcasts to `shape`: an operand, or an axis reduction of a
        DiskArray expression."""
        rows, cols = shape
        broadcast = self.draw(st.sampled_from([(cols,), (1, cols), (rows, 1), (rows, cols)]))
        if not self._take_op(depth) or broadcast == (rows, cols):
            return self.operand(broadcast, disk=False)
        name = self.draw(st.sampled_from(list(REDUCTIONS)))
        inner = self.draw(st.sampled_from(SIZES))
        if broadcast == (rows, 1):
            return Reduction(name, self.disk((rows, inner), depth - 1), axis=1, keepdims=True)
        return Reduction(
            name, self.disk((inner, cols), depth - 1), axis=0, keepdims=len(broadcast) == 2
        )

    def scalar(self, depth):
        """A Python float, or a full reduction of a DiskArray expression (a 0-d jax.Array)."""
        if not self._take_op(depth):
            return Scalar(self.draw(st.sampled_from(SCALARS)))
        shape = (self.draw(st.sampled_from(SIZES)), self.draw(st.sampled_from(SIZES)))
        reduction = Reduction(
            self.draw(st.sampled_from(list(REDUCTIONS))), self.disk(shape, depth - 1)
        )
        return reduction

    def _maybe_swapped(self, x, y):
        return (y, x) if self.draw(st.booleans()) else (x, y)


@st.composite
def cases(draw):
    coarse = draw(st.booleans())
    unary_names = [n for n in UNARY if n != POSITIVE]
    builder = _Builder(draw, unary_names)
    shape = (draw(st.sampled_from(ROWS)), draw(st.sampled_from(COLS)))
    expression = builder.disk(shape, MAX_DEPTH)
    loss = draw(st.sampled_from(LOSSES))
    if loss == "vdot":  # a weighted sum: a uniform cotangent would hide misplaced gradients
        builder.operands.append(Operand(len(builder.operands), shape, disk=True))
    return Case(expression, tuple(builder.operands), loss, coarse)


# -- the property --------------------------------------------------------------


def value_fn(case):
    return lambda *args: case.expression.evaluate(args)


def loss_fn(case):
    def loss(*args):
        out = case.expression.evaluate(args)
        if case.loss == "vdot":
            return jnp.vdot(out, args[-1])
        return REDUCTIONS[case.loss](out)

    return loss


def differentiated(case) -> tuple[int, ...]:
    """The argnums jax.grad takes: every operand."""
    return tuple(o.index for o in case.operands)


@jax.jit(static_argnums=0)
def reference(case, *args):
    """The expression's value and its loss's gradients on jnp arrays, compiled as one function:
    op-by-op jnp dispatch would compile every primitive for every new shape, which costs more
    than everything else in this test."""
    return value_fn(case)(*args), jax.grad(loss_fn(case), argnums=differentiated(case))(*args)


def make_arguments(case, seed):
    rng = np.random.default_rng(seed)
    if case.coarse:
        dense = [(rng.integers(-4, 5, o.shape) / 4).astype(np.float32) for o in case.operands]
    else:
        dense = [rng.uniform(-1, 1, o.shape).astype(np.float32) for o in case.operands]
    ours = [
        jask.DiskArray.from_numpy(x) if o.disk else jnp.asarray(x)
        for o, x in zip(case.operands, dense)
    ]
    return ours, [jnp.asarray(x) for x in dense]


def assert_gradients(case, grads, expected):
    operands = [case.operands[i] for i in differentiated(case)]
    for operand, g, e in zip(operands, grads, expected, strict=True):
        kind = jask.DiskArray if operand.disk else jax.Array
        assert isinstance(g, kind), (
            f"gradient for {operand} is {type(g).__name__}, not {kind.__name__}"
        )
        assert_close(np.asarray(g), e)


@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(case=cases(), seed=st.integers(0, 2**32 - 1), budget=st.sampled_from(BUDGETS))
def test_random_expressions_match_jax_numpy(case, seed, budget):
    note(repr(case))
    ours, dense = make_arguments(case, seed)
    argnums = differentiated(case)
    jask.set_memory_budget(budget)
    try:
        expected, expected_grads = reference(case, *dense)
        for fn in (value_fn(case), jax.jit(value_fn(case))):
            out = fn(*ours)
            assert isinstance(out, jask.DiskArray), f"the expression gave a {type(out).__name__}"
            assert_close(np.asarray(out), expected)

        for grad_fn in (
            jax.grad(loss_fn(case), argnums=argnums),
            jax.jit(jax.grad(loss_fn(case), argnums=argnums)),
        ):
            assert_gradients(case, grad_fn(*ours), expected_grads)
    finally:
        jask.set_memory_budget(DEFAULT_BUDGET)
