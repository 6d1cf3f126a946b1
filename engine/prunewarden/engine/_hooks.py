"""How an engine hands its decisions to the hooks it was given: one at a time, or a pass at once.

A pruning pass of 200 segments makes 200 decisions and one audit record. Handing them to a
metrics hook one by one costs 200 Python calls and 200 lock round trips, which is most of what
observing a pass costs (issue 15). So a hook may offer a batch method,
``observe_decisions(decisions, record)``: the engine calls it once per pass with every decision of
the pass, in order, and the pass's record. A plain callable keeps the per-decision protocol, and a
single decision (``evaluate``) always goes through ``hook(decision, record)``, so every hook
written for one decision at a time still works. An eviction pass of ``Engine.authorize_pass``
(and ``authorize_evictions``) is offered at once as columns to a hook's ``on_pass(result)``, a
:class:`~prunewarden.pipeline.PassResult` with the pass's record in ``result.record``: a hook
reading its columns costs no decision object at all; a hook without ``on_pass`` gets the
decisions as before, each built when the pass hands them over. Kept apart from
:mod:`._recording` (which writes the records) because it is the one place that calls hooks and
decides what a raising one does: reported to the ``prunewarden`` logger, never a change to a
decision.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from prunewarden._observation import CallHook, join_call, join_calls
from prunewarden.decision import Decision
from prunewarden.pipeline import PassResult

_diagnostics = logging.getLogger("prunewarden")

# Called with every decision and its audit record (whatever the sink); what it returns is ignored.
DecisionHook = Callable[[Decision, Mapping[str, Any]], object]

# Called once with the decisions of one pass, in order, and the pass's one record.
BatchMethod = Callable[[Sequence[Decision], Mapping[str, Any]], object]

BATCH_METHOD = "observe_decisions"

# Called once with an eviction pass as columns (a PassResult, its ``record`` set): what a hook
# that reads a few columns offers, so that no decision of the pass is built for it.
PassMethod = Callable[[PassResult], object]

PASS_METHOD = "on_pass"  # noqa: S105 - a method name, not a password


@runtime_checkable
class BatchDecisionHook(Protocol):
    """A decision hook that also takes a pass's decisions at once (what
    :class:`prunewarden.metrics.DecisionMetrics` offers). ``observe_decisions`` must count the
    same as calling the hook with each decision and the record, in order."""

    def __call__(self, decision: Decision, record: Mapping[str, Any], /) -> object: ...

    def observe_decisions(
        self, decisions: Sequence[Decision], record: Mapping[str, Any], /
    ) -> object: ...


class DecisionHooks:
    """An engine's ``on_decision`` hooks (each with its batch method, if it offers one) and its
    call hooks, which every decision joins."""

    __slots__ = ("_entries", "_pass_methods", "call_hooks", "hooks")

    def __init__(
        self,
        on_decision: DecisionHook | Iterable[DecisionHook] | None,
        call_hooks: tuple[CallHook, ...] = (),
    ) -> None:
        self.hooks = decision_hooks(on_decision)
        self.call_hooks = call_hooks
        self._entries = tuple((hook, batch_method_of(hook)) for hook in self.hooks)
        self._pass_methods = tuple(pass_method_of(hook) for hook in self.hooks)

    def __bool__(self) -> bool:
        """Whether any hook listens: without one, no record needs building for them."""
        return bool(self.hooks or self.call_hooks)

    def notify(self, decision: Decision, record: Mapping[str, Any]) -> None:
        """Hand one decision and its record to every hook."""
        for hook in self.hooks:
            try:
                hook(decision, record)
            except Exception:  # noqa: BLE001 - a hook never changes a decision
                _report(hook)
        if self.call_hooks:
            join_call(decision, record, self.call_hooks)

    def notify_pass(self, decisions: Sequence[Decision], record: Mapping[str, Any]) -> None:
        """Hand the decisions of one pass and its record to every hook: once to a batch method,
        decision by decision to a plain callable. A batch method that raises is reported once,
        and the pass's other hooks still run."""
        if not decisions:
            return
        for hook, batch in self._entries:
            _deliver(hook, batch, decisions, record)
        if self.call_hooks:
            join_calls(decisions, record, self.call_hooks)

    def notify_columns(self, result: PassResult, record: Mapping[str, Any]) -> None:
        """Hand an eviction pass of :meth:`Engine.authorize_pass` to every hook: once to
        ``on_pass`` (the columns; no decision is built for it), else as :meth:`notify_pass`
        does (the decisions the hook reads are built)."""
        if not len(result):
            return
        plain: list[tuple[DecisionHook, BatchMethod | None]] = []
        for entry, on_pass in zip(self._entries, self._pass_methods, strict=True):
            if on_pass is None:
                plain.append(entry)
                continue
            try:
                on_pass(result)
            except Exception:  # noqa: BLE001 - a hook never changes a decision
                _report(entry[0])
        if plain or self.call_hooks:
            decisions = list(result)
            for hook, batch in plain:
                _deliver(hook, batch, decisions, record)
            if self.call_hooks:
                join_calls(decisions, record, self.call_hooks)

    def pass_notices(self) -> PassNotices:
        """A collector for a pass sink's ``notify``: it holds the pass's decisions until
        :meth:`PassNotices.deliver`."""
        return PassNotices(self)


class PassNotices:
    """The decisions a pass sink notifies one by one, held and delivered as one batch when the
    pass's record is done (the planner's sink stays per-decision; the hooks need not)."""

    __slots__ = ("decisions", "hooks", "record")

    def __init__(self, hooks: DecisionHooks) -> None:
        self.hooks = hooks
        self.decisions: list[Decision] = []
        self.record: Mapping[str, Any] | None = None

    def add(self, decision: Decision, record: Mapping[str, Any]) -> None:
        """Hold one decision; a decision of another record first delivers those held."""
        if record is not self.record:
            self.deliver()
            self.record = record
        self.decisions.append(decision)

    def deliver(self) -> None:
        """Hand what is held to the hooks, as one pass."""
        record, decisions = self.record, self.decisions
        if record is None or not decisions:
            return
        self.decisions = []
        self.hooks.notify_pass(decisions, record)


def batch_method_of(hook: DecisionHook) -> BatchMethod | None:
    """The hook's ``observe_decisions``, when it offers a callable one."""
    method = getattr(hook, BATCH_METHOD, None)
    return method if callable(method) else None


def pass_method_of(hook: DecisionHook) -> PassMethod | None:
    """The hook's ``on_pass``, when it offers a callable one."""
    method = getattr(hook, PASS_METHOD, None)
    return method if callable(method) else None


def _deliver(
    hook: DecisionHook,
    batch: BatchMethod | None,
    decisions: Sequence[Decision],
    record: Mapping[str, Any],
) -> None:
    """The decisions of one pass to one hook: once to its batch method, else one by one."""
    if batch is not None:
        try:
            batch(decisions, record)
        except Exception:  # noqa: BLE001 - a hook never changes a decision
            _report(hook)
        return
    for decision in decisions:
        try:
            hook(decision, record)
        except Exception:  # noqa: BLE001 - a hook never changes a decision
            _report(hook)


def decision_hooks(
    on_decision: DecisionHook | Iterable[DecisionHook] | None,
) -> tuple[DecisionHook, ...]:
    """``on_decision`` as a tuple: one callable, several, or none."""
    if on_decision is None:
        return ()
    if callable(on_decision):
        return (on_decision,)
    hooks = tuple(on_decision)
    if not all(callable(hook) for hook in hooks):
        msg = "on_decision takes a callable or an iterable of callables"
        raise TypeError(msg)
    return hooks


def _report(hook: object) -> None:
    with contextlib.suppress(Exception):
        _diagnostics.exception("on_decision hook %r raised", hook)
