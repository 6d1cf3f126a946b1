"""The registry of workloads: one module per workload family, each registering on import.

A new family (CEL rules, the audit log, trace replay) adds its module here and calls
:func:`benchmarks.harness.register` for each of its workloads.
"""

from __future__ import annotations

import importlib

from benchmarks.harness import REGISTRY, Workload

MODULES = ("collapse", "eviction", "staleness", "observability")


def load() -> dict[str, Workload]:
    """Import every workload module; return the registry, in registration order."""
    for module in MODULES:
        importlib.import_module(f"{__name__}.{module}")
    return REGISTRY
