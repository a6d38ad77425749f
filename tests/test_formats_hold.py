"""Arrays opened from every format are DiskArrays like any other: ops eager and jitted, gradients,
an optax step, fusion and row groups, all within the budget."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from test_fusion import kernels
from test_memory_bound import FAMILIES, _held_by

import jask

from conftest import DEFAULT_BUDGET, assert_close

ROWS, COLS = 531, 229  # no multiple of the chunk shapes below
BUDGET = 256 << 10
FAMILY_NAMES = [
    "elementwise",
    "sum_axis0",
    "max_axis1",
    "cumsum_axis0",
    "sort_axis1",
    "matmul_in_memory_w",
    "xT_y",
    "gather_rows",
    "strided_slice",
    "update_slice",
]


def _write(kind, folder, xn, yn):
    """x and y in a file of format `kind` under `folder`, opened with Jask."""
    if kind == "npy":
        for n, a in (("x", xn), ("y", yn)):
            np.save(folder / f"{n}.npy", a)
        return {n: jask.DiskArray.open(folder / f"{n}.npy") for n in "xy"}
    if kind == "safetensors":
        from safetensors.numpy import save_file

        save_file({"x": xn, "y": yn}, str(folder / "m.safetensors"))
        return jask.open_safetensors(folder / "m.safetensors")
    if kind == "zarr-zstd":
        import zarr

        out = {}
        for n, a in (("x", xn), ("y", yn)):
            z = zarr.create_array(
                store=str(folder / f"{n}.zarr"),
                shape=a.shape,
                chunks=(64, 100),
                dtype=a.dtype,
                compressors=zarr.codecs.ZstdCodec(level=1),
            )
            z[...] = a
            out[n] = jask.open_zarr(folder / f"{n}.zarr")
        return out
    if kind in ("hdf5-contiguous", "hdf5-gzip"):
        import h5py

        with h5py.File(folder / "d.h5", "w") as f:
            for n, a in (("x", xn), ("y", yn)):
                if kind == "hdf5-gzip":
                    f.create_dataset(n, data=a, chunks=(20, 229), compression="gzip", shuffle=True)
                else:
                    f.create_dataset(n, data=a)
        return {n: jask.open_hdf5(folder / "d.h5", n) for n in "xy"}
    if kind in ("npz-stored", "npz-deflated"):
        save = np.savez if kind == "npz-stored" else np.savez_compressed
        save(folder / "d.npz", x=xn, y=yn)
        return jask.open_npz(folder / "d.npz")
    raise AssertionError(kind)


KINDS = [
    "npy",
    "safetensors",
    "zarr-zstd",
    "hdf5-contiguous",
    "hdf5-gzip",
    "npz-stored",
    "npz-deflated",
]


@pytest.fixture(scope="module", params=KINDS)
def data(request, tmp_path_factory):
    rng = np.random.default_rng(7)
    xn = rng.standard_normal((ROWS, COLS), dtype=np.float32)
    yn = rng.standard_normal((ROWS, COLS), dtype=np.float32)
    w = rng.standard_normal((COLS, 13), dtype=np.float32)
    idx = rng.integers(0, ROWS, 97)
    opened = _write(request.param, tmp_path_factory.mktemp(request.param), xn, yn)
    arrays = dict(x=opened["x"], y=opened["y"], w=jnp.asarray(w), idx=jnp.asarray(idx))
    in_memory = dict(x=jnp.asarray(xn), y=jnp.asarray(yn), w=jnp.asarray(w), idx=jnp.asarray(idx))
    jask.set_memory_budget(BUDGET)
    yield arrays, in_memory
    jask.set_memory_budget(DEFAULT_BUDGET)


def test_opened_arrays_are_diskarrays_with_the_files_values(data):
    arrays, in_memory = data
    for n in "xy":
        assert isinstance(arrays[n], jask.DiskArray) and isinstance(arrays[n], jax.Array)
        assert arrays[n].dtype == jnp.float32 and arrays[n].shape == (ROWS, COLS)
        np.testing.assert_array_equal(np.asarray(arrays[n]), np.asarray(in_memory[n]))


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_op_families_within_the_budget(data, family):
    """Jitted (eager calls read through the same readers: tests/test_memory_bound.py)."""
    arrays, in_memory = data
    run = FAMILIES[family]
    fn = jax.jit(lambda a: run(a))
    held = _held_by(fn, arrays)
    jask.reset_memory_peak()
    out = fn(arrays)
    jax.block_until_ready(out)
    peak = jask.memory_stats()["blocks_peak"]
    want = np.asarray(run(in_memory))
    got = np.asarray(out)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3 * max(1.0, np.abs(want).max()))
    assert 0 < peak <= BUDGET - min(held, BUDGET // 2)


def loss(w, x, y):
    return jnp.mean(jnp.square(jnp.tanh(x @ w) - y[:, :13]))


def test_gradients_and_an_optax_step(data):
    arrays, in_memory = data
    w = in_memory["w"]
    got = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))(w, arrays["x"], arrays["y"])
    want = jax.value_and_grad(loss, argnums=(0, 1))(w, in_memory["x"], in_memory["y"])
    assert_close(got[0], want[0], rtol=1e-4)
    assert_close(got[1][0], want[1][0], rtol=1e-4)
    assert isinstance(got[1][1], jask.DiskArray)  # the gradient w.r.t. a file's array is on disk
    assert_close(np.asarray(got[1][1]), want[1][1], rtol=1e-4)
    opt = optax.adam(1e-2)
    params = {"x": arrays["x"]}
    state = opt.init(params)
    g = {"x": got[1][1]}
    updates, state = jax.jit(opt.update)(g, state, params)
    new = optax.apply_updates(params, updates)
    ref_opt_state = opt.init({"x": in_memory["x"]})
    ref_updates, _ = opt.update({"x": want[1][1]}, ref_opt_state, {"x": in_memory["x"]})
    assert isinstance(new["x"], jask.DiskArray)
    assert_close(np.asarray(new["x"]), in_memory["x"] + ref_updates["x"], rtol=1e-4)


def test_elementwise_chains_fuse_into_one_pass(data):
    arrays, in_memory = data
    f = lambda x, y: jnp.sum(jnp.square(x - y))  # noqa: E731
    assert kernels(f, arrays["x"], arrays["y"]) == ["map_reduce/sub+square+sum"]
    assert_close(jax.jit(f)(arrays["x"], arrays["y"]), f(in_memory["x"], in_memory["y"]))


def test_the_seed_gradient_is_one_row_group(data):
    arrays, in_memory = data
    rng = np.random.default_rng(3)
    b, c = (jnp.asarray(rng.uniform(-1, 1, s).astype(np.float32)) for s in [(COLS, 11), (11, 3)])
    tn = rng.uniform(-1, 1, (ROWS, 3)).astype(np.float32)
    t, td = jnp.asarray(tn), jask.DiskArray.from_numpy(tn)
    seed = lambda a, b, c, t: jnp.sum(jnp.square(a @ b @ c - t))  # noqa: E731
    grad_fn = jax.value_and_grad(seed, argnums=(0, 1, 2))
    # one pass over the tall operands computes the loss and every gradient
    groups = [k for k in kernels(grad_fn, arrays["x"], b, c, td) if k.startswith("row_group/")]
    assert len(groups) == 1 and groups[0].count("matmul") == 6, groups
    value, grads = jax.jit(grad_fn)(arrays["x"], b, c, td)
    want_value, want_grads = grad_fn(in_memory["x"], b, c, t)
    assert_close(value, want_value, rtol=1e-4)
    for g, e in zip(grads, want_grads):
        assert_close(np.asarray(g), e, rtol=1e-4)
