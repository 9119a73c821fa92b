"""benchmarks/first_hour.py's measure of silence: a child printing with known gaps on both pipes."""

from __future__ import annotations

import pytest

from benchmarks.first_hour import PROGRESS_PRELUDE, Step, longest_silence, outcome, watch
from hermes.interpreter import child_env, python_command

#: a child printing "a" at once, "b" after 0.3 s, "c" on stderr 1.5 s later, then silent for 0.6 s
CHILD = """
import sys, time
print("a", flush=True)
time.sleep(0.3)
print("b", flush=True)
time.sleep(1.5)
print("c", file=sys.stderr, flush=True)
time.sleep(0.6)
"""


def test_longest_silence_counts_the_start_and_the_end():
    assert longest_silence([1.0, 2.0, 5.0], 6.0) == (3.0, 2)   # between the 2nd and 3rd lines
    assert longest_silence([4.0, 4.5], 5.0) == (4.0, 0)        # from the start to the first line
    assert longest_silence([0.5, 1.0], 9.0) == (8.0, 2)        # from the last line to the end
    assert longest_silence([], 2.5) == (2.5, 0)                # no line: the whole run


def test_watch_stamps_each_line_as_it_arrives(tmp_path):
    log = tmp_path / "child.log"
    w = watch(python_command("-c", CHILD), env=child_env(), log=log, timeout=60)
    assert w.returncode == 0
    assert [(s, text) for _, s, text in w.lines] == [("out", "a"), ("out", "b"), ("err", "c")]
    ta, tb, tc = (t for t, _, _ in w.lines)
    # arrival times: a reader thread scheduled late shortens one gap and lengthens the next (a busy machine)
    assert tc - tb >= 1.0 and w.wall >= 2.4
    gap, k = longest_silence([ta, tb, tc], w.wall)
    assert k == 2 and gap == pytest.approx(tc - tb) and gap >= 1.0
    r = outcome(Step("x", "child", "python -c CHILD", None), w, log, tmp_path)
    assert (r["status"], r["lines"], r["stderr_lines"]) == ("ok", 3, 1)
    assert (r["silence_after"], r["silence_before"]) == ("b", "c")
    assert [line.split("| ", 1)[1] for line in log.read_text().splitlines()] == ["a", "b", "c"]


def test_a_refusal_passes_only_in_one_line_with_a_non_zero_exit(tmp_path):
    refuse = Step("r", "refusal", "python -c ...", None, expect="refused")
    one = watch(python_command("-c", "import sys; sys.exit('error: no')"), env=child_env(), timeout=60)
    two = watch(python_command("-c", "import sys; print('x'); sys.exit('error: no')"), env=child_env(), timeout=60)
    assert outcome(refuse, one, tmp_path / "l", tmp_path)["passed"]
    assert not outcome(refuse, two, tmp_path / "l", tmp_path)["passed"]


def test_a_step_past_its_timeout_is_killed_and_fails(tmp_path):
    w = watch(python_command("-c", "import time; print('x', flush=True); time.sleep(60)"), env=child_env(),
              timeout=1.0)
    assert w.returncode is None and 1.0 <= w.wall < 30
    assert not outcome(Step("t", "slow", "python -c ...", None), w, tmp_path / "l", tmp_path)["passed"]


def test_the_readme_prelude_asks_for_progress_until_it_is_the_default():
    """Before hermes.run and hermes.compare show progress by default (``progress=``), the README's blocks are run
    with ``quiet=False``: both functions, where the README calls them, get it; after, the prelude is not used."""
    check = PROGRESS_PRELUDE + """
import inspect, hermes, hermes.api
import hermes.compare as comp
for f in (hermes.run, comp.compare):
    print(getattr(f, "keywords", {}).get("quiet"), "progress" in inspect.signature(f).parameters)
"""
    w = watch(python_command("-c", check), env=child_env(), timeout=60)
    assert w.returncode == 0, w.lines
    shown = [text for _, _, text in w.lines]
    assert shown in (["False False", "False False"], ["None True", "None True"]), shown
