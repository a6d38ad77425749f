"""Where should Jask's block arithmetic run: in the C++ engine, or in XLA?

Times the in-memory part of one block, the same block both ways, on this
machine: an elementwise map (x - y), a reduction (sum), and a matmul tile.
The XLA column includes copying the block into an XLA buffer (what an FFI
read into an XLA-side loop would cost); the C++ column runs the engine's own
program interpreter (src/engine/program/program.cpp, the code every elementwise op and
full reduction runs) and OpenBLAS on the buffers the pipeline already holds.

    python -m bench.block_math
"""

import time

import jax
import jax.numpy as jnp
import numpy as np

from jask import _engine


def best_of(fn, repeat=7):
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main():
    rng = np.random.default_rng(0)
    rows = []
    for mib in (4, 32):
        n = mib * (1 << 20) // 4
        x, y = rng.standard_normal(n, np.float32), rng.standard_normal(n, np.float32)
        out = np.empty_like(x)
        sub = jax.jit(jnp.subtract)
        total = jax.jit(jnp.sum)
        xj, yj = jnp.asarray(x), jnp.asarray(y)
        cxx_map = best_of(lambda: _engine.block_map("sub", x, y, out))
        xla_map = best_of(lambda: sub(jnp.asarray(x), jnp.asarray(y)).block_until_ready())
        xla_map_only = best_of(lambda: sub(xj, yj).block_until_ready())
        cxx_sum = best_of(lambda: _engine.block_sum(x))
        xla_sum = best_of(lambda: total(jnp.asarray(x)).block_until_ready())
        xla_sum_only = best_of(lambda: total(xj).block_until_ready())
        gb = x.nbytes / 1e9
        rows.append(
            (
                f"x - y, {mib} MiB block",
                2 * gb / cxx_map,
                2 * gb / xla_map,
                2 * gb / xla_map_only,
                "GB/s",
            )
        )
        rows.append(
            (f"sum(x), {mib} MiB block", gb / cxx_sum, gb / xla_sum, gb / xla_sum_only, "GB/s")
        )
    for side in (512, 1024):
        a = rng.standard_normal((side, side), np.float32)
        b = rng.standard_normal((side, side), np.float32)
        c = np.empty((side, side), np.float32)
        dot = jax.jit(jnp.dot)
        aj, bj = jnp.asarray(a), jnp.asarray(b)
        cxx = best_of(lambda: _engine.block_gemm(a, b, c, side, side, side))
        xla = best_of(lambda: dot(jnp.asarray(a), jnp.asarray(b)).block_until_ready())
        xla_only = best_of(lambda: dot(aj, bj).block_until_ready())
        flops = 2 * side**3 / 1e9
        rows.append(
            (f"matmul tile {side}^3", flops / cxx, flops / xla, flops / xla_only, "GFLOP/s")
        )
    print(
        f"{'block':26} {'C++ engine':>11} {'XLA+copy in':>12} {'XLA alone':>10}  unit     C++/XLA+copy"
    )
    for name, cxx, xla, xla_only, unit in rows:
        print(f"{name:26} {cxx:11.2f} {xla:12.2f} {xla_only:10.2f}  {unit:8} {cxx / xla:6.2f}")
    print(f"OpenBLAS loaded: {_engine.blas_loaded()}")


if __name__ == "__main__":
    main()
