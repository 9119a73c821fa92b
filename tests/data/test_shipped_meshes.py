from __future__ import annotations

import numpy as np

from hermes.data.generators import lshape_triangles
from hermes.data.io import read_mesh
from tests.conftest import ROOT
from tests.tolerances import area_tol, flops


def test_lshape_vtu_is_what_the_script_generates():
    m = read_mesh(ROOT / "meshes" / "lshape.vtu")
    points, tris = lshape_triangles(16)
    assert m.n_cells == len(tris) == 1536 and m.has_polygons
    # an interior triangle has 3 facet neighbours, none has more
    assert m.degree.max() == 3 and np.count_nonzero(m.degree == 3) > 1200
    # the domain is the L: nothing in the upper-right quadrant
    x, y = m.coords.T
    assert not np.any((x > 1) & (y > 1)) and np.isclose(x.max(), 2 - 1 / 48, rtol=2 * flops(4), atol=0)
    # 3 n² squares, 2 triangles each; area of the L is 3
    p = points[tris]
    area = 0.5 * np.abs((p[:, 1, 0] - p[:, 0, 0]) * (p[:, 2, 1] - p[:, 0, 1])
                        - (p[:, 2, 0] - p[:, 0, 0]) * (p[:, 1, 1] - p[:, 0, 1]))
    assert abs(area.sum() - 3.0) <= area_tol(p)
