"""Jask: disk-backed arrays that behave like native JAX values."""

from ._api import add as add
from ._api import divide as divide
from ._api import dot as dot
from ._api import full as full
from ._api import materialize as materialize
from ._api import mul as mul
from ._api import negative as negative
from ._api import reshape as reshape
from ._api import rows as rows
from ._api import square as square
from ._api import sub as sub
from ._api import sum as sum  # noqa: A004
from ._api import transpose as transpose
from ._api import vdot as vdot
from ._api import zeros as zeros
from ._checkpoint import load_tree as load_tree
from ._checkpoint import save_tree as save_tree
from ._jax.diskarray import DiskArray as DiskArray
from . import _numpy_api  # noqa: F401 - makes jax.numpy functions accept DiskArrays
from ._runtime import memory_budget as memory_budget
from ._runtime import scratch_dir as scratch_dir
from ._runtime import set_memory_budget as set_memory_budget

__all__ = [
    "DiskArray", "add", "divide", "dot", "full", "load_tree", "materialize", "memory_budget", "mul",
    "negative", "reshape", "rows", "save_tree", "scratch_dir", "set_memory_budget", "square", "sub",
    "sum", "transpose", "vdot", "zeros",
]
__version__ = "0.1.0"
