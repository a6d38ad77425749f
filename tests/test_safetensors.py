"""safetensors files opened in place (jask.open_safetensors) and written (jask.save_safetensors).

Every file is checked against the `safetensors` package: files it writes open with its values and
dtypes, files Jask writes read back through `safetensors.safe_open` and `safetensors.numpy`.
"""

import contextlib
import json
import os
import threading

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import optax
import pytest
import safetensors.numpy
from safetensors import safe_open

import jask
from jask import _engine

from conftest import assert_close

BF16 = np.dtype(ml_dtypes.bfloat16)


def _sample(rng):
    """One tensor of every dtype Jask stores; shapes that are not multiples of a block."""
    return {
        "w32": rng.standard_normal((37, 5)).astype(np.float32),
        "w16": rng.standard_normal((3, 11)).astype(np.float16),
        "wbf": rng.standard_normal((7, 9)).astype(BF16),
        "w64": rng.standard_normal(13),
        "idx": rng.integers(-50, 50, (4, 3)).astype(np.int32),
        "mask": rng.random(17) > 0.5,
        "scalar": np.array(2.5, np.float32),
        "empty": np.zeros((0, 3), np.float32),
    }


def _assert_same(got: dict, want: dict):
    assert list(sorted(got)) == sorted(want)
    for name, value in want.items():
        array = np.asarray(got[name])
        assert array.dtype == value.dtype and array.shape == value.shape, name
        np.testing.assert_array_equal(array, value, err_msg=name)


def _in_jax_dtypes(arrays: dict) -> dict:
    """The arrays as JAX holds them: float64 as float32 while x64 is off."""
    return {k: v.astype(jax.dtypes.canonicalize_dtype(v.dtype)) for k, v in arrays.items()}


def _safe_open_all(path) -> dict:
    with safe_open(str(path), "np") as f:
        return {name: f.get_tensor(name) for name in f.keys()}


def _header(path) -> tuple[int, dict]:
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        return n, json.loads(f.read(n))


def _write_raw(path, header: dict, data: bytes):
    """A safetensors file of `header` (any claims) and `data`, as a hand-made or damaged one."""
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text + data)


# -- opening -----------------------------------------------------------------------


def test_files_the_package_writes_open_in_place_with_its_values_and_dtypes(tmp_path, rng):
    want = _sample(rng)
    path = tmp_path / "m.safetensors"
    safetensors.numpy.save_file(want, str(path), metadata={"format": "np", "note": "x"})
    with jax.enable_x64(True):  # JAX holds float64 only with x64
        got = jask.open_safetensors(path)
    assert all(isinstance(a, jask.DiskArray) for a in got.values())
    _assert_same(got, want)
    n, header = _header(path)
    order = sorted(
        (h["data_offsets"], name) for name, h in header.items() if name != "__metadata__"
    )
    assert list(got) == [name for _, name in order]  # the order of the bytes in the file
    assert jask.safetensors_metadata(path) == {"format": "np", "note": "x"}
    # In place: the arrays are views of the file, and no bytes were copied to scratch.
    assert all(a.path == str(path) for a in got.values())


def test_float64_tensors_open_as_float32_copies_while_x64_is_off(tmp_path, rng):
    want = _sample(rng)
    path = tmp_path / "m.safetensors"
    safetensors.numpy.save_file(want, str(path))
    got = jask.open_safetensors(path)
    _assert_same(got, _in_jax_dtypes(want))
    assert got["w64"].path != str(path) and got["w32"].path == str(path)
    with pytest.raises(TypeError, match=f"{path}: holds float64 values.*mode='r\\+'"):
        jask.open_safetensors(path, mode="r+")


def test_direct_io_reads_tensors_at_unaligned_offsets(tmp_path, rng, small_budget):
    # Blocks of several pages (with the read slack planned in, a 16 KB budget's are one page:
    # no aligned middle to read direct).
    small_budget("64KB")
    want = {
        "a": rng.standard_normal(3).astype(np.float32),
        "b": rng.standard_normal((1001, 13)).astype(np.float32),
        "c": rng.standard_normal((517, 7)).astype(BF16),
    }
    path = tmp_path / "m.safetensors"
    safetensors.numpy.save_file(want, str(path))
    n, header = _header(path)
    assert all((8 + n + header[k]["data_offsets"][0]) % 4096 for k in "bc")
    jask.set_io_mode("direct")
    try:
        before = _engine.io_counters()[0]
        got = jask.open_safetensors(path)
        _assert_same(got, want)
        assert float(jask.sum(got["b"])) == pytest.approx(float(want["b"].sum()), rel=1e-4)
        assert _engine.io_counters()[0] > before  # the aligned middles went direct
    finally:
        jask.set_io_mode("auto")


def mlp_loss(params, x, y):
    h = jax.nn.relu(x @ params["l0.w"] + params["l0.b"])
    return jnp.mean(jnp.square(h @ params["l1.w"] + params["l1.b"] - y))


def test_ops_and_gradients_on_safetensors_weights(tmp_path, rng, small_budget):
    small_budget("8KB")
    params = {
        "l0.w": (rng.standard_normal((41, 67)) / 6).astype(np.float32),
        "l0.b": rng.standard_normal(67).astype(np.float32),
        "l1.w": (rng.standard_normal((67, 3)) / 8).astype(np.float32),
        "l1.b": rng.standard_normal(3).astype(np.float32),
    }
    path = tmp_path / "mlp.safetensors"
    safetensors.numpy.save_file(params, str(path))
    disk = jask.open_safetensors(path)
    x = rng.standard_normal((29, 41)).astype(np.float32)
    y = rng.standard_normal((29, 3)).astype(np.float32)

    value_and_grad = jax.jit(jax.value_and_grad(mlp_loss))
    loss, grads = value_and_grad(disk, x, y)
    want_loss, want_grads = value_and_grad(jax.tree.map(jnp.asarray, params), x, y)
    assert_close(loss, want_loss, rtol=1e-4)
    for name in params:
        assert isinstance(grads[name], jask.DiskArray) and grads[name].dtype == np.float32
        assert_close(grads[name], want_grads[name], rtol=1e-4)

    optimizer = optax.adamw(1e-2)

    @jax.jit
    def adamw_step(grads, params):
        updates, _ = optimizer.update(grads, optimizer.init(params), params)
        return optax.apply_updates(params, updates)

    want_stepped = adamw_step(want_grads, jax.tree.map(jnp.asarray, params))
    for name, stepped in adamw_step(grads, disk).items():
        assert isinstance(stepped, jask.DiskArray)
        assert_close(stepped, want_stepped[name], rtol=1e-4)

    w = disk["l0.w"]
    chain = jnp.tanh(w * 2.0 + 1.0) - jnp.exp(-jnp.abs(w))
    assert_close(chain, np.tanh(params["l0.w"] * 2 + 1) - np.exp(-np.abs(params["l0.w"])))
    np.testing.assert_array_equal(np.asarray(w[5:23]), params["l0.w"][5:23])


@jax.enable_x64(True)  # mode="r+" of a file holding float64 needs x64 (JAX's float64)
def test_update_of_one_tensor_leaves_every_other_byte_alone(tmp_path, rng):
    # Over 1 MiB besides the updated tensor: an engine that writes big files in place does so here.
    want = _sample(rng) | {"pad": rng.standard_normal(300_000).astype(np.float32)}
    path = tmp_path / "m.safetensors"
    safetensors.numpy.save_file(want, str(path))
    before = path.read_bytes()
    n, header = _header(path)
    begin, end = (8 + n + o for o in header["wbf"]["data_offsets"])

    arrays = jask.open_safetensors(path, mode="r+")
    new = rng.standard_normal((7, 9)).astype(BF16)
    arrays["wbf"].update_(jask.DiskArray.from_numpy(new))

    after = path.read_bytes()
    assert len(after) == len(before)
    assert after[:begin] == before[:begin] and after[end:] == before[end:]
    assert after[begin:end] == new.tobytes()
    _assert_same(arrays, want | {"wbf": new})
    read = _safe_open_all(path)
    assert read["wbf"].dtype == BF16
    np.testing.assert_array_equal(read["wbf"], new)

    read_only = jask.open_safetensors(path)
    with pytest.raises(PermissionError, match="r\\+"):
        read_only["w32"].update_(jask.DiskArray.from_numpy(want["w32"]))


def _write_shards(folder, rng) -> dict:
    """A checkpoint in three shards as Hugging Face writes them; returns all tensors."""
    shards = {
        "model-00001-of-00003.safetensors": {"a.w": rng.standard_normal((9, 5)).astype(np.float32)},
        "model-00002-of-00003.safetensors": {
            "b.w": rng.standard_normal((4, 6)).astype(BF16),
            "b.b": rng.standard_normal(6).astype(np.float32),
        },
        "model-00003-of-00003.safetensors": {"c": rng.integers(0, 9, 5).astype(np.int32)},
    }
    weight_map = {}
    for shard, tensors in shards.items():
        safetensors.numpy.save_file(tensors, str(folder / shard), metadata={"format": "pt"})
        weight_map |= dict.fromkeys(tensors, shard)
    index = {"metadata": {"total_size": 1}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    return {k: v for tensors in shards.values() for k, v in tensors.items()}


def test_a_sharded_checkpoint_opens_from_its_folder_or_its_index(tmp_path, rng):
    want = _write_shards(tmp_path, rng)
    _assert_same(jask.open_safetensors(tmp_path), want)
    _assert_same(jask.open_safetensors(tmp_path / "model.safetensors.index.json"), want)
    assert jask.safetensors_metadata(tmp_path) == {"format": "pt"}


def test_shard_index_errors_name_the_index_the_shard_and_the_tensor(tmp_path, rng):
    _write_shards(tmp_path, rng)
    index_path = tmp_path / "model.safetensors.index.json"
    index = json.loads(index_path.read_text())

    def with_map(weight_map):
        index_path.write_text(json.dumps({**index, "weight_map": weight_map}))

    with_map(index["weight_map"] | {"c": "model-00004-of-00003.safetensors"})
    with pytest.raises(ValueError, match="'c'.*model-00004-of-00003.safetensors.*does not exist"):
        jask.open_safetensors(tmp_path)
    with_map(index["weight_map"] | {"d": "model-00003-of-00003.safetensors"})
    with pytest.raises(ValueError, match="'d'.*model-00003-of-00003.safetensors.*does not hold"):
        jask.open_safetensors(tmp_path)
    with_map({k: v for k, v in index["weight_map"].items() if k != "b.b"})
    with pytest.raises(ValueError, match="model-00002-of-00003.safetensors: holds tensor 'b.b'"):
        jask.open_safetensors(tmp_path)
    with_map(index["weight_map"] | {"c": "../elsewhere.safetensors"})
    with pytest.raises(ValueError, match="'c' maps to '../elsewhere.safetensors'"):
        jask.open_safetensors(tmp_path)


# -- header checks --------------------------------------------------------------------


def _lie(header, name, **fields):
    return {**header, name: {**header[name], **fields}}


HEADER_LIES = {
    "end past the data": (
        lambda h: _lie(h, "b", shape=[1012], data_offsets=[48, 4096]),
        "do not fit",
    ),
    "begin after end": (lambda h: _lie(h, "b", data_offsets=[60, 48]), "begin <= end"),
    "span != shape": (lambda h: _lie(h, "b", shape=[2, 2]), "is 16 bytes, but data_offsets"),
    "negative dim": (lambda h: _lie(h, "b", shape=[-3]), "non-negative ints"),
    "float dim": (lambda h: _lie(h, "b", shape=[1.5]), "non-negative ints"),
    "overlap": (lambda h: _lie(h, "b", data_offsets=[40, 52]), "overlap"),
    "overflow": (lambda h: _lie(h, "b", data_offsets=[2**64, 2**64 + 12]), "< 2\\*\\*63"),
    "no offsets": (lambda h: {**h, "b": {"dtype": "F32", "shape": [3]}}, "data_offsets"),
}


@pytest.mark.parametrize("lie", list(HEADER_LIES))
def test_every_header_lie_is_a_value_error_naming_the_file_and_tensor(tmp_path, lie):
    header = {
        "a": {"dtype": "F32", "shape": [12], "data_offsets": [0, 48]},
        "b": {"dtype": "F32", "shape": [3], "data_offsets": [48, 60]},
    }
    path = tmp_path / "lie.safetensors"
    _write_raw(path, header, bytes(60))
    assert len(jask.open_safetensors(path)) == 2  # the honest file opens
    mutate, message = HEADER_LIES[lie]
    _write_raw(path, mutate(header), bytes(60))
    with pytest.raises(ValueError, match=message) as error:
        jask.open_safetensors(path)
    assert str(path) in str(error.value) and "'b'" in str(error.value)


def test_random_header_damage_opens_consistently_or_raises_naming_the_file(tmp_path, rng):
    """Single-character damage anywhere in a real header: a ValueError or TypeError naming the file,
    or (where the damage is still a valid header) arrays that read their claimed shapes."""
    path = tmp_path / "m.safetensors"
    safetensors.numpy.save_file(_sample(rng), str(path))
    original = path.read_bytes()
    n = int.from_bytes(original[:8], "little")
    alphabet = b'0123456789[]{},:"-. aFIBx'
    outcomes = set()
    for _ in range(60):
        damaged = bytearray(original)
        damaged[8 + rng.integers(n)] = alphabet[rng.integers(len(alphabet))]
        path.write_bytes(bytes(damaged))
        try:
            arrays = jask.open_safetensors(path)
        except (ValueError, TypeError) as error:
            assert str(path) in str(error)
            outcomes.add(type(error).__name__)
        else:
            for array in arrays.values():
                assert np.asarray(array).shape == array.shape
            outcomes.add("opened")
    assert "ValueError" in outcomes  # the loop did damage the header


def test_a_truncated_file_names_the_tensor_that_does_not_fit(tmp_path, rng):
    path = tmp_path / "m.safetensors"
    safetensors.numpy.save_file(
        {"first": np.ones(8, np.float32), "last": np.ones(9, np.float32)}, str(path)
    )
    path.write_bytes(path.read_bytes()[:-4])
    with pytest.raises(ValueError, match=f"{path}: tensor 'last'.*do not fit"):
        jask.open_safetensors(path)


def test_header_length_lies_name_the_file(tmp_path):
    path = tmp_path / "m.safetensors"
    for n, message in ((100_000_001, "over safetensors' limit"), (5000, "more than the 20 bytes")):
        path.write_bytes(n.to_bytes(8, "little") + b"{}" + bytes(18))
        with pytest.raises(ValueError, match=f"{path}: header length {n} is {message}"):
            jask.open_safetensors(path)
    path.write_bytes((2).to_bytes(8, "little") + b"[]")
    with pytest.raises(ValueError, match="does not start with"):
        jask.open_safetensors(path)
    _write_raw(path, {"__metadata__": {"format": 1}}, b"")
    with pytest.raises(ValueError, match="__metadata__ must map strings to strings"):
        jask.open_safetensors(path)


@pytest.mark.parametrize("dtype", ["F8_E8M0", "F4"])
def test_unsupported_dtypes_are_type_errors_naming_file_tensor_and_dtype(tmp_path, dtype):
    """float8_e8m0fnu and float4_e2m1fn: safetensors names them, Jask does not store them.
    safetensors.numpy writes neither: hand-made files."""
    path = tmp_path / "m.safetensors"
    nbytes = {"F8_E8M0": 2, "F4": 1}[dtype]  # two elements; F4 packs two to a byte
    header = {"t": {"dtype": dtype, "shape": [2], "data_offsets": [0, nbytes]}}
    _write_raw(path, header, bytes(nbytes))
    with pytest.raises(
        TypeError,
        match=f"{path}: tensor 't' has dtype {dtype}, which Jask does not store.*F32.*BOOL",
    ):
        jask.open_safetensors(path)


@pytest.mark.parametrize("dtype", ["I64", "U8", "F8_E4M3"])
def test_integer_and_float8_tensors_open_with_the_librarys_values(tmp_path, dtype):
    """Stored since issue 33: the values and dtype safetensors.numpy reads, as JAX holds them
    (int64 as int32 while x64 is off). safetensors.numpy does not read F8_E4M3: its bytes are
    viewed as float8_e4m3fn, the dtype the library's safe_open names for it."""
    path = tmp_path / "m.safetensors"
    if dtype == "F8_E4M3":
        bits = np.arange(256, dtype=np.uint8)  # every float8 value, NaN and -0 included
        header = {"t": {"dtype": dtype, "shape": [256], "data_offsets": [0, 256]}}
        _write_raw(path, header, bits.tobytes())
        want = {"t": bits.view(ml_dtypes.float8_e4m3fn)}
    else:
        info = np.iinfo({"I64": np.int64, "U8": np.uint8}[dtype])
        values = np.array([info.min, info.min + 1, 0, 1, 7, info.max - 1, info.max], info.dtype)
        safetensors.numpy.save_file({"t": values}, str(path))
        want = safetensors.numpy.load_file(str(path))
    with jax.enable_x64(True):
        _assert_same(jask.open_safetensors(path), want)
    _assert_same(jask.open_safetensors(path), _in_jax_dtypes(want))


# -- hostile files: each case measured in issue 32 --------------------------------------------


@contextlib.contextmanager
def _unblocked_after(fifo, seconds=5.0):
    """Yields a list that holds True if a reader blocked on `fifo` for `seconds`; the watchdog
    then opens the FIFO's other end, so a regression fails the test instead of hanging it."""
    blocked, stop = [], threading.Event()

    def watch():
        if stop.wait(seconds):
            return
        while not stop.is_set():
            try:  # succeeds only while a reader waits
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
                blocked.append(True)
            except OSError:
                pass
            stop.wait(0.05)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield blocked
    finally:
        stop.set()
        thread.join()


def _fifo_checkpoint(folder, rng, fifo_name):
    """A sharded checkpoint in `folder` whose file `fifo_name` is a FIFO; returns the FIFO."""
    _write_shards(folder, rng)
    fifo = folder / fifo_name
    fifo.unlink()
    os.mkfifo(fifo)
    return fifo


@pytest.mark.parametrize(
    "role, fifo_name",
    [
        ("file", "m.safetensors"),
        ("index", "model.safetensors.index.json"),
        ("shard", "model-00002-of-00003.safetensors"),
    ],
)
def test_a_fifo_as_file_index_or_shard_is_refused_without_blocking(tmp_path, rng, role, fifo_name):
    if role == "file":
        fifo = tmp_path / fifo_name
        os.mkfifo(fifo)
    else:
        fifo = _fifo_checkpoint(tmp_path, rng, fifo_name)
    for call in (jask.open_safetensors, jask.safetensors_metadata):
        with _unblocked_after(fifo) as blocked, pytest.raises(OSError, match="is a FIFO") as error:
            call(tmp_path if role != "file" else fifo)
        assert not blocked, f"{call.__name__} blocked on the FIFO"
        assert str(fifo) in str(error.value)
    if role == "shard":  # the message says which index named the shard, and for which tensor
        assert "model.safetensors.index.json" in str(error.value) and "'b." in str(error.value)


def test_a_device_or_an_oversized_index_is_refused_unread(tmp_path, rng, monkeypatch):
    _write_shards(tmp_path, rng)
    index = tmp_path / "model.safetensors.index.json"
    text = index.read_bytes()
    index.unlink()
    index.symlink_to("/dev/zero")  # read whole, it used to take every byte of memory
    with pytest.raises(OSError, match=f"{index} is a character device, not a regular file"):
        jask.open_safetensors(tmp_path)
    index.unlink()
    index.write_bytes(text)
    monkeypatch.setattr(jask.formats.safetensors, "MAX_INDEX_BYTES", len(text) - 1)
    with pytest.raises(ValueError, match=f"{index} is {len(text)} bytes, over Jask's limit of"):
        jask.open_safetensors(tmp_path)


A_TENSOR = '"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}'

# Headers of the wrong shape or type at every level: each a ValueError or TypeError naming the
# file (and the tensor), never a KeyError, AttributeError, IndexError or OverflowError.
WRONG_HEADERS = {
    "top-level array": ("[1]", "not a JSON object|does not start with"),
    "tensor entry a number": ('{"a": 1}', "'a': its entry must be an object"),
    "tensor entry a list": ('{"a": ["F32", [1], [0, 4]]}', "'a': its entry must be an object"),
    "no dtype": ('{"a": {"shape": [1], "data_offsets": [0, 4]}}', "'a': its entry must be"),
    "dtype a list": ('{"a": {"dtype": ["F32"], "shape": [1], "data_offsets": [0, 4]}}', "dtype"),
    "dtype null": ('{"a": {"dtype": null, "shape": [1], "data_offsets": [0, 4]}}', "dtype"),
    "shape an object": (
        '{"a": {"dtype": "F32", "shape": {"0": 1}, "data_offsets": [0, 4]}}',
        "shape",
    ),
    "shape of strings": (
        '{"a": {"dtype": "F32", "shape": ["1"], "data_offsets": [0, 4]}}',
        "shape",
    ),
    "shape of bools": ('{"a": {"dtype": "F32", "shape": [true], "data_offsets": [0, 4]}}', "shape"),
    "offsets a number": (
        '{"a": {"dtype": "F32", "shape": [1], "data_offsets": 4}}',
        "data_offsets",
    ),
    "one offset": ('{"a": {"dtype": "F32", "shape": [1], "data_offsets": [4]}}', "data_offsets"),
    "offsets -0": (
        '{"a": {"dtype": "F32", "shape": [1], "data_offsets": [-0, 4]}}',
        "data_offsets",
    ),
    "offset 2**64": (
        '{"a": {"dtype": "F32", "shape": [1], "data_offsets": [18446744073709551616, 4]}}',
        "18446744073709551616",
    ),
    "dim of 5000 digits": (
        '{"a": {"dtype": "F32", "shape": [' + "9" * 5000 + '], "data_offsets": [0, 4]}}',
        "out of the range of a float64",
    ),
    "dims past 2**63": (
        '{"a": {"dtype": "F32", "shape": [' + "4, " * 40 + '0], "data_offsets": [0, 0]}}',
        "more than the 9223372036854775807 bytes",
    ),
    "NaN": ('{"__metadata__": {}, ' + A_TENSOR[:-1] + ', "x": NaN}}', "holds NaN"),
    "1e400": ("{" + A_TENSOR[:-1] + ', "x": 1e400}}', "1e400, out of the range"),
    "lone surrogate": (
        '{"\\ud800": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}',
        "surrogate",
    ),
    "duplicate name": ("{" + A_TENSOR + ", " + A_TENSOR + "}", "names 'a' twice"),
    "metadata a list": ('{"__metadata__": ["x"], ' + A_TENSOR + "}", "__metadata__ must map"),
    "metadata value null": ('{"__metadata__": {"k": null}, ' + A_TENSOR + "}", "__metadata__ must"),
    "nested 128 deep": ("{" + A_TENSOR[:-1] + ', "x": ' + "[" * 126 + "]" * 126 + "}}", "deeper"),
    "nested 10**5 deep": ('{"a": ' + "[" * 10**5 + "]" * 10**5 + "}", "deeper than the 127 levels"),
    "gap": (
        '{"a": {"dtype": "F32", "shape": [0], "data_offsets": [2, 2]}, '
        '"b": {"dtype": "BOOL", "shape": [2], "data_offsets": [0, 2]}, '
        '"c": {"dtype": "BOOL", "shape": [1], "data_offsets": [3, 4]}}',
        "'c' starts at byte 3 .* end at 2; safetensors allows no gap",
    ),
    "bytes after the last tensor": (
        '{"a": {"dtype": "BOOL", "shape": [3], "data_offsets": [0, 3]}}',
        "end at byte 3 of the data area, which holds 4",
    ),
    "empty tensor inside another": (
        "{" + A_TENSOR + ', "e": {"dtype": "F32", "shape": [0], "data_offsets": [2, 2]}}',
        "'a' .*and 'e' .* overlap",
    ),
}

# Jask is stricter than the library here: it reads a name given twice (the last one wins), and
# (serde's derived struct reader) a tensor's entry written as a list of its fields in order.
LIBRARY_READS = {"duplicate name", "tensor entry a list"}


@pytest.mark.parametrize("case", list(WRONG_HEADERS))
def test_wrong_headers_are_refused_naming_the_file_as_the_library_refuses_them(tmp_path, case):
    text, message = WRONG_HEADERS[case]
    path = tmp_path / "m.safetensors"
    raw = text.encode()
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + bytes(4))
    for call in (jask.open_safetensors, jask.safetensors_metadata):
        with pytest.raises((ValueError, TypeError), match=message) as error:
            call(path)
        assert str(path) in str(error.value)
    if case not in LIBRARY_READS:
        with pytest.raises(Exception):  # noqa: B017 (the library's own error type)
            safetensors.numpy.load_file(str(path))


def test_json_depth_safetensors_reads_jask_reads(tmp_path):
    path = tmp_path / "m.safetensors"
    raw = ("{" + A_TENSOR[:-1] + ', "x": ' + "[" * 125 + "]" * 125 + "}}").encode()  # 127 levels
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + bytes(4))
    assert safetensors.numpy.load_file(str(path))["a"].shape == (1,)
    assert jask.open_safetensors(path)["a"].shape == (1,)


WRONG_INDEXES = {
    "not JSON": (b"{", "is not valid JSON"),
    "not UTF-8": (b'{"weight_map": {"\xff": "s"}}', "is not UTF-8"),
    "a list": (b"[]", "no 'weight_map' object"),
    "weight_map a list": (b'{"weight_map": [["a", "s"]]}', "no 'weight_map' object"),
    "weight_map null": (b'{"weight_map": null}', "no 'weight_map' object"),
    "shard a number": (b'{"weight_map": {"a": 1}}', "tensor 'a' maps to 1"),
    "shard a list": (b'{"weight_map": {"a": ["s"]}}', r"tensor 'a' maps to \['s'\]"),
    "shard ..": (b'{"weight_map": {"a": ".."}}', "tensor 'a' maps to '..'"),
    "shard in a parent": (b'{"weight_map": {"a": "../m.safetensors"}}', "not the name of a file"),
    "shard absolute": (b'{"weight_map": {"a": "/dev/zero"}}', "'/dev/zero', which is not"),
    "shard with NUL": (b'{"weight_map": {"a": "s\\u0000"}}', "maps to 's\\\\x00'"),
    "duplicate tensor": (b'{"weight_map": {"a": "s", "a": "t"}}', "names 'a' twice"),
    "nested 10**5 deep": (b'{"weight_map": ' + b"[" * 10**5 + b"]" * 10**5 + b"}", "deeper"),
    "NaN": (b'{"metadata": {"total_size": NaN}, "weight_map": {}}', "holds NaN"),
}


@pytest.mark.parametrize("case", list(WRONG_INDEXES))
def test_wrong_indexes_are_value_errors_naming_the_index(tmp_path, case):
    text, message = WRONG_INDEXES[case]
    index = tmp_path / "model.safetensors.index.json"
    index.write_bytes(text)
    with pytest.raises(ValueError, match=message) as error:
        jask.open_safetensors(tmp_path)
    assert str(index) in str(error.value)


def test_a_shard_that_is_a_folder_or_a_dangling_link_is_refused_naming_it(tmp_path, rng):
    _write_shards(tmp_path, rng)
    shard = tmp_path / "model-00003-of-00003.safetensors"
    shard.unlink()
    shard.mkdir()
    with pytest.raises(OSError, match=f"of tensor .c., by .*index.json\\) {shard} is a folder"):
        jask.open_safetensors(tmp_path)
    shard.rmdir()
    shard.symlink_to(tmp_path / "gone.safetensors")
    with pytest.raises(ValueError, match=f"puts tensor 'c' in .*, but {shard} does not exist"):
        jask.open_safetensors(tmp_path)
    shard.unlink()
    shard.symlink_to("model-00001-of-00003.safetensors")  # a link within the folder is followed
    with pytest.raises(ValueError, match="puts tensor 'c' in .*, which does not hold it"):
        jask.open_safetensors(tmp_path)


# -- saving ---------------------------------------------------------------------------


def test_save_writes_what_safe_open_reads_from_disk_and_memory_leaves(tmp_path, rng, small_budget):
    small_budget("8KB")
    sample = _sample(rng)
    big = rng.standard_normal((301, 29)).astype(np.float32)
    tree = {
        "layers": [
            {"w": jask.DiskArray.from_numpy(sample["w32"]), "b": jnp.asarray(sample["w16"])},
            {"w": jask.DiskArray.from_numpy(sample["wbf"]), "mask": sample["mask"]},
        ],
        "head": {"w": sample["w64"], "idx": jask.DiskArray.from_numpy(sample["idx"])},
        "empty": sample["empty"],
        "big": jask.DiskArray.from_numpy(big),  # many blocks, at an offset not 4096-aligned
    }
    want = {
        "layers.0.w": sample["w32"],
        "layers.0.b": sample["w16"],
        "layers.1.w": sample["wbf"],
        "layers.1.mask": sample["mask"],
        "head.w": sample["w64"],
        "head.idx": sample["idx"],
        "empty": sample["empty"],
        "big": big,
    }
    path = tmp_path / "out.safetensors"
    jask.save_safetensors(path, tree, metadata={"format": "pt"})
    n, header = _header(path)
    assert (8 + n) % 4096 == 0 and header["big"]["data_offsets"][0] % 4096 != 0
    _assert_same(_safe_open_all(path), want)
    with safe_open(str(path), "np") as f:
        assert f.metadata() == {"format": "pt"}
    _assert_same(safetensors.numpy.load_file(str(path)), want)
    _assert_same(jask.open_safetensors(path), _in_jax_dtypes(want))
    assert os.listdir(tmp_path) == ["out.safetensors"]  # no temporary file left

    jask.save_safetensors(path, {"x": np.ones(3, np.float32)})  # over its own kind of file
    _assert_same(_safe_open_all(path), {"x": np.ones(3, np.float32)})


@jax.enable_x64(True)  # float64 tensors stay float64
def test_save_a_tree_of_safetensors_arrays_over_their_own_file(tmp_path, rng):
    path = tmp_path / "m.safetensors"
    want = _sample(rng)
    safetensors.numpy.save_file(want, str(path))
    jask.save_safetensors(path, jask.open_safetensors(path))
    _assert_same(_safe_open_all(path), want)


def test_save_sharded_by_max_shard_size(tmp_path, rng):
    tensors = {f"l{i}.w": rng.standard_normal((10, 25)).astype(np.float32) for i in range(5)}
    tensors["l4.w"] = jask.DiskArray.from_numpy(tensors["l4.w"])
    want = {k: np.asarray(v) for k, v in tensors.items()}
    folder = tmp_path / "ckpt"
    jask.save_safetensors(folder, tensors, max_shard_size="2KB", metadata={"format": "pt"})
    shards = sorted(p.name for p in folder.glob("*.safetensors"))
    assert shards == [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)]
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    assert index["metadata"]["total_size"] == 5 * 1000
    read = {}
    for shard in shards:
        read |= _safe_open_all(folder / shard)
        with safe_open(str(folder / shard), "np") as f:
            assert f.metadata() == {"format": "pt"}
        assert set(k for k, v in index["weight_map"].items() if v == shard) == set(
            _safe_open_all(folder / shard)
        )
    _assert_same(read, want)
    _assert_same(jask.open_safetensors(folder), want)

    jask.save_safetensors(folder, {"only": want["l0.w"]}, max_shard_size=10**6)  # fewer shards
    assert sorted(p.name for p in folder.iterdir()) == [
        "model-00001-of-00001.safetensors",
        "model.safetensors.index.json",
    ]
    _assert_same(jask.open_safetensors(folder), {"only": want["l0.w"]})


def test_a_failed_save_leaves_the_old_file_and_no_temporary_one(tmp_path, rng, monkeypatch):
    path = tmp_path / "m.safetensors"
    jask.save_safetensors(path, {"x": np.ones(3, np.float32)})
    before = path.read_bytes()

    def fail(*args):
        raise OSError("no space left (injected)")

    monkeypatch.setattr(_engine, "save_into", fail)
    tree = {"x": np.zeros(3, np.float32), "y": jask.DiskArray.from_numpy(np.zeros(5, np.float32))}
    with pytest.raises(OSError, match="injected"):
        jask.save_safetensors(path, tree)
    with pytest.raises(OSError, match="injected"):
        jask.save_safetensors(tmp_path / "ckpt", tree, max_shard_size=12)
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["ckpt", "m.safetensors"]
    assert os.listdir(tmp_path / "ckpt") == []


def test_save_refuses_what_it_cannot_write(tmp_path):
    foreign = tmp_path / "notes.txt"
    foreign.write_text("not a tensor file")
    with pytest.raises(FileExistsError, match="notes.txt exists and is not a safetensors file"):
        jask.save_safetensors(foreign, {"x": np.ones(2, np.float32)})
    assert foreign.read_text() == "not a tensor file"
    # complex128: Jask stores it, safetensors has no name for it; int4: Jask does not store it.
    for dtype in (np.complex128, ml_dtypes.int4):
        name = np.dtype(dtype).name
        with pytest.raises(TypeError, match=f"'x' of shape \\(2,\\) has dtype {name}, which Jask"):
            jask.save_safetensors(tmp_path / "a.safetensors", {"x": np.ones(2, dtype)})
    with pytest.raises(ValueError, match="both named 'a.b'"):
        jask.save_safetensors(
            tmp_path / "a.safetensors", {"a.b": np.ones(1), "a": {"b": np.ones(1)}}
        )
    with pytest.raises(TypeError, match="metadata must map strings to strings"):
        jask.save_safetensors(tmp_path / "a.safetensors", {"x": np.ones(1)}, metadata={"n": 1})
    with pytest.raises(ValueError, match="max_shard_size"):
        jask.save_safetensors(tmp_path / "d", {"x": np.ones(1)}, max_shard_size="5 parsecs")
    assert sorted(os.listdir(tmp_path)) == ["notes.txt"]


def test_saving_a_chunked_array_decodes_each_chunk_once_within_the_budget(tmp_path, small_budget):
    """save_into reserves the source's decode cache, as every engine call reading it does."""
    values = np.arange(100 * 64, dtype=np.float32).reshape(100, 64)
    jask.DiskArray.from_numpy(values).to_zarr(tmp_path / "x.zarr", chunks=(16, 16))
    x = jask.open_zarr(tmp_path / "x.zarr")
    small_budget("32KB")
    before = jask._engine.chunks_decoded(x.handle)
    jask.save_safetensors(tmp_path / "x.safetensors", {"x": x})
    assert jask._engine.chunks_decoded(x.handle) - before == 7 * 4  # a grid of (7, 4) chunks
    with safe_open(str(tmp_path / "x.safetensors"), "np") as f:
        np.testing.assert_array_equal(f.get_tensor("x"), values)
