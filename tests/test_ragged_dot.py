"""jax.lax.ragged_dot / ragged_dot_general with DiskArrays larger than the XLA route holds in
memory (jask/_api/ragged.py): values and dtypes against jax.lax.ragged_dot on jax.Arrays,
eagerly and jitted (traced group sizes), gradients and jvps with respect to lhs and rhs, at
budgets where rhs is held whole (a BlockMap over row blocks of lhs) and where only one group's
matrix fits (one rhs[i] read at a time), each with many row blocks."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jask
import jask._api.ragged as ragged

from conftest import DEFAULT_BUDGET, assert_close

M, K, N = 301, 16, 12  # 301 rows: not a multiple of any block
SIZES = {
    # groups spanning block boundaries, an empty group, the sum below m
    "spanning": (40, 0, 103, 7, 90, 31),
    "empty_ends": (0, 150, 0, 0, 151, 0),  # empty first and last groups, the sum m
    "past_m": (100, 0, 150, 7, 300, 200),  # the sum past m: groups past m are dropped
}
# rhs (6 x 16 x 12 float32, 4.6 KB) held whole at 56KB (an allowance of 28 KB: lhs and the
# result do not fit it); at 8KB only one group's matrix fits
ROUTES = {"rhs_whole": ("56KB", "RaggedDotRows"), "by_group": ("8KB", "RaggedDotByGroup")}


@pytest.fixture
def applied(monkeypatch):
    """The (op, block) of each op the ragged rule applies, in order."""
    ops = []
    original = ragged.apply

    def spy(op, *operands, **params):
        ops.append((op.__name__, params.get("block")))
        return original(op, *operands, **params)

    monkeypatch.setattr(ragged, "apply", spy)
    return ops


@pytest.fixture
def route(request, applied):
    """Sets the route's budget; yields its name and the ops applied."""
    jask.set_memory_budget(ROUTES[request.param][0])
    yield request.param, applied
    jask.set_memory_budget(DEFAULT_BUDGET)


def disk(a):
    return jask.DiskArray.from_numpy(np.asarray(a))


def value(x):
    return np.asarray(jask.materialize(x) if isinstance(x, jask.DiskArray) else x)


def operands(seed=0, m=M, dtype=np.float32, sizes=SIZES["spanning"]):
    rng = np.random.default_rng(seed)
    lhs = rng.normal(size=(m, K)).astype(dtype)
    rhs = rng.normal(size=(len(sizes), K, N)).astype(dtype)
    return lhs, rhs, jnp.asarray(sizes, jnp.int32)


def check_route(name, applied, m=M):
    """The route's op ran, with 8 row blocks or more."""
    check_route_op(ROUTES[name][1], applied, m)


def check_route_op(name, applied, m):
    blocks = [block for op, block in applied if op == name]
    assert blocks, applied
    assert -(-m // blocks[0]) >= 8, applied


def check(actual, expected, rtol=1e-5):
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert_close(value(actual), np.asarray(expected, np.float64), rtol=rtol)


@pytest.mark.parametrize("route", list(ROUTES), indirect=True)
@pytest.mark.parametrize("sizes", list(SIZES))
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_values(route, sizes, jit):
    lhs, rhs, group_sizes = operands(sizes=SIZES[sizes])
    fn = jax.jit(jax.lax.ragged_dot) if jit else jax.lax.ragged_dot
    out = fn(disk(lhs), disk(rhs), group_sizes)  # group sizes traced under jit
    assert isinstance(out, jask.DiskArray)
    check_route(route[0], route[1])
    check(out, jax.lax.ragged_dot(jnp.asarray(lhs), jnp.asarray(rhs), group_sizes))


@pytest.mark.parametrize("route", list(ROUTES), indirect=True)
def test_in_memory_lhs(route):
    """An in-memory lhs: only rhs and the result count against the allowance (more rows)."""
    m = 1003
    lhs, rhs, group_sizes = operands(seed=1, m=m, sizes=(200, 0, 403, 7, 300, 60))
    jask.set_memory_budget({"rhs_whole": "96KB", "by_group": "8KB"}[route[0]])
    out = jax.lax.ragged_dot(jnp.asarray(lhs), disk(rhs), group_sizes)
    check_route(route[0], route[1], m)
    check(out, jax.lax.ragged_dot(jnp.asarray(lhs), jnp.asarray(rhs), group_sizes))


def test_few_in_memory_tokens_through_large_experts(applied, small_budget):
    """An in-memory lhs whose result is small gives an in-memory result, rhs read by group."""
    lhs, rhs, _ = operands(seed=13, m=20)
    group_sizes = jnp.asarray([3, 0, 9, 1, 7, 0], jnp.int32)
    small_budget(ROUTES["by_group"][0])
    for fn in (jax.lax.ragged_dot, jax.jit(jax.lax.ragged_dot)):
        out = fn(jnp.asarray(lhs), disk(rhs), group_sizes)
        assert not isinstance(out, jask.DiskArray)
        check(out, jax.lax.ragged_dot(jnp.asarray(lhs), jnp.asarray(rhs), group_sizes))
    assert "RaggedDotByGroup" in [name for name, _ in applied]


@pytest.mark.parametrize("route", list(ROUTES), indirect=True)
@pytest.mark.parametrize(
    "dtype,preferred",
    [
        (jnp.bfloat16, jnp.float32),
        (jnp.bfloat16, None),
        (jnp.int8, jnp.int32),
        (jnp.int8, None),  # int8 products wrap, as JAX's
    ],
    ids=["bf16->f32", "bf16", "int8->int32", "int8"],
)
def test_dtypes(route, dtype, preferred):
    lhs, rhs, group_sizes = operands(seed=2)
    lhs, rhs = (np.asarray(jnp.asarray(x * 4).astype(dtype)) for x in (lhs, rhs))
    # the route's budget scaled to the narrower dtype (rhs is 1/2 or 1/4 of its float32 size)
    budget = int(ROUTES[route[0]][0][:-2]) * 1024 * np.dtype(dtype).itemsize // 4
    jask.set_memory_budget(budget)
    out = jax.lax.ragged_dot(disk(lhs), disk(rhs), group_sizes, preferred_element_type=preferred)
    expected = jax.lax.ragged_dot(
        jnp.asarray(lhs), jnp.asarray(rhs), group_sizes, preferred_element_type=preferred
    )
    check_route(*route)
    if jnp.issubdtype(expected.dtype, jnp.integer):
        assert value(out).dtype == expected.dtype
        np.testing.assert_array_equal(value(out), np.asarray(expected))
    else:  # the same products, summed in the same dtype
        check(out, expected, rtol=1e-2 if expected.dtype == jnp.bfloat16 else 1e-5)


def loss(lhs, rhs, group_sizes):
    return jnp.sum(jnp.sin(jax.lax.ragged_dot(lhs, rhs, group_sizes)))


GRADIENTS = {
    "eager": lambda f: jax.grad(f, argnums=(0, 1)),
    "jit": lambda f: jax.jit(jax.grad(f, argnums=(0, 1))),
    # by linearization; a new function each time (JAX caches checkpoint's trace per function)
    "checkpoint": lambda f: jax.grad(jax.checkpoint(lambda *a: f(*a)), argnums=(0, 1)),
}


@pytest.mark.parametrize("route", list(ROUTES), indirect=True)
@pytest.mark.parametrize("how", list(GRADIENTS))
def test_gradients(route, how):
    lhs, rhs, group_sizes = operands(seed=3, sizes=SIZES["past_m"])
    d_lhs, d_rhs = GRADIENTS[how](loss)(disk(lhs), disk(rhs), group_sizes)
    check_route(route[0], route[1])
    e_lhs, e_rhs = GRADIENTS["jit"](loss)(jnp.asarray(lhs), jnp.asarray(rhs), group_sizes)
    assert isinstance(d_lhs, jask.DiskArray) and isinstance(d_rhs, jask.DiskArray)
    check(d_lhs, e_lhs, rtol=1e-4)
    check(d_rhs, e_rhs, rtol=1e-4)


@pytest.mark.parametrize("route", list(ROUTES), indirect=True)
def test_jvp(route):
    lhs, rhs, group_sizes = operands(seed=4)
    t_lhs, t_rhs, _ = operands(seed=5)

    def fn(a, b):
        return jax.lax.ragged_dot(a, b, group_sizes)

    out, tangent = jax.jvp(fn, (disk(lhs), disk(rhs)), (disk(t_lhs), disk(t_rhs)))
    e_out, e_tangent = jax.jvp(
        fn, (jnp.asarray(lhs), jnp.asarray(rhs)), (jnp.asarray(t_lhs), jnp.asarray(t_rhs))
    )
    check(out, e_out)
    check(tangent, e_tangent)


@pytest.mark.parametrize("route", list(ROUTES), indirect=True)
def test_rhs_contracted_along_its_last_axis(route):
    """rhs [g, n, k] contracted along k (the form of lhs's gradient in JAX's transpose)."""
    lhs, rhs, group_sizes = operands(seed=12)
    rhs = np.ascontiguousarray(np.swapaxes(rhs, 1, 2))
    dims = jax.lax.RaggedDotDimensionNumbers(
        dot_dimension_numbers=(([1], [2]), ([], [])),
        lhs_ragged_dimensions=[0],
        rhs_group_dimensions=[0],
    )

    def fn(a, b, s):
        return jax.lax.ragged_dot_general(a, b, s, dims)

    out = jax.jit(fn)(disk(lhs), disk(rhs), group_sizes)
    check_route(*route)
    check(out, fn(jnp.asarray(lhs), jnp.asarray(rhs), group_sizes))


CONTRACTING = jax.lax.RaggedDotDimensionNumbers(
    dot_dimension_numbers=(([0], [0]), ([], [])), lhs_ragged_dimensions=[0], rhs_group_dimensions=[]
)


@pytest.mark.parametrize(
    "budget,op",
    [("384KB", "RaggedContractRows"), ("8KB", "RaggedContractByGroup")],
    ids=["sum", "by_group"],
)
def test_ragged_contracting_mode(small_budget, applied, budget, op):
    """One [k, n] product per group (what rhs's gradient is): summed in memory over row blocks
    where the [g, k, n] result fits (and leaves room for blocks), else written group by group."""
    m = 2003  # the summed route's blocks hold XLA's g copies of a block: rows to spare
    lhs, _, group_sizes = operands(seed=6, m=m, sizes=(200, 0, 403, 7, 300, 60))
    other = np.random.default_rng(7).normal(size=(m, N)).astype(np.float32)
    small_budget(budget)

    def fn(a, b, s):
        return jax.lax.ragged_dot_general(a, b, s, CONTRACTING)

    expected = fn(jnp.asarray(lhs), jnp.asarray(other), group_sizes)
    for f in (fn, jax.jit(fn)):
        applied.clear()
        check(f(disk(lhs), disk(other), group_sizes), expected, rtol=1e-4)
        check_route_op(op, applied, m)


def test_ragged_batch_mode(small_budget):
    """A ragged batch dimension: JAX's rule is the batched dot_general, group sizes aside."""
    rng = np.random.default_rng(8)
    lhs = rng.normal(size=(5, 41, 8)).astype(np.float32)
    rhs = rng.normal(size=(5, 8, 10)).astype(np.float32)
    dims = jax.lax.RaggedDotDimensionNumbers(
        dot_dimension_numbers=(([2], [1]), ([0], [0])),
        lhs_ragged_dimensions=[0],
        rhs_group_dimensions=[],
    )
    sizes = jnp.asarray([2, 3], jnp.int32)
    small_budget("8KB")
    out = jax.lax.ragged_dot_general(disk(lhs), disk(rhs), sizes, dims)
    check(out, jax.lax.ragged_dot_general(jnp.asarray(lhs), jnp.asarray(rhs), sizes, dims))


def test_small_operands_stay_on_the_xla_route():
    """What fits half the budget is computed in memory by XLA, the result in memory."""
    lhs, rhs, group_sizes = operands(seed=9)
    out = jax.lax.ragged_dot(disk(lhs), disk(rhs), group_sizes)
    assert not isinstance(out, jask.DiskArray)
    check(out, jax.lax.ragged_dot(jnp.asarray(lhs), jnp.asarray(rhs), group_sizes))


@pytest.mark.parametrize("route", list(ROUTES), indirect=True)
def test_shape_errors_are_jaxs(route):
    lhs, rhs, group_sizes = operands(seed=10)
    cases = [
        (lhs[:, :5], rhs, group_sizes),  # contracting sizes differ
        (lhs, rhs[:4], group_sizes),  # group count differs from group_sizes'
        (lhs, rhs, group_sizes.astype(jnp.float32)),  # float group sizes
    ]
    for a, b, s in cases:
        with pytest.raises(TypeError) as expected:
            jax.lax.ragged_dot(jnp.asarray(a), jnp.asarray(b), s)
        with pytest.raises(TypeError) as raised:
            jax.lax.ragged_dot(disk(a), disk(b), s)
        assert str(raised.value) == str(expected.value)


def moe_layer(params, tokens, expert_of_token):
    """A mixture-of-experts MLP as a user writes it: tokens sorted by expert, one ragged_dot
    per layer, a gelu between, a residual, gated by the router's softmax."""
    n_experts = params["w_in"].shape[0]
    group_sizes = jnp.bincount(expert_of_token, length=n_experts).astype(jnp.int32)
    gate = jax.nn.softmax(tokens @ params["router"], axis=-1)
    hidden = jax.nn.gelu(jax.lax.ragged_dot(tokens, params["w_in"], group_sizes))
    out = jax.lax.ragged_dot(hidden, params["w_out"], group_sizes)
    chosen = jnp.take_along_axis(gate, expert_of_token[:, None], axis=1)
    return tokens + out * chosen


@pytest.mark.parametrize(
    "budget,op",
    [("40KB", "RaggedDotRows"), ("16KB", "RaggedDotByGroup")],
    ids=["whole", "by_group"],
)
def test_moe_layer(small_budget, applied, budget, op):
    rng = np.random.default_rng(11)
    n_experts, hidden = 4, 24
    expert = np.sort(rng.integers(0, n_experts, size=M)).astype(np.int32)
    tokens = rng.normal(size=(M, K)).astype(np.float32)
    params = {
        "router": rng.normal(size=(K, n_experts)).astype(np.float32) / 4,
        "w_in": rng.normal(size=(n_experts, K, hidden)).astype(np.float32) / 4,
        "w_out": rng.normal(size=(n_experts, hidden, K)).astype(np.float32) / 4,
    }
    target = rng.normal(size=(M, K)).astype(np.float32)

    def loss_of(p, x, e, y):
        return jnp.mean((moe_layer(p, x, e) - y) ** 2)

    grad = jax.jit(jax.value_and_grad(loss_of))
    e_loss, e_grads = grad(params, jnp.asarray(tokens), jnp.asarray(expert), jnp.asarray(target))
    small_budget(budget)
    d_loss, d_grads = grad(params, disk(tokens), jnp.asarray(expert), disk(target))
    assert {name for name, _ in applied} >= {op}, applied
    assert_close(d_loss, e_loss, rtol=1e-4)
    for name in params:
        assert d_grads[name].dtype == e_grads[name].dtype
        assert_close(value(d_grads[name]), e_grads[name], rtol=1e-4)


def test_other_forms_in_memory_or_refused(small_budget):
    """lhs of 3 axes: the XLA route's in memory when it fits, else a NotImplementedError
    naming the primitive and the budget."""
    rng = np.random.default_rng(14)
    lhs = rng.normal(size=(M, 2, K)).astype(np.float32)
    rhs = rng.normal(size=(6, K, N)).astype(np.float32)
    group_sizes = jnp.asarray(SIZES["spanning"], jnp.int32)
    dims = jax.lax.RaggedDotDimensionNumbers(
        dot_dimension_numbers=(([2], [1]), ([], [])),
        lhs_ragged_dimensions=[0],
        rhs_group_dimensions=[0],
    )

    def fn(a, b):
        return jax.lax.ragged_dot_general(a, b, group_sizes, dims)

    check(fn(disk(lhs), disk(rhs)), fn(jnp.asarray(lhs), jnp.asarray(rhs)))
    small_budget("8KB")
    with pytest.raises(NotImplementedError, match=r"ragged_dot_general.*8192 bytes"):
        fn(disk(lhs), disk(rhs))
