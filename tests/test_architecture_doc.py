"""docs/ARCHITECTURE.md lists every module of hermes, one line each, and nothing that does not exist.

The module tree is the first code block of the page: a line ``<indent>name.py  what it holds`` is a module, a
line ``<indent>name/  what it holds`` a package (its ``__init__.py``), two spaces of indent per level under
``hermes/``.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENTRY = re.compile(r"^(?P<indent> *)(?P<name>[A-Za-z_][\w]*(?:\.py|/))(?:\s|$)")


def _listed() -> tuple[set[str], list[str]]:
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    block = text.split("```", 2)[1]
    stack: list[tuple[int, str]] = []
    listed: set[str] = set()
    problems = []
    for line in block.splitlines()[1:]:
        m = ENTRY.match(line)
        if not m:
            continue
        indent, name = len(m["indent"]), m["name"]
        if name == "hermes/":
            stack = [(indent, "hermes")]
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if not stack:
            problems.append(f"{name}: outside the hermes/ tree")
            continue
        path = "/".join(p for _, p in stack) + "/" + name.rstrip("/")
        if name.endswith("/"):
            stack.append((indent, name.rstrip("/")))
            path += "/__init__.py"
        if path in listed:
            problems.append(f"{path}: listed twice")
        listed.add(path)
    return listed, problems


def test_every_module_is_listed_once_and_every_listed_module_exists():
    listed, problems = _listed()
    actual = {str(p.relative_to(ROOT)) for p in (ROOT / "hermes").rglob("*.py")}
    missing = sorted(actual - listed)
    extra = sorted(listed - actual)
    assert not problems, problems
    assert not missing, f"modules missing from docs/ARCHITECTURE.md: {missing}"
    assert not extra, f"docs/ARCHITECTURE.md lists modules that do not exist: {extra}"


def test_the_parser_reads_nested_packages():
    """The reader of the tree itself: a nested package and its modules resolve to their paths."""
    block = "```\nhermes/\n  a.py   x\n  pkg/   y\n    b.py  z\n    sub/  w\n      c.py  v\n  d.py  u\n```\n"
    m = [ENTRY.match(line) for line in block.splitlines()]
    assert [x["name"] for x in m if x] == ["hermes/", "a.py", "pkg/", "b.py", "sub/", "c.py", "d.py"]


def _tier_table(text: str) -> list[tuple[str, tuple[str, ...]]]:
    """The rows of the tier table in the page's "Layering" section: (tier, its parts in backquotes)."""
    section = text.split("\n## Layering\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) < 2 or cells[0] in ("tier", "") or set(cells[0]) <= set("-"):
            continue
        rows.append((cells[0], tuple(re.findall(r"`([\w.]+)`", cells[1]))))
    return rows


def _tiers() -> dict[str, tuple[str, ...]]:
    spec = importlib.util.spec_from_file_location("layering", ROOT / "tests" / "test_layering.py")
    layering = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(layering)
    return layering.TIERS


def test_the_tier_table_is_the_layering_test_s():
    """docs/ARCHITECTURE.md shows the tier order tests/test_layering.py enforces: the same tiers in the same order,
    each with the same parts."""
    table = _tier_table((ROOT / "docs" / "ARCHITECTURE.md").read_text())
    tiers = _tiers()
    assert [t for t, _ in table] == list(tiers), "the page's tiers are not the test's, or not in its order"
    for tier, parts in table:
        assert sorted(parts) == sorted(tiers[tier]), f"tier {tier}: the page says {parts}, the test {tiers[tier]}"


def test_the_tier_table_reader_sees_a_drift():
    """The reader of the table itself: a part moved to another tier, or two tiers swapped, read differently."""
    page = ("# x\n\n## Layering\n\n| tier | parts | why |\n|---|---|---|\n| core | `hermes.errors`, `hermes.files` | a |\n"
            "| data | `hermes.data` | b |\n\n## Next\n| other | `hermes.x` | c |\n")
    assert _tier_table(page) == [("core", ("hermes.errors", "hermes.files")), ("data", ("hermes.data",))]
    moved = page.replace("`hermes.files` | a", " a").replace("`hermes.data` |", "`hermes.data`, `hermes.files` |")
    assert _tier_table(moved) != _tier_table(page)
