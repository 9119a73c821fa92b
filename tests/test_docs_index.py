"""docs/README.md lists every page of docs/ and results/, and only pages that exist; results/ is its caches'."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

#: a Markdown link to a page: [text](path.md) or [text](path.md#anchor)
LINK = re.compile(r"\]\(([^)\s#]+\.md)(?:#[^)]*)?\)")


def index_problems(docs: Path, results: Path) -> list[str]:
    """What is wrong with ``docs/README.md``: pages of ``docs`` or ``results`` it does not list, and pages it
    lists that do not exist (links are relative to ``docs``)."""
    index = docs / "README.md"
    if not index.is_file():
        return [f"{index} is missing"]
    listed = {(docs / m).resolve() for m in LINK.findall(index.read_text())}
    pages = {p.resolve() for d in (docs, results) if d.is_dir() for p in d.rglob("*.md")} - {index.resolve()}
    base = docs.parent.resolve()
    return ([f"not in the index: {p.relative_to(base)}" for p in sorted(pages - listed)]
            + [f"listed but absent: {p.relative_to(base)}" for p in sorted(listed) if not p.is_file()])


def test_the_index_lists_every_page_and_nothing_else():
    assert index_problems(ROOT / "docs", ROOT / "results") == []


def test_the_check_finds_an_unlisted_page_and_a_dangling_link(tmp_path):
    docs, results = tmp_path / "docs", tmp_path / "results"
    docs.mkdir()
    results.mkdir()
    (docs / "A.md").write_text("# A\n")
    (docs / "B.md").write_text("# B\n")
    (results / "r.md").write_text("# r\n")
    (docs / "README.md").write_text("- [A](A.md)\n- [r](../results/r.md#figures)\n- [gone](GONE.md)\n")
    assert index_problems(docs, results) == ["not in the index: docs/B.md", "listed but absent: docs/GONE.md"]
    (docs / "README.md").unlink()
    assert index_problems(docs, results) == [f"{docs / 'README.md'} is missing"]


def test_every_results_page_is_its_cache_rendered():
    """``python -m benchmarks.render --check``: every page with a cache is what its template and cache give, and
    BENCHMARKS.md is the index of them (``make results`` rewrites them; a hand edit of a page fails here)."""
    res = subprocess.run([sys.executable, "-m", "benchmarks.render", "--check"], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, res.stderr


def test_render_check_fails_on_a_hand_edited_page_and_make_results_restores_it(tmp_path, monkeypatch, capsys):
    import shutil

    from benchmarks import render

    results = tmp_path / "results"
    shutil.copytree(ROOT / "results", results)
    shutil.copy(ROOT / "BENCHMARKS.md", tmp_path / "BENCHMARKS.md")
    monkeypatch.setattr(render, "RESULTS", results)
    monkeypatch.setattr(render, "INDEX", tmp_path / "BENCHMARKS.md")
    monkeypatch.setattr(render, "ROOT", tmp_path)
    assert render.main(["--check"]) == 0
    page = next(p for p in render.PAGES if p.cache is not None)
    path = results / f"{page.name}.md"
    text = path.read_text()
    path.write_text(text.replace("|", "¦", 1))
    assert render.main(["--check"]) == 1
    assert f"results/{page.name}.md" in capsys.readouterr().err
    assert render.main([]) == 0 and path.read_text() == text
