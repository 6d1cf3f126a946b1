"""The compiled validator as a platform with (or without) jsonschema-rs would choose it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from prunewarden import _schemas

BACKENDS = ("jsonschema-rs", "jsonschema")


@contextlib.contextmanager
def compiled_backend(backend: str) -> Iterator[None]:
    """Validate with ``backend`` inside the block, as if it had been chosen at import."""
    saved = _schemas.COMPILED_BACKEND
    _schemas.COMPILED_BACKEND = backend
    try:
        yield
    finally:
        _schemas.COMPILED_BACKEND = saved
