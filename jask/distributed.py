"""jask.distributed: data-parallel Jask on multi-process JAX (see README, "Scaling out").

Each process opens its row shard of the data as DiskArrays (`open_shard`), computes its part
of the loss and gradients in a jitted step, and `allreduce` combines the parts across
processes with JAX's collectives; `python -m jask.launch -n N script.py` runs N local
processes.
"""

from ._api.distributed import Shard as Shard
from ._api.distributed import allreduce as allreduce
from ._api.distributed import initialize as initialize
from ._api.distributed import num_processes as num_processes
from ._api.distributed import open_shard as open_shard
from ._api.distributed import process_id as process_id
from ._api.distributed import row_range as row_range
from ._api.distributed import split_into_shards as split_into_shards

__all__ = [
    "Shard",
    "allreduce",
    "initialize",
    "num_processes",
    "open_shard",
    "process_id",
    "row_range",
    "split_into_shards",
]
