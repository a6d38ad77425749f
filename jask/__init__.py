"""Jask: disk-backed arrays that behave like native JAX values."""

from ._api.creation import full as full
from ._api.creation import full_like as full_like
from ._api.creation import ones_like as ones_like
from ._api.creation import zeros as zeros
from ._api.creation import zeros_like as zeros_like
from ._api.indexing import rows as rows
from ._api.io import materialize as materialize
from ._api.io import update_tree_ as update_tree_
from ._api.numpy import abs as abs
from ._api.numpy import add as add
from ._api.numpy import astype as astype
from ._api.numpy import broadcast_to as broadcast_to
from ._api.numpy import clip as clip
from ._api.numpy import concatenate as concatenate
from ._api.numpy import cos as cos
from ._api.numpy import divide as divide
from ._api.numpy import dot as dot
from ._api.numpy import einsum as einsum
from ._api.numpy import equal as equal
from ._api.numpy import exp as exp
from ._api.numpy import expm1 as expm1
from ._api.numpy import gelu as gelu
from ._api.numpy import greater as greater
from ._api.numpy import greater_equal as greater_equal
from ._api.numpy import less as less
from ._api.numpy import less_equal as less_equal
from ._api.numpy import log as log
from ._api.numpy import log1p as log1p
from ._api.numpy import log_softmax as log_softmax
from ._api.numpy import logsumexp as logsumexp
from ._api.numpy import matmul as matmul
from ._api.numpy import max as max
from ._api.numpy import maximum as maximum
from ._api.numpy import mean as mean
from ._api.numpy import min as min
from ._api.numpy import minimum as minimum
from ._api.numpy import mul as mul
from ._api.numpy import negative as negative
from ._api.numpy import not_equal as not_equal
from ._api.numpy import outer as outer
from ._api.numpy import power as power
from ._api.numpy import prod as prod
from ._api.numpy import relu as relu
from ._api.numpy import reshape as reshape
from ._api.numpy import rsqrt as rsqrt
from ._api.numpy import sigmoid as sigmoid
from ._api.numpy import sign as sign
from ._api.numpy import sin as sin
from ._api.numpy import softmax as softmax
from ._api.numpy import softplus as softplus
from ._api.numpy import sqrt as sqrt
from ._api.numpy import square as square
from ._api.numpy import stack as stack
from ._api.numpy import sub as sub
from ._api.numpy import sum as sum
from ._api.numpy import take as take
from ._api.numpy import tanh as tanh
from ._api.numpy import transpose as transpose
from ._api.numpy import var as var
from ._api.numpy import vdot as vdot
from ._api.numpy import where as where
from ._api.on_disk import on_disk as on_disk
from ._api.sparse import row_sparse as row_sparse
from ._checkpoint import load_tree as load_tree
from ._checkpoint import save_tree as save_tree
from ._jax.diskarray import DiskArray as DiskArray
from ._progress import progress_enabled as progress_enabled
from ._progress import set_progress as set_progress
from ._runtime import io_mode as io_mode
from ._runtime import memory_budget as memory_budget
from ._runtime import memory_stats as memory_stats
from ._runtime import reset_memory_peak as reset_memory_peak
from ._runtime import scratch_dir as scratch_dir
from ._runtime import set_io_mode as set_io_mode
from ._runtime import set_memory_budget as set_memory_budget
from ._runtime import set_scratch_recycling as set_scratch_recycling
from ._setup import install as _install
from ._stats import OpStats as OpStats
from ._stats import Stats as Stats
from ._stats import reset_stats as reset_stats
from ._stats import stats as stats
from .formats.hdf5 import open_hdf5 as open_hdf5
from .formats.npz import open_npz as open_npz
from .formats.safetensors import open_safetensors as open_safetensors
from .formats.safetensors import safetensors_metadata as safetensors_metadata
from .formats.safetensors import save_safetensors as save_safetensors
from .formats.zarr import open_zarr as open_zarr
from .formats.zarr import to_zarr as to_zarr

__all__ = [
    "DiskArray",
    "OpStats",
    "Stats",
    "abs",
    "add",
    "astype",
    "broadcast_to",
    "clip",
    "concatenate",
    "cos",
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
    "memory_stats",
    "min",
    "minimum",
    "mul",
    "negative",
    "not_equal",
    "on_disk",
    "ones_like",
    "open_hdf5",
    "open_npz",
    "open_safetensors",
    "open_zarr",
    "outer",
    "power",
    "prod",
    "progress_enabled",
    "relu",
    "reset_memory_peak",
    "reset_stats",
    "reshape",
    "row_sparse",
    "rows",
    "rsqrt",
    "safetensors_metadata",
    "save_safetensors",
    "save_tree",
    "scratch_dir",
    "set_io_mode",
    "set_memory_budget",
    "set_progress",
    "set_scratch_recycling",
    "sigmoid",
    "sign",
    "sin",
    "softmax",
    "softplus",
    "sqrt",
    "square",
    "stack",
    "stats",
    "sub",
    "sum",
    "take",
    "tanh",
    "to_zarr",
    "transpose",
    "update_tree_",
    "var",
    "vdot",
    "where",
    "zeros",
    "zeros_like",
]
__version__ = "0.1.0"

_install()  # registers DiskArray with JAX: see jask/_setup.py
