"""The mesh application (application simulation): the solver loop of thesis Alg. 2 and its kernels."""

from hermes.app.mesh.kernels import KERNELS, jacobi_serial
from hermes.app.mesh.simulate import LoopStats, solve_phase

__all__ = ["KERNELS", "jacobi_serial", "LoopStats", "solve_phase"]
