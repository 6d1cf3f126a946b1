"""Load and validate a YAML policy into a :class:`Policy` with a stable identity.

A policy's identity is its ``name``, its ``version`` and its ``digest``: ``sha256:`` over the
canonical JSON form of the validated document with every default filled in. Key order, comments,
formatting and spelling a default out or leaving it implicit do not change the digest; any change
in what the guards would do does.

A policy may extend another (``extends``): :mod:`._overlay` reads the chain, merges it and checks
its guardrails, and :func:`build_policy` turns the merged document into a :class:`Policy`;
:mod:`._lock` holds each ``name@version`` to one digest.
"""

from __future__ import annotations

import copy
import errno
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prunewarden import _resources as resources
from prunewarden import rules
from prunewarden._files import open_regular
from prunewarden._identity import PolicyIdentity, PolicySource
from prunewarden._json import canonical_digest
from prunewarden._schemas import apply_defaults
from prunewarden.errors import PolicyError, Problem, describe_value
from prunewarden.inputs import ScoreRange
from prunewarden.limits import MAX_POLICY_BYTES
from prunewarden.policy import _classify as classify
from prunewarden.policy import _compaction as compaction
from prunewarden.policy import _fidelity as fidelity
from prunewarden.policy import _guardrails as guardrails
from prunewarden.policy import _transition as transition
from prunewarden.policy._model import (
    Calibration,
    CollapseSettings,
    CusumSettings,
    EvictionSettings,
    Policy,
    Spec,
    StalenessSettings,
)
from prunewarden.rules._canonical import normalize as normalize_rules

if TYPE_CHECKING:
    from prunewarden._source import Parsed
    from prunewarden.rules import Rule


def build_policy(
    parsed: Parsed, sources: tuple[PolicySource, ...], problems: list[Problem] | None = None
) -> Policy:
    """The policy of a parsed (and, for a chain, merged) document that passed the schema.

    ``problems`` are those already found (by the schema); the rules are compiled either way, so
    that every problem is reported at once. Raises :class:`PolicyError` if there are any.
    """

    problems = list(problems or [])
    compiled: tuple[Rule, ...] = ()
    # Through the package (its names resolve on use): the CEL runtime loads with the first
    # policy that has rules, and a policy without rules never loads it.
    if parsed.built and _declares_rules(parsed.data):
        try:
            compiled, rule_problems = rules.compile_rules(parsed)
        except Exception:
            # The rule compiler reads rules the schema refused too, to report everything at
            # once; a shape it does not expect there is already a schema problem.
            if not problems:
                raise
            compiled, rule_problems = (), []
        problems += rule_problems
    if not problems:
        problems = _semantic_problems(parsed.data, parsed.problem)
    if problems:
        raise PolicyError(problems)
    document = normalize_document(parsed.data)
    metadata = document["metadata"]
    identity = PolicyIdentity(metadata["name"], metadata["version"], canonical_digest(document))
    return Policy(
        identity, _spec(document["spec"]), document, parsed.filename, compiled, sources=sources
    )


def _declares_rules(data: Any) -> bool:
    """Whether the document has rules to compile (any value there: the compiler reports it)."""
    spec = data.get("spec") if isinstance(data, dict) else None
    return isinstance(spec, dict) and bool(spec.get("rules"))


def param_problems(parsed: Parsed) -> list[Problem]:
    """Params reach rules as doubles (the schema says so): an integer too large for one is a
    problem of the policy file, found before its rules are normalized or compiled with it."""
    spec = parsed.data.get("spec") if isinstance(parsed.data, dict) else None
    params = spec.get("params") if isinstance(spec, dict) else None
    found = []
    for name, value in params.items() if isinstance(params, dict) else ():
        items = enumerate(value) if isinstance(value, list) else [(None, value)]
        for i, item in items:
            if isinstance(item, int) and not isinstance(item, bool):
                try:
                    float(item)
                except OverflowError:
                    path = ("spec", "params", name) + (() if i is None else (i,))
                    message = f"{describe_value(item)} is too large for a number in rules"
                    found.append(parsed.problem(path, message))
    return found


def read_policy_bytes(path: Path) -> bytes:
    """A policy file's bytes, read no further than the size limit, and refused if the file
    changed while it was read: a policy rewritten in place could otherwise be read half old,
    half new, or cut short into a different but valid policy. (Replace policies by renaming a
    complete file over the old one: an open file keeps reading the old one whole.)

    Only a regular file is read (see :mod:`prunewarden._files`). Raises :class:`OSError` (its
    ``strerror`` says why) like any unreadable file.
    """
    with open_regular(path) as stream:  # a FIFO or a device is refused unread
        before = os.fstat(stream.fileno())
        raw = stream.read(MAX_POLICY_BYTES + 1)
        after = os.fstat(stream.fileno())
    if len(raw) > MAX_POLICY_BYTES:
        msg = f"file is larger than the limit of {MAX_POLICY_BYTES} bytes"
        raise OSError(errno.EFBIG, msg)
    changed = (before.st_size, before.st_mtime_ns) != (after.st_size, after.st_mtime_ns)
    if changed or len(raw) != after.st_size:
        msg = "file changed while it was being read; not loaded (replace policies atomically)"
        raise OSError(errno.EAGAIN, msg)
    return raw


def normalize_document(data: dict[str, Any]) -> dict[str, Any]:
    """The canonical form of a schema-valid policy document: defaults filled in, numbers of one
    type, sets sorted, empty optional sections dropped, ``extends`` gone (the merged document
    stands on its own; the sources name the chain). What the digest is computed over."""
    document = _normalize(apply_defaults(resources.schema("policy"), copy.deepcopy(data)))
    document.pop("extends", None)
    return document


def _semantic_problems(data: dict[str, Any], problem: Any) -> list[Problem]:
    scores = data.get("spec", {}).get("scores", {})
    low, high = scores.get("min", 0.0), scores.get("max", 1.0)
    if not low < high:
        return [problem(("spec", "scores", "max"), f"{high!r} must be greater than min ({low!r})")]
    found = []
    fixed = scores.get("calibration")
    if isinstance(fixed, dict) and not fixed["fixed"]["low"] < fixed["fixed"]["high"]:
        bounds = fixed["fixed"]
        message = f"{bounds['high']!r} must be greater than low ({bounds['low']!r})"
        found.append(problem(("spec", "scores", "calibration", "fixed", "high"), message))
    collapse = data.get("spec", {}).get("collapse", {})
    if collapse.get("spread_floor_mode") == "relative" and "relative_to" not in collapse:
        message = "a relative spread floor needs relative_to: {first_cycles: N}"
        found.append(problem(("spec", "collapse", "spread_floor_mode"), message))
    canary_cycles = collapse.get("canary_cycles", 1)
    window = collapse.get("consecutive_cycles", 2) + 1
    numbers = isinstance(canary_cycles, int | float) and isinstance(window, int | float)
    if numbers and canary_cycles > window:
        message = (
            f"{canary_cycles!r} is more cycles than the guard sees: at most "
            f"consecutive_cycles + 1 ({window!r})"
        )
        found.append(problem(("spec", "collapse", "canary_cycles"), message))
    found += fidelity.pattern_problems(data, problem)
    found += classify.pattern_problems(data, problem)
    found += compaction.condition_problems(data, problem)
    return found


# Numbers normalized to one Python type, so that 1 and 1.0 digest alike and a whole-number
# float (an "integer" to JSON Schema) can index and slice.
_INT_FIELDS = {
    "collapse": ("consecutive_cycles",),
    "staleness": ("max_rewrites_without_recompute", "drift_consecutive_turns", "recompute_hops"),
}
_FLOAT_FIELDS = {
    "scores": ("min", "max"),
    "collapse": ("spread_floor", "canary_margin"),
    "eviction": ("stability_delta",),
    "staleness": ("drift_tolerance",),
}


def _normalize(document: dict[str, Any]) -> dict[str, Any]:

    spec = document["spec"]
    for kind, table in ((float, _FLOAT_FIELDS), (int, _INT_FIELDS)):
        for section, fields in table.items():
            for name in fields:
                spec[section][name] = kind(spec[section][name])
    # A set in meaning: sorted so that order does not change the digest.
    spec["eviction"]["pinned_kinds"] = sorted(spec["eviction"]["pinned_kinds"])
    _drop_implicit(spec)
    transition.drop_implicit(spec)
    fidelity.drop_implicit(spec)
    classify.drop_implicit(spec)
    compaction.drop_implicit(spec)
    normalize_rules(spec)
    guardrails.normalize(spec)
    return document


def _drop_implicit(spec: dict[str, Any]) -> None:
    """The optional calibration settings carry no schema default, so that a policy without them
    digests as before; spelled out at their implicit values, they are dropped for the same
    reason (and a relative_to is meaningless without the relative mode)."""
    scores, collapse = spec["scores"], spec["collapse"]
    if scores.get("calibration", "none") == "none":
        scores.pop("calibration", None)
    else:
        fixed = scores["calibration"]["fixed"]
        fixed["low"], fixed["high"] = float(fixed["low"]), float(fixed["high"])
    mode = collapse.get("spread_floor_mode", "absolute")
    if mode != "cusum":  # a cusum block is meaningless without its mode
        collapse.pop("cusum", None)
    if mode == "absolute":
        collapse.pop("spread_floor_mode", None)
        collapse.pop("relative_to", None)
    elif mode == "cusum":
        collapse.pop("relative_to", None)
        collapse["cusum"] = _cusum_settings(collapse.get("cusum", {})).to_dict()
    elif "relative_to" in collapse:  # without it: a problem _semantic_problems reports
        collapse["relative_to"]["first_cycles"] = int(collapse["relative_to"]["first_cycles"])
    if collapse.get("canary_cycles", 1) == 1:  # spelled out at its implicit value
        collapse.pop("canary_cycles", None)
    else:
        collapse["canary_cycles"] = int(collapse["canary_cycles"])
    if "min_live_entries" in collapse:
        collapse["min_live_entries"] = int(collapse["min_live_entries"])
    if collapse.get("min_live_entries", 0) == 0:
        collapse.pop("min_live_entries", None)
        collapse.pop("on_too_few_entries", None)
    elif collapse.get("on_too_few_entries", "allow") == "allow":
        collapse.pop("on_too_few_entries", None)


def _cusum_settings(block: dict[str, Any]) -> CusumSettings:
    """The cusum block with its defaults filled in (they are not schema defaults, which
    would enter every policy's resolved document and digest)."""
    reference = block.get("reference", {})
    default = CusumSettings()
    return CusumSettings(
        slack=float(block.get("slack", default.slack)),
        threshold=float(block.get("threshold", default.threshold)),
        first_cycles=int(reference.get("first_cycles", default.first_cycles)),
        prior_log_spread=float(reference.get("prior_log_spread", default.prior_log_spread)),
        prior_weight=float(reference.get("prior_weight", default.prior_weight)),
        reference_mode=reference.get("mode", default.reference_mode),
        rate=float(reference.get("rate", default.rate)),
    )


def _spec(spec: dict[str, Any]) -> Spec:
    eviction = dict(spec["eviction"])
    eviction["pinned_kinds"] = frozenset(eviction["pinned_kinds"])
    scores = dict(spec["scores"])
    fixed = scores.pop("calibration", {}).get("fixed")
    collapse = dict(spec["collapse"])
    relative_to = collapse.pop("relative_to", {})
    collapse["relative_first_cycles"] = relative_to.get("first_cycles", 0)
    if "cusum" in collapse:
        collapse["cusum"] = _cusum_settings(collapse["cusum"])
    return Spec(
        scores=ScoreRange(**scores),
        collapse=CollapseSettings(**collapse),
        eviction=EvictionSettings(**eviction),
        staleness=StalenessSettings(**spec["staleness"]),
        transition=transition.transition_settings(spec),
        fidelity=fidelity.fidelity_settings(spec),
        classify=classify.classify_settings(spec),
        compaction=compaction.compaction_settings(spec),
        calibration=None if fixed is None else Calibration(fixed["low"], fixed["high"]),
    )
