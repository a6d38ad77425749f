"""flax.linen, flax.nnx and equinox models with DiskArray parameters and inputs, JAX's function
transformations (ravel_pytree, jacfwd/jacrev/hessian) and control flow with DiskArray carries,
eagerly and under jit, against the same code on jnp arrays."""

import equinox as eqx
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from flax.training import train_state
from jax import lax
from jax.flatten_util import ravel_pytree

import jask

from conftest import assert_trees_match

# The (64, 37) inputs are 9.5KB: every op runs over several blocks. (At 4KB, what jitted
# programs hold in memory leaves too little of the budget for fused ops of many operands.)
BUDGET = "8KB"
RTOL = 1e-4
MODES = pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])


@pytest.fixture(autouse=True)
def small_blocks(small_budget, monkeypatch):
    """Many blocks per op, and every slice or partial reduction on disk as a large one would be
    (results of at most IN_MEMORY_LIMIT elements come back in memory)."""
    small_budget(BUDGET)
    monkeypatch.setattr(jask._api.operands, "IN_MEMORY_LIMIT", 0)


def data(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (64, 37)).astype(np.float32)
    y = rng.uniform(-1, 1, (64, 5)).astype(np.float32)
    return x, y


def on_disk(tree):
    return jax.tree.map(lambda v: jask.DiskArray.from_numpy(np.asarray(v)), tree)


def in_memory(tree):
    return jax.tree.map(jnp.asarray, tree)


def assert_on_disk(tree, what=""):
    for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
        assert isinstance(leaf, jask.DiskArray), (what, jax.tree_util.keystr(path), type(leaf))


def maybe_jit(fn, jit):
    return jax.jit(fn) if jit else fn


# ---------------------------------------------------------------------------------------------
# flax.linen


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.relu(nn.Dense(16)(x))
        return nn.Dense(5)(x)


LINEN_MODELS = {
    "dense": lambda: nn.Dense(5),
    "mlp": MLP,
    "layer_norm": lambda: nn.LayerNorm(),
}


@MODES
@pytest.mark.parametrize("name", list(LINEN_MODELS))
def test_linen_apply_and_grad(name, jit):
    """Forward pass and jitted value_and_grad with DiskArray params and DiskArray inputs."""
    x_np, y_np = data()
    model = LINEN_MODELS[name]()
    params_np = model.init(jax.random.key(0), jnp.asarray(x_np))
    # LayerNorm's scale starts at ones and bias at zeros: perturb so the test sees them.
    params_np = jax.tree.map(
        lambda p: p + 0.1 * jnp.sin(jnp.arange(p.size).reshape(p.shape)), params_np
    )

    def loss(params, x, y):
        out = model.apply(params, x)
        return jnp.mean(jnp.square(out[:, :5] - y))

    apply = maybe_jit(model.apply, jit)
    value_and_grad = jax.jit(jax.value_and_grad(loss)) if jit else jax.value_and_grad(loss)
    out = apply(on_disk(params_np), jask.DiskArray.from_numpy(x_np))
    assert_trees_match(out, apply(in_memory(params_np), jnp.asarray(x_np)), RTOL)
    assert_on_disk(out, "output")
    disk = value_and_grad(on_disk(params_np), jask.DiskArray.from_numpy(x_np), jnp.asarray(y_np))
    ref = value_and_grad(in_memory(params_np), jnp.asarray(x_np), jnp.asarray(y_np))
    assert_trees_match(disk, ref, RTOL)
    assert_on_disk(disk[1], "grads")


@MODES
def test_linen_embed_with_a_disk_table(jit):
    """nn.Embed looks integer ids up in a DiskArray table; the table's gradient stays on disk."""
    ids = np.random.default_rng(3).integers(0, 50, size=(9, 4)).astype(np.int32)
    model = nn.Embed(num_embeddings=50, features=8)
    params_np = model.init(jax.random.key(0), jnp.asarray(ids))

    def loss(params, ids):
        return jnp.sum(jnp.square(model.apply(params, ids)))

    apply = maybe_jit(model.apply, jit)
    out = apply(on_disk(params_np), jnp.asarray(ids))
    assert_trees_match(out, apply(in_memory(params_np), jnp.asarray(ids)), RTOL)
    value_and_grad = maybe_jit(jax.value_and_grad(loss), jit)
    disk = value_and_grad(on_disk(params_np), jnp.asarray(ids))
    assert_trees_match(disk, value_and_grad(in_memory(params_np), jnp.asarray(ids)), RTOL)
    assert_on_disk(disk[1], "grads")


def test_linen_train_state_steps_like_jnp():
    """flax.training.train_state.TrainState with an optax adam step under jit."""
    x_np, y_np = data()
    model = MLP()
    params_np = model.init(jax.random.key(0), jnp.asarray(x_np))

    @jax.jit
    def train_step(state, x, y):
        def loss(params):
            return jnp.mean(jnp.square(state.apply_fn(params, x) - y))

        value, grads = jax.value_and_grad(loss)(state.params)
        return state.apply_gradients(grads=grads), value

    def train(params, x, y):
        state = train_state.TrainState.create(
            apply_fn=model.apply, params=params, tx=optax.adam(1e-2)
        )
        values = []
        for _ in range(3):
            state, value = train_step(state, x, y)
            values.append(value)
        return state, values

    state, values = train(on_disk(params_np), jask.DiskArray.from_numpy(x_np), jnp.asarray(y_np))
    ref_state, ref_values = train(in_memory(params_np), jnp.asarray(x_np), jnp.asarray(y_np))
    assert_trees_match(
        (state.params, state.opt_state, values),
        (ref_state.params, ref_state.opt_state, ref_values),
        RTOL,
    )
    assert int(state.step) == 3
    assert_on_disk(state.params, "params")
    assert_on_disk(state.opt_state[0].mu, "mu")
    assert_on_disk(state.opt_state[0].nu, "nu")


# ---------------------------------------------------------------------------------------------
# flax.nnx


def nnx_linear(kernel, bias):
    model = nnx.Linear(37, 5, rngs=nnx.Rngs(0))
    model.kernel.set_value(kernel)
    model.bias.set_value(bias)
    return model


def nnx_loss(model, x, y):
    return jnp.mean(jnp.square(model(x) - y))


@MODES
def test_nnx_linear_with_a_disk_kernel(jit):
    x_np, y_np = data()
    init = nnx.Linear(37, 5, rngs=nnx.Rngs(0))
    kernel_np, bias_np = (
        np.asarray(init.kernel.get_value()),
        np.asarray(init.bias.get_value()) + 0.5,
    )

    def forward(model, x):
        return model(x)

    forward = nnx.jit(forward) if jit else forward
    out = forward(
        nnx_linear(jask.DiskArray.from_numpy(kernel_np), jnp.asarray(bias_np)),
        jask.DiskArray.from_numpy(x_np),
    )
    ref = forward(nnx_linear(jnp.asarray(kernel_np), jnp.asarray(bias_np)), jnp.asarray(x_np))
    assert_trees_match(out, ref, RTOL)
    assert_on_disk(out, "output")


@MODES
def test_nnx_optimizer_step_like_jnp(jit):
    """nnx.Optimizer with adam: three steps move a DiskArray kernel exactly as a jnp one."""
    x_np, y_np = data()
    init = nnx.Linear(37, 5, rngs=nnx.Rngs(0))
    kernel_np, bias_np = np.asarray(init.kernel.get_value()), np.asarray(init.bias.get_value())

    def train_step(model, optimizer, x, y):
        value, grads = nnx.value_and_grad(nnx_loss)(model, x, y)
        optimizer.update(model, grads)
        return value

    train_step = nnx.jit(train_step) if jit else train_step

    def train(kernel, bias, x, y):
        model = nnx_linear(kernel, bias)
        optimizer = nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)
        values = [train_step(model, optimizer, x, y) for _ in range(3)]
        return model, optimizer, values

    model, optimizer, values = train(
        jask.DiskArray.from_numpy(kernel_np),
        jask.DiskArray.from_numpy(bias_np),
        jask.DiskArray.from_numpy(x_np),
        jnp.asarray(y_np),
    )
    ref_model, ref_optimizer, ref_values = train(
        jnp.asarray(kernel_np), jnp.asarray(bias_np), jnp.asarray(x_np), jnp.asarray(y_np)
    )
    assert_trees_match(
        (nnx.state(model), nnx.state(optimizer.opt_state), values),
        (nnx.state(ref_model), nnx.state(ref_optimizer.opt_state), ref_values),
        RTOL,
    )
    assert not np.allclose(np.asarray(model.kernel.get_value()), kernel_np)
    assert_on_disk(nnx.state(model), "params")


# ---------------------------------------------------------------------------------------------
# equinox


def eqx_models():
    key = jax.random.key(0)
    return {
        "linear": eqx.nn.Linear(37, 5, key=key),
        "mlp": eqx.nn.MLP(37, 5, width_size=16, depth=2, key=key),
    }


def eqx_weights(model):
    """The model's weight and bias arrays (the leaves optax updates), found by structure alone
    (eqx.tree_at's `where` may not look at the leaves)."""
    layers = model.layers if isinstance(model, eqx.nn.MLP) else (model,)
    return [array for layer in layers for array in (layer.weight, layer.bias)]


def with_leaves(model, convert):
    return eqx.tree_at(eqx_weights, model, [convert(w) for w in eqx_weights(model)])


def eqx_loss(model, x, y):
    return jnp.mean(jnp.square(jax.vmap(model)(x) - y))


@pytest.mark.parametrize("name", ["linear", "mlp"])
def test_equinox_filter_transformations(name):
    """filter_jit, filter_grad and filter_value_and_grad of a model with DiskArray weights."""
    x_np, y_np = data()
    model_np = eqx_models()[name]
    model = with_leaves(model_np, lambda w: jask.DiskArray.from_numpy(np.asarray(w)))
    x, y = jask.DiskArray.from_numpy(x_np), jnp.asarray(y_np)
    x_ref, y_ref = jnp.asarray(x_np), jnp.asarray(y_np)
    assert_on_disk(eqx_weights(model))
    forward = eqx.filter_jit(lambda m, x: jax.vmap(m)(x))
    out = forward(model, x)
    assert_trees_match(out, forward(model_np, x_ref), RTOL)
    assert_on_disk(out, "output")
    grads = eqx.filter_jit(eqx.filter_grad(eqx_loss))(model, x, y)
    ref_grads = eqx.filter_grad(eqx_loss)(model_np, x_ref, y_ref)
    assert_trees_match(eqx_weights(grads), eqx_weights(ref_grads), RTOL)
    assert_on_disk(eqx_weights(grads), "grads")
    value, grads = eqx.filter_value_and_grad(eqx_loss)(model, x, y)
    ref_value, ref_grads = eqx.filter_value_and_grad(eqx_loss)(model_np, x_ref, y_ref)
    assert_trees_match((value, eqx_weights(grads)), (ref_value, eqx_weights(ref_grads)), RTOL)
    moved = eqx.apply_updates(model, jax.tree.map(lambda g: -0.1 * g, grads))
    ref_moved = eqx.apply_updates(model_np, jax.tree.map(lambda g: -0.1 * g, ref_grads))
    assert_trees_match(eqx_weights(moved), eqx_weights(ref_moved), RTOL)
    assert_on_disk(eqx_weights(moved), "apply_updates")


@pytest.mark.parametrize("name", ["linear", "mlp"])
def test_equinox_adam_step_under_filter_jit_moves_the_weights(name):
    """An optax adam step under eqx.filter_jit changes DiskArray weights exactly as jnp ones
    (it once returned them unchanged)."""
    x_np, y_np = data()
    model_np = eqx_models()[name]
    opt = optax.adam(1e-2)

    @eqx.filter_jit
    def make_step(model, opt_state, x, y):
        value, grads = eqx.filter_value_and_grad(eqx_loss)(model, x, y)
        updates, opt_state = opt.update(grads, opt_state, eqx.filter(model, eqx.is_array))
        return eqx.apply_updates(model, updates), opt_state, value

    def train(model, x, y):
        opt_state = opt.init(eqx.filter(model, eqx.is_array))
        values = []
        for _ in range(3):
            model, opt_state, value = make_step(model, opt_state, x, y)
            values.append(value)
        return model, opt_state, values

    model = with_leaves(model_np, lambda w: jask.DiskArray.from_numpy(np.asarray(w)))
    trained, opt_state, values = train(model, jask.DiskArray.from_numpy(x_np), jnp.asarray(y_np))
    ref, ref_opt_state, ref_values = train(model_np, jnp.asarray(x_np), jnp.asarray(y_np))
    assert_trees_match(eqx_weights(trained), eqx_weights(ref), RTOL)
    assert_trees_match((opt_state, values), (ref_opt_state, ref_values), RTOL)
    for before, after in zip(eqx_weights(model_np), eqx_weights(trained), strict=True):
        assert not np.allclose(np.asarray(before), np.asarray(after))
    assert_on_disk(eqx_weights(trained), "weights")
    assert_on_disk(opt_state[0].mu, "mu")


# ---------------------------------------------------------------------------------------------
# jax.flatten_util and higher derivatives


def a_tree():
    rng = np.random.default_rng(4)
    return {
        "w": rng.uniform(-1, 1, (37, 5)).astype(np.float32),
        "b": rng.uniform(-1, 1, (5,)).astype(np.float32),
    }


@MODES
def test_ravel_pytree(jit):
    tree_np = a_tree()

    def ravel_and_back(tree):
        flat, unravel = ravel_pytree(tree)
        return flat, unravel(2.0 * flat)

    fn = maybe_jit(ravel_and_back, jit)
    flat, back = fn(on_disk(tree_np))
    assert_trees_match((flat, back), fn(in_memory(tree_np)), RTOL)
    assert_on_disk((flat, back), "ravel_pytree")


def small_function(x):
    return jnp.sin(x) * jnp.sum(x * x) + jnp.tanh(x)


def scalar_function(x):
    return jnp.sum(jnp.sin(x) * x * x)


DERIVATIVES = {
    "jacfwd": jax.jacfwd(small_function),
    "jacrev": jax.jacrev(small_function),
    "hessian": jax.hessian(scalar_function),
}


@MODES
@pytest.mark.parametrize("name", list(DERIVATIVES))
def test_jacobians_and_hessian(name, jit):
    x_np = np.linspace(-1, 1, 7, dtype=np.float32)
    fn = maybe_jit(DERIVATIVES[name], jit)
    assert_trees_match(fn(jask.DiskArray.from_numpy(x_np)), fn(jnp.asarray(x_np)), RTOL)


# ---------------------------------------------------------------------------------------------
# Control flow with DiskArray carries


def scan_loop(w):
    def body(carry, scale):
        carry = 0.9 * carry + scale * jnp.tanh(carry)
        return carry, jnp.sum(carry)

    return lax.scan(body, w, jnp.asarray([0.5, -0.25, 1.0], jnp.float32))


def fori(w):
    return lax.fori_loop(0, 3, lambda i, c: 0.5 * c + jnp.sin(c) * i, w)


def while_loop(w):
    def body(state):
        i, c = state
        return i + 1, c * 0.5 + 1.0

    return lax.while_loop(lambda state: state[0] < 3, body, (jnp.asarray(0), w))


def cond_both(w):
    return (
        lax.cond(True, lambda c: 2.0 * c, lambda c: c - 1.0, w),
        lax.cond(jnp.sum(w) > 1e6, lambda c: 2.0 * c, lambda c: c - 1.0, w),
    )


def switch(w):
    branches = [lambda c: c + 1.0, lambda c: c * c, lambda c: jnp.exp(c)]
    return tuple(lax.switch(i, branches, w) for i in (0, 1, 2, jnp.asarray(2)))


CONTROL_FLOW = {
    "scan": scan_loop,
    "fori_loop": fori,
    "while_loop": while_loop,
    "cond": cond_both,
    "switch": switch,
}


@MODES
@pytest.mark.parametrize("name", list(CONTROL_FLOW))
def test_control_flow_with_a_disk_carry(name, jit):
    w_np = a_tree()["w"]
    fn = maybe_jit(CONTROL_FLOW[name], jit)
    out = fn(jask.DiskArray.from_numpy(w_np))
    assert_trees_match(out, fn(jnp.asarray(w_np)), RTOL)
    carries = [leaf for leaf in jax.tree.leaves(out) if np.shape(leaf) == w_np.shape]
    assert carries
    assert_on_disk(carries, name)


def test_unpacking_a_traced_diskarray():
    """`a, b = x` inside jit, as optax's zoom linesearch does with a 2-vector."""
    x_np = np.asarray([1.5, -2.0], np.float32)

    def unpack(x):
        a, b = x
        return a * b

    assert_trees_match(jax.jit(unpack)(jask.DiskArray.from_numpy(x_np)), unpack(x_np), RTOL)
