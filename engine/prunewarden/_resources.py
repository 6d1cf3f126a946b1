"""Where the schemas and bundled policies are, installed or in a source checkout."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

_PACKAGE = Path(__file__).resolve().parent


def data_dir(kind: str) -> Path:
    """The folder holding ``schemas`` or ``policies``.

    A wheel carries them inside the package (``prunewarden/_data``); in a source checkout
    ``_data/schemas`` and ``_data/policies`` are links to the top of the repository, where
    editors and reviewers find them (and a copy without the links reads them there too).
    """
    for candidate in (_PACKAGE / "_data" / kind, _PACKAGE.parent.parent / kind):
        if candidate.is_dir():
            return candidate
    msg = f"prunewarden is installed without its {kind} folder"
    raise FileNotFoundError(msg)


@cache
def schema(name: str, version: int | None = None) -> dict[str, Any]:
    """A bundled JSON Schema by short name (``policy``, ``input``, ``decision``): its latest
    version, or ``version`` (``audit-record`` has 2, and 1 for logs written before)."""
    if version is None:
        versions = [int(p.name.split(".")[1][1:]) for p in schema_files() if _named(p, name)]
        version = max(versions, default=1)
    path = data_dir("schemas") / f"{name}.v{version}.schema.json"
    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


def _named(path: Path, name: str) -> bool:
    return path.name.split(".")[0] == name


def schema_files() -> list[Path]:
    """The bundled schema files (``NAME.vN.schema.json``), sorted."""
    return sorted(data_dir("schemas").glob("*.v[0-9]*.schema.json"))


def catalog() -> dict[str, Any]:
    """The schema catalog (``catalog.json``, in SchemaStore's catalog format): every bundled
    schema by its ``$id``, older versions under ``versions``."""
    loaded: dict[str, Any] = json.loads(
        (data_dir("schemas") / "catalog.json").read_text(encoding="utf-8")
    )
    return loaded


def builtin_policy_path(name: str) -> Path:
    """Path of a bundled policy (``default``)."""
    path = data_dir("policies") / f"{name}.yaml"
    if not path.is_file():
        msg = f"no bundled policy named {name!r}"
        raise FileNotFoundError(msg)
    return path
