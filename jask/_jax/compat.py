"""Every use of JAX internals in Jask lives in this module.

hijax is experimental and changes between releases, so Jask pins jax 0.10.2
and refuses to import on any other version rather than misbehave.
"""

from __future__ import annotations

import jax
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


def install_release_pass(prim_base, disk_type, make_release) -> None:
    """Makes every hijax lowering free the intermediates of ops derived from `prim_base`.

    `make_release(avals)` builds the release primitive for one intermediate
    (first aval) and the values it must wait for (the rest).
    """
    global _original_lower_jaxpr
    if _original_lower_jaxpr is not None:
        return
    _original_lower_jaxpr = original = _pe.lower_jaxpr

    @_util.weakref_lru_cache
    def lower_jaxpr(hi_jaxpr, lo_avals):
        return original(_insert_releases(hi_jaxpr, prim_base, disk_type, make_release), lo_avals)

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
