"""``hermes scenario`` (the resolved scenario, a mesh scenario or a Brusselator spec), ``hermes balancers`` (the
registry and the reference of every parameter and number option, docs/PARAMETERS.md) and ``hermes mesh`` (describe a mesh file, generate a CFD mesh)."""

from __future__ import annotations

from hermes.bounds import BIG, TINY, shown
from hermes.cli.common import error

__all__ = ["check_mesh", "cmd_scenario", "cmd_balancers", "format_balancers", "markdown_balancers", "cmd_mesh"]


def cmd_scenario(args) -> int:
    import sys

    from hermes.app.brusselator import is_spec_file
    from hermes.cli.run_mesh import scenario_of
    from hermes.errors import HermesError, MeshError
    from hermes.loaders import dump_yaml

    note = None
    try:
        if args.scenario and is_spec_file(args.scenario):  # a Brusselator spec: validated as hermes run would
            from hermes.app.brusselator.study import load_spec

            doc = load_spec(args.scenario, args.overrides).model_dump(mode="json")
        else:
            sc = scenario_of(args)
            try:
                note = check_mesh(sc)
            except MeshError as err:
                said = "hermes run" in str(err)
                raise MeshError(str(err) if said else f"{err} (hermes run refuses this mesh)") from None
            doc = sc.to_dict()
    except HermesError as err:
        return error(str(err))
    print(dump_yaml(doc, sort_keys=False), end="")
    if note is not None:
        print(f"hermes: note: {note}", file=sys.stderr)
    if not (args.scenario and is_spec_file(args.scenario)):
        from hermes.lifecycle.setup import approximations

        for line in approximations(sc):
            print(f"hermes: note: {line}", file=sys.stderr)
    return 0


def check_mesh(sc) -> str | None:
    """What ``hermes run`` checks of the scenario's mesh before it starts MPI, checked here too when it is
    cheap (:func:`hermes.lifecycle.preflight.mesh_cells`: a grid, or a file up to ``READ_LIMIT`` read and
    validated — connected, positive weights, one load per vertex, refinable if the scenario refines), so that
    ``hermes scenario`` refuses what run would refuse; a MeshError then, or (a larger file, not read) a note
    saying that run reads and checks it; None when the mesh passed."""
    from hermes.lifecycle.preflight import READ_LIMIT, mesh_cells

    if mesh_cells(sc.mesh, sc.adaptation, sc.resolve) is not None:
        return None
    return (f"mesh.file {sc.resolve(sc.mesh.file)} is larger than {READ_LIMIT // 2**20} MiB and is not read here: "
            f"hermes run reads and checks it (a connected graph, positive weights; docs/LIMITS.md)")


def cmd_balancers(args) -> int:
    from hermes.balance.registry import all_balancers

    if args.markdown:  # the built-ins only: the documentation does not depend on what is installed
        from hermes.balance.registry import BALANCERS

        print(markdown_balancers(BALANCERS), end="")
    else:
        print(format_balancers(all_balancers(), verbose=args.verbose))
    return 0


def format_balancers(balancers: dict, *, verbose: bool = False) -> str:
    """The table of ``hermes balancers``: name and description, then (``--verbose``) every parameter with its
    default and description, as declared in the balancer's parameter model."""
    width = max(len(n) for n in balancers) + 2
    lines = []
    for name, info in sorted(balancers.items()):
        lines.append(f"{name:<{width}}{info.doc}")
        fields = info.params.model_fields
        if not verbose:
            if fields:
                lines.append(" " * width + "parameters: " + ", ".join(f"{k}={f.default!r}" for k, f in fields.items()))
            continue
        pw = max((len(k) for k in fields), default=0) + 2
        dw = max((len(repr(f.default)) for f in fields.values()), default=0) + 2
        for k, f in fields.items():
            lines.append(" " * (width + 2) + f"{k:<{pw}}{f.default!r:<{dw}}{f.description or ''}")
    return "\n".join(lines)


def _schema_values(prop: dict, defs: dict | None = None, key: str | None = None) -> str:
    """A parameter's type and bounds in words, from its JSON schema (``defs``: the schema's ``$defs``); a mapping
    of values as ``{KEY: values}``, KEY the field's ``x-key`` (its ``json_schema_extra``) or ``name``."""
    key = prop.get("x-key", key)
    if "$ref" in prop:
        return "a section (below)"
    if "anyOf" in prop or "oneOf" in prop:
        return " or ".join(_schema_values(p, defs, key) for p in prop.get("anyOf", prop.get("oneOf")))
    if "enum" in prop:
        return " \\| ".join(f"`{v}`" for v in prop["enum"])
    if "const" in prop:
        return f"`{prop['const']}`"
    if prop.get("type") == "array":
        if "prefixItems" in prop:
            items = [_schema_values(p, defs) for p in prop["prefixItems"]]
            return f"{len(items)} × {items[0]}" if len(set(items)) == 1 else "(" + ", ".join(items) + ")"
        return f"list of {_schema_values(prop.get('items', {}), defs)}"
    if prop.get("type") == "object" and isinstance(prop.get("additionalProperties"), dict):
        return f"{{{key or 'name'}: {_schema_values(prop['additionalProperties'], defs)}}}"
    kind = {"number": "number", "integer": "integer", "boolean": "true \\| false", "string": "string",
            "null": "null", "object": "mapping"}.get(prop.get("type", ""), prop.get("type", "any"))
    names = (("minimum", "≥"), ("ge", "≥"), ("exclusiveMinimum", ">"), ("gt", ">"), ("maximum", "≤"), ("le", "≤"),
             ("exclusiveMaximum", "<"), ("lt", "<"))
    bounds = [f"{sym} {shown(prop[k])}" for k, sym in names if k in prop]
    return kind + (" " + ", ".join(bounds) if bounds else "")


def _submodel(annotation):
    """The model a field holds (alone, optional, or as the items of a list) and whether in a list; (None, False)
    for a plain value."""
    import typing

    from pydantic import BaseModel

    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    if typing.get_origin(annotation) is list and args and isinstance(args[0], type) and issubclass(args[0], BaseModel):
        return args[0], True
    if len(args) == 1 and typing.get_origin(annotation) is not list:
        return _submodel(args[0])
    return None, False


def _model_rows(model, prefix: str = "") -> list[str]:
    """Table rows (key path, default, values, description) of a model's fields, its sections expanded (the items
    of a list of sections as ``key.N.field``)."""
    props = model.model_json_schema()["properties"]
    rows, sections = [], []
    for key, field in model.model_fields.items():
        if field.exclude:
            continue
        sub, listed = _submodel(field.annotation)
        if sub is not None:
            sections.append((f"{prefix}{key}{'.N' if listed else ''}", sub))
            continue
        if field.default_factory is not None:
            default = f"`{field.default_factory()!r}`"
        else:
            default = "required" if field.is_required() else f"`{field.default!r}`"
        desc = (field.description or "").replace("|", "\\|").replace("\n", " ")
        rows.append(f"| `{prefix}{key}` | {default} | {_schema_values(props[key])} | {desc} |")
    for path, sub in sections:
        rows += _model_rows(sub, f"{path}.")
    return rows


def _option_rows(parser, command: str = "hermes") -> list[str]:
    """Table rows (command, option, default, range) of every number option of the parser and its commands."""
    import argparse

    rows = []
    for action in parser._actions:  # argparse offers no public walk of its options
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                rows += _option_rows(sub, f"{command} {name}")
        elif hasattr(action.type, "describe"):
            option = "/".join(f"`{o}`" for o in action.option_strings) or f"`{action.dest}`"
            rng = action.type.describe().replace("|", "\\|")
            rows.append(f"| `{command}` | {option} | `{action.default!r}` | {rng} |")
    return rows


def markdown_balancers(balancers: dict) -> str:
    """docs/PARAMETERS.md: the rule for numbers, every number option of the command line (from the parser), every
    key of a scenario, a Brusselator spec and a task file (from their models) and every balancer's parameters
    (from its parameter model); a test keeps the file equal to this."""
    from hermes.app.brusselator.study import BrusselatorSpec
    from hermes.cli.parser import build_parser
    from hermes.extraload.tasks import TaskFile
    from hermes.scenario import Scenario
    from hermes.sections import PlatformProfile

    out = ["# Parameters and their ranges", "",
           "Generated by `hermes balancers --markdown` from the models that check them (the command line's parser,",
           "the scenario's sections, the Brusselator spec, the task files, each balancer's parameter model): what",
           "this page says is what hermes accepts.", "",
           "## Numbers", "",
           f"Every number a user gives — a scenario key, an experiment's value, a task file, a Brusselator spec, a",
           f"platform profile, a balancer parameter, a command-line option, a number in a list or a file — is",
           f"finite and is either 0 or of magnitude {shown(TINY)} to {shown(BIG)} (`hermes.bounds`): no NaN, no",
           "infinity, no subnormal (5e-324), nothing whose square or product by another such number leaves the",
           "floats. Each key or option then has its own range, listed below, narrower where the model needs it:",
           "",
           "- a tolerance is at least 1e-15 (about 10 machine epsilons; below, no iteration can meet it and it would",
           "  run to its limit), or 0 where 0 means \"run to the iteration limit\" (the diffusion family, fos);",
           "- a relaxation factor stays where its iteration progresses: SOS' ω in [0.01, 1.99] (near 0 the sweeps",
           "  grow as 2/ω times those of first-order diffusion, near 2 as 2 ln(1/τ)/(2 − ω) on any graph), the implicit",
           "  step α ≥ 0.01 (an outer step contracts the slowest mode by 1/(1 + α μ₂)), ε of M¹(ε) ≤ 1000 (the rates",
           "  are divided by (δ + ε)/δ with link weights ≤ 1);",
           "- weights whose products the run forms are bounded together: the scenario's products (weights after the",
           "  adaptation, load, computing and communication time) within 1e±100 (`hermes/scenario.py`, \"Bounds\");",
           "  replay's work α·load + β·bytes + γ + δ·shared at most 1e300 summed over the ranks;",
           "- relative values (capacities, priorities) span at most 1e12.",
           "",
           "A number out of its range is one line naming the key or the option, exit 2, before any work (before",
           "`mpiexec`): `hermes: error: balancer.sos.omega: must be greater than or equal to 0.01, got 5e-324`,",
           "`hermes: error: replay: argument --beta: must be a number in [0, 1e+100] (0 or at least 1e-100), got",
           "1e+308`.", "",
           "## Command-line options", "",
           "| command | option | default | range |", "|---|---|---|---|",
           *_option_rows(build_parser()), "",
           "`--set KEY=VALUE` (run, scenario, compare) and `--param` (lab flow, trace replay) take the ranges of the keys below.",
           "",
           "## Scenario keys", "",
           "| key | default | values | description |", "|---|---|---|---|",
           *_model_rows(Scenario), "",
           "## Platform profiles (`platform.profile`)", "",
           "| key | default | values | description |", "|---|---|---|---|",
           *_model_rows(PlatformProfile), "",
           "## Task files (`extraload.tasks`)", "",
           "| key | default | values | description |", "|---|---|---|---|",
           *_model_rows(TaskFile), "",
           "## Brusselator specs (`application.kernel: brusselator`)", "",
           "| key | default | values | description |", "|---|---|---|---|",
           *_model_rows(BrusselatorSpec), "",
           "## Balancer parameters", "",
           "Set them per algorithm (the same model checks the scenario's `balancer:` section and `--set",
           "balancer.<name>.<key>=...`):",
           "", "```yaml", "balancer:", "  algorithm: pcg", "  pcg: {tolerance: 1.0e-10}", "  metis: {targets: equal}",
           "```", "",
           "A balancer of your own (docs/BALANCERS.md) has its section under the name `balancer.algorithm` gives it,",
           "in full: `algorithm: 'mypkg.mod:MyBalancer'` with `'mypkg.mod:MyBalancer': {steps: 40}` (`mypkg.mod.MyBalancer`",
           "works too, also as `--set balancer.mypkg.mod.MyBalancer.steps=40`); its parameters may also go flat under",
           "`balancer:` (`--set balancer.steps=40`). A section under the class name alone is refused with what to write.",
           ""]
    for name, info in sorted(balancers.items()):
        out += [f"### `{name}`", "", info.doc, ""]
        fields = info.params.model_fields
        if not fields:
            out += ["No parameters.", ""]
            continue
        props = info.params.model_json_schema()["properties"]
        out += ["| parameter | default | values | description |", "|---|---|---|---|"]
        for key, f in fields.items():
            desc = (f.description or "").replace("|", "\\|")
            out.append(f"| `{key}` | `{f.default!r}` | {_schema_values(props[key])} | {desc} |")
        out.append("")
    return "\n".join(out)


def cmd_mesh(args) -> int:
    import json
    import sys

    from hermes.errors import HermesError

    try:
        if args.mesh_command == "info":
            from hermes.data.meshinfo import format_mesh_info, mesh_info_file

            info = mesh_info_file(args.file, units=args.units)
            print(json.dumps(info) if args.json else format_mesh_info(info))
            return 0
        from hermes.data.meshinfo import generate
        from hermes.progress import Progress

        # the step (generating, writing) repeated on stderr while it lasts: stdout keeps its one line
        with Progress(stream=sys.stderr, enabled=not getattr(args, "quiet", False)) as step:
            mesh = generate(args.name, args.size, args.out, progress=step)
    except HermesError as err:
        return error(str(err))
    print(f"{args.out}: {mesh.name}, {mesh.n_cells} cells, {mesh.n_edges} dual edges")
    return 0
