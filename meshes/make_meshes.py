"""Regenerate the meshes shipped in this folder (one command, deterministic):

    .venv/bin/python meshes/make_meshes.py                  # every mesh
    .venv/bin/python meshes/make_meshes.py thesis-stufe.vtu  # only the files named

Every mesh registered in :data:`hermes.data.cfd_meshes.CFD_MESHES` with a file name is built at its
default size and written as binary, zlib-compressed VTU (a rerun writes the same bytes):

- ``grid20x19.vtu``: the thesis' grid20x19, 380 squares (Table 10.2);
- ``stufe.vtu``: a backward-facing step, ~2,000 triangles (gmsh);
- ``lshape.vtu``: an L-shaped domain ([0,2]² minus [1,2]²) of 1,536 structured triangles (n = 16);
- ``airfoil.vtu``: a NACA0012 airfoil in a far-field box, ~8,000 triangles (gmsh);
- ``3elt.vtu``: a slat / main / flap airfoil in a far-field box, ~9,000 triangles (gmsh);
- ``cylinder.vtu``: a channel with a cylinder (DFG benchmark geometry), ~20,000 triangles (gmsh).

and the stand-ins for three graphs of thesis Table 10.2 (:data:`hermes.data.thesis_meshes.THESIS_MESHES`), whose
*node* graphs (``mesh: {file: ..., units: nodes}``) have the thesis' vertex and edge counts exactly:

- ``thesis-stufe.vtu``: a backward-facing step of 833 unit squares, 1036 nodes, 1868 edges;
- ``thesis-airfoil.vtu``: a NACA0012 airfoil in a far-field box, 4253 nodes, 12289 edges (gmsh);
- ``thesis-3elt.vtu``: a slat / main / flap airfoil in a far-field box, 4720 nodes, 13722 edges (gmsh).

Each is read through meshio as the dual graph of its cells (:func:`hermes.data.io.read_mesh`);
``hermes mesh generate NAME --size N --out FILE`` builds other sizes, ``large`` up to 10⁶+ cells.
"""

from __future__ import annotations

import sys
from pathlib import Path

from hermes.data.cfd_meshes import CFD_MESHES
from hermes.data.io import write_mesh
from hermes.data.thesis_meshes import THESIS_MESHES, node_graph_counts

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    builders = {e.file: (name, lambda e=e: e.build(e.default_size)) for name, e in CFD_MESHES.items() if e.file}
    builders.update({e.file: (f"thesis {name}", e.build) for name, e in THESIS_MESHES.items()})
    names = sys.argv[1:] if argv is None else argv
    unknown = [n for n in names if n not in builders]
    if unknown:
        print(f"make_meshes: no mesh {unknown[0]!r}: expected one of {', '.join(builders)}", file=sys.stderr)
        return 2
    for file in names or builders:
        name, build = builders[file]
        mesh = build()
        path = write_mesh(mesh, HERE / file)
        nodes, entries = node_graph_counts(mesh)
        print(f"{path}: {name}, {mesh.n_cells} cells, {nodes} nodes, {entries // 2} mesh edges, "
              f"{mesh.n_edges} dual edges, {path.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
