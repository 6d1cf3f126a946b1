"""Where the schemas and bundled policies are, installed or in a source checkout."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

_PACKAGE = Path(__file__).resolve().parent


def data_dir(kind: str) -> Path:
    """The folder holding ``schemas`` or ``policies``.

    A wheel carries them inside the package (``prunewarden/_data``); a source checkout and an
    editable install read them from the top of the repository.
    """
    for candidate in (_PACKAGE / "_data" / kind, _PACKAGE.parent.parent / kind):
        if candidate.is_dir():
            return candidate
    msg = f"prunewarden is installed without its {kind} folder"
    raise FileNotFoundError(msg)


@cache
def schema(name: str) -> dict[str, Any]:
    """A bundled JSON Schema by short name: ``policy``, ``input``, ``decision``."""
    path = data_dir("schemas") / f"{name}.v1.schema.json"
    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


def schema_files() -> list[Path]:
    """The bundled schema files (``NAME.v1.schema.json``), sorted."""
    return sorted(data_dir("schemas").glob("*.v1.schema.json"))


def builtin_policy_path(name: str) -> Path:
    """Path of a bundled policy (``default``)."""
    path = data_dir("policies") / f"{name}.yaml"
    if not path.is_file():
        msg = f"no bundled policy named {name!r}"
        raise FileNotFoundError(msg)
    return path
