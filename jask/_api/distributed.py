"""Data parallelism over multi-process JAX: each process streams its own row shard.

Jask runs inside multi-controller JAX (`jax.distributed`, one process per host, collectives
over gloo on CPU) rather than beside it: each process opens its rows of the dataset as
DiskArrays, computes its part of the loss and gradients in a jitted step, and `allreduce`
combines the parts with JAX's own collectives (`psum`, `pmax`, `pmin` in a `jax.shard_map`
over a mesh of one device per process). In-memory leaves are reduced in one collective per
dtype; a DiskArray leaf (a gradient of a parameter larger than memory) is reduced block by
block within the memory budget and comes back as a new DiskArray.

Rows are split into contiguous ranges as equal as possible: with R rows over N processes,
process p gets R // N rows, and the first R % N processes one more (`row_range`).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import zlib
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from numpy.lib import format as npy_format

from .. import _engine, _runtime
from .._durable import fsync_folder
from .._jax import compat
from .._jax.diskarray import DiskArray, is_disk_array
from .._jax.op import apply, describe
from ..ops.write_rows import WriteRows
from .creation import zeros
from .indexing import rows
from .io import open_array

# What the launcher (python -m jask.launch) sets in each process's environment.
ENV_COORDINATOR = "JASK_COORDINATOR"
ENV_NUM_PROCESSES = "JASK_NUM_PROCESSES"
ENV_PROCESS_ID = "JASK_PROCESS_ID"

AXIS = "processes"  # the mesh axis of allreduce's collectives: one device per process
OPS = ("sum", "mean", "max", "min")
RANK_FIELD = "{rank}"  # in a shard path pattern: the process id

# Failure detection (see README, "Scaling out"): a process that has not sent a heartbeat to the
# coordinator for this long is declared dead, and JAX's coordination service then terminates
# every other process. A peer that dies while the others wait in a collective closes its
# sockets, so they fail at once; the heartbeat covers hosts that vanish without closing them.
HEARTBEAT_TIMEOUT_S = 20
INITIALIZATION_TIMEOUT_S = 120
SHUTDOWN_TIMEOUT_S = 30
_MAX_NPY_HEADER = 10_000


def initialize(
    coordinator_address: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
    *,
    auto_detect: bool = False,
    heartbeat_timeout_s: int = HEARTBEAT_TIMEOUT_S,
    initialization_timeout_s: int = INITIALIZATION_TIMEOUT_S,
    shutdown_timeout_s: int = SHUTDOWN_TIMEOUT_S,
) -> None:
    """Joins this process to a multi-process JAX run, or makes it a run of one process.

    Call it first, before any JAX computation. Arguments left out are read from the
    environment: ``JASK_COORDINATOR`` (``host:port`` of process 0's coordinator; else JAX's
    ``JAX_COORDINATOR_ADDRESS``), ``JASK_NUM_PROCESSES`` and ``JASK_PROCESS_ID``, which
    ``python -m jask.launch`` sets. With no coordinator anywhere the process runs alone
    (`allreduce` returns its argument), so one script serves both; ``auto_detect=True`` lets
    JAX find the cluster instead (Slurm, Open MPI, mpi4py, Kubernetes). CPU collectives go
    through gloo (``jax_cpu_collectives_implementation``).

    Args:
      coordinator_address: ``host:port`` where process 0 serves the coordinator; every
        process passes the same one.
      num_processes: how many processes take part.
      process_id: this process's id, in ``range(num_processes)``.
      auto_detect: let ``jax.distributed`` detect the cluster when no coordinator is given.
      heartbeat_timeout_s: a process silent this long is declared dead and the run stops.
      initialization_timeout_s: how long to wait for every process to join.
      shutdown_timeout_s: how long an exiting process waits for the others to exit.

    >>> import jask.distributed as jd
    >>> jd.initialize()  # no coordinator given anywhere: a run of one process
    >>> jd.process_id(), jd.num_processes()
    (0, 1)
    """
    if jax.distributed.is_initialized():
        return
    address = coordinator_address or os.environ.get(ENV_COORDINATOR)
    address = address or os.environ.get("JAX_COORDINATOR_ADDRESS")
    if num_processes is None:
        num_processes = _env_int(ENV_NUM_PROCESSES)
    if process_id is None:
        process_id = _env_int(ENV_PROCESS_ID)
    if address is None and not auto_detect:
        if num_processes not in (None, 1):
            raise ValueError(
                f"jask.distributed.initialize: {num_processes} processes need a coordinator "
                f"address (coordinator_address= or {ENV_COORDINATOR}=host:port)"
            )
        return
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        address,
        num_processes=num_processes,
        process_id=process_id,
        initialization_timeout=initialization_timeout_s,
        heartbeat_timeout_seconds=heartbeat_timeout_s,
        shutdown_timeout_seconds=shutdown_timeout_s,
    )


def _env_int(name: str) -> int | None:
    value = os.environ.get(name)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"jask.distributed: {name}={value!r} must be an integer") from None


def process_id() -> int:
    """This process's id (``jax.process_index()``): 0 to num_processes() - 1."""
    return jax.process_index()


def num_processes() -> int:
    """How many processes take part (``jax.process_count()``)."""
    return jax.process_count()


def row_range(
    num_rows: int, num_processes: int | None = None, process_id: int | None = None
) -> tuple[int, int]:
    """The rows [start, stop) of process `process_id` when `num_rows` rows are split over
    `num_processes` processes: contiguous, as equal as possible, the first
    ``num_rows % num_processes`` processes one row more.

    >>> import jask.distributed as jd
    >>> [jd.row_range(10, 4, p) for p in range(4)]
    [(0, 3), (3, 6), (6, 8), (8, 10)]
    """
    n = jax.process_count() if num_processes is None else num_processes
    p = jax.process_index() if process_id is None else process_id
    if n < 1 or not 0 <= p < n:
        raise ValueError(f"row_range: process {p} of {n} processes is not a process")
    if num_rows < n:
        raise ValueError(
            f"row_range: {num_rows} rows cannot be split over {n} processes (each needs a row)"
        )
    base, extra = divmod(num_rows, n)
    start = p * base + min(p, extra)
    return start, start + base + (1 if p < extra else 0)


@dataclasses.dataclass(frozen=True)
class Shard:
    """This process's rows of a dataset split by rows over the processes.

    Attributes:
      local: the rows as a DiskArray, opened in place (no copy).
      global_shape: the shape of the whole dataset, all processes' rows together.
      start, stop: the rows [start, stop) of the whole dataset that `local` holds.
    """

    local: DiskArray
    global_shape: tuple[int, ...]
    start: int
    stop: int

    @property
    def num_rows(self) -> int:
        """The whole dataset's rows (``global_shape[0]``)."""
        return self.global_shape[0]


# What open_shard takes: a path, a pattern, paths, one shared DiskArray, or a function of the rank.
ShardSource = (
    str | os.PathLike | Sequence[str | os.PathLike] | DiskArray | Callable[[int], DiskArray]
)


def open_shard(
    source: ShardSource,
    *,
    mode: str = "r",
) -> Shard:
    """Opens this process's shard of a dataset split by rows, in place.

    Args:
      source: one of
        - a path pattern with ``{rank}``, e.g. ``"data/x-{rank}.npy"``: one .npy file per
          process (as `split_into_shards` writes them), each on its own host's disk; the
          files' rows follow each other in process order;
        - a list of paths, one per process, the same way;
        - a function of the process id that opens this process's own array, in any format
          Jask opens: ``lambda rank: jask.open_safetensors(f"x-{rank}.safetensors")["x"]``,
          ``lambda rank: jask.open_zarr(f"x-{rank}.zarr")``; the arrays' rows follow each
          other in process order, as with a pattern;
        - the path of one .npy file every process can read (a shared or replicated file):
          each process opens its rows of it (`row_range`) as a raw view at their offset;
        - one DiskArray every process can open, in any format (a tensor of a safetensors
          file, a Zarr or HDF5 array): each process takes its rows of it. Arrays stored raw
          (.npy, safetensors, raw files, stored .npz members, contiguous little-endian HDF5)
          give a view of the rows at their offset in the file; chunked or compressed ones
          (Zarr, chunked HDF5, deflated .npz) copy the rows once into a scratch array,
          reading only the chunks that hold them.
      mode: "r" or "r+", as for DiskArray.open ("r+" needs rows stored raw).

    Returns:
      A `Shard`: the local DiskArray, the global shape and this process's row range. With
      one array per process, the processes exchange their row counts (one small collective),
      so every process calls open_shard together.

    Raises:
      ValueError: the shards' trailing shapes or dtypes differ (naming both), a list does not
        have one path per process, a shared array has fewer rows than processes, or "r+" is
        asked of a chunked array.

    >>> import numpy as np, jask, jask.distributed as jd, tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "x.npy"); np.save(p, np.ones((5, 2), np.float32))
    >>> s = jd.open_shard(p)
    >>> s.global_shape, (s.start, s.stop), s.local.shape
    ((5, 2), (0, 5), (5, 2))
    """
    n, p = jax.process_count(), jax.process_index()
    if mode not in ("r", "r+"):
        raise ValueError(f"open_shard: mode must be 'r' or 'r+', got {mode!r}")
    if is_disk_array(source):
        return _rows_of_array(source, f"the array {describe(source)}", mode, n, p)
    if callable(source):
        local = source(p)
        if not is_disk_array(local):
            raise TypeError(
                f"open_shard: the function given returned {type(local).__name__} for process "
                f"{p}; it must open this process's array as a DiskArray"
            )
        return _own_shard(local, f"the array {describe(local)}")
    if isinstance(source, (list, tuple)):
        if len(source) != n:
            raise ValueError(
                f"open_shard: {len(source)} paths given for {n} processes; give one per process"
            )
        path = os.fspath(source[p])
        return _own_shard(open_array(path, mode=mode), path)
    path = os.fspath(source)
    if RANK_FIELD in path:
        path = path.replace(RANK_FIELD, str(p))
        return _own_shard(open_array(path, mode=mode), path)
    return _rows_of_array(open_array(path), path, mode, n, p)


def _own_shard(local: DiskArray, what: str) -> Shard:
    """This process's own array as its shard: the processes exchange their row counts."""
    if local.ndim == 0:
        raise ValueError(f"open_shard: {what} is 0-d; a shard needs rows")
    n, p = jax.process_count(), jax.process_index()
    layout = f"{local.dtype.name}{list(local.shape[1:])}"
    mine = [local.shape[0], zlib.crc32(layout.encode()) & 0x7FFFFFFF]
    table = np.zeros((n, 2), np.int32)
    table[p] = mine
    table = np.asarray(allreduce(table, "sum"))
    differ = [q for q in range(n) if table[q, 1] != mine[1]]
    if differ:
        raise ValueError(
            f"open_shard: the shards' rows differ in shape or dtype: process {p} opened "
            f"{what} as {describe(local)}, but process(es) {differ} hold rows of another "
            f"shape or dtype"
        )
    counts = [int(c) for c in table[:, 0]]
    start = sum(counts[:p])
    return Shard(local, (sum(counts), *local.shape[1:]), start, start + counts[p])


def _rows_of_array(whole: DiskArray, what: str, mode: str, n: int, p: int) -> Shard:
    """Rows `row_range(rows, n, p)` of one array every process opens."""
    shape = tuple(whole.shape)
    if len(shape) == 0:
        raise ValueError(f"open_shard: {what} is 0-d; a shard needs rows")
    if shape[0] < n:
        raise ValueError(
            f"open_shard: {what} has {shape[0]} rows ({describe(whole)}), fewer than the {n} "
            f"processes"
        )
    start, stop = row_range(shape[0], n, p)
    return Shard(_rows_in_place(whole, start, stop, mode, what), shape, start, stop)


def _rows_in_place(whole: DiskArray, start: int, stop: int, mode: str, what: str) -> DiskArray:
    """Rows [start, stop) of `whole`: a raw view at their offset in its file where it is stored
    raw, else (chunks, codecs) a scratch copy of them."""
    if _engine.is_chunked(whole.handle):
        if mode != "r":
            raise ValueError(
                f"open_shard: {what} is chunked (read-only), so mode {mode!r} cannot write its "
                f"rows; open it with mode='r'"
            )
        return _row_range_on_disk(whole, start, stop)
    _, _, path, offset, *_ = _engine.info(whole.handle)
    row_bytes = int(np.prod(whole.shape[1:], dtype=np.int64)) * whole.dtype.itemsize
    shape = (stop - start, *whole.shape[1:])
    return open_array(
        path, shape=shape, dtype=whole.dtype, offset=offset + start * row_bytes, mode=mode
    )


def npy_data_offset(path: str) -> int:
    """The byte offset of the first element of the .npy file at `path`."""
    with open(path, "rb") as f:
        try:
            version = npy_format.read_magic(f)
            if version == (1, 0):
                npy_format.read_array_header_1_0(f, max_header_size=_MAX_NPY_HEADER)
            else:
                npy_format.read_array_header_2_0(f, max_header_size=_MAX_NPY_HEADER)
        except ValueError as e:
            raise ValueError(f"{path} is not a readable .npy file: {e}") from None
        return f.tell()


def split_into_shards(
    source: DiskArray | str | os.PathLike, pattern: str | os.PathLike, num_shards: int
) -> list[str]:
    """Writes the rows of `source` into `num_shards` .npy files, one per process.

    Shard k holds rows ``row_range(rows, num_shards, k)`` and goes to `pattern` with
    ``{rank}`` replaced by k. Each shard streams from the source to a temporary file beside
    its path within the memory budget (the source is never read whole), which is flushed and
    renamed into place: a crash leaves each shard file complete or absent. Run it in one
    process, then copy each file to its host (or point every host at a shared folder).

    Args:
      source: a DiskArray, or the path of a .npy file (opened in place).
      pattern: the shard paths, with ``{rank}``: ``"data/x-{rank}.npy"``.
      num_shards: how many processes will read the shards.

    Returns:
      The shard paths, in process order.

    >>> import numpy as np, jask, jask.distributed as jd, tempfile, os
    >>> d = tempfile.mkdtemp(); x = jask.DiskArray.from_numpy(np.arange(10.0, dtype=np.float32))
    >>> paths = jd.split_into_shards(x, os.path.join(d, "x-{rank}.npy"), 3)
    >>> [np.load(q).tolist() for q in paths]
    [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]]
    """
    pattern = os.fspath(pattern)
    if RANK_FIELD not in pattern:
        raise ValueError(f"split_into_shards: the pattern {pattern!r} must contain {RANK_FIELD}")
    if isinstance(source, DiskArray):
        x, path = source, None
    else:
        path = os.fspath(source)
        x = open_array(path)
    if x.ndim == 0:
        raise ValueError(f"split_into_shards: {describe(x)} has no rows to split")
    _runtime.ensure_scratch()
    paths = []
    for k in range(num_shards):
        start, stop = row_range(x.shape[0], num_shards, k)
        rows_k = (
            _row_range_on_disk(x, start, stop)
            if path is None
            else _rows_in_place(x, start, stop, "r", path)
        )
        paths.append(pattern.replace(RANK_FIELD, str(k)))
        _save_atomically(rows_k, paths[-1])
    return paths


def _row_range_on_disk(x: DiskArray, start: int, stop: int) -> DiskArray:
    """Rows [start, stop) of x as a DiskArray: a view where x's slice is one, else a copy."""
    part = x[start:stop]
    if is_disk_array(part):
        return part
    # a small slice comes back in memory (IN_MEMORY_LIMIT): it is at most 2^20 elements
    return DiskArray.from_numpy(np.asarray(part))


def _save_atomically(x: DiskArray, path: str) -> None:
    folder = os.path.dirname(os.path.abspath(path))
    tmp = f"{path}.jask-tmp-{os.getpid()}"
    try:
        x.save(tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    fsync_folder(folder)


def allreduce(tree: Any, op: str = "sum", *, block_bytes: int | None = None) -> Any:
    """Combines a pytree across all processes: every process gets the sum (or mean, max, min)
    of every process's leaves.

    Every process calls it with a tree of the same structure, shapes and dtypes. In-memory
    leaves (jax.Arrays, NumPy arrays, Python numbers) are reduced with one collective per
    dtype (`jax.lax.psum`/`pmax`/`pmin` in a jitted `jax.shard_map` over one device per
    process) and come back as jax.Arrays. A DiskArray leaf is reduced block by block: a
    block of rows is read into memory, reduced by the same collective and written into a
    new DiskArray, so no process holds more than a few blocks of it (`block_bytes`, by
    default an eighth of the memory budget). In a run of one process the tree comes back
    as it is.

    Call it between jitted steps, on concrete values (it runs collectives itself); inside a
    function under `jax.shard_map` use `jax.lax.psum` directly.

    Args:
      tree: a pytree of in-memory arrays and DiskArrays.
      op: "sum", "mean" (sum / number of processes; floating dtypes only), "max" or "min".
      block_bytes: the bytes of a DiskArray leaf reduced per collective.

    Returns:
      A tree of the same structure: in-memory leaves as jax.Arrays of their dtype, DiskArray
      leaves as new DiskArrays of their shape and dtype.

    >>> import numpy as np, jask, jask.distributed as jd
    >>> grads = {"b": np.ones(3, np.float32), "w": jask.DiskArray.from_numpy(np.ones((4, 2), np.float32))}
    >>> out = jd.allreduce(grads, "mean")  # a run of one process: the same values
    >>> np.asarray(out["w"]).sum(), np.asarray(out["b"]).tolist()
    (np.float32(8.0), [1.0, 1.0, 1.0])
    """
    if op not in OPS:
        raise ValueError(f"allreduce: op must be one of {', '.join(OPS)}, got {op!r}")
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    for leaf in leaves:
        if compat.is_tracer(leaf) or compat.is_tracer(getattr(leaf, "_handle", None)):
            raise TypeError(
                "allreduce runs collectives between jitted steps and cannot take traced values; "
                "call it on the step's concrete results (inside jax.shard_map use jax.lax.psum)"
            )
    if op == "mean":
        for leaf in leaves:
            if not jnp.issubdtype(jnp.result_type(leaf), jnp.inexact):
                raise TypeError(
                    f"allreduce: op='mean' needs floating leaves, got {describe(leaf)}; "
                    "use op='sum'"
                )
    if jax.process_count() == 1:
        return tree
    block = _block_bytes(block_bytes)
    out = list(leaves)
    in_memory = [i for i, leaf in enumerate(leaves) if not isinstance(leaf, DiskArray)]
    for i, value in zip(in_memory, _reduce_in_memory([leaves[i] for i in in_memory], op)):
        out[i] = value
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, DiskArray):
            out[i] = _reduce_disk(leaf, op, block)
    return jax.tree_util.tree_unflatten(treedef, out)


def _block_bytes(block_bytes: int | None) -> int:
    if block_bytes is None:
        return max(1, _runtime.memory_budget() // 8)
    if block_bytes < 1:
        raise ValueError(f"allreduce: block_bytes must be positive, got {block_bytes}")
    return int(block_bytes)


def _reduce_in_memory(leaves: list, op: str) -> list[jax.Array]:
    """The leaves reduced, one collective per dtype over the leaves of that dtype flattened
    and concatenated."""
    arrays = [leaf if isinstance(leaf, jax.Array) else jnp.asarray(leaf) for leaf in leaves]
    out: list[jax.Array | None] = [None] * len(arrays)
    by_dtype: dict[np.dtype, list[int]] = {}
    for i, a in enumerate(arrays):
        by_dtype.setdefault(np.dtype(a.dtype), []).append(i)
    for members in by_dtype.values():
        reduced = _reduce_vector(_pack([arrays[i] for i in members]), op)
        shapes = tuple(tuple(arrays[i].shape) for i in members)
        for i, value in zip(members, _unpack(reduced, shapes)):
            out[i] = value
    return out


@jax.jit
def _pack(arrays: list[jax.Array]) -> jax.Array:
    return jnp.concatenate([a.reshape(-1) for a in arrays])


@functools.partial(jax.jit, static_argnums=1)
def _unpack(vector: jax.Array, shapes: tuple[tuple[int, ...], ...]) -> list[jax.Array]:
    out, offset = [], 0
    for shape in shapes:
        size = int(np.prod(shape, dtype=np.int64))
        out.append(vector[offset : offset + size].reshape(shape))
        offset += size
    return out


def _reduce_disk(x: DiskArray, op: str, block_bytes: int) -> DiskArray:
    """x reduced across processes, block_bytes of it per collective, into a new DiskArray."""
    row = int(np.prod(x.shape[1:], dtype=np.int64)) if x.ndim > 1 else 1
    if x.ndim > 1 and row * x.dtype.itemsize <= block_bytes:
        view = x.reshape(x.shape[0], row)  # blocks of whole rows
    else:
        view = x.reshape(x.size)  # a row does not fit a block: blocks of elements
    if view.shape[0] >= 2**31:
        raise ValueError(
            f"allreduce: {describe(x)} would be reduced as {view.shape[0]} rows, more than "
            f"2^31 - 1; raise block_bytes ({block_bytes}) to at least a row of x "
            f"({row * x.dtype.itemsize} bytes)"
        )
    per_row = int(np.prod(view.shape[1:], dtype=np.int64))  # elements
    rows_per_block = max(1, min(view.shape[0], block_bytes // (per_row * x.dtype.itemsize)))
    out = zeros(view.shape, x.dtype)
    for start in range(0, view.shape[0], rows_per_block):
        count = min(rows_per_block, view.shape[0] - start)
        block = rows(view, start, count).reshape(-1)
        # the last block is padded: one compiled collective for every block
        block = jnp.pad(block, (0, (rows_per_block - count) * per_row))
        reduced = _reduce_vector(block, op)[: count * per_row]
        index = jnp.arange(start, start + count, dtype=jnp.int32)
        apply(WriteRows, out, index, reduced.reshape(count, *view.shape[1:]))
    return out.reshape(x.shape)


def _reduce_vector(vector: jax.Array, op: str) -> jax.Array:
    """A 1-D array reduced across processes with one collective."""
    mesh = _process_mesh()
    device = mesh.devices[jax.process_index()]
    local = vector if vector.devices() == {device} else jax.device_put(vector, device)
    # the processes' vectors side by side: one global array, each process's part on its device
    sharding = NamedSharding(mesh, PartitionSpec(AXIS))
    spread = jax.make_array_from_single_device_arrays((mesh.size * vector.size,), sharding, [local])
    try:
        return _collective(op, mesh)(spread).addressable_shards[0].data
    except jax.errors.JaxRuntimeError as e:
        raise RuntimeError(
            f"jask.distributed.allreduce: the {op} of {vector.dtype.name}[{vector.size}] across "
            f"{mesh.size} processes failed, most likely because another process died (see its "
            f"output): {e}"
        ) from e


@functools.cache
def _process_mesh() -> Mesh:
    """A mesh of one device per process (each process's first), in process order."""
    first: dict[int, jax.Device] = {}
    for device in jax.devices():
        first.setdefault(device.process_index, device)
    return Mesh(np.array([first[p] for p in range(jax.process_count())]), (AXIS,))


@functools.cache
def _collective(op: str, mesh: Mesh):
    """The jitted collective of `op`: each process's part in, the reduction out on every one."""

    def reduce(x):
        if op == "mean":
            return (jax.lax.psum(x, AXIS) / mesh.size).astype(x.dtype)
        return {"sum": jax.lax.psum, "max": jax.lax.pmax, "min": jax.lax.pmin}[op](x, AXIS)

    spec = PartitionSpec(AXIS)
    return jax.jit(jax.shard_map(reduce, mesh=mesh, in_specs=spec, out_specs=PartitionSpec()))
