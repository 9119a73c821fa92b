"""Errors that hermes reports to users as one line (never a traceback)."""

from __future__ import annotations

__all__ = ["HermesError", "ScenarioError", "MeshError", "GraphError", "BalancerError"]


class HermesError(Exception):
    """Base class: a user-facing problem with the input or the run; the CLI prints ``str(err)``."""


class ScenarioError(HermesError):
    """A malformed scenario: unknown key, wrong type, impossible value, missing file."""


class MeshError(HermesError):
    """A missing, unreadable or invalid mesh or graph file."""


class GraphError(HermesError):
    """A processor graph or model the algorithms cannot work on (disconnected, zero capacity, ...)."""


class BalancerError(HermesError):
    """An unknown balancer or bad balancer parameters."""
