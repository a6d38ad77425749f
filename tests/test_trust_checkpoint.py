"""Checkpoints as hostile input: load_tree never reads outside the checkpoint folder, never
blocks on a FIFO, never takes a sibling folder a save could not have left, and refuses any
malformed index with one ValueError naming the checkpoint; save_tree never writes through a
link and never deletes what it did not write."""

import copy
import json
import os
import random
import re
import shutil
import subprocess
import sys
import types

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import jask
from jask import _serialization

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def disk(values, dtype="float32"):
    return jask.DiskArray.from_numpy(np.asarray(values).astype(jnp.dtype(dtype)))


def small_tree():
    """Every kind of leaf, and no leafless node, so that any change to the structure changes
    which leaves it uses."""
    return {
        "w": disk(np.arange(6).reshape(2, 3)),
        "b": jnp.arange(3, dtype=jnp.float32),
        "opt": [np.arange(4, dtype=np.int16), (np.float64(0.5), 3)],
        "flags": {2: True, 1: jnp.ones((2, 2), jnp.bfloat16)},
    }


def assert_same_tree(actual, expected):
    assert jax.tree_util.tree_structure(actual) == jax.tree_util.tree_structure(expected)
    for a, e in zip(jax.tree_util.tree_leaves(actual), jax.tree_util.tree_leaves(expected)):
        assert type(a) is type(e) or (isinstance(a, jax.Array) and isinstance(e, jax.Array))
        assert np.asarray(a).dtype == np.asarray(e).dtype
        np.testing.assert_array_equal(np.asarray(a), np.asarray(e))


@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "ckpt"
    tree = small_tree()
    jask.save_tree(path, tree)
    return path, tree


def index_of(path):
    return json.loads((path / "index.json").read_text())


def write_index(path, index):
    (path / "index.json").write_text(json.dumps(index))


def dead_pid():
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


# -- leaf paths stay inside the folder -------------------------------------------------------


@pytest.mark.parametrize(
    "file",
    [
        "../outside.npy",
        "{outside}",  # absolute
        "./leaf_00000.npy",
        "sub/leaf_00000.npy",
        "leaf_00000.npy/..",
        "..\\leaf_00000.npy",
        "leaf_00000.npy\x00",
        "",
        "leaf_00001.npy",  # another leaf's file
    ],
)
def test_leaf_paths_other_than_the_leafs_own_name_are_refused(saved, file):
    path, _ = saved
    outside = path.parent / "outside.npy"
    shutil.copy(path / "leaf_00000.npy", outside)  # what the old code loaded instead
    index = index_of(path)
    index["leaves"][0]["file"] = file.format(outside=outside)
    write_index(path, index)
    message = re.escape(f"checkpoint {path}: index entry 'leaves[0].file' is ")
    with pytest.raises(ValueError, match=message + ".*, expected 'leaf_00000.npy'"):
        jask.load_tree(path)


@pytest.mark.parametrize("leaf", ["leaf_00006.npy", "leaf_00000.npy"])  # disk, then jax
def test_a_leaf_that_is_a_symbolic_link_is_refused(saved, leaf):
    path, _ = saved
    outside = path.parent / "outside.npy"
    os.rename(path / leaf, outside)
    os.symlink(outside, path / leaf)  # same bytes as before: only the link is wrong
    with pytest.raises(ValueError, match=f"{leaf}, which is a symbolic link.*tampered"):
        jask.load_tree(path)
    os.remove(path / leaf)
    os.symlink("leaf_00003.npy", path / leaf)  # a link inside the folder
    with pytest.raises(ValueError, match="symbolic link"):
        jask.load_tree(path)


def test_an_index_that_is_a_symbolic_link_is_refused(saved):
    path, _ = saved
    os.rename(path / "index.json", path.parent / "index.json")
    os.symlink(path.parent / "index.json", path / "index.json")
    with pytest.raises(ValueError, match=f"checkpoint {path}: .*index.json is a symbolic link"):
        jask.load_tree(path)


# One subprocess for all FIFO cases, so that a regression hangs it, not the suite.
FIFO_LOADS = r"""
import os, sys, jask
for path in sys.argv[1:]:
    try:
        jask.load_tree(path)
        print("loaded", path)
    except ValueError as e:
        print("ValueError", e)
"""


def test_fifo_leaves_and_index_are_refused_without_blocking(tmp_path):
    paths = []
    for name, fifo in [
        ("disk", "leaf_00006.npy"),
        ("jax", "leaf_00000.npy"),
        ("index", "index.json"),
    ]:
        path = tmp_path / name
        jask.save_tree(path, small_tree())
        os.remove(path / fifo)
        os.mkfifo(path / fifo)
        paths.append(str(path))
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run(
        [sys.executable, "-c", FIFO_LOADS, *paths],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 3, done.stdout
    assert re.fullmatch(r"ValueError .*disk/leaf_00006\.npy, which is a FIFO.*", lines[0])
    assert re.fullmatch(r"ValueError .*jax/leaf_00000\.npy, which is a FIFO.*", lines[1])
    assert re.fullmatch(r"ValueError .*index/index\.json is a FIFO, not a regular file", lines[2])


# -- a malformed index is one ValueError naming the checkpoint and the entry ---------------


def set_entry(*keys, value):
    def mutate(index):
        node = index
        for key in keys[:-1]:
            node = node[key]
        node[keys[-1]] = value
        return json.dumps(index)

    return mutate


def delete_entry(*keys):
    def mutate(index):
        node = index
        for key in keys[:-1]:
            node = node[key]
        del node[keys[-1]]
        return json.dumps(index)

    return mutate


MALFORMED = {
    "not json": (lambda index: "{", "index.json is not valid JSON"),
    "not utf-8": (lambda index: b'{"format": "\xff"}', "index.json is not UTF-8 text"),
    "deep nesting": (lambda index: "[" * 100_000 + "]" * 100_000, "nests deeper"),
    "huge int": (
        lambda index: json.dumps(index).replace('"generation": 1', '"generation": ' + "9" * 5000),
        "not valid JSON.*digits",
    ),
    "nan": (lambda index: json.dumps(index).replace('"generation": 1', '"generation": NaN'), "NaN"),
    "duplicate key": (
        lambda index: json.dumps(index)[:-1] + ', "generation": 7}',
        "the key 'generation' appears twice",
    ),
    "a list": (lambda index: "[]", r"'\(the whole index\)' is \[\], expected a JSON object"),
    "no leaves": (delete_entry("leaves"), "index entry 'leaves' is missing"),
    "unknown key": (set_entry("extra", value=1), "index entry 'extra' is 1, expected no such"),
    "version": (set_entry("version", value=True), "not a version-1 jask checkpoint index"),
    "generation": (set_entry("generation", value=10**30), r"'generation' is 1000000.*from 0 to"),
    "leaves type": (set_entry("leaves", value={}), "'leaves' is {}, expected a list"),
    "record type": (set_entry("leaves", 2, value=5), r"'leaves\[2\]' is 5, expected an object"),
    "missing kind": (delete_entry("leaves", 0, "kind"), r"'leaves\[0\]' is .*expected an object"),
    "kind": (set_entry("leaves", 0, "kind", value="pickle"), r"'leaves\[0\].kind' is 'pickle'"),
    "shape str": (
        set_entry("leaves", 3, "shape", value="abc"),
        r"index entry 'leaves\[3\].shape' is 'abc', expected a list of at most 64 ints",
    ),
    "shape bool": (set_entry("leaves", 0, "shape", 0, value=True), r"'leaves\[0\].shape\[0\]'"),
    "shape negative": (
        set_entry("leaves", 0, "shape", 0, value=-3),
        r"'leaves\[0\].shape\[0\]' is -3",
    ),
    "shape huge": (set_entry("leaves", 0, "shape", value=[2**62, 4]), r"at most \d+ bytes"),
    "ndim": (set_entry("leaves", 0, "shape", value=[1] * 65), r"'leaves\[0\].shape'"),
    "dtype": (set_entry("leaves", 0, "dtype", value="float33"), r"'leaves\[0\].dtype'"),
    "dtype object": (set_entry("leaves", 0, "dtype", value="object"), r"'leaves\[0\].dtype'"),
    "dtype structured": (
        set_entry("leaves", 0, "dtype", value="[('a', '<f4')]"),
        r"'leaves\[0\].dtype'",
    ),
    "disk dtype": (set_entry("leaves", 6, "dtype", value="int4"), r"'leaves\[6\].dtype' is 'int4'"),
    "python shape": (set_entry("leaves", 5, "shape", value=[2]), r"'leaves\[5\].shape'.*python"),
    "record path": (set_entry("leaves", 0, "path", value="['x']"), r"'leaves\[0\].path'"),
    "one record fewer": (delete_entry("leaves", 2), r"'leaves\[2\].file' is 'leaf_00003.npy'"),
    "tag": (set_entry("structure", value={"set": []}), r"'structure' is .*one key"),
    "two tags": (set_entry("structure", value={"none": None, "list": []}), "'structure'"),
    "leaf number": (
        set_entry("structure", "dict", 0, 1, value={"leaf": 99}),
        r"'structure.dict\[0\]\[1\].leaf' is 99, expected an int from 0 to 6",
    ),
    "leaf twice": (
        set_entry("structure", "dict", 0, 1, value={"leaf": 1}),
        "expected a leaf number no other node uses",
    ),
    "leaf unused": (
        set_entry("structure", "dict", 0, 1, value={"none": None}),
        "uses each of the 7 leaf records once",
    ),
    "dict pair": (set_entry("structure", "dict", 0, value=["w"]), r"\[key, node\] pair"),
    "dict key": (set_entry("structure", "dict", 0, 0, value=None), "a str or int key"),
    "dict key twice": (set_entry("structure", "dict", 1, 0, value="w"), "not repeated"),
    "mixed keys": (set_entry("structure", "dict", 0, 0, value=7), "dicts whose keys jax can sort"),
    "custom": (set_entry("structure", value={"custom": {"type": 3, "path": ""}}), "type name"),
    "target": (set_entry("target", value="../x"), r"'target' is '../x'"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_malformed_index_is_a_value_error_naming_checkpoint_and_entry(saved, case):
    path, _ = saved
    mutate, message = MALFORMED[case]
    text = mutate(index_of(path))
    (path / "index.json").write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ValueError, match=re.escape(f"checkpoint {path}: ") + ".*" + message):
        jask.load_tree(path)


@pytest.mark.parametrize("name", ["back\\slash", "sp ace", "ünï", "..x", "-"])
def test_any_folder_name_save_tree_accepts_loads(tmp_path, name):
    jask.save_tree(tmp_path / name, {"x": 1})
    assert index_of(tmp_path / name)["target"] == name
    assert jask.load_tree(tmp_path / name) == {"x": 1}


def test_index_records_the_structure_save_tree_wrote(saved):
    # The cases above change one entry each; the valid index they start from must load.
    path, tree = saved
    index = index_of(path)
    assert [r["file"] for r in index["leaves"]] == [f"leaf_{i:05d}.npy" for i in range(7)]
    assert index["target"] == "ckpt"
    assert_same_tree(jask.load_tree(path), tree)


@pytest.mark.parametrize("leaf", ["leaf_00006.npy", "leaf_00000.npy"])  # disk, then jax
def test_a_leaf_file_of_another_shape_or_dtype_is_refused_naming_both(saved, leaf):
    path, _ = saved
    record = index_of(path)["leaves"][int(leaf[5:10])]
    # Same byte count, other dtype: reinterpreting the bytes would load wrong values silently.
    np.save(path / leaf, np.zeros(record["shape"], np.int32))
    wanted = f"{record['dtype']}{record['shape']}"
    with pytest.raises(ValueError, match=re.escape(f"holds int32{record['shape']}, but the")):
        jask.load_tree(path)
    np.save(path / leaf, np.zeros([7], np.float32))
    with pytest.raises(
        ValueError, match=re.escape(f"{leaf} holds float32[7]") + ".*" + re.escape(wanted)
    ):
        jask.load_tree(path)


def test_a_disk_leaf_file_the_engine_refuses_is_a_value_error_naming_the_leaf(saved):
    path, _ = saved
    np.save(
        path / "leaf_00006.npy", np.zeros((2, 3), ml_dtypes.int4)
    )  # a dtype Jask does not store
    with pytest.raises(ValueError, match=r"leaf_00006.npy is not the .npy file of float32\[2, 3\]"):
        jask.load_tree(path)


def test_a_truncated_in_memory_leaf_is_refused_before_it_is_read(saved):
    path, _ = saved
    with open(path / "leaf_00001.npy", "r+b") as f:
        f.truncate(os.path.getsize(path / "leaf_00001.npy") - 4)
    with pytest.raises(ValueError, match="leaf_00001.npy holds .* bytes, but a .npy file of"):
        jask.load_tree(path)


def test_an_in_memory_leaf_whose_header_numpy_cannot_tokenize_is_a_value_error(saved):
    """numpy's header parser raises tokenize.TokenError for an unterminated string: load_tree
    says which leaf and file instead."""
    import tokenize

    path, _ = saved
    text = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'x': '''\n" + " " * 10
    header = text.encode("latin1")
    leaf = path / "leaf_00001.npy"
    leaf.write_bytes(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header)
    with pytest.raises(tokenize.TokenError):
        np.load(leaf)
    with pytest.raises(ValueError, match=r"leaf_00001\.npy is not a readable \.npy file"):
        jask.load_tree(path)


# -- the fuzzer --------------------------------------------------------------------------

DEEP, HUGE = "\x01deep\x01", "\x01huge\x01"
OTHER_TYPES = [None, True, False, 0, -1, 7, 1.5, "", "x", "leaf_00000.npy", [], [0], {}, {"a": 1}]
PATH_ATTACKS = ["../leaf_00000.npy", "/etc/passwd", "leaf_00000.npy", ".", "", "a/b", "a\x00"]


def json_nodes(node, where=()):
    """Every (parent, key) of the index's JSON tree."""
    children = node.items() if isinstance(node, dict) else enumerate(node)
    for key, child in list(children):
        yield node, key
        if isinstance(child, (dict, list)):
            yield from json_nodes(child, (*where, key))


def mutation(index: dict, rng: random.Random) -> str:
    index = copy.deepcopy(index)
    parent, key = rng.choice(list(json_nodes(index)))
    kind = rng.choice(["type", "type", "delete", "deep", "huge", "path", "text", "benign"])
    if kind == "benign":  # entries the tree does not depend on
        if rng.random() < 0.5:
            index["generation"] = rng.randrange(2**63)
        else:
            del index["target"]
    elif kind == "type":
        old = parent[key]
        parent[key] = rng.choice([v for v in OTHER_TYPES if type(v) is not type(old)])
    elif kind == "delete":
        del parent[key]
    elif kind == "deep":
        parent[key] = DEEP
    elif kind == "huge":
        parent[key] = HUGE
    elif kind == "path":
        record = rng.choice(index["leaves"])
        record["file"] = rng.choice(PATH_ATTACKS)
    text = json.dumps(index)
    depth = rng.choice([10, 300, 3000, 100_000])
    text = text.replace(json.dumps(DEEP), "[" * depth + "]" * depth)
    text = text.replace(json.dumps(HUGE), rng.choice(["1" + "0" * 19, "9" * 400, "9" * 5000]))
    if kind == "text":
        at = rng.randrange(len(text))
        text = text[:at] + rng.choice(["", "}", "]", '"', "\\", "\ud800", "0"]) + text[at + 1 :]
    return text


def test_fuzzed_indexes_load_the_tree_or_raise_value_error_naming_the_checkpoint(saved):
    path, tree = saved
    like = small_tree()
    original = index_of(path)
    rng = random.Random(12)
    outcomes = {"loaded": 0, "refused": 0}
    for case in range(400):
        text = mutation(original, rng)
        (path / "index.json").write_bytes(text.encode("utf-8", "surrogatepass"))
        try:
            loaded = jask.load_tree(path, like=like if case % 2 else None)
        except ValueError as e:
            assert str(path) in str(e), (case, text[:300], e)
            outcomes["refused"] += 1
            continue
        except Exception as e:
            pytest.fail(f"case {case}: {type(e).__name__}: {e}\nindex: {text[:300]}")
        assert_same_tree(loaded, tree)
        outcomes["loaded"] += 1
    # Both outcomes happen: some mutations (of the generation, say) leave the tree as it was.
    assert outcomes["loaded"] > 30 and outcomes["refused"] > 300, outcomes


# -- the sibling fallback cannot be hijacked -----------------------------------------------


def plant(tmp_path, source, name, generation=10**9, **changes):
    """A copy of the checkpoint `source`, as someone with write access to the parent would plant it."""
    planted = tmp_path / name
    shutil.copytree(source, planted)
    index = index_of(planted)
    index.update(generation=generation, **changes)
    write_index(planted, index)
    return planted


def test_a_planted_sibling_is_not_loaded_while_the_checkpoint_is_missing(tmp_path):
    source, pid = tmp_path / "source", dead_pid()
    jask.save_tree(source, {"x": disk(np.full(3, 666.0))})
    path = tmp_path / "ckpt"
    planted = [
        plant(tmp_path, source, f"ckpt.old-{pid}-aa"),  # names "source" as its target
        plant(tmp_path, source, f"ckpt.old-{pid}-bb", target="other"),
        plant(tmp_path, source, f"ckpt.old-{pid}-cc", target=None),  # invalid: not a name
        plant(tmp_path, source, f"ckpt.tmp-{pid}-dd-extra", target="ckpt"),  # not save_tree's name
        plant(tmp_path, source, f"ckpt.old-{pid}-XY", target="ckpt"),
        plant(tmp_path, source, f"ckpt.new-{pid}-ee", target="ckpt"),
    ]
    real = plant(tmp_path, source, "elsewhere", target="ckpt")
    os.symlink(real, tmp_path / f"ckpt.old-{pid}-ff")  # a link to a folder
    with pytest.raises(FileNotFoundError, match=re.escape(f"no checkpoint at {path}")):
        jask.load_tree(path)
    # A save ignores them too: its generation is not pushed to theirs, and none is deleted.
    jask.save_tree(path, {"x": disk(np.ones(3))})
    assert index_of(path)["generation"] == 1
    assert all(folder.exists() for folder in planted)


def test_a_sibling_owned_by_another_user_is_not_loaded(tmp_path, monkeypatch):
    path, pid = tmp_path / "ckpt", dead_pid()
    jask.save_tree(path, {"x": disk(np.ones(3))})
    sibling = plant(tmp_path, path, f"ckpt.old-{pid}-ab", target="ckpt")
    shutil.rmtree(path)
    np.testing.assert_array_equal(np.asarray(jask.load_tree(path)["x"]), np.ones(3))  # ours: taken
    if os.geteuid() == 0:
        os.chown(sibling, 65534, 65534)
    else:  # seen as this process's user would see another's folder
        monkeypatch.setattr(os, "geteuid", lambda: os.getuid() + 1)
    with pytest.raises(FileNotFoundError, match="no checkpoint at"):
        jask.load_tree(path)


def test_a_sibling_whose_leaves_reach_outside_is_not_a_candidate(tmp_path):
    path, pid = tmp_path / "ckpt", dead_pid()
    jask.save_tree(path, {"x": disk(np.ones(3))})
    good = plant(tmp_path, path, f"ckpt.old-{pid}-01", generation=1, target="ckpt")
    bad = plant(tmp_path, path, f"ckpt.tmp-{pid}-02", target="ckpt")
    index = index_of(bad)
    index["leaves"][0]["file"] = str(good / "leaf_00000.npy")
    write_index(bad, index)
    shutil.rmtree(path)
    np.testing.assert_array_equal(np.asarray(jask.load_tree(path)["x"]), np.ones(3))
    assert jask.load_tree(path, mode="r")["x"].path == str(good / "leaf_00000.npy")


def test_save_removes_no_sibling_holding_what_it_did_not_write(tmp_path):
    path, pid = tmp_path / "ckpt", dead_pid()
    jask.save_tree(path, {"x": 1})
    users = tmp_path / f"ckpt.tmp-{pid}-ab"
    users.mkdir()
    (users / "notes.txt").write_text("keep me")
    leftover = tmp_path / f"ckpt.tmp-{pid}-cd"  # what a killed save leaves
    leftover.mkdir()
    (leftover / "leaf_00000.npy").write_bytes(b"partial")
    (leftover / "index.json.partial").write_text("{")
    jask.save_tree(path, {"x": 2})
    assert (users / "notes.txt").read_text() == "keep me"
    assert not leftover.exists()


# -- save_tree never writes through a link, never deletes what it did not write -------------


def test_save_to_a_symbolic_link_is_refused_before_anything_is_written(tmp_path):
    target = tmp_path / "real"
    jask.save_tree(target, {"x": 1})
    before = index_of(target)
    os.symlink(target, tmp_path / "link")
    with pytest.raises(ValueError, match=re.escape(f"{tmp_path / 'link'} is a symbolic link")):
        jask.save_tree(tmp_path / "link", {"x": disk(np.ones(3))})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "real"]
    assert index_of(target) == before and os.path.islink(tmp_path / "link")
    os.symlink(tmp_path / "nowhere", tmp_path / "dangling")
    with pytest.raises(ValueError, match="dangling is a symbolic link"):
        jask.save_tree(tmp_path / "dangling", {"x": 1})
    assert not (tmp_path / "nowhere").exists()


def test_save_never_replaces_user_data(tmp_path):
    (tmp_path / "file").write_text("keep me")
    with pytest.raises(FileExistsError, match="file exists and is not a jask checkpoint .*regular"):
        jask.save_tree(tmp_path / "file", {"x": 1})
    site = tmp_path / "site"  # index.json is a common name
    site.mkdir()
    (site / "index.json").write_text('{"pages": 3}')
    (site / "page.html").write_text("keep me")
    with pytest.raises(FileExistsError, match="site exists and is not a jask checkpoint save_tree"):
        jask.save_tree(site, {"x": 1})
    ckpt = tmp_path / "ckpt"
    jask.save_tree(ckpt, {"x": 1})
    (ckpt / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="also holds 'notes.txt', which save_tree did not"):
        jask.save_tree(ckpt, {"x": 2})
    for kept in (tmp_path / "file", site / "page.html", ckpt / "notes.txt"):
        assert kept.read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt", "file", "site"]
    assert jask.load_tree(ckpt) == {"x": 1}


def test_save_refuses_a_tree_deeper_than_an_index_may_nest(tmp_path):
    deep = 1
    for _ in range(101):
        deep = [deep]
    with pytest.raises(ValueError, match="nested more than 100 levels"):
        jask.save_tree(tmp_path / "ckpt", deep)
    assert list(tmp_path.iterdir()) == []
    ok = 1
    for _ in range(100):
        ok = [ok]
    jask.save_tree(tmp_path / "ckpt", ok)
    assert jask.load_tree(tmp_path / "ckpt") == ok


# -- orbax: the jask handler's leaf files -------------------------------------------------


def test_orbax_leaf_files_that_are_links_or_fifos_are_refused(tmp_path):
    folder = tmp_path / "step" / "jask"
    folder.mkdir(parents=True)
    info = types.SimpleNamespace(parent_dir=tmp_path / "step", name="w")
    np.save(tmp_path / "outside.npy", np.ones(3, np.float32))
    os.symlink(tmp_path / "outside.npy", folder / "w.npy")
    with pytest.raises(ValueError, match="w.npy in the checkpoint at .* is a symbolic link"):
        _serialization._saved_file(info)
    os.remove(folder / "w.npy")
    os.mkfifo(folder / "w.npy")
    with pytest.raises(ValueError, match="w.npy in the checkpoint at .* is a FIFO"):
        _serialization._saved_file(info)
    os.remove(folder / "w.npy")
    shutil.rmtree(folder)
    os.symlink(tmp_path, folder)  # the jask folder itself a link
    with pytest.raises(ValueError, match="jask in the checkpoint at .* is a symbolic link"):
        _serialization._saved_file(info)
