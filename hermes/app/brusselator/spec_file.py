"""Whether a file is a Brusselator spec (:func:`is_spec_file`), told without importing the study: ``hermes run``
asks it of every scenario before it picks the application.
"""

from __future__ import annotations

from pathlib import Path

from hermes.errors import HermesError
from hermes.loaders import load_yaml

__all__ = ["is_spec_file"]


def is_spec_file(path: str | Path) -> bool:
    """Whether ``path`` is a Brusselator spec (``application.kernel: brusselator``); False for anything else,
    including files that cannot be read (the scenario loader then says why)."""
    try:
        data = load_yaml(path, str(path))
    except HermesError:
        return False
    app = data.get("application") if isinstance(data, dict) else None
    return isinstance(app, dict) and app.get("kernel") == "brusselator"
