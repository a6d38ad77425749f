"""update_ of one array of a container file writes it in place through a redo journal: a kill at
any step leaves that array all old or all new and every other byte of the file as it was, readers
in the process never see a torn array, and the next open replays or discards what a dead writer
left."""

import os
import re
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from test_update_crash import run_until_crash_point

import jask
from jask import _engine

N = 100_003  # float32: 400 KB per array, several blocks of the copies under a 64 KB budget
NBYTES = 4 * N
# Three arrays back to back after a prefix, with gaps and a suffix, like a safetensors shard.
OFFSETS = [1000 + i * (NBYTES + 123) for i in range(3)]
FILE_BYTES = OFFSETS[-1] + NBYTES + 77
NEW_VALUE = 7.0

# Updates array 1 of the container to NEW_VALUE in place; JASK_TEST_CRASH_AT kills it at a step.
CHILD = f"""
import sys
import numpy as np
import jask
from jask import _engine
jask.set_memory_budget("64KB", scratch_dir=sys.argv[2])
_engine.set_in_place_update_threshold(0)
arrays = [
    jask.DiskArray.open(sys.argv[1], shape=({N},), dtype="float32", offset=o, mode="r+")
    for o in {OFFSETS}
]
arrays[1].update_(jask.DiskArray.from_numpy(np.full({N}, {NEW_VALUE}, np.float32)))
print("updated", flush=True)
"""

# Each step of replace_data's in-place path (storage/journal.hpp) and what a kill there leaves:
# whether the journal is at its final name, and whether the array is then new.
STEPS = {
    "in_place_journal_written": (False, False),  # header written, not flushed: a .part
    "in_place_journal_flushed": (True, True),  # past the commit point, not written in place
    "in_place_half_written": (True, True),  # the first block written over the array
    "in_place_written": (True, True),  # written and flushed, the journal not yet removed
}

# What a read-only open says of a journal it reads without replaying it.
READ_WITHOUT_REPLAY = r'(?s)shard\.bin\.jask-journal.*reads the new values.*mode="r\+"'


def container_bytes():
    rng = np.random.default_rng(13)
    raw = bytearray(rng.integers(0, 256, FILE_BYTES, dtype=np.uint8).tobytes())
    for i, offset in enumerate(OFFSETS):
        raw[offset : offset + NBYTES] = (np.arange(N, dtype=np.float32) + 10.0 * i).tobytes()
    return bytes(raw)


def open_container(path, mode="r+"):
    return [
        jask.DiskArray.open(path, shape=(N,), dtype="float32", offset=o, mode=mode) for o in OFFSETS
    ]


def outside_array_1(raw):
    return raw[: OFFSETS[1]] + raw[OFFSETS[1] + NBYTES :]


def array_1(raw):
    return np.frombuffer(raw[OFFSETS[1] : OFFSETS[1] + NBYTES], np.float32)


def journal_files(path):
    return sorted(f.name for f in path.parent.iterdir() if ".jask-journal" in f.name)


def kill_child_at(folder, point):
    """A container in `folder`, and a child killed at `point` of an in-place update_ of it."""
    folder.mkdir()
    path = folder / "shard.bin"
    path.write_bytes(container_bytes())
    run_until_crash_point(CHILD, point, path, folder / "scratch")
    return path


@pytest.fixture(scope="module")
def killed(tmp_path_factory):
    """Containers left by children killed at each step, plus the extra cases below, made at once
    (a child's start is mostly importing JAX)."""
    root = tmp_path_factory.mktemp("journal")
    cases = {point: point for point in STEPS}
    cases["corrupt"] = "in_place_journal_flushed"
    if os.geteuid() != 0:
        cases["not_writable"] = "in_place_journal_flushed"
    with ThreadPoolExecutor(len(cases)) as pool:
        paths = pool.map(kill_child_at, [root / name for name in cases], cases.values())
    return dict(zip(cases, paths))


@pytest.fixture
def in_place():
    """update_ writes in place whatever the file holds besides the array."""
    saved = _engine.in_place_update_threshold()
    _engine.set_in_place_update_threshold(0)
    yield
    _engine.set_in_place_update_threshold(saved)


def folder_bytes(folder):
    return {f.name: f.read_bytes() for f in folder.iterdir() if f.is_file()}


@pytest.mark.parametrize("point", list(STEPS))
def test_a_kill_at_each_step_leaves_the_array_old_or_new_and_all_else_untouched(killed, point):
    path = killed[point]
    before = container_bytes()
    journal_left, is_new = STEPS[point]
    raw = path.read_bytes()
    assert outside_array_1(raw) == outside_array_1(before), point
    assert ("shard.bin.jask-journal" in journal_files(path)) == journal_left, journal_files(path)
    if point == "in_place_half_written":  # torn on disk until a writable open replays it
        written = array_1(raw) == NEW_VALUE
        assert written.any() and not written.all()
    expected = np.full(N, NEW_VALUE, np.float32) if is_new else array_1(before)

    # A read-only open reads the committed values and writes, renames and removes nothing.
    files = folder_bytes(path.parent)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        arrays = open_container(path, "r")
        np.testing.assert_array_equal(np.asarray(arrays[1]), expected)
    assert folder_bytes(path.parent) == files, point
    said = [str(w.message) for w in caught if re.search(READ_WITHOUT_REPLAY, str(w.message))]
    assert bool(said) == journal_left, [str(w.message) for w in caught]
    np.testing.assert_array_equal(np.asarray(arrays[0]), np.arange(N, dtype=np.float32))

    arrays = open_container(path, "r+")  # replays or discards what the child left
    assert journal_files(path) == []
    raw = path.read_bytes()
    assert outside_array_1(raw) == outside_array_1(before), point
    np.testing.assert_array_equal(array_1(raw), expected)
    values = np.asarray(arrays[1])
    assert values.dtype == np.float32
    np.testing.assert_array_equal(values, expected)
    np.testing.assert_array_equal(np.asarray(arrays[2]), np.arange(N, dtype=np.float32) + 20.0)


def test_a_corrupt_journal_is_left_alone_and_reported_without_touching_the_file(killed):
    path = killed["corrupt"]
    before = container_bytes()
    journal = path.parent / "shard.bin.jask-journal"
    corrupt = bytearray(journal.read_bytes())
    corrupt[-5] ^= 0xFF  # a payload byte: its checksum no longer holds
    journal.write_bytes(bytes(corrupt))
    with pytest.warns(RuntimeWarning, match=r"shard\.bin\.jask-journal is not an intact journal"):
        arrays = open_container(path)
    assert path.read_bytes() == before
    assert journal.read_bytes() == bytes(corrupt)
    np.testing.assert_array_equal(np.asarray(arrays[1]), np.arange(N, dtype=np.float32) + 10.0)


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write any file")
def test_a_read_only_open_of_a_file_it_may_not_write_reads_the_journal_and_says_so(killed):
    path = killed["not_writable"]
    path.chmod(0o444)
    with pytest.warns(RuntimeWarning, match=READ_WITHOUT_REPLAY):
        x = jask.DiskArray.open(path, shape=(N,), dtype="float32", offset=OFFSETS[1])
    np.testing.assert_array_equal(np.asarray(x), np.full(N, NEW_VALUE, np.float32))
    assert path.read_bytes() == container_bytes()
    path.chmod(0o644)
    x = jask.DiskArray.open(path, shape=(N,), dtype="float32", offset=OFFSETS[1], mode="r+")
    np.testing.assert_array_equal(np.asarray(x), np.full(N, NEW_VALUE, np.float32))
    assert journal_files(path) == []


def test_updates_within_one_file_write_in_place_and_keep_every_other_byte(tmp_path, in_place):
    path = tmp_path / "shard.bin"
    before = container_bytes()
    path.write_bytes(before)
    inode = path.stat().st_ino
    a, b, c = open_container(path)
    new = np.linspace(-1.0, 1.0, N, dtype=np.float32)
    b.update_(jask.DiskArray.from_numpy(new))
    b.update_(b * 2.0)  # twice in a row
    a.update_(b)  # from another array of the same file
    raw = path.read_bytes()
    assert path.stat().st_ino == inode  # in place, not renamed
    assert journal_files(path) == []
    for x, expected in [(a, new * 2.0), (b, new * 2.0), (c, np.arange(N, dtype=np.float32) + 20.0)]:
        values = np.asarray(x)
        assert values.dtype == np.float32
        np.testing.assert_array_equal(values, expected)
    for offset, expected in zip(OFFSETS, [new * 2.0, new * 2.0, np.arange(N) + 20.0]):
        assert raw[offset : offset + NBYTES] == expected.astype(np.float32).tobytes()
    ends = [0] + [o + NBYTES for o in OFFSETS]
    starts = OFFSETS + [FILE_BYTES]
    for begin, end in zip(ends, starts):  # the prefix, the gaps and the suffix
        assert raw[begin:end] == before[begin:end]


def test_readers_never_see_a_torn_array_during_in_place_updates(tmp_path, small_budget, in_place):
    small_budget("64KB")
    path = tmp_path / "shard.bin"
    path.write_bytes(container_bytes())
    _, x, y = open_container(path)
    x.update_(jask.full((N,), 0.0))
    y_values = np.asarray(y)
    updates = 10
    finished = threading.Event()
    seen, y_changed = [], []

    def update():
        try:
            for k in range(1, updates + 1):
                x.update_(jask.full((N,), float(k)))
        finally:
            finished.set()

    def read():
        last = False
        while not last:  # at least one read, however the threads are scheduled
            last = finished.is_set()
            values = np.asarray(x)
            seen.append((float(values.min()), float(values.max())))
            seen.append((float(jask.sum(x)) / N,) * 2)
            y_changed.append(not np.array_equal(np.asarray(y), y_values))

    threads = [threading.Thread(target=read) for _ in range(2)] + [threading.Thread(target=update)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen
    for low, high in seen:  # a sum of N values k is N * k exactly
        assert low == high and low in range(updates + 1), f"a torn read: {low} .. {high}"
    assert not any(y_changed)
    np.testing.assert_array_equal(np.asarray(x), np.full(N, float(updates), np.float32))
