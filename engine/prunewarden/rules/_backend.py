"""Which CEL backend evaluates a policy's rules, and the one place the native runtime is
imported: when a native backend is first asked for, or a policy's rules are type-checked (where
the extra is installed, ``_typecheck``), never with the package (a policy without rules, and
the command line, never load cel-cpp).
"""

from __future__ import annotations

import importlib
import os
from functools import cache
from typing import Any

BACKENDS = ("python", "native")
ENVIRONMENT_VARIABLE = "PRUNEWARDEN_CEL"
_MODULE = "cel_expr_python.cel"


class BackendUnavailableError(RuntimeError):
    """The native backend was asked for and ``cel-expr-python`` is not installed."""

    def __init__(self, message: str, *, backend: str = "native", missing: str = "") -> None:
        super().__init__(message)
        self.backend = backend
        self.missing = missing


def check_backend(backend: str | None = None) -> str:
    """``backend`` (else the environment variable ``PRUNEWARDEN_CEL``, else ``"python"``) if it
    names a CEL backend that can run here: :class:`ValueError` for an unknown name,
    :class:`BackendUnavailableError` for ``native`` without ``cel-expr-python``."""
    if backend is None:
        backend = os.environ.get(ENVIRONMENT_VARIABLE) or "python"
    if backend not in BACKENDS:
        message = f"unknown CEL backend {backend!r} (use one of: {', '.join(BACKENDS)})"
        raise ValueError(message)
    if backend == "native":
        cel_module()
    return backend


@cache
def cel_module() -> Any:
    """``cel_expr_python.cel``, imported the first time a native backend is built."""
    try:
        return importlib.import_module(_MODULE)
    except ImportError as exc:
        message = (
            "the native CEL backend needs cel-expr-python: pip install 'prunewarden[cel-native]' "
            f"({exc})"
        )
        raise BackendUnavailableError(message, missing="cel-expr-python") from None
