"""Static analysis of policies (``prunewarden policy check``), with z3 (the ``analyze`` extra).

What the analysis proves and how: docs/policy-check.md. z3 is imported when this package is:
only ``policy check`` imports it, so no other command needs the extra.
"""

from __future__ import annotations

from prunewarden.analysis._findings import CODES, SEVERITIES, Finding, Location, Severity
from prunewarden.analysis._run import check_policies, exit_code
from prunewarden.analysis._sarif import to_sarif

__all__ = [
    "CODES",
    "SEVERITIES",
    "Finding",
    "Location",
    "Severity",
    "check_policies",
    "exit_code",
    "to_sarif",
]
