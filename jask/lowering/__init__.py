"""The jit-time passes: rewrites of a jitted program's hi jaxpr before JAX lowers it.

graph.py holds the mechanics (users and producers, splicing, reordering); fusion.py,
row_groups.py and release.py the policies, which decide by each op's declared role
(`Op.role`). `passes()` lists them in the order they run.
"""

from __future__ import annotations

from .fusion import ElementwiseFusion
from .graph import Pass, fuse_chains, insert_releases, replace_groups, share_results
from .release import ReleaseDiskArrays, fresh_carries
from .row_groups import RowGroups
from .solves import inline_library_primitives, inline_linear_solves
from .transposes import fold_transposes


def passes() -> tuple[Pass, ...]:
    """The passes in the order they run."""
    return (
        # custom_linear_solve of DiskArrays: its solve's equations (differentiation is over)
        inline_linear_solves,
        # a library's own primitive on DiskArrays (lineax's linear_solve_p): its implementation
        inline_library_primitives,
        # x @ w.T: the product reads w transposed instead of a transposed copy of it
        fold_transposes,
        # elementwise chains whose intermediates are used once: one pass each
        fuse_chains(ElementwiseFusion()),
        # connected row-local ops over one tall dataset: one read of it
        replace_groups(RowGroups()),
        # results used more than once, written by the pass that computes them
        share_results(ElementwiseFusion()),
        # a loop body hands on only carries it made (so the next iteration may free its input)
        fresh_carries,
        # free every intermediate file after its last reader
        insert_releases(ReleaseDiskArrays()),
    )
