"""``prunewarden policy diff``: what differs between two resolved policies, by meaning.

Both policies are compared as the guards run them (every default filled in, overlays resolved),
not as text: a comment, a reordered key or a default spelled out is no difference. A difference is
one of

- a threshold or setting (``spec.collapse.spread_floor``) or a mode (``spec.eviction.mode``);
- a pinned kind added or removed (``spec.eviction.pinned_kinds``, a set);
- a param, a rule or a validator added, removed or changed, matched by name, field by field; a
  change in the order of the rules both have (it decides which reason comes first);
- a locked path added or removed;
- the metadata (name, version, description).

Each difference carries the file and line that set each side, when a file did.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from prunewarden._json import JsonPath
from prunewarden._source import Origin
from prunewarden.policy._compaction import effective_document
from prunewarden.policy._guardrails import MISSING, lookup
from prunewarden.policy._merge import Resolution
from prunewarden.policy._provenance import scalar

Kind = Literal["added", "removed", "changed"]
_SETS: dict[JsonPath, str] = {
    ("spec", "eviction", "pinned_kinds"): "kind",
    ("spec", "transition", "pinned_kinds"): "kind",
    ("spec", "fidelity", "kinds"): "kind",
    ("spec", "locked"): "locked",
}
_NAMED: dict[JsonPath, str] = {("spec", "rules"): "rule", ("spec", "validators"): "validator"}
_GUARDS = (
    "scores",
    "collapse",
    "eviction",
    "staleness",
    "transition",
    "fidelity",
    "classify",
    "compaction",
)


@dataclass(frozen=True, slots=True)
class Change:
    """One difference: where (a readable path), what kind, the category, and both sides."""

    path: str
    kind: Kind
    category: str  # metadata, setting, mode, kind, param, rule, validator, locked
    before: Any = MISSING
    after: Any = MISSING
    before_origin: Origin | None = None
    after_origin: Origin | None = None

    def to_dict(self) -> dict[str, Any]:
        def origin(found: Origin | None) -> dict[str, Any] | None:
            if found is None:
                return None
            return {"file": found.file, "line": found.line, "column": found.column}

        out: dict[str, Any] = {"path": self.path, "change": self.kind, "category": self.category}
        if self.before is not MISSING:
            out["before"] = self.before
            out["before_origin"] = origin(self.before_origin)
        if self.after is not MISSING:
            out["after"] = self.after
            out["after_origin"] = origin(self.after_origin)
        return out

    def describe(self) -> str:
        """One line: ``~ spec.collapse.spread_floor: 0.1 -> 0.12 (a: prod.yaml:9, b: ...)``."""
        if self.kind == "changed":
            text = f"~ {self.path}: {_short(self.before)} -> {_short(self.after)}"
        elif self.kind == "added":
            text = f"+ {self.path}: {_short(self.after)}"
        else:
            text = f"- {self.path}: {_short(self.before)}"
        where = []
        if self.before is not MISSING:
            where.append(f"a: {self.before_origin or 'default'}")
        if self.after is not MISSING:
            where.append(f"b: {self.after_origin or 'default'}")
        return f"{text}  ({', '.join(where)})"


def diff(a: Resolution, b: Resolution) -> list[Change]:
    """Every difference between ``a`` and ``b``, in document order."""
    return _Differ(a, b).changes()


class _Differ:
    def __init__(self, a: Resolution, b: Resolution) -> None:
        self.a, self.b = a, b
        # Compared as the guards run them: spec.transition, .fidelity, .classify and
        # .compaction filled in where a field is implicit.
        self.left = effective_document(a.policy.document)
        self.right = effective_document(b.policy.document)
        self.found: list[Change] = []

    def changes(self) -> list[Change]:
        left, right = self.left, self.right
        for key in ("name", "version", "description"):
            self._compare(("metadata", key), "metadata")
        for guard in _GUARDS:
            before, after = left["spec"][guard], right["spec"][guard]
            for key in _union(before, after):
                setting: JsonPath = ("spec", guard, key)
                if setting in _SETS:
                    self._set(setting)
                else:
                    self._compare(setting, "mode" if key == "mode" else "setting")
        for name in _union(left["spec"].get("params", {}), right["spec"].get("params", {})):
            self._compare(("spec", "params", name), "param")
        for path, category in _NAMED.items():
            self._named(path, category)
        self._set(("spec", "locked"))
        return self.found

    def _compare(
        self, left: JsonPath, category: str, right: JsonPath | None = None, shown: str | None = None
    ) -> None:
        """The value at ``left`` in a against the value at ``right`` (the same path unless an
        item moved) in b."""
        right = left if right is None else right
        old = lookup(self.left, left)
        new = lookup(self.right, right)
        if old == new:
            return
        kind: Kind = "added" if old is MISSING else "removed" if new is MISSING else "changed"
        self.found.append(
            Change(
                shown or _readable(left),
                kind,
                category,
                old,
                new,
                self.a.origin(left) if old is not MISSING else None,
                self.b.origin(right) if new is not MISSING else None,
            )
        )

    def _set(self, path: JsonPath) -> None:
        category = _SETS[path]
        before = _list(lookup(self.left, path))
        after = _list(lookup(self.right, path))
        for i, value in enumerate(after):
            if value not in before:
                origin = self.b.origin((*path, i)) or self.b.origin(path)
                change = Change(
                    _readable(path), "added", category, after=value, after_origin=origin
                )
                self.found.append(change)
        for i, value in enumerate(before):
            if value not in after:
                origin = self.a.origin((*path, i)) or self.a.origin(path)
                change = Change(
                    _readable(path), "removed", category, before=value, before_origin=origin
                )
                self.found.append(change)

    def _named(self, path: JsonPath, category: str) -> None:
        before = _list(lookup(self.left, path))
        after = _list(lookup(self.right, path))
        old = {item["name"]: i for i, item in enumerate(before)}
        new = {item["name"]: j for j, item in enumerate(after)}
        for name, j in new.items():
            shown = f"{_readable(path)}[{name}]"
            if name not in old:
                origin = self.b.origin((*path, j))
                self.found.append(
                    Change(shown, "added", category, after=after[j], after_origin=origin)
                )
                continue
            i = old[name]
            for key in _union(before[i], after[j]):
                self._compare((*path, i, key), category, (*path, j, key), f"{shown}.{key}")
        for name, i in old.items():
            if name not in new:
                origin = self.a.origin((*path, i))
                self.found.append(
                    Change(
                        f"{_readable(path)}[{name}]",
                        "removed",
                        category,
                        before=before[i],
                        before_origin=origin,
                    )
                )
        common_before = [name for name in old if name in new]
        common_after = [name for name in new if name in old]
        if path == ("spec", "rules") and common_before != common_after:
            self.found.append(
                Change(
                    f"{_readable(path)} order",
                    "changed",
                    category,
                    common_before,
                    common_after,
                    self.a.origin(path),
                    self.b.origin(path),
                )
            )


def _union(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    return [*before, *(key for key in after if key not in before)]


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _readable(path: JsonPath) -> str:
    return ".".join(str(part) for part in path)


def _short(value: Any, limit: int = 80) -> str:
    text = scalar(value) if not isinstance(value, Mapping) else _mapping(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _mapping(value: Mapping[str, Any]) -> str:
    return "{" + ", ".join(f"{key}: {scalar(item)}" for key, item in value.items()) + "}"


def render_text(
    a_name: str, b_name: str, a: Resolution, b: Resolution, changes: list[Change]
) -> str:
    """The header naming both policies, one line per difference, and a count."""
    lines = []
    for label, name, resolution in (("a", a_name, a), ("b", b_name, b)):
        policy = resolution.policy
        lines.append(f"{label}: {name} ({policy.name}@{policy.version} {policy.digest[:19]})")
    lines += [change.describe() for change in changes]
    count = len(changes)
    lines.append(
        "no differences" if not count else f"{count} difference{'s' if count != 1 else ''}"
    )
    return "\n".join(lines) + "\n"
