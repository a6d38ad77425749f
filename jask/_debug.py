"""jax.debug.callback and jax.debug.print with DiskArrays, eagerly and inside jax.jit.

What the host sees:
- `jax.debug.callback(f, x)`: `f` receives a DiskArray for each DiskArray argument, the
  concrete array the program computed. It is valid during the callback and after it (it
  holds a reference of its own): read it with `np.asarray(x)`, `jask.materialize`, or any
  eager Jask op.
- `jax.debug.print("{x}", x=x)`: a DiskArray prints as its values (NumPy's format and print
  options) when it fits the memory budget, and as its shape, dtype and file otherwise.

Inside a jitted program a DiskArray is an engine handle; the callback is staged with the
handles (`HostCallback`, an io_callback whose result orders the release of an intermediate
after the host function has returned), and on the host each handle becomes a DiskArray
again.
"""

from __future__ import annotations

import logging
import sys

import jax
import numpy as np
from jax.experimental import io_callback

from . import _runtime
from ._jax import compat
from ._jax.diskarray import DiskArray, DiskArrayTy
from ._jax.primitives import rule


@rule("debug_callback")
def debug_callback(*args, callback, effect, partitioned):
    if not any(compat.is_tracer(a) for a in args):
        callback(*args)  # eager: the arrays are the caller's, valid for the whole call
        return []
    HostCallback(callback, effect, partitioned, *[compat.typeof(a) for a in args])(*args)
    return []


@rule("debug_print")
def debug_print(
    *args,
    fmt,
    ordered,
    partitioned,
    in_tree,
    static_args,
    np_printoptions,
    has_placeholders,
    logging_record,
):
    def show(*dynamic):
        values = [printable(x) for x in dynamic]
        print_args, print_kwargs = _merge(in_tree, values, static_args)
        if has_placeholders:
            with np.printoptions(**dict(np_printoptions)):
                message = fmt.format(*print_args, **print_kwargs)
        else:
            message = " ".join((fmt, *(str(a) for a in print_args)))
        if logging_record is not None:
            logging_record.msg = message
            logging.getLogger("jax._src.debugging").handle(logging_record)
        else:
            sys.stdout.write(message + "\n")

    jax.debug.callback(show, *args, ordered=ordered, partitioned=partitioned)
    return []


def printable(x):
    """What jax.debug.print shows for a value: a DiskArray's values within the memory
    budget, else its description."""
    if not isinstance(x, DiskArray):
        return x
    if x.nbytes <= _runtime.memory_budget():
        return np.asarray(x)
    return _Described(repr(x))


class _Described(str):
    def __format__(self, spec):
        return str(self)


def _merge(in_tree, dynamic, static_args):
    static = dict(static_args)
    dynamic = iter(dynamic)
    leaves = [static[i] if i in static else next(dynamic) for i in range(in_tree.num_leaves)]
    return jax.tree_util.tree_unflatten(in_tree, leaves)


class HostCallback(compat.VJPHiPrimitive):
    """A jax.debug.callback staged with DiskArray operands: the program passes their handles
    to the host, which wraps each in a DiskArray again before calling the user's function."""

    # The release pass may free an operand once this has run: its result exists only after
    # the host function has returned.
    borrows_operands = True

    def __init__(self, callback, effect, partitioned, *in_avals):
        self.in_avals = tuple(in_avals)
        self.out_aval = compat.ShapedArray((), np.int32)
        self.params = {"callback": callback, "effect": effect, "partitioned": partitioned}
        self.effects = frozenset({effect})
        super().__init__()

    def expand(self, *args):
        lowered = [x._lowered_handle() if isinstance(x, DiskArray) else x for x in args]
        return io_callback(
            self._on_host,
            jax.ShapeDtypeStruct((), np.int32),
            *lowered,
            ordered=type(self.effect).__name__ == "OrderedDebugEffect",
        )

    def _on_host(self, *values):
        args = [
            DiskArray(aval, int(np.asarray(v))) if isinstance(aval, DiskArrayTy) else v
            for aval, v in zip(self.in_avals, values)
        ]
        self.callback(*args)
        return np.int32(0)

    def dce(self, used_outs):
        return True, True, self  # a callback runs for its effect

    def jvp(self, primals, tangents):
        return self(*primals), np.zeros((), jax.dtypes.float0)

    def vjp_fwd(self, nzs_in, *args):
        return self(*args), None

    def vjp_bwd_retval(self, res, outgrad):
        return (None,) * len(self.in_avals)
