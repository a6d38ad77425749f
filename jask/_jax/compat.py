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


# -- freeing intermediates of compiled programs ------------------------------
#
# An op inside a jitted program writes its result to a new file that no
# Python object owns. Before JAX lowers a program, this pass inserts a
# release after the last use of each such intermediate; the release runs
# after every consumer (it takes their outputs as operands) and frees the
# file. Program outputs are not released: Python adopts them on return.

from jax._src import hijax as _hijax_src  # noqa: E402
from jax._src import util as _util  # noqa: E402
from jax._src.interpreters import partial_eval as _pe  # noqa: E402

_call_hi_primitive_p = _hijax_src.call_hi_primitive_p


def _jask_prim(eqn, prim_base):
    if eqn.primitive is _call_hi_primitive_p and isinstance(eqn.params.get("_prim"), prim_base):
        return eqn.params["_prim"]
    return None


def _insert_releases(closed_jaxpr, prim_base, disk_type, make_release):
    jaxpr = closed_jaxpr.jaxpr
    eqns = jaxpr.eqns
    outputs = {id(v) for v in jaxpr.outvars if isinstance(v, _core.Var)}
    # intermediates: DiskArray results of Jask ops, not program outputs
    produced = {}
    for i, eqn in enumerate(eqns):
        if _jask_prim(eqn, prim_base) is None:
            continue
        for v in eqn.outvars:
            if isinstance(v.aval, disk_type) and id(v) not in outputs:
                produced[id(v)] = (i, v)
    if not produced:
        return closed_jaxpr
    consumers: dict[int, list[int]] = {k: [] for k in produced}
    for i, eqn in enumerate(eqns):
        for v in eqn.invars:
            if isinstance(v, _core.Var) and id(v) in consumers:
                consumers[id(v)].append(i)
    releases_after: dict[int, list] = {}
    for key, (producer, var) in produced.items():
        users = consumers[key]
        # Only Jask ops are known not to alias their inputs to their outputs.
        if any(_jask_prim(eqns[i], prim_base) is None for i in users):
            continue
        last = max(users, default=producer)
        deps = [o for i in (users or [producer]) for o in eqns[i].outvars if o is not var]
        releases_after.setdefault(last, []).append((var, deps))
    new_eqns = []
    for i, eqn in enumerate(eqns):
        new_eqns.append(eqn)
        for var, deps in releases_after.get(i, ()):
            prim = make_release([var.aval] + [d.aval for d in deps])
            out = _core.Var(prim.out_avals_flat[0])
            new_eqns.append(_core.new_jaxpr_eqn([var, *deps], [out], _call_hi_primitive_p,
                                                {"_prim": prim}, frozenset(), eqn.source_info,
                                                eqn.ctx))
    return closed_jaxpr.replace(jaxpr=jaxpr.replace(eqns=new_eqns))


def insert_releases(prim_base, disk_type, make_release):
    """A lowering pass freeing the intermediates of ops derived from `prim_base`.

    `make_release(avals)` builds the release primitive for one intermediate
    (first aval) and the values it must wait for (the rest).
    """
    return lambda closed_jaxpr: _insert_releases(closed_jaxpr, prim_base, disk_type, make_release)


def fuse_chains(prim_base, fuse, merge_operands):
    """A lowering pass merging an op into its only consumer where `fuse(consumer, k,
    producer)` returns the merged op (None: not fusible); `merge_operands(prim, keep, drop)`
    removes an operand that repeats another."""
    return lambda closed_jaxpr: _fuse_chains(closed_jaxpr, prim_base, fuse, merge_operands)


def _fuse_chains(closed_jaxpr, prim_base, fuse, merge_operands):
    jaxpr = closed_jaxpr.jaxpr
    eqns = list(jaxpr.eqns)
    changed = False
    while True:
        merged = _fuse_one(eqns, jaxpr.outvars, prim_base, fuse, merge_operands)
        if merged is None:
            break
        eqns, changed = merged, True
    return closed_jaxpr.replace(jaxpr=jaxpr.replace(eqns=eqns)) if changed else closed_jaxpr


def _fuse_one(eqns, outvars, prim_base, fuse, merge_operands):
    """Eqns with one producer merged into its consumer, or None when nothing fuses."""
    uses: dict[int, int] = {}
    for v in [*outvars, *(x for e in eqns for x in e.invars)]:
        if isinstance(v, _core.Var):
            uses[id(v)] = uses.get(id(v), 0) + 1
    producer_at = {id(v): i for i, e in enumerate(eqns) for v in e.outvars}
    for ci, consumer in enumerate(eqns):
        consumer_prim = _jask_prim(consumer, prim_base)
        if consumer_prim is None:
            continue
        for k, v in enumerate(consumer.invars):
            if not isinstance(v, _core.Var) or uses.get(id(v)) != 1 or id(v) not in producer_at:
                continue
            producer = eqns[producer_at[id(v)]]
            producer_prim = _jask_prim(producer, prim_base)
            if producer_prim is None or len(producer.outvars) != 1:
                continue
            prim = fuse(consumer_prim, k, producer_prim)
            if prim is None:
                continue
            invars = [*consumer.invars[:k], *producer.invars, *consumer.invars[k + 1:]]
            prim, invars = _drop_repeated_operands(prim, invars, merge_operands)
            fused = _core.new_jaxpr_eqn(invars, consumer.outvars, _call_hi_primitive_p,
                                        {"_prim": prim}, consumer.effects, consumer.source_info,
                                        consumer.ctx)
            return [fused if i == ci else e for i, e in enumerate(eqns)
                    if i != producer_at[id(v)]]
    return None


def _drop_repeated_operands(prim, invars, merge_operands):
    i = 0
    while i < len(invars):
        for j in range(i + 1, len(invars)):
            if isinstance(invars[i], _core.Var) and invars[j] is invars[i]:
                prim = merge_operands(prim, i, j)
                invars = invars[:j] + invars[j + 1:]
                break
        else:
            i += 1
    return prim, invars


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
