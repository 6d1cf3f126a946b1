"""One pruning pass: gates, candidates, eviction order, tombstones, and its one audit record.

A package so that what a pass may do (``_plan``), what it needs of its caller (``_inputs``), how
a pass is chosen (``_selection``) and how it is logged (``_log``) each stay a module a reader can
hold in mind. The planner knows no ``Session``: its caller hands it :class:`PassInputs`.

How a pass is logged (``_log``: ``PassLog``, ``PassSink``, ``RecordPass``) is plumbing between the
planner, the session and the engine, imported from its module, not part of this package's names.
"""

from prunewarden.planner._decisions import PlanDecisions
from prunewarden.planner._inputs import DecideStep, PassInputs
from prunewarden.planner._plan import Plan
from prunewarden.planner._selection import plan_pass

__all__ = [
    "DecideStep",
    "PassInputs",
    "Plan",
    "PlanDecisions",
    "plan_pass",
]
