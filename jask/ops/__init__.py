"""Jask's ops: one file per op (or per pair of ops that are each other's backward rule), each
a declarative `Op` subclass; `OPS` below lists them."""
from .abs import Abs
from .activations import Expm1, Gelu, Log1p, Relu, Sigmoid, Softplus
from .add import Add
from .astype import Astype
from .compare import Equal, Greater, GreaterEqual, Less, LessEqual, NotEqual
from .concatenate import Concatenate
from .div import Div
from .exp import Exp
from .in_memory import FromInMemory, ToInMemory
from .log import Log
from .matmul import Matmul
from .maximum import Maximum, Minimum
from .mul import Mul
from .neg import Neg
from .power import Pow
from .reduce import BroadcastTo, Fill, Reduce, ReduceAxes, ReduceAxesInMemory
from .reshape import Reshape
from .rows import PutRows, Rows
from .rsqrt import Rsqrt
from .sign import Sign
from .slice import Place, Slice, SliceInMemory
from .sqrt import Sqrt
from .square import Square
from .stop_gradient import StopGradient
from .sub import Sub
from .take import ScatterAddRows, Take, TakeInMemory
from .tanh import Tanh
from .transpose import Transpose
from .where import Where

# Every registered op; the generic op tests run over this table.
OPS = (Abs, Add, Astype, BroadcastTo, Concatenate, Div, Equal, Exp, Expm1, Fill, FromInMemory,
       Gelu, Greater, GreaterEqual, Less, LessEqual, Log, Log1p, Matmul, Maximum, Minimum, Mul,
       Neg, NotEqual, Place, Pow, PutRows, Reduce, ReduceAxes, ReduceAxesInMemory, Relu,
       Reshape, Rows, Rsqrt, ScatterAddRows, Sigmoid, Sign, Slice, SliceInMemory, Softplus,
       Sqrt, Square, StopGradient, Sub, Take, TakeInMemory, Tanh, ToInMemory, Transpose, Where)

