"""python -m jask.launch -n N script.py [args]: N local processes of one jax.distributed run.

See jask/_launch.py for what it does and README, "Scaling out", for several hosts.
"""

import sys

from ._launch import main as main
from ._launch import run as run

if __name__ == "__main__":
    sys.exit(main())
