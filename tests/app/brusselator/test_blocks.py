"""One processor's block (hermes.app.brusselator.blocks): sweeps equal the block map, reuse of unchanged solves, moving
border points keeps the line, the data and the overlap zones, windows start from the accepted values."""

from __future__ import annotations

import numpy as np
import pytest

from hermes.app.brusselator.blocks import BlockState
from hermes.app.brusselator.brusselator import Brusselator, SolverError, block_map
from hermes.app.brusselator.iteration import even_bounds


def _block(pb, a, b, overlap, levels):
    return BlockState.start(pb, overlap, a, b, levels)


def test_block_sweeps_equal_the_block_map_bit_for_bit():
    pb = Brusselator(60, t_end=0.25)
    overlap, levels = 4, pb.n_steps + 1
    bounds = even_bounds(pb.n, 3, overlap + 1)
    blocks = [_block(pb, int(bounds[i]), int(bounds[i + 1]), overlap, levels) for i in range(3)]
    y = np.tile(pb.initial(), (levels, 1, 1))
    for _ in range(3):
        fy, _ = block_map(pb, y, bounds, overlap)
        for blk in blocks:
            blk.sweep()
        for i, blk in enumerate(blocks):
            for s in (-1, 1):
                if 0 <= i + s < 3:
                    nb = blocks[i + s]
                    pos = nb.send_pos(-s)
                    assert blk.set_ghost(s, pos, nb.trajectory(pos).copy())
        y = fy
        got = np.concatenate([blk.y for blk in blocks], axis=1)
        assert np.array_equal(got, y)


def test_unchanged_inputs_are_not_solved_again():
    pb = Brusselator(30, t_end=0.1)
    blk = _block(pb, 0, 30, 0, pb.n_steps + 1)
    r1, w1 = blk.sweep()
    r2, w2 = blk.sweep()
    assert r1 > 0 and r2 == 0.0 and w2 == w1 and blk.solves == 1 and blk.sweeps == 2
    assert blk.is_fixed(blk.inputs, None, None)
    assert not blk.is_fixed(blk.inputs, pb.boundary(blk.levels) + 1e-12, None)


@pytest.mark.parametrize("side, count", [(1, 1), (1, 6), (-1, 1), (-1, 6)])
def test_give_and_take_keep_order_data_and_zones(side, count):
    """Moving border points keeps the line order, the values, and the overlap zones' starting values (003 Alg. 3–5)."""
    pb = Brusselator(40, t_end=0.1)
    overlap, levels = 3, pb.n_steps + 1
    left, right = _block(pb, 0, 20, overlap, levels), _block(pb, 20, 40, overlap, levels)
    for blk in (left, right):
        blk.sweep()
    before = np.concatenate([left.y, right.y], axis=1)
    giver, taker = (left, right) if side > 0 else (right, left)
    tr = giver.give(side, count)
    taker.take(-side, tr)
    assert (left.a, left.b, right.a, right.b) == (0, 20 - side * count, 20 - side * count, 40)
    assert np.array_equal(np.concatenate([left.y, right.y], axis=1), before)
    start = pb.initial()
    for blk in (left, right):
        assert np.array_equal(blk.zone_left, start[blk.lo:blk.a])
        assert np.array_equal(blk.zone_right, start[blk.b:blk.hi])
        assert left.send_pos(1) == right.ghost_pos(-1) and right.send_pos(-1) == left.ghost_pos(1)
    assert np.array_equal(taker.ghost_left if side > 0 else taker.ghost_right,
                          giver.trajectory(giver.send_pos(side)))


def test_give_keeps_the_overlap_plus_one():
    pb = Brusselator(40, t_end=0.1)
    blk = _block(pb, 0, 20, 3, pb.n_steps + 1)
    with pytest.raises(SolverError, match="cannot move"):
        blk.give(1, 17)
    blk.give(1, 16)
    assert blk.n_points == 4


def test_next_window_starts_from_the_final_values():
    pb = Brusselator(40, t_end=0.2)
    overlap = 3
    left, right = _block(pb, 0, 20, overlap, 3), _block(pb, 20, 40, overlap, 3)
    for blk in (left, right):
        blk.sweep()
    zl, zr = left.edge_zone(1), right.edge_zone(-1)
    final_l, final_r = left.y[-1].copy(), right.y[-1].copy()
    left.next_window(final_l, 3, None, zr)
    right.next_window(final_r, 3, zl, None)
    assert np.array_equal(left.zone_right, final_r[:overlap])
    assert np.array_equal(right.zone_left, final_l[-overlap:])
    assert np.array_equal(left.ghost_right, np.tile(final_r[overlap], (3, 1)))
    assert left.window == right.window == 1 and np.array_equal(left.y[2], final_l)
