"""The seed pipeline: an MSE loss over disk-backed matrices, its gradients under
jax.jit(jax.grad(...)), and five optax.sgd steps that update `a` in place."""

import jax
import numpy as np
import optax

import jask


def mse_loss(a, b, c, target):
    z = jask.dot(jask.dot(a, b), c)
    return jask.sum(jask.square(jask.sub(z, target)))


def numpy_gradients(A, B, C, T):
    """Hand-derived gradients of sum((A B C - T)^2)."""
    R = 2.0 * (A @ B @ C - T)
    return R @ (B @ C).T, A.T @ R @ C.T, (A @ B).T @ R


def main():
    np.random.seed(0)
    A = np.random.rand(4, 6).astype(np.float32)
    B = np.random.rand(6, 4).astype(np.float32)
    C = np.random.rand(4, 3).astype(np.float32)
    T = np.random.rand(4, 3).astype(np.float32)
    jask.set_memory_budget("1GB")
    a, b, c, t = (jask.DiskArray.from_numpy(m) for m in (A, B, C, T))

    grad_fn = jax.jit(jax.grad(mse_loss, argnums=(0, 1, 2)))
    expected = numpy_gradients(A, B, C, T)
    agree = all(
        np.allclose(np.asarray(g), e, rtol=1e-5, atol=1e-5)
        for g, e in zip(grad_fn(a, b, c, t), expected)
    )

    opt = optax.sgd(0.001)
    state = opt.init(a)
    for step in range(5):
        print(f"step {step}: loss = {float(mse_loss(a, b, c, t)):.4f}")
        grad_a = grad_fn(a, b, c, t)[0]
        updates, state = opt.update(grad_a, state)
        a = a.update_(a + updates)

    print("gradients of a, b and c agree with NumPy's hand-derived ones:", agree)
    if not agree:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
