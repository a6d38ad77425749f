"""Checkpoints of pytrees that hold DiskArrays: a folder of .npy files, swapped into place
atomically.

A checkpoint at `path` is a folder::

    path/leaf_00000.npy, leaf_00001.npy, ...   one file per leaf, in jax.tree_util order
    path/index.json                            leaf records and the tree's structure, as JSON

`index.json` is written last, so a folder that has it is complete. No pickle
is involved anywhere: the structure is stored as nested JSON (dicts, lists,
tuples and None can be rebuilt from it; other nodes, such as the NamedTuples
of optax states, are rebuilt from an example tree passed as `like=`).

A save never writes into an existing checkpoint. It builds a new folder
``<path>.tmp-<pid>-<token>`` beside `path`, then renames `path` to
``<path>.old-<pid>-<token>``, renames the new folder to `path` and removes the
old one. If the process dies between the two renames, `path` is missing and
`load_tree` takes the complete sibling folder with the highest generation
number (every index records one, each save one higher than any folder it
sees, and the name of the folder it was saved as: its "target"). Folders left
by dead processes are removed by the next save.

What load_tree trusts: nothing in a checkpoint until it is checked. The index is
checked against what save_tree writes (jask/_checkpoint_index.py) before any of it
is used; each leaf is the plain name ``leaf_NNNNN.npy`` of its position, must be a
regular file inside the folder (a link, a FIFO or a device is refused before it is
opened), and must hold the shape and dtype the index records. The fallback to a
sibling folder takes only folders that a save to `path` could have left: named as
save_tree names them, real folders (not links) owned by this user, with an index
that passes the checks and names `path`'s folder as its target. Anyone who can
write `path`'s parent can replace the checkpoint itself, so the fallback does not
try to stop them; it stops another user of a shared parent (such as /tmp, where
they cannot touch `path` but can add entries beside it) from planting a sibling,
and a folder that is not a checkpoint of `path` from being mistaken for one.
What save_tree removes is limited the same way: `path` only if it is a checkpoint
holding nothing but its own files, a sibling only if this user's and holding
only names save_tree writes.
"""

from __future__ import annotations

import json
import math
import os
import re
import secrets
import shutil
import stat
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from . import _checkpoint_index as checked
from . import _progress
from ._api.creation import zeros
from ._checkpoint_index import FORMAT, INDEX, MAX_DEPTH, MAX_INT, VERSION
from ._durable import fsync_folder
from ._jax import compat
from ._jax.diskarray import DiskArray
from .formats._npy import read_header

LOAD_MODES = ("copy", "r")
_SIBLING_PATTERN = r"\.(tmp|old)-(\d{1,10})-[0-9a-f]{1,32}"
# The names save_tree writes inside a checkpoint folder (index.json.partial and leaf
# files only in a folder whose save has not finished).
_SAVED_NAME = re.compile(r"leaf_[0-9]{5,}\.npy(\.jask-tmp-\d+-[0-9a-f]+)?|index\.json(\.partial)?")


# -- saving --------------------------------------------------------------------


def save_tree(path: str | os.PathLike, tree: Any) -> None:
    """Writes `tree` to a checkpoint folder at `path`, replacing any checkpoint there atomically.

    DiskArray leaves are streamed to their files block by block (never read
    into memory whole); jax arrays, NumPy arrays and Python numbers are
    written with `np.save`. A crash at any moment leaves either the previous
    checkpoint or the new one, complete. Only one process may save to a
    given `path` at a time.

    Args:
      path: the checkpoint folder. Its parent is created if needed. An
        existing folder there must be a checkpoint that holds only what
        save_tree wrote; `path` itself may not be a symbolic link (a link in
        the folders above it is followed).
      tree: a pytree whose leaves are DiskArrays, jax arrays, NumPy arrays
        or scalars, or Python bools, ints, floats and complex numbers,
        nested at most 100 levels deep.

    Raises:
      TypeError: a leaf of another kind, or a traced value (call save_tree
        outside jax.jit).
      ValueError: `path` is a symbolic link, or the tree is nested too deep.
        Nothing is written.
      FileExistsError: `path` exists and is not a checkpoint, or holds files
        save_tree did not write. Nothing is written or removed.

    >>> import os, tempfile, numpy as np, jax.numpy as jnp, jask
    >>> w = jask.DiskArray.from_numpy(np.ones((2, 3), np.float32))
    >>> path = os.path.join(tempfile.mkdtemp(), "ckpt")
    >>> jask.save_tree(path, {"w": w, "step": jnp.asarray(7)})
    >>> sorted(os.listdir(path))
    ['index.json', 'leaf_00000.npy', 'leaf_00001.npy']
    """
    path = _absolute(path)
    if os.path.islink(path):
        # Renaming the new folder to `path` would replace the link, not what it points to.
        raise ValueError(
            f"save_tree: {path} is a symbolic link (to {os.path.realpath(path)}); save_tree "
            f"replaces the folder at `path` by renaming and will not replace a link: pass "
            f"the folder it points to"
        )
    leaves, records = _flatten_for_saving(tree)
    structure = _encode_structure(tree, (), {r["path"]: i for i, r in enumerate(records)})
    _check_replaceable(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    _remove_stale_siblings(path)
    generation = _latest_generation(path) + 1
    if generation > MAX_INT:
        raise ValueError(f"save_tree: the checkpoint at {path} has run out of generations")
    index = {
        "format": FORMAT,
        "version": VERSION,
        "generation": generation,
        "target": os.path.basename(path),
        "structure": structure,
        "leaves": records,
    }
    folder = _new_sibling_name(path, "tmp")
    os.mkdir(folder)
    try:
        _write_folder(folder, leaves, index)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    _swap_into_place(folder, path)
    _remove_stale_siblings(path)


def _flatten_for_saving(tree) -> tuple[list, list[dict]]:
    """The leaves of `tree` and, for each, the record index.json keeps about it."""
    flat, _ = jax.tree_util.tree_flatten_with_path(tree)
    leaves, records = [], []
    for number, (key_path, leaf) in enumerate(flat):
        key = jax.tree_util.keystr(key_path)
        records.append(_leaf_record(key, leaf, f"leaf_{number:05d}.npy"))
        leaves.append(leaf)
    return leaves, records


def _leaf_record(key: str, leaf, file: str) -> dict:
    if compat.is_tracer(leaf):
        raise TypeError(
            f"save_tree: leaf {key} is a traced value; save_tree writes files and "
            f"cannot run inside jax.jit or jax.grad, so call it on concrete values"
        )
    kind = _leaf_kind(key, leaf)
    array = np.asarray(leaf) if kind == "python" else leaf
    shape, dtype = tuple(array.shape), np.dtype(array.dtype)
    if dtype.hasobject:  # np.save would need pickle for these
        raise TypeError(
            f"save_tree: leaf {key} ({leaf!r:.60}) has no fixed-size NumPy dtype; "
            f"a checkpoint stores numbers only"
        )
    return {"path": key, "kind": kind, "file": file, "shape": list(shape), "dtype": dtype.name}


def _leaf_kind(key: str, leaf) -> str:
    """What a leaf is, which decides how it is written and what it comes back as."""
    if isinstance(leaf, DiskArray):
        return "disk"
    if isinstance(leaf, jax.Array):
        return "jax"
    if isinstance(leaf, np.ndarray):
        return "numpy"
    if isinstance(leaf, np.generic):
        return "numpy_scalar"
    if isinstance(leaf, (bool, int, float, complex)):
        return "python"
    raise TypeError(
        f"save_tree: leaf {key} is a {type(leaf).__name__}; a checkpoint holds "
        f"DiskArrays, jax arrays, NumPy arrays and scalars, and Python numbers"
    )


def _encode_structure(node, key_path: tuple, leaf_numbers: dict[str, int]) -> dict:
    """The tree as JSON: dicts, lists, tuples and None spelled out, leaves by number.

    Any other node (a NamedTuple, a dataclass, ...) is recorded by type name
    only: rebuilding it needs its class, which load_tree takes from `like=`.
    """
    if len(key_path) > MAX_DEPTH:
        raise ValueError(
            f"save_tree: the tree is nested more than {MAX_DEPTH} levels deep at "
            f"{jax.tree_util.keystr(key_path[:8])}...; a checkpoint holds at most {MAX_DEPTH}"
        )

    def child(key, value):
        return _encode_structure(value, (*key_path, key), leaf_numbers)

    if node is None:
        return {"none": None}
    if type(node) is dict and all(isinstance(k, (str, int)) for k in node):
        # Kept in insertion order; each leaf carries its number in jax's (sorted) order.
        return {"dict": [[k, child(jax.tree_util.DictKey(k), v)] for k, v in node.items()]}
    if type(node) in (list, tuple):
        children = [child(jax.tree_util.SequenceKey(i), v) for i, v in enumerate(node)]
        return {type(node).__name__: children}
    key = jax.tree_util.keystr(key_path)
    if key in leaf_numbers:
        return {"leaf": leaf_numbers[key]}
    return {"custom": {"type": type(node).__qualname__, "path": key}}


def _check_replaceable(path: str) -> None:
    """Refuses to swap away (and so delete) anything at `path` that save_tree did not write."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(mode):
        raise FileExistsError(
            f"save_tree: {path} exists and is not a jask checkpoint (it is "
            f"{checked.file_kind(mode)}); refusing to replace it"
        )
    if not _is_complete(path):
        raise FileExistsError(
            f"save_tree: {path} exists and is not a jask checkpoint (it has no "
            f"{INDEX}); refusing to replace it"
        )
    try:
        index = checked.read_index(path)
    except ValueError as e:
        raise FileExistsError(
            f"save_tree: {path} exists and is not a jask checkpoint save_tree can replace "
            f"({e}); refusing to replace it"
        ) from None
    expected = {INDEX} | {record["file"] for record in index["leaves"]}
    extra = sorted(set(os.listdir(path)) - expected)
    if extra:
        raise FileExistsError(
            f"save_tree: the checkpoint at {path} also holds {extra[0]!r}, which save_tree "
            f"did not write; replacing the checkpoint would delete it, so move it elsewhere "
            f"first"
        )


def _write_folder(folder: str, leaves: list, index: dict) -> None:
    records = index["leaves"]
    with _progress.task("save_tree", sum(map(_record_nbytes, records))) as task:
        for leaf, record in zip(leaves, records):
            with task.step(_record_nbytes(record)):
                _write_leaf(os.path.join(folder, record["file"]), record["kind"], leaf)
    # The leaves' directory entries must be on disk before the index that
    # declares the folder complete.
    fsync_folder(folder)
    _write_index(folder, index)
    fsync_folder(folder)


def _record_nbytes(record: dict) -> int:
    """The bytes of a leaf's values, as the index records its shape and dtype."""
    return math.prod(record["shape"]) * jnp.dtype(record["dtype"]).itemsize


def _write_leaf(file: str, kind: str, leaf) -> None:
    if kind == "disk":
        leaf.save(file)  # streamed and fsynced by the engine
        return
    with open(file, "xb") as f:
        np.save(f, np.asarray(leaf), allow_pickle=False)
        f.flush()
        os.fsync(f.fileno())


def _write_index(folder: str, index: dict) -> None:
    # Written under another name and renamed, so index.json is never partial.
    partial = os.path.join(folder, INDEX + ".partial")
    with open(partial, "x") as f:
        json.dump(index, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.rename(partial, os.path.join(folder, INDEX))


def _swap_into_place(folder: str, path: str) -> None:
    """Moves the complete `folder` to `path`, and the checkpoint that was there out of the way."""
    old = None
    if os.path.lexists(path):
        old = _new_sibling_name(path, "old")
        os.rename(path, old)
    # A crash here leaves `path` missing; load_tree then picks `folder`, whose
    # generation is the highest.
    try:
        os.rename(folder, path)
    except BaseException:
        if old is not None:
            os.rename(old, path)
        shutil.rmtree(folder, ignore_errors=True)
        raise
    fsync_folder(os.path.dirname(path))
    if old is not None:
        shutil.rmtree(old)


def _remove_stale_siblings(path: str) -> None:
    """Removes the tmp and old folders of saves whose process has died.

    While `path` is missing, a dead save's complete folder may hold the only
    copy of the latest checkpoint, so complete folders are kept until a
    checkpoint is in place again.

    Only folders this user owns, that are not links and that hold nothing but
    names save_tree writes are removed, and a complete one only if its index
    names `path`: a folder named like a sibling that is someone else's, holds
    anything else, or is another checkpoint, is left alone.
    """
    checkpoint_in_place = _is_complete(path)
    recoverable = {folder for folder, _ in _recoverable_siblings(path)}
    for folder, pid in _sibling_folders(path):
        if _process_alive(pid) or not _is_own_folder(folder) or not _holds_saved_names(folder):
            continue
        if not _is_complete(folder) or (checkpoint_in_place and folder in recoverable):
            shutil.rmtree(folder, ignore_errors=True)


def _holds_saved_names(folder: str) -> bool:
    try:
        names = os.listdir(folder)
    except OSError:
        return False
    return all(_SAVED_NAME.fullmatch(name) for name in names)


def _latest_generation(path: str) -> int:
    generations = [index["generation"] for _, index in _recoverable_siblings(path)]
    if _is_complete(path):
        generations.append(checked.read_index(path)["generation"])
    return max(generations, default=0)


def _new_sibling_name(path: str, kind: str) -> str:
    return f"{path}.{kind}-{os.getpid()}-{secrets.token_hex(4)}"


def _process_alive(pid: int) -> bool:
    if not 0 < pid < 2**31:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


# -- loading -------------------------------------------------------------------


def load_tree(path: str | os.PathLike, like: Any = None, mode: str = "copy") -> Any:
    """Reads the checkpoint at `path` back into a pytree.

    DiskArray leaves come back as DiskArrays, jax arrays as jax arrays, NumPy
    values as NumPy values and Python numbers as Python numbers.

    Args:
      path: a folder written by `save_tree`.
      like: optional example tree with the checkpoint's structure, such as
        ``opt.init(params)``; its leaves may be arrays or
        ``jax.ShapeDtypeStruct``. Needed when the tree has nodes other than
        dicts, lists, tuples and None (optax states are NamedTuples). Each
        leaf's shape and dtype are checked against it.
      mode: "copy" (default): each DiskArray leaf is copied, streamed, to a
        new writable scratch array, so training may `update_` it and later
        saves to `path` never touch the arrays in use. "r": DiskArray leaves
        are opened read-only in place (no copy). They stay readable after a
        later `save_tree` to `path` replaces the checkpoint (their open files
        are removed, not overwritten), though their `.path` then names a
        newer file.

    Returns:
      The tree, with `like`'s structure when `like` is given.

    Raises:
      FileNotFoundError: no checkpoint at `path`.
      ValueError: `like` differs from the checkpoint in structure, or in a
        leaf's shape or dtype; or the tree needs `like` and none was given;
        or the checkpoint is damaged or was not written by save_tree (a
        malformed index, a leaf file that is a link, a FIFO or another
        non-regular file, or that holds another shape or dtype than the
        index records). The message names the checkpoint and what is wrong.

    >>> import os, tempfile, numpy as np, jax.numpy as jnp, jask
    >>> path = os.path.join(tempfile.mkdtemp(), "ckpt")
    >>> jask.save_tree(path, {"w": jask.DiskArray.from_numpy(np.ones(3, np.float32)), "step": 7})
    >>> tree = jask.load_tree(path)
    >>> np.asarray(tree["w"]).tolist(), tree["step"]
    ([1.0, 1.0, 1.0], 7)
    """
    if mode not in LOAD_MODES:
        raise ValueError(f"load_tree: mode must be one of {LOAD_MODES}, got {mode!r}")
    path = _absolute(path)
    folder, index = _find_checkpoint(path)
    records = index["leaves"]
    if like is None:
        _check_rebuildable(index["structure"], folder)
        _check_leaf_paths(index, folder)
    else:
        treedef = _check_like(records, like, folder)
    with _progress.task("load_tree", sum(map(_record_nbytes, records))) as task:
        leaves = []
        for record in records:
            with task.step(_record_nbytes(record)):
                leaves.append(_read_leaf(folder, record, mode))
    if like is None:
        return _decode_structure(index["structure"], leaves)
    return jax.tree_util.tree_unflatten(treedef, leaves)


def _find_checkpoint(path: str) -> tuple[str, dict]:
    """The folder holding the latest complete checkpoint saved at `path`, and its index."""
    if _is_complete(path):
        return path, checked.read_index(path)
    if os.path.lexists(path):
        raise FileNotFoundError(f"{path} is not a jask checkpoint: it has no {INDEX}")
    # `path` is missing: a save died between its two renames, or none ever ran.
    candidates = _recoverable_siblings(path)
    if not candidates:
        raise FileNotFoundError(f"no checkpoint at {path}")
    if _is_complete(path):  # a live save finished its swap meanwhile
        return path, checked.read_index(path)
    return max(candidates, key=lambda candidate: candidate[1]["generation"])


def _recoverable_siblings(path: str) -> list[tuple[str, dict]]:
    """The complete sibling folders a save to `path` could have left, each with its index.

    A sibling counts only if it is named as save_tree names them, is a folder
    (not a link) owned by this user, and has a valid index naming `path`'s
    folder as its target. Anything else beside `path` is not a checkpoint of it.
    """
    name = os.path.basename(path)
    found = []
    for folder, _ in _sibling_folders(path):
        if not _is_own_folder(folder) or not _is_complete(folder):
            continue
        try:
            index = checked.read_index(folder)
        except (OSError, ValueError):
            continue
        if index.get("target") == name:
            found.append((folder, index))
    return found


def _check_leaf_paths(index: dict, folder: str) -> None:
    """Each leaf record's path must be the one jax gives the leaf of that number in the structure."""
    numbered = _decode_structure(index["structure"], list(range(len(index["leaves"]))))
    try:
        flat, _ = jax.tree_util.tree_flatten_with_path(numbered)
    except Exception:  # jax cannot order a dict whose keys mix ints and strings
        raise checked.malformed(
            folder, "structure", index["structure"], "dicts whose keys jax can sort"
        ) from None
    for position, (key_path, number) in enumerate(flat):
        record_path = index["leaves"][position]["path"]
        if number != position or jax.tree_util.keystr(key_path) != record_path:
            raise checked.malformed(
                folder,
                f"leaves[{position}].path",
                record_path,
                f"{jax.tree_util.keystr(key_path)!r}, the path of leaf {position} in the "
                f"structure (which numbers it {number})",
            )


def _check_rebuildable(structure: dict, folder: str) -> None:
    custom = _first_custom_node(structure)
    if custom is not None:
        raise ValueError(
            f"load_tree: the checkpoint at {folder} holds a {custom['type']} at "
            f"{custom['path'] or 'the root'}, which load_tree cannot rebuild from the "
            f"checkpoint alone; pass like= a tree of the same structure "
            f"(for an optimizer state, opt.init(params))"
        )


def _first_custom_node(node: dict) -> dict | None:
    ((tag, value),) = node.items()
    if tag == "custom":
        return value
    for child in _children(tag, value):
        custom = _first_custom_node(child)
        if custom is not None:
            return custom
    return None


def _children(tag: str, value) -> list[dict]:
    if tag == "dict":
        return [child for _, child in value]
    return value if tag in ("list", "tuple") else []


def _decode_structure(node: dict, leaves: list):
    ((tag, value),) = node.items()
    if tag == "leaf":
        return leaves[value]
    if tag == "none":
        return None
    if tag == "dict":
        return {k: _decode_structure(child, leaves) for k, child in value}
    children = [_decode_structure(child, leaves) for child in value]
    return children if tag == "list" else tuple(children)


def _check_like(records: list[dict], like, folder: str):
    """like's treedef, once its leaves match the checkpoint's in path, shape and dtype."""
    flat, treedef = jax.tree_util.tree_flatten_with_path(like)
    like_keys = [jax.tree_util.keystr(key_path) for key_path, _ in flat]
    saved_keys = [record["path"] for record in records]
    if like_keys != saved_keys:
        raise ValueError(_structure_mismatch(saved_keys, like_keys, folder))
    for record, (_, leaf) in zip(records, flat):
        _check_leaf_matches(record, leaf, folder)
    return treedef


def _structure_mismatch(saved_keys: list[str], like_keys: list[str], folder: str) -> str:
    # Padding with "nothing" makes a missing leaf the first difference.
    length = max(len(saved_keys), len(like_keys))
    saved = saved_keys + ["nothing"] * (length - len(saved_keys))
    liked = like_keys + ["nothing"] * (length - len(like_keys))
    first = next(i for i in range(length) if saved[i] != liked[i])
    return (
        f"load_tree: like= does not have the structure of the checkpoint at {folder}: leaf "
        f"#{first} is {saved[first]} in the checkpoint but {liked[first]} in like= "
        f"(the checkpoint has {len(saved_keys)} leaves, like= has {len(like_keys)})"
    )


def _check_leaf_matches(record: dict, leaf, folder: str) -> None:
    saved_shape = tuple(record["shape"])
    like_shape = tuple(getattr(leaf, "shape", ()))
    # Python numbers in like= have no dtype of their own; only shape is checked.
    like_dtype = np.dtype(leaf.dtype).name if hasattr(leaf, "dtype") else record["dtype"]
    if saved_shape != like_shape or record["dtype"] != like_dtype:
        raise ValueError(
            f"load_tree: leaf {record['path'] or '(the root)'} has shape "
            f"{saved_shape} and dtype {record['dtype']} in the checkpoint, but shape "
            f"{like_shape} and dtype {like_dtype} in like= (checkpoint {folder})"
        )


def _read_leaf(folder: str, record: dict, mode: str):
    file = _leaf_file(folder, record)
    if record["kind"] == "disk":
        return _read_disk_leaf(file, record, mode)
    array = _read_in_memory(file, record)
    if record["kind"] == "jax":
        return jnp.asarray(array)
    if record["kind"] == "numpy":
        return array
    if record["kind"] == "numpy_scalar":
        return array[()]
    return array.item()  # a Python number of the type that was saved


def _leaf_file(folder: str, record: dict) -> str:
    """The leaf's file, once it is known to be a regular file directly inside `folder`.

    The index has been checked (its file is the plain name leaf_NNNNN.npy); this
    checks what is on disk, before anything opens it: save_tree never writes a
    link, and a FIFO or device would block or never end.
    """
    file = os.path.join(folder, record["file"])
    try:
        mode = os.lstat(file).st_mode
    except FileNotFoundError:
        raise FileNotFoundError(
            f"load_tree: the checkpoint at {folder} is damaged: leaf {record['path']} "
            f"has no file {record['file']}"
        ) from None
    if not stat.S_ISREG(mode):
        raise ValueError(
            f"load_tree: leaf {record['path']} of the checkpoint at {folder} is "
            f"{file}, which is {checked.file_kind(mode)}; save_tree writes only regular "
            f"files, so the checkpoint has been tampered with"
        )
    if os.path.dirname(os.path.realpath(file)) != os.path.realpath(folder):
        raise ValueError(
            f"load_tree: leaf {record['path']} of the checkpoint at {folder} resolves to "
            f"{os.path.realpath(file)}, outside the checkpoint"
        )
    return file


def _read_disk_leaf(file: str, record: dict, mode: str) -> DiskArray:
    try:
        array = DiskArray.open(file, mode="r")
    except (TypeError, ValueError) as e:  # a header the engine refuses
        raise ValueError(
            f"load_tree: {file} is not the .npy file of {record['dtype']}{record['shape']} "
            f"the checkpoint's {INDEX} records for leaf {record['path']}: {e}"
        ) from None
    _check_file_matches(array.shape, array.dtype, record, file)
    if mode == "r":
        return array
    return zeros(array.shape, array.dtype).update_(array)  # a streamed copy into scratch


def _read_in_memory(file: str, record: dict) -> np.ndarray:
    """The leaf's array, read only once its header matches the record and the file's size.

    Opened without following links and without blocking, so the file read is
    the regular file _leaf_file checked.
    """
    dtype = jnp.dtype(record["dtype"])
    fd = checked.open_regular(file, f"load_tree: leaf {record['path']}")
    with os.fdopen(fd, "rb") as f:
        shape, _, saved_dtype = read_header(f, f"load_tree: leaf {record['path']}'s file {file}")
        # np.save writes dtypes NumPy does not know (bfloat16) as raw bytes of their size.
        raw = saved_dtype.type is np.void and not saved_dtype.fields and dtype.type is not np.void
        if raw and saved_dtype.itemsize == dtype.itemsize:
            saved_dtype = dtype
        _check_file_matches(shape, saved_dtype, record, file)
        expected_size = f.tell() + math.prod(shape) * dtype.itemsize
        actual_size = os.fstat(f.fileno()).st_size
        if actual_size != expected_size:
            raise ValueError(
                f"load_tree: {file} holds {actual_size} bytes, but a .npy file of "
                f"{dtype.name}{list(shape)} holds {expected_size}; the checkpoint is damaged"
            )
        f.seek(0)
        array = np.lib.format.read_array(f, allow_pickle=False)
    if raw:
        return array.view(dtype)
    return array.astype(dtype) if array.dtype != dtype else array  # byte order only


def _check_file_matches(shape, dtype, record: dict, file: str) -> None:
    if tuple(shape) != tuple(record["shape"]) or np.dtype(dtype).name != record["dtype"]:
        raise ValueError(
            f"load_tree: {file} holds {np.dtype(dtype).name}{list(shape)}, but the "
            f"checkpoint's {INDEX} records {record['dtype']}{record['shape']} for "
            f"leaf {record['path']}; the checkpoint is damaged"
        )


# -- folders -------------------------------------------------------------------


def _absolute(path: str | os.PathLike) -> str:
    return os.path.abspath(os.fspath(path))


def _is_complete(folder: str) -> bool:
    # lexists: an index.json that is a link or a FIFO is there, and refused when read.
    return os.path.lexists(os.path.join(folder, INDEX))


def _is_own_folder(folder: str) -> bool:
    """Whether `folder` is a folder, not a link to one, owned by this process's user."""
    try:
        st = os.lstat(folder)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid()


def _sibling_folders(path: str) -> list[tuple[str, int]]:
    """The tmp and old folders of saves to `path`, each with the id of the process that made it."""
    parent, name = os.path.split(path)
    pattern = re.compile(re.escape(name) + _SIBLING_PATTERN)
    try:
        entries = os.listdir(parent)
    except FileNotFoundError:
        return []
    matches = (pattern.fullmatch(entry) for entry in entries)
    return [(os.path.join(parent, m.group(0)), int(m.group(2))) for m in matches if m]
