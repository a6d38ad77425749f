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


def _users_and_producers(eqns, outvars):
    """(var id -> positions of the eqns reading it, len(eqns) for a program output;
    var id -> position of the eqn computing it)."""
    users: dict[int, list[int]] = {}
    for i, e in enumerate(eqns):
        for x in e.invars:
            if isinstance(x, _core.Var):
                users.setdefault(id(x), []).append(i)
    for x in outvars:
        if isinstance(x, _core.Var):
            users.setdefault(id(x), []).append(len(eqns))
    return users, {id(v): i for i, e in enumerate(eqns) for v in e.outvars}


def _fuse_one(eqns, outvars, prim_base, fuse, merge_operands):
    """Eqns with one producer merged into its consumer, or None when nothing fuses."""
    users, producer_at = _users_and_producers(eqns, outvars)
    uses = {k: len(v) for k, v in users.items()}
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


def fuse_shared_results(prim_base, fuse_results, merge_operands):
    """A lowering pass merging an op into a consumer of its result when the result has other
    users too: `fuse_results(consumer, k, producer, consumed, kept)` returns one op that also
    writes the producer's results numbered in `kept` (None: not fusible)."""
    def rewrite(closed_jaxpr):
        jaxpr = closed_jaxpr.jaxpr
        eqns, changed = list(jaxpr.eqns), False
        while (merged := _share_one(eqns, jaxpr.outvars, prim_base, fuse_results, merge_operands)):
            eqns, changed = merged, True
        return closed_jaxpr.replace(jaxpr=jaxpr.replace(eqns=eqns)) if changed else closed_jaxpr
    return rewrite


def _share_one(eqns, outvars, prim_base, fuse_results, merge_operands):
    users, producer_at = _users_and_producers(eqns, outvars)
    for ci, consumer in enumerate(eqns):
        consumer_prim = _jask_prim(consumer, prim_base)
        if consumer_prim is None:
            continue
        for k, v in enumerate(consumer.invars):
            if not isinstance(v, _core.Var) or id(v) not in producer_at:
                continue
            pi = producer_at[id(v)]
            producer = eqns[pi]
            producer_prim = _jask_prim(producer, prim_base)
            results = producer.outvars
            if producer_prim is None or any(o is not v and o in consumer.invars for o in results):
                continue
            # The merged op runs where the consumer did: nothing between may read the results.
            later = [u for o in results for u in users.get(id(o), []) if u != ci]
            if any(u < ci for u in later):
                continue
            kept = tuple(j for j, o in enumerate(results) if any(u != ci for u in users.get(id(o), [])))
            ks = tuple(i for i, x in enumerate(consumer.invars) if x is v)
            prim = fuse_results(consumer_prim, ks, producer_prim, results.index(v), kept)
            if prim is None:
                continue
            invars = [*consumer.invars[:k], *producer.invars,
                      *(x for i, x in enumerate(consumer.invars) if i > k and i not in ks)]
            prim, invars = _drop_repeated_operands(prim, invars, merge_operands)
            fused = _core.new_jaxpr_eqn(invars, [results[j] for j in kept] + list(consumer.outvars),
                                        _call_hi_primitive_p, {"_prim": prim}, consumer.effects,
                                        consumer.source_info, consumer.ctx)
            return [fused if i == ci else e for i, e in enumerate(eqns) if i != pi]
    return None


def fuse_groups(prim_base, find_groups, group_op):
    """A lowering pass replacing sets of ops by one op each. `find_groups(nodes, check)`
    chooses the sets from `nodes` (per equation: its op or None, input keys, output keys);
    `check(members)` is None when the set can run as one step, else the position of an
    equation outside it that both depends on its results and feeds it. `group_op(members,
    nodes, avals, used_outside)` returns (op, input keys, output keys). The equations are
    then reordered (stably) so that each runs after what it reads."""
    def rewrite(closed_jaxpr):
        jaxpr = closed_jaxpr.jaxpr
        eqns = list(jaxpr.eqns)
        keys: dict[int, object] = {}
        avals: dict[object, object] = {}

        def key(v):
            keys[id(v)], avals[id(v)] = v, v.aval
            return id(v)
        nodes = [(_jask_prim(e, prim_base), [key(v) for v in e.invars], [key(v) for v in e.outvars])
                 for e in eqns]
        users, producer = _users_and_producers(eqns, jaxpr.outvars)

        def check(members):
            inside = set(members)
            downstream: set[int] = set()  # outside equations that depend on the set's results
            for i in range(min(members), len(nodes)):
                if i not in inside and any(producer.get(k) in inside or producer.get(k) in downstream
                                           for k in nodes[i][1]):
                    downstream.add(i)
            feeding = [producer[k] for j in members for k in nodes[j][1] if producer.get(k) in downstream]
            return min(feeding) if feeding else None

        groups = find_groups(nodes, check)
        if not groups:
            return closed_jaxpr
        units = []  # (position, eqn) with the members of a group replaced by one eqn
        grouped = set()
        for members in groups:
            inside = set(members)
            used_outside = {k for i in members for k in nodes[i][2]
                            if any(u not in inside for u in users.get(k, ()))}
            grouped |= inside
            if not used_outside:  # nothing reads its results: Jask ops have no other effect
                continue
            op, in_keys, out_keys = group_op(members, nodes, avals, used_outside)
            last = eqns[max(members)]
            units.append((min(members), _core.new_jaxpr_eqn(
                [keys[k] for k in in_keys], [keys[k] for k in out_keys], _call_hi_primitive_p,
                {"_prim": op}, last.effects, last.source_info, last.ctx)))
        units += [(i, e) for i, e in enumerate(eqns) if i not in grouped]
        return closed_jaxpr.replace(jaxpr=jaxpr.replace(eqns=_stable_topological_order(units)))
    return rewrite


def _stable_topological_order(units):
    """The equations of (position, eqn) pairs ordered so each follows the equations whose
    results it reads, keeping program order where dependencies allow."""
    import heapq
    made = {id(v): n for n, (_, e) in enumerate(units) for v in e.outvars}
    waits = [{made[id(v)] for v in e.invars if isinstance(v, _core.Var) and id(v) in made} for _, e in units]
    readers: dict[int, list[int]] = {}
    for n, deps in enumerate(waits):
        for d in deps:
            readers.setdefault(d, []).append(n)
    ready = [(units[n][0], n) for n, deps in enumerate(waits) if not deps]
    heapq.heapify(ready)
    order = []
    while ready:
        _, n = heapq.heappop(ready)
        order.append(units[n][1])
        for r in readers.get(n, ()):
            waits[r].discard(n)
            if not waits[r]:
                heapq.heappush(ready, (units[r][0], r))
    assert len(order) == len(units), "row-group reordering found a cycle"
    return order


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
