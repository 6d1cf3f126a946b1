"""A rule's CPU budget and its decision's: which one a timeout names, where each ends, and the
allocation limit's boundary.

The clocks here are fakes the test moves by hand (the wall clock and the thread's CPU clock, in
binary fractions so that a difference is exact), so each test says exactly what has been spent.
"""

from __future__ import annotations

import pytest
from prunewarden.limits import MAX_RULE_ALLOCATION
from prunewarden.rules import _budget
from prunewarden.rules._budget import Budget, BudgetExceededError, Deadline, Meter


class Clocks:
    """A wall clock and a thread CPU clock, both in seconds, moved by the test."""

    def __init__(self) -> None:
        self.wall = 1000.0
        self.cpu = 10.0
        self.cpu_reads = 0

    def monotonic(self) -> float:
        return self.wall

    def thread_time(self) -> float:
        self.cpu_reads += 1
        return self.cpu


real_thread_cpu = _budget._thread_cpu


@pytest.fixture
def clocks(monkeypatch: pytest.MonkeyPatch) -> Clocks:
    fake = Clocks()
    monkeypatch.setattr(_budget, "time", fake)
    monkeypatch.setattr(_budget, "_thread_cpu", fake.thread_time)
    return fake


class TestWhichBudgetATimeoutNames:
    def test_the_decisions_budget_spent_first_is_named(self, clocks: Clocks) -> None:
        """When the decision's shared CPU time is spent but the rule's own is not, the rule is
        stopped and the error names the decision's budget with its milliseconds."""
        shared = Budget(0.25)
        deadline = Deadline(0.5, shared)
        clocks.wall += 1.0
        clocks.cpu += 0.375
        assert deadline.expired()
        assert str(deadline.exceeded()) == "timed out (the decision's rules spent their 250 ms)"

    def test_the_rules_own_budget_spent_is_a_plain_timeout(self, clocks: Clocks) -> None:
        """When the rule's own CPU time is spent and the decision's is not, the error is a
        plain timeout: the decision's budget is not blamed."""
        shared = Budget(0.5)
        deadline = Deadline(0.25, shared)
        clocks.wall += 1.0
        clocks.cpu += 0.375
        assert deadline.expired()
        assert str(deadline.exceeded()) == "timed out"

    def test_a_decision_budget_with_time_left_is_not_blamed(self, clocks: Clocks) -> None:
        """A rule whose wall-clock time has passed is not blamed on a decision budget that still
        has wall-clock time left (a budget within its wall-clock time cannot be spent)."""
        shared = Budget(4.0)
        deadline = Deadline(0.25, shared)
        clocks.wall += 1.0
        assert not deadline.expired()
        assert str(deadline.exceeded()) == "timed out"


class TestWhereABudgetEnds:
    def test_cpu_time_spent_exactly_to_the_budget_is_within_it(self, clocks: Clocks) -> None:
        """A rule that has spent exactly its CPU time is not over it; a quarter second more is."""
        deadline = Deadline(0.5)
        clocks.wall += 2.0
        clocks.cpu += 0.5
        assert not deadline.expired()
        clocks.cpu += 0.25
        assert deadline.expired()

    def test_the_decisions_budget_spent_exactly_is_within_it(self, clocks: Clocks) -> None:
        """The decision's shared budget, spent exactly, still lets a rule run; past it, not."""
        shared = Budget(0.5)
        deadline = Deadline(2.0, shared)
        clocks.wall += 4.0
        clocks.cpu += 0.5
        assert not deadline.expired()
        assert not shared.expired()
        clocks.cpu += 0.25
        assert deadline.expired()
        assert shared.expired()

    def test_waiting_without_cpu_time_spends_nothing(self, clocks: Clocks) -> None:
        """Wall-clock time alone (a thread waiting for a core) spends neither budget."""
        shared = Budget(0.25)
        deadline = Deadline(0.25, shared)
        clocks.wall += 60.0
        assert not deadline.expired()
        assert not shared.expired()


class TestTheCheapClockFirst:
    def test_within_its_wall_clock_time_the_cpu_clock_is_not_read(self, clocks: Clocks) -> None:
        """Until its wall-clock time is past (to its last instant), a budget cannot be spent
        and its check reads only the wall clock, never the thread's CPU clock."""
        shared = Budget(0.5)
        deadline = Deadline(0.25, shared)
        reads = clocks.cpu_reads
        clocks.wall += 0.25
        assert deadline.expired() is False
        clocks.wall += 0.25
        assert shared.expired() is False
        assert clocks.cpu_reads == reads

    def test_past_its_wall_clock_time_the_cpu_clock_decides(self, clocks: Clocks) -> None:
        """Once the wall-clock time is past, the CPU clock is read and decides."""
        deadline = Deadline(0.25)
        reads = clocks.cpu_reads
        clocks.wall += 0.5
        assert deadline.expired() is False
        assert clocks.cpu_reads == reads + 1

    def test_without_rusage_the_thread_clock_is_read(
        self, clocks: Clocks, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Where the platform has no per-thread rusage, the thread's CPU time comes from
        ``time.thread_time``."""
        monkeypatch.setattr(_budget, "_RUSAGE_THREAD", None)
        clocks.cpu = 12.5
        assert real_thread_cpu() == 12.5


class TestAllocationLimit:
    def test_exactly_the_limit_is_allowed(self) -> None:
        """An evaluation may create exactly MAX_RULE_ALLOCATION characters and items."""
        meter = Meter(Deadline(60.0))
        meter.allocate(MAX_RULE_ALLOCATION)
        assert meter.allocated == MAX_RULE_ALLOCATION

    def test_one_more_unit_is_refused(self) -> None:
        """One unit past MAX_RULE_ALLOCATION stops the evaluation, naming the limit."""
        meter = Meter(Deadline(60.0))
        meter.allocate(MAX_RULE_ALLOCATION)
        with pytest.raises(BudgetExceededError, match=r"more than \d+ .*\(MAX_RULE_ALLOCATION\)"):
            meter.allocate(1)

    def test_a_fresh_meter_has_spent_nothing(self) -> None:
        """A new evaluation starts with nothing allocated."""
        assert Meter(Deadline(60.0)).allocated == 0
