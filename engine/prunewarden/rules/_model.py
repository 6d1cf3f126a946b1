"""What a compiled rule *is*: a value the policy holds, with the expressions it evaluates."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from prunewarden.rules._expression import Cost, Expression

Effect = Literal["deny", "halt", "pin", "warn"]
RuleMode = Literal["enforce", "audit"]

EFFECTS: dict[str, tuple[Effect, ...]] = {
    "collapse": ("halt", "warn"),
    "eviction": ("deny", "pin", "warn"),
    "staleness": ("deny", "warn"),
    "transition": ("deny", "warn"),
}
# The variable that makes a rule per-item; it also names an item in messages.
PER_ITEM: dict[str, str] = {"collapse": "canary", "staleness": "span"}
DEFAULT_CACHE_SIZE = 4096


@dataclass(frozen=True, slots=True)
class Rule:
    """One compiled rule of a policy."""

    index: int
    name: str
    check: str
    effect: Effect
    mode: RuleMode
    when: Expression
    message: str | None
    message_expression: Expression | None
    timeout: float  # seconds, for one request (all items together)
    # The estimated worst case on one request (None: not estimated) and the most it may be.
    cost: Cost | None = None
    max_cost: int | None = None
    # Derived from the expressions once, because the hot path asks for them on every request.
    reads: frozenset[str] = field(init=False)
    per_item: str | None = field(init=False)  # the per-item variable it reads, if any

    def __post_init__(self) -> None:
        names = set(self.when.reads)
        if self.message_expression is not None:
            names.update(self.message_expression.reads)
        variable = PER_ITEM.get(self.check, "")
        object.__setattr__(self, "reads", frozenset(names))
        object.__setattr__(self, "per_item", variable if variable in names else None)
