"""hermes plot and the VTU writer against a hostile user: planted symbolic links, options out of range and
damaged run directories (each file truncated, bytes flipped, arrays and JSON values replaced) give one line
(HermesError) or a picture — never a traceback, never a write outside the run directory, never minutes."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from hermes.claims import write_marker
from hermes.compare.report import data_uri
from hermes.errors import HermesError
from hermes.viz import plot_phases, plot_run, rundir
from hermes.viz.compare_plots import plot_breakdown, plot_imbalance, plot_pareto, plot_totals
from hermes.viz.monitor import monitor_arrays, plot_monitor
from hermes.viz.partition_picture import DPI_RANGE, check_dpi, plot_partition
from hermes.viz.rundir import MAX_PHASES, MAX_PROCESSORS, NpzArchive, check_summary
from hermes.viz.vtu import write_run_vtu
from hermes.viz.zoom import check_zoom, parse_zoom
from tests.viz.test_viz import NPARTS, grid, make_summary

ROOT = Path(__file__).resolve().parents[2]
DPI = DPI_RANGE[0]  # the smallest picture: the fuzz draws many
SECRET = b"outside the run directory: must never change\n"


def _hermes(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "hermes", *args], capture_output=True, text=True, timeout=timeout,
                          env=env, cwd=ROOT)


@pytest.fixture(scope="module")
def real_run(tmp_path_factory) -> Path:
    """A real run of hermes (1 processor, an 8x6 grid refined over 2 phases: phases 1 and 2 carry their own
    geometry), made once by the CLI; tests copy it."""
    out = tmp_path_factory.mktemp("real") / "run"
    r = _hermes("run", "--no-launch", "--set", "processors=1", "--set", "platform.capacities=homo",
                "--set", "mesh.grid=8x6", "--set", "adaptation.phases=2", "--set", "adaptation.kind=refine",
                "--out", str(out), "--quiet", "--no-pictures")
    assert r.returncode == 0, r.stderr
    return out


@pytest.fixture
def run(real_run: Path, tmp_path: Path) -> Path:
    """A fresh copy of the real run (without its lock file) and an outside file a hostile link points to."""
    dest = tmp_path / "run"
    shutil.copytree(real_run, dest, ignore=shutil.ignore_patterns(".hermes-lock"))
    (tmp_path / "secret.txt").write_bytes(SECRET)
    return dest


@pytest.fixture
def grid_run(tmp_path: Path) -> Path:
    """A hand-made run of 3 ranks on a 10x10 grid (100 cells), 3 phases, with the run marker."""
    d = tmp_path / "grid"
    d.mkdir()
    geo = grid(10, 10)
    np.savez(d / "geometry.npz", **geo)
    parts = {f"owner_{k:03d}": np.clip((geo["coords"][:, 0] + k) // 4, 0, NPARTS - 1).astype(np.int32)
             for k in range(3)}
    parts.update({f"weight_{k:03d}": np.ones(100) for k in range(3)})
    np.savez(d / "partitions.npz", **parts)
    (d / "summary.json").write_text(json.dumps({**make_summary(), "phases": make_summary()["phases"][:2]}))
    write_marker(d, "run")
    return d


def _outside_untouched(tmp_path: Path) -> None:
    assert (tmp_path / "secret.txt").read_bytes() == SECRET


def _temporaries(d: Path) -> list[Path]:
    return [p for p in d.rglob("*") if p.name.endswith(".tmp")]


# -- writes that cannot be redirected ---------------------------------------------------------------------------
def test_a_link_planted_at_any_fixed_temporary_name_is_neither_followed_nor_used(run: Path, tmp_path: Path):
    """The audit's attack: ``partition-002.png.tmp -> outside``. Links at every ``<final>.tmp`` name (and at
    the names of earlier versions' temporaries) stay links to an unchanged file."""
    finals = [f"partition-{k:03d}.png" for k in range(3)] + ["phases.png", "partition.pvd"]
    (run / "vtu").mkdir()
    finals += [f"vtu/phase-{k:03d}.vtu" for k in range(3)]
    links = [run / (name + ".tmp") for name in finals] + [run / f".{name}.tmp" for name in finals if "/" not in name]
    for link in links:
        link.symlink_to(tmp_path / "secret.txt")
    written = plot_run(run, dpi=DPI) + write_run_vtu(run)
    assert {p.relative_to(run).as_posix() for p in written} == set(finals)
    _outside_untouched(tmp_path)
    for link in links:
        assert link.is_symlink() and os.readlink(link) == str(tmp_path / "secret.txt")
    for p in written:
        assert p.is_file() and not p.is_symlink()
    assert set(_temporaries(run)) == set(links)  # nothing of ours left beside them


def test_a_link_planted_at_the_final_name_is_replaced_not_followed(run: Path, tmp_path: Path):
    (run / "vtu").mkdir()
    finals = ["partition-001.png", "phases.png", "partition.pvd", "vtu/phase-001.vtu"]
    for name in finals:
        (run / name).symlink_to(tmp_path / "secret.txt")
    plot_run(run, phases=[1], dpi=DPI)
    write_run_vtu(run)
    _outside_untouched(tmp_path)
    for name in finals:
        p = run / name
        assert not p.is_symlink() and p.stat().st_size > 0 and p.read_bytes() != SECRET
    assert (run / "partition-001.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not _temporaries(run)


def test_files_get_the_umask_mode(run: Path):
    old = os.umask(0o027)
    try:
        written = plot_run(run, phases=[0], dpi=DPI) + write_run_vtu(run)
    finally:
        os.umask(old)
    assert {p.stat().st_mode & 0o777 for p in written} == {0o640}  # not mkstemp's 0600


def test_a_vtu_directory_planted_as_a_link_is_refused(run: Path, tmp_path: Path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (run / "vtu").symlink_to(outside)
    with pytest.raises(HermesError, match="symbolic link"):
        write_run_vtu(run)
    assert not list(outside.iterdir())


def test_the_report_embeds_only_regular_png_files(tmp_path: Path, grid_run: Path):
    png = plot_run(grid_run, phases=[0], dpi=DPI, timeline=False)[0]
    assert data_uri(png).startswith("data:image/png;base64,")
    (tmp_path / "link.png").symlink_to(png)
    (tmp_path / "secret.png").write_bytes(SECRET)
    os.mkfifo(tmp_path / "fifo.png")
    for bad in ("link.png", "secret.png", "fifo.png", "absent.png"):
        assert data_uri(tmp_path / bad) is None


# -- bounds of the options ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("dpi", [0, 9, 1201, 100_000, -150, True, 150.0, "150", None])
def test_dpi_out_of_range_is_one_line(grid_run: Path, dpi):
    with pytest.raises(HermesError, match=r"^--dpi: must be an integer between 10 and 1200, got") as err:
        plot_run(grid_run, dpi=dpi)
    assert "\n" not in str(err.value)
    with pytest.raises(HermesError, match="--dpi"):
        plot_partition(grid_run / "x.png", np.zeros((2, 2)), np.zeros(2, dtype=int), dpi=dpi)
    assert not list(grid_run.glob("*.png"))


def test_dpi_bounds_are_inclusive(grid_run: Path):
    assert check_dpi(DPI_RANGE[0]) == 10 and check_dpi(np.int64(DPI_RANGE[1])) == 1200
    assert [p.name for p in plot_run(grid_run, phases=[0], dpi=10, timeline=False)] == ["partition-000.png"]


@pytest.mark.parametrize("zoom", [(-np.inf, 1, 0, 1), (0, np.nan, 0, 1), (1, 0, 0, 1), (0, 1, 1, 1), (0, 1, 0, 1e101),
                                  (0, 1, 0), (0, 1, 0, 1, 2), ("a", 1, 0, 1), (True, 2, 0, 1), 5, "-inf,0,1,1",
                                  "0,0,1e400,1", "1,2", "nan,0,1,1"])
def test_zoom_must_be_a_finite_non_empty_box(grid_run: Path, zoom):
    with pytest.raises(HermesError, match="^--zoom") as err:
        plot_run(grid_run, zoom=zoom, dpi=DPI)
    assert "\n" not in str(err.value)
    if isinstance(zoom, str):
        with pytest.raises(HermesError, match="^--zoom"):
            parse_zoom(zoom)
    assert not list(grid_run.glob("*.png"))


def test_a_good_zoom_box_in_any_form(grid_run: Path):
    assert check_zoom("auto") == "auto" and check_zoom(None) is None and check_zoom("none") is None
    assert check_zoom(np.array([0, 5, 0, 5])) == (0.0, 5.0, 0.0, 5.0) == check_zoom("0,0,5,5")
    assert len(plot_run(grid_run, phases=[1], zoom="1,1,6,6", dpi=DPI, timeline=False)) == 1


@pytest.mark.parametrize("phases", [[-1], [MAX_PHASES + 1], [True], [1.5], ["1"], [10**30], 7])
def test_phases_must_be_phase_numbers(grid_run: Path, phases):
    with pytest.raises(HermesError, match="^--phase"):
        plot_run(grid_run, phases=phases, dpi=DPI)


def test_show_as_before(grid_run: Path):
    with pytest.raises(HermesError, match="--show 'colours'"):
        plot_run(grid_run, show=("weights", "colours"))


# -- huge rank ids: refused at once, never sized --------------------------------------------------------------------
#: the bound the huge-owner test states: refusing owner ids of 10⁶ on a 100-cell mesh takes well under this
#: (it is a check of the array's maximum; sizing colour tables and bincounts by 10⁶ ranks used to take minutes)
FAIL_FAST_SECONDS = 5.0


@pytest.mark.parametrize("processors", [3, None])
def test_owner_ids_near_a_million_fail_fast(grid_run: Path, processors):
    summary = json.loads((grid_run / "summary.json").read_text())
    summary["processors"] = processors
    (grid_run / "summary.json").write_text(json.dumps(summary))
    with np.load(grid_run / "partitions.npz") as z:
        parts = dict(z)
    parts["owner_002"] = np.full(100, 999_999, dtype=np.int64)
    np.savez(grid_run / "partitions.npz", **parts)
    start = time.perf_counter()
    with pytest.raises(HermesError) as err:
        plot_run(grid_run, dpi=DPI)
    assert time.perf_counter() - start < FAIL_FAST_SECONDS
    want = ("owner_002 holds rank ids up to 999999 for a run of 3 processors" if processors else
            f"owner_002 holds rank ids up to 999999; hermes draws at most {MAX_PROCESSORS} ranks")
    assert str(err.value) == f"cannot read {grid_run / 'partitions.npz'}: {want}"
    assert not list(grid_run.glob("*.png"))
    with pytest.raises(HermesError, match="owner_002 holds rank ids up to 999999"):
        write_run_vtu(grid_run)


@pytest.mark.slow
def test_the_largest_rank_count_draws_in_seconds(grid_run: Path):
    """Owner ids up to MAX_PROCESSORS − 1 (a legal run of 100 000 processors): the colour key and the load
    bars are single artists, so the picture takes seconds, not the minutes of one patch per rank."""
    summary = json.loads((grid_run / "summary.json").read_text())
    summary["processors"] = MAX_PROCESSORS
    (grid_run / "summary.json").write_text(json.dumps(summary))
    with np.load(grid_run / "partitions.npz") as z:
        parts = dict(z)
    parts["owner_001"] = (np.arange(100) * 1009 % MAX_PROCESSORS).astype(np.int64)
    parts["owner_001"][-1] = MAX_PROCESSORS - 1
    np.savez(grid_run / "partitions.npz", **parts)
    start = time.perf_counter()
    assert len(plot_run(grid_run, phases=[1], dpi=DPI, timeline=False)) == 1
    assert time.perf_counter() - start < 60.0  # ~2 s here; one patch per rank took minutes


# -- damaged files: one line or a picture ----------------------------------------------------------------------------
def _attempt(run: Path, *, vtu: bool = True, phases: list[int] | None = None, timeline: bool = True) -> str:
    """Draw the run (and write its VTU files): ``"ok"``, or the one-line error. Any other exception fails."""
    outcome = "ok"
    draws = [lambda: plot_run(run, dpi=DPI, phases=phases, timeline=timeline)]
    for draw in draws + ([lambda: write_run_vtu(run)] if vtu else []):
        try:
            draw()
        except HermesError as err:
            text = str(err)
            assert text and "\n" not in text and len(text) < 600, text
            assert not text.startswith("cannot draw"), text  # refused by the checks, not by save_figure's guard
            outcome = text
    assert not _temporaries(run)
    return outcome


def _arrays(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as z:
        return dict(z)


def _save_npz(path: Path, arrays: dict) -> None:
    """Like np.savez, but keeps whatever is given (object arrays are pickled, as a hostile file would be)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, a in arrays.items():
            member = io.BytesIO()
            np.lib.format.write_array(member, np.asanyarray(a), allow_pickle=True)
            zf.writestr(name + ".npy", member.getvalue())
    path.write_bytes(buf.getvalue())


FILES = ("summary.json", "geometry.npz", "partitions.npz", "phases.csv")


def _light(name: str) -> dict:
    """What to draw when ``name`` is damaged: only what reads it (a picture costs ~0.6 s on this machine)."""
    if name == "summary.json":
        return dict(vtu=False, phases=[2])
    if name == "phases.csv":
        return dict(vtu=False, phases=[1], timeline=False)
    return dict(timeline=False)


@pytest.mark.slow
@pytest.mark.parametrize("name", FILES)
def test_truncated_files(run: Path, tmp_path: Path, name: str):
    data = (run / name).read_bytes()
    end = len(data.rstrip())  # cut into the content, not the final newline
    outcomes = []
    for cut in sorted({0, 1, 8, 30, end // 4, end // 2, end - 22, end - 1}):
        (run / name).write_bytes(data[:cut])
        outcomes.append(_attempt(run, **_light(name)))
    if name != "phases.csv":  # the capacities are optional: without them the loads are drawn without fair ticks
        assert all(o != "ok" for o in outcomes), outcomes
    _outside_untouched(tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name", FILES)
def test_flipped_bytes(run: Path, name: str):
    data = (run / name).read_bytes()
    rng = np.random.default_rng(20240611 + FILES.index(name))  # fixed: a failure can be replayed
    for _ in range(12):
        damaged = bytearray(data)
        for pos in rng.integers(0, len(data), size=int(rng.integers(1, 5))):
            damaged[pos] ^= int(rng.integers(1, 256))
        (run / name).write_bytes(bytes(damaged))
        _attempt(run, **_light(name))


#: replacements of one array: (label, function of the original array → the damaged one, or None to remove it)
ARRAY_DAMAGES = [
    ("removed", lambda a: None),
    ("float", lambda a: a.astype(np.float64) + 0.5),
    ("complex", lambda a: a.astype(np.complex128)),
    ("text", lambda a: a.astype(str)),
    ("object", lambda a: a.astype(object)),
    ("bool", lambda a: a.astype(bool)),
    ("structured", lambda a: np.zeros(a.shape[:1], dtype=[("x", "i4"), ("y", "f8")])),
    ("datetime", lambda a: np.zeros(a.shape, dtype="datetime64[s]")),
    ("half and big-endian", lambda a: a.astype(">f2" if a.dtype.kind == "f" else a.dtype.newbyteorder(">"))),
    ("scalar", lambda a: np.asarray(a.reshape(-1)[0])),
    ("empty", lambda a: a[:0]),
    ("one short", lambda a: a[:-1]),
    ("one more", lambda a: np.concatenate([a, a[-1:]])),
    ("2-D", lambda a: a.reshape(a.shape[0], -1)[:, :1].repeat(3, axis=1)),
    ("3-D", lambda a: a.reshape(a.shape[0], -1, 1)),
    ("negative", lambda a: -np.abs(a) - 1),
    ("huge", lambda a: np.full(a.shape, 2**62, dtype=np.int64) if a.dtype.kind in "iu" else a * 1e300),
    ("nan", lambda a: np.where(np.arange(a.size).reshape(a.shape) == 1, np.nan, a.astype(np.float64))),
    ("inf", lambda a: np.where(np.arange(a.size).reshape(a.shape) == 0, -np.inf, a.astype(np.float64))),
    ("reversed", lambda a: a[::-1].copy()),
    ("uint64 wrap", lambda a: a.astype(np.int64).astype(np.uint64) - np.uint64(1)),
]

GEOMETRY_KEYS = ("coords", "points", "cell_ptr", "cell_nodes", "xadj", "adjncy", "coords_001", "cell_ptr_002")
PARTITION_KEYS = ("owner_000", "owner_001", "weight_001", "gid_002")


def _damage(a: np.ndarray, damage) -> np.ndarray | None:
    with np.errstate(all="ignore"):
        return damage(a)


@pytest.mark.slow
@pytest.mark.parametrize("name,keys", [("geometry.npz", GEOMETRY_KEYS), ("partitions.npz", PARTITION_KEYS)])
def test_arrays_of_the_wrong_dtype_shape_or_values(run: Path, name: str, keys):
    original = _arrays(run / name)
    refused = 0
    for key in keys:
        for label, damage in ARRAY_DAMAGES:
            arrays = dict(original)
            bad = _damage(original[key], damage)
            if bad is None:
                del arrays[key]
            else:
                arrays[key] = bad
            _save_npz(run / name, arrays)
            phase = int(key[-3:]) if key[-1].isdigit() else 0  # the shared geometry is phase 0's
            refused += _attempt(run, phases=[phase], timeline=False) != "ok"
    assert refused > len(keys) * len(ARRAY_DAMAGES) // 2  # most damages are refused, the rest draw


def test_levels_and_extra_arrays(run: Path):
    parts = _arrays(run / "partitions.npz")
    n = parts["owner_001"].size
    for bad in (np.full(n, 256), np.full(n, -1), np.zeros(n, dtype=np.float64)):
        _save_npz(run / "partitions.npz", {**parts, "level_001": bad})
        with pytest.raises(HermesError, match="level_001"):
            plot_run(run, dpi=DPI)
    _save_npz(run / "partitions.npz", {**parts, "level_001": np.arange(n) % 4, "owner_1": np.zeros(3),
                                        "owner_9999999": np.zeros(3), "u_001": np.ones((n, 2)),
                                        "x" * 300 + "_001": np.ones(n), "owner_001x": np.zeros(2)})
    assert _attempt(run) == "ok"
    del parts["weight_002"]
    _save_npz(run / "partitions.npz", parts)
    with zipfile.ZipFile(run / "partitions.npz", "a") as zf:  # a member that is not an .npy array
        zf.writestr("weight_002.npy", b"not an array")
        zf.writestr("readme.txt", b"hello")
    assert "weight_002" in _attempt(run)


def test_a_forged_header_is_refused_before_its_data_is_read(run: Path):
    """An .npy header declaring 10¹² floats (8 TB): refused from the header, nothing allocated."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False, "shape": (10**12,)})
    parts = _arrays(run / "partitions.npz")
    del parts["weight_001"]
    _save_npz(run / "partitions.npz", parts)
    with zipfile.ZipFile(run / "partitions.npz", "a") as zf:
        zf.writestr("weight_001.npy", header.getvalue() + b"\0" * 64)
    start = time.perf_counter()
    with pytest.raises(HermesError, match=r"weight_001 declares \(1000000000000,\) values"):
        plot_run(run, dpi=DPI)
    assert time.perf_counter() - start < FAIL_FAST_SECONDS


def test_a_compressed_bomb_is_refused_by_its_declared_size(tmp_path: Path):
    """64 MB of zeros compress to 64 kB: the archive passes the file-size limit, the array its declared size
    does not (nothing is decompressed); the budget is what is read from the whole file."""
    np.savez_compressed(tmp_path / "bomb.npz", small=np.ones(1000), big=np.zeros(8 * 2**20))
    assert (tmp_path / "bomb.npz").stat().st_size < 2**20
    with NpzArchive(tmp_path / "bomb.npz", max_bytes=2**20) as z:
        assert z.get("small").sum() == 1000 and z.get("absent") is None
        start = time.perf_counter()
        with pytest.raises(HermesError, match=r"big declares \(8388608,\) values of float64 \(64 MB\): more than the "
                                              r"1 MB hermes reads from one file"):
            z.get("big")
        assert time.perf_counter() - start < 1.0
    with pytest.raises(HermesError, match="the file is .* more than the 100 bytes hermes reads"):
        NpzArchive(tmp_path / "bomb.npz", max_bytes=100)


def test_an_archive_of_too_many_members_is_refused_before_zipfile_parses_it(tmp_path: Path, monkeypatch):
    with zipfile.ZipFile(tmp_path / "many.npz", "w") as zf:  # 70 000 members: the count is in the ZIP64 record
        for i in range(70_000):
            zf.writestr(f"a{i}.npy", b"")
    monkeypatch.setattr(rundir, "MAX_NPZ_MEMBERS", 69_999)
    monkeypatch.setattr(zipfile, "ZipFile", None)  # never reached
    with pytest.raises(HermesError, match="lists 70000 members, more than the 69999 hermes reads"):
        NpzArchive(tmp_path / "many.npz")


#: replacements of one JSON value of summary.json: (path of keys, values tried)
JSON_DAMAGES = [
    ((), [None, [], "x", 5, True]),
    (("processors",), [None, True, 0, -4, 1.5, "4", [4], {"n": 4}, 10**6, 10**400]),
    (("scenario",), [None, 5, ["a"], {"a": 1}, "$\\frac{", "x" * 100_000, "a\nb\n" * 1000]),
    (("balancer",), [7, "$x$", None]),
    (("clock",), [[], 1]),
    (("total_time",), ["fast", True, 1e308, -1e308, 10**400, [1]]),
    (("final_imbalance",), [{}, "1.2", 10**301]),
    (("phases",), [None, {}, "x", 5, [None], [[]], [5], [{}] * 3, [{"phase": -1}], [{"phase": "1"}],
                   [{"phase": 1.5}], [{"phase": 10**6}], [{"phase": True}], [{"phase": 1}] * (MAX_PHASES + 1)]),
    (("phases", 0), [None, [], "x", {"phase": None}, {"phase": 2}]),
    (("phases", 0, "imbalance_after"), ["1.2", True, None, [1], 1e308, 10**400, -5]),
    (("phases", 0, "edge_cut"), ["x", 10**20, 2.5, False]),
    (("phases", 0, "migrated_cells"), [{}, 10**16]),
    (("phases", 0, "cells_moved"), ["85", [], 10**16]),
    (("phases", 0, "cell_sends"), [True, {}]),
    (("phases", 0, "quality", "migration_cells"), ["x", 10**16]),
    (("phases", 0, "time"), ["1", [], 1e300]),
    (("phases", 1, "compute_time"), [None, "x", -1e300]),
]


def _set(doc, path, value):
    if not path:
        return value
    target = doc
    for k in path[:-1]:
        target = target[k]
    target[path[-1]] = value
    return doc


@pytest.mark.slow
def test_summary_values_of_the_wrong_type(run: Path):
    original = json.loads((run / "summary.json").read_text())
    for path, values in JSON_DAMAGES:
        for value in values:
            doc = _set(json.loads(json.dumps(original)), path, value)
            (run / "summary.json").write_text(json.dumps(doc))
            outcome = _attempt(run, **_light("summary.json"))
            try:
                check_summary(doc)
            except HermesError:
                assert outcome != "ok", (path, value)  # what check_summary refuses, plot_run refuses
    for raw in ("{", '{"processors": NaN}', '{"total_time": Infinity}', "[" * 100_000 + "]" * 100_000,
                '{"phases": [' + "{}," * 10 + "]}", "{}\ufeff", "\ufeff\ufeff{}", "\xff\xfe"):
        (run / "summary.json").write_text(raw, encoding="utf-8", errors="surrogateescape")
        assert _attempt(run, **_light("summary.json")) != "ok"


def test_summary_refusals_name_the_field(run: Path):
    summary = json.loads((run / "summary.json").read_text())
    for path, value, want in [(("processors",), 0, "processors must be an integer between 1 and 100000, got 0"),
                              (("phases", 0, "imbalance_after"), "x",
                               "phases[0].imbalance_after must be a number of magnitude at most 1e+300, got 'x'"),
                              (("scenario",), ["a"], "scenario must be a string, got a list")]:
        (run / "summary.json").write_text(json.dumps(_set(json.loads(json.dumps(summary)), path, value)))
        with pytest.raises(HermesError) as err:
            plot_run(run, dpi=DPI)
        assert str(err.value) == f"cannot read {run / 'summary.json'}: {want}"


def test_phases_csv_is_optional_and_never_fatal(run: Path):
    bad = ["phase,rank,capacity\n1,0,nan\n", "phase,rank,capacity\n1,999999,1\n", "phase,rank\n1,0\n",
           "phase,rank,capacity\n1,0\n", "a" * 200_000 + "\n", "phase,rank,capacity\n" + "1," * 10_000 + "\n",
           "\x00\x01\x02", "phase,rank,capacity\n99999999999999999999999,0,1\n"]
    for text in bad:
        (run / "phases.csv").write_text(text)
        assert _attempt(run, **_light("phases.csv")) == "ok"


#: valid but extreme inputs: (label, change of the geometry's coordinates, plot_run's zoom)
EXTREMES = [
    ("coordinates near the bound", lambda a: a * 1e99 + 1e99, "auto"),
    ("tiny coordinates", lambda a: a * 1e-300, "auto"),
    ("all units at one point", np.zeros_like, "auto"),
    ("far from the origin", lambda a: a + 1e15, None),
    ("a needle of a mesh", lambda a: a * np.array([1e-12, 1e12])[: a.shape[1]], "auto"),
    ("a needle of a window", None, (0.0, 1e-12, 0.0, 1e12)),
    ("a window at float resolution", None, (1e15, 1e15 + 0.125, 0.0, 0.125)),
    ("a window of the largest corners", None, (-1e100, 1e100, -1e100, 1e100)),
]


@pytest.mark.slow
@pytest.mark.parametrize("label,change,zoom", EXTREMES, ids=[e[0] for e in EXTREMES])
def test_extreme_but_valid_inputs_draw(run: Path, label, change, zoom):
    if change is not None:
        geo = _arrays(run / "geometry.npz")
        _save_npz(run / "geometry.npz", {k: change(v) if k.startswith(("coords", "points")) else v
                                          for k, v in geo.items()})
    assert len(plot_run(run, phases=[0, 1], zoom=zoom, dpi=DPI, timeline=False)) == 2


def test_extreme_but_valid_arrays_draw(run: Path):
    parts = _arrays(run / "partitions.npz")
    n = parts["owner_001"].size
    _save_npz(run / "partitions.npz", {**parts, "weight_001": np.full(n, 1e100), "weight_002": np.zeros(311),
                                        "level_001": np.arange(n) % 256})
    assert _attempt(run, phases=[1, 2], timeline=False) == "ok"
    np.savez(run / "geometry.npz", coords=np.zeros((0, 2)), xadj=np.zeros(1, dtype=int), adjncy=np.zeros(0, int))
    np.savez(run / "partitions.npz", owner_000=np.zeros(0, dtype=int), weight_000=np.zeros(0))
    assert "coords has shape (0, 2)" in _attempt(run, timeline=False)  # a run has at least one unit


# -- the other pictures: monitor.png, the experiment's plots, phases.png of a long run ------------------------------
def test_monitor_rows_from_a_damaged_phases_csv(tmp_path: Path):
    rows = [{"phase": k, "rank": r, "capacity_true": v, "capacity_forecast": "x", "capacity_measured": None}
            for k in (1, 2) for r, v in enumerate(["0.5", "nan", "inf", "", "1e999"])]
    a = monitor_arrays(rows)
    assert np.isnan(a["true"][:, 1:]).all() and np.isnan(a["forecast"]).all() and a["true"][0, 0] == 0.5
    start = time.perf_counter()
    for bad in ({"phase": 1, "rank": 10**9}, {"phase": -1, "rank": 0}, {"phase": 10**7, "rank": 0},
                {"phase": "1.5", "rank": 0}, {"phase": None, "rank": 0}):
        with pytest.raises(HermesError, match="phases.csv"):
            monitor_arrays(rows + [bad])
    with pytest.raises(HermesError, match="more than the 10,000,000 entries"):
        monitor_arrays([{"phase": k, "rank": 99_999} for k in range(200)])
    assert time.perf_counter() - start < FAIL_FAST_SECONDS
    with pytest.raises(HermesError, match="--dpi"):
        plot_monitor(tmp_path / "m.png", [1], np.ones((1, 1)), np.ones((1, 1)), dpi=0)
    with pytest.raises(HermesError, match="finite"):
        plot_monitor(tmp_path / "m.png", [np.nan], np.ones((1, 1)), np.ones((1, 1)))


@pytest.mark.slow
def test_monitor_of_many_ranks_draws_the_first_64(tmp_path: Path):
    p = 200  # a rank per panel: the first 64 are drawn, the title says so
    out = plot_monitor(tmp_path / "m.png", [1, 2], np.full((2, p), 1 / p), np.full((2, p), np.inf), dpi=DPI,
                       title="$\\frac{")
    assert out.read_bytes()[:4] == b"\x89PNG"


def test_experiment_plots_of_damaged_summaries(tmp_path: Path):
    good = make_summary()
    damaged = [{"phases": "x", "total_time": "1"}, {"phases": [None, {"phase": "a", "imbalance_after": [1]},
                                                              {"quality": [], "migrated_cells": "9", "edge_cut": {}}]},
               {"total_time": 10**400, "final_imbalance": True, "phases": [{"phase": 10**400, "time": 1e308}] * 3}]
    rows, cols = ["$\\frac{row", "b" * 500], ["gda0", "$x"]
    cells = {(r, c): [good, *damaged] for r in rows for c in cols}
    for plot in (plot_totals, plot_imbalance, plot_breakdown, plot_pareto):
        assert plot(tmp_path / f"{plot.__name__}.png", rows, cols, cells, dpi=DPI).is_file()
        with pytest.raises(HermesError, match="--dpi"):
            plot(tmp_path / "x.png", rows, cols, cells, dpi=True)
    with pytest.raises(HermesError, match="more than the 300 panels"):
        plot_imbalance(tmp_path / "x.png", [str(i) for i in range(301)], cols, {}, dpi=DPI)


def test_a_long_run_draws_its_phases_in_seconds(tmp_path: Path):
    """5 000 phases: the time split becomes stacked steps (a bar per phase and part took a minute)."""
    phases = [{"phase": k, "time": 1.0, "compute_time": 0.5 + 0.1 * (k % 7), "comm_time": 0.1,
               "imbalance_before": 1.5, "imbalance_after": 1.01} for k in range(1, 5001)]
    start = time.perf_counter()
    plot_phases(tmp_path / "phases.png", {**make_summary(), "phases": phases}, dpi=DPI)
    assert time.perf_counter() - start < 30.0
    with pytest.raises(HermesError, match=r"^summary: phases\[1\] must be a mapping"):
        plot_phases(tmp_path / "phases.png", {"phases": [{}, 5]}, dpi=DPI)


# -- the CLI: one line, exit status 2 ------------------------------------------------------------------------------
def test_hermes_plot_dpi_0_is_one_line_and_exit_2(run: Path):
    r = _hermes("plot", str(run), "--dpi", "0")
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith("hermes: error: ") and "--dpi: must be at least 10, got 0" in r.stderr, r.stderr
    assert not list(run.glob("*.png"))


@pytest.mark.slow
def test_hermes_plot_refuses_in_one_line(run: Path):
    for args, want in [(("--dpi", "100000"), "--dpi: must be at most 1200, got 100000"),
                       (("--zoom=-inf,0,1,1",), "--zoom: a corner must be a finite number, got -inf"),
                       (("--phase", "-1"), "--phase")]:
        r = _hermes("plot", str(run), *args)
        assert r.returncode == 2, (args, r.stderr)
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("hermes: error: ") and want in r.stderr, r.stderr
    parts = _arrays(run / "partitions.npz")
    np.savez(run / "partitions.npz", **{**parts, "owner_002": np.full(parts["owner_002"].shape, 999_999)})
    r = _hermes("plot", str(run))
    assert r.returncode == 2
    assert r.stderr == (f"hermes: error: cannot read {run / 'partitions.npz'}: owner_002 holds rank ids up to 999999 "
                        "for a run of 1 processor\n")
    assert not list(run.glob("*.png"))


def test_the_bounds_are_the_scenarios_and_the_meshes():
    """hermes.viz.rundir keeps its own copies (viz need not import pydantic or scipy): they must agree."""
    from hermes.data.mesh import COORD_MAX, WEIGHT_MAX
    from hermes.scenario import MAX_PHASES as SCENARIO_PHASES
    from hermes.scenario import MAX_PROCESSORS as SCENARIO_PROCESSORS

    assert (rundir.MAX_PROCESSORS, rundir.MAX_PHASES) == (SCENARIO_PROCESSORS, SCENARIO_PHASES)
    assert (rundir.COORD_MAX, rundir.WEIGHT_MAX) == (COORD_MAX, WEIGHT_MAX)
