"""What a policy *is*: its identity, typed settings and canonical document (values only).

How a policy is read, merged and checked lives in the loader modules beside this one; this
module imports none of them, which keeps the policy package free of import cycles.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from prunewarden._cusum import CusumParameters
from prunewarden._identity import PolicyIdentity, PolicySource
from prunewarden._json import encode_canonical
from prunewarden.fidelity import FidelitySettings
from prunewarden.inputs._model import ScoreRange
from prunewarden.rules._classify import DEFAULT_RULES, ClassifyRule
from prunewarden.rules._expression import Expression
from prunewarden.rules._model import Rule

# Which lock file a load checks: None finds ``policy.lock`` next to the policy, False checks
# none, a path names one (see prunewarden.policy._lock).
LockOption = str | Path | Literal[False] | None

Mode = Literal["enforce", "audit", "off"]

FIDELITY_OFF = FidelitySettings(mode="off")  # a frozen value: one shared default is safe


@dataclass(frozen=True, slots=True)
class Calibration:
    """``spec.scores.calibration: {fixed: {low, high}}``: raw ``low`` -> 0, ``high`` -> 1, linear
    in between, clipped to [0, 1] (see :mod:`prunewarden.pipeline._calibration`)."""

    low: float
    high: float

    def apply(self, score: float) -> float:
        scaled = (score - self.low) / (self.high - self.low)
        return 0.0 if scaled < 0.0 else min(scaled, 1.0)

    def to_dict(self) -> dict[str, Any]:
        return {"scale": "fixed", "low": self.low, "high": self.high}


@dataclass(frozen=True, slots=True)
class CusumSettings:
    """``spec.collapse.cusum``: the capped CUSUM spread test (docs/guards.md#the-cusum-spread-test).

    The defaults are filled in only under ``spread_floor_mode: cusum``, so that a policy that
    does not opt in digests as before."""

    slack: float = 0.4  # k, ln units
    threshold: float = 0.9  # h, ln units
    first_cycles: int = 5  # reference.first_cycles
    prior_log_spread: float = -1.5  # reference.prior_log_spread (mu)
    prior_weight: float = 2.0  # reference.prior_weight (w), in cycles
    reference_mode: Literal["early", "tracking"] = "early"  # reference.mode
    rate: float = 0.1  # reference.rate (a): read only by the tracking reference

    def to_dict(self) -> dict[str, Any]:
        """The ``cusum`` block of the resolved policy (the early reference states neither its
        mode nor a rate, so that a policy written before them digests as before)."""
        reference: dict[str, Any] = {
            "first_cycles": self.first_cycles,
            "prior_log_spread": self.prior_log_spread,
            "prior_weight": self.prior_weight,
        }
        if self.reference_mode == "tracking":
            reference.update(mode="tracking", rate=self.rate)
        return {"slack": self.slack, "threshold": self.threshold, "reference": reference}


@dataclass(frozen=True, slots=True)
class CollapseSettings:
    mode: Mode
    spread_floor: float
    consecutive_cycles: int
    canary_margin: float
    on_insufficient_history: Literal["allow", "halt"]
    # Optional (docs/calibration.md); the defaults are the seed's semantics.
    spread_floor_mode: Literal["absolute", "relative", "cusum"] = "absolute"
    relative_first_cycles: int = 0  # relative_to.first_cycles; only with the relative mode
    min_live_entries: int = 0
    on_too_few_entries: Literal["allow", "halt"] = "allow"
    cusum: CusumSettings | None = None  # only with the cusum mode
    canary_cycles: int = 1  # signal B: a canary inverted in each of this many last cycles

    @property
    def early_cycles(self) -> int:
        """How many of a session's first spreads the spread test reads: the relative floor's
        early spread, or the cusum reference (0: none)."""
        if self.spread_floor_mode == "relative":
            return self.relative_first_cycles
        if self.cusum is not None:  # judgeable cycles' (see prunewarden._cusum)
            return self.cusum.first_cycles + self.consecutive_cycles
        return 0

    def cusum_parameters(self) -> CusumParameters | None:
        """What the cusum arithmetic reads (None without the cusum spread test)."""
        cusum = self.cusum
        if cusum is None:
            return None
        return CusumParameters(
            self.consecutive_cycles,
            cusum.slack,
            cusum.threshold,
            cusum.first_cycles,
            cusum.prior_log_spread,
            cusum.prior_weight,
            cusum.reference_mode,
            cusum.rate if cusum.reference_mode == "tracking" else 0.0,
        )


@dataclass(frozen=True, slots=True)
class EvictionSettings:
    mode: Mode
    pinned_kinds: frozenset[str]
    stability_delta: float
    require_tombstone: bool
    require_perturbation: bool


@dataclass(frozen=True, slots=True)
class StalenessSettings:
    mode: Mode
    max_rewrites_without_recompute: int
    drift_tolerance: float
    drift_consecutive_turns: int
    recompute_hops: int


@dataclass(frozen=True, slots=True)
class TransitionSettings:
    """``spec.transition``, each field resolved (an absent one follows the eviction section)."""

    mode: Mode
    require_tombstones: bool
    require_scores: bool
    pinned_kinds: frozenset[str]


@dataclass(frozen=True, slots=True)
class ClassifySettings:
    """``spec.classify``: the policy's own rules, then the defaults unless ``defaults`` is
    false (prunewarden.policy._classify)."""

    rules: tuple[ClassifyRule, ...] = ()
    defaults: bool = True

    @property
    def ordered(self) -> tuple[ClassifyRule, ...]:
        """Every rule in the order it is tried."""
        return self.rules + (DEFAULT_RULES if self.defaults else ())


OnError = Literal["block", "warn"]


@dataclass(frozen=True, slots=True)
class CompactionSettings:
    """``spec.compaction``: what a coding agent's compaction hook blocks, and what it does after
    an error of its own (prunewarden.policy._compaction)."""

    block_manual: bool = False
    block_when: Expression | None = None  # compiled when the policy loads
    block_message: str | None = None
    on_error_auto: OnError = "warn"
    on_error_manual: OnError = "block"

    def on_error(self, trigger: str) -> OnError:
        """What an error does under ``trigger`` (``manual``, else automatic)."""
        return self.on_error_manual if trigger == "manual" else self.on_error_auto


@dataclass(frozen=True, slots=True)
class Spec:
    scores: ScoreRange
    collapse: CollapseSettings
    eviction: EvictionSettings
    staleness: StalenessSettings
    transition: TransitionSettings
    calibration: Calibration | None = None  # spec.scores.calibration; None is none
    # spec.fidelity; an absent section is mode off (prunewarden.policy._fidelity)
    fidelity: FidelitySettings = FIDELITY_OFF
    # spec.classify; an absent section is the default rules alone
    classify: ClassifySettings = ClassifySettings()
    # spec.compaction; an absent section blocks nothing and warns on an automatic compaction
    compaction: CompactionSettings = CompactionSettings()


@dataclass(frozen=True, slots=True)
class Policy:
    """A validated policy: its identity, its typed settings and its canonical document.

    ``sources`` is the extends chain it was resolved from, this policy's own file first.
    """

    identity: PolicyIdentity
    spec: Spec
    document: dict[str, Any]
    source: str
    rules: tuple[Rule, ...] = ()  # spec.rules, compiled (see prunewarden.rules)
    sources: tuple[PolicySource, ...] = ()

    @property
    def name(self) -> str:
        return self.identity.name

    @property
    def version(self) -> str:
        return self.identity.version

    @property
    def digest(self) -> str:
        return self.identity.digest

    def canonical_json(self) -> str:
        """The document in RFC 8785 canonical form: what :attr:`digest` hashes."""
        return encode_canonical(self.document).decode("utf-8")
