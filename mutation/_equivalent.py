"""The mutants shown equivalent: no test can tell them from the original code.

A mutant listed here is still run. When it survives, it is counted apart (``equivalent``) and
left out of its module's score, the classic mutation score: killed / (mutants - equivalent).
When a test kills it, it counts as killed and the run names it, so that a listing that no longer
holds is seen and removed. docs/testing.md gives each one with its reason at more length.

An entry names its mutant without a line number, which moves with every edit above it: the
module, a piece of text on the mutant's (first) line, and the edit as the runner describes it.
``tests/mutation/test_runner.py`` checks that each entry still names a mutant of today's source.
"""

from __future__ import annotations

from dataclasses import dataclass

from mutation._operators import Mutant


@dataclass(frozen=True, slots=True)
class Equivalent:
    """``edit`` (``original -> replacement (operator)``) in ``module``, on the line that holds
    ``where``; ``why`` no test can tell it from the original."""

    module: str
    where: str
    edit: str
    why: str

    def names(self, mutant: Mutant, lines: list[str]) -> bool:
        """Whether this entry names ``mutant`` (of the source whose ``lines`` are given)."""
        return (
            mutant.path == self.module
            and f"{mutant.original} -> {mutant.replacement} ({mutant.operator})" == self.edit
            and self.where in lines[mutant.line - 1]
        )


def listed(mutant: Mutant, lines: list[str]) -> Equivalent | None:
    """The entry naming ``mutant``, if one does."""
    return next((entry for entry in EQUIVALENT if entry.names(mutant, lines)), None)


_STORE = "prunewarden/session/_store.py"

EQUIVALENT: tuple[Equivalent, ...] = (
    Equivalent(
        _STORE,
        "BUSY_TIMEOUT = 30.0",
        "30.0 -> 31.0 (number-plus-one)",
        "how long SQLite waits for a busy file: only timing a contended write shows it",
    ),
)
