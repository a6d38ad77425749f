"""What is derived from the code is current: README's function and primitive tables and the
re-exports in jask/__init__.py (regenerate both with `python -m jask._docs`)."""

import jax
import jax.numpy as jnp
import numpy as np

import jask
from jask import _docs
from jask._api import numpy as namesakes
from jask._jax import compat
from jask._jax.primitives import RULES
from jask.ops import OPS

from conftest import DEFAULT_BUDGET


def test_readme_tables_are_current():
    text = _docs.README.read_text()
    assert _docs.readme(text) == text, "README's tables are stale: run python -m jask._docs"


def test_init_reexports_are_current():
    text = _docs.INIT.read_text()
    assert _docs.init_module(text) == text, "jask/__init__.py is stale: run python -m jask._docs"


def test_jask_namesakes_are_the_jax_functions():
    for name, fn in namesakes.NAMESAKES.items():
        assert getattr(jask, name) is fn and name in jask.__all__, name
    # so they take in-memory arrays as jnp does (a small reduction is a jax.Array)
    x = jask.DiskArray.from_numpy(np.arange(12, dtype=np.float32).reshape(4, 3))
    m = jask.mean(x, axis=0)
    np.testing.assert_allclose(np.asarray(jask.square(m)), np.square([4.5, 5.5, 6.5]))
    assert jask.square(jnp.float32(3)) == 9


def test_every_primitive_an_op_declares_has_its_rule_and_is_a_lax_primitive():
    names = set(compat.lax_primitive_names())
    for op in OPS:
        for name in op.primitives:
            assert name in names, f"{op.__name__} declares unknown primitive {name!r}"
            assert RULES[name] == op.from_primitive, name
    assert set(RULES) <= names, sorted(set(RULES) - names)


def test_a_primitive_without_a_rule_names_itself_and_the_operands():
    # one large matrix at a small budget: neither in memory nor block by block (xla_route)
    x = jask.DiskArray.from_numpy(np.eye(64, dtype=np.float32))
    unsupported = next(n for n in compat.lax_primitive_names() if n == "cholesky")
    assert unsupported not in RULES
    jask.set_memory_budget("16KB")
    try:
        jax.lax.linalg.cholesky(x)
    except NotImplementedError as error:
        message = str(error)
    else:
        raise AssertionError("cholesky of a large DiskArray should not be supported")
    finally:
        jask.set_memory_budget(DEFAULT_BUDGET)
    assert "jax.lax.cholesky" in message and "float32[64,64] DiskArray" in message
    assert "test_docs.py" in message  # the user's function that called it
