"""The engine: one compiled policy, documents in, logged decisions out.

Silent until its caller chooses a sink: records go to an :class:`AuditLog`, a structlog logger or
a decision hook the caller passed, and nowhere else. Diagnostics (a hook that raised, an optional
audit log that failed) go to the standard ``logging`` logger ``prunewarden``, which has only a
``NullHandler`` until the application configures logging.

A package so that each part of an engine stays a module a reader can hold in mind. ``Engine``
(``_engine``: the calls, reading documents) is composed of the parts it builds and holds: a
``Decider`` (``_deciding``: one request decided and logged), a ``DecisionRecorder``
(``_recording``: the one place that writes records) and a ``PassRunner`` (``_passes``: eviction
passes, over columns or decision by decision). ``_hooks`` hands decisions to the caller's hooks,
one at a time or a pass at once; ``_calls`` declares the deciding calls once (``DecidingCalls``),
which ``_front`` forwards for a front that replaces its engine (``ReloadingEngine``).
"""

from prunewarden.engine._calls import DecidingCalls
from prunewarden.engine._engine import Engine
from prunewarden.engine._front import EngineCalls
from prunewarden.engine._hooks import BatchDecisionHook, DecisionHook

__all__ = ["BatchDecisionHook", "DecidingCalls", "DecisionHook", "Engine", "EngineCalls"]
