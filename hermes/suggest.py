""""Did you mean": the known names closest to a mistyped one, as the tail of a one-line error.

Examples
--------
>>> did_you_mean("algoritm", ["algorithm", "rounds", "trigger"])
" (did you mean 'algorithm'?)"
>>> did_you_mean("pgc", ["pcg", "gda0", "metis", "mincost"])
" (did you mean 'pcg'?)"
>>> did_you_mean("zzz", ["pcg", "metis"])
''
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["close_names", "did_you_mean"]


def close_names(name: str, known: Iterable[str], n: int = 2, cutoff: float = 0.6) -> list[str]:
    """Up to ``n`` of ``known`` closest to ``name`` (difflib's ratio at least ``cutoff``; case ignored)."""
    known = [str(k) for k in known]
    lowered = {k.lower(): k for k in known}
    hits = difflib.get_close_matches(str(name).lower(), list(lowered), n=n, cutoff=cutoff)
    return [lowered[h] for h in hits]


def did_you_mean(name: str, known: Iterable[str], n: int = 2) -> str:
    """`` (did you mean 'x'?)`` or `` (did you mean 'x' or 'y'?)``, or '' when nothing is close."""
    hits = close_names(name, known, n=n)
    if not hits:
        return ""
    return f" (did you mean {' or '.join(repr(h) for h in hits)}?)"
