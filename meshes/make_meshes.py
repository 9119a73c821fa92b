"""Regenerate the meshes shipped in this folder (one command, deterministic):

    .venv/bin/python meshes/make_meshes.py

Every mesh registered in :data:`hermes.data.cfd_meshes.CFD_MESHES` with a file name is built at its
default size and written as binary, zlib-compressed VTU (a rerun writes the same bytes):

- ``grid20x19.vtu``: the thesis' grid20x19, 380 squares (Table 10.2);
- ``stufe.vtu``: a backward-facing step, ~2,000 triangles (gmsh);
- ``lshape.vtu``: an L-shaped domain ([0,2]² minus [1,2]²) of 1,536 structured triangles (n = 16);
- ``airfoil.vtu``: a NACA0012 airfoil in a far-field box, ~8,000 triangles (gmsh);
- ``3elt.vtu``: a slat / main / flap airfoil in a far-field box, ~9,000 triangles (gmsh);
- ``cylinder.vtu``: a channel with a cylinder (DFG benchmark geometry), ~20,000 triangles (gmsh).

Each is read through meshio as the dual graph of its cells (:func:`hermes.data.io.read_mesh`);
``hermes mesh generate NAME --size N --out FILE`` builds other sizes, ``large`` up to 10⁶+ cells.
"""

from __future__ import annotations

from pathlib import Path

from hermes.data.cfd_meshes import CFD_MESHES, write_mesh

HERE = Path(__file__).resolve().parent


def main() -> None:
    for name, entry in CFD_MESHES.items():
        if entry.file is None:
            continue
        mesh = entry.build(entry.default_size)
        path = write_mesh(mesh, HERE / entry.file)
        print(f"{path}: {name}, {mesh.n_cells} cells, {mesh.points.shape[0]} nodes, "
              f"{mesh.n_edges} dual edges, {path.stat().st_size} bytes")


if __name__ == "__main__":
    main()
