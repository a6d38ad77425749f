"""Full reductions (sum, max, min) of one elementwise instruction, e.g. sum(x) or sum(x * y)."""
from ._elementwise import Reduce

__all__ = ["Reduce"]
