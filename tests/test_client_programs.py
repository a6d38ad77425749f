"""Client programs written as the libraries' own docs and examples write them (flax nnx and linen
transformers, CNN classifiers, a U-Net, recurrent nets, data pipelines of uint8 images and uint16
token files, training habits), each run once on DiskArrays (data and/or weights) at a small budget
and once on jax.Arrays: results, dtypes and shapes must match, gradients w.r.t. DiskArrays are
DiskArrays. tests/test_client_science.py has the classical numerics (PCA, ridge, k-means, GMM,
diffrax, lineax) and notebook habits.

A program that fails for a known missing feature is a strict xfail naming the error, so that
the fix flips it."""

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from flax.training import train_state
from jax import lax

import jask

from conftest import assert_trees_match

# 64KB: the programs' data and weights (a few KB to a few hundred KB) are many blocks each.
BUDGET = "64KB"
RTOL = 2e-4


@pytest.fixture(autouse=True)
def small_blocks(small_budget):
    small_budget(BUDGET)


# Known missing features: each program that needs one is a strict xfail, so a fix flips it.
def missing(reason):
    return pytest.mark.xfail(strict=True, reason=reason)


def disk(a):
    return jask.DiskArray.from_numpy(np.asarray(a))


def disk_tree(tree):
    return jax.tree.map(disk, tree)


def assert_on_disk(tree, what=""):
    leaves = jax.tree_util.tree_leaves_with_path(tree)
    assert leaves, what
    for path, leaf in leaves:
        assert isinstance(leaf, jask.DiskArray), (what, jax.tree_util.keystr(path), type(leaf))


def nnx_params_on_disk(model):
    """The same module with its nnx.Param values written to DiskArrays (as loading a checkpoint
    onto disk would); its other state (rng counters) as it was."""
    graphdef, params, rest = nnx.split(nnx.clone(model), nnx.Param, ...)
    return nnx.merge(graphdef, disk_tree(params), rest)


def linen_init(model, *args, seed=0, **kwargs):
    """model.init's variables, drawn with NumPy from the shapes jax.eval_shape gives (jitting
    init compiles a random draw per parameter: tens of seconds for a U-Net on CPU): kernels
    scaled by 1/sqrt(fan-in), scales and variances near one, biases and means small."""
    rng = np.random.default_rng(seed)

    def draw(path, leaf):
        name = jax.tree_util.keystr(path[-1:])
        if "scale" in name or "var" in name:
            return (1 + 0.1 * rng.uniform(-1, 1, leaf.shape)).astype(leaf.dtype)
        fan_in = int(np.prod(leaf.shape[:-1])) if len(leaf.shape) > 1 else 100
        return (rng.normal(size=leaf.shape) / np.sqrt(fan_in)).astype(leaf.dtype)

    shapes = jax.eval_shape(functools.partial(model.init, **kwargs), jax.random.key(0), *args)
    return jax.tree.map(jnp.asarray, jax.tree_util.tree_map_with_path(draw, shapes))


def nnx_copy(model):
    """An independent copy (its own rng counters: nnx.split/merge would share them)."""
    return nnx.clone(model)


def images(shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


def labels(n, classes, seed=1):
    return np.random.default_rng(seed).integers(0, classes, size=n).astype(np.int32)


# ---------------------------------------------------------------------------------------------
# flax nnx: a pre-LayerNorm transformer block classifier, trained with nnx.Optimizer


class TransformerBlock(nnx.Module):
    def __init__(self, dim, heads, *, rngs):
        self.ln1 = nnx.LayerNorm(dim, rngs=rngs)
        self.attn = nnx.MultiHeadAttention(
            num_heads=heads, in_features=dim, decode=False, rngs=rngs
        )
        self.ln2 = nnx.LayerNorm(dim, rngs=rngs)
        self.fc1 = nnx.Linear(dim, 4 * dim, rngs=rngs)
        self.fc2 = nnx.Linear(4 * dim, dim, rngs=rngs)
        self.dropout = nnx.Dropout(0.1, rngs=rngs)

    def __call__(self, x, mask=None):
        x = x + self.dropout(self.attn(self.ln1(x), mask=mask))
        h = nnx.gelu(self.fc1(self.ln2(x)))
        return x + self.dropout(self.fc2(h))


class TinyViT(nnx.Module):
    def __init__(self, dim=16, heads=2, classes=5, causal=False, *, rngs):
        self.block = TransformerBlock(dim, heads, rngs=rngs)
        self.ln = nnx.LayerNorm(dim, rngs=rngs)
        self.head = nnx.Linear(dim, classes, rngs=rngs)
        self.causal = causal

    def __call__(self, x):
        mask = nnx.make_causal_mask(jnp.ones(x.shape[:2])) if self.causal else None
        x = self.block(x, mask=mask)
        return self.head(self.ln(x).mean(axis=1))


@pytest.mark.parametrize("causal", [False, True], ids=["no_mask", "causal_mask"])
def test_nnx_transformer_block_training_step(causal):
    x_np, y_np = images((8, 12, 16)), labels(8, 5)
    model = TinyViT(causal=causal, rngs=nnx.Rngs(0))
    model.eval()  # dropout off, as when evaluating or fine-tuning deterministically
    # (SGD, not Adam: the key projection's bias has a zero gradient up to rounding, which Adam
    # would scale up to full steps of either sign.)

    def loss_fn(model, x, y):
        logits = model(x)
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

    @nnx.jit
    def train_step(model, optimizer, x, y):
        loss, grads = nnx.value_and_grad(loss_fn)(model, x, y)
        optimizer.update(model, grads)
        return loss, grads

    def train(model, x, y):
        optimizer = nnx.Optimizer(model, optax.sgd(0.1, momentum=0.9), wrt=nnx.Param)
        losses = []
        for _ in range(2):
            loss, grads = train_step(model, optimizer, x, y)
            losses.append(loss)
        return losses, grads, nnx.state(model, nnx.Param), nnx.state(optimizer.opt_state)

    out = train(nnx_params_on_disk(model), disk(x_np), jnp.asarray(y_np))
    ref = train(nnx_copy(model), jnp.asarray(x_np), jnp.asarray(y_np))
    assert_trees_match(out, ref, RTOL)
    assert_on_disk(out[1], "grads")
    assert_on_disk(out[2], "params")


# ---------------------------------------------------------------------------------------------
# flax linen: a transformer encoder language model, init/apply, optax SGD with clipping


class EncoderLayer(nn.Module):
    dim: int
    heads: int

    @nn.compact
    def __call__(self, x, deterministic=True):
        y = nn.LayerNorm()(x)
        y = nn.MultiHeadDotProductAttention(num_heads=self.heads)(y, y)
        x = x + nn.Dropout(0.1)(y, deterministic=deterministic)
        y = nn.LayerNorm()(x)
        y = nn.Dense(4 * self.dim)(y)
        y = nn.gelu(y)
        y = nn.Dense(self.dim)(y)
        return x + nn.Dropout(0.1)(y, deterministic=deterministic)


class Encoder(nn.Module):
    vocab: int = 40
    dim: int = 16
    heads: int = 2
    layers: int = 2
    max_len: int = 32

    @nn.compact
    def __call__(self, tokens, deterministic=True):
        x = nn.Embed(self.vocab, self.dim)(tokens)
        pos = self.param("pos", nn.initializers.normal(0.02), (self.max_len, self.dim))
        x = x + pos[None, : tokens.shape[1]]
        for _ in range(self.layers):
            x = EncoderLayer(self.dim, self.heads)(x, deterministic)
        return nn.Dense(self.vocab)(nn.LayerNorm()(x))


def test_linen_transformer_encoder_training():
    tokens_np = np.random.default_rng(2).integers(0, 40, size=(6, 10)).astype(np.int32)
    model = Encoder(layers=1)
    params = linen_init(model, jnp.asarray(tokens_np))
    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.sgd(0.1, momentum=0.9))

    @jax.jit
    def train_step(params, opt_state, tokens):
        def loss_fn(params):
            logits = model.apply(params, tokens[:, :-1])
            return optax.softmax_cross_entropy_with_integer_labels(logits, tokens[:, 1:]).mean()

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss, grads

    def train(params, tokens):
        opt_state = tx.init(params)
        losses = []
        for _ in range(2):
            params, opt_state, loss, grads = train_step(params, opt_state, tokens)
            losses.append(loss)
        logits = model.apply(params, tokens)
        return losses, grads, params, logits

    out = train(disk_tree(params), jnp.asarray(tokens_np))
    ref = train(params, jnp.asarray(tokens_np))
    assert_trees_match(out, ref, RTOL)
    assert_on_disk(out[1], "grads")
    assert_on_disk(out[2], "params")


def test_linen_encoder_on_token_ids_stored_on_disk():
    tokens_np = np.random.default_rng(2).integers(0, 40, size=(6, 10)).astype(np.int32)
    model = Encoder(layers=1)
    params = linen_init(model, jnp.asarray(tokens_np))
    apply = jax.jit(model.apply)
    out = apply(disk_tree(params), disk(tokens_np))
    assert_trees_match(out, apply(params, jnp.asarray(tokens_np)), RTOL)
    assert isinstance(out, jask.DiskArray)


# ---------------------------------------------------------------------------------------------
# CNN classifiers: nnx (Conv, avg_pool, Linear) and linen (Conv, max_pool, Dense)


class NnxCNN(nnx.Module):
    def __init__(self, *, rngs):
        self.conv1 = nnx.Conv(1, 8, kernel_size=(3, 3), rngs=rngs)
        self.conv2 = nnx.Conv(8, 8, kernel_size=(3, 3), rngs=rngs)
        self.linear = nnx.Linear(3 * 3 * 8, 10, rngs=rngs)

    def __call__(self, x):
        x = nnx.avg_pool(nnx.relu(self.conv1(x)), window_shape=(2, 2), strides=(2, 2))
        x = nnx.max_pool(nnx.relu(self.conv2(x)), window_shape=(2, 2), strides=(2, 2))
        x = x.reshape(x.shape[0], -1)
        return self.linear(x)


def test_nnx_cnn_classifier_training_step():
    x_np, y_np = images((16, 12, 12, 1)), labels(16, 10)
    model = NnxCNN(rngs=nnx.Rngs(0))

    def loss_fn(model, x, y):
        logits = model(x)
        loss = optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()
        return loss, logits

    @nnx.jit
    def train_step(model, optimizer, metrics, x, y):
        grad_fn = nnx.value_and_grad(loss_fn, has_aux=True)
        (loss, logits), grads = grad_fn(model, x, y)
        metrics.update(loss=loss, logits=logits, labels=y)
        optimizer.update(model, grads)
        return grads

    def train(model, x, y):
        optimizer = nnx.Optimizer(model, optax.sgd(0.05, momentum=0.9), wrt=nnx.Param)
        metrics = nnx.MultiMetric(accuracy=nnx.metrics.Accuracy(), loss=nnx.metrics.Average("loss"))
        for _ in range(2):
            grads = train_step(model, optimizer, metrics, x, y)
        return metrics.compute(), grads, nnx.state(model, nnx.Param), model(x)

    out = train(nnx_params_on_disk(model), disk(x_np), jnp.asarray(y_np))
    ref = train(nnx_copy(model), jnp.asarray(x_np), jnp.asarray(y_np))
    assert_trees_match(out, ref, RTOL)
    assert_on_disk(out[1], "grads")


class LinenCNN(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.Conv(features=8, kernel_size=(3, 3))(x)
        x = nn.relu(x)
        x = nn.max_pool(x, window_shape=(2, 2), strides=(2, 2))
        x = nn.Conv(features=8, kernel_size=(3, 3), padding="VALID")(x)
        x = nn.relu(x)
        x = nn.avg_pool(x, window_shape=(2, 2), strides=(2, 2))
        x = x.reshape((x.shape[0], -1))
        x = nn.Dense(features=16)(x)
        x = nn.relu(x)
        return nn.Dense(features=10)(x)


def test_linen_cnn_classifier_train_state():
    x_np, y_np = images((16, 14, 14, 1), seed=3), labels(16, 10, seed=4)
    cnn = LinenCNN()
    params = linen_init(cnn, jnp.ones((1, 14, 14, 1)))["params"]

    @jax.jit
    def train_step(state, batch):
        def loss_fn(params):
            logits = state.apply_fn({"params": params}, batch["image"])
            loss = optax.softmax_cross_entropy_with_integer_labels(logits, batch["label"])
            return loss.mean(), logits

        (loss, logits), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
        accuracy = jnp.mean(jnp.argmax(logits, -1) == batch["label"])
        return state.apply_gradients(grads=grads), loss, accuracy, grads

    def train(params, batch):
        state = train_state.TrainState.create(
            apply_fn=cnn.apply, params=params, tx=optax.adam(1e-2)
        )
        history = []
        for _ in range(2):
            state, loss, accuracy, grads = train_step(state, batch)
            history.append((loss, accuracy))
        return history, grads, state.params

    out = train(disk_tree(params), {"image": disk(x_np), "label": jnp.asarray(y_np)})
    ref = train(params, {"image": jnp.asarray(x_np), "label": jnp.asarray(y_np)})
    assert_trees_match(out, ref, RTOL)
    assert_on_disk(out[1], "grads")


# ---------------------------------------------------------------------------------------------
# A small U-Net (linen): Conv, max_pool, ConvTranspose, concatenated skip connections


class ConvBlock(nn.Module):
    features: int

    @nn.compact
    def __call__(self, x):
        x = nn.relu(nn.Conv(self.features, (3, 3))(x))
        return nn.relu(nn.Conv(self.features, (3, 3))(x))


class UNet(nn.Module):
    @nn.compact
    def __call__(self, x):
        s1 = ConvBlock(4)(x)
        s2 = ConvBlock(8)(nn.max_pool(s1, (2, 2), strides=(2, 2)))
        b = ConvBlock(16)(nn.max_pool(s2, (2, 2), strides=(2, 2)))
        u2 = nn.ConvTranspose(8, (2, 2), strides=(2, 2))(b)
        u2 = ConvBlock(8)(jnp.concatenate([u2, s2], axis=-1))
        u1 = nn.ConvTranspose(4, (2, 2), strides=(2, 2))(u2)
        u1 = ConvBlock(4)(jnp.concatenate([u1, s1], axis=-1))
        return nn.Conv(1, (1, 1))(u1)


def test_linen_unet_segmentation_loss_and_grads():
    x_np = images((4, 16, 16, 2), seed=5)
    mask_np = (images((4, 16, 16, 1), seed=6) > 0).astype(np.float32)
    model = UNet()
    params = linen_init(model, jnp.asarray(x_np[:1]))

    @jax.jit
    def loss_and_grads(params, x, mask):
        def loss_fn(params):
            logits = model.apply(params, x)
            return optax.sigmoid_binary_cross_entropy(logits, mask).mean(), logits

        return jax.value_and_grad(loss_fn, has_aux=True)(params)

    out = loss_and_grads(disk_tree(params), disk(x_np), jnp.asarray(mask_np))
    ref = loss_and_grads(params, jnp.asarray(x_np), jnp.asarray(mask_np))
    assert_trees_match(out, ref, RTOL)
    assert_on_disk(out[1], "grads")


# ---------------------------------------------------------------------------------------------
# Recurrent nets: a hand-written LSTM cell in lax.scan, nnx.RNN(LSTMCell), linen nn.RNN(GRUCell)


def lstm_init(key, inputs, hidden):
    k1, k2 = jax.random.split(key)
    return {
        "wx": jax.random.normal(k1, (inputs, 4 * hidden)) / jnp.sqrt(inputs),
        "wh": jax.random.normal(k2, (hidden, 4 * hidden)) / jnp.sqrt(hidden),
        "b": jnp.zeros((4 * hidden,)),
    }


def lstm_forward(params, xs):
    """xs: (time, batch, features); returns the last hidden state."""
    batch, hidden = xs.shape[1], params["wh"].shape[0]

    def cell(carry, x):
        h, c = carry
        gates = x @ params["wx"] + h @ params["wh"] + params["b"]
        i, f, g, o = jnp.split(gates, 4, axis=-1)
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        h = jax.nn.sigmoid(o) * jnp.tanh(c)
        return (h, c), h

    init = (jnp.zeros((batch, hidden)), jnp.zeros((batch, hidden)))
    (h, _), hs = lax.scan(cell, init, xs)
    return h, hs


def test_scan_lstm_sequence_regression():
    xs_np = images((10, 8, 6), seed=7)
    y_np = images((8, 1), seed=8)
    params = lstm_init(jax.random.key(0), 6, 12)
    params["out"] = jax.random.normal(jax.random.key(1), (12, 1)) * 0.1

    @jax.jit
    def loss_fn(params, xs, y):
        h, _ = lstm_forward(params, xs)
        return jnp.mean((h @ params["out"] - y) ** 2)

    step = jax.jit(jax.value_and_grad(loss_fn))

    def train(params, xs, y):
        losses = []
        for _ in range(2):
            loss, grads = step(params, xs, y)
            params = jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)
            losses.append(loss)
        return losses, grads, params, lstm_forward(params, xs)[1]

    out = train(disk_tree(params), disk(xs_np), jnp.asarray(y_np))
    ref = train(params, jnp.asarray(xs_np), jnp.asarray(y_np))
    assert_trees_match(out, ref, RTOL)
    assert_on_disk(out[1], "grads")


class NnxLSTMClassifier(nnx.Module):
    def __init__(self, *, rngs):
        self.rnn = nnx.RNN(nnx.LSTMCell(6, 12, rngs=rngs))
        self.head = nnx.Linear(12, 3, rngs=rngs)

    def __call__(self, x):  # (batch, time, features)
        return self.head(self.rnn(x)[:, -1])


def test_nnx_rnn_lstm_classifier_grads():
    x_np, y_np = images((8, 15, 6), seed=9), labels(8, 3, seed=10)
    model = NnxLSTMClassifier(rngs=nnx.Rngs(0))

    @nnx.jit
    def loss_and_grads(model, x, y):
        def loss_fn(model):
            return optax.softmax_cross_entropy_with_integer_labels(model(x), y).mean()

        return nnx.value_and_grad(loss_fn)(model)

    out = loss_and_grads(nnx_params_on_disk(model), disk(x_np), jnp.asarray(y_np))
    ref = loss_and_grads(nnx_copy(model), jnp.asarray(x_np), jnp.asarray(y_np))
    assert_trees_match(out, ref, RTOL)
    assert_on_disk(out[1], "grads")


class LinenGRU(nn.Module):
    @nn.compact
    def __call__(self, x):
        h = nn.RNN(nn.GRUCell(features=10))(x)
        return nn.Dense(1)(h[:, -1])


def test_linen_rnn_gru_regression_grads():
    x_np, y_np = images((8, 8, 4), seed=11), images((8, 1), seed=12)
    model = LinenGRU()
    params = linen_init(model, jnp.asarray(x_np))

    @jax.jit
    def loss_and_grads(params, x, y):
        return jax.value_and_grad(lambda p: jnp.mean((model.apply(p, x) - y) ** 2))(params)

    out = loss_and_grads(disk_tree(params), disk(x_np), jnp.asarray(y_np))
    ref = loss_and_grads(params, jnp.asarray(x_np), jnp.asarray(y_np))
    assert_trees_match(out, ref, RTOL)
    assert_on_disk(out[1], "grads")


# ---------------------------------------------------------------------------------------------
# Data pipelines: uint8 images scaled by 1/255 into an equinox MLP; a nanoGPT-style uint16
# token file read by random windows into an nnx language model


def test_equinox_mlp_on_uint8_images():
    eqx = pytest.importorskip("equinox")
    rng = np.random.default_rng(23)
    images_u8 = rng.integers(0, 256, size=(64, 8, 8), dtype=np.uint8)
    y_np = labels(64, 10, seed=24)
    model = eqx.nn.MLP(64, 10, width_size=32, depth=2, key=jax.random.key(0))
    optim = optax.adam(1e-2)

    def loss_fn(model, x, y):
        logits = jax.vmap(model)(x)
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

    @eqx.filter_jit
    def make_step(model, opt_state, images, y):
        x = images.reshape(images.shape[0], -1) / 255.0
        loss, grads = eqx.filter_value_and_grad(loss_fn)(model, x, y)
        updates, opt_state = optim.update(grads, opt_state, eqx.filter(model, eqx.is_array))
        return eqx.apply_updates(model, updates), opt_state, loss

    def train(images, y):
        m, opt_state = model, optim.init(eqx.filter(model, eqx.is_array))
        losses = []
        for _ in range(2):
            m, opt_state, loss = make_step(m, opt_state, images, y)
            losses.append(loss)
        return losses, eqx.filter(m, eqx.is_array), (images[:4] / 255).dtype

    out = train(disk(images_u8), jnp.asarray(y_np))
    ref = train(jnp.asarray(images_u8), jnp.asarray(y_np))
    assert_trees_match(out[:2], ref[:2], RTOL)
    assert out[2] == ref[2] == jnp.float32


class BigramLM(nnx.Module):
    def __init__(self, vocab, dim, *, rngs):
        self.embed = nnx.Embed(vocab, dim, rngs=rngs)
        self.ln = nnx.LayerNorm(dim, rngs=rngs)
        self.lm_head = nnx.Linear(dim, vocab, rngs=rngs)

    def __call__(self, idx):
        return self.lm_head(self.ln(self.embed(idx)))


def test_nanogpt_style_uint16_token_file(tmp_path):
    vocab, block_size, batch_size = 300, 8, 4
    tokens = np.random.default_rng(25).integers(0, vocab, size=5000).astype(np.uint16)
    tokens.tofile(tmp_path / "train.bin")  # as nanoGPT's prepare.py writes it
    data = jask.DiskArray.open(tmp_path / "train.bin", shape=tokens.shape, dtype=np.uint16)
    assert data.dtype == jnp.uint16

    def get_batch(data, key):
        ix = jax.random.randint(key, (batch_size,), 0, len(data) - block_size)
        offsets = ix[:, None] + jnp.arange(block_size)
        x = data[offsets].astype(jnp.int32)
        y = data[offsets + 1].astype(jnp.int32)
        return x, y

    def loss_fn(model, x, y):
        return optax.softmax_cross_entropy_with_integer_labels(model(x), y).mean()

    @nnx.jit
    def train_step(model, optimizer, x, y):
        loss, grads = nnx.value_and_grad(loss_fn)(model, x, y)
        optimizer.update(model, grads)
        return loss

    model = BigramLM(vocab, 16, rngs=nnx.Rngs(0))

    def train(data):
        m = nnx_copy(model)
        optimizer = nnx.Optimizer(m, optax.adamw(1e-2), wrt=nnx.Param)
        losses, batches = [], []
        for step in range(3):
            x, y = get_batch(data, jax.random.key(step))
            batches.append((x, y))
            losses.append(train_step(m, optimizer, x, y))
        return batches, losses, nnx.state(m, nnx.Param)

    assert_trees_match(train(data), train(jnp.asarray(tokens)), RTOL)


# ---------------------------------------------------------------------------------------------
# equinox CNN (Conv2d, MaxPool2d) trained with optax


def test_equinox_cnn_classifier_training_step():
    eqx = pytest.importorskip("equinox")
    x_np, y_np = images((16, 1, 10, 10), seed=26), labels(16, 4, seed=27)
    k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
    model = eqx.nn.Sequential(
        [
            eqx.nn.Conv2d(1, 4, kernel_size=3, key=k1),
            eqx.nn.Lambda(jax.nn.relu),
            eqx.nn.MaxPool2d(kernel_size=2, stride=2),
            eqx.nn.Conv2d(4, 8, kernel_size=3, key=k2),
            eqx.nn.Lambda(jax.nn.relu),
            eqx.nn.Lambda(jnp.ravel),
            eqx.nn.Linear(8 * 2 * 2, 4, key=k3),
        ]
    )
    optim = optax.adamw(1e-2)

    @eqx.filter_jit
    def make_step(model, opt_state, x, y):
        def loss_fn(model):
            logits = jax.vmap(model)(x)
            return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

        loss, grads = eqx.filter_value_and_grad(loss_fn)(model)
        updates, opt_state = optim.update(grads, opt_state, eqx.filter(model, eqx.is_array))
        return eqx.apply_updates(model, updates), opt_state, loss

    def train(x, y):
        m, opt_state = model, optim.init(eqx.filter(model, eqx.is_array))
        losses = []
        for _ in range(2):
            m, opt_state, loss = make_step(m, opt_state, x, y)
            losses.append(loss)
        return losses, eqx.filter(m, eqx.is_array)

    assert_trees_match(train(disk(x_np), jnp.asarray(y_np)), train(x_np, jnp.asarray(y_np)), RTOL)


# ---------------------------------------------------------------------------------------------
# More training habits: dropout in train mode, BatchNorm's batch statistics, per-example
# gradients, hand-written causal attention, bfloat16 compute, rematerialization, Python-loop
# k-means


class DropoutMLP(nnx.Module):
    def __init__(self, *, rngs):
        self.linear1 = nnx.Linear(20, 32, rngs=rngs)
        self.dropout = nnx.Dropout(0.3, rngs=rngs)
        self.linear2 = nnx.Linear(32, 3, rngs=rngs)

    def __call__(self, x):
        return self.linear2(self.dropout(nnx.relu(self.linear1(x))))


def test_nnx_dropout_in_train_mode_training_step():
    """Dropout masks come from the model's nnx.Rngs: the same stream in both runs."""
    x_np, y_np = images((32, 20), seed=31), labels(32, 3, seed=32)
    model = DropoutMLP(rngs=nnx.Rngs(0, dropout=1))
    model.train()

    @nnx.jit
    def train_step(model, optimizer, x, y):
        def loss_fn(model):
            return optax.softmax_cross_entropy_with_integer_labels(model(x), y).mean()

        loss, grads = nnx.value_and_grad(loss_fn)(model)
        optimizer.update(model, grads)
        return loss, grads

    def train(model, x, y):
        optimizer = nnx.Optimizer(model, optax.sgd(0.1), wrt=nnx.Param)
        losses = [train_step(model, optimizer, x, y) for _ in range(3)]
        model.eval()
        return losses, nnx.state(model, nnx.Param), model(x)

    out = train(nnx_params_on_disk(model), disk(x_np), jnp.asarray(y_np))
    ref = train(nnx_copy(model), jnp.asarray(x_np), jnp.asarray(y_np))
    assert_trees_match(out, ref, RTOL)
    assert_on_disk(out[0][-1][1], "grads")


class BatchNormMLP(nn.Module):
    @nn.compact
    def __call__(self, x, train: bool):
        x = nn.Dense(24)(x)
        x = nn.BatchNorm(use_running_average=not train, momentum=0.9)(x)
        x = nn.relu(x)
        return nn.Dense(3)(x)


def test_linen_batchnorm_batch_stats_training():
    x_np, y_np = images((40, 12, 1), seed=33)[..., 0] * 3 + 1, labels(40, 3, seed=34)
    model = BatchNormMLP()
    variables = linen_init(model, jnp.asarray(x_np), train=False)
    tx = optax.sgd(0.1, momentum=0.9)

    @jax.jit
    def train_step(params, batch_stats, opt_state, x, y):
        def loss_fn(params):
            logits, updates = model.apply(
                {"params": params, "batch_stats": batch_stats}, x, True, mutable=["batch_stats"]
            )
            loss = optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()
            return loss, updates["batch_stats"]

        (loss, batch_stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), batch_stats, opt_state, loss

    def train(params, batch_stats, x, y):
        opt_state = tx.init(params)
        losses = []
        for _ in range(2):
            params, batch_stats, opt_state, loss = train_step(params, batch_stats, opt_state, x, y)
            losses.append(loss)
        logits = model.apply({"params": params, "batch_stats": batch_stats}, x, False)
        return losses, params, batch_stats, logits

    params, batch_stats = variables["params"], variables["batch_stats"]
    out = train(disk_tree(params), batch_stats, disk(x_np), jnp.asarray(y_np))
    ref = train(params, batch_stats, jnp.asarray(x_np), jnp.asarray(y_np))
    assert_trees_match(out, ref, RTOL)
    assert_on_disk(out[1], "params")


def test_per_example_gradients_with_vmap():
    """DP-SGD style: per-example gradients by vmap(grad), clipped and averaged."""
    x_np, y_np = images((16, 7), seed=35), images((16,), seed=36)
    params = {"w": images((7,), seed=37), "b": np.float32(0.3)}

    def loss(params, x, y):
        return (jnp.dot(x, params["w"]) + params["b"] - y) ** 2

    @jax.jit
    def private_grad(params, x, y):
        grads = jax.vmap(jax.grad(loss), in_axes=(None, 0, 0))(params, x, y)
        norms = jnp.sqrt(
            sum(jnp.sum(g.reshape(g.shape[0], -1) ** 2, 1) for g in jax.tree.leaves(grads))
        )
        factor = jnp.minimum(1.0, 1.0 / (norms + 1e-6))
        return jax.tree.map(
            lambda g: jnp.mean(g * factor.reshape((-1,) + (1,) * (g.ndim - 1)), 0), grads
        ), norms

    out = private_grad(
        {"w": disk(params["w"]), "b": jnp.asarray(params["b"])}, disk(x_np), disk(y_np)
    )
    ref = private_grad(jax.tree.map(jnp.asarray, params), jnp.asarray(x_np), jnp.asarray(y_np))
    assert_trees_match(out, ref, RTOL)


def causal_self_attention(params, x, heads):
    """GPT-style attention written out: qkv projection, einsum scores, a tril mask, softmax."""
    batch, time, dim = x.shape
    q, k, v = jnp.split(x @ params["qkv"], 3, axis=-1)
    q, k, v = (t.reshape(batch, time, heads, dim // heads) for t in (q, k, v))
    scores = jnp.einsum("bthd,bshd->bhts", q, k) / jnp.sqrt(dim // heads)
    mask = jnp.tril(jnp.ones((time, time), dtype=bool))
    scores = jnp.where(mask[None, None], scores, -jnp.inf)
    weights = jax.nn.softmax(scores, axis=-1)
    out = jnp.einsum("bhts,bshd->bthd", weights, v).reshape(batch, time, dim)
    return out @ params["proj"]


def test_hand_written_causal_attention_grads():
    x_np = images((4, 9, 16), seed=38)
    params = {"qkv": images((16, 48), seed=39) * 0.2, "proj": images((16, 16), seed=40) * 0.2}

    @jax.jit
    def loss_and_grads(params, x):
        def loss_fn(params):
            out = causal_self_attention(params, x, heads=4)
            return jnp.mean(out**2), out

        return jax.value_and_grad(loss_fn, has_aux=True)(params)

    out = loss_and_grads(disk_tree(params), disk(x_np))
    ref = loss_and_grads(params, jnp.asarray(x_np))
    assert_trees_match(out, ref, RTOL)
    assert_on_disk(out[1], "grads")


class RematMLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        for width in (32, 32):
            x = nn.remat(nn.Dense)(width, dtype=jnp.bfloat16)(x)
            x = nn.gelu(x)
        return nn.Dense(4, dtype=jnp.float32)(x)


def test_linen_remat_with_bfloat16_compute():
    """nn.remat layers computing in bfloat16 over float32 params (mixed precision)."""
    x_np, y_np = images((24, 10), seed=41), images((24, 4), seed=42)
    model = RematMLP()
    params = linen_init(model, jnp.asarray(x_np))

    @jax.jit
    def loss_and_grads(params, x, y):
        def loss_fn(params):
            out = model.apply(params, x)
            return jnp.mean((out.astype(jnp.float32) - y) ** 2), out

        return jax.value_and_grad(loss_fn, has_aux=True)(params)

    out = loss_and_grads(disk_tree(params), disk(x_np), jnp.asarray(y_np))
    ref = loss_and_grads(params, jnp.asarray(x_np), jnp.asarray(y_np))
    assert_trees_match(out, ref, 2e-2)  # bfloat16 rounding differs with summation order
    assert_on_disk(out[1], "grads")


class VAE(nn.Module):
    latents: int = 4

    @nn.compact
    def __call__(self, x, key):
        h = nn.relu(nn.Dense(32)(x))
        mean, logvar = nn.Dense(self.latents)(h), nn.Dense(self.latents)(h)
        z = mean + jnp.exp(0.5 * logvar) * jax.random.normal(key, mean.shape)
        recon = nn.Dense(x.shape[-1])(nn.relu(nn.Dense(32)(z)))
        return recon, mean, logvar


def test_linen_vae_elbo_training():
    x_np = (images((32, 20), seed=45) > 0).astype(np.float32)
    model = VAE()
    params = linen_init(model, jnp.asarray(x_np), jax.random.key(0))
    tx = optax.adam(1e-3)

    @jax.jit
    def train_step(params, opt_state, x, key):
        def loss_fn(params):
            recon, mean, logvar = model.apply(params, x, key)
            bce = optax.sigmoid_binary_cross_entropy(recon, x).sum(-1)
            kl = -0.5 * jnp.sum(1 + logvar - mean**2 - jnp.exp(logvar), axis=-1)
            return jnp.mean(bce + kl)

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss, grads

    def train(params, x):
        opt_state, losses = tx.init(params), []
        for key in jax.random.split(jax.random.key(1), 2):
            params, opt_state, loss, grads = train_step(params, opt_state, x, key)
            losses.append(loss)
        return losses, grads, params

    out = train(disk_tree(params), disk(x_np))
    ref = train(params, jnp.asarray(x_np))
    assert_trees_match(out, ref, RTOL)
    assert_on_disk(out[1], "grads")


def test_equinox_attention_block_training_step():
    """eqx.nn.MultiheadAttention + LayerNorm + MLP applied per sequence under jax.vmap."""
    eqx = pytest.importorskip("equinox")
    x_np, y_np = images((6, 7, 16), seed=46), images((6, 16), seed=47)
    k1, k2 = jax.random.split(jax.random.key(0))

    class Block(eqx.Module):
        attention: eqx.nn.MultiheadAttention
        norm: eqx.nn.LayerNorm
        mlp: eqx.nn.MLP

        def __init__(self, key1, key2):
            self.attention = eqx.nn.MultiheadAttention(2, 16, key=key1)
            self.norm = eqx.nn.LayerNorm(16)
            self.mlp = eqx.nn.MLP(16, 16, 32, 1, key=key2)

        def __call__(self, x):
            h = jax.vmap(self.norm)(x)
            x = x + self.attention(h, h, h)
            return jnp.mean(x + jax.vmap(self.mlp)(x), axis=0)

    block = Block(k1, k2)
    optim = optax.sgd(0.05, momentum=0.9)

    @eqx.filter_jit
    def make_step(model, opt_state, x, y):
        def loss_fn(model):
            return jnp.mean((jax.vmap(model)(x) - y) ** 2)

        loss, grads = eqx.filter_value_and_grad(loss_fn)(model)
        updates, opt_state = optim.update(grads, opt_state, eqx.filter(model, eqx.is_array))
        return eqx.apply_updates(model, updates), opt_state, loss, grads

    def train(model, x, y):
        opt_state, losses = optim.init(eqx.filter(model, eqx.is_array)), []
        for _ in range(2):
            model, opt_state, loss, grads = make_step(model, opt_state, x, y)
            losses.append(loss)
        return losses, eqx.filter(grads, eqx.is_array), eqx.filter(model, eqx.is_array)

    on_disk = jax.tree.map(lambda a: disk(a) if eqx.is_array(a) else a, block)
    out = train(on_disk, disk(x_np), jnp.asarray(y_np))
    ref = train(block, jnp.asarray(x_np), jnp.asarray(y_np))
    assert_trees_match(out, ref, RTOL)
    assert_on_disk(out[1], "grads")
