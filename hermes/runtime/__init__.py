"""The runtime: what lies between hermes' algorithms and MPI.

The communicator every SPMD function receives has one interface (:mod:`~hermes.runtime.communicator`) and two
implementations, chosen once at start-up (:func:`hermes.runtime.start.start`): one processor per MPI process on
mpi4py's own communicator (:mod:`~hermes.runtime.plain`), or many per process (:mod:`~hermes.runtime.hosting`); the
reductions both fold in rank order (:mod:`~hermes.runtime.ops`). Around them: the clock
(:mod:`~hermes.runtime.clock`), neighbour exchanges and charged collectives (:mod:`~hermes.runtime.comm`), the world
communicator (:mod:`~hermes.runtime.world`), the launcher (:mod:`~hermes.runtime.launch`) and the watchdog
(:mod:`~hermes.runtime.watchdog`).
"""
