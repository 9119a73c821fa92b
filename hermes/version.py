"""The version of hermes (one place: the package, the CLI and summary.json read it)."""

__version__ = "0.1.0"
