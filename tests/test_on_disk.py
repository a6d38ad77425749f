"""jask.on_disk (jask/_api/on_disk.py): arrays larger than the budget made straight to disk by
jax.random, jax.nn.initializers, jnp constructors, flax nnx and equinox, each a DiskArray
bitwise equal to (and of the dtype of) the same function's result on jax.Arrays in memory, at a
16KB budget (hundreds of blocks), eagerly and under jit; what is refused, and that making a
4 MiB array at a 64KB budget holds no more than the budget."""

import os
import subprocess
import sys
import textwrap

import equinox as eqx
import flax.nnx as nnx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jask

from conftest import DEFAULT_BUDGET

SHAPE = (1003, 37)  # 145 KiB of float32: no multiple of any block


@pytest.fixture(autouse=True)
def budget_16kb():
    jask.set_memory_budget("16KB")
    yield
    jask.set_memory_budget(DEFAULT_BUDGET)


def bits(x) -> np.ndarray:
    """The bytes of an array (bitwise equality, NaNs and signed zeros included)."""
    a = np.asarray(jask.materialize(x) if isinstance(x, jask.DiskArray) else x)
    return np.ascontiguousarray(a).view(np.uint8)


def assert_same(actual, expected, large=None):
    """Equal trees: each leaf with the expected dtype, shape and bytes; leaves larger than the
    allowance (half the budget) DiskArrays, the others in memory."""
    actual_leaves = jax.tree.leaves(actual)
    expected_leaves = jax.tree.leaves(expected)
    assert len(actual_leaves) == len(expected_leaves)
    for a, e in zip(actual_leaves, expected_leaves):
        assert a.dtype == e.dtype, (a.dtype, e.dtype)
        assert a.shape == e.shape, (a.shape, e.shape)
        on_disk = a.nbytes > jask.memory_budget() // 2 if large is None else large
        assert isinstance(a, jask.DiskArray) == on_disk, (type(a), a.shape, a.dtype)
        np.testing.assert_array_equal(bits(a), bits(e))


KEYS = {"typed": lambda: jax.random.key(7), "legacy": lambda: jax.random.PRNGKey(7)}

RANDOM = {
    "uniform": lambda k: jax.random.uniform(k, SHAPE),
    "uniform_bf16": lambda k: jax.random.uniform(k, SHAPE, jnp.bfloat16, -2.0, 3.0),
    "normal": lambda k: jax.random.normal(k, SHAPE),
    "truncated_normal_bf16": lambda k: jax.random.truncated_normal(k, -2, 2, SHAPE, jnp.bfloat16),
    "randint": lambda k: jax.random.randint(k, SHAPE, -5, 1000),
    "bernoulli": lambda k: jax.random.bernoulli(k, 0.3, SHAPE),
    "bits_uint8": lambda k: jax.random.bits(k, (5003, 7), jnp.uint8),
    "scaled_normal_plus": lambda k: jax.random.normal(k, SHAPE) * 0.02 + 1.0,
    "vector": lambda k: jax.random.normal(k, (9001,)),
    "rank3": lambda k: jax.random.uniform(k, (301, 7, 5)),
}


@pytest.mark.parametrize("key", list(KEYS))
@pytest.mark.parametrize("name", list(RANDOM))
def test_random_arrays_equal_jax_random_bitwise(name, key):
    fn, k = RANDOM[name], KEYS[key]()
    made = jask.on_disk(fn)(k)
    assert isinstance(made, jask.DiskArray)
    assert_same(made, fn(k))


@pytest.mark.parametrize("name", ["normal", "uniform_bf16", "bits_uint8"])
def test_threefry_partitionable_off(name):
    fn, k = RANDOM[name], jax.random.PRNGKey(11)
    with jax.threefry_partitionable(False):
        made = jask.on_disk(fn)(k)
        expected = fn(k)
    assert_same(made, expected, large=True)
    with jax.threefry_partitionable(True):
        assert not np.array_equal(bits(made), bits(fn(k)))  # the flag changes the values


@pytest.mark.parametrize("partitionable", [True, False])
def test_64_bit_random_bits(x64, partitionable):
    fn = lambda k: jax.random.bits(k, (701, 5), jnp.uint64)  # noqa: E731
    with jax.threefry_partitionable(partitionable):
        made, expected = jask.on_disk(fn)(jax.random.key(3)), fn(jax.random.key(3))
    assert expected.dtype == jnp.uint64
    assert_same(made, expected, large=True)


def test_static_shapes_as_arguments_and_small_values_in_memory():
    fn = lambda k, n, d: jax.random.normal(k, (n, d))  # noqa: E731
    k = jax.random.key(0)
    assert_same(jask.on_disk(fn)(k, 1003, 37), fn(k, 1003, 37))
    small = jask.on_disk(fn)(k, 4, 5)
    assert not isinstance(small, jask.DiskArray)
    assert_same(small, fn(k, 4, 5))


CONSTRUCTORS = {
    "zeros_bf16": lambda: jnp.zeros(SHAPE, jnp.bfloat16),
    "ones_int32": lambda: jnp.ones(SHAPE, jnp.int32),
    "full": lambda: jnp.full(SHAPE, -3.5),
    "arange": lambda: jnp.arange(20000) * 2.0,
    "eye": lambda: jnp.eye(300, dtype=jnp.float32),
    "broadcast_rows": lambda: jnp.broadcast_to(jnp.arange(37.0), SHAPE) + 1.0,
}


@pytest.mark.parametrize("name", list(CONSTRUCTORS))
def test_jnp_constructors(name):
    fn = CONSTRUCTORS[name]
    assert_same(jask.on_disk(fn)(), fn())


def test_under_jit():
    """Inside jit the blocks are one program, as jit(fn) is in memory: XLA contracts the
    multiply and the add into one rounding in both (eagerly JAX rounds twice, and so does
    on_disk: test_random_arrays_equal_jax_random_bitwise[scaled_normal_plus-*])."""
    fn = lambda k: jax.random.normal(k, SHAPE) * 0.02 + 1.0  # noqa: E731
    k = jax.random.key(5)
    made = jax.jit(jask.on_disk(fn))(k)
    assert isinstance(made, jask.DiskArray)
    assert_same(made, jax.jit(fn)(k))
    assert not np.array_equal(bits(made), bits(fn(k)))  # the eager values differ (FMA)

    @jax.jit
    def step(k):  # on_disk inside a larger program, then an op on its DiskArray
        table = jask.on_disk(lambda k: jax.random.uniform(k, SHAPE))(k)
        return table, jnp.sum(table, axis=0)

    table, sums = step(k)
    assert_same(table, jax.random.uniform(k, SHAPE))
    np.testing.assert_allclose(sums, jnp.sum(jax.random.uniform(k, SHAPE), axis=0), rtol=1e-5)


def test_a_diskarray_argument_is_read_in_blocks():
    x_host = np.arange(np.prod(SHAPE), dtype=np.float32).reshape(SHAPE)
    fn = lambda k, x: x * 2 + jax.random.normal(k, x.shape)  # noqa: E731
    k = jax.random.key(2)
    assert_same(jask.on_disk(fn)(k, jask.DiskArray.from_numpy(x_host)), fn(k, jnp.asarray(x_host)))


def test_operations_without_row_rules_run_on_the_diskarray():
    def fn(k):
        x = jax.random.normal(k, SHAPE)
        return x / jnp.linalg.norm(x), jnp.mean(x, axis=0)  # a reduction, then an elementwise op

    k = jax.random.key(4)
    unit, mean = jask.on_disk(fn)(k)
    expected_unit, expected_mean = fn(k)
    assert isinstance(unit, jask.DiskArray) and not isinstance(mean, jask.DiskArray)
    np.testing.assert_allclose(jask.materialize(unit), expected_unit, rtol=2e-6, atol=1e-9)
    np.testing.assert_allclose(mean, expected_mean, rtol=1e-5, atol=1e-7)


def test_initializer_params():
    init = jax.nn.initializers

    def params(k):
        k1, k2, k3, k4 = jax.random.split(k, 4)
        return {
            "dense": {
                "w": init.lecun_normal()(k1, SHAPE),
                "b": init.zeros(k1, (37,)),
            },
            "conv_like": init.he_uniform()(k2, (2000, 3, 3), jnp.bfloat16),
            "embed": init.normal(0.02)(k3, (5000, 16)),
            "ones": init.ones(k4, (3000, 4), jnp.int32),
        }

    k = jax.random.key(9)
    made = jask.on_disk(params)(k)
    assert not isinstance(made["dense"]["b"], jask.DiskArray)
    assert_same(made, params(k))


def test_orthogonal_initializer_is_refused():
    """orthogonal needs a QR of the whole matrix, which neither a row rule nor the DiskArray
    route computes past the budget."""
    with pytest.raises(NotImplementedError, match="qr"):
        jask.on_disk(lambda k: jax.nn.initializers.orthogonal()(k, SHAPE))(jax.random.key(0))


def test_permutation_sorts_on_disk():
    """permutation is a sort of random keys: the lazy keys are written, Jask's sort runs."""
    fn = lambda k: jax.random.permutation(k, 3000)  # noqa: E731
    assert_same(jask.on_disk(fn)(jax.random.key(1)), fn(jax.random.key(1)))


def test_refusals_name_what_and_why():
    k = jax.random.key(0)
    with pytest.raises(NotImplementedError, match="random_split.*key<fry>\\[5000\\]"):
        jask.on_disk(lambda k: jax.random.split(k, 5000))(k)
    with pytest.raises(NotImplementedError, match="'rbg' generator"):
        jask.on_disk(lambda k: jax.random.normal(k, SHAPE))(jax.random.key(0, impl="rbg"))
    with pytest.raises(NotImplementedError, match="one row of float32\\[4, 100000\\]"):
        jask.on_disk(lambda k: jax.random.normal(k, (4, 100000)))(k)
    with pytest.raises(NotImplementedError, match="jax.grad through jask.on_disk"):
        jax.grad(
            lambda s: jnp.sum(jask.on_disk(lambda k, s: s * jax.random.normal(k, SHAPE))(k, s))
        )(2.0)


def test_flax_nnx_modules():
    made = jask.on_disk(lambda: nnx.Linear(1003, 37, rngs=nnx.Rngs(0)))()
    expected = nnx.Linear(1003, 37, rngs=nnx.Rngs(0))
    assert isinstance(made.kernel.get_value(), jask.DiskArray)
    assert_same(made, expected)
    x = jnp.linspace(-1, 1, 2 * 1003, dtype=jnp.float32).reshape(2, 1003)
    np.testing.assert_allclose(made(x), expected(x), rtol=1e-5, atol=1e-6)

    # Rngs passed in advance as nnx.jit would advance them: a second table differs, as in memory
    made_rngs, expected_rngs = nnx.Rngs(params=3), nnx.Rngs(params=3)
    make_embed = jask.on_disk(lambda rngs: nnx.Embed(5000, 16, rngs=rngs))
    for _ in range(2):
        made, expected = make_embed(made_rngs), nnx.Embed(5000, 16, rngs=expected_rngs)
        assert isinstance(made.embedding.get_value(), jask.DiskArray)
        assert_same(made, expected)
    assert (
        int(made_rngs.params.count.get_value()) == int(expected_rngs.params.count.get_value()) == 2
    )
    np.testing.assert_array_equal(made(jnp.array([0, 4999, 7])), expected(jnp.array([0, 4999, 7])))


def test_equinox_modules():
    k = jax.random.key(6)
    made = jask.on_disk(lambda k: eqx.nn.Linear(37, 1003, key=k))(k)
    assert isinstance(made.weight, jask.DiskArray)
    assert_same(made, eqx.nn.Linear(37, 1003, key=k))

    made = jask.on_disk(lambda k: eqx.nn.MLP(300, 10, 200, 1, key=k))(k)
    expected = eqx.nn.MLP(300, 10, 200, 1, key=k)
    assert made.activation is expected.activation
    assert isinstance(made.layers[0].weight, jask.DiskArray)  # 200x300; the 10x200 in memory
    assert_same(eqx.filter(made, eqx.is_array), eqx.filter(expected, eqx.is_array))
    x = jnp.linspace(-1, 1, 300, dtype=jnp.float32)
    np.testing.assert_allclose(made(x), expected(x), rtol=1e-5, atol=1e-6)


# The peak resident memory of a child process while it makes a 4 MiB array at a 64KB budget,
# from the kernel's high-water mark (reset through /proc/self/clear_refs after a warm-up that
# compiles everything). glibc's mmap threshold is fixed, so an allocation of a whole array maps
# new pages and shows: the control, materializing the result, grows by the array.
MEMORY_CHILD = textwrap.dedent(
    """
    import json, jax, numpy as np, jask

    def status(field):
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024

    def growth(make):
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        before = status("VmRSS")
        made = make()
        made.block_until_ready()
        return status("VmHWM") - before, made

    jask.set_memory_budget("64KB")
    fn = lambda k: jax.random.normal(k, (1024, 1024)) * 0.02
    eager, jitted = jask.on_disk(fn), jax.jit(jask.on_disk(fn))
    for k in (0, 1):  # compiles, caches
        eager(jax.random.key(k)).block_until_ready()
        jitted(jax.random.key(k)).block_until_ready()
    jask.reset_memory_peak()
    eager_growth, made = growth(lambda: eager(jax.random.key(2)))
    jit_growth, _ = growth(lambda: jitted(jax.random.key(2)))
    blocks_peak = jask.memory_stats()["blocks_peak"]
    control, host = growth(lambda: jax.numpy.asarray(np.asarray(made)))
    same = bool(np.array_equal(host, fn(jax.random.key(2))))
    print(json.dumps(dict(eager=eager_growth, jit=jit_growth, blocks_peak=blocks_peak,
                          control=control, same=same, nbytes=made.nbytes)))
    """
)


def test_a_4mib_array_at_a_64kb_budget_holds_no_more_than_the_budget(tmp_path):
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pytest.skip("the kernel's peak RSS cannot be reset here (/proc/self/clear_refs)")
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="131072", JAX_PLATFORMS="cpu")
    out = subprocess.run(
        [sys.executable, "-c", MEMORY_CHILD],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    import json

    report = json.loads(out.stdout.strip().splitlines()[-1])
    budget = 64 * 1024
    assert report["nbytes"] == 4 * 1024 * 1024 and report["same"], report
    assert report["control"] >= report["nbytes"], report  # the measure sees a whole array
    assert report["eager"] <= budget, report
    assert report["jit"] <= budget, report
    assert report["blocks_peak"] <= budget, report
