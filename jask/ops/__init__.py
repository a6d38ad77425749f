"""Jask's ops: one file per op (or per pair of ops that are each other's backward rule), each
a declarative `Op` subclass. `OPS` is every op class defined in this package's public modules,
found by importing them all: a new op file needs no entry here. The classes imported below are
re-exports for the modules that name them."""

# ruff: noqa: F401
import importlib
import pkgutil

from .._jax.op import Op
from .abs import Abs
from .activations import Expm1, Log1p, Sigmoid
from .add import Add
from .astype import Astype
from .compare import Equal, Greater, GreaterEqual, Less, LessEqual, NotEqual
from .concatenate import Concatenate
from .div import Div
from .dynamic_slice import DynamicSlice, DynamicSliceInMemory, DynamicUpdateSlice
from .exp import Exp
from .in_memory import FromInMemory, ToInMemory
from .log import Log
from .matmul import Matmul
from .maximum import Maximum, Minimum
from .mul import Mul
from .neg import Neg
from .pad import Pad
from .power import Pow
from .reduce import BroadcastTo, Fill, Reduce, ReduceAxes, ReduceAxesInMemory
from .reshape import Reshape
from .rows import PutRows, Rows
from .rsqrt import Rsqrt
from .sign import Sign
from .slice import Place, Slice, SliceInMemory
from .sort import ArgsortRows, PutAlongRows, TakeAlongRows
from .sqrt import Sqrt
from .square import Square
from .stop_gradient import StopGradient
from .sub import Sub
from .take import ScatterAddRows, Take, TakeInMemory
from .tanh import Tanh
from .transpose import Transpose
from .trigonometric import Cos, Sin
from .where import Where


def _op_classes():
    for module_info in pkgutil.iter_modules(__path__):
        if module_info.name.startswith("_"):  # family bases and helpers
            continue
        module = importlib.import_module(f"{__name__}.{module_info.name}")
        for value in vars(module).values():
            defined_here = getattr(value, "__module__", None) == module.__name__
            if (
                isinstance(value, type)
                and issubclass(value, Op)
                and defined_here
                and getattr(value, "name", None)
            ):
                yield value


# Every op; the generic op tests run over this table.
OPS = tuple(sorted(set(_op_classes()), key=lambda op: op.__name__))
