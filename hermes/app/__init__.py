"""APPLICATIONS: the programs hermes runs on its runtime, one subpackage each.

* :mod:`hermes.app.mesh` — the adaptive mesh application (thesis Alg. 2 / Fig. 10.5): the kernels and the compute /
  halo exchange / reduction loop that the run's lifecycle sequences phase by phase;
* :mod:`hermes.app.brusselator` — the Brusselator study of Bahi, Contassot-Vivier & Couturier (seed 003), a whole
  program of its own that never uses the mesh run's lifecycle.
"""
