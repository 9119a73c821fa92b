"""Run under mpiexec: ``hermes run ARGS`` as a rank of the job (the command's own entry point), then each rank says
whether anything of the hosting (hermes.runtime.hosting, greenlet) was imported while it ran."""

import sys

from hermes.cli import main

code = main(sys.argv[1:])
loaded = sorted(m for m in sys.modules if m == "greenlet" or m.startswith("hermes.runtime.hosting"))
from mpi4py import MPI  # noqa: E402

print(f"rank {MPI.COMM_WORLD.Get_rank()} exit {code} hosting {','.join(loaded) or 'none'}", flush=True)
