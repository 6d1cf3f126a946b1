"""The merge of an ``extends`` chain, root first, and where each merged value came from.

Kept apart from reading the chain (:mod:`._overlay`, whose docstring states the merge rules)
because the merge works on parsed layers alone: it never touches a file, and what it returns, a
:class:`Resolution`, is what lock files, diffs and ``policy show`` read.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path as FilePath
from typing import Any

from prunewarden._identity import PolicyIdentity, PolicySource
from prunewarden._json import JsonPath, canonical_digest, paths
from prunewarden._schemas import schema_problems
from prunewarden._source import Origin, Parsed, json_path
from prunewarden.errors import Problem
from prunewarden.policy import _guardrails as guardrails
from prunewarden.policy._build import build_policy, normalize_document
from prunewarden.policy._compaction import effective_document
from prunewarden.policy._model import Policy

# Lists that accumulate along a chain instead of replacing.
_ACCUMULATED: frozenset[JsonPath] = frozenset({("spec", "validators"), ("spec", "locked")})
# Lists of scalars that the canonical form sorts: their items' origins follow their values.
_SORTED: tuple[JsonPath, ...] = (("spec", "eviction", "pinned_kinds"), ("spec", "locked"))


@dataclass(eq=False)
class Merged(Parsed):
    """The merged data of a chain with the origin of each value (``origins``: where the value
    starts; ``key_origins``: where its key is). A problem found in it points at the file and
    line that set the culprit, or at the nearest enclosing value that has an origin."""

    origins: dict[JsonPath, Origin] = field(default_factory=dict)
    key_origins: dict[JsonPath, Origin] = field(default_factory=dict)

    def problem(self, path: JsonPath, message: str, *, at_key: bool = False) -> Problem:
        origin = (self.key_origins.get(path) if at_key else None) or guardrails.nearest(
            self.origins, path
        )
        if origin is None:
            return Problem(self.filename, 0, 0, json_path(path), message)
        return Problem(origin.file, origin.line, origin.column, json_path(path), message)


@dataclass(frozen=True, slots=True)
class Layer:
    """One policy file of a chain: what it parsed to, its name and hash, where it is."""

    parsed: Parsed
    source: PolicySource
    file: FilePath | None  # on disk (None for text given directly)
    real: str  # the real path, to tell a cycle


@dataclass(frozen=True, slots=True)
class Resolution:
    """A resolved policy with its chain and the origin of every value of its document.

    ``layers`` and ``identities`` go from the root to the policy itself; ``identities[i]`` is
    what loading ``layers[i]`` on its own gives. ``origins`` and ``key_origins`` are keyed by
    paths of ``policy.document``; a path without one holds a default.
    """

    policy: Policy
    layers: tuple[Layer, ...]
    identities: tuple[PolicyIdentity, ...]
    origins: Mapping[JsonPath, Origin]
    key_origins: Mapping[JsonPath, Origin]

    def origin(self, path: JsonPath) -> Origin | None:
        """Where the value at ``path`` was set: its key's line when it has a key."""
        return self.key_origins.get(path) or self.origins.get(path)


# --- merging --------------------------------------------------------------------------------------


def merge_chain(layers: list[Layer]) -> Resolution:
    """Merge the chain root first, checking each overlay against the locks it inherits, then
    the guardrails and everything the policy itself needs."""
    root = layers[0]
    data = copy.deepcopy(root.parsed.data)
    merged = Merged(data, layers[-1].source.path, built=True)
    _Overlay(merged, root, 0).record(root.parsed.data, (), ())
    problems: list[Problem] = []
    validators: list[guardrails.Validator] = []
    documents: list[dict[str, Any]] = []
    views: list[dict[str, Any]] = []
    for index, layer in enumerate(layers):
        if index:
            problems += _duplicate_rules(layer)
            _Overlay(merged, layer, index).apply()
        document = normalize_document(merged.data)
        # Guardrails read every setting as it takes effect (spec.transition and spec.fidelity
        # filled in).
        view = effective_document(document)
        locks = guardrails.declared_locks(merged.data, merged.origins)
        if index:
            inherited = [lock for lock in locks if lock.origin.layer < index]
            inherited += guardrails.implied_locks(inherited, views[-1])
            problems += guardrails.changed_locks(inherited, views[-1], view, merged, index)
        own = [lock for lock in locks if lock.origin.layer == index]
        problems += guardrails.unresolved_locks(own, view)
        compiled, found = guardrails.compile_validators(
            layer.parsed, lambda path, i=index, lay=layer: layer_origin(lay, i, path)
        )
        validators += compiled
        problems += found
        documents.append(document)
        views.append(view)
    if len(layers) > 1:
        problems += schema_problems("policy", merged)
    entries = merged.data.get("spec", {}).get("validators", [])
    problems += guardrails.duplicate_validators(entries, merged)
    problems += guardrails.validator_problems(validators, views[-1], merged)
    sources = tuple(layer.source for layer in reversed(layers))
    policy = build_policy(merged, sources, problems)
    identities = tuple(
        PolicyIdentity(
            document["metadata"]["name"],
            document["metadata"]["version"],
            canonical_digest(document),
        )
        for document in documents
    )
    origins, key_origins = _canonical_origins(merged, policy.document)
    return Resolution(policy, tuple(layers), identities, origins, key_origins)


class _Overlay:
    """One file merged onto the chain below it, recording the origin of what it sets."""

    def __init__(self, merged: Merged, layer: Layer, index: int) -> None:
        self.merged = merged
        self.layer = layer
        self.index = index

    def apply(self) -> None:
        data = self.merged.data
        for key, value in self.layer.parsed.data.items():
            if key == "extends":
                continue
            if key == "metadata":  # the policy's own identity, never inherited
                self.replace(data, key, value, (key,))
            else:
                self.merge_into(data, key, value, (key,))

    def merge_into(self, target: dict[str, Any], key: str, value: Any, path: JsonPath) -> None:
        if path == ("spec", "rules"):
            self.merge_rules(target, value)
        elif path in _ACCUMULATED:
            self.accumulate(target, key, value, path)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            # A map both sides have keeps the origin of whoever wrote it first: only the values
            # the overlay sets are its own.
            for child, item in value.items():
                self.merge_into(target[key], child, item, (*path, child))
        else:
            self.replace(target, key, value, path)

    def replace(self, target: dict[str, Any], key: str, value: Any, path: JsonPath) -> None:
        if key in target:
            _forget(self.merged, target[key], path)
        target[key] = copy.deepcopy(value)
        self.record(value, path, path)

    def merge_rules(self, spec: dict[str, Any], rules: list[Any]) -> None:
        path: JsonPath = ("spec", "rules")
        if "rules" not in spec:
            spec["rules"] = []
            self.record_one(path, path)
        current: list[Any] = spec["rules"]
        position = {rule["name"]: i for i, rule in enumerate(current)}
        for j, rule in enumerate(rules):
            i = position.get(rule["name"])
            if i is None:
                i = position[rule["name"]] = len(current)
                current.append(None)
            else:
                _forget(self.merged, current[i], (*path, i))
            current[i] = copy.deepcopy(rule)
            self.record(rule, (*path, j), (*path, i))

    def accumulate(self, spec: dict[str, Any], key: str, items: list[Any], path: JsonPath) -> None:
        if key not in spec:
            spec[key] = []
            self.record_one(path, path)
        current: list[Any] = spec[key]
        for j, item in enumerate(items):
            if path == ("spec", "locked") and item in current:
                continue  # locked once is locked: the first declaration is the one to cite
            current.append(copy.deepcopy(item))
            self.record(item, (*path, j), (*path, len(current) - 1))

    def record(self, value: Any, source: JsonPath, target: JsonPath) -> None:
        """``value``, found at ``source`` in the file, now sits at ``target``: so do the
        origins of everything in it."""
        for relative in paths(value):
            self.record_one((*source, *relative), (*target, *relative))

    def record_one(self, source: JsonPath, target: JsonPath) -> None:
        name, parsed = self.layer.source.path, self.layer.parsed
        if (found := parsed.values.get(source)) is not None:
            self.merged.origins[target] = Origin(name, *found, self.index)
        if (key := parsed.keys.get(source)) is not None:
            self.merged.key_origins[target] = Origin(name, *key, self.index)


def _duplicate_rules(layer: Layer) -> list[Problem]:
    """In an overlay, a second rule with a name would silently replace the first: refuse it
    as a single policy would."""
    rules = layer.parsed.data.get("spec", {}).get("rules", [])
    seen: dict[str, int] = {}
    problems = []
    for index, rule in enumerate(rules):
        name = rule["name"]
        if name in seen:
            message = f"duplicate rule name {name!r} (first at rules[{seen[name]}])"
            problems.append(layer.parsed.problem(("spec", "rules", index, "name"), message))
        seen.setdefault(name, index)
    return problems


# --- provenance --------------------------------------------------------------------------------


def layer_origin(layer: Layer, index: int, path: JsonPath) -> Origin:
    line, column = layer.parsed.values.get(path) or (0, 0)
    return Origin(layer.source.path, line, column, index)


def _forget(merged: Merged, value: Any, path: JsonPath) -> None:
    for relative in paths(value):
        merged.origins.pop((*path, *relative), None)
        merged.key_origins.pop((*path, *relative), None)


def _canonical_origins(
    merged: Merged, document: Mapping[str, Any]
) -> tuple[dict[JsonPath, Origin], dict[JsonPath, Origin]]:
    """The origins keyed by paths of the canonical document: the items of the lists it sorts
    follow their values."""
    origins, key_origins = dict(merged.origins), dict(merged.key_origins)
    for path in _SORTED:
        raw = guardrails.lookup(merged.data, path)
        canonical = guardrails.lookup(document, path)
        if not isinstance(raw, list) or not isinstance(canonical, list):
            continue
        for i in range(len(raw)):
            origins.pop((*path, i), None)
        for i, value in enumerate(canonical):
            found = merged.origins.get((*path, raw.index(value)))
            if found is not None:
                origins[(*path, i)] = found
    return origins, key_origins
