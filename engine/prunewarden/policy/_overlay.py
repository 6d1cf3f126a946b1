"""Policies that extend policies: the ``extends`` chain, its merge, and where each value came from.

A policy names the policy it overlays with ``extends``: a path relative to its own file, or
``builtin:<name>`` for a bundled policy, confined as :mod:`prunewarden.policy._bases` says (a
file that is not a policy is refused without a word of its content). The chain is read from the
policy down to its root (at most :data:`MAX_CHAIN` files, none twice) and merged from the root
up:

- maps deep-merge; lists and scalars replace;
- ``spec.rules`` merge by ``name``: a rule named like an inherited one replaces it where it stood
  (a rule is one unit: its condition, effect and message are reviewed together), others are
  appended;
- ``spec.validators`` and ``spec.locked`` accumulate: they are guardrails
  (:mod:`prunewarden.guardrails`), and a list that replaced would let an overlay drop them;
- ``metadata`` is the policy's own (a deployment is a policy with its own name and version), and
  ``extends`` is not part of the result: the merged document stands on its own, and the policy's
  ``sources`` name the chain with the SHA-256 of each file.

Every file is checked against the schema on its own, so a problem points into the file that has
it. The merged document remembers the file, line and column that set each value
(:class:`Merged`), so a problem found in it, a guardrail an overlay breaks, and
``prunewarden policy show`` all point at the line to edit.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path as FilePath
from typing import Any

from prunewarden import _resources as resources
from prunewarden._identity import PolicyIdentity, PolicySource
from prunewarden._json import JsonPath, canonical_digest, paths, sha256_digest
from prunewarden._schemas import schema_problems
from prunewarden._source import Origin, Parsed, json_path, parse_yaml
from prunewarden.errors import PolicyError, Problem
from prunewarden.policy import _guardrails as guardrails
from prunewarden.policy._bases import OUTSIDE, BaseDirs, confined, real_dirs
from prunewarden.policy._build import (
    build_policy,
    normalize_document,
    param_problems,
    read_policy_bytes,
)
from prunewarden.policy._model import Policy

MAX_CHAIN = 8  # policies in one extends chain, the extending policy included
BUILTIN = "builtin:"
_BUILTIN_NAME = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")

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
    # Each layer's digest by digest version 1, for lock files that hold those.
    legacy_digests: tuple[str, ...] = ()

    def origin(self, path: JsonPath) -> Origin | None:
        """Where the value at ``path`` was set: its key's line when it has a key."""
        return self.key_origins.get(path) or self.origins.get(path)


@dataclass(frozen=True, slots=True)
class _Target:
    shown: str  # in messages and sources
    file: FilePath | None
    text: str | None = None


# --- entry points ------------------------------------------------------------------------------


def load_builtin(name: str) -> Policy:
    """A bundled policy; raises FileNotFoundError for an unknown name, as it always has."""
    if not _BUILTIN_NAME.fullmatch(name):
        raise FileNotFoundError(BUILTIN + name)
    resources.builtin_policy_path(name)
    return resolve_file(BUILTIN + name).policy


def parse(text: str, filename: str = "<policy>", base_dirs: BaseDirs = ()) -> Policy:
    """:func:`prunewarden.parse_policy`: a relative ``extends`` is read from ``filename``'s
    folder."""
    return _resolution(_Target(filename, None, text), real_dirs(base_dirs)).policy


def resolve_file(path: str | FilePath, base_dirs: BaseDirs = ()) -> Resolution:
    """Read and resolve the policy at ``path`` (or ``builtin:<name>``), keeping provenance;
    ``extends`` may also lead into ``base_dirs``."""
    shown = str(path)
    allowed = real_dirs(base_dirs)
    if shown.startswith(BUILTIN):
        target, problem = _builtin(shown)
        if target is None:
            raise PolicyError([Problem(shown, 0, 0, "$", problem)])
        return _resolution(target, allowed)
    return _resolution(_Target(shown, FilePath(path)), allowed)


def builtin_names() -> list[str]:
    return sorted(path.stem for path in resources.data_dir("policies").glob("*.yaml"))


# --- reading the chain -------------------------------------------------------------------------


def _read_bytes(path: FilePath) -> bytes:
    return read_policy_bytes(path)  # bounded, and refused if the file changes while read


def _resolution(first: _Target, allowed: tuple[str, ...]) -> Resolution:
    layers, problems = _read_chain(first, allowed)
    if problems and len(layers) == 1 and not _extends(layers[0]):
        # A single file with schema problems: report its expressions' problems with them, as
        # they do not depend on anything the file inherits.
        layer = layers[0]
        _, found = guardrails.compile_validators(layer.parsed, lambda path: _origin(layer, 0, path))
        build_policy(layer.parsed, (layer.source,), problems + found)
    if problems:
        raise PolicyError(problems)
    return _merge(layers)


def _read_chain(first: _Target, allowed: tuple[str, ...]) -> tuple[list[Layer], list[Problem]]:
    """The chain's files from the policy down to its root, and every problem found reading
    them (each file is checked against the schema on its own)."""
    layers: list[Layer] = []
    problems: list[Problem] = []
    target: _Target | None = first
    referrer: Layer | None = None
    while target is not None:
        layer, found = _read_layer(target, referrer)
        problems += found
        if layer is None:
            break
        layers.append(layer)
        target, referrer = _next_target(layer, layers, problems, allowed), layer
    layers.reverse()
    return layers, problems


def _read_layer(target: _Target, referrer: Layer | None) -> tuple[Layer | None, list[Problem]]:
    def unreadable(reason: str) -> list[Problem]:
        if referrer is None:
            return [Problem(target.shown, 0, 0, "$", reason)]
        return [referrer.parsed.problem(("extends",), f"{target.shown}: {reason}")]

    if target.text is not None:
        text = target.text
        raw = text.encode("utf-8", "surrogatepass")
    else:
        assert target.file is not None  # noqa: S101 - a target has text or a file
        try:
            raw = _read_bytes(target.file)
        except OSError as exc:
            return None, unreadable(f"cannot read: {exc.strerror}")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return None, unreadable(f"not UTF-8 text (byte {exc.start})")
    parsed, problems = parse_yaml(text, target.shown)
    if not parsed.built:
        return None, problems
    if not isinstance(parsed.data, dict):
        # Said without the value: a file named by mistake (or by malice) is not quoted.
        shape = "a list" if isinstance(parsed.data, list) else "a single value"
        message = f"not a policy: the document is {shape}, not a mapping"
        if referrer is None:
            return None, [parsed.problem((), message)]
        return None, unreadable(message)
    unread = {problem.path for problem in problems}  # a value refused unread is None below
    problems += [p for p in schema_problems("policy", parsed) if p.path not in unread]
    problems += param_problems(parsed)
    real = os.path.realpath(target.file if target.file is not None else target.shown)
    source = PolicySource(target.shown, hashlib.sha256(raw).hexdigest())
    return Layer(parsed, source, target.file, real), problems


def _extends(layer: Layer) -> str | None:
    data = layer.parsed.data
    extends = data.get("extends") if isinstance(data, dict) else None
    return extends if isinstance(extends, str) and extends else None


def _next_target(
    layer: Layer, chain: list[Layer], problems: list[Problem], allowed: tuple[str, ...]
) -> _Target | None:
    """The policy ``layer`` extends, if it extends one that may and can be read without a
    cycle."""
    extends = _extends(layer)
    if extends is None:
        return None  # none, or the schema reports a malformed one
    at: JsonPath = ("extends",)
    if len(chain) >= MAX_CHAIN:
        message = f"the extends chain is longer than {MAX_CHAIN} policies"
        problems.append(layer.parsed.problem(at, message))
        return None
    if extends.startswith(BUILTIN):
        target, problem = _builtin(extends)
    else:
        target, problem = _relative(extends, layer), ""
    if target is None:
        problems.append(layer.parsed.problem(at, problem))
        return None
    real = os.path.realpath(target.file) if target.file is not None else target.shown
    if not extends.startswith(BUILTIN) and not confined(real, layer.real, allowed):
        problems.append(layer.parsed.problem(at, f"{extends}: {OUTSIDE}"))
        return None
    if any(real == seen.real for seen in chain):
        cycle = " -> ".join([*(seen.source.path for seen in chain), target.shown])
        problems.append(layer.parsed.problem(at, f"extends cycle: {cycle}"))
        return None
    return target


def _builtin(name: str) -> tuple[_Target | None, str]:
    bare = name.removeprefix(BUILTIN)
    file = None
    if _BUILTIN_NAME.fullmatch(bare):  # a name, never a path into the package
        with contextlib.suppress(FileNotFoundError):
            file = resources.builtin_policy_path(bare)
    if file is None:
        known = ", ".join(BUILTIN + n for n in builtin_names())
        return None, f"no bundled policy named {bare!r} (bundled: {known})"
    return _Target(BUILTIN + bare, file), ""


def _relative(extends: str, layer: Layer) -> _Target:
    if layer.file is not None:
        folder = layer.file.parent
    else:
        folder = FilePath(os.path.dirname(layer.source.path))  # noqa: PTH120 - a name, maybe not a file
    shown_folder = os.path.dirname(layer.source.path)  # noqa: PTH120 - as the user named it
    if layer.source.path.startswith(BUILTIN):
        shown = str(folder / extends)
    else:
        shown = os.path.normpath(os.path.join(shown_folder, extends))  # noqa: PTH118
    return _Target(shown, folder / extends)


# --- merging -----------------------------------------------------------------------------------


def _merge(layers: list[Layer]) -> Resolution:
    """Merge the chain root first, checking each overlay against the locks it inherits, then
    the guardrails and everything the policy itself needs."""
    root = layers[0]
    data = copy.deepcopy(root.parsed.data)
    merged = Merged(data, layers[-1].source.path, built=True)
    _Overlay(merged, root, 0).record(root.parsed.data, (), ())
    problems: list[Problem] = []
    validators: list[guardrails.Validator] = []
    documents: list[dict[str, Any]] = []
    for index, layer in enumerate(layers):
        if index:
            problems += _duplicate_rules(layer)
            _Overlay(merged, layer, index).apply()
        document = normalize_document(merged.data)
        locks = guardrails.declared_locks(merged.data, merged.origins)
        if index:
            inherited = [lock for lock in locks if lock.origin.layer < index]
            inherited += guardrails.implied_locks(inherited, documents[-1])
            problems += guardrails.changed_locks(inherited, documents[-1], document, merged, index)
        own = [lock for lock in locks if lock.origin.layer == index]
        problems += guardrails.unresolved_locks(own, document)
        compiled, found = guardrails.compile_validators(
            layer.parsed, lambda path, i=index, lay=layer: _origin(lay, i, path)
        )
        validators += compiled
        problems += found
        documents.append(document)
    if len(layers) > 1:
        problems += schema_problems("policy", merged)
    entries = merged.data.get("spec", {}).get("validators", [])
    problems += guardrails.duplicate_validators(entries, merged)
    problems += guardrails.validator_problems(validators, documents[-1], merged)
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
    # What lock files of digest version 1 hold (Python's sorted-keys JSON).
    legacy = tuple(sha256_digest(document) for document in documents)
    origins, key_origins = _canonical_origins(merged, policy.document)
    return Resolution(policy, tuple(layers), identities, origins, key_origins, legacy)


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


def _origin(layer: Layer, index: int, path: JsonPath) -> Origin:
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
