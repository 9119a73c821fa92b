"""The runtime: what lies between hermes' algorithms and MPI.

The clock (:mod:`~hermes.runtime.clock`), neighbour exchanges and charged collectives (:mod:`~hermes.runtime.comm`),
the world communicator (:mod:`~hermes.runtime.world`), many emulated processors per MPI process
(:mod:`~hermes.runtime.hosting`), the launcher (:mod:`~hermes.runtime.launch`) and the watchdog
(:mod:`~hermes.runtime.watchdog`).
"""
