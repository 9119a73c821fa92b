"""Task-script files (hermes.extraload.tasks): YAML and CSV, compiled steps, one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from hermes.errors import ScenarioError
from hermes.extraload.tasks import Step, check_tasks, load_tasks, parse_tasks

ROOT = Path(__file__).resolve().parents[2]

YAML = """
tasks:
  - name: burst
    processor: [3, 7]
    priority: 2.0
    start: {phase: 2}
    stop: {time: 40}
    repeat: forever
    script:
      - {data: [[1, 2.0e6], [4, 0]], work: 5.0e4, wait: 0.5}
      - {work: 1.0e5}
  - processor: 0
    script:
      - {data: {2: 1000}}
"""

CSV = """# two tasks, the first over two rows
task,processor,priority,start_phase,start_time,stop_phase,stop_time,repeat,data,work,wait
burst,3;7,2,2,,,40,forever,1:2e6;4:0,5e4,0.5
burst,,,,,,,,,1e5,0
task,0,,,,,,,2:1000,,
"""


def test_yaml_and_csv_give_the_same_tasks(tmp_path):
    y = tmp_path / "t.yaml"
    y.write_text(YAML)
    c = tmp_path / "t.csv"
    c.write_text(CSV)
    ty, tc = load_tasks(y), load_tasks(c)
    assert ty == tc
    assert [t.name for t in ty] == ["burst@3", "burst@7", "task"]
    b = ty[0]
    assert (b.processor, b.priority, b.repeat, b.start_phase, b.start_time, b.stop_phase, b.stop_time) == \
        (3, 2.0, None, 2, None, None, 40.0)
    # zero-byte pairs and empty parts are dropped; the order inside a triple is Data, Work, Wait
    assert b.steps == (Step("data", flows=((1, 2.0e6),)), Step("work", 5.0e4), Step("wait", 0.5), Step("work", 1e5))
    assert b.work_per_pass == 1.5e5 and b.bytes_per_pass == 2.0e6
    t = ty[2]
    assert (t.repeat, t.start_time, t.start_phase, t.stop_time) == (1, 0.0, None, None)
    assert t.steps == (Step("data", flows=((2, 1000.0),)),)


@pytest.mark.parametrize("tasks, msg", [
    ([{"processor": 0, "script": [{"work": -1}]}], "tasks.0.script.0.work: Input should be greater than or equal"),
    ([{"processor": 0, "script": [{"wokr": 1}]}], "tasks.0.script.0.wokr: unknown key"),
    ([{"processor": 0, "script": []}], "tasks.0.script: List should have at least 1 item"),
    ([{"processor": 0, "script": [{"work": 0, "wait": 0}]}], "tasks.0: the script does nothing"),
    ([{"processor": 0, "start": {"phase": 3}, "stop": {"phase": 2}, "script": [{"work": 1}]}],
     "stop phase 2 is before start phase 3"),
    ([{"processor": 0, "start": {"phase": 1, "time": 2}, "script": [{"work": 1}]}],
     "tasks.0.start: give exactly one of 'phase' or 'time'"),
    ([{"processor": 0, "repeat": 0, "script": [{"work": 1}]}], "tasks.0.repeat"),
    ([{"processor": 0, "priority": 0, "script": [{"work": 1}]}], "tasks.0.priority"),
    ([{"processor": [], "script": [{"work": 1}]}], "tasks.0.processor: "),
    ({"task": []}, "tasks: Field required"),
])
def test_bad_yaml_is_one_line_with_the_key(tasks, msg):
    with pytest.raises(ScenarioError) as err:
        parse_tasks(tasks, "f.yaml")
    text = str(err.value)
    assert "\n" not in text and text.startswith("f.yaml: ") and msg in text


@pytest.mark.parametrize("body, msg", [
    ("task,processor,work\nt,0,abc\n", "line 2: column 'work': cannot read 'abc'"),
    ("task,processor,data,work\nt,0,1-5,1\n", "line 2: column 'data': expected processor:bytes pairs"),
    ("task,processor,colour\n", "line 1: unknown column 'colour'"),
    ("task,work\nt,1\n", "line 1: missing column 'processor'"),
    ("task,processor,work\nt,0,1\nt,1,2\n", "line 3: task 't': column for 'processor' differs"),
    ("task,processor,work,wait\nt,0,1,0\nt,,-3,0\n", "line 3: tasks.0.script.1.work: Input should be greater"),
    ("task,processor,priority,work\nt,0,-1,1\n", "line 2: tasks.0.priority"),
    ("task,processor,start_phase,start_time,work\nt,0,1,2,1\n", "line 2: give only one of start_phase and start_time"),
    ("task,processor,work\n,0,1\n", "line 2: column 'task': a task name is needed"),
])
def test_bad_csv_names_the_line(tmp_path, body, msg):
    p = tmp_path / "t.csv"
    p.write_text(body)
    with pytest.raises(ScenarioError) as err:
        load_tasks(p)
    assert "\n" not in str(err.value) and msg in str(err.value)


def test_files_and_processor_checks(tmp_path):
    with pytest.raises(ScenarioError, match="no such task file"):
        load_tasks(tmp_path / "none.yaml")
    bad = tmp_path / "t.yaml"
    bad.write_text("tasks: [\n")
    with pytest.raises(ScenarioError, match="not valid YAML"):
        load_tasks(bad)
    txt = tmp_path / "t.txt"
    txt.write_text("x")
    with pytest.raises(ScenarioError, match=r"\.yaml, \.yml or \.csv"):
        load_tasks(txt)
    tasks = parse_tasks([{"processor": 2, "script": [{"data": [[4, 10]]}]}])
    check_tasks(tasks, 5)
    with pytest.raises(ScenarioError, match="sends to processor 4 but the run has 4 processors"):
        check_tasks(tasks, 4)
    with pytest.raises(ScenarioError, match="runs on processor 2 but the run has 2"):
        check_tasks(tasks, 2)
    with pytest.raises(ScenarioError, match="sends data to its own processor"):
        check_tasks(parse_tasks([{"processor": 1, "script": [{"data": [[1, 10]]}]}]), 3)


@pytest.mark.parametrize("name", ["extraload-table-10.6.yaml", "extraload-congestion.yaml", "extraload-bursty.csv"])
def test_shipped_task_files_load_for_15_processors(name):
    tasks = load_tasks(ROOT / "configs" / name)
    check_tasks(tasks, 15)
    assert tasks


def test_extraload_spec_from_file_or_inline(tmp_path):
    from pydantic import ValidationError

    from hermes.extraload.tasks import ExtraLoadSpec

    (tmp_path / "t.yaml").write_text(YAML)
    spec = ExtraLoadSpec.model_validate({"tasks": "t.yaml", "application_priority": 2})
    tasks = spec.compile(lambda name: tmp_path / name, p=8)
    assert len(tasks) == 3 and spec.application_priority == 2.0
    inline = ExtraLoadSpec.model_validate({"tasks": [{"processor": 1, "script": [{"work": 5}]}]})
    assert inline.compile(p=2)[0].steps == (Step("work", 5.0),)
    with pytest.raises(ScenarioError, match="extraload.tasks: tasks.0.script.0.work"):
        ExtraLoadSpec.model_validate({"tasks": [{"processor": 1, "script": [{"work": -5}]}]}).compile()
    with pytest.raises(ScenarioError, match="runs on processor 7 but the run has 4"):
        spec.compile(lambda name: tmp_path / name, p=4)
    with pytest.raises(ValidationError):
        ExtraLoadSpec.model_validate({"tasks": "t.yaml", "application_priority": 0})
