"""The diffusion family: neighbour-to-neighbour schemes that iterate ``l ← M l`` (thesis ch. 5–7).

Each module registers the balancers it defines; nothing is imported here, so looking one balancer up imports
its module alone. Quantities the thesis assumes globally known are computed from ``ctx.model`` on every rank
(deterministic, so all ranks agree): ε₀ (Cor. 2), α of M⁶, ω* (eq. 7.1.7) and ω_opt (λ_M).

============== ========= ========================================== ==========================================
name           module    method                                     parameters besides tolerance,
                                                                    max_iterations, check_every, lazy
============== ========= ========================================== ==========================================
gda0, gda1     gda       GDA with M¹(ε₀), M¹(1) (thesis Alg. 3)     —
gda2 … gda4    gda       GDA with M^k(ε₀) (thesis eq. 5.6.2–5.6.4)  —
gda5           gda       GDA with M⁵ (eq. 5.6.5, the "bad example") —
gda6           gda       GDA with M⁶ (eq. 5.6.6, Elsässer et al.)   — (info ``nonnegative``: False on stars)
sos            sos       SOS on M¹(ε) with ω* (Alg. 4, eq. 7.1.7)   eps ("eps0"), omega (None: ω*)
sos_opt        sos       SOS on M¹(ε) with ω_opt                    eps ("eps0")
implicit       implicit  generalized implicit scheme (Alg. 6)       eps ("eps0"), alpha (1), inner_tolerance
                                                                    (0.01), sweeps (None: from inner_tolerance)
implicit_watts implicit  Watts et al.'s implicit scheme (Alg. 5)    alpha (1), inner_tolerance, sweeps
chebyshev      chebyshev Chebyshev-accelerated diffusion            its own (tolerance, bounds, max_iterations)
fos            fos       practical FOS of Jeannot & Vernier         its own (``hermes balancers --verbose``)
============== ========= ========================================== ==========================================

Also here: the diffusion matrices M¹ … M⁶ (``matrices``), the graph and spectral quantities they need
(``spectral``), FOS's serial reference (``fos_serial``) and its spanning-tree convergence detection
(``detection``).
"""
