"""``prunewarden policy show``: a resolved policy with the file and line that set each value.

Two renderings of one :class:`~prunewarden.policy._merge.Resolution`:

- YAML with comments: the policy as the guards run it, every default filled in, each value
  followed by ``# FILE:LINE`` (or ``# default``). It loads back to the same policy.
- JSON: the identity and sources, the canonical document, and ``provenance``: for every value
  that is not a map, by JSON pointer, ``{file, line, column}`` or ``null`` for a default.

Both end with each rule's estimated worst-case cost (``rule_costs``; docs/rules.md, "Costs").
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import yaml

from prunewarden import _resources as resources
from prunewarden._json import JsonPath
from prunewarden._schemas import inline_refs
from prunewarden._source import Origin
from prunewarden.policy._merge import Resolution

if TYPE_CHECKING:
    from prunewarden.rules import Rule

_COMMENT_COLUMN = 44


def render_yaml(resolution: Resolution, *, defaults: bool = True) -> str:
    """The resolved policy as commented YAML; ``defaults=False`` leaves out the values no file
    set."""
    policy = resolution.policy
    lines = [
        f"# {policy.name}@{policy.version} {policy.digest}",
        "# sources, this policy first (sha256 of each file):",
        *(f"#   {source.path} {source.sha256}" for source in policy.sources),
    ]
    renderer = _Renderer(resolution, defaults=defaults)
    body = list(renderer.block(policy.document, (), _schema_root(), 0))
    width = min(max((len(text) for text, _ in body), default=0) + 2, _COMMENT_COLUMN)
    for text, origin in body:
        if origin is None:
            lines.append(text)
        else:
            lines.append(f"{text.ljust(width - 1)} # {origin}")
    lines.extend(_cost_lines(policy.rules))
    return "\n".join(lines) + "\n"


def _cost_lines(rules: tuple[Rule, ...]) -> list[str]:
    """Each rule's estimated worst-case cost, as comments closing the YAML."""
    if not rules:
        return []
    lines = ["# rules, estimated worst-case cost of one request (docs/rules.md#costs):"]
    for entry in rule_costs(rules):
        bound = "" if entry["max_cost"] is None else f" (max_cost {entry['max_cost']})"
        lines.append(f"#   {entry['name']}: {entry['cost']}{bound}: {entry['path']}")
    return lines


def rule_costs(rules: tuple[Rule, ...]) -> list[dict[str, Any]]:
    """Each rule's name, estimated worst-case cost, ``max_cost`` and the path that costs most."""
    return [
        {
            "name": rule.name,
            "cost": None if rule.cost is None else rule.cost.units,
            "max_cost": rule.max_cost,
            "path": None if rule.cost is None else rule.cost.describe(),
        }
        for rule in rules
    ]


def render_json(resolution: Resolution) -> dict[str, Any]:
    """Identity, sources, the canonical document and where each value came from."""
    policy = resolution.policy
    provenance: dict[str, Any] = {}
    for path in _leaf_paths(policy.document, ()):
        origin = resolution.origin(path)
        provenance[pointer(path)] = (
            None
            if origin is None
            else {"file": origin.file, "line": origin.line, "column": origin.column}
        )
    return {
        "policy": {
            **policy.identity.to_dict(),
            "sources": [source.to_dict() for source in policy.sources],
        },
        "document": policy.document,
        "provenance": provenance,
        "rule_costs": rule_costs(policy.rules),
    }


def pointer(path: JsonPath) -> str:
    """A path as a JSON pointer (RFC 6901)."""
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in path)


def scalar(value: Any) -> str:
    """A scalar or a list of scalars as YAML on one line (JSON where YAML would need more)."""
    text = yaml.safe_dump(value, default_flow_style=True, width=10**9, allow_unicode=True)
    text = text.removesuffix("\n...\n").rstrip("\n")
    return json.dumps(value, ensure_ascii=False) if "\n" in text else text


# --- rendering ---------------------------------------------------------------------------------

_Line = tuple[str, Origin | str | None]


def _schema_root() -> Mapping[str, Any]:
    root = resources.schema("policy")
    shape: Mapping[str, Any] = inline_refs(root, root)
    return shape


def _ordered(value: Mapping[str, Any], shape: Mapping[str, Any] | None) -> list[str]:
    """Keys in the schema's order (how the bundled policy reads), then any others sorted."""
    known = list((shape or {}).get("properties", {}))
    return [k for k in known if k in value] + sorted(k for k in value if k not in known)


def _child(shape: Mapping[str, Any] | None, key: str | int) -> Mapping[str, Any] | None:
    if shape is None:
        return None
    if isinstance(key, int):
        items = shape.get("items")
        return items if isinstance(items, Mapping) else None
    found = shape.get("properties", {}).get(key)
    return found if isinstance(found, Mapping) else None


class _Renderer:
    """Lines of commented YAML, each with the origin to put in its comment (None: no comment)."""

    def __init__(self, resolution: Resolution, *, defaults: bool) -> None:
        self.resolution = resolution
        self.defaults = defaults

    def block(
        self,
        value: Mapping[str, Any],
        path: JsonPath,
        shape: Mapping[str, Any] | None,
        indent: int,
        first_prefix: str | None = None,
    ) -> Iterator[_Line]:
        """The lines of a map; ``first_prefix`` replaces the indentation of its first line
        (``- `` for a map that is a list item)."""
        pad = " " * indent
        shown = [
            key
            for key in _ordered(value, shape)
            if self.defaults or _set_anywhere(self.resolution, (*path, key))
        ]
        for n, key in enumerate(shown):
            lead = first_prefix if n == 0 and first_prefix is not None else pad
            yield from self.value(
                value[key], (*path, key), _child(shape, key), indent, f"{lead}{scalar(key)}:"
            )

    def value(
        self, value: Any, path: JsonPath, shape: Mapping[str, Any] | None, indent: int, label: str
    ) -> Iterator[_Line]:
        note = _note(self.resolution, path)
        if isinstance(value, Mapping):
            if not value:
                yield f"{label} {{}}", note
                return
            yield label, None
            yield from self.block(value, path, shape, indent + 2)
        elif isinstance(value, list) and any(isinstance(item, Mapping) for item in value):
            yield label, note
            for i, item in enumerate(value):
                prefix = " " * (indent + 2) + "- "
                yield from self.block(item, (*path, i), _child(shape, 0), indent + 4, prefix)
        elif isinstance(value, list) and _mixed_origins(self.resolution, path, value):
            yield label, note
            for i, item in enumerate(value):
                item_note = _note(self.resolution, (*path, i))
                yield f"{' ' * (indent + 2)}- {scalar(item)}", item_note
        else:
            yield f"{label} {scalar(value)}", note


def _note(resolution: Resolution, path: JsonPath) -> Origin | str:
    return resolution.origin(path) or "default"


def _mixed_origins(resolution: Resolution, path: JsonPath, items: list[Any]) -> bool:
    """A list whose items came from several files (``spec.locked`` accumulates)."""
    files = {getattr(resolution.origin((*path, i)), "file", None) for i in range(len(items))}
    return len(files) > 1


def _set_anywhere(resolution: Resolution, path: JsonPath) -> bool:
    size = len(path)
    return any(p[:size] == path for p in resolution.origins)


def _leaf_paths(value: Any, path: JsonPath) -> Iterator[JsonPath]:
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from _leaf_paths(item, (*path, key))
        return
    yield path
    if isinstance(value, list):
        for i, item in enumerate(value):
            yield from _leaf_paths(item, (*path, i))
