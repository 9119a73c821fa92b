"""Regenerate the meshes shipped in this folder (one command, deterministic):

    .venv/bin/python meshes/make_meshes.py

- ``lshape.vtu``: an L-shaped domain ([0,2]² minus [1,2]²) of 1,536 triangles (n = 16), the kind of
  the thesis' L mesh (Table 10.2), read through meshio as the dual graph of its triangles.

The CFD meshes of the thesis' Table 10.2 (airfoils, backward-facing step, cylinder channel) are
generated with gmsh by the data-management issue.
"""

from __future__ import annotations

from pathlib import Path

import meshio
import numpy as np

from hermes.data.generators import lshape_triangles

HERE = Path(__file__).resolve().parent


def main() -> None:
    points, tris = lshape_triangles(16)
    points3 = np.column_stack([points, np.zeros(len(points))])  # VTU stores 3-D points
    meshio.write(HERE / "lshape.vtu", meshio.Mesh(points3, [("triangle", tris)]))
    print(f"{HERE / 'lshape.vtu'}: {len(tris)} triangles, {len(points)} nodes")


if __name__ == "__main__":
    main()
