"""External task scripts: what other users run on the processors (thesis §10.1, Fig. 10.12).

"The activity of a parallel task can be decomposed into a suite of interleaving phases of computation,
communication or idleness": a task follows a script of triples ``(Data, Work, Wait)`` — ``Data`` a
collection of pairs ``(p, c)``, send ``c`` bytes to processor ``p``; ``Work`` an amount of work to do
(work units, the application's unit); ``Wait`` an idle time in seconds. A task runs on one processor,
passes over its script ``repeat`` times (or ``forever``), starts at a phase or a time and may stop at one;
``priority`` is its CPU weight against the application's (processor sharing, :mod:`.sharing`).

YAML (``tasks:`` a list; ``processor`` may list several processors: one task per processor)::

    tasks:
      - name: burst
        processor: [3, 7]          # or one rank
        priority: 1.0              # CPU weight (the application's is extraload.application_priority)
        start: {phase: 2}          # or {time: 12.5} (virtual seconds); default {time: 0}
        stop: {phase: 4}           # killed at the end of phase 4; or {time: 40}; default: never
        repeat: forever            # or a number of passes over the script (default 1)
        script:
          - {data: [[1, 2.0e6]], work: 5.0e4, wait: 0.5}   # data also as a mapping {1: 2.0e6}
          - {work: 1.0e5}

CSV (one triple per row; a task's first row gives its columns, later rows may leave them empty)::

    task,processor,priority,start_phase,start_time,stop_phase,stop_time,repeat,data,work,wait
    burst,3;7,1,2,,4,,forever,1:2e6,5e4,0.5
    burst,,,,,,,,,1e5,0

Errors are one line naming the key path (``tasks.0.script.1.work: ...``) or the CSV line.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from hermes.errors import ScenarioError
from hermes.loaders import load_yaml, read_text
from hermes.strict import Strict

__all__ = ["Step", "Task", "TaskSpec", "TaskFile", "ExtraLoadSpec", "load_tasks", "parse_tasks", "compile_tasks",
           "check_tasks", "CSV_COLUMNS"]

CSV_COLUMNS = ["task", "processor", "priority", "start_phase", "start_time", "stop_phase", "stop_time", "repeat",
               "data", "work", "wait"]

NonNeg = Annotated[float, Field(ge=0, le=1e15, allow_inf_nan=False)]  # bytes, work units, seconds: finite, bounded
#: a task's (or the application's) CPU weight: the shares are ratios of priorities, so their ratio is at most 1e12
#: (a task of weight 1e-6 beside one of 1e6 still gets 1e-12 of a processor: its times stay within the virtual
#: clock's span, hermes.sections.MAX_TIME_SPAN)
Priority = Annotated[float, Field(ge=1e-6, le=1e6, allow_inf_nan=False)]



class TripleSpec(Strict):
    """One ``(Data, Work, Wait)`` triple of a script (thesis §10.1)."""

    data: list[tuple[Annotated[int, Field(ge=0, le=1_000_000)], NonNeg]] = Field(
        default_factory=list, description="pairs (processor, bytes): sent concurrently, the step ends when all arrive")
    work: NonNeg = Field(0.0, description="work units (the application's unit), shared CPU")
    wait: NonNeg = Field(0.0, description="idle seconds")

    @field_validator("data", mode="before")
    @classmethod
    def _pairs(cls, v):
        if isinstance(v, dict):
            return [[k, c] for k, c in v.items()]
        if v is None:
            return []
        return v


class When(Strict):
    """A start or stop instant: the beginning (start) or end (stop) of a phase, or a virtual time."""

    phase: Annotated[int, Field(ge=1, le=1_000_000)] | None = None
    time: NonNeg | None = None

    @model_validator(mode="after")
    def _one(self):
        if (self.phase is None) == (self.time is None):
            raise ValueError("give exactly one of 'phase' or 'time'")
        return self


class TaskSpec(Strict):
    """One external task (or one per processor when ``processor`` is a list)."""

    name: str = "task"
    processor: Annotated[int, Field(ge=0, le=1_000_000)] | list[Annotated[int, Field(ge=0, le=1_000_000)]]
    priority: Priority = 1.0
    start: When = When(time=0.0)
    stop: When | None = None
    repeat: Annotated[int, Field(ge=1, le=10**12)] | Literal["forever"] = 1
    script: list[TripleSpec] = Field(min_length=1)

    @field_validator("processor")
    @classmethod
    def _nonempty(cls, v):
        if isinstance(v, list) and not v:
            raise ValueError("needs at least one processor")
        return v

    @model_validator(mode="after")
    def _consistent(self):
        if not any(t.work > 0 or t.wait > 0 or any(c > 0 for _, c in t.data) for t in self.script):
            raise ValueError("the script does nothing: every work, wait and data amount is zero")
        s, e = self.start, self.stop
        if e is not None and s.phase is not None and e.phase is not None and e.phase < s.phase:
            raise ValueError(f"stop phase {e.phase} is before start phase {s.phase}")
        if e is not None and s.time is not None and e.time is not None and e.time <= s.time:
            raise ValueError(f"stop time {e.time} is not after start time {s.time}")
        return self


class TaskFile(Strict):
    """A task-script file: a list of tasks."""

    tasks: list[TaskSpec] = Field(min_length=1)


@dataclass(frozen=True)
class Step:
    """One non-empty step of a compiled script: ``data`` (flows), ``work`` (units) or ``wait`` (seconds)."""

    kind: Literal["data", "work", "wait"]
    amount: float = 0.0
    flows: tuple[tuple[int, float], ...] = ()


@dataclass(frozen=True)
class Task:
    """A compiled task on one processor: its steps (one pass, empty steps dropped) and its lifetime.

    ``repeat`` is the number of passes (None: forever). Start: at the beginning of ``start_phase`` or at
    virtual time ``start_time`` (exactly one is set). Stop: at the end of ``stop_phase`` (i.e. the beginning
    of the next phase) or at ``stop_time``, or never (both None).
    """

    name: str
    processor: int
    priority: float
    steps: tuple[Step, ...]
    repeat: int | None
    start_phase: int | None = None
    start_time: float | None = None
    stop_phase: int | None = None
    stop_time: float | None = None

    @property
    def work_per_pass(self) -> float:
        return sum(s.amount for s in self.steps if s.kind == "work")

    @property
    def bytes_per_pass(self) -> float:
        return sum(c for s in self.steps for _, c in s.flows)


def _steps(script: list[TripleSpec]) -> tuple[Step, ...]:
    out: list[Step] = []
    for t in script:
        flows = tuple((int(p), float(c)) for p, c in t.data if c > 0)
        if flows:
            out.append(Step("data", flows=flows))
        if t.work > 0:
            out.append(Step("work", float(t.work)))
        if t.wait > 0:
            out.append(Step("wait", float(t.wait)))
    return tuple(out)


def compile_tasks(spec: TaskFile) -> list[Task]:
    """One :class:`Task` per (task, processor), in file order."""
    tasks = []
    for ts in spec.tasks:
        procs = ts.processor if isinstance(ts.processor, list) else [ts.processor]
        steps = _steps(ts.script)
        for q in procs:
            name = ts.name if len(procs) == 1 else f"{ts.name}@{q}"
            tasks.append(Task(name=name, processor=int(q), priority=float(ts.priority), steps=steps,
                              repeat=None if ts.repeat == "forever" else int(ts.repeat),
                              start_phase=ts.start.phase, start_time=ts.start.time,
                              stop_phase=None if ts.stop is None else ts.stop.phase,
                              stop_time=None if ts.stop is None else ts.stop.time))
    return tasks


def check_tasks(tasks: list[Task], p: int, where: str = "extraload") -> None:
    """Check processors and destinations against the run's ``p`` processors (ScenarioError, one line)."""
    for t in tasks:
        if t.processor >= p:
            raise ScenarioError(f"{where}: task '{t.name}' runs on processor {t.processor} but the run has {p} "
                                f"processors (0..{p - 1})")
        for s in t.steps:
            for d, _ in s.flows:
                if d >= p:
                    raise ScenarioError(f"{where}: task '{t.name}' sends to processor {d} but the run has {p} "
                                        f"processors (0..{p - 1})")
                if d == t.processor:
                    raise ScenarioError(f"{where}: task '{t.name}' on processor {d} sends data to its own processor")


def _format(err: ValidationError, source: str) -> str:
    e = err.errors()[0]
    loc = ".".join(str(x) for x in e["loc"] if not (isinstance(x, str) and x.startswith(("function-", "literal["))))
    msg = "unknown key" if e["type"] == "extra_forbidden" else e["msg"].replace("Value error, ", "")
    return f"{source}: {loc or 'tasks'}: {msg}"


def parse_tasks(data: Any, source: str = "extraload") -> list[Task]:
    """Validate a raw mapping (``{'tasks': [...]}``) or list of tasks; returns compiled tasks."""
    if isinstance(data, list):
        data = {"tasks": data}
    if not isinstance(data, dict):
        raise ScenarioError(f"{source}: expected a mapping with a 'tasks' list")
    try:
        spec = TaskFile.model_validate(data)
    except ValidationError as err:
        raise ScenarioError(_format(err, source)) from None
    return compile_tasks(spec)


def _csv_value(raw: str, column: str, kind, where: str):
    raw = raw.strip()
    if raw == "":
        return None
    try:
        return kind(raw)
    except ValueError:
        raise ScenarioError(f"{where}: column '{column}': cannot read {raw!r}") from None


def _csv_data(raw: str, where: str) -> list[list[float]]:
    pairs = []
    for item in filter(None, (x.strip() for x in raw.split(";"))):
        p, sep, c = item.partition(":")
        try:
            if not sep:
                raise ValueError
            pairs.append([int(p), float(c)])
        except ValueError:
            raise ScenarioError(f"{where}: column 'data': expected processor:bytes pairs separated by ';', "
                                f"got {item!r}") from None
    return pairs


#: the largest task-script file hermes reads
MAX_TASK_BYTES = 64 * 2**20


def _read_csv(path: Path) -> dict[str, Any]:
    """CSV rows → the YAML structure, remembering which line each task and triple came from."""
    text = read_text(path, str(path), max_bytes=MAX_TASK_BYTES)
    try:
        return _parse_csv(path, text)
    except csv.Error as err:  # a field beyond csv's size limit, a NUL byte
        raise ScenarioError(f"{path}: not a CSV task file ({err})") from None


def _parse_csv(path: Path, text: str) -> dict[str, Any]:
    lines = [(n, line) for n, line in enumerate(text.splitlines(), start=1)
             if line.strip() and not line.lstrip().startswith("#")]
    if not lines:
        raise ScenarioError(f"{path}: no header")
    header = [h.strip() for h in next(csv.reader([lines[0][1]]))]
    unknown = [h for h in header if h not in CSV_COLUMNS]
    if unknown:
        raise ScenarioError(f"{path} line {lines[0][0]}: unknown column '{unknown[0]}' (columns: "
                            f"{', '.join(CSV_COLUMNS)})")
    for need in ("task", "processor"):
        if need not in header:
            raise ScenarioError(f"{path} line {lines[0][0]}: missing column '{need}'")
    tasks: dict[str, dict[str, Any]] = {}
    rows_of: dict[str, list[int]] = {}
    for n, line in lines[1:]:
        where = f"{path} line {n}"
        cells = next(csv.reader([line]))
        if len(cells) > len(header):
            raise ScenarioError(f"{where}: {len(cells)} values for {len(header)} columns")
        row = dict(zip(header, cells + [""] * (len(header) - len(cells))))
        name = row["task"].strip()
        if not name:
            raise ScenarioError(f"{where}: column 'task': a task name is needed on every row")
        attrs: dict[str, Any] = {}
        procs = row.get("processor", "").strip()
        if procs:
            vals = [_csv_value(x, "processor", int, where) for x in procs.split(";") if x.strip()]
            attrs["processor"] = vals[0] if len(vals) == 1 else vals
        pr = _csv_value(row.get("priority", ""), "priority", float, where)
        if pr is not None:
            attrs["priority"] = pr
        for key, col, kind in (("start", "start_phase", int), ("start", "start_time", float),
                               ("stop", "stop_phase", int), ("stop", "stop_time", float)):
            v = _csv_value(row.get(col, ""), col, kind, where)
            if v is not None:
                if key in attrs:
                    raise ScenarioError(f"{where}: give only one of {key}_phase and {key}_time")
                attrs[key] = {col.split("_")[1]: v}
        rep = row.get("repeat", "").strip()
        if rep:
            attrs["repeat"] = rep if rep == "forever" else _csv_value(rep, "repeat", int, where)
        triple = {"data": _csv_data(row.get("data", ""), where),
                  "work": _csv_value(row.get("work", ""), "work", float, where) or 0.0,
                  "wait": _csv_value(row.get("wait", ""), "wait", float, where) or 0.0}
        if name not in tasks:
            tasks[name] = {"name": name, **attrs, "script": []}
            rows_of[name] = []
        else:
            for k, v in attrs.items():
                if tasks[name].get(k) != v:
                    raise ScenarioError(f"{where}: task '{name}': column for '{k}' differs from the task's first row")
        tasks[name]["script"].append(triple)
        rows_of[name].append(n)
    if not tasks:
        raise ScenarioError(f"{path}: no tasks")
    return {"tasks": list(tasks.values()), "_rows": list(rows_of.values())}


def load_tasks(path: str | Path) -> list[Task]:
    """Read a task-script file (``.yaml``/``.yml`` or ``.csv``); ScenarioError in one line on bad input."""
    path = Path(path)
    if not path.is_file():
        raise ScenarioError(f"extraload: no such task file: {path}")
    if path.suffix.lower() == ".csv":
        data = _read_csv(path)
        rows = data.pop("_rows")
        try:
            return compile_tasks(TaskFile.model_validate(data))
        except ValidationError as err:
            loc = err.errors()[0]["loc"]
            n = rows[loc[1]][0] if len(loc) > 1 and isinstance(loc[1], int) else None
            if len(loc) > 3 and loc[2] == "script" and isinstance(loc[3], int):
                n = rows[loc[1]][loc[3]]
            where = f"{path} line {n}" if n is not None else str(path)
            raise ScenarioError(_format(err, where)) from None
    if path.suffix.lower() not in (".yaml", ".yml"):
        raise ScenarioError(f"{path}: task files are .yaml, .yml or .csv")
    return parse_tasks(load_yaml(path, max_bytes=MAX_TASK_BYTES), str(path))


class ExtraLoadSpec(Strict):
    """The scenario's ``extraload:`` section: the tasks (a file or inline) and the application's CPU weight.

    ::

        extraload:
          tasks: ../configs/extraload-bursty.csv    # .yaml/.yml/.csv, relative to the scenario; or a list
          application_priority: 1.0                 # the application's weight against the tasks' priorities
    """

    tasks: str | list[dict[str, Any]] = Field(description="a task file (.yaml, .yml, .csv) or a list of tasks")
    application_priority: Priority = 1.0

    def compile(self, resolve=Path, p: int | None = None) -> list[Task]:
        """The compiled tasks (``resolve`` maps the file name to a path); checked against ``p`` if given."""
        if isinstance(self.tasks, str):
            tasks = load_tasks(resolve(self.tasks))
        else:
            tasks = parse_tasks(self.tasks, "extraload.tasks")
        if p is not None:
            check_tasks(tasks, p)
        return tasks
