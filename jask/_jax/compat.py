"""Every use of JAX internals in Jask lives in this module.

hijax is experimental and changes between releases, so Jask pins jax 0.10.2
and refuses to import on any other version rather than misbehave.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy  # noqa: F401 - patched by install_numpy_dispatch
from jax._src import core as _core
from jax.experimental import hijax as _hijax

PINNED_JAX = "0.10.2"
if jax.__version__ != PINNED_JAX:
    raise ImportError(f"jask needs jax=={PINNED_JAX} (its hijax interface is experimental and "
                      f"changes between releases); found jax {jax.__version__}")

HiType = _hijax.HiType
VJPHiPrimitive = _hijax.VJPHiPrimitive
register_hitype = _hijax.register_hitype
aval_method = _hijax.aval_method
aval_property = _hijax.aval_property
Zero = _hijax.Zero
ShapedArray = _core.ShapedArray
Tracer = _core.Tracer
typeof = _core.typeof


def is_tracer(x) -> bool:
    return isinstance(x, Tracer)


def is_accumulator(x) -> bool:
    """True for the gradient accumulators JAX passes for the linear inputs of a transpose."""
    from jax._src.interpreters import ad
    return isinstance(x, ad.GradAccum)


def is_eager() -> bool:
    """True when JAX evaluates ops now, False while it stages them into a program."""
    return isinstance(_core.trace_ctx.trace, _core.EvalTrace)


# -- the jit-time passes' view of a hi jaxpr ---------------------------------------
#
# jask/lowering rewrites hi jaxprs before JAX lowers them; these are the only
# pieces of that which touch JAX's jaxpr classes.

from jax._src import hijax as _hijax_src  # noqa: E402
from jax._src import util as _util  # noqa: E402
from jax._src.interpreters import partial_eval as _pe  # noqa: E402

_call_hi_primitive_p = _hijax_src.call_hi_primitive_p


def is_var(x) -> bool:
    """True for a jaxpr variable (not a literal constant)."""
    return isinstance(x, _core.Var)


def new_var(aval):
    return _core.Var(aval)


def hi_primitive(eqn):
    """The hijax primitive (a VJPHiPrimitive instance) an equation applies, or None."""
    if eqn.primitive is _call_hi_primitive_p:
        return eqn.params.get("_prim")
    return None


def hi_equation(invars, outvars, prim, like, effects=None):
    """A new equation applying hijax primitive `prim`, with `like`'s source info and context
    (and effects, unless given)."""
    return _core.new_jaxpr_eqn(invars, outvars, _call_hi_primitive_p, {"_prim": prim},
                               like.effects if effects is None else effects, like.source_info,
                               like.ctx)


def program_of(closed_jaxpr):
    """(equations, output variables) of a closed jaxpr."""
    return list(closed_jaxpr.jaxpr.eqns), list(closed_jaxpr.jaxpr.outvars)


def with_equations(closed_jaxpr, eqns):
    """`closed_jaxpr` with its equations replaced."""
    return closed_jaxpr.replace(jaxpr=closed_jaxpr.jaxpr.replace(eqns=list(eqns)))


def install_lowering_passes(*passes) -> None:
    """Runs `passes` (ClosedJaxpr -> ClosedJaxpr, in order) on every hi jaxpr before JAX
    lowers it."""
    global _original_lower_jaxpr
    if _original_lower_jaxpr is not None:
        return
    _original_lower_jaxpr = original = _pe.lower_jaxpr

    @_util.weakref_lru_cache
    def lower_jaxpr(hi_jaxpr, lo_avals):
        for rewrite in passes:
            hi_jaxpr = rewrite(hi_jaxpr)
        return original(hi_jaxpr, lo_avals)

    _pe.lower_jaxpr = lower_jaxpr


_original_lower_jaxpr = None


# -- dense tracer (op) DiskArray tracer ---------------------------------------
#
# `jnp.array(lr) * g` inside jit: both operands are tracers of one Python
# class, so Python never tries g's reflected operator and JAX's own operator
# gives up (NotImplemented). Where JAX gives up on an operand of `hi_type`,
# hand the operation to that operand's reflected method instead.

_REFLECTED = {"_add": "_radd", "_sub": "_rsub", "_mul": "_rmul", "_truediv": "_rtruediv",
              "_matmul": "_rmatmul"}


def defer_dense_operators_to(hi_type) -> None:
    for name, reflected in _REFLECTED.items():
        original = getattr(ShapedArray, name)
        if getattr(original, "_jask_deferring", False):
            continue

        def operator(x, other, _original=original, _reflected=reflected):
            result = _original(x, other)
            other_aval = getattr(other, "aval", None) if is_tracer(other) else None
            if result is NotImplemented and isinstance(other_aval, hi_type):
                method = getattr(other_aval, _reflected, None)
                if method is not None:
                    return method(other, x)
            return result

        operator._jask_deferring = True
        setattr(ShapedArray, name, staticmethod(operator))


# -- jax.numpy functions on DiskArrays -----------------------------------------
#
# jax.numpy has no dispatch protocol for foreign array types (and
# __jax_array__ would silently materialise a DiskArray), so libraries such
# as optax calling jnp.sqrt(g) on a DiskArray need the function itself to
# dispatch. Each named function is replaced by a wrapper that calls the Jask
# implementation when any argument is a DiskArray and the original otherwise.


class _DispatchingUfunc:
    """A jnp.ufunc that dispatches calls; everything else goes to the original ufunc."""

    def __init__(self, original, jask_fn, is_hi):
        self._original, self._jask_fn, self._is_hi = original, jask_fn, is_hi
        self.__name__ = getattr(original, "__name__", "ufunc")
        self.__doc__ = getattr(original, "__doc__", None)

    def __call__(self, *args, **kwargs):
        if _any_hi(self._is_hi, args, kwargs):
            return self._jask_fn(*args, **kwargs)
        return self._original(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._original, name)


def _any_hi(is_hi, args, kwargs) -> bool:
    return any(is_hi(a) for a in args) or any(is_hi(v) for v in kwargs.values())


def _dispatching(original, jask_fn, is_hi):
    if isinstance(original, _DispatchingUfunc) or getattr(original, "_jask_original", None):
        return original
    if isinstance(original, jax.numpy.ufunc):
        return _DispatchingUfunc(original, jask_fn, is_hi)

    @functools.wraps(original)
    def function(*args, **kwargs):
        if _any_hi(is_hi, args, kwargs):
            return jask_fn(*args, **kwargs)
        return original(*args, **kwargs)

    function._jask_original = original
    return function


def broadcast_unbatched_outputs(is_hi, broadcast) -> None:
    """jax.vmap gives an output that does not depend on the batch (a function returning one
    of its unbatched DiskArray inputs) a batch axis with `batching.broadcast`, which only knows
    JAX arrays; for hi values it calls `broadcast(x, size, axis)` instead."""
    from jax._src.interpreters import batching
    original = batching.broadcast
    if getattr(original, "_jask_original", None):
        return

    @functools.wraps(original)
    def batching_broadcast(x, sz, axis, mesh_axis=None):
        if not is_hi(x):
            return original(x, sz, axis, mesh_axis)
        # x is not batched: build the copies one level down, outside the vmap being finished
        trace = _core.trace_ctx.trace
        with _core.set_current_trace(getattr(trace, "parent_trace", trace)):
            return broadcast(x, sz, axis)

    batching_broadcast._jask_original = original
    batching.broadcast = batching_broadcast


def install_numpy_dispatch(table: dict, is_hi) -> None:
    """For each "module.name" -> fn in `table` (modules: jnp, jnp.linalg, lax), makes that
    function call fn when any argument satisfies is_hi."""
    modules = {"jnp": jax.numpy, "jnp.linalg": jax.numpy.linalg, "lax": jax.lax, "nn": jax.nn}
    for qualified, jask_fn in table.items():
        module_name, _, name = qualified.rpartition(".")
        module = modules[module_name]
        setattr(module, name, _dispatching(getattr(module, name), jask_fn, is_hi))


# -- optax --------------------------------------------------------------------
#
# optax.numerics.abs_sq refuses anything that is not an np.ndarray or a
# jax.Array (a C++ instance check that cannot be extended), and adagrad and
# the factored optimizers call it on every leaf. For arrays of real dtype,
# which are all Jask stores, |x|^2 is x * x.

PINNED_OPTAX = "0.2.8"


def accept_in_optax_abs_sq(is_hi, square) -> None:
    try:
        import optax
        from optax._src import numerics, transform
    except ImportError:  # optax is optional at run time
        return
    if optax.__version__ != PINNED_OPTAX:
        raise ImportError(f"jask needs optax=={PINNED_OPTAX} (it adapts optax.numerics.abs_sq); "
                          f"found optax {optax.__version__}")
    original = numerics.abs_sq
    if getattr(original, "_jask_original", None):
        return

    @functools.wraps(original)
    def abs_sq(x):
        return square(x) if is_hi(x) else original(x)

    abs_sq._jask_original = original
    numerics.abs_sq = abs_sq
    transform.abs_sq = abs_sq


# -- a clear error for JAX primitives that Jask does not implement -------------

def name_unsupported_primitives(is_hi) -> None:
    """A lax primitive applied to a DiskArray fails deep inside JAX; re-raise it as a
    NotImplementedError that names the primitive."""
    original = _core.Primitive.bind
    if getattr(original, "_jask_original", None):
        return

    @functools.wraps(original)
    def bind(self, *args, **params):
        try:
            return original(self, *args, **params)
        except (ValueError, TypeError) as error:
            if self is _call_hi_primitive_p or not any(is_hi(a) for a in args):
                raise
            raise NotImplementedError(
                f"jax.lax.{self.name} on a DiskArray is not supported yet; Jask implements the "
                f"ops listed in README.md (use jask.materialize for small arrays)") from error

    bind._jask_original = original
    _core.Primitive.bind = bind


# -- jax.checkpoint of hijax values ---------------------------------------------
#
# At 0.10.2 remat's lowering returns its outputs in their low-level form
# (int32 handles) where the enclosing program expects hijax values. Raise
# them back, as every other hijax lowering does.

def raise_remat_outputs() -> None:
    from jax._src import ad_checkpoint

    original = ad_checkpoint.remat_p.to_lojax
    if getattr(original, "_jask_original", None):
        return

    @functools.wraps(original)
    def to_lojax(*hi_args, jaxpr, **params):
        lo_outs = iter(original(*hi_args, jaxpr=jaxpr, **params))
        outs = []
        for aval in jaxpr.out_avals:
            if getattr(aval, "is_high", False):
                outs.append(aval.raise_val(*[next(lo_outs) for _ in aval.lo_ty()]))
            else:
                outs.append(next(lo_outs))
        return outs

    to_lojax._jask_original = original
    ad_checkpoint.remat_p.to_lojax = to_lojax
