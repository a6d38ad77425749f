"""Crash recovery trusts only the files Jask wrote, and a read-only open changes nothing.

A mode="r" open of a file a dead writer left mid-update reads the committed values (the new file
of a committed update_tree_, or an in-place journal's payload over the file) and warns that a
mode="r+" open finishes the recovery; it renames, removes, replays and creates nothing. A
writable open finishes it, acting only in the file's own folder, on regular files of Jask's names
that an intact (checksummed) record names. Planted, corrupt, linked or FIFO recovery files are
left alone, never block an open, and never change a file outside the folder. A seeded fuzzer
mutates the recovery files crashed writers leave.
"""

import hashlib
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import warnings
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import h5py
import numpy as np
import pytest
from fuzz_harness import CANARIES, TRIAL_TIMEOUT_S, fuzz_trials, run_jobs, snapshot
from test_update_crash import child_env

import jask

N = 50_003  # float32: 200 KB, several blocks of an in-place copy under a 64 KB budget
HOST = socket.gethostname()

# --- The files of one folder: a .npy, a safetensors file, an HDF5 file, an .npz archive and a
# checkpoint below it, each holding one array `x` (old: k + arange, new: -(k + arange)). -------

KINDS = ("npy", "st", "h5", "npz", "ckpt")


def old_values(kind):
    return np.arange(N, dtype=np.float32) + 10.0 * KINDS.index(kind)


def new_values(kind):
    return -old_values(kind) - 1.0


def write_inputs(folder: Path, kinds=KINDS):
    folder.mkdir(parents=True)
    if "npy" in kinds:
        np.save(folder / "a.npy", old_values("npy"))
    if "st" in kinds:
        jask.save_safetensors(
            folder / "m.safetensors",
            {"pad": np.ones(1000, np.float32), "x": old_values("st")},
        )
    if "h5" in kinds:
        with h5py.File(folder / "d.h5", "w") as f:
            f.create_dataset("pad", data=np.ones(1000, np.float32))
            f.create_dataset("x", data=old_values("h5"))
    if "npz" in kinds:
        np.savez(folder / "z.npz", pad=np.ones(1000, np.float32), x=old_values("npz"))
    if "ckpt" in kinds:
        jask.save_tree(folder / "ckpt", {"x": jask.DiskArray.from_numpy(old_values("ckpt"))})


def npz_offset(path):
    """The data offset of member x.npy of a stored .npz archive."""
    with zipfile.ZipFile(path) as z:
        info = z.getinfo("x.npy")
    with open(path, "rb") as f:
        f.seek(info.header_offset + 26)
        name_len, extra_len = np.frombuffer(f.read(4), "<u2")
        start = info.header_offset + 30 + int(name_len) + int(extra_len)
        f.seek(start)
        np.lib.format.read_magic(f)
        np.lib.format.read_array_header_1_0(f)
        return f.tell()


# Opens array x of each kind in `F` with `mode` (a dict kind -> DiskArray). A read-only open goes
# through each format's own API; the .npz member and the checkpoint leaf, which those APIs open
# read-only only, open writable as raw arrays at their offsets.
OPEN_ALL = """
import os
import numpy as np
import jask
def open_all(F, mode, kinds):
    out = {}
    for kind in kinds:
        if kind == "npy":
            out[kind] = jask.DiskArray.open(os.path.join(F, "a.npy"), mode=mode)
        elif kind == "st":
            out[kind] = jask.open_safetensors(os.path.join(F, "m.safetensors"), mode=mode)["x"]
        elif kind == "h5":
            out[kind] = jask.open_hdf5(os.path.join(F, "d.h5"), "x", mode=mode)
        elif kind == "npz" and mode == "r":
            out[kind] = jask.open_npz(os.path.join(F, "z.npz"))["x"]
        elif kind == "npz":
            out[kind] = jask.DiskArray.open(
                os.path.join(F, "z.npz"), shape=(N,), dtype="float32", offset=NPZ_OFFSET, mode=mode
            )
        elif kind == "ckpt" and mode == "r":
            out[kind] = jask.load_tree(os.path.join(F, "ckpt"), mode="r")["x"]
        else:
            out[kind] = jask.DiskArray.open(os.path.join(F, "ckpt", "leaf_00000.npy"), mode=mode)
    return out
"""

# A child updating arrays of `folder` (argv: a JSON spec), killed by JASK_TEST_CRASH_AT.
CHILD = """
import json, sys
import numpy as np
import jask
from jask import _engine
spec = json.loads(sys.argv[1])
N, NPZ_OFFSET = spec["n"], spec["npz_offset"]
exec(spec["open_all"])
jask.set_memory_budget("64KB", scratch_dir=spec["scratch"])
_engine.set_in_place_update_threshold(0)  # update_ of one array writes in place, journaled
arrays = open_all(spec["folder"], "r+", spec["kinds"])
kinds = ["npy", "st", "h5", "npz", "ckpt"]
def new(kind):
    return jask.DiskArray.from_numpy(-(np.arange(N, dtype=np.float32) + 10.0 * kinds.index(kind)) - 1)
if spec["how"] == "update_tree_":
    jask.update_tree_(arrays, {k: new(k) for k in arrays})
else:
    for kind, x in arrays.items():
        x.update_(new(kind))
print("finished", flush=True)
"""

# (how, kinds updated, crash point, whether the values are new after the crash)
CRASHES = {
    "tree_before_commit": ("update_tree_", KINDS, "replace_half_written", False),
    "tree_committed": ("update_tree_", KINDS, "update_tree_committed", True),
    "tree_renamed_one": ("update_tree_", KINDS, "update_tree_renamed_one", True),
    "st_journal_unflushed": ("update_", ("st",), "in_place_journal_written", False),
    "st_half_written": ("update_", ("st",), "in_place_half_written", True),
    "h5_half_written": ("update_", ("h5",), "in_place_half_written", True),
    "npz_journal_flushed": ("update_", ("npz",), "in_place_journal_flushed", True),
}


def crash(root: Path, name: str) -> Path:
    how, kinds, point, _ = CRASHES[name]
    folder = root / name
    write_inputs(folder)
    spec = dict(
        n=N,
        npz_offset=npz_offset(folder / "z.npz"),
        open_all=OPEN_ALL,
        scratch=str(root / f"{name}-scratch"),
        folder=str(folder),
        kinds=list(kinds),
        how=how,
    )
    child = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(spec)],
        capture_output=True,
        text=True,
        env=child_env(JASK_TEST_CRASH_AT=point),
        timeout=300,
    )
    assert child.returncode == -9, (name, child.returncode, child.stdout, child.stderr[-3000:])
    return folder


@pytest.fixture(scope="module")
def crashed(tmp_path_factory):
    """Folders left by children killed at each step of CRASHES, made at once, and a pristine
    copy of each (the fuzzer's seeds)."""
    root = tmp_path_factory.mktemp("crashed")
    with ThreadPoolExecutor(4) as pool:
        folders = dict(zip(CRASHES, pool.map(lambda n: crash(root, n), CRASHES)))
    seeds = {}
    for name, folder in folders.items():
        seeds[name] = root / "seeds" / name
        shutil.copytree(folder, seeds[name], symlinks=True)
    return folders, seeds


def open_all(folder, mode, kinds=KINDS):
    scope = {"N": N, "NPZ_OFFSET": npz_offset(folder / "z.npz")}
    exec(OPEN_ALL, scope)
    return scope["open_all"](str(folder), mode, kinds)


def hashes(folder: Path) -> dict:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def recovery_files(folder: Path) -> list[str]:
    return sorted(
        str(p.relative_to(folder))
        for p in folder.rglob("*")
        if ".jask-txn-" in p.name or ".jask-journal" in p.name
    )


# --- A crashed update, read by read-only opens of every format, then finished by r+ ----------


@pytest.mark.parametrize("name", list(CRASHES))
def test_read_only_opens_read_the_committed_values_and_change_nothing(crashed, name):
    folder = crashed[0][name]
    _, updated, _, is_new = CRASHES[name]
    left = recovery_files(folder)
    assert left, f"{name}: the crash left no recovery files"
    before = hashes(folder)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        arrays = open_all(folder, "r")
        values = {kind: np.asarray(x) for kind, x in arrays.items()}
    del arrays
    assert hashes(folder) == before, f"{name}: a read-only open changed the folder"
    assert recovery_files(folder) == left
    for kind in KINDS:
        expected = new_values(kind) if is_new and kind in updated else old_values(kind)
        np.testing.assert_array_equal(values[kind], expected, err_msg=f"{name}: {kind}")
    told = [str(w.message) for w in caught if 'mode="r+"' in str(w.message)]
    if is_new:
        assert told, f"{name}: no warning that mode='r+' finishes the recovery"
        assert all(issubclass(w.category, RuntimeWarning) for w in caught)

    # A writable open of each finishes (or undoes) what the dead writer left, in its folder.
    open_all(folder, "r+")
    assert recovery_files(folder) == []
    values = {k: np.asarray(x) for k, x in open_all(folder, "r", set(KINDS) - {"npz"}).items()}
    (values["npz"],) = open_all(folder, "r+", ["npz"]).values()  # (the member's CRC may differ)
    for kind in KINDS:
        expected = new_values(kind) if is_new and kind in updated else old_values(kind)
        np.testing.assert_array_equal(np.asarray(values[kind]), expected, err_msg=name)


STRANGER = 12345  # a uid that is neither the files' owner, root nor this process's user


@pytest.mark.skipif(os.geteuid() != 0, reason="giving files to another user needs root")
@pytest.mark.parametrize("name", ["tree_committed", "npz_journal_flushed"])
def test_recovery_files_of_another_user_are_never_trusted(crashed, tmp_path, name):
    """In a folder shared with other users (a sticky /tmp), anyone can plant intact recovery files
    of Jask's names: a record renaming files the victim owns, a journal writing into one. Files
    owned by neither the target's owner, root nor this process's user are never acted on or read
    from: both modes read the old values, warn naming the owner, and change nothing."""
    folder = tmp_path / name
    shutil.copytree(crashed[1][name], folder, symlinks=True)  # the crash as it was left
    planted = recovery_files(folder)
    assert planted
    for rel in planted:
        os.lchown(folder / rel, STRANGER, STRANGER)
    before = hashes(folder)
    for mode in ("r", "r+"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            values = {k: np.asarray(x) for k, x in open_all(folder, mode).items()}
        assert hashes(folder) == before, f"{name}: a {mode} open acted on another user's files"
        assert recovery_files(folder) == planted
        for kind in KINDS:
            np.testing.assert_array_equal(values[kind], old_values(kind), err_msg=f"{name} {mode}")
        told = [str(w.message) for w in caught]
        assert any(f"owned by uid {STRANGER}" in m for m in told), (mode, told)


# --- The engine's recovery files, as Python writes them (for planting) ----------------------


def _crc32c_table():
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc = _CRC_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _sized(s: str) -> bytes:
    b = s.encode()
    return str(len(b)).encode() + b":" + b


def _seal(body: bytes) -> bytes:
    return body + b"crc %08x\n" % crc32c(body)


def pointer_bytes(record: str, host: str = HOST) -> bytes:
    return _seal(
        b"jask-txn-pointer 2\nhost " + _sized(host) + b"\nrecord " + _sized(record) + b"\n"
    )


def record_bytes(txn_id: str, pairs, host: str = HOST, pid: int | None = None) -> bytes:
    pid = int(txn_id.split("-")[0]) if pid is None else pid
    body = b"jask-txn 2\nid %s\npid %d\nhost " % (txn_id.encode(), pid) + _sized(host) + b"\n"
    return _seal(body + b"".join(_sized(t) + _sized(g) + b"\n" for t, g in pairs))


def _parse_sized(b: bytes, i: int):
    colon = b.index(b":", i)
    n = int(b[i:colon])
    return b[colon + 1 : colon + 1 + n].decode(), colon + 1 + n


def parse_pointer(b: bytes) -> tuple[str, str]:
    host, i = _parse_sized(b, len(b"jask-txn-pointer 2\nhost "))
    record, _ = _parse_sized(b, i + len(b"\nrecord "))
    return host, record


def parse_record(b: bytes) -> tuple[str, int, str, list]:
    lines = b.split(b"\n", 3)
    txn_id, pid = lines[1][3:].decode(), int(lines[2][4:])
    host, i = _parse_sized(b, b.index(b"\nhost ") + 6)
    i += 1
    pairs = []
    while not b.startswith(b"crc ", i):
        temp, i = _parse_sized(b, i)
        target, i = _parse_sized(b, i)
        pairs.append((temp, target))
        i += 1
    return txn_id, pid, host, pairs


def dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


# --- A runner of hostile trials: each a folder laid out by `setup`, read in a forked child ---


class Case:
    """A trial: `setup(data, elsewhere)` lays out the input folder `data` and a sibling
    `elsewhere` (outside the input's folder); `code` opens the input with `mode` and sets `out`;
    `expected` lists the acceptable values per leaf (or the trial may refuse cleanly)."""

    def __init__(self, name, setup, code, expected, mode="r"):
        self.name, self.setup, self.code, self.expected, self.mode = (
            name,
            setup,
            code,
            expected,
            mode,
        )
        self.notes = []  # what setup did, for messages


def run_cases(cases, tmp_path: Path) -> list[str]:
    root = tmp_path / "cases"
    outside = root / "outside"
    outside.mkdir(parents=True)
    for name, data in CANARIES.items():
        (outside / name).write_bytes(data)
    outside_before = snapshot(outside)
    ran = _run(cases, root / "trials", root / "work", None, TRIAL_TIMEOUT_S)
    problems = [_problem(*r) for r in ran]
    # A child runs several cases in turn: a case that failed in company runs again alone, set up
    # afresh, with four times the time (its failure is then its own).
    again = [i for i, problem in enumerate(problems) if problem]
    if again:
        alone = _run([cases[i] for i in again], root / "alone", root / "work_alone", 1, 120)
        for i, r in zip(again, alone):
            ran[i], problems[i] = r, _problem(*r)
    failures = [
        f"{case.name} {case.notes} ({folder}): {problem}"
        for (case, folder, *_), problem in zip(ran, problems)
        if problem
    ]
    if snapshot(outside) != outside_before:
        failures.append("the canaries outside every trial changed")
    return failures


def _run(cases, where: Path, work: Path, per_child, timeout_s) -> list:
    """Sets up and runs `cases`; returns (case, folder, result, snapshots before) for each."""
    folders = []
    for i, case in enumerate(cases):
        folder = where / f"t{i:05d}"
        (folder / "data").mkdir(parents=True)
        (folder / "elsewhere").mkdir()
        case.notes = []
        case.setup(folder / "data", folder / "elsewhere")
        folders.append(folder)
    befores = [(snapshot(f), snapshot(f / "elsewhere")) for f in folders]
    jobs = [(c.code, str(f / "data")) for c, f in zip(cases, folders)]
    work.mkdir(parents=True)
    results = run_jobs(jobs, work, (), "1MB", timeout_s, per_child)
    results += [("timeout",)] * (len(jobs) - len(results))
    return list(zip(cases, folders, results, befores))


def _problem(case, folder, result, befores):
    problem = judge(case, folder, result)
    if case.mode == "r" and snapshot(folder) != befores[0]:
        problem = (problem or "") + " a read-only open changed its folder"
    if snapshot(folder / "elsewhere") != befores[1]:
        problem = (problem or "") + " files outside the input's folder changed"
    return problem


def judge(case, folder, result):
    if result[0] in ("timeout", "crash"):
        return f"{result[0]} {result[1:]}"
    if result[0] == "error":
        mro, message = result[1], result[2]
        if not any(c in mro for c in ("ValueError", "TypeError", "OSError")):
            return f"raised {mro[0]}: {message}\n{result[3]}"
        if str(folder) not in message:
            return f"raised {mro[0]} naming no file of the trial: {message}"
        return None
    values = result[1]
    for leaf, options in case.expected.items():
        got = values.get("/" + leaf)
        if got is None or not any(got.shape == o.shape and np.array_equal(got, o) for o in options):
            return f"{leaf}: neither the old nor the committed values"
    return None


def open_code(mode, names=("a.npy", "b.npy")):
    leaves = ", ".join(
        f"{n.split('.')[0]!r}: jask.DiskArray.open(P + '/{n}', mode={mode!r})" for n in names
    )
    return f"out = {{{leaves}}}"


SMALL = 1000


def small(k):
    return np.arange(SMALL, dtype=np.float32) + k


def save_as(path: Path, array):
    """np.save to exactly `path` (np.save adds .npy to a name without it)."""
    with open(path, "wb") as f:
        np.save(f, array)


def pair_folder(data: Path):
    np.save(data / "a.npy", small(0))
    np.save(data / "b.npy", small(100))


OLD_PAIR = {"a": [small(0)], "b": [small(100)]}


def hostile_cases(dead: int) -> list[Case]:
    """Hand-made hostile recovery files beside a.npy and b.npy; each read with "r" and "r+"."""
    txn = f"{dead}-00000000deadbeef"
    cases = []

    def add(name, plant, expected=OLD_PAIR):
        def setup(data, elsewhere, plant=plant):
            pair_folder(data)
            plant(data, elsewhere)

        for mode in ("r", "r+"):
            cases.append(Case(f"{name} [{mode}]", setup, open_code(mode), expected, mode))

    def outside_record(data, elsewhere):
        np.save(elsewhere / "victim.npy", small(7))
        save_as(elsewhere / f"victim.npy.jask-txn-{txn}", small(8))
        record = elsewhere / f"victim.npy.jask-txn-{txn}.journal"
        pairs = [(f"{elsewhere}/victim.npy.jask-txn-{txn}", f"{elsewhere}/victim.npy")]
        record.write_bytes(record_bytes(txn, pairs))
        (data / f"a.npy.jask-txn-{txn}.ptr").write_bytes(pointer_bytes(str(record)))

    add("a pointer naming a record outside the folder", outside_record)

    def over_the_input(data, elsewhere):
        record = data / f"a.npy.jask-txn-{txn}.journal"
        record.write_bytes(record_bytes(txn, [(f"{data}/b.npy", f"{data}/a.npy")]))
        (data / f"a.npy.jask-txn-{txn}.ptr").write_bytes(pointer_bytes(str(record)))

    add("a record renaming another file over the input", over_the_input)

    def climbing(data, elsewhere):
        save_as(elsewhere / f"victim.npy.jask-txn-{txn}", small(8))
        np.save(elsewhere / "victim.npy", small(7))
        record = data / f"a.npy.jask-txn-{txn}.journal"
        target = f"{data}/../elsewhere/victim.npy"
        record.write_bytes(record_bytes(txn, [(f"{target}.jask-txn-{txn}", target)]))
        (data / f"a.npy.jask-txn-{txn}.ptr").write_bytes(pointer_bytes(str(record)))

    add("a record whose paths climb out with ..", climbing)

    def missing_record(data, elsewhere):
        (elsewhere / f"x.jask-txn-{txn}.journal.part").write_bytes(b"precious")
        (elsewhere / "precious.part").write_bytes(b"precious")
        record = f"{elsewhere}/x.jask-txn-{txn}.journal"
        (data / f"a.npy.jask-txn-{txn}.ptr").write_bytes(pointer_bytes(record))
        (data / f"b.npy.jask-txn-{txn}.ptr").write_bytes(pointer_bytes(f"{elsewhere}/precious"))

    add("a pointer to a missing record with a .part elsewhere", missing_record)

    def committed(data, elsewhere, link=None):
        """A committed step of a.npy and b.npy to new values, with `link` made a symlink."""
        save_as(data / f"a.npy.jask-txn-{txn}", small(1))
        save_as(data / f"b.npy.jask-txn-{txn}", small(101))
        pairs = [(f"{data}/{n}.jask-txn-{txn}", f"{data}/{n}") for n in ("a.npy", "b.npy")]
        files = {
            f"a.npy.jask-txn-{txn}.journal": record_bytes(txn, pairs),
            f"a.npy.jask-txn-{txn}.ptr": pointer_bytes(f"{data}/a.npy.jask-txn-{txn}.journal"),
            f"b.npy.jask-txn-{txn}.ptr": pointer_bytes(f"{data}/a.npy.jask-txn-{txn}.journal"),
        }
        for name, content in files.items():
            (data / name).write_bytes(content)
        if link is not None:
            real = elsewhere / ("real-" + link)
            os.replace(data / link, real)
            os.symlink(real, data / link)

    for link in (
        f"a.npy.jask-txn-{txn}.ptr",
        f"a.npy.jask-txn-{txn}.journal",
        f"a.npy.jask-txn-{txn}",
    ):
        # b's own pointer and the record are intact: b may read (or finish) the committed step.
        add(
            f"a symlinked {link.split('.', 2)[-1]}",
            lambda d, e, link=link: committed(d, e, link),
            {"a": [small(0), small(1)], "b": [small(100), small(101)]},
        )

    def fifo(data, elsewhere, name):
        os.mkfifo(data / name)

    for name in ("a.npy.jask-journal", "a.npy.jask-journal.part", f"a.npy.jask-txn-{txn}.ptr"):
        add(f"a FIFO named {name}", lambda d, e, name=name: fifo(d, e, name))

    def fifo_record(data, elsewhere):
        os.mkfifo(data / f"a.npy.jask-txn-{txn}.journal")
        (data / f"a.npy.jask-txn-{txn}.ptr").write_bytes(
            pointer_bytes(f"{data}/a.npy.jask-txn-{txn}.journal")
        )

    add("a FIFO commit record", fifo_record)

    def other_host(data, elsewhere):
        committed(data, elsewhere)
        record = data / f"a.npy.jask-txn-{txn}.journal"
        txn_id, pid, _, pairs = parse_record(record.read_bytes())
        record.write_bytes(record_bytes(txn_id, pairs, host="elsewhere.example", pid=pid))
        for n in ("a.npy", "b.npy"):
            (data / f"{n}.jask-txn-{txn}.ptr").write_bytes(
                pointer_bytes(str(record), host="elsewhere.example")
            )

    # Another host's committed step: read as committed, never finished from here.
    for mode in ("r", "r+"):
        cases.append(
            Case(
                f"another host's writer [{mode}]",
                lambda d, e: (pair_folder(d), other_host(d, e)),
                open_code(mode),
                {"a": [small(0), small(1)], "b": [small(100), small(101)]},
                mode,
            )
        )
    return cases


def test_hostile_recovery_files_are_never_acted_on_and_never_block(tmp_path):
    failures = run_cases(hostile_cases(dead_pid()), tmp_path)
    assert not failures, "\n".join(failures)


# --- The fuzzer: mutations of the recovery files crashed writers left ------------------------


def relocate(folder: Path, old: Path):
    """Rewrites the paths in the records and pointers copied from `old` to name `folder`, and
    the journals' file identity to their copied file's, so the copy is a valid crash state."""
    for p in list(folder.rglob("*")):
        if not p.is_file() or p.is_symlink():
            continue
        raw = p.read_bytes()
        if p.name.endswith(".ptr") and raw.startswith(b"jask-txn-pointer 2\n"):
            host, record = parse_pointer(raw)
            p.write_bytes(pointer_bytes(record.replace(str(old), str(folder)), host))
        elif p.name.endswith(".journal") and raw.startswith(b"jask-txn 2\n"):
            txn_id, pid, host, pairs = parse_record(raw)
            pairs = [
                (t.replace(str(old), str(folder)), g.replace(str(old), str(folder)))
                for t, g in pairs
            ]
            p.write_bytes(record_bytes(txn_id, pairs, host, pid))
        elif p.name.endswith(".jask-journal") and raw.startswith(b"jask-journal 1\n"):
            target = p.with_name(p.name[: -len(".jask-journal")])
            st = target.stat()
            header = bytearray(raw[:4096])
            header[16:32] = np.array([st.st_dev, st.st_ino], "<u8").tobytes()
            header[68:72] = np.array([crc32c(bytes(header[:68]))], "<u4").tobytes()
            p.write_bytes(bytes(header) + raw[4096:])


def parses(raw: bytes) -> bool:
    """Whether `raw` is a record or pointer whose fields parse (its checksum aside)."""
    try:
        if raw.startswith(b"jask-txn 2\n"):
            parse_record(raw)
        elif raw.startswith(b"jask-txn-pointer 2\n"):
            parse_pointer(raw)
        return True
    except (ValueError, IndexError, UnicodeDecodeError):
        return False


def mutate(rng: random.Random, data: Path, elsewhere: Path):
    files = [
        p
        for p in data.rglob("*")
        if (".jask-txn-" in p.name or ".jask-journal" in p.name) and p.is_file()
    ]
    if not files:
        return "nothing to mutate"
    p = rng.choice(sorted(files))
    raw = p.read_bytes()
    how = rng.choice(
        ["flip", "flip", "truncate", "append", "fifo", "symlink", "dir", "remove", "resealed"]
    )
    if how == "flip":
        b = bytearray(raw)
        for _ in range(rng.randint(1, 3)):
            if b:
                i = rng.randrange(min(len(b), 8192) if rng.random() < 0.7 else len(b))
                b[i] ^= 1 << rng.randrange(8)
        p.write_bytes(bytes(b))
    elif how == "truncate":
        p.write_bytes(raw[: rng.randrange(len(raw) + 1)])
    elif how == "append":
        p.write_bytes(raw + rng.randbytes(rng.randint(1, 64)))
    elif how in ("fifo", "symlink", "dir", "remove"):
        p.unlink()
        if how == "fifo":
            os.mkfifo(p)
        elif how == "symlink":
            real = elsewhere / p.name
            real.write_bytes(raw)
            os.symlink(real, p)
        elif how == "dir":
            p.mkdir()
    elif how == "resealed" and not parses(raw):
        p.write_bytes(raw[::-1])  # mutated already: no fields to reseal
    elif how == "resealed" and raw.startswith(b"jask-txn 2\n"):
        # A record with a valid checksum naming hostile paths.
        txn_id, pid, host, pairs = parse_record(raw)
        victim = rng.choice(
            [
                f"{elsewhere}/victim.npy",
                f"{data}/../elsewhere/victim.npy",
                "relative/victim.npy",
                f"{data}/a.npy",
                f"{data}/ckpt/../a.npy",
            ]
        )
        source = rng.choice([f"{victim}.jask-txn-{txn_id}", f"{data}/m.safetensors", pairs[0][0]])
        pairs[rng.randrange(len(pairs))] = (source, victim)
        p.write_bytes(record_bytes(txn_id, pairs, host, pid))
    elif how == "resealed" and raw.startswith(b"jask-txn-pointer 2\n"):
        host, record = parse_pointer(raw)
        record = rng.choice(
            [f"{elsewhere}/victim.npy", f"{elsewhere}/x.jask-txn-1-0.journal", record + ".."]
        )
        (elsewhere / "victim.npy.part").write_bytes(b"canary")
        p.write_bytes(pointer_bytes(record, host))
    else:
        p.write_bytes(raw[::-1])
    return f"{how} {p.name}"


# Seeds of the fuzzer: a committed and an uncommitted update_tree_ (of a.npy, m.safetensors and
# more; the files of those two are copied), a committed journal not yet written in place (of the
# .npz member: its archive's CRC still holds) and an uncommitted one (a .part).
FUZZ_SEEDS = {
    "tree_committed": ("a.npy", "m.safetensors"),
    "tree_before_commit": ("a.npy", "m.safetensors"),
    "tree_renamed_one": ("a.npy", "m.safetensors"),
    "npz_journal_flushed": ("z.npz",),
    "st_journal_unflushed": ("m.safetensors",),
}
KIND_OF = {"a.npy": "npy", "m.safetensors": "st", "z.npz": "npz"}


def fuzz_cases(seeds: dict, count: int) -> list[Case]:
    cases = []
    names = list(FUZZ_SEEDS)
    for i in range(count):
        rng = random.Random(1000 + i)
        seed_name = names[i % len(names)]
        seed = seeds[seed_name]
        _, updated, _, _ = CRASHES[seed_name]
        mode = "r+" if rng.random() < 0.25 else "r"
        kinds = [KIND_OF[f] for f in FUZZ_SEEDS[seed_name]]
        expected = {
            k: [old_values(k), new_values(k)] if k in updated else [old_values(k)] for k in kinds
        }
        case = Case(f"fuzz {i} of {seed_name} [{mode}]", None, "", expected, mode)

        def setup(data, elsewhere, seed=seed, i=i, case=case, files=FUZZ_SEEDS[seed_name]):
            rng = random.Random(1000 + i)  # the case's own draws, again on a second setup
            rng.random()  # its mode
            for p in seed.iterdir():
                if p.name.startswith(files):
                    shutil.copy2(p, data / p.name, follow_symlinks=False)
            relocate(data, seed)
            for _ in range(rng.choice([1, 1, 1, 2, 3])):
                case.notes.append(mutate(rng, data, elsewhere))

        case.setup = setup
        offset = npz_offset(seed / "z.npz")
        case.code = (
            f"N, NPZ_OFFSET = {N}, {offset}\n"
            + OPEN_ALL
            + f"\nout = open_all(P, {mode!r}, {kinds!r})"
        )
        cases.append(case)
    return cases


def test_fuzzed_recovery_files_give_old_or_committed_values_or_a_clean_error(crashed, tmp_path):
    _, seeds = crashed
    failures = run_cases(fuzz_cases(seeds, fuzz_trials(60)), tmp_path)
    assert not failures, "\n".join(failures[:20]) + f"\n({len(failures)} failures)"
