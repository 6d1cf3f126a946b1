"""Runs a page's Python blocks in order in one namespace: ``python -m _support.doc_runner``
with a JSON list of sources on stdin (prelude, blocks, epilogue).

A block may ``await`` at top level, as an asyncio REPL or notebook allows; it then runs in its
own event loop. A failing source stops the run with its traceback, named ``<source N>``.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import json
import sys


def main() -> None:
    """Execute the sources read from stdin."""
    sources: list[str] = json.load(sys.stdin)
    namespace: dict[str, object] = {"__name__": "__main__"}
    for index, source in enumerate(sources):
        code = compile(source, f"<source {index}>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        result = eval(code, namespace)  # noqa: S307 - the documentation's own code
        if inspect.iscoroutine(result):
            asyncio.run(result)


if __name__ == "__main__":
    main()
