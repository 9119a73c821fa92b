"""Balancing flows from a global solve: ``pcg`` (the method of potentials by conjugate gradients), ``mincost``
(the least-cost l1 flow) and ``auto`` (picks the Leja polynomial scheme, Chebyshev diffusion or PCG from the
spectrum). Each module registers the balancer it defines; nothing is imported here.
"""
