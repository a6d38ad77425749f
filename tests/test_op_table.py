"""Every op registered in jask.ops.OPS is exercised by the generic op tests."""

import jax
import numpy as np
import optax
import test_transformations as generic

import jask
from jask._jax.op import Op
from jask.ops import OPS

from conftest import DEFAULT_BUDGET


def test_every_registered_op_is_covered(rng, monkeypatch):
    used = set()
    original_init = Op.__init__

    def recording_init(self, *args, **kwargs):
        used.add(type(self))
        original_init(self, *args, **kwargs)

    monkeypatch.setattr(Op, "__init__", recording_init)
    # jnp's functions are jitted: a trace cached by an earlier test would build no ops here
    jax.clear_caches()
    for case in generic.CASES:
        _, disk = generic.make_inputs(case, rng)
        loss, _ = generic.losses(case, rng)
        # traced and lowered, not run: an op is built when its program is traced (and the
        # fusion passes build theirs when it is lowered); the generic tests run them
        jax.jit(jax.grad(loss, argnums=tuple(range(len(disk))))).lower(*disk)
        jax.jit(lambda *xs, loss=loss: jax.jvp(loss, xs, xs)).lower(*disk)
    generic.test_max_and_min_reductions(rng)
    generic.test_from_numpy_of_a_traced_value_has_a_gradient(rng)
    rows_case = generic.Case(
        "rows",
        lambda x: jax.numpy.sum(x[3:40] ** 2),
        None,
        ((generic.M, generic.K),),
        scalar_out=True,
    )
    _, (x,) = generic.make_inputs(rows_case, rng)
    jax.grad(rows_case.fn)(x)
    # trigamma is only digamma's derivative (no derivative of its own: no generic case)
    jax.grad(lambda x: jax.numpy.sum(jax.lax.digamma(x + 1.5)))(x)
    # a primitive XLA computes block by block: BlockMap (the generic case polygamma_by_xla
    # runs it at the smallest budget; here the default one holds it in memory)
    jask.set_memory_budget("4KB")
    try:
        jax.grad(lambda x: jax.numpy.sum(jax.lax.bessel_i0e(x)))(x)
        # an array jask.on_disk makes block by block: GenerateRows (tests/test_on_disk.py)
        jask.on_disk(lambda: jax.numpy.zeros((300, 7)))()
    finally:
        jask.set_memory_budget(DEFAULT_BUDGET)
    # rows longer than the budget holds: the merge sort (MergeSort), and top_k's derivatives
    # (ScatterSorted, and GatherSorted in the gradient's gradient; tests/test_external_sort.py)
    long_rows = jask.DiskArray.from_numpy(rng.standard_normal((2, 3000)).astype(np.float32))
    jask.set_memory_budget("16KB")
    try:
        top = lambda u: jax.numpy.sum(jax.lax.top_k(u, 700)[0] ** 2)
        jax.grad(lambda v: jax.numpy.vdot(jax.grad(top)(v), v))(long_rows)
    finally:
        jask.set_memory_budget(DEFAULT_BUDGET)
    # write_rows is no function to differentiate: the row-sparse optimizer's write in place
    # (tests/test_row_sparse.py)
    opt = jask.row_sparse(optax.sgd(0.1))
    opt.update_(x, opt.init(x), np.array([0, 2]), np.ones((2, *x.shape[1:]), np.float32))
    missing = sorted(op.__name__ for op in OPS if op not in used)
    assert not missing, f"ops not covered by the generic tests: {missing}"
    assert len(OPS) == len(set(OPS))
    assert all(np.ndim(op.name) == 0 and op.name for op in OPS)
