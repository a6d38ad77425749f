"""Every optimizer and transform in optax and optax.contrib, the optax.tree_utils functions and the
classification losses on DiskArray parameters, eagerly and under jit, against the same code on jnp
arrays.

The optimizers are enumerated from the modules (every public function returning a
GradientTransformation), so one that a new optax version adds is tested, or fails asking for its
hyperparameters in FACTORIES, without an edit here.
"""

import functools
import inspect
import typing

import jax
import jax.numpy as jnp
import numpy as np
import optax
import optax.contrib
import optax.tree_utils
import pytest

import jask

from conftest import assert_trees_match

LR = 1e-2
STEPS = 3
# The (64, 37) inputs are 9.5KB: every op runs over several blocks. (At 4KB, what jitted
# programs hold in memory leaves too little of the budget for fused ops of many operands.)
BUDGET = "8KB"
RTOL = 1e-4


@pytest.fixture(autouse=True)
def small_blocks(small_budget, monkeypatch):
    """Many blocks per op, and every slice or partial reduction on disk as a large one would be
    (results of at most IN_MEMORY_LIMIT elements come back in memory)."""
    small_budget(BUDGET)
    monkeypatch.setattr(jask._api.operands, "IN_MEMORY_LIMIT", 0)


# ---------------------------------------------------------------------------------------------
# The problem: a linear least-squares fit with an L2 term, on a dict of parameters.


def make_problem():
    rng = np.random.default_rng(0)
    params = {
        "w": rng.uniform(-1, 1, (37, 5)).astype(np.float32),
        "b": rng.uniform(-1, 1, (5,)).astype(np.float32),
    }
    x = rng.uniform(-1, 1, (64, 37)).astype(np.float32)
    y = rng.uniform(-1, 1, (64, 5)).astype(np.float32)
    return params, x, y


def loss(params, x, y):
    residual = x @ params["w"] + params["b"] - y
    return jnp.mean(jnp.square(residual)) + 0.1 * jnp.mean(jnp.square(params["w"]))


def on_disk(tree):
    return jax.tree.map(jask.DiskArray.from_numpy, tree)


def in_memory(tree):
    return jax.tree.map(jnp.asarray, tree)


def parameter_shapes(params):
    """The shapes an optimizer state leaf that holds per-parameter values has: each leaf's, and the
    flattened tree's (optax.flatten keeps its state as one vector)."""
    leaves = jax.tree.leaves(params)
    return {leaf.shape for leaf in leaves} | {(sum(leaf.size for leaf in leaves),)}


# ---------------------------------------------------------------------------------------------
# Enumerating the optimizers.


def returns_gradient_transformation(fn):
    try:
        result = typing.get_type_hints(fn).get("return")
    except (NameError, TypeError):
        result = inspect.signature(fn).return_annotation
    candidates = (result, *typing.get_args(result))  # inject_hyperparams: Callable[..., GT]
    return any(
        isinstance(c, type) and issubclass(c, optax.GradientTransformation) for c in candidates
    )


def gradient_transformation_names():
    names = []
    for prefix, module in (("optax", optax), ("optax.contrib", optax.contrib)):
        for name in sorted(dir(module)):
            fn = getattr(module, name)
            if not name.startswith("_") and inspect.isfunction(fn):
                if returns_gradient_transformation(fn):
                    names.append(f"{prefix}.{name}")
    return names


def adam():
    return optax.adam(LR)


def sgd():
    return optax.sgd(LR)


LABELS = {"w": "adam", "b": "sgd"}
MASK = {"w": True, "b": False}

# Factories for the functions that need more than a learning rate. A function not listed here is
# called with learning_rate=LR when that argument is required, and with no arguments otherwise.
FACTORIES = {
    "optax.adaptive_grad_clip": lambda: optax.adaptive_grad_clip(0.1),
    "optax.add_noise": lambda: optax.add_noise(eta=0.01, gamma=0.55, key=0),
    "optax.apply_every": lambda: optax.apply_every(k=2),
    "optax.apply_if_finite": lambda: optax.apply_if_finite(adam(), max_consecutive_errors=2),
    "optax.chain": lambda: optax.chain(optax.clip_by_global_norm(1.0), adam()),
    "optax.clip": lambda: optax.clip(0.05),
    "optax.clip_by_block_rms": lambda: optax.clip_by_block_rms(0.05),
    "optax.clip_by_global_norm": lambda: optax.clip_by_global_norm(0.5),
    "optax.conditionally_mask": lambda: optax.conditionally_mask(adam(), lambda step: step > 0),
    "optax.conditionally_transform": lambda: optax.conditionally_transform(
        adam(), lambda step: step % 2 == 0
    ),
    "optax.ema": lambda: optax.ema(0.9),
    "optax.flatten": lambda: optax.flatten(adam()),
    "optax.freeze": lambda: optax.freeze({"w": False, "b": True}),
    "optax.inject_hyperparams": lambda: optax.inject_hyperparams(optax.adam)(learning_rate=LR),
    "optax.inject_stateful_hyperparams": lambda: optax.inject_stateful_hyperparams(optax.adam)(
        learning_rate=optax.linear_schedule(LR, LR / 2, STEPS)
    ),
    "optax.lookahead": lambda: optax.lookahead(adam(), sync_period=2, slow_step_size=0.5),
    "optax.masked": lambda: optax.masked(adam(), MASK),
    "optax.measure_with_ema": lambda: optax.measure_with_ema(
        lambda updates: jax.tree.map(lambda u: 0.5 * u, updates), decay=0.9
    ),
    "optax.multi_transform": lambda: optax.multi_transform({"adam": adam(), "sgd": sgd()}, LABELS),
    "optax.named_chain": lambda: optax.named_chain(
        ("clip", optax.clip_by_global_norm(1.0)), ("adam", adam())
    ),
    "optax.partition": lambda: optax.partition({"adam": adam(), "sgd": sgd()}, LABELS),
    "optax.scale": lambda: optax.scale(-LR),
    "optax.scale_by_backtracking_linesearch": lambda: optax.chain(
        sgd(), optax.scale_by_backtracking_linesearch(max_backtracking_steps=8, store_grad=True)
    ),
    "optax.scale_by_schedule": lambda: optax.scale_by_schedule(
        optax.exponential_decay(LR, transition_steps=1, decay_rate=0.5)
    ),
    "optax.scale_by_rprop": lambda: optax.scale_by_rprop(LR),
    "optax.scale_by_zoom_linesearch": lambda: optax.chain(
        sgd(), optax.scale_by_zoom_linesearch(max_linesearch_steps=8)
    ),
    "optax.selective_transform": lambda: optax.selective_transform(
        adam(), freeze_mask={"w": False, "b": True}
    ),
    "optax.snapshot": lambda: optax.chain(
        optax.snapshot("norm", optax.tree_utils.tree_norm), adam()
    ),
    "optax.stateless": lambda: optax.stateless(
        lambda updates, params: jax.tree.map(lambda u, p: -LR * (u + p), updates, params)
    ),
    "optax.stateless_with_tree_map": lambda: optax.stateless_with_tree_map(
        lambda u, p: -LR * (u + p)
    ),
    "optax.trace": lambda: optax.trace(0.9),
    "optax.with_extra_args_support": lambda: optax.with_extra_args_support(adam()),
    "optax.contrib.differentially_private_aggregate": lambda: (
        optax.contrib.differentially_private_aggregate(
            l2_norm_clip=1.0, noise_multiplier=0.1, key=0
        )
    ),
    "optax.contrib.dpsgd": lambda: optax.contrib.dpsgd(
        LR, l2_norm_clip=1.0, noise_multiplier=0.1, seed=0
    ),
    "optax.contrib.galore": lambda: optax.contrib.galore(LR, rank=2, update_proj_gap=2),
    "optax.contrib.mechanize": lambda: optax.contrib.mechanize(adam()),
    "optax.contrib.reduce_on_plateau": lambda: optax.chain(
        sgd(), optax.contrib.reduce_on_plateau(patience=1, factor=0.5)
    ),
    "optax.contrib.sam": lambda: optax.contrib.sam(sgd(), sgd()),
    "optax.contrib.scale_by_galore": lambda: optax.contrib.scale_by_galore(
        rank=2, update_proj_gap=2
    ),
    "optax.contrib.scale_by_madgrad": lambda: optax.contrib.scale_by_madgrad(LR),
    # Muon orthogonalizes matrices only ("None implies that all parameters are 2D matrices"):
    # the bias goes to adam, as optax.contrib.muon does it.
    "optax.contrib.scale_by_muon": lambda: optax.partition(
        {
            "muon": optax.contrib.scale_by_muon(
                weight_dimension_numbers={
                    "w": optax.contrib.MuonDimensionNumbers(),
                    "b": optax.MaskedNode(),
                }
            ),
            "adam": optax.scale_by_adam(),
        },
        {"w": "muon", "b": "adam"},
    ),
    "optax.noisy_sgd": lambda: optax.noisy_sgd(LR, key=0),
    "optax.contrib.schedule_free": lambda: optax.contrib.schedule_free(optax.sgd(LR), LR),
    "optax.contrib.split_real_and_imaginary": lambda: optax.contrib.split_real_and_imaginary(
        adam()
    ),
    # Wrappers that are classes or methods rather than module functions returning a transform.
    "optax.MultiSteps": lambda: optax.MultiSteps(
        adam(), every_k_schedule=2
    ).gradient_transformation(),
}

# How each optimizer's update is called, where it needs more than (grads, state, params).
VALUE = (
    "optax.polyak_sgd",
    "optax.scale_by_polyak",
    "optax.contrib.momo",
    "optax.contrib.momo_adam",
)
VALUE += ("optax.contrib.reduce_on_plateau",)
LINESEARCH = ("optax.lbfgs", "optax.scale_by_backtracking_linesearch")
LINESEARCH += ("optax.scale_by_zoom_linesearch",)
PER_EXAMPLE = ("optax.contrib.dpsgd", "optax.contrib.differentially_private_aggregate")
CALLING = {name: "value" for name in VALUE}
CALLING |= {name: "linesearch" for name in LINESEARCH}
CALLING |= {name: "per_example" for name in PER_EXAMPLE}
CALLING |= {"optax.contrib.sophia": "obj_fn", "optax.lookahead": "lookahead"}


# name -> (the exception it raises today, why), found by running it. Strict: one that starts
# passing fails until its entry is removed. (galore's svd runs by XLA's route since issue 33.)
XFAIL = {}

OPTIMIZERS = gradient_transformation_names() + ["optax.MultiSteps"]


def make_optimizer(name):
    if name in FACTORIES:
        return FACTORIES[name]()
    module, _, attr = name.rpartition(".")
    fn = getattr(optax.contrib if module == "optax.contrib" else optax, attr)
    parameters = inspect.signature(fn).parameters
    required = [
        p.name
        for p in parameters.values()
        if p.default is inspect.Parameter.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    if set(required) - {"learning_rate"}:
        raise AssertionError(f"{name} needs {required}: give it a factory in FACTORIES")
    return fn(learning_rate=LR) if required else fn()


def step(opt, calling, params, state, x, y):
    """One optimizer step: (new params, new state, updates)."""

    def objective(p):
        return loss(p, x, y)

    if calling == "lookahead":  # gradients at the fast parameters, updates to both
        grads = jax.grad(objective)(params.fast)
        updates, state = opt.update(grads, state, params)
    elif calling == "per_example":  # differential privacy clips each example's gradient
        per_example = jax.vmap(lambda xi, yi: jax.grad(loss)(params, xi[None], yi[None]))
        updates, state = opt.update(per_example(x, y), state, params)
    elif calling == "linesearch":
        value, grads = optax.value_and_grad_from_state(objective)(params, state=state)
        updates, state = opt.update(
            grads, state, params, value=value, grad=grads, value_fn=objective
        )
    else:
        value, grads = jax.value_and_grad(objective)(params)
        extra = {"value": {"value": value}, "obj_fn": {"obj_fn": objective}}.get(calling, {})
        updates, state = opt.update(grads, state, params, **extra)
    return optax.apply_updates(params, updates), state, updates


def train(name, params, x, y, jit):
    opt = make_optimizer(name)
    calling = CALLING.get(name, "plain")
    if calling == "lookahead":
        params = optax.LookaheadParams.init_synced(params)
    state = opt.init(params)
    one_step = functools.partial(step, opt, calling)
    if jit:
        one_step = jax.jit(one_step)
    for _ in range(STEPS):
        params, state, updates = one_step(params, state, x, y)
    return params, state, updates


# ---------------------------------------------------------------------------------------------
# Comparing trees.


def assert_on_disk(tree, what):
    for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
        assert isinstance(leaf, jask.DiskArray), (what, jax.tree_util.keystr(path), type(leaf))


def assert_state_on_disk(state, shapes):
    """Every state leaf of a parameter's shape is a DiskArray; counts and scalars stay in memory."""
    for path, leaf in jax.tree_util.tree_leaves_with_path(state):
        if np.shape(leaf) in shapes:
            assert isinstance(leaf, jask.DiskArray), (
                "state",
                jax.tree_util.keystr(path),
                type(leaf),
            )


def expected_failure(raises, reason):
    return pytest.mark.xfail(strict=True, raises=raises, reason=reason)


# Deprecated in optax 0.2.8, still exported: tested, with its DeprecationWarning allowed.
DEPRECATED = {"optax.optimistic_adam", "optax.inject_stateful_hyperparams"}
DEPRECATED |= {"optax.contrib.dpsgd"}  # its required `seed` goes on as a deprecated argument


def optimizer_params(names):
    params = []
    for n in names:
        marks = [expected_failure(*XFAIL[n])] if n in XFAIL else []
        if n in DEPRECATED:
            marks.append(pytest.mark.filterwarnings("ignore::DeprecationWarning"))
        params.append(pytest.param(n, marks=marks))
    return params


# ---------------------------------------------------------------------------------------------
# The tests.


def test_the_enumeration_finds_the_optimizers_and_transforms():
    for name in ("optax.adam", "optax.lbfgs", "optax.chain", "optax.contrib.muon"):
        assert name in OPTIMIZERS
    assert "optax.apply_updates" not in OPTIMIZERS and len(OPTIMIZERS) > 100


@functools.cache
def reference(name):
    """The optimizer's steps on in-memory arrays, jitted (eager steps give the same numbers, op
    by op, in several times the time): the reference of both the eager and the jitted test."""
    params_np, x_np, y_np = make_problem()
    return train(name, in_memory(params_np), jnp.asarray(x_np), jnp.asarray(y_np), True)


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("name", optimizer_params(OPTIMIZERS))
def test_optimizer_matches_jnp(name, jit):
    params_np, x_np, y_np = make_problem()
    expected = reference(name)
    params, state, updates = train(
        name,
        on_disk(params_np),
        jask.DiskArray.from_numpy(x_np),
        jask.DiskArray.from_numpy(y_np),
        jit,
    )
    assert_trees_match((params, state, updates), expected, RTOL)
    assert_on_disk(params, "params")
    assert_on_disk(updates, "updates")
    assert_state_on_disk(state, parameter_shapes(params_np))


NONFINITE = {
    "apply_if_finite": lambda: optax.apply_if_finite(adam(), max_consecutive_errors=2),
    "zero_nans": optax.zero_nans,
}


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize(
    "name",
    list(NONFINITE),
)
def test_nonfinite_gradients(name, jit):
    """A NaN gradient: apply_if_finite skips the step (and counts it), zero_nans zeroes it."""
    params_np, _, _ = make_problem()
    grads_np = jax.tree.map(lambda p: np.sin(3 * p), params_np)
    grads_np["w"][3, 2] = np.nan

    def run(params, grads):
        opt = NONFINITE[name]()
        update = jax.jit(opt.update) if jit else opt.update
        state = opt.init(params)
        for _ in range(2):
            updates, state = update(grads, state, params)
        return updates, state

    expected = run(in_memory(params_np), in_memory(grads_np))
    updates, state = run(on_disk(params_np), on_disk(grads_np))
    assert_trees_match((updates, state), expected, RTOL)
    assert_on_disk(updates, "updates")
    assert_state_on_disk(state, parameter_shapes(params_np))


# ---------------------------------------------------------------------------------------------
# optax.tree_utils.


def tree_util_calls(tree, other, key):
    """name -> a call of that optax.tree_utils function on DiskArray trees."""
    tu = optax.tree_utils
    state = optax.adam(LR).init(tree)
    return {
        "tree_add": lambda: tu.tree_add(tree, other, tree),
        "tree_add_scale": lambda: tu.tree_add_scale(tree, 0.5, other),
        "tree_allclose": lambda: jnp.asarray(tu.tree_allclose(tree, tree)),
        "tree_batch_shape": lambda: jax.tree.map(jnp.asarray, tu.tree_batch_shape(tree, (2,))),
        "tree_bias_correction": lambda: tu.tree_bias_correction(tree, 0.9, jnp.asarray(3)),
        "tree_cast": lambda: tu.tree_cast(tree, jnp.bfloat16),
        "tree_cast_like": lambda: tu.tree_cast_like(tree, tu.tree_cast(other, jnp.bfloat16)),
        "tree_clip": lambda: tu.tree_clip(tree, -0.5, 0.25),
        "tree_conj": lambda: tu.tree_conj(tree),
        "tree_div": lambda: tu.tree_div(
            tree, tu.tree_add_scale(tu.tree_ones_like(other), 2.0, other)
        ),
        "tree_dtype": lambda: jnp.zeros((), tu.tree_dtype(tree)),
        "tree_full_like": lambda: tu.tree_full_like(tree, 0.75),
        "tree_get": lambda: tu.tree_get(state, "mu"),
        "tree_get_all_with_path": lambda: [v for _, v in tu.tree_get_all_with_path(state, "nu")],
        "tree_map_params": lambda: tu.tree_map_params(
            optax.adam(LR), lambda v: v * 2.0, tu.tree_set(state, mu=other)
        ),
        "tree_max": lambda: tu.tree_max(tree),
        "tree_min": lambda: tu.tree_min(tree),
        "tree_mul": lambda: tu.tree_mul(tree, other),
        "tree_norm": lambda: (
            tu.tree_norm(tree),
            tu.tree_norm(tree, squared=True),
            tu.tree_norm(tree, ord=1),
            tu.tree_norm(tree, ord="inf"),
        ),
        "tree_ones_like": lambda: tu.tree_ones_like(tree),
        "tree_random_like": lambda: tu.tree_random_like(key, tree),
        "tree_real": lambda: tu.tree_real(tree),
        "tree_scale": lambda: tu.tree_scale(0.5, tree),
        "tree_set": lambda: tu.tree_get(tu.tree_set(state, mu=other), "mu"),
        "tree_size": lambda: jnp.asarray(tu.tree_size(tree)),
        "tree_split_key_like": lambda: jax.tree.map(
            jax.random.key_data, tu.tree_split_key_like(key, tree)
        ),
        "tree_sub": lambda: tu.tree_sub(tree, other),
        "tree_sum": lambda: (tu.tree_sum(tree), tu.tree_sum(tree, associative_reduction=True)),
        "tree_unwrap_random_key_data": lambda: tu.tree_unwrap_random_key_data(
            {"key": key, "w": tree["w"]}
        ),
        "tree_update_infinity_moment": lambda: tu.tree_update_infinity_moment(
            tree, other, 0.9, 1e-8
        ),
        "tree_update_moment": lambda: tu.tree_update_moment(tree, other, 0.9, 2),
        "tree_update_moment_per_elem_norm": lambda: tu.tree_update_moment_per_elem_norm(
            tree, other, 0.9, 2
        ),
        "tree_vdot": lambda: tu.tree_vdot(tree, other),
        "tree_where": lambda: tu.tree_where(tu.tree_max(tree) > 0, tree, other),
        "tree_zeros_like": lambda: tu.tree_zeros_like(tree),
    }


TREE_UTILS = sorted(
    n
    for n in dir(optax.tree_utils)
    if n.startswith("tree_") and callable(getattr(optax.tree_utils, n))
)
# Functions whose result does not hold the tree's values, so it stays in memory.
TREE_UTILS_IN_MEMORY = {
    "tree_allclose",
    "tree_batch_shape",
    "tree_dtype",
    "tree_max",
    "tree_min",
    "tree_norm",
    "tree_random_like",
    "tree_size",
    "tree_split_key_like",
    "tree_sum",
    "tree_vdot",
}
TREE_UTILS_XFAIL = {}


def test_every_tree_util_has_a_call():
    params_np, _, _ = make_problem()
    calls = tree_util_calls(in_memory(params_np), in_memory(params_np), jax.random.key(0))
    assert sorted(calls) == TREE_UTILS


def tree_util_marked(names):
    return [
        pytest.param(n, marks=expected_failure(*TREE_UTILS_XFAIL[n]))
        if n in TREE_UTILS_XFAIL
        else n
        for n in names
    ]


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("name", tree_util_marked(TREE_UTILS))
def test_tree_util_matches_jnp(name, jit):
    params_np, _, _ = make_problem()
    other_np = jax.tree.map(lambda p: np.cos(2 * p), params_np)

    def call(tree, other):
        return tree_util_calls(tree, other, jax.random.key(0))[name]()

    if jit:
        call = jax.jit(call)
    expected = call(in_memory(params_np), in_memory(other_np))
    actual = call(on_disk(params_np), on_disk(other_np))
    assert_trees_match(actual, expected, RTOL)
    if name not in TREE_UTILS_IN_MEMORY:
        for path, leaf in jax.tree_util.tree_leaves_with_path(actual):
            if np.ndim(leaf) > 0 and leaf.dtype != np.uint32:  # not key data
                assert isinstance(leaf, jask.DiskArray), (jax.tree_util.keystr(path), type(leaf))


# ---------------------------------------------------------------------------------------------
# Classification losses.


def cross_entropy(logits, labels):
    return jnp.mean(optax.softmax_cross_entropy(logits, labels))


def cross_entropy_integer(logits, labels):
    return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, labels))


LOSSES = {"softmax_cross_entropy": cross_entropy, "integer_labels": cross_entropy_integer}


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize(
    "name",
    list(LOSSES),
)
def test_classification_loss_matches_jnp(name, jit):
    rng = np.random.default_rng(1)
    logits_np = rng.normal(size=(301, 7)).astype(np.float32) * 3
    ids = rng.integers(0, 7, size=301).astype(np.int32)
    labels = ids if name == "integer_labels" else np.eye(7, dtype=np.float32)[ids]
    fn = jax.value_and_grad(LOSSES[name])
    if jit:
        fn = jax.jit(fn)
    expected = fn(jnp.asarray(logits_np), jnp.asarray(labels))
    value, grad = fn(jask.DiskArray.from_numpy(logits_np), jnp.asarray(labels))
    assert_trees_match((value, grad), expected, RTOL)
    assert isinstance(grad, jask.DiskArray)


@pytest.mark.parametrize(
    "fn",
    [
        optax.softmax_cross_entropy,
        optax.softmax_cross_entropy_with_integer_labels,
    ],
)
def test_per_example_losses_stay_on_disk(fn):
    rng = np.random.default_rng(2)
    logits_np = rng.normal(size=(301, 7)).astype(np.float32)
    ids = rng.integers(0, 7, size=301).astype(np.int32)
    labels = (
        ids
        if fn is optax.softmax_cross_entropy_with_integer_labels
        else np.eye(7, dtype=np.float32)[ids]
    )
    losses = fn(jask.DiskArray.from_numpy(logits_np), jnp.asarray(labels))
    assert isinstance(losses, jask.DiskArray)
    assert_trees_match(losses, fn(jnp.asarray(logits_np), jnp.asarray(labels)))
