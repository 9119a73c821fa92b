"""report.html: one self-contained page (every image embedded as a ``data:`` URI) with the experiment's
tables, its plots and each run's final partition — a file to mail or archive, no directory needed beside it.

Every picture is a link to its PNG file (``<a class="full" href="plots/partitions/RUN/partition-004.png">``,
relative to the page): one click opens it full size. The page's script opens the embedded copy instead (a
``blob:`` URL in a new tab), so the click works as well when the page travels alone; without scripts the link
opens the file beside the page.

A small script in the page counts the images the browser could not decode and writes the count to
``<body data-images="N" data-broken-images="K">`` (tests read it from a headless browser's DOM).

The page is written atomically through an exclusive temporary file (:func:`hermes.files.write_atomic`). A
picture is embedded only if it is a regular file (not a symbolic link: a link planted among the pictures
would copy its target into the page), a PNG, and at most :data:`MAX_PICTURE_BYTES`; otherwise the page says
"no picture".
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import logging
import os
import stat
import urllib.parse
from collections.abc import Sequence
from pathlib import Path

from hermes.compare.tables import Grid, table_blocks
from hermes.files import write_atomic

__all__ = ["write_report", "data_uri", "picture_href", "MAX_PICTURE_BYTES"]

log = logging.getLogger(__name__)

#: the largest PNG embedded in the page (a 1200-dpi partition picture is a few MB)
MAX_PICTURE_BYTES = 64 * 2**20
_PNG = b"\x89PNG\r\n\x1a\n"

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; padding: 0 1em; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.6em 0 1.2em; font-size: 0.92em; }
th, td { border: 1px solid #bbb; padding: 0.25em 0.6em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
th { background: #f0f0f0; }
td.best { font-weight: bold; background: #eef7ee; }
td.failed { color: #a00; }
figure { margin: 0.8em 0 1.6em; }
figure img { max-width: 100%; border: 1px solid #ddd; }
a.full img { cursor: zoom-in; }
figcaption { font-size: 0.9em; color: #444; margin-top: 0.3em; }
.partitions { display: grid; grid-template-columns: repeat(auto-fill, minmax(480px, 1fr)); gap: 1em; }
.partitions figure { margin: 0; }
.meta { color: #555; font-size: 0.9em; }
code { background: #f4f4f4; padding: 0 0.2em; }
"""

_SCRIPT = """
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.images);
  var broken = imgs.filter(function (i) { return !i.complete || i.naturalWidth === 0; }).length;
  document.body.setAttribute('data-images', String(imgs.length));
  document.body.setAttribute('data-broken-images', String(broken));
});
// a picture's link opens its embedded copy full size (the page may have travelled without the PNG files)
document.addEventListener('click', function (ev) {
  var a = ev.target.closest ? ev.target.closest('a.full') : null;
  var img = a ? a.querySelector('img') : null;
  if (!img || img.src.indexOf('data:image/png;base64,') !== 0) { return; }
  try {
    var bytes = atob(img.src.slice(img.src.indexOf(',') + 1)), buf = new Uint8Array(bytes.length);
    for (var i = 0; i < bytes.length; i++) { buf[i] = bytes.charCodeAt(i); }
    if (window.open(URL.createObjectURL(new Blob([buf], {type: 'image/png'})), '_blank')) { ev.preventDefault(); }
  } catch (e) { /* the link opens the file beside the page */ }
});
"""


def data_uri(path: Path) -> str | None:
    """A PNG file as a ``data:image/png;base64,...`` URI; None (logged) if ``path`` is a symbolic link, not a
    regular file, unreadable, larger than :data:`MAX_PICTURE_BYTES` or not a PNG."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except (OSError, ValueError) as err:
        log.warning("%s: not embedded (%s)", path, getattr(err, "strerror", None) or type(err).__name__)
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_PICTURE_BYTES:
            log.warning("%s: not embedded (not a regular file, or larger than %d bytes)", path, MAX_PICTURE_BYTES)
            return None
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = fh.read(MAX_PICTURE_BYTES + 1)
    except OSError as err:
        log.warning("%s: not embedded (%s)", path, err.strerror or type(err).__name__)
        return None
    finally:
        os.close(fd)
    if not data.startswith(_PNG) or len(data) > MAX_PICTURE_BYTES:
        log.warning("%s: not embedded (not a PNG)", path)
        return None
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")


def picture_href(png: Path, page: Path) -> str:
    """The link from the page ``page`` to the picture ``png``: its path relative to the page's directory,
    URL-quoted (a ``file:`` URI when there is no relative path, e.g. another drive)."""
    try:
        rel = os.path.relpath(png, page.parent)
    except ValueError:
        return Path(os.path.abspath(png)).as_uri()
    return urllib.parse.quote(Path(rel).as_posix())


def _figure(uri: str, href: str, caption: str, eager: bool = False) -> str:
    """A picture as a thumbnail linked to its full size, and its caption."""
    e = html.escape
    load = ' loading="eager"' if eager else ""
    return (f"<figure><a class=\"full\" href=\"{e(href)}\" target=\"_blank\" title=\"open full size\">"
            f"<img src=\"{uri}\" alt=\"{e(caption)}\"{load}></a><figcaption>{e(caption)}</figcaption></figure>")


def _table_html(caption: str, head: list[str], body: list[list[str]], bold_min: bool) -> str:
    e = html.escape
    out = []
    if caption:
        out.append(f"<p>{e(caption).replace('`', '')}</p>")
    out.append("<table><thead><tr>" + "".join(f"<th>{e(h)}</th>" for h in head) + "</tr></thead><tbody>")
    for row in body:
        cells = [f"<td>{e(row[0])}</td>"]
        nums = []
        for v in row[1:]:
            try:
                nums.append(float(v))
            except ValueError:
                nums.append(None)
        best = min((x for x in nums if x is not None), default=None) if bold_min else None
        for v, x in zip(row[1:], nums):
            cls = ' class="best"' if best is not None and x == best else (' class="failed"' if v == "failed" else "")
            cells.append(f"<td{cls}>{e(v)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def write_report(path: Path, *, title: str, description: str, grid: Grid, plots: Sequence[tuple[str, Path]],
                 partitions: Sequence[tuple[str, Path | None]], failures: Sequence[tuple[str, str]],
                 counts: dict[str, int], clock: str, experiment_dir: Path) -> Path:
    """Write report.html (atomically) and return its path.

    Parameters
    ----------
    path : Path
        The output file.
    title, description : str
        The heading and the experiment's description.
    grid : Grid
        The table (:func:`hermes.compare.tables.make_grid`).
    plots : sequence of (caption, PNG path)
        The experiment's plots, embedded in order.
    partitions : sequence of (caption, PNG path or None)
        Each run's final partition (None: no picture, e.g. the run failed or recorded no partitions).
    failures : sequence of (run id, error line)
    counts : dict
        Runs per status (``done``, ``skipped``, ``failed``, ``missing``).
    clock : str
        The runs' clock (``virtual`` or ``wall``), named in the text.
    experiment_dir : Path
        Where the runs are (named in the text).
    """
    e = html.escape
    parts = [f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{e(title)}</title>"
             f"<style>{_STYLE}</style><script>{_SCRIPT}</script></head><body>", f"<h1>{e(title)}</h1>"]
    if description:
        parts.append(f"<p>{e(description)}</p>")
    status = ", ".join(f"{n} {k}" for k, n in counts.items() if n)
    parts.append(f"<p class=\"meta\">{sum(counts.values())} runs ({e(status)}) in <code>{e(str(experiment_dir))}"
                 f"</code>; written {_dt.datetime.now():%Y-%m-%d %H:%M}. Times are simulated on the {e(clock)} "
                 f"clock; imbalance is max l<sub>i</sub>/l&#772;<sub>i</sub> (1.00 is fair).</p>")
    parts.append("<h2>Results</h2>")
    for k, (caption, head, body) in enumerate(table_blocks(grid)):
        parts.append(_table_html(caption or f"Total time and, in parentheses, final imbalance — rows: "
                                 f"{' × '.join(grid.row_axes) or 'all runs'}, columns: {grid.col_axis or 'result'}.",
                                 head, body, bold_min=k > 0))
    if failures:
        parts.append("<h2>Failed runs</h2><ul>" + "".join(f"<li><code>{e(r)}</code>: {e(m)}</li>" for r, m in failures)
                     + "</ul>")
    parts.append("<h2>Plots</h2>")
    for caption, png in plots:
        uri = data_uri(png)
        if uri is None:
            parts.append(f"<figure><figcaption>{e(caption)} — no picture</figcaption></figure>")
        else:
            parts.append(_figure(uri, picture_href(png, path), caption))
    parts.append("<h2>Final partitions</h2><p class=\"meta\">Click a picture to open it full size.</p>"
                 "<div class=\"partitions\">")
    for caption, png in partitions:
        uri = None if png is None else data_uri(png)
        if uri is None:
            parts.append(f"<figure><figcaption>{e(caption)} — no picture</figcaption></figure>")
        else:
            parts.append(_figure(uri, picture_href(png, path), caption, eager=True))
    parts.append("</div></body></html>\n")
    return write_atomic(path, "\n".join(parts))
