"""DiskArrays in other libraries' checkpoints: orbax.checkpoint and flax.serialization.

- **orbax.checkpoint**: a `TypeHandler` for DiskArray (`PyTreeCheckpointer`,
  `StandardCheckpointer`, `CheckpointManager` with `args.PyTreeSave`/`PyTreeRestore` or
  `args.StandardSave`/`StandardRestore`). Each DiskArray leaf is streamed by the engine
  into a .npy file of the checkpoint's folder, ``<checkpoint>/jask/<leaf name>.npy``, block
  by block, never whole in memory; restoring opens that file in place, read-only (mode "r":
  no copy; `update_` needs a copy, `x.copy()` or `copy.deepcopy(x)`).
- **flax.serialization**: `to_state_dict` keeps DiskArray leaves as they are;
  `from_state_dict` into a DiskArray target gives a DiskArray (an in-memory state, as
  `msgpack_restore` returns, is written to a scratch file after its shape and dtype are
  checked against the target's). msgpack (`to_bytes`) holds every array in memory:
  `in_memory_tree` reads DiskArray leaves into memory within the memory budget and refuses
  larger ones, naming their size and the budget.

`install()` (called by jask._setup.install) registers with each library when it is imported
(now, if it already is), so importing jask imports neither.
"""

from __future__ import annotations

import asyncio
import importlib.abc
import logging
import os
import stat
import sys
from collections.abc import Callable

import jax
import numpy as np

from . import _runtime
from ._checkpoint_index import file_kind
from ._jax.diskarray import DiskArray

ORBAX_TYPESTR = "jask.DiskArray"
ORBAX_FOLDER = "jask"  # beside orbax's own files in each checkpoint folder


def install() -> None:
    """Registers DiskArray with orbax.checkpoint and flax.serialization once each is imported."""
    when_imported("orbax.checkpoint", register_with_orbax)
    when_imported("flax.serialization", register_with_flax)


# -- flax.serialization ---------------------------------------------------------------


def register_with_flax(serialization) -> None:
    """`serialization` is the flax.serialization module."""
    if DiskArray not in serialization._STATE_DICT_REGISTRY:
        serialization.register_serialization_state(DiskArray, _flax_state, _flax_restore)


def _flax_state(x: DiskArray) -> DiskArray:
    return x


def _flax_restore(target: DiskArray, state) -> DiskArray:
    if isinstance(state, DiskArray):
        restored = state
    else:
        restored = np.asarray(state)
    if tuple(restored.shape) != target.shape or restored.dtype != target.dtype:
        where = sys.modules["flax.serialization"].current_path()
        raise ValueError(
            f"flax.serialization.from_state_dict: the state at {where!r} is "
            f"{restored.dtype}{list(restored.shape)}, but the target DiskArray is "
            f"{target.dtype}{list(target.shape)}"
        )
    return restored if isinstance(restored, DiskArray) else DiskArray.from_numpy(restored)


def in_memory_tree(tree, what: str):
    """`tree` with each DiskArray leaf read into a NumPy array, for serializers that hold every
    array in memory (flax's msgpack). A DiskArray larger than the memory budget is a
    ValueError naming its size, the budget, and the streaming alternatives."""
    return jax.tree.map(lambda x: in_memory(x, what), tree)


def in_memory(x, what: str):
    """x as a NumPy array if it is a DiskArray within the memory budget (see in_memory_tree)."""
    if not isinstance(x, DiskArray):
        return x
    budget = _runtime.memory_budget()
    if x.nbytes > budget:
        raise ValueError(
            f"{what}: a DiskArray of {x.dtype.name}{list(x.shape)} holds {x.nbytes} bytes, "
            f"more than the memory budget of {budget} bytes (jask.set_memory_budget), and "
            f"msgpack keeps every array in memory. Save trees of DiskArrays with "
            f"orbax.checkpoint (PyTreeCheckpointer or CheckpointManager stream each DiskArray "
            f"to a file) or jask.save_tree"
        )
    return np.asarray(x)


# -- orbax.checkpoint -------------------------------------------------------------------


def register_with_orbax(ocp) -> None:
    """`ocp` is the orbax.checkpoint module.

    orbax takes the first handler whose type matches, and DiskArray is a jax.Array: its
    handler goes where jax.Array's was, and jax.Array's handler is registered again after
    it (both through orbax's public register_type_handler). orbax's StandardRestore asks for
    np.ndarray or jax.Array leaves (from the saved metadata or a target tree), so those two
    handlers are wrapped to open the leaves saved by Jask as DiskArrays."""
    handlers = ocp.type_handlers
    disk_handler, restores_disk_arrays = _orbax_classes(ocp)
    if isinstance(handlers.get_type_handler(DiskArray), disk_handler):
        return
    array_handler = handlers.get_type_handler(jax.Array)
    numpy_handler = handlers.get_type_handler(np.ndarray)
    absl = logging.getLogger("absl")  # orbax warns of each override, which is the intent here
    level = absl.level
    absl.setLevel(logging.ERROR)
    try:
        handlers.register_type_handler(DiskArray, disk_handler(), override=True)
        handlers.register_type_handler(
            jax.Array, restores_disk_arrays(array_handler), override=True
        )
        handlers.register_type_handler(
            np.ndarray, restores_disk_arrays(numpy_handler), override=True
        )
    finally:
        absl.setLevel(level)


_ORBAX_CLASSES: list[type] = []


def _orbax_classes(ocp) -> list[type]:
    if not _ORBAX_CLASSES:
        _ORBAX_CLASSES.extend(_orbax_handler_classes(ocp))
    return _ORBAX_CLASSES


def _orbax_handler_classes(ocp) -> tuple[type, type]:
    from orbax.checkpoint import future as orbax_future
    from orbax.checkpoint.metadata import ArrayMetadata

    class DiskArrayHandler(ocp.type_handlers.TypeHandler):
        """Saves each DiskArray leaf as a .npy file in the checkpoint (streamed by the engine)
        and restores it by opening that file in place, read-only."""

        def typestr(self) -> str:
            return ORBAX_TYPESTR

        async def serialize(self, values, infos, args=None):
            for value in values:
                if not isinstance(value, DiskArray) or not value._owned:
                    raise TypeError(
                        f"orbax: the jask handler saves concrete DiskArrays, got {value!r}; "
                        f"save outside jax.jit"
                    )
            return [
                orbax_future.CommitFutureAwaitingContractedSignals(
                    _save_all(list(values), list(infos)), name="jask_disk_array_handler"
                )
            ]

        async def deserialize(self, infos, args=None):
            restored = []
            for info in infos:
                await info.await_path_creation()
                restored.append(DiskArray.open(_saved_file(info), mode="r"))
            return restored

        async def metadata(self, infos):
            metadata = []
            for info in infos:
                await info.await_path_creation()
                x = DiskArray.open(_saved_file(info), mode="r")
                metadata.append(
                    ArrayMetadata(
                        name=info.name,
                        directory=info.parent_dir,
                        shape=x.shape,
                        sharding=None,
                        dtype=x.dtype,
                    )
                )
            return metadata

    class RestoresDiskArrays(ocp.type_handlers.TypeHandler):
        """orbax's handler of a type (np.ndarray, jax.Array), except that a leaf saved by
        DiskArrayHandler is restored as a DiskArray."""

        def __init__(self, handler):
            self._handler = handler
            self._disk = DiskArrayHandler()

        def typestr(self) -> str:
            return self._handler.typestr()

        async def serialize(self, values, infos, args=None):
            return await self._handler.serialize(values, infos, args)

        async def deserialize(self, infos, args=None):
            mine = await _saved_by_jask(infos)
            theirs = [k for k, m in enumerate(mine) if not m]
            ours = [info for info, m in zip(infos, mine) if m]
            disk = await self._disk.deserialize(ours) if ours else []
            other = []
            if theirs:
                their_args = None if args is None else [args[k] for k in theirs]
                other = await self._handler.deserialize([infos[k] for k in theirs], their_args)
            return _interleave(mine, disk, other)

        async def metadata(self, infos):
            mine = await _saved_by_jask(infos)
            ours = [info for info, m in zip(infos, mine) if m]
            theirs = [info for info, m in zip(infos, mine) if not m]
            disk = await self._disk.metadata(ours) if ours else []
            other = await self._handler.metadata(theirs) if theirs else []
            return _interleave(mine, disk, other)

        def finalize(self, directory):
            self._handler.finalize(directory)

        def __getattr__(self, name):
            return getattr(self._handler, name)

    return DiskArrayHandler, RestoresDiskArrays


async def _save_all(values: list, infos: list) -> None:
    for value, info in zip(values, infos):
        await info.await_path_creation()
        if jax.process_index() != 0:
            continue
        path = _file_of(info)
        path.parent.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(value.save, os.fspath(path))


async def _saved_by_jask(infos) -> list[bool]:
    for info in infos:
        await info.await_path_creation()
    return [_is_saved_by_jask(info) for info in infos]


def _interleave(mine: list[bool], ours, theirs) -> list:
    ours, theirs = iter(ours), iter(theirs)
    return [next(ours) if m else next(theirs) for m in mine]


def _file_of(info):
    # The leaf's name, with separators replaced, is one plain file name inside the folder.
    return info.parent_dir / ORBAX_FOLDER / (info.name.replace(os.sep, "_") + ".npy")


def _saved_file(info) -> str:
    """The file DiskArrayHandler saved for `info`, once it is known to be a regular file
    inside the checkpoint: the handler never writes a link, and a FIFO would block the open."""
    file = os.fspath(_file_of(info))
    folder = os.path.dirname(file)
    for entry, is_kind, kind in ((folder, stat.S_ISDIR, "folder"), (file, stat.S_ISREG, "file")):
        try:
            mode = os.lstat(entry).st_mode
        except FileNotFoundError:
            raise FileNotFoundError(
                f"orbax: the jask leaf {info.name!r} of the checkpoint at {info.parent_dir} has "
                f"no file {file}"
            ) from None
        if not is_kind(mode):
            raise ValueError(
                f"orbax: {entry} in the checkpoint at {info.parent_dir} is {file_kind(mode)}; "
                f"the jask handler writes only a plain {kind} there, so the checkpoint has "
                f"been tampered with"
            )
    if os.path.dirname(os.path.realpath(file)) != os.path.realpath(folder):
        raise ValueError(f"orbax: {file} resolves outside the checkpoint at {info.parent_dir}")
    return file


def _is_saved_by_jask(info) -> bool:
    # lexists: a link or FIFO there is refused by _saved_file, not mistaken for orbax's own leaf.
    return os.path.lexists(_file_of(info))


# -- registering when a library is imported ------------------------------------------------


def when_imported(name: str, register: Callable[[object], None]) -> None:
    """Calls `register(module)` once the module `name` is imported (now, if it is)."""
    module = sys.modules.get(name)
    if module is not None:
        register(module)
        return
    _PostImport.callbacks.setdefault(name, []).append(register)
    if not any(isinstance(f, _PostImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _PostImport())


class _PostImport(importlib.abc.MetaPathFinder):
    """Runs the callbacks registered for a module after the module has executed."""

    callbacks: dict[str, list[Callable[[object], None]]] = {}

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.callbacks:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _RegisteringLoader(spec.loader, self.callbacks.pop(fullname))
                return spec
        return None


class _RegisteringLoader(importlib.abc.Loader):
    def __init__(self, loader, callbacks):
        self._loader = loader
        self._callbacks = callbacks

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        for register in self._callbacks:
            register(module)

    def __getattr__(self, name):
        return getattr(self._loader, name)
