"""The pass record of ``record_version`` 3: an eviction pass as columns.

A ``record_version`` 2 pass record lists a verdict object per segment (check, outcome, enforced,
codes, actions, segment): for a pass of 200 segments, 200 objects that say the same few things
again and again, and building them cost more than deciding the pass. A version 3 pass record of
an eviction pass says each thing once:

- ``segments``: the segment ids, in the order they were decided (decision ``i`` is
  ``<pass_id>-<i>``);
- ``codes``: the code table, and ``code_actions``: the action each code asks for (or null);
- ``reasons``: one bitmask per segment, bit ``j`` set when code ``j`` of the table is one of its
  reasons; the reasons are the set bits in table order, the primary first;
- ``allowed``: one character per segment, ``1`` allowed, ``0`` refused (``refusal`` names the
  outcome of a refusal), and ``enforced`` once for the pass;
- ``dependencies``: for a segment (by index) whose ``resolve_dependencies_first`` action names
  other segments, those ids; every other action names the segment itself.

A plan (``pass: "plan"``) decided over columns holds its evictions so, and adds what only a plan
has: ``verdicts``, the version 2 compact entries of the decisions the columns did not make (its
collapse and staleness verdicts, an eviction refused with its group), ``verdict_indices``, the
place of each in the pass's order (the columns fill the other places, in order), and ``plan``,
the summary a version 2 plan record carries.

Sealed, chained and verified as version 2 is (RFC 8785); readers see its decisions as they see a
version 2 pass's (:func:`column_rows`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from prunewarden.__about__ import __version__
from prunewarden.audit._record import PRUNING_PASS, policy_fields
from prunewarden.audit._redaction import erase
from prunewarden.policy import Policy

COLUMNS_VERSION = 3
DEPENDENCY_ACTION = "resolve_dependencies_first"


def columns_record(  # noqa: PLR0913 - everything one pass record is made of
    pass_kind: str,
    *,
    pass_id: str,
    ts: str,
    check: str,
    refusal: str,
    enforced: bool,
    segment_ids: Sequence[str],
    codes: Sequence[str],
    code_actions: Sequence[str | None],
    masks: Sequence[int],
    allowed: Sequence[bool],
    dependencies: Mapping[int, Sequence[str]],
    input_digest: str,
    policy: Policy,
    session_id: str | None,
    labels: Mapping[str, str],
    from_session: bool = False,
    masks_of_input: tuple[str, ...] | None = None,
    document: Any = None,
    verdicts: Sequence[tuple[int, Mapping[str, Any]]] | None = None,
    plan: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``record_version`` 3 record of one pass decided over columns; a plan's also holds
    ``verdicts`` (each with its index in the pass) the columns did not decide, and ``plan``."""
    record: dict[str, Any] = {
        "record_version": COLUMNS_VERSION,
        "kind": PRUNING_PASS,
        "pass": pass_kind,
        "pass_id": pass_id,
        "ts": ts,
        "check": check,
        "refusal": refusal,
        "enforced": enforced,
        "segments": list(segment_ids),
        "codes": list(codes),
        "code_actions": list(code_actions),
        "reasons": list(masks),
        "allowed": "".join(["1" if ok else "0" for ok in allowed]),
        "dependencies": {str(index): list(ids) for index, ids in dependencies.items()},
        "session_id": session_id,
        "from_session": from_session,
        "labels": dict(labels),
        "policy": policy_fields(policy),
        "engine_version": __version__,
        "input_digest": input_digest,
    }
    if verdicts is not None:
        record["verdict_indices"] = [index for index, _ in verdicts]
        record["verdicts"] = [dict(verdict) for _, verdict in verdicts]
    if plan is not None:
        record["plan"] = dict(plan)
    if masks_of_input is not None and document is not None:
        record["input"], record["input_erased"] = erase(document, masks_of_input)
    return record


def column_rows(record: Mapping[str, Any], shared: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The decisions of a version 3 pass record, each shaped as a ``decision`` record (what
    ``decision_rows`` gives for a version 2 pass): reasons by code, actions rebuilt from the
    code table and the dependencies. ``shared`` holds the fields every row copies."""
    segments = _list(record.get("segments"))
    codes = _list(record.get("codes"))
    actions = _list(record.get("code_actions"))
    masks = _list(record.get("reasons"))
    allowed = record.get("allowed")
    allowed = allowed if isinstance(allowed, str) else ""
    dependencies = record.get("dependencies")
    dependencies = dependencies if isinstance(dependencies, dict) else {}
    refusal = record.get("refusal")
    pass_id = str(record.get("pass_id", ""))
    rows = []
    for column, (index, segment) in enumerate(zip(column_indices(record), segments, strict=True)):
        mask = masks[column] if column < len(masks) and isinstance(masks[column], int) else 0
        on = [bit for bit in range(len(codes)) if mask >> bit & 1]
        rows.append(
            {
                **shared,
                "decision_id": f"{pass_id}-{index}",
                "index": index,
                "check": record.get("check"),
                "outcome": "allow" if allowed[column : column + 1] == "1" else refusal,
                "enforced": record.get("enforced"),
                "reasons": [{"code": codes[bit]} for bit in on],
                "actions": _actions(
                    [actions[bit] if bit < len(actions) else None for bit in on],
                    segment,
                    dependencies.get(str(column)),
                ),
                "subject": {"segment": {"id": segment}},
            }
        )
    return rows


def column_indices(record: Mapping[str, Any]) -> list[int]:
    """The place in the pass of each segment of the columns: in order, every place that no
    entry of ``verdict_indices`` (a plan's) takes."""
    segments = _list(record.get("segments"))
    taken = {i for i in _list(record.get("verdict_indices")) if isinstance(i, int)}
    places = (i for i in range(len(segments) + len(taken)) if i not in taken)
    return [next(places) for _ in segments]


def _actions(named: list[Any], segment: Any, dependencies: Any) -> list[dict[str, Any]]:
    """The actions of one segment, as the guard gives them: in its reasons' order, each once;
    ``resolve_dependencies_first`` names the dependencies, every other action the segment."""
    out: list[dict[str, Any]] = []
    for action in named:
        if not isinstance(action, str):
            continue
        ids = dependencies if action == DEPENDENCY_ACTION else [segment]
        entry = {"action": action, "ids": list(ids) if isinstance(ids, list) else [ids]}
        if entry not in out:
            out.append(entry)
    return out


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
