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
  (:mod:`prunewarden.policy._guardrails`), and a list that replaced would let an overlay drop them;
- ``metadata`` is the policy's own (a deployment is a policy with its own name and version), and
  ``extends`` is not part of the result: the merged document stands on its own, and the policy's
  ``sources`` name the chain with the SHA-256 of each file.

Every file is checked against the schema on its own, so a problem points into the file that has
it. The merged document remembers the file, line and column that set each value (the merge and
its :class:`~prunewarden.policy._merge.Merged` are in :mod:`._merge`), so a problem found in it, a
guardrail an overlay breaks, and ``prunewarden policy show`` all point at the line to edit.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path as FilePath

from prunewarden import _resources as resources
from prunewarden._identity import PolicySource
from prunewarden._json import JsonPath
from prunewarden._schemas import schema_problems
from prunewarden._source import parse_yaml
from prunewarden.errors import PolicyError, Problem
from prunewarden.policy import _guardrails as guardrails
from prunewarden.policy._bases import OUTSIDE, BaseDirs, confined, real_dirs
from prunewarden.policy._build import (
    build_policy,
    param_problems,
    read_policy_bytes,
)
from prunewarden.policy._merge import Layer, Resolution, layer_origin, merge_chain
from prunewarden.policy._model import Policy

MAX_CHAIN = 8  # policies in one extends chain, the extending policy included
BUILTIN = "builtin:"
_BUILTIN_NAME = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")


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
    return resolve_text(text, filename, base_dirs).policy


def resolve_text(text: str, filename: str = "<policy>", base_dirs: BaseDirs = ()) -> Resolution:
    """Resolve policy YAML ``text`` as :func:`parse` does, keeping provenance."""
    return _resolution(_Target(filename, None, text), real_dirs(base_dirs))


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
        _, found = guardrails.compile_validators(
            layer.parsed, lambda path: layer_origin(layer, 0, path)
        )
        build_policy(layer.parsed, (layer.source,), problems + found)
    if problems:
        raise PolicyError(problems)
    return merge_chain(layers)


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
