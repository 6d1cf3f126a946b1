"""One pruning pass: gates, candidates, eviction order, tombstones, and its one audit record.

A package so that what a pass may do (``_plan``), how a pass is chosen (``_selection``) and how
it is logged (``_log``) each stay a module a reader can hold in mind.
"""

from prunewarden.planner._log import PassLog, PassSink, RecordPass
from prunewarden.planner._plan import Plan
from prunewarden.planner._selection import Unit, plan_pass

__all__ = ["PassLog", "PassSink", "Plan", "RecordPass", "Unit", "plan_pass"]
