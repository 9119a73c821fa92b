"""The command line: one-line errors, self-launch under mpiexec, plot, singleton runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from hermes.runtime.start import usable_cores

from hermes.runtime.launch import _LAUNCHER_ENV, mpiexec_command, under_mpi_launcher
from tests.conftest import ROOT


def cli(*args, timeout=180, cwd=None):
    env = {k: v for k, v in os.environ.items() if k not in _LAUNCHER_ENV}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-m", "hermes", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd or ROOT, env=env)


@pytest.mark.slow
def test_scenario_command_prints_resolved_yaml_and_reports_errors():
    res = cli("scenario", "scenarios/thesis-heterogeneous.yaml", "--set", "seed=11")
    assert res.returncode == 0 and "seed: 11" in res.stdout and "processors: 15" in res.stdout
    res = cli("scenario", "--set", "balancer.algorithm=pcg", "--set", "adaptation.factor=-1")
    assert res.returncode == 2
    assert res.stderr.strip().startswith("hermes: error: adaptation.factor:")
    assert len(res.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_balancers_listed():
    res = cli("balancers")
    assert res.returncode == 0
    for name in ("none", "pcg", "gda0", "gda1", "metis"):
        assert any(line.startswith(name) for line in res.stdout.splitlines())


@pytest.mark.mpi  # starts mpiexec itself
@pytest.mark.slow
def test_run_launches_itself_under_mpiexec_and_plot_redraws(tmp_path):
    out = tmp_path / "q"
    res = cli("run", "--set", "adaptation.phases=2", "--out", str(out))
    assert res.returncode == 0, res.stderr
    first = res.stdout.splitlines()[0]
    n = min(4, usable_cores())  # the default: one process per processor up to the cores
    assert first.startswith("hermes: launching: ") and "mpiexec" in first and f" -n {n} " in first
    assert n == 4 or first.endswith(f"(4 processors on {n} processes)"), first
    assert "phase 2/2" in res.stdout and (out / "summary.json").exists()
    for png in out.glob("*.png"):
        png.unlink()
    res = cli("plot", str(out))
    assert res.returncode == 0, res.stderr
    # redrawn into the run's plots/ (the run's own pictures are never overwritten)
    assert (out / "plots" / "partition-002.png").exists() and (out / "plots" / "phases.png").exists()
    res = cli("plot", str(tmp_path / "absent"))
    assert res.returncode == 2 and res.stderr.startswith("hermes: error: run directory not found")


@pytest.mark.slow
def test_bad_scenario_is_reported_before_launching(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("mesh: {grid: 10x10}\nbalancer: {algorithm: pcg}\napplication: {iterations: zero}\n")
    res = cli("run", str(bad))
    assert res.returncode == 2 and "launching" not in res.stdout
    assert res.stderr.strip() == "hermes: error: application.iterations: must be a valid integer, got 'zero'"


@pytest.mark.slow
def test_no_launch_runs_in_process_hosting_every_processor(tmp_path):
    res = cli("run", "--no-launch", "--no-pictures", "--set", "processors=1", "--set", "platform.capacities=homo",
              "--set", "adaptation.phases=1", "--out", str(tmp_path / "one"))
    assert res.returncode == 0, res.stderr
    assert "launching" not in res.stdout and (tmp_path / "one" / "summary.json").exists()
    res = cli("run", "--no-launch", "--no-pictures", "--set", "adaptation.phases=1", "--out", str(tmp_path / "four"))
    assert res.returncode == 0, res.stderr
    assert "launching" not in res.stdout and "on 4 processors on 1 process," in res.stdout
    assert json.loads((tmp_path / "four" / "summary.json").read_text())["processors"] == 4
    res = cli("run", "--no-launch", "--processes", "2", "--out", str(tmp_path / "two"))
    assert res.returncode == 2 and "--processes: 2, but the job has 1 process" in res.stderr


def test_launcher_flags(monkeypatch):
    assert not under_mpi_launcher({})
    assert under_mpi_launcher({"OMPI_COMM_WORLD_SIZE": "4"}) and under_mpi_launcher({"PMI_RANK": "0"})
    monkeypatch.setattr("hermes.runtime.launch.mpi_flavour", lambda exe: "openmpi")
    monkeypatch.setattr("os.geteuid", lambda: 0)
    cmd = mpiexec_command(64, ["run", "x.yaml"], mpiexec="/x/mpiexec", python="/x/python")
    assert cmd[:3] == ["/x/mpiexec", "--allow-run-as-root", "--oversubscribe"]
    assert cmd[3:] == ["-n", "64", "/x/python", "-P", "-m", "mpi4py", "-m", "hermes", "run", "x.yaml"]  # safe path
    monkeypatch.setattr("hermes.runtime.launch.mpi_flavour", lambda exe: "mpich")
    assert mpiexec_command(64, [], mpiexec="/x/mpiexec", python="/x/python")[1] == "-n"


@pytest.mark.parametrize("args, message", [
    (["--graph", "path:4", "--capacities", "1,0,1,1", "--algorithm", "pcg"], "must be positive"),
    (["--graph", "path:4", "--weights", "1,-1,1", "--algorithm", "gda0"], "must be positive"),
    (["--graph", "path:6", "--algorithm", "sos", "--param", "omega=2.5"],
     "balancer.omega: must be less than or equal to 1.99, got 2.5"),
    (["--graph", "path:6", "--algorithm", "magic"], "unknown algorithm 'magic'; valid: "),
    (["--graph", "DISC", "--algorithm", "pcg"], "disconnected"),
    (["--graph", "ring:5", "--algorithm", "gda0", "--tol", "3"], "argument --tol: must be a number in [0, 1)"),
])
@pytest.mark.slow
def test_flow_lab_bad_parameters(tmp_path, args, message):
    disc = tmp_path / "disc.txt"
    disc.write_text("0 1\n2 3\n")
    res = cli("lab", "flow", *[str(disc) if a == "DISC" else a for a in args])
    assert res.returncode == 2 and res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hermes: error:") and message in lines[0]


@pytest.mark.slow
def test_flow_json_and_gossip_json():
    import json

    res = cli("lab", "flow", "--graph", "torus:4x4", "--capacities", "hcuw", "--weights", "ijmod3", "--loads", "one",
              "--algorithm", "lpa", "--param", "coefficients=faddeev", "--json")
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout)
    for key in ("algorithm", "p", "edges", "flow", "initial_loads", "fair_loads", "final_loads", "iterations",
                "convergence_factor", "flow_error", "exchange_rounds", "collectives", "messages", "bytes", "time"):
        assert key in d
    assert d["p"] == 16 and d["iterations"] == 15 and d["convergence_factor"] is None
    res = cli("lab", "gossip", "--ranks", "64", "--objects", "1000", "--mapped-ranks", "2", "--iterations", "6",
              "--criterion", "modified", "--json")
    assert res.returncode == 0, res.stderr
    g = json.loads(res.stdout)
    it = g["history"] if "history" in g else g["iterations"]
    assert isinstance(it, list) and {"transfers", "rejected", "imbalance", "min", "max", "sigma"} <= set(it[-1])
    assert it[-1]["imbalance"] < it[0]["imbalance"]


@pytest.mark.parametrize("argv, name", [(["run", "scenarios/bahi-homogeneous.yaml"], "bahi"),
                                        (["run", "scenarios/bahi-grid.yaml", "--no-launch"], "bahi"),
                                        (["run", "scenarios/quickstart.yaml"], "mesh"), (["run"], "mesh"),
                                        (["run", "--resume", "scenarios/bahi-homogeneous.yaml"], "mesh"),
                                        (["run", "absent.yaml"], "mesh")])
def test_run_looks_its_application_up_once(argv, name):
    """hermes run dispatches through the application registry: the Brusselator study for a spec file, the mesh
    application for every other scenario (which then reports an unreadable file in its own words)."""
    from hermes.cli.parser import build_parser
    from hermes.cli.run import APPLICATIONS, application_for

    args = build_parser().parse_args([a.replace("scenarios/", str(ROOT / "scenarios") + "/") for a in argv])
    assert application_for(args).name == name
    assert [a.name for a in APPLICATIONS] == ["bahi", "mesh"]


NOTE = "hermes: '{old}' is now '{new}'; the old spelling goes in the next release"


@pytest.mark.parametrize("old, argv, check", [
    ("hermes replay", ["replay", "T", "--list"], lambda out, tmp: "pcg" in out.split()),
    ("hermes flow", ["flow", "--graph", "path:4", "--algorithm", "pcg", "--json"],
     lambda out, tmp: json.loads(out)["p"] == 4),
    ("hermes gossip", ["gossip", "--ranks", "4", "--objects", "20", "--json"],
     lambda out, tmp: json.loads(out)["ranks"] == 4),
    pytest.param("hermes flow-bench", ["flow-bench", "--quick", "--family", "table10.1", "--out", "{tmp}/fb"],
                 lambda out, tmp: (tmp / "fb" / "table-10.1.csv").is_file(), marks=pytest.mark.slow),
])
def test_an_old_spelling_still_works_and_says_its_new_one_on_stderr_only(tmp_path, old, argv, check):
    """Each command renamed by the grammar of verbs and nouns runs as before, one note on stderr naming its new
    spelling; stdout (--json, --list) is the command's alone."""
    from hermes.cli.parser import OLD_SPELLINGS

    res = cli(*[a.replace("{tmp}", str(tmp_path)) for a in argv])
    assert res.returncode == 0, res.stderr
    assert res.stderr.splitlines() == [NOTE.format(old=old, new=OLD_SPELLINGS[old])]
    assert "old spelling" not in res.stdout and check(res.stdout, tmp_path)


def test_run_resume_is_now_resume(tmp_path):
    """``hermes run --resume DIR`` is ``hermes resume DIR`` (the note, then the same check of DIR); so is
    ``--resume=DIR`` and an abbreviation; the launcher re-runs the new spelling under mpiexec (no note in the job)."""
    from hermes.cli.parser import OLD_SPELLINGS, respell

    res = cli("run", "--resume", str(tmp_path / "absent"), "--quiet")
    assert res.returncode == 2
    assert res.stderr.splitlines() == [NOTE.format(old="hermes run --resume DIR", new=OLD_SPELLINGS[
        "hermes run --resume DIR"]), f"hermes: error: resume: {tmp_path / 'absent'} is not a run directory"]
    new = cli("resume", str(tmp_path / "absent"), "--quiet")
    assert new.returncode == 2 and new.stderr.splitlines() == res.stderr.splitlines()[1:]
    for argv in (["run", "--resume=R", "--quiet"], ["run", "--quiet", "--res", "R"]):
        assert respell(argv)[0] == ["resume", "R", "--quiet"]
    assert respell(["run", "s.yaml", "--out", "o"]) == (["run", "s.yaml", "--out", "o"], None)
    assert respell(["run", "--set", "x=1", "--", "--resume", "R"])[1] is None


def test_only_rank_0_says_the_note():
    env_rank = {**os.environ, "OMPI_COMM_WORLD_RANK": "1", "PYTHONPATH": str(ROOT)}
    env_rank = {k: v for k, v in env_rank.items() if k not in _LAUNCHER_ENV or k == "OMPI_COMM_WORLD_RANK"}
    res = subprocess.run([sys.executable, "-m", "hermes", "replay", "T", "--list"], capture_output=True, text=True,
                         timeout=120, cwd=ROOT, env=env_rank)
    assert res.returncode == 0 and res.stderr == "" and "pcg" in res.stdout.split()


def test_help_lists_the_grammar_of_verbs_and_nouns():
    res = cli("--help")
    listed = {line.split()[0] for line in res.stdout.splitlines() if line.startswith("    ")}
    assert {"run", "resume", "compare", "plot", "mesh", "trace", "lab", "balancers", "scenario"} <= listed
    assert not listed & {"replay", "flow", "gossip", "flow-bench"}
    assert "replay" in cli("trace", "--help").stdout and "bench" in cli("lab", "--help").stdout


@pytest.mark.parametrize("argv, line", [
    (["rnu"], "unknown command 'rnu' (did you mean 'run'?)"),
    (["trace", "replya", "T"], "trace: unknown command 'replya' (did you mean 'replay'?)"),
    (["lab", "gosip"], "lab: unknown command 'gosip' (did you mean 'gossip'?)"),
    (["replya"], "unknown command 'replya' (did you mean 'trace replay'?)"),
    (["xyzzy"], "unknown command 'xyzzy' (hermes --help lists the commands)"),
    (["run", "--procesors", "4"], "run: unrecognized arguments: --procesors (did you mean '--processes'?)"),
    (["lab", "bench", "--quik"], "lab bench: unrecognized arguments: --quik (did you mean '--quick'?)"),
    (["mesh", "info", "m.vtu", "--jsn"], "mesh info: unrecognized arguments: --jsn (did you mean '--json'?)"),
])
def test_a_mistyped_command_or_option_is_one_line_with_the_closest(argv, line):
    res = cli(*argv)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.splitlines() == [f"hermes: error: {line}"]


def test_trace_replay_lists_its_balancers_without_a_trace_and_asks_for_one_otherwise():
    listed = cli("trace", "replay", "--list")
    assert listed.returncode == 0 and listed.stderr == "" and "pcg" in listed.stdout.split()
    res = cli("trace", "replay")
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.splitlines() == ["hermes: error: trace replay: the following arguments are required: stem "
                                       "(hermes trace replay --help lists the options)"]
