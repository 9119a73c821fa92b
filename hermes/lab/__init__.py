"""Offline laboratories: balancers on recorded or generated inputs, without a mesh or an MPI run.

``specs`` parses the lab's input specs and ``flow`` runs the flow balancers (``hermes lab flow``);
``lbaf`` reads and writes the per-rank LBDatafile JSON of DARMA's Load Balancing Analysis Framework,
so that task traces move between hermes (``hermes lab gossip --loads lbaf:STEM``) and LBAF.
"""
