"""The engine: one compiled policy, documents in, logged decisions out.

Silent until its caller chooses a sink: records go to an :class:`AuditLog`, a structlog logger or
a decision hook the caller passed, and nowhere else. Diagnostics (a hook that raised, an optional
audit log that failed) go to the standard ``logging`` logger ``prunewarden``, which has only a
``NullHandler`` until the application configures logging.

A package so that the calls that decide (``_engine``) and the one place that writes their records
(``_recording``) each stay a module a reader can hold in mind; ``Engine`` is built from both.
``_hooks`` hands decisions to the caller's hooks, one at a time or a pass at once; ``_front``
holds the engine's calls for a front that replaces its engine (``ReloadingEngine``).
"""

from prunewarden.engine._engine import Engine
from prunewarden.engine._front import EngineCalls
from prunewarden.engine._hooks import BatchDecisionHook, DecisionHook

__all__ = ["BatchDecisionHook", "DecisionHook", "Engine", "EngineCalls"]
