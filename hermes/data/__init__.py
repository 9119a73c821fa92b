"""Data management (thesis §10.1): meshes and graphs of work units, readers, generators, partitioning."""

from __future__ import annotations

from hermes.data.mesh import Mesh, csr_from_edges, validate_graph

__all__ = ["Mesh", "csr_from_edges", "validate_graph"]
