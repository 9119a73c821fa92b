"""Balancing by repartitioning the mesh graph instead of a flow: ``metis`` (the balancers ``none`` and ``metis``,
METIS from scratch relabelled to keep cells home) and ``scotch`` (Scotch's adaptive remapping). Nothing is
imported here.
"""
