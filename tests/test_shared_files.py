"""Several arrays in one file (a raw container opened at several offsets): update_ of one keeps
the others' bytes, and every array and view of the file sees the new file."""

import numpy as np
import pytest

import jask

SHAPE = (40, 30)
PREFIX, GAP, SUFFIX = 1000, 4096 + 8, 333
NBYTES = SHAPE[0] * SHAPE[1] * 4
OFFSET_A, OFFSET_B = PREFIX, PREFIX + NBYTES + GAP


@pytest.fixture
def container(tmp_path, rng):
    """A raw file: a prefix, float32 array A, a gap, array B, a suffix (random bytes outside A and B)."""
    path = tmp_path / "container.bin"
    raw = rng.integers(0, 256, size=OFFSET_B + NBYTES + SUFFIX, dtype=np.uint8)
    path.write_bytes(raw.tobytes())
    return path, raw


def open_at(path, offset):
    return jask.DiskArray.open(path, shape=SHAPE, dtype="float32", offset=offset, mode="r+")


def file_array(path, offset):
    return np.fromfile(path, dtype=np.float32, count=NBYTES // 4, offset=offset).reshape(SHAPE)


def check_file(path, raw, a, b):
    data = np.fromfile(path, dtype=np.uint8)
    assert data.size == raw.size
    np.testing.assert_array_equal(file_array(path, OFFSET_A), a)
    np.testing.assert_array_equal(file_array(path, OFFSET_B), b)
    outside = np.ones(raw.size, bool)
    outside[OFFSET_A : OFFSET_A + NBYTES] = outside[OFFSET_B : OFFSET_B + NBYTES] = False
    np.testing.assert_array_equal(data[outside], raw[outside])


@pytest.mark.parametrize("order", ["aabb", "abab", "baab"])
def test_updates_of_two_arrays_of_one_file_keep_each_others_values(container, rng, order):
    path, raw = container
    arrays = {"a": open_at(path, OFFSET_A), "b": open_at(path, OFFSET_B)}
    now = {k: np.asarray(v).copy() for k, v in arrays.items()}
    for name in order:
        new = rng.uniform(size=SHAPE).astype(np.float32)
        arrays[name].update_(jask.DiskArray.from_numpy(new))
        now[name] = new
        for k in "ab":
            np.testing.assert_array_equal(np.asarray(arrays[k]), now[k])
    check_file(path, raw, now["a"], now["b"])
    # A fresh open of the path reads the latest values too.
    np.testing.assert_array_equal(np.asarray(open_at(path, OFFSET_B)), now["b"])


def test_update_while_a_view_of_the_other_array_is_held(container, rng, monkeypatch):
    # The slice stays on disk: a view of the file.
    monkeypatch.setattr(jask._api.operands, "IN_MEMORY_LIMIT", 10)
    path, raw = container
    a, b = open_at(path, OFFSET_A), open_at(path, OFFSET_B)
    b_view = b[5:20]
    assert isinstance(b_view, jask.DiskArray) and b_view.path == b.path
    b_before = np.asarray(b).copy()
    a_new = rng.uniform(size=SHAPE).astype(np.float32)
    a.update_(jask.DiskArray.from_numpy(a_new))
    np.testing.assert_array_equal(np.asarray(b_view), b_before[5:20])
    b_new = rng.uniform(size=SHAPE).astype(np.float32)
    b.update_(jask.DiskArray.from_numpy(b_new))
    np.testing.assert_array_equal(np.asarray(b_view), b_new[5:20])
    np.testing.assert_array_equal(np.asarray(a), a_new)
    check_file(path, raw, a_new, b_new)


def test_an_array_opened_read_only_beside_a_writable_one_sees_its_updates(container, rng):
    path, raw = container
    reader = jask.DiskArray.open(path, shape=SHAPE, dtype="float32", offset=OFFSET_B)
    writer = open_at(path, OFFSET_B)
    new = rng.uniform(size=SHAPE).astype(np.float32)
    writer.update_(jask.DiskArray.from_numpy(new))
    np.testing.assert_array_equal(np.asarray(reader), new)
    with pytest.raises(PermissionError, match="read-only"):
        reader.update_(jask.DiskArray.from_numpy(new))


def test_saving_over_an_open_arrays_file_is_refused(tmp_path, rng):
    """x.save(path) where path is the file of an open DiskArray (x's own, or another's through
    another spelling) would truncate the file it reads: a ValueError, and the file is intact."""
    values = rng.uniform(-1, 1, (37, 11)).astype(np.float32)
    path = tmp_path / "x.npy"
    np.save(path, values)
    x = jask.DiskArray.open(path)
    y = jask.DiskArray.from_numpy(values * 2)
    for target in (path, tmp_path / "." / "x.npy"):
        for source in (x, y):
            with pytest.raises(ValueError, match="file of an open DiskArray"):
                source.save(target)
    np.testing.assert_array_equal(np.load(path), values)
    np.testing.assert_array_equal(np.asarray(x), values)
    del x
    y.save(path)  # no array has it open any more
    np.testing.assert_array_equal(np.load(path), values * 2)
