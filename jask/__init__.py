"""Jask: disk-backed arrays that behave like native JAX values."""

from ._api import abs as abs  # noqa: A004
from ._api import outer as outer
from ._api import einsum as einsum
from ._api import var as var
from ._api import softmax as softmax
from ._api import mean as mean
from ._api import logsumexp as logsumexp
from ._api import log_softmax as log_softmax
from ._api import broadcast_to as broadcast_to
from ._api import add as add
from ._api import astype as astype
from ._api import clip as clip
from ._api import concatenate as concatenate
from ._api import divide as divide
from ._api import dot as dot
from ._api import equal as equal
from ._api import exp as exp
from ._api import softplus as softplus
from ._api import sin as sin
from ._api import cos as cos
from ._api import prod as prod
from ._api import sigmoid as sigmoid
from ._api import relu as relu
from ._api import log1p as log1p
from ._api import gelu as gelu
from ._api import expm1 as expm1
from ._api import full as full
from ._api import full_like as full_like
from ._api import greater as greater
from ._api import greater_equal as greater_equal
from ._api import less as less
from ._api import less_equal as less_equal
from ._api import log as log
from ._api import materialize as materialize
from ._api import matmul as matmul
from ._api import max as max  # noqa: A004
from ._api import maximum as maximum
from ._api import min as min  # noqa: A004
from ._api import minimum as minimum
from ._api import mul as mul
from ._api import negative as negative
from ._api import not_equal as not_equal
from ._api import ones_like as ones_like
from ._api import power as power
from ._api import reshape as reshape
from ._api import rows as rows
from ._api import rsqrt as rsqrt
from ._api import sign as sign
from ._api import sqrt as sqrt
from ._api import square as square
from ._api import stack as stack
from ._api import sub as sub
from ._api import sum as sum  # noqa: A004
from ._api import tanh as tanh
from ._api import take as take
from ._api import transpose as transpose
from ._api import vdot as vdot
from ._api import where as where
from ._api import zeros as zeros
from ._api import zeros_like as zeros_like
from ._checkpoint import load_tree as load_tree
from ._checkpoint import save_tree as save_tree
from ._jax.diskarray import DiskArray as DiskArray
from . import _numpy_api  # noqa: F401 - makes jax.numpy functions accept DiskArrays
from ._runtime import memory_budget as memory_budget
from ._runtime import io_mode as io_mode
from ._runtime import set_io_mode as set_io_mode
from ._runtime import set_scratch_recycling as set_scratch_recycling
from ._runtime import scratch_dir as scratch_dir
from ._runtime import set_memory_budget as set_memory_budget

__all__ = [
    "DiskArray", "abs", "einsum", "outer", "broadcast_to", "log_softmax", "logsumexp", "mean", "softmax", "var", "expm1", "gelu", "log1p", "relu", "sigmoid", "softplus", "add", "astype", "clip", "concatenate", "divide", "dot", "equal", "exp", "full",
    "full_like", "greater", "greater_equal", "less", "less_equal", "load_tree", "log",
    "materialize", "matmul", "max", "maximum", "memory_budget", "min", "minimum", "mul", "negative",
    "not_equal", "ones_like", "power", "reshape", "rows", "rsqrt", "save_tree", "scratch_dir",
    "set_memory_budget", "set_io_mode", "io_mode", "set_scratch_recycling", "sign", "sqrt", "square", "stack", "sub", "sum", "take", "tanh", "transpose", "vdot",
    "where", "zeros", "zeros_like",
]
__version__ = "0.1.0"
