"""The polynomial family: balancing by a polynomial of the Laplacian (thesis ch. 8–9).

``lps`` (lps, lpa), ``mpa`` and ``ada`` (the incremental balancing operator) register the balancers;
``charpoly`` (characteristic polynomial, Berlekamp–Massey, Krylov kernels), ``leja`` (the product form over
the eigenvalues in Leja order) and ``balancing_operator`` (the rows of Θ) are their machinery. Nothing is
imported here, so looking one balancer up imports its module alone.
"""
