"""Jask's ops: one file per op, each a declarative `Op` subclass; the table below registers them."""
from .add import Add
from .add_scalar import AddScalar
from .fill import Fill
from .from_dense import FromDense
from .matmul import Matmul
from .mul import Mul
from .neg import Neg
from .reshape import Reshape
from .rsub_scalar import RsubScalar
from .scale import Scale
from .square import Square
from .sub import Sub
from .sum import Sum
from .sum_mul import SumMul
from .to_dense import ToDense
from .transpose import Transpose

# Every registered op; the generic op tests run over this table.
OPS = (Add, AddScalar, Fill, FromDense, Matmul, Mul, Neg, Reshape, RsubScalar, Scale, Square, Sub,
       Sum, SumMul, ToDense, Transpose)
