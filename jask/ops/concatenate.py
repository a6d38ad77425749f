"""Arrays joined along one axis: DiskArrays and in-memory arrays of one dtype whose shapes
agree off that axis. The engine's "place" kernel writes each operand into its range of the
output, streaming the output in blocks (along axis 0, plain sequential copies).
The cotangent of each operand is its slice of the output's cotangent."""

from .._jax.diskarray import DiskArrayTy
from .._jax.op import Op, apply, describe
from .slice import Slice, SliceInMemory, placement_params


class Concatenate(Op):
    name = "concatenate"
    kernel = "place"
    linear = True

    def out_type(self, *parts, axis):
        first = parts[0]
        for p in parts[1:]:
            if p.dtype != first.dtype:
                raise TypeError(
                    f"jask.concatenate: dtypes differ: "
                    f"{', '.join(describe(q) for q in parts)}; "
                    f"convert them to one dtype first"
                )
            if p.ndim != first.ndim or any(
                a != b for d, (a, b) in enumerate(zip(p.shape, first.shape)) if d != axis
            ):
                raise ValueError(
                    f"jask.concatenate: shapes must agree except along axis "
                    f"{axis}, got "
                    f"{', '.join(str(tuple(q.shape)) for q in parts)}"
                )
        size = sum(p.shape[axis] for p in parts)
        return DiskArrayTy((*first.shape[:axis], size, *first.shape[axis + 1 :]), first.dtype)

    def selections(self):
        """Each operand's (start, step, count) per axis of the output."""
        out, offset, result = self.out_aval, 0, []
        for p in self.in_avals:
            n = p.shape[self.axis]
            result.append(
                tuple(
                    (offset, 1, n) if d == self.axis else (0, 1, size)
                    for d, size in enumerate(out.shape)
                )
            )
            offset += n
        return result

    def kernel_params(self):
        return placement_params(self.out_aval, self.in_avals, self.selections())

    def transpose_rule(self, ct, *parts, needs):
        return tuple(
            apply(Slice if isinstance(aval, DiskArrayTy) else SliceInMemory, ct, selection=sel)
            if need
            else None
            for aval, sel, need in zip(self.in_avals, self.selections(), needs)
        )
