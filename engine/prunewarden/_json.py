"""Canonical JSON and the digests computed over it, and the paths of a JSON value."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

# A location in a JSON value: keys and list indexes from the root.
JsonPath = tuple[str | int, ...]


def canonical_json(value: Any) -> str:
    """One spelling per value: sorted keys, no spaces, UTF-8, no NaN."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def sha256_digest(value: Any) -> str:
    return "sha256:" + hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


def paths(value: Any, path: JsonPath = ()) -> Iterator[JsonPath]:
    """Every location in ``value``, the root first, depth first in document order."""
    yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from paths(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from paths(item, (*path, i))
