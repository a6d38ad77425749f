"""The engine's typed call: both entry points decode an op's named parameters through the
kernel's schema, and a malformed call names the kernel and the field."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jask
from jask import _engine
from jask._dtypes import dtype_code
from jask.ops import OPS


@pytest.fixture
def x(rng):
    return jask.DiskArray.from_numpy(rng.uniform(size=(4, 6)).astype(np.float32))


def test_every_op_kernel_is_registered():
    registered = {name for _, name in _engine.kernel_schemas()}
    kernels = {cls.kernel for cls in OPS if getattr(cls, "kernel", None)}
    assert kernels <= registered, kernels - registered


def test_transpose_schema_is_its_params():
    assert _engine.kernel_schemas()[("array", "transpose")] == [("perm", "an int64 array")]


@pytest.mark.parametrize(
    "params, needle",
    [
        ({}, "field 'perm' is missing"),
        ({"perm": "1, 0"}, "field 'perm' must be an int64 array, got a string"),
        ({"perm": (1, 0), "axes": (0,)}, "field 'axes' is not a parameter"),
    ],
)
def test_malformed_eager_call_names_kernel_and_field(x, params, needle):
    with pytest.raises(ValueError, match=f"kernel 'transpose': {needle}"):
        _engine.array_op("transpose", [x.handle], [], [], params)


def test_malformed_jitted_call_names_kernel_and_field(x):
    call = jax.ffi.ffi_call(
        "jask_array_op", jax.ShapeDtypeStruct((), jnp.int32), has_side_effect=True
    )
    run = jax.jit(lambda h: call(h, kernel="transpose", num_handles=np.int64(1), perm=np.int64(1)))
    with pytest.raises(Exception, match="kernel 'transpose': field 'perm' must be an int64 array"):
        jax.block_until_ready(run(jnp.int32(x.handle)))


def test_unknown_kernel_is_rejected(x):
    with pytest.raises(ValueError, match="unknown array kernel 'frobnicate'"):
        _engine.array_op("frobnicate", [x.handle], [], [], {})
    with pytest.raises(ValueError, match="unknown scalar kernel 'transpose' .*array results"):
        _engine.scalar_op("transpose", [x.handle], [], [], {"perm": (1, 0)})


def test_a_failed_call_leaves_no_array_behind(x):
    """from_in_memory with a buffer of the wrong size: the error names both sizes, and the array
    it had created (a handle and a scratch file) is freed, not leaked."""
    before = _engine.live_arrays()
    short = np.zeros(5, np.float32).view(np.uint8)
    params = {"dtype": dtype_code(np.float32), "shape": (2, 3)}
    with pytest.raises(ValueError, match=r"buffer of 20 bytes does not match float32\[2,3\]"):
        _engine.array_op("from_in_memory", [], [], [short], params)
    assert _engine.live_arrays() == before
