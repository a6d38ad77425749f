"""What is derived from the op declarations is current: README's op table and the re-exports
in jask/__init__.py (regenerate both with `python -m jask._docs`)."""

import jax.numpy as jnp

import jask
from jask import _docs
from jask._api import elementwise
from jask._api.numpy_dispatch import TABLE
from jask.ops import OPS


def test_readme_op_table_is_current():
    text = _docs.README.read_text()
    assert _docs.readme(text) == text, "README's op table is stale: run python -m jask._docs"


def test_init_reexports_every_function_derived_from_a_unary_op():
    text = _docs.INIT.read_text()
    assert _docs.init_module(text) == text, "jask/__init__.py is stale: run python -m jask._docs"
    for name in elementwise.UNARY_FUNCTIONS:
        assert getattr(jask, name) is elementwise.UNARY_FUNCTIONS[name] and name in jask.__all__


def test_declared_numpy_names_dispatch_to_the_ops_function():
    declared = {name for op in OPS for name in op.numpy_names}
    assert {"jnp.sin", "lax.sin", "jnp.cos", "lax.cos", "jnp.sqrt", "nn.relu"} <= declared
    assert declared <= set(TABLE)
    x = jask.DiskArray.from_numpy(jnp.linspace(0.5, 1.5, 7))
    assert isinstance(jnp.sin(x), jask.DiskArray)
