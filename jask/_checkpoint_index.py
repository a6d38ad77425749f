"""A checkpoint's index.json: read without following links, and checked entry by entry
against what save_tree writes before load_tree uses any of it.

Every way an index can be malformed (not UTF-8, not JSON, nested deeper than save_tree
writes, a missing or unknown key, a value of the wrong type or range, a leaf file that is
not the plain name save_tree gives it, a structure that does not use each leaf once) is a
ValueError that names the checkpoint folder and the entry at fault, such as
``checkpoint /x/ckpt: index entry 'leaves[3].shape' is 'abc', expected a list of ints``.
"""

from __future__ import annotations

import json
import math
import os
import reprlib
import stat

import jax.numpy as jnp
import numpy as np

from ._dtypes import SUPPORTED
from ._files import file_kind as file_kind

INDEX = "index.json"
FORMAT = "jask-checkpoint"
VERSION = 1
KINDS = ("disk", "jax", "numpy", "numpy_scalar", "python")
# Tree levels below the root. save_tree refuses deeper trees, so that every index it
# writes parses and checks within Python's recursion limit (each level is up to four
# levels of JSON).
MAX_DEPTH = 100
MAX_NDIM = 64  # NumPy's
MAX_INT = 2**63 - 1  # generations, dimensions and byte counts
TOP_KEYS = ("format", "version", "generation", "structure", "leaves")
OPTIONAL_TOP_KEYS = ("target",)  # absent from indexes written before it was added
LEAF_KEYS = ("path", "kind", "file", "shape", "dtype")
TAGS = ("none", "leaf", "custom", "dict", "list", "tuple")

_show = reprlib.Repr()
_show.maxstring = _show.maxother = _show.maxlong = 60
_show.maxlevel = 2


def leaf_file(number: int) -> str:
    """The name save_tree gives leaf `number`'s file; an index must record exactly this."""
    return f"leaf_{number:05d}.npy"


def malformed(folder: str, entry: str, value, expected: str) -> ValueError:
    return ValueError(
        f"checkpoint {folder}: index entry {entry!r} is {_show.repr(value)}, expected {expected}"
    )


# -- reading ---------------------------------------------------------------------------


def open_regular(file: str, what: str) -> int:
    """A read-only descriptor of `file`, which must be a regular file and not a link.

    Opened with O_NOFOLLOW (a link is refused, not followed) and O_NONBLOCK (a FIFO
    cannot block the open); then fstat must say regular file.
    """
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        fd = os.open(file, flags)
    except OSError as e:
        if os.path.islink(file):
            raise ValueError(
                f"{what}: {file} is a symbolic link; save_tree never writes one, "
                f"so the checkpoint has been tampered with"
            ) from None
        raise OSError(e.errno, f"{what}: cannot open {file}: {e.strerror}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise ValueError(f"{what}: {file} is {file_kind(mode)}, not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_index(folder: str) -> dict:
    """The index of the checkpoint in `folder`, checked against what save_tree writes."""
    fd = open_regular(os.path.join(folder, INDEX), f"checkpoint {folder}")
    with os.fdopen(fd, "rb") as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(
            f"checkpoint {folder}: {INDEX} is not UTF-8 text (byte {e.start}: {e.reason})"
        ) from None
    try:
        index = json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constant)
    except RecursionError:
        raise ValueError(
            f"checkpoint {folder}: {INDEX} nests deeper than save_tree writes "
            f"(at most {MAX_DEPTH} levels of tree)"
        ) from None
    except ValueError as e:  # JSONDecodeError, a duplicate key, an int of too many digits
        raise ValueError(f"checkpoint {folder}: {INDEX} is not valid JSON: {e}") from None
    check_index(index, folder)
    return index


def _unique_keys(pairs: list) -> dict:
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        duplicate = next(key for key in keys if keys.count(key) > 1)
        raise ValueError(f"the key {duplicate!r} appears twice in one object")
    return dict(pairs)


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


# -- checking --------------------------------------------------------------------------


def check_index(index, folder: str) -> None:
    """Raises a ValueError naming the first entry of `index` that save_tree could not have written."""
    if not isinstance(index, dict):
        raise malformed(folder, "(the whole index)", index, "a JSON object")
    for key in TOP_KEYS:
        if key not in index:
            raise ValueError(f"checkpoint {folder}: index entry {key!r} is missing")
    for key in index:
        if key not in TOP_KEYS + OPTIONAL_TOP_KEYS:
            raise malformed(folder, key, index[key], f"no such entry (an index has {TOP_KEYS})")
    if index["format"] != FORMAT or not _is_int(index["version"]) or index["version"] != VERSION:
        raise ValueError(
            f"checkpoint {folder}: {INDEX} is not a version-{VERSION} jask checkpoint index "
            f"(format {_show.repr(index['format'])}, version {_show.repr(index['version'])})"
        )
    check_int(folder, "generation", index["generation"], 0, MAX_INT)
    if "target" in index:
        target = index["target"]
        if not isinstance(target, str) or not _is_plain_name(target):
            raise malformed(folder, "target", target, "the checkpoint folder's name")
    leaves = index["leaves"]
    if not isinstance(leaves, list):
        raise malformed(folder, "leaves", leaves, "a list of leaf records")
    for number, record in enumerate(leaves):
        _check_leaf_record(folder, number, record)
    _check_structure(folder, index["structure"], len(leaves))


def _check_leaf_record(folder: str, number: int, record) -> None:
    where = f"leaves[{number}]"
    if not isinstance(record, dict) or sorted(record) != sorted(LEAF_KEYS):
        raise malformed(folder, where, record, f"an object with the keys {LEAF_KEYS}")
    if not isinstance(record["path"], str):
        raise malformed(folder, f"{where}.path", record["path"], "a string")
    if record["kind"] not in KINDS:
        raise malformed(folder, f"{where}.kind", record["kind"], f"one of {KINDS}")
    if record["file"] != leaf_file(number):
        # Only this plain name: never a path out of the folder, and never another leaf's.
        raise malformed(folder, f"{where}.file", record["file"], repr(leaf_file(number)))
    shape = record["shape"]
    if not isinstance(shape, list) or len(shape) > MAX_NDIM:
        raise malformed(folder, f"{where}.shape", shape, f"a list of at most {MAX_NDIM} ints")
    for axis, size in enumerate(shape):
        check_int(folder, f"{where}.shape[{axis}]", size, 0, MAX_INT)
    dtype = parse_dtype(record["dtype"])
    if dtype is None:
        raise malformed(folder, f"{where}.dtype", record["dtype"], "a NumPy dtype name")
    if math.prod(shape) * dtype.itemsize > MAX_INT:
        raise malformed(folder, f"{where}.shape", shape, f"at most {MAX_INT} bytes of {dtype}")
    if record["kind"] in ("python", "numpy_scalar") and shape:
        raise malformed(folder, f"{where}.shape", shape, f"[] for a {record['kind']} leaf")
    if record["kind"] == "disk" and dtype.name not in SUPPORTED:
        raise malformed(folder, f"{where}.dtype", record["dtype"], f"one of {SUPPORTED}")
    if record["kind"] == "python" and dtype.kind not in "bifc":
        raise malformed(folder, f"{where}.dtype", record["dtype"], "a Python number's dtype")


def check_int(folder: str, entry: str, value, low: int, high: int) -> None:
    if not _is_int(value) or not low <= value <= high:
        raise malformed(folder, entry, value, f"an int from {low} to {high}")


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_plain_name(name: str) -> bool:
    return name not in ("", ".", "..") and "/" not in name and "\x00" not in name


def parse_dtype(name) -> np.dtype | None:
    """The fixed-size, unstructured dtype called `name` (as np.dtype(...).name spells it), or None."""
    if not isinstance(name, str) or len(name) > 32:
        return None
    try:
        dtype = np.dtype(jnp.dtype(name))  # jnp.dtype also knows bfloat16 and the float8s
    except Exception:  # NumPy raises TypeError, ValueError, SyntaxError, ... for odd names
        return None
    if dtype.name != name or dtype.hasobject or dtype.fields is not None or not dtype.itemsize:
        return None
    return dtype


def _check_structure(folder: str, structure, leaf_count: int) -> None:
    used: set[int] = set()
    has_custom = _check_node(folder, structure, "structure", 0, leaf_count, used)
    # Leaves under a custom node (rebuilt from like=) are not spelled out in the structure.
    if not has_custom and len(used) != leaf_count:
        raise malformed(
            folder,
            "structure",
            f"a tree of {len(used)} leaves",
            f"a tree that uses each of the {leaf_count} leaf records once",
        )


def _check_node(folder: str, node, where: str, depth: int, leaf_count: int, used: set) -> bool:
    """Checks one node and those below it; True if any of them is a custom node."""
    if depth > MAX_DEPTH:
        raise malformed(folder, where, node, f"at most {MAX_DEPTH} levels of nodes")
    if not isinstance(node, dict) or len(node) != 1 or next(iter(node)) not in TAGS:
        raise malformed(folder, where, node, f"an object with one key, one of {TAGS}")
    ((tag, value),) = node.items()
    where = f"{where}.{tag}"
    if tag == "none":
        if value is not None:
            raise malformed(folder, where, value, "null")
        return False
    if tag == "leaf":
        check_int(folder, where, value, 0, leaf_count - 1)
        if value in used:
            raise malformed(folder, where, value, "a leaf number no other node uses")
        used.add(value)
        return False
    if tag == "custom":
        if not isinstance(value, dict) or sorted(value) != ["path", "type"]:
            raise malformed(folder, where, value, "an object with the keys type and path")
        if not all(isinstance(v, str) for v in value.values()):
            raise malformed(folder, where, value, "a type name and a path, both strings")
        return True
    if not isinstance(value, list):
        raise malformed(folder, where, value, "a list")
    children = value
    if tag == "dict":
        children = []
        keys = set()
        for i, pair in enumerate(value):
            if not isinstance(pair, list) or len(pair) != 2:
                raise malformed(folder, f"{where}[{i}]", pair, "a [key, node] pair")
            key = pair[0]
            if not (isinstance(key, str) or _is_int(key)) or (type(key), key) in keys:
                raise malformed(folder, f"{where}[{i}][0]", key, "a str or int key, not repeated")
            keys.add((type(key), key))
            children.append(pair[1])
    has_custom = False
    for i, child in enumerate(children):
        child_where = f"{where}[{i}][1]" if tag == "dict" else f"{where}[{i}]"
        has_custom |= _check_node(folder, child, child_where, depth + 1, leaf_count, used)
    return has_custom
