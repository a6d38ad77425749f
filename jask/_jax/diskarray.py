"""DiskArray: an array stored in a file, registered as a JAX hijax type.

Inside JAX a DiskArray is one int32 handle (its lowered form); the file
behind the handle lives in the C++ engine's registry. The type seen by
tracing is `DiskArrayTy(shape, dtype)` only, so a jitted function compiles
once for every array of the same shape and dtype.
"""

from __future__ import annotations

import operator
import os
import pickle
import weakref
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .. import _engine, _progress, _runtime
from .._dtypes import dtype_from_code
from . import compat

# The functions operators and methods dispatch to, filled in by jask._setup.install (the
# functions are written with ops, which sit above this module).
OPERATORS: dict[str, Any] = {}


def _op(name):
    return OPERATORS[name]


class DiskArrayTy(compat.HiType):
    """The JAX type of a DiskArray: shape, dtype and JAX's weak_type flag, nothing about the
    file.

    `weak_type` means what it means on a jax.Array's type: the value's dtype came from a
    Python scalar (an int32 DiskArray plus 1.5 is a weak float32), so jax.numpy's promotion
    lets a strongly typed operand choose the dtype (times a bfloat16 array: bfloat16). Arrays
    read from files or NumPy are never weak, as jnp.asarray of a NumPy array is not."""

    def __init__(self, shape: tuple[int, ...], dtype, weak_type: bool = False):
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        self.ndim = len(self.shape)
        self.size = int(np.prod(self.shape, dtype=np.int64))
        self.weak_type = bool(weak_type)

    def __eq__(self, other):
        return (
            isinstance(other, DiskArrayTy)
            and self.shape == other.shape
            and self.dtype == other.dtype
            and self.weak_type == other.weak_type
        )

    def __hash__(self):
        return hash((DiskArrayTy, self.shape, self.dtype, self.weak_type))

    def __repr__(self):
        weak = ", weak_type=True" if self.weak_type else ""
        return f"DiskArrayTy({self.str_short()}{weak})"

    def __str__(self):
        return f"{'~' if self.weak_type else ''}{self.str_short()}"  # as a jax.Array's type

    def str_short(self, short_dtypes=False, mesh_axis_types=False):
        return f"disk:{self.dtype.name}[{','.join(map(str, self.shape))}]"

    def normalize(self):
        """The type without its weak_type flag: what JAX compares when it matches types
        (core.typematch: a cotangent's type against its primal's, a loop's carries)."""
        return self.update(weak_type=False)

    # lowering: one int32 scalar handle
    def update(self, **changes):
        """The type with JAX's fields changed: shape, dtype and weak_type give a new type; the
        others (how values vary over mesh axes, set by abstract evaluation rules) a DiskArray
        does not record, and leave it as it is."""
        shape, dtype = changes.pop("shape", self.shape), changes.pop("dtype", self.dtype)
        weak_type = bool(changes.pop("weak_type", self.weak_type))
        if (shape, np.dtype(dtype), weak_type) == (self.shape, self.dtype, self.weak_type):
            return self
        return DiskArrayTy(shape, dtype, weak_type)

    def lo_ty(self):
        return [compat.ShapedArray((), jnp.int32)]

    def lower_val(self, hi_val):
        if not isinstance(hi_val, DiskArray):
            # an in-memory value where the program expects this type: the tangent JAX builds
            # for a DiskArray (jax.jacfwd's basis, an in-memory tangent given to jax.jvp)
            return [_lowered_copy(hi_val)]
        return [hi_val._lowered_handle()]

    def raise_val(self, handle):
        return DiskArray(self, handle)

    # autodiff: tangents and cotangents of a DiskArray are DiskArrays; an integer or boolean
    # one has JAX's float0 tangents (zeros of no storage, in memory), as a jax.Array's
    def to_tangent_aval(self):
        if compat.has_float0_tangents(self.dtype):
            return compat.ShapedArray(self.shape, compat.FLOAT0)
        return self

    def vspace_zero(self):
        return with_weak_type(_op("zeros")(self.shape, self.dtype), self.weak_type)

    def vspace_add(self, x, y):
        return _op("add")(x, y)

    # vmap: a batched DiskArray holds every element of the batch along one axis
    def dec_rank(self, size, spec):
        if spec is SCAN_SLICES:  # the body of a jax.lax.scan over this array sees a slice in memory
            return compat.ShapedArray(self.shape[1:], self.dtype, weak_type=self.weak_type)
        return DiskArrayTy(self.shape[:spec] + self.shape[spec + 1 :], self.dtype, self.weak_type)

    def inc_rank(self, size, spec):
        if spec is SCAN_SLICES:
            raise TypeError(
                f"jax.lax.scan cannot stack a body's DiskArray output {self.str_short()} into "
                f"its ys: return in-memory ys, or carry the DiskArray instead"
            )
        return DiskArrayTy(
            self.shape[:spec] + (size,) + self.shape[spec:], self.dtype, self.weak_type
        )

    # jax.lax.scan over a DiskArray (xs): jask/_api/loops.py's scan rule reads one leading-axis
    # slice per iteration into memory (the engine reads the next one ahead)
    def leading_axis_spec(self):
        return SCAN_SLICES

    # what JAX asks of an array's type: no mesh, device memory
    @property
    def sharding(self):
        return compat.default_sharding(self.ndim)

    mat = compat.EMPTY_MAT
    memory_space = compat.DEVICE_MEMORY

    # Jask's own methods on tracers (jax.Array's are installed by install_methods below)
    update_ = compat.aval_method(lambda x, new: _not_under_trace("update_"))
    save = compat.aval_method(lambda x, path: _not_under_trace("save"))
    _getitem = staticmethod(lambda x, key: _op("getitem")(x, key))
    # iterating a traced DiskArray (`a, b = x` under jit): its rows, as for a jax.Array
    _iter = staticmethod(lambda x: (x[i] for i in range(x.shape[0])))
    # len(), bool(), int(), float(), operator.index() of a tracer: what a jax.Array tracer's
    # type answers (its length; JAX's concretization errors for the conversions)
    _len = compat.ShapedArray._len
    _bool = compat.ShapedArray._bool
    _int = compat.ShapedArray._int
    _float = compat.ShapedArray._float
    _complex = compat.ShapedArray._complex
    _index = compat.ShapedArray._index


class _ScanSlices(compat.MappingSpec):
    """How jax.lax.scan maps a DiskArray's leading axis: into in-memory slices."""


SCAN_SLICES = _ScanSlices()


SetWeakType = Callable[[Any, bool], Any]
"""(value, weak) -> the value with JAX's weak_type flag `weak` (values and dtype unchanged)."""
_set_weak_type: SetWeakType | None = None


def weak_type_setter(fn: SetWeakType) -> SetWeakType:
    """Registers the decorated function as the one that sets a value's weak_type flag (it is
    written with ops, which sit above this module: jask/_api/lax_elementwise.py)."""
    global _set_weak_type
    _set_weak_type = fn
    return fn


def with_weak_type(x, weak: bool | None):
    """x (a DiskArray or an in-memory value) with JAX's weak_type flag `weak` (None: as it is)."""
    if weak is None or _set_weak_type is None:
        return x
    try:
        current = compat.typeof(x).weak_type
    except (TypeError, AttributeError):  # not an array (a rule's token, a PRNG key's type)
        return x
    return x if current == weak else _set_weak_type(x, weak)


def is_disk_array(x) -> bool:
    """True for a DiskArray or a tracer of one."""
    return type(x) is DiskArray or (compat.is_tracer(x) and isinstance(x.aval, DiskArrayTy))


def from_in_memory(x) -> DiskArray:
    """An in-memory array (or its tracer) written to a new DiskArray."""
    return _op("from_numpy")(x)


def _lowered_copy(x):
    """The lowered handle of a new DiskArray holding the in-memory value `x`, for a program
    JAX lowers eagerly (a cond, loop or jit bound on concrete values) that expects a DiskArray
    there. The new DiskArray lives as long as that handle, the program's argument: JAX drops
    it once the program is dispatched, and the DiskArray's release then waits for the program
    (as for any array passed to one). Dropped at once, its file would be freed before the
    program reads it."""
    disk = from_in_memory(x)
    if not compat.is_eager() or compat.is_tracer(disk._handle):
        return disk._lowered_handle()  # staged, or a constant of the program being traced
    lo = jnp.asarray(np.int32(disk.handle))
    disk._lo = np.int32(disk.handle)  # passed to a program: released after programs ran
    weakref.finalize(lo, _keep_until_dropped, disk)
    return lo


def _keep_until_dropped(disk) -> None:
    """A finalizer's hold on `disk`: released when the finalizer runs."""


def check_fits_in_memory(x, what: str, instead: str) -> None:
    """ValueError when reading `x` whole into memory (for `what`) would exceed the memory
    budget, naming its size, the budget and what to do `instead`."""
    budget, nbytes = _runtime.memory_budget(), x.size * x.dtype.itemsize  # x may be a tracer
    if nbytes > budget:
        raise ValueError(
            f"{what} reads the whole DiskArray {x.dtype.name}{list(x.shape)} ({nbytes} bytes) "
            f"into memory, more than the memory budget of {budget} bytes "
            f"(jask.set_memory_budget): {instead}, or read it into memory anyway with "
            f"jask.materialize(x)"
        )


# The ufuncs NumPy calls for the operators of an ndarray (or NumPy scalar) and a DiskArray
# (`ndarray + x` is np.add(ndarray, x)), and the jax.numpy functions x's own operators use.
_OPERATOR_UFUNCS = {
    name: getattr(jnp, name)
    for name in (
        *("add", "subtract", "multiply", "divide", "floor_divide", "remainder", "power"),
        *("matmul", "divmod", "equal", "not_equal", "less", "less_equal", "greater"),
        *("greater_equal", "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift"),
        "right_shift",
    )
}


def _not_under_trace(what: str):
    raise TypeError(
        f"DiskArray.{what}() writes files and cannot run inside jax.jit or jax.grad; "
        f"call it on the concrete result, outside the transformed function"
    )


class _DiskArrayMeta(type(jax.Array)):
    # isinstance(tracer, DiskArray) is True for tracers of DiskArrays.
    def __instancecheck__(cls, obj):
        if type.__instancecheck__(cls, obj):
            return True
        return compat.is_tracer(obj) and isinstance(getattr(obj, "aval", None), DiskArrayTy)


class DiskArray(jax.Array, metaclass=_DiskArrayMeta):
    """An array that lives in a .npy file and streams through memory in blocks.

    Create one with `DiskArray.from_numpy`, `DiskArray.open`, `jask.zeros`, or
    any Jask op. It works eagerly and under `jax.jit` and `jax.grad`.

    >>> import numpy as np, jask
    >>> x = jask.DiskArray.from_numpy(np.ones((3, 2), np.float32))
    >>> float(jask.sum(x * 2.0))
    12.0
    """

    __slots__ = ("_ty", "_handle", "_lo", "_owned")
    __array_priority__ = 1000

    def __init__(self, ty: DiskArrayTy, handle):
        # `handle` is an int, a concrete int32 jax.Array (a jitted program's
        # output), or an int32 tracer (inside lowering).
        self._ty = ty
        self._lo = None
        self._owned = False
        if compat.is_tracer(handle):
            self._handle = handle
            return
        self._handle = int(handle)  # waits for the producing program
        _engine.acquire(self._handle)
        self._owned = True

    def __del__(self):
        if getattr(self, "_owned", False):
            try:
                _runtime.release_handle(self._handle, passed_to_program=self._lo is not None)
            except Exception:  # interpreter shutdown: the engine is already gone
                pass

    # constructors -------------------------------------------------------
    @staticmethod
    def from_numpy(array) -> DiskArray:
        """Writes a NumPy array (or anything np.asarray accepts) to a new scratch file.

        >>> import numpy as np, jask
        >>> jask.DiskArray.from_numpy(np.arange(4, dtype=np.float32)).shape
        (4,)
        """
        return _op("from_numpy")(array)

    @staticmethod
    def open(path, shape=None, dtype=None, offset: int = 0, mode: str = "r") -> DiskArray:
        """Opens an existing .npy file, or a raw binary file given shape and dtype, in place.

        Args:
          path: the file. A .npy file is read from its header.
          shape, dtype, offset: for a raw file (like numpy.memmap): the array's
            shape, dtype, and the byte offset of its first element.
          mode: "r" (read-only, default) or "r+" (writable by `update_`). One
            process writes a file at a time: an "r+" open of a file another
            process has open "r+" raises BlockingIOError naming it (readers
            take no lock); the lock goes with the process's last array of it.

        >>> import numpy as np, jask, tempfile, os
        >>> p = os.path.join(tempfile.mkdtemp(), "x.npy"); np.save(p, np.eye(2, dtype=np.float32))
        >>> jask.DiskArray.open(p).shape
        (2, 2)
        """
        return _op("open")(path, shape=shape, dtype=dtype, offset=offset, mode=mode)

    # attributes ----------------------------------------------------------
    @property
    def aval(self) -> DiskArrayTy:
        return self._ty

    @property
    def shape(self) -> tuple[int, ...]:
        return self._ty.shape

    @property
    def dtype(self) -> np.dtype:
        return self._ty.dtype

    @property
    def ndim(self) -> int:
        return self._ty.ndim

    @property
    def size(self) -> int:
        return self._ty.size

    @property
    def nbytes(self) -> int:
        return self._ty.size * self._ty.dtype.itemsize

    @property
    def handle(self) -> int:
        """The engine handle (an int) of a concrete DiskArray."""
        if not self._owned:
            raise TypeError("a traced DiskArray has no concrete handle")
        return self._handle

    @property
    def path(self) -> str:
        """The file that holds this array (for a view, from reshape or a contiguous slice, the
        file it shares with the array it views)."""
        return _engine.info(self.handle)[2]

    @property
    def writable(self) -> bool:
        return bool(_engine.info(self.handle)[4])

    def _lowered_handle(self):
        if compat.is_tracer(self._handle):
            return self._handle
        if not compat.is_eager():
            # a constant of the program being traced; a cached array made
            # under a trace would leak a tracer
            return np.int32(self._handle)
        if self._lo is None:
            self._lo = jnp.asarray(np.int32(self._handle))
        return self._lo

    def __repr__(self):
        weak = ", weak_type=True" if self.weak_type else ""  # as a jax.Array's repr shows it
        if not self._owned:
            return f"DiskArray(traced, shape={self.shape}, dtype={self.dtype.name}{weak})"
        return f"DiskArray(shape={self.shape}, dtype={self.dtype.name}{weak}, file={self.path!r})"

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")  # jax.Array's (and NumPy's) message
        return self.shape[0]

    # bridges -------------------------------------------------------------
    def __array__(self, dtype=None, copy=None):
        """np.asarray(x), np.array(x): the whole array read into memory (the explicit bridge,
        as jask.materialize; conversions JAX or NumPy make on their own check the budget)."""
        if copy is False:
            raise ValueError("a DiskArray cannot be viewed as a NumPy array without a copy")
        out = np.empty(self.shape, self.dtype)
        _progress.settled(_engine.read_into)(self.handle, out.reshape(-1).view(np.uint8))
        return out if dtype is None else out.astype(dtype)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """NumPy ufuncs. One that is an operator (np.add, np.multiply, np.less, ...) called on
        two operands is that operator, as `ndarray + x` must be (NumPy calls np.add for it):
        a DiskArray, as `x + ndarray` is. Any other (np.sin, np.exp, np.add.reduce, an `out=`)
        computes in memory on the values, as for a jax.Array, within the memory budget."""
        operator = _OPERATOR_UFUNCS.get(ufunc.__name__)
        if operator is not None and method == "__call__" and len(inputs) == 2 and not kwargs:
            return operator(*inputs)
        what = f"numpy.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
        instead = f"jnp.{ufunc.__name__}" if hasattr(jnp, ufunc.__name__) else "jax.numpy"
        for value in (*inputs, *kwargs.get("out", ())):
            if isinstance(value, DiskArray):
                check_fits_in_memory(value, what, f"use {instead}, which streams it")
        if any(isinstance(v, DiskArray) for v in kwargs.get("out", ())):
            raise TypeError(f"{what}: a DiskArray cannot be an `out=` array; use {instead}")
        values = [np.asarray(v) if isinstance(v, DiskArray) else v for v in inputs]
        return getattr(ufunc, method)(*values, **kwargs)

    def tolist(self):
        """The values as nested Python lists, as jax.Array.tolist (within the memory budget)."""
        check_fits_in_memory(self, "DiskArray.tolist()", "iterate over slices of it")
        return np.asarray(self).tolist()

    def item(self, *args):
        """One element as a Python scalar, as jax.Array.item."""
        if not args and self.size != 1:  # NumPy's error, without reading the array
            raise ValueError("can only convert an array of size 1 to a Python scalar")
        if args:
            check_fits_in_memory(self, "DiskArray.item(index)", "index it: x[i].item()")
        return np.asarray(self).item(*args)

    def copy_to_host_async(self) -> None:
        """jax.Array's: nothing to start, a DiskArray's values are in its file."""

    def _scalar(self) -> np.ndarray:
        return np.asarray(self)  # bool(), int(), ...: checked to be one element first

    def __bool__(self):
        compat.check_bool_conversion(self)
        return bool(self._scalar())

    def __int__(self):
        compat.check_scalar_conversion(self)
        return int(self._scalar())

    def __float__(self):
        compat.check_scalar_conversion(self)
        return float(self._scalar())

    def __complex__(self):
        compat.check_scalar_conversion(self)
        return complex(self._scalar())

    def __index__(self):
        compat.check_integer_conversion(self)
        return operator.index(self._scalar())

    def save(self, path) -> None:
        """Writes a copy of this array to a new .npy file at `path`."""
        _progress.settled(_engine.save)(self.handle, os.fspath(path))

    def to_zarr(
        self, path, chunks=None, *, zarr_format=3, codec="zstd", level=None, overwrite=False
    ) -> None:
        """Writes this array to a new Zarr array at `path`, chunk by chunk (see jask.to_zarr)."""
        options = dict(zarr_format=zarr_format, codec=codec, level=level, overwrite=overwrite)
        _op("to_zarr")(self, path, chunks, **options)

    def update_(self, new) -> DiskArray:
        """Overwrites this array's file with `new`'s values and returns this array.

        The array keeps its handle, shape and dtype, so a jitted function that
        takes it is not retraced.

        >>> import numpy as np, jask
        >>> p = jask.DiskArray.from_numpy(np.zeros(3, np.float32))
        >>> p = p.update_(p + 1.0); np.asarray(p).tolist()
        [1.0, 1.0, 1.0]
        """
        return _op("update_")(self, new)

    __hash__ = None  # unhashable, as jax.Array: == is elementwise

    def __getitem__(self, key):
        return _op("getitem")(self, key)

    def block_until_ready(self) -> DiskArray:
        """Returns this array: a concrete DiskArray's file is written before it exists."""
        return self

    def is_ready(self) -> bool:
        return True

    @property
    def sharding(self):
        return self._ty.sharding

    def devices(self) -> set:
        return {jax.devices("cpu")[0]}

    @property
    def device(self):
        return jax.devices("cpu")[0]

    @property
    def weak_type(self) -> bool:
        return self._ty.weak_type

    # copies and pickling ------------------------------------------------------
    def __copy__(self) -> DiskArray:
        """copy.copy: another DiskArray on the same file (dropping either leaves the other
        valid; `update_` of one is seen by both, as for two names of one array)."""
        return DiskArray(self._ty, self.handle)

    def __deepcopy__(self, memo) -> DiskArray:
        """copy.deepcopy: an independent array, a new scratch file written block by block."""
        copied = with_weak_type(jax.lax.copy_p.bind(self), self.weak_type)
        memo[id(self)] = copied
        return copied

    def __reduce__(self):
        """pickle. A scratch array (its file goes with the process) within the memory budget
        is pickled by value and unpickles as a new scratch DiskArray of equal values, shape,
        dtype and weak_type in the unpickling process (as a jax.Array unpickles as a jax.Array); a larger
        one raises pickle.PicklingError naming x.save and jask.save_tree. An opened file is
        pickled as a reference to it (path, shape, dtype, byte offset, mode), reopened in place
        by unpickling; its values are not copied into the pickle."""
        if not self._owned:
            raise TypeError("a traced DiskArray cannot be pickled; pickle the concrete result")
        _, _, path, offset, writable, scratch = _engine.info(self.handle)
        if _engine.is_chunked(self.handle):
            raise pickle.PicklingError(
                f"cannot pickle a chunked DiskArray ({self._ty.str_short()}, {path!r}): its "
                f"elements live in encoded chunks, not at a byte offset; pickle the path and "
                f"open it again, or write it with x.save(path) and pickle jask.DiskArray.open(path)"
            )
        if scratch:
            budget = _runtime.memory_budget()
            if self.nbytes > budget:
                raise pickle.PicklingError(
                    f"cannot pickle a scratch DiskArray ({self._ty.str_short()}, {path!r}) of "
                    f"{self.nbytes} bytes by value: it is larger than the memory budget of "
                    f"{budget} bytes, and its file is deleted when this process ends. Write it "
                    f"to a file first with x.save(path) (or a tree with jask.save_tree) and "
                    f"pickle jask.DiskArray.open(path), which refers to that file"
                )
            return _from_pickled_values, (np.asarray(self), self.weak_type)
        mode = "r+" if writable else "r"
        return DiskArray.open, (path, self.shape, self.dtype.name, offset, mode)


def _from_pickled_values(values: np.ndarray, weak_type: bool = False) -> DiskArray:
    """Unpickling a DiskArray pickled by value: a new scratch array of this process, weakly
    typed where the pickled one was (as a jax.Array's pickle keeps its weak_type)."""
    return with_weak_type(_op("from_numpy")(values), weak_type)


# Jask's own members; everything else jax.Array offers comes from jax.numpy's definitions.
_OWN_MEMBERS = frozenset(
    name
    for name, value in vars(DiskArray).items()
    if not name.startswith("__")
    or name
    in (
        *("__getitem__", "__bool__", "__len__", "__array__", "__repr__", "__init__", "__del__"),
        *("__copy__", "__deepcopy__", "__reduce__", "__hash__", "__array_ufunc__"),
        *("__int__", "__float__", "__complex__", "__index__"),
    )
)


def install_methods() -> None:
    """Gives DiskArray and its tracers jax.Array's operators, methods and properties, written
    with jax.numpy (so each reaches the jax.lax primitives Jask implements)."""
    compat.install_array_methods(DiskArray, DiskArrayTy, keep=_OWN_MEMBERS | {"getitem"})


def info(handle: int) -> tuple[np.dtype, tuple[int, ...]]:
    """dtype and shape of an engine handle."""
    code, shape, *_ = _engine.info(handle)
    return dtype_from_code(code), tuple(shape)
