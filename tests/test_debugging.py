"""jax.debug.print and jax.debug.callback with DiskArrays, eagerly and inside jax.jit."""

import gc
import os

import jax
import jax.numpy as jnp
import numpy as np

import jask


def disk(values):
    return jask.DiskArray.from_numpy(np.asarray(values, np.float32))


def printed(capfd) -> list[str]:
    jax.effects_barrier()
    return capfd.readouterr().out.splitlines()


def test_debug_print_shows_the_values_eagerly_and_in_jit(capfd):
    x = disk([0, 1, 2, 3])
    jax.debug.print("x={x} twice={}", x * 2.0, x=x)
    out = jax.jit(lambda a: (jax.debug.print("jit {a}", a=a + 1.0), a * 2.0)[1])(x)
    assert printed(capfd) == ["x=[0. 1. 2. 3.] twice=[0. 2. 4. 6.]", "jit [1. 2. 3. 4.]"]
    np.testing.assert_array_equal(np.asarray(out), [0, 2, 4, 6])


def test_an_ordered_debug_print_in_a_jitted_scan(capfd):
    def step(c, i):
        jax.debug.print("step {i}: {c}", i=i, c=c, ordered=True)
        return c + 1.0, None

    f = jax.jit(lambda x: jax.lax.scan(step, x, jnp.arange(3))[0])
    out = f(disk([0, 10]))
    assert printed(capfd) == ["step 0: [ 0. 10.]", "step 1: [ 1. 11.]", "step 2: [ 2. 12.]"]
    np.testing.assert_array_equal(np.asarray(out), [3, 13])


def test_a_callback_receives_the_concrete_disk_array():
    seen = []

    def look(x, total):
        assert isinstance(x, jask.DiskArray)
        seen.append((x.shape, x.dtype, np.asarray(x).tolist(), float(total)))

    x = disk([[1, 2], [3, 4]])
    jax.debug.callback(look, x, jnp.sum(jnp.ones(2)))
    jax.jit(lambda a: (jax.debug.callback(look, a * 3.0, jnp.sum(a)), a)[1])(x)
    jax.effects_barrier()
    assert seen == [
        ((2, 2), np.float32, [[1, 2], [3, 4]], 2.0),
        ((2, 2), np.float32, [[3, 6], [9, 12]], 10.0),
    ]


def test_a_disk_array_kept_by_a_callback_stays_valid():
    kept = []
    jax.jit(lambda a: (jax.debug.callback(kept.append, a * 2.0), a)[1])(disk([1, 2]))
    jax.effects_barrier()
    gc.collect()
    np.testing.assert_array_equal(np.asarray(kept[0]), [2, 4])


def test_an_array_above_the_budget_prints_as_its_description(capfd, small_budget):
    x = disk(np.zeros(4096))
    small_budget("4KB")
    jax.jit(lambda a: (jax.debug.print("{}", a), a)[1])(x)
    (line,) = printed(capfd)
    assert line.startswith("DiskArray(shape=(4096,), dtype=float32, file=")


def test_printing_a_loop_carry_keeps_one_carry(capfd):
    def step(c, _):
        jax.debug.print("{}", c)
        return c + 1.0, None

    f = jax.jit(lambda x: jax.lax.scan(step, x, None, length=200)[0])
    x = disk([0])
    scratch = jask.scratch_dir()
    gc.collect()
    before = len(os.listdir(scratch)), len(os.listdir("/proc/self/fd"))
    np.testing.assert_array_equal(np.asarray(f(x)), [200])
    lines = printed(capfd)
    gc.collect()
    after = len(os.listdir(scratch)), len(os.listdir("/proc/self/fd"))
    assert lines[0] == "[0.]" and lines[-1] == "[199.]" and len(lines) == 200
    assert after[0] - before[0] <= 4 and after[1] - before[1] <= 4


def test_debug_print_under_grad(capfd):
    x = disk([1, 2])
    g = jax.grad(lambda a: (jax.debug.print("{}", a), jnp.sum(a * a))[1])(x)
    assert printed(capfd) == ["[1. 2.]"]
    np.testing.assert_array_equal(np.asarray(g), [2, 4])


def test_a_callback_may_run_jitted_programs_on_what_it_receives():
    f = jax.jit(lambda a: a + 1.0)
    results = []
    jax.jit(lambda a: (jax.debug.callback(lambda v: results.append(f(v)), a * 2.0), a)[1])(
        disk([1, 2])
    )
    jax.effects_barrier()
    np.testing.assert_array_equal(np.asarray(results[0]), [3, 5])
