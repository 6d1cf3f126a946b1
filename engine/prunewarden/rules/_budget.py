"""What an evaluation may spend, and the one way it is stopped when the budget is spent.

A rule is written by a policy author and fed by an input author, and either may be hostile: a
pattern that sends RE2 to its slow path, a thousand phrases over a long text, a concatenation of
the whole text per element of a list. Three meters hold them:

- **CPU time**: a rule's ``timeout_ms`` for one request (all its items together), inside
  :data:`~prunewarden.limits.MAX_DECISION_RULE_MS` for all the rules of one decision. It is
  checked at every node of the evaluator, inside the loops of the engine functions, and once
  more after the last node, so a result computed past the budget is thrown away, never used.
- **allocation**: characters and list items one evaluation creates, at most
  :data:`~prunewarden.limits.MAX_RULE_ALLOCATION`, charged *before* the value is built.
- **work no check can interrupt**: one RE2 search runs in C to its end, so it is priced at its
  worst case before it starts (see ``_patterns``); so is a text ``duration()`` or
  ``timestamp()`` parses, by its length (see ``_times``).

Running past any of them raises :class:`BudgetExceededError`, which derives from BaseException so
that no ``except Exception`` inside cel-python can swallow it and turn it into a value: the whole
evaluation fails, and a rule that fails counts as matched (fail closed).
"""

from __future__ import annotations

import time
from contextvars import ContextVar

from prunewarden.limits import MAX_RULE_ALLOCATION

try:
    import resource
except ImportError:  # not POSIX (Windows): time.thread_time measures the same CPU time
    resource = None  # type: ignore[assignment]


# A BaseException on purpose, though cel-python 0.5 lets an Exception out of the engine
# functions too: any ``except Exception`` between the meter and run() (cel-python's, a later
# version's, an engine function's) would turn a spent budget into a value and the rule would
# decide on it. Only evaluate() catches it, and it fails the rule (tests/rules/test_deadline.py).
class BudgetExceededError(BaseException):
    """An evaluation spent its budget; ``args[0]`` says which, without quoting any value."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "over its budget"


_RUSAGE_THREAD: int | None = getattr(resource, "RUSAGE_THREAD", None)


def _thread_cpu() -> float:
    """This thread's CPU time in seconds. ``getrusage(RUSAGE_THREAD)`` where the platform has it
    (Linux): measured at 0.4 us a call where ``time.thread_time`` (``clock_gettime`` of the
    thread's CPU clock) took 47 us on a loaded 2-core machine, and a budget reads it at least once
    per rule evaluated."""
    if _RUSAGE_THREAD is None:
        return time.thread_time()
    usage = resource.getrusage(_RUSAGE_THREAD)
    return usage.ru_utime + usage.ru_stime


class DeadlineExceededError(BudgetExceededError):
    """The CPU-time budget of the rule, or of its decision, is spent."""


class _Clock:
    """A budget of the creating thread's own CPU time.

    Wall-clock time would make a verdict depend on the machine's load: a thread waiting for the
    GIL or a core would time out and refuse for no fault of the rule. What a budget must stop is
    work, and that is CPU time. The cheap wall clock is read first; the thread's CPU clock (a
    system call) only once the wall-clock budget has run out.
    """

    __slots__ = ("_cpu_start", "_wall", "seconds")

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._wall = time.monotonic() + seconds
        self._cpu_start = _thread_cpu()

    @property
    def wall(self) -> float:
        return self._wall

    @property
    def cpu_start(self) -> float:
        return self._cpu_start

    def expired(self) -> bool:
        if time.monotonic() <= self._wall:
            return False
        return _thread_cpu() - self._cpu_start > self.seconds


class Budget(_Clock):
    """The CPU time the rules of one decision (or the validators of one policy) share."""

    __slots__ = ()


class Deadline(_Clock):
    """One rule's (or validator's) CPU time, inside the decision's :class:`Budget` if given.

    It is read at every node the evaluator visits, so the common case is one clock read: until
    the earlier of the two wall-clock ends neither budget can be spent (a thread's CPU time
    never runs ahead of the wall clock), and only then are the CPU clocks compared.
    """

    __slots__ = ("_budget",)

    def __init__(self, seconds: float, budget: Budget | None = None) -> None:
        super().__init__(seconds)
        self._budget = budget
        if budget is not None:
            self._wall = min(self._wall, budget.wall)

    def expired(self) -> bool:
        if time.monotonic() <= self._wall:
            return False
        spent = _thread_cpu()
        if spent - self._cpu_start > self.seconds:
            return True
        shared = self._budget
        return shared is not None and spent - shared.cpu_start > shared.seconds

    def exceeded(self) -> DeadlineExceededError:
        """The error that says which budget ran out."""
        if self._budget is not None and self._budget.expired() and not _Clock.expired(self):
            shared = f"{self._budget.seconds * 1000:g} ms"
            return DeadlineExceededError(f"timed out (the decision's rules spent their {shared})")
        return DeadlineExceededError("timed out")


class Meter:
    """What one evaluation has spent: its deadline and the characters and items it created."""

    __slots__ = ("allocated", "deadline")

    def __init__(self, deadline: Deadline) -> None:
        self.deadline = deadline
        self.allocated = 0

    def check(self) -> None:
        if self.deadline.expired():
            raise self.deadline.exceeded()

    def allocate(self, units: int) -> None:
        self.allocated += units
        if self.allocated > MAX_RULE_ALLOCATION:
            message = (
                f"created more than {MAX_RULE_ALLOCATION} characters and list items "
                "(MAX_RULE_ALLOCATION)"
            )
            raise BudgetExceededError(message)


# The meter of the evaluation running in this thread (or task); None outside one, where the
# engine functions run unmetered (the trial at load time sets one too).
current: ContextVar[Meter | None] = ContextVar("prunewarden_rule_meter", default=None)


def check() -> None:
    """Stop the running evaluation if its time is spent: for engine functions' loops."""
    meter = current.get()
    if meter is not None:
        meter.check()


def allocate(units: int) -> None:
    """Charge ``units`` characters or list items to the running evaluation before building them."""
    meter = current.get()
    if meter is not None:
        meter.allocate(units)
