"""The ``prunewarden`` command: one table of commands, thin over the library.

``run(argv, stdout, stderr)`` does the work and returns the exit code, so tests call it in
process; ``main()`` only calls it and exits. The only package that imports ``argparse``.
"""

from __future__ import annotations

from prunewarden.cli._main import main, run

__all__ = ["main", "run"]
