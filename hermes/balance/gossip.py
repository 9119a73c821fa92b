"""(being written) — see docs/ARCHITECTURE.md; contributes REGISTRY entries to hermes.balance.registry."""

from __future__ import annotations

from hermes.balance.registry import BalancerInfo

REGISTRY: dict[str, BalancerInfo] = {}
