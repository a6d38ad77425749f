"""How long the files of DiskArrays live: temporaries passed to programs, loop carries."""

import gc
import os
import threading

import jax
import jax.numpy as jnp
import numpy as np

import jask


def ones(n=4):
    return jask.DiskArray.from_numpy(np.ones(n, np.float32))


def open_files_and_scratch() -> tuple[int, int]:
    gc.collect()
    jax.effects_barrier()
    # Freed files the scratch pool keeps for reuse (bounded by the live arrays' bytes, so by what
    # earlier tests in this process left alive) are not live arrays: they are not counted.
    live = [f for f in os.listdir(jask.scratch_dir()) if not f.startswith("recycled-")]
    return len(os.listdir("/proc/self/fd")), len(live)


def assert_bounded(before, after, slack=4):
    assert after[0] - before[0] <= slack, f"open files grew from {before[0]} to {after[0]}"
    assert after[1] - before[1] <= slack, f"scratch files grew from {before[1]} to {after[1]}"


def check(value, expected):
    value = np.asarray(value)
    assert value.dtype == np.float32
    np.testing.assert_allclose(value, expected)


# -- a temporary passed to a program ----------------------------------------------------------


def test_a_temporary_lives_until_the_program_has_run():
    # The dense product makes XLA run the program asynchronously: the call returns before the
    # program reads the temporary, whose last Python reference goes at once.
    m = jnp.ones((600, 600), jnp.float32)
    f = jax.jit(lambda m, x: (m @ m @ m, jnp.sum(x * 2.0)))
    for _ in range(3):
        _, total = f(m, ones(1000) + 1.0)
        assert total.dtype == np.float32
        assert float(total) == 4000.0


def test_a_temporary_carry_of_a_jitted_scan():
    f = jax.jit(lambda x: jax.lax.scan(lambda c, _: (c * 2.0, None), x, None, length=3)[0])
    check(f(ones() + 1.0), np.full(4, 16.0))


def test_a_jitted_program_called_with_temporaries_keeps_no_files():
    f = jax.jit(lambda x: jnp.sum(jax.lax.scan(lambda c, _: (c + 1.0, None), x, None, length=5)[0]))
    x = ones()
    f(x + 1.0)
    before = open_files_and_scratch()
    for _ in range(50):
        assert float(f(x + 1.0)) == 28.0
    assert_bounded(before, open_files_and_scratch())


# -- loop carries -------------------------------------------------------------------------------


def test_an_eager_scan_of_1000_steps_keeps_one_carry():
    x = ones()
    before = open_files_and_scratch()
    out, _ = jax.lax.scan(lambda c, _: (c + 1.0, None), x, None, length=1000)
    check(out, np.full(4, 1001.0))
    del out
    assert_bounded(before, open_files_and_scratch())
    check(x, np.ones(4))


def test_a_jitted_scan_of_1000_steps_keeps_one_carry():
    x = ones()
    f = jax.jit(lambda x: jax.lax.scan(lambda c, _: (c + 1.0, None), x, None, length=1000)[0])
    before = open_files_and_scratch()
    check(f(x), np.full(4, 1001.0))
    assert_bounded(before, open_files_and_scratch())


def test_eager_and_jitted_while_loops_keep_one_carry():
    x = ones()
    body = lambda s: (s[0] + 1, s[1] + 1.0)
    loop = lambda x: jax.lax.while_loop(lambda s: s[0] < 300, body, (0, x))[1]
    before = open_files_and_scratch()
    check(loop(x), np.full(4, 301.0))
    check(jax.jit(loop)(x), np.full(4, 301.0))
    check(jax.lax.fori_loop(0, 300, lambda i, c: c + 1.0, x), np.full(4, 301.0))
    assert_bounded(before, open_files_and_scratch())


def test_a_loop_never_frees_what_its_caller_still_reads():
    def reused_init(x):
        y = x + 1.0
        return jax.lax.scan(lambda c, _: (c * 2.0, None), y, None, length=3)[0] + y

    def constant_carry(x):
        w = x * 5.0
        return jax.lax.scan(lambda c, _: (w * 1.0, None), x * 2.0, None, length=4)[0] + w

    def constant_factor(x):
        w = x * 5.0
        return jax.lax.scan(lambda c, _: (c * w, None), x * 1.0, None, length=3)[0] + w

    def swapped(x):
        a, b = jax.lax.scan(
            lambda c, _: ((c[1], c[0] + 1.0), None), (x * 1.0, x * 2.0), None, length=3
        )[0]
        return a + b * 10.0

    def zero_trips(x):
        return jax.lax.while_loop(lambda s: s[0] < 0, lambda s: (s[0] + 1, s[1] * 2.0), (0, x))[1]

    x = ones()
    for f, expected in [
        (reused_init, 18.0),
        (constant_carry, 10.0),
        (constant_factor, 130.0),
        (swapped, 33.0),
        (zero_trips, 1.0),
    ]:
        check(jax.jit(f)(x), np.full(4, expected))
        check(jax.jit(f)(x + 0.0), np.full(4, expected))
    check(x, np.ones(4))


def test_nested_loops_keep_one_carry_each():
    inner = lambda c: jax.lax.scan(lambda d, _: (d + 1.0, None), c, None, length=4)[0]
    outer = lambda x: jax.lax.scan(lambda c, _: (inner(c), None), x, None, length=50)[0]
    x = ones()
    before = open_files_and_scratch()
    check(outer(x), np.full(4, 201.0))
    check(jax.jit(outer)(x), np.full(4, 201.0))
    assert_bounded(before, open_files_and_scratch())


def test_a_scan_with_in_memory_outputs_per_step():
    f = jax.jit(lambda x: jax.lax.scan(lambda c, _: (c + 1.0, jnp.sum(c)), x, None, length=4)[1])
    check(f(ones()), [4.0, 8.0, 12.0, 16.0])


def test_grad_of_a_loop_over_disk_arrays():
    f = lambda x: jnp.sum(jax.lax.scan(lambda c, _: (c * 2.0, None), x, None, length=3)[0])
    check(jax.grad(f)(ones()), np.full(4, 8.0))
    check(jax.jit(jax.grad(f))(ones()), np.full(4, 8.0))


def test_temporaries_passed_to_programs_from_another_thread_are_freed():
    f = jax.jit(lambda x: x + 1.0)
    x = ones()
    check(f(f(x + 1.0)), np.full(4, 4.0))
    before = open_files_and_scratch()
    worker = threading.Thread(target=lambda: [f(f(x + 1.0)) for _ in range(30)])
    worker.start()
    worker.join()
    assert_bounded(before, open_files_and_scratch())


def test_a_cond_in_a_loop_body_keeps_one_carry():
    def step(c, i):
        return jax.lax.cond(i % 2 == 0, lambda c: c * 2.0, lambda c: c - 1.0, c), None

    expected = 2.0
    for i in range(200):
        expected = expected * 2.0 if i % 2 == 0 else expected - 1.0
    x = ones()
    before = open_files_and_scratch()
    check(jax.lax.scan(step, x + 1.0, jnp.arange(200))[0], np.full(4, expected))
    loop = jax.jit(lambda x: jax.lax.scan(step, x, jnp.arange(200))[0])
    check(loop(x + 1.0), np.full(4, expected))
    branches = jax.jit(lambda x, p: jax.lax.cond(p, lambda c: c * 3.0, lambda c: c - 1.0, x) + x)
    for p, value in [(True, 8.0), (False, 3.0)] * 10:
        check(branches(x + 1.0, p), np.full(4, value))
    assert_bounded(before, open_files_and_scratch())
