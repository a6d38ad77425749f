"""Jask's ops: one file per op, each a declarative `Op` subclass; the table below registers them."""
from .abs import Abs
from .activations import Expm1, Gelu, Log1p, Relu, Sigmoid, Softplus
from .add import Add
from .astype import Astype
from .compare import Equal, Greater, GreaterEqual, Less, LessEqual, NotEqual
from .concatenate import Concatenate
from .div import Div
from .exp import Exp
from .fill import Fill
from .from_dense import FromDense
from .log import Log
from .matmul import Matmul
from .maximum import Maximum, Minimum
from .mul import Mul
from .neg import Neg
from .place import Place
from .power import Pow
from .put_rows import PutRows
from .reduce import Reduce
from .reduce_axes import ReduceAxes, ReduceAxesDense
from ._elementwise import BroadcastTo
from .reshape import Reshape
from .rows import Rows
from .rsqrt import Rsqrt
from .sign import Sign
from .slice import Slice, SliceDense
from .sqrt import Sqrt
from .square import Square
from .stop_gradient import StopGradient
from .sub import Sub
from .tanh import Tanh
from .take import ScatterAddRows, Take, TakeDense
from .to_dense import ToDense
from .transpose import Transpose
from .trigonometric import Cos, Sin
from .where import Where

# Every registered op; the generic op tests run over this table.
OPS = (Sin, Cos, Abs, Add, Astype, BroadcastTo, Div, Equal, Exp, Expm1, Fill, FromDense, Gelu, Greater, GreaterEqual, Less, LessEqual, Log, Log1p,
       Matmul, Maximum, Minimum, Mul, Neg, NotEqual, Pow, PutRows, Reduce, ReduceAxes, ReduceAxesDense, Relu, Reshape, Rows, Rsqrt, Sigmoid, Sign, Softplus,
       Sqrt, Square, StopGradient, Sub, Tanh, ToDense, Transpose, Where,
       Take, TakeDense, ScatterAddRows,
       Slice, SliceDense, Place, Concatenate)

from .._jax import compat as _compat  # noqa: E402
from .._jax.op import Op as _Op, Release as _Release  # noqa: E402
from .._jax.diskarray import DiskArrayTy as _DiskArrayTy  # noqa: E402
from . import _elementwise, _rowgroup  # noqa: E402

# Under jit: fuse elementwise chains into single passes (results used more than once are
# written by the pass that computes them), then free intermediates.
_compat.install_lowering_passes(
    _compat.fuse_chains(_Op, _elementwise.fuse, _elementwise.merge_operands),
    _compat.fuse_groups(_Op, _rowgroup.find_groups, _rowgroup.group_op),
    _compat.fuse_shared_results(_Op, _elementwise.fuse_results, _elementwise.merge_operands),
    _compat.insert_releases(_Op, _DiskArrayTy, lambda avals: _Release(*avals)),
)
