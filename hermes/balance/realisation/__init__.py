"""How a balancing flow becomes cell moves: ``realise`` (which cells move where and in what order, and how
closely the moves match the flow), ``selection`` (the strategies that choose the cells: the gain function of
thesis §10.1, boundary peeling, a wavefront) and ``boundary`` (boundary refinement after a realisation: gain
moves that shorten the partition boundary within a load tolerance — not mesh refinement). Nothing is imported
here.
"""
