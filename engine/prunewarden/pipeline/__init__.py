"""A policy compiled into one check pipeline per guard: the guard, then the policy's rules,
then the mode; and shadow policies evaluated beside the active one.
"""

from __future__ import annotations

from prunewarden.pipeline._columns import ColumnarEviction, PassResult, columnar_eviction
from prunewarden.pipeline._compile import Pipeline, compile_policy
from prunewarden.pipeline._shadow import Shadow

__all__ = [
    "ColumnarEviction",
    "PassResult",
    "Pipeline",
    "Shadow",
    "columnar_eviction",
    "compile_policy",
]
