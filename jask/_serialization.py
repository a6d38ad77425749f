"""DiskArrays in other libraries' checkpoints: orbax.checkpoint and flax.serialization.

- **orbax.checkpoint**: a `TypeHandler` for DiskArray (`PyTreeCheckpointer`,
  `CheckpointManager`, `StandardCheckpointer`). Each DiskArray leaf is streamed by the engine
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
import os
import sys
from collections.abc import Callable

import jax
import numpy as np

from . import _runtime
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
    it (both through orbax's public register_type_handler)."""
    handlers = ocp.type_handlers
    if handlers.has_type_handler(DiskArray) and isinstance(
        handlers.get_type_handler(DiskArray), _OrbaxHandler.of(ocp)
    ):
        return
    array_handler = handlers.get_type_handler(jax.Array)
    handlers.register_type_handler(DiskArray, _OrbaxHandler.of(ocp)(), override=True)
    handlers.register_type_handler(jax.Array, array_handler, override=True)


class _OrbaxHandler:
    """Builds the orbax TypeHandler class (orbax is imported only where it is installed)."""

    _class = None

    @classmethod
    def of(cls, ocp) -> type:
        if cls._class is None:
            cls._class = _orbax_handler_class(ocp)
        return cls._class


def _orbax_handler_class(ocp) -> type:
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
                restored.append(DiskArray.open(os.fspath(_file_of(info)), mode="r"))
            return restored

        async def metadata(self, infos):
            metadata = []
            for info in infos:
                await info.await_path_creation()
                x = DiskArray.open(os.fspath(_file_of(info)), mode="r")
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

    return DiskArrayHandler


async def _save_all(values: list, infos: list) -> None:
    for value, info in zip(values, infos):
        await info.await_path_creation()
        if jax.process_index() != 0:
            continue
        path = _file_of(info)
        path.parent.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(value.save, os.fspath(path))


def _file_of(info):
    return info.parent_dir / ORBAX_FOLDER / (info.name.replace(os.sep, "_") + ".npy")


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
