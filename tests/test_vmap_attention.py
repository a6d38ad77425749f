"""Attention on DiskArrays, whose masks are selects under vmap: jax.nn.dot_product_attention
(mask, is_causal, bias; DiskArray and in-memory q/k/v mixed), flax nnx.MultiHeadAttention
(nnx.grad with DiskArray params) and equinox MultiheadAttention (vmapped over the sequence
by design; eqx.filter_grad): values, dtypes and gradients against the same functions on
jax.Arrays, and traces that do not grow with the vmapped length."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import jask

from conftest import assert_close, assert_trees_match

B, T, S, N, H = 2, 5, 7, 2, 3  # batch, query and key lengths, heads, head size
RNG = np.random.default_rng(21)
Q = RNG.standard_normal((B, T, N, H)).astype(np.float32)
K_ = RNG.standard_normal((B, S, N, H)).astype(np.float32)
V = RNG.standard_normal((B, S, N, H)).astype(np.float32)
MASK = RNG.uniform(size=(B, N, T, S)) > 0.4
MASK[..., 0] = True  # every query sees a key
BIAS = RNG.standard_normal((B, N, T, S)).astype(np.float32)


@pytest.fixture(autouse=True)
def budget(small_budget):
    small_budget("16KB")


def _disk_leaves(tree):
    """`tree` with its float arrays of one or more axes as DiskArrays."""
    return jax.tree.map(
        lambda a: (
            jask.DiskArray.from_numpy(np.asarray(a))
            if isinstance(a, jax.Array) and a.ndim and a.dtype == jnp.float32
            else a
        ),
        tree,
    )


MASKS = {
    "none": {},
    "mask": {"mask": MASK},
    "causal": {"is_causal": True},
    "bias": {"bias": BIAS},
    "bias_and_causal": {"bias": BIAS, "is_causal": True},
}


@pytest.mark.parametrize(
    "masking, on_disk",
    [(m, "qkv") for m in MASKS] + [("mask", "q"), ("bias_and_causal", "kv")],
)
def test_dot_product_attention(masking, on_disk):
    kwargs = {k: v for k, v in MASKS[masking].items() if k != "bias"}

    def loss(q, k, v, bias=None):
        out = jax.nn.dot_product_attention(q, k, v, bias=bias, **kwargs)
        return out, jnp.sum(out**2)

    args = dict(q=Q, k=K_, v=V)
    disk = {
        n: jask.DiskArray.from_numpy(a) if n in on_disk else jnp.asarray(a) for n, a in args.items()
    }
    if "bias" in MASKS[masking]:
        args["bias"] = BIAS
        disk["bias"] = jask.DiskArray.from_numpy(BIAS)
    memory = {n: jnp.asarray(a) for n, a in args.items()}
    out, _ = loss(**disk)
    expected, _ = jax.jit(loss)(**memory)
    assert out.dtype == expected.dtype
    assert_close(np.asarray(out), expected)
    argnums = tuple(range(len(args)))
    grad = jax.grad(lambda *a: loss(*a)[1], argnums=argnums)
    got = jax.jit(grad)(*disk.values())
    want = jax.jit(grad)(*memory.values())
    for name, g, w in zip(args, got, want, strict=True):
        assert isinstance(g, jask.DiskArray) == isinstance(disk[name], jask.DiskArray), name
        assert g.dtype == w.dtype
        assert_close(np.asarray(g), w, rtol=1e-4)


def test_dot_product_attention_trace_does_not_grow_with_the_batch():
    def counts(n):
        q = jask.DiskArray.from_numpy(RNG.standard_normal((n, T, N, H)).astype(np.float32))
        f = lambda q: jax.nn.dot_product_attention(q, q, q, is_causal=True)  # noqa: E731
        return len(jax.make_jaxpr(jax.vmap(f))(q).eqns)

    assert counts(3) == counts(50)


def test_flax_multi_head_attention_with_diskarray_params():
    x = jnp.asarray(RNG.standard_normal((B, T, 6)).astype(np.float32))
    model = nnx.MultiHeadAttention(
        num_heads=2, in_features=6, qkv_features=4, decode=False, rngs=nnx.Rngs(0)
    )
    graphdef, state = nnx.split(model)
    on_disk = nnx.merge(graphdef, _disk_leaves(state))
    loss = lambda m: jnp.sum(jnp.tanh(m(x, mask=MASK[:, :, :, :T])) ** 2)  # noqa: E731
    assert_close(np.asarray(on_disk(x)), nnx.jit(lambda m: m(x))(model), rtol=1e-4)
    want = nnx.state(nnx.jit(nnx.grad(loss))(model))
    got = nnx.state(nnx.jit(nnx.grad(loss))(on_disk))
    assert all(isinstance(g, jask.DiskArray) for g in jax.tree.leaves(got))
    assert_trees_match(jax.tree.map(np.asarray, got), want)


def test_equinox_multihead_attention():
    """eqx's attention vmaps its projections over the sequence: DiskArray weights and inputs."""
    model = eqx.nn.MultiheadAttention(num_heads=2, query_size=6, key=jax.random.key(1))
    on_disk = _disk_leaves(model)
    x = RNG.standard_normal((T, 6)).astype(np.float32)
    mask = jnp.asarray(np.tril(np.ones((T, T), bool)))
    loss = lambda m, x: jnp.sum(m(x, x, x, mask=mask) ** 2)  # noqa: E731
    want_value = eqx.filter_jit(loss)(model, jnp.asarray(x))
    got_value = loss(on_disk, jask.DiskArray.from_numpy(x))
    assert got_value.dtype == want_value.dtype
    assert_close(got_value, want_value, rtol=1e-4)
    want = eqx.filter_jit(eqx.filter_grad(loss))(model, jnp.asarray(x))
    got = eqx.filter_jit(eqx.filter_grad(loss))(on_disk, jask.DiskArray.from_numpy(x))
    assert all(isinstance(g, jask.DiskArray) for g in jax.tree.leaves(got))
    assert_trees_match(jax.tree.map(np.asarray, got), want)

    def counts(length):
        xs = jask.DiskArray.from_numpy(RNG.standard_normal((length, 6)).astype(np.float32))
        return len(jax.make_jaxpr(lambda x: on_disk(x, x, x))(xs).eqns)

    assert counts(3) == counts(50)
