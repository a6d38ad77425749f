"""Jask: disk-backed arrays that behave like native JAX values."""

from ._api.creation import full as full
from ._api.creation import full_like as full_like
from ._api.creation import ones_like as ones_like
from ._api.creation import zeros as zeros
from ._api.creation import zeros_like as zeros_like
from ._api.elementwise import abs as abs
from ._api.elementwise import add as add
from ._api.elementwise import astype as astype
from ._api.elementwise import clip as clip
from ._api.elementwise import divide as divide
from ._api.elementwise import equal as equal
from ._api.elementwise import exp as exp
from ._api.elementwise import expm1 as expm1
from ._api.elementwise import gelu as gelu
from ._api.elementwise import greater as greater
from ._api.elementwise import greater_equal as greater_equal
from ._api.elementwise import less as less
from ._api.elementwise import less_equal as less_equal
from ._api.elementwise import log as log
from ._api.elementwise import log1p as log1p
from ._api.elementwise import maximum as maximum
from ._api.elementwise import minimum as minimum
from ._api.elementwise import mul as mul
from ._api.elementwise import negative as negative
from ._api.elementwise import not_equal as not_equal
from ._api.elementwise import power as power
from ._api.elementwise import relu as relu
from ._api.elementwise import rsqrt as rsqrt
from ._api.elementwise import sigmoid as sigmoid
from ._api.elementwise import sign as sign
from ._api.elementwise import softplus as softplus
from ._api.elementwise import sqrt as sqrt
from ._api.elementwise import square as square
from ._api.elementwise import sub as sub
from ._api.elementwise import tanh as tanh
from ._api.elementwise import where as where
from ._api.indexing import rows as rows
from ._api.indexing import take as take
from ._api.io import materialize as materialize
from ._api.linalg import dot as dot
from ._api.linalg import einsum as einsum
from ._api.linalg import matmul as matmul
from ._api.linalg import outer as outer
from ._api.linalg import vdot as vdot
from ._api.reductions import log_softmax as log_softmax
from ._api.reductions import logsumexp as logsumexp
from ._api.reductions import max as max
from ._api.reductions import mean as mean
from ._api.reductions import min as min
from ._api.reductions import softmax as softmax
from ._api.reductions import sum as sum
from ._api.reductions import var as var
from ._api.shape import broadcast_to as broadcast_to
from ._api.shape import concatenate as concatenate
from ._api.shape import reshape as reshape
from ._api.shape import stack as stack
from ._api.shape import transpose as transpose
from ._checkpoint import load_tree as load_tree
from ._checkpoint import save_tree as save_tree
from ._jax.diskarray import DiskArray as DiskArray
from ._runtime import io_mode as io_mode
from ._runtime import memory_budget as memory_budget
from ._runtime import scratch_dir as scratch_dir
from ._runtime import set_io_mode as set_io_mode
from ._runtime import set_memory_budget as set_memory_budget
from ._runtime import set_scratch_recycling as set_scratch_recycling
from ._setup import install as _install

__all__ = [
    "DiskArray",
    "abs",
    "add",
    "astype",
    "broadcast_to",
    "clip",
    "concatenate",
    "divide",
    "dot",
    "einsum",
    "equal",
    "exp",
    "expm1",
    "full",
    "full_like",
    "gelu",
    "greater",
    "greater_equal",
    "io_mode",
    "less",
    "less_equal",
    "load_tree",
    "log",
    "log1p",
    "log_softmax",
    "logsumexp",
    "materialize",
    "matmul",
    "max",
    "maximum",
    "mean",
    "memory_budget",
    "min",
    "minimum",
    "mul",
    "negative",
    "not_equal",
    "ones_like",
    "outer",
    "power",
    "relu",
    "reshape",
    "rows",
    "rsqrt",
    "save_tree",
    "scratch_dir",
    "set_io_mode",
    "set_memory_budget",
    "set_scratch_recycling",
    "sigmoid",
    "sign",
    "softmax",
    "softplus",
    "sqrt",
    "square",
    "stack",
    "sub",
    "sum",
    "take",
    "tanh",
    "transpose",
    "var",
    "vdot",
    "where",
    "zeros",
    "zeros_like",
]
__version__ = "0.1.0"

_install()  # registers DiskArray with JAX: see jask/_setup.py
