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
NATIVE_EXTRA = "cel-native"
_MODULE = "cel_expr_python.cel"
# What cel-cpp loads at run time besides itself: the protobuf runtime, which builds the
# descriptors of the rule variables (``_typecheck``) and whose message factory the compiled
# module asks for when it builds a message. cel-expr-python does not declare it, so the extra
# does (pyproject.toml): each is imported with the backend, so that an install without it is the
# backend missing, never an ImportError half way through loading a policy.
RUNTIME_MODULES = (
    "google.protobuf.descriptor_pb2",
    "google.protobuf.descriptor_pool",
    "google.protobuf.message_factory",
    "google.protobuf.struct_pb2",
    "google.protobuf.wrappers_pb2",
)


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
    """``cel_expr_python.cel``, imported the first time a native backend is built, with every
    module of :data:`RUNTIME_MODULES`; :class:`BackendUnavailableError` naming the extra (and
    the module) when one of them is missing."""
    for name in (_MODULE, *RUNTIME_MODULES):
        try:
            importlib.import_module(name)
        except ImportError as exc:
            missing = "cel-expr-python" if name == _MODULE else "protobuf"
            message = (
                f"the native CEL backend needs {missing}: pip install "
                f"'prunewarden[{NATIVE_EXTRA}]' ({exc})"
            )
            raise BackendUnavailableError(message, missing=missing) from None
    return importlib.import_module(_MODULE)


def runtime_module(name: str) -> Any:
    """One of :data:`RUNTIME_MODULES`, imported (with the backend) by :func:`cel_module`."""
    if name not in RUNTIME_MODULES:
        message = f"{name} is not a module of the native CEL backend's runtime"
        raise ValueError(message)
    cel_module()
    return importlib.import_module(name)
