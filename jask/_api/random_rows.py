"""Rows [start, start + count) of `jax.random.bits(key, shape)`, computed alone, with exactly the
values JAX computes for the whole array (what `jask.on_disk` writes block by block).

JAX's threefry2x32 generator is counter based: each 32-bit word of the result is the threefry
hash of the key and counters that depend only on the word's flat position. Which counters,
per the `jax_threefry_partitionable` flag (jax/_src/random/threefry2x32.py):
- on (JAX's default): the element at flat position i is `h1 ^ h2` of
  `threefry2x32(key, (i >> 32, i & 0xffffffff))` (`_threefry_random_bits_partitionable`;
  64-bit elements are `h1 << 32 | h2`, 8- and 16-bit ones `h1 ^ h2` truncated);
- off: a stream of 32-bit words w[0..W) (W = ceil(size * bits / 32)) hashed in pairs: with
  H = ceil(W / 2), w[j] for j < H is output 0 of `threefry2x32(key, (j, j + H))` (counter
  j + H is 0 where it reaches W: the padding of an odd W) and w[j] for j >= H output 1 of
  `threefry2x32(key, (j - H, j))`; 8- and 16-bit elements are w's words cut in order from the
  low bits, 64-bit ones `w[i] << 32 | w[i + size]` (`_threefry_random_bits_original`; JAX
  splits streams of 2^32 - 1 words or more into sub-keys, which are not computed here).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend.random import threefry2x32_p

UINT = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
_MAX_WORDS = np.iinfo(np.uint32).max  # JAX's original scheme splits the key past this many words


def check_supported(impl_name: str, bit_width: int, shape, partitionable: bool) -> None:
    """Raises NotImplementedError unless `bits_rows` computes this generator's bits exactly."""
    if impl_name != "threefry2x32":
        raise NotImplementedError(
            f"jask.on_disk: random bits of the {impl_name!r} generator cannot be computed a "
            f"block at a time (only threefry2x32's, JAX's default, are counter based); "
            f"make the key with jax.random.key(seed) or jax.random.PRNGKey(seed)"
        )
    size = int(np.prod(shape, dtype=np.int64))
    if not partitionable and (size >= 2**32 or -(-bit_width * size // 32) >= _MAX_WORDS):
        raise NotImplementedError(
            f"jask.on_disk: with jax_threefry_partitionable off, {size} random {bit_width}-bit "
            f"values are more than jask.on_disk computes (fewer than 2^32 values in fewer than "
            f"2^32 - 1 words; past that JAX splits the key into sub-keys); turn the flag on "
            f"(JAX's default) or ask for fewer values"
        )


def bits_rows(key_data, start, count: int, shape, bit_width: int, partitionable: bool):
    """Rows [start, start + count) of `jax.random.bits` of a threefry key whose raw data
    (uint32[2]) is `key_data`, for the full shape `shape`; `start` may be traced (int32)."""
    row = int(np.prod(shape[1:], dtype=np.int64))
    k1, k2 = key_data[0], key_data[1]
    if partitionable:
        bits = _partitionable(k1, k2, start, count * row, row, bit_width)
    else:
        bits = _original(k1, k2, start, count * row, row, shape, bit_width)
    return bits.reshape((count, *shape[1:]))


def _flat_positions(start, n: int, row: int):
    """The 64-bit flat positions start * row + [0, n) as (high, low) uint32 words."""
    s = jnp.asarray(start, jnp.uint32)
    r = np.uint32(row)
    base_hi, base_lo = lax.mulhi(s, r), s * r
    lo = base_lo + lax.iota(np.uint32, n)
    hi = base_hi + (lo < base_lo).astype(np.uint32)  # the carry out of the low word
    return hi, lo


def _partitionable(k1, k2, start, n, row, bit_width):
    hi, lo = _flat_positions(start, n, row)
    h1, h2 = threefry2x32_p.bind(k1, k2, hi, lo)
    dtype = UINT[bit_width]
    if bit_width == 64:
        return (h1.astype(dtype) << dtype(32)) | h2.astype(dtype)
    if bit_width == 32:
        return h1 ^ h2
    return (h1 ^ h2).astype(dtype)


def _original(k1, k2, start, n, row, shape, bit_width):
    size = int(np.prod(shape, dtype=np.int64))
    flat = jnp.asarray(start, jnp.uint32) * np.uint32(row) + lax.iota(np.uint32, n)
    dtype = UINT[bit_width]
    if bit_width == 64:  # W = 2 * size, H = size: both halves of one hash
        o0, o1 = threefry2x32_p.bind(k1, k2, flat, flat + np.uint32(size))
        return (o0.astype(dtype) << dtype(32)) | o1.astype(dtype)
    words = -(-bit_width * size // 32)
    if bit_width == 32:
        return _word(k1, k2, flat, words)
    per_word = 32 // bit_width
    word = _word(k1, k2, flat // np.uint32(per_word), words)
    shift = np.uint32(bit_width) * (flat % np.uint32(per_word))
    return ((word >> shift) & np.uint32((1 << bit_width) - 1)).astype(dtype)


def _word(k1, k2, j, words: int):
    """Words j of the original scheme's stream of `words` 32-bit words."""
    half = np.uint32(-(-words // 2))
    low = j < half
    first = jnp.where(low, j, j - half)
    second = first + half
    second = jnp.where(second < np.uint32(words), second, np.uint32(0))
    o0, o1 = threefry2x32_p.bind(k1, k2, first, second)
    return jnp.where(low, o0, o1)
