"""Runs one step of the Makefile: one line saying what it does, its progress while it runs,
and how long it took, instead of minutes of silence.

    python tools/progress.py --log .venv/pip.log "installing the test extras" -- pip install ...

The command's output is kept in a log (``--log``); its lines that show progress (pip's
``Collecting`` and ``Installing``, a count of the rest) update the step's one line on a
terminal, or give a line every 30 s elsewhere. When the command fails, the end of its output is
shown and its exit status returned. Standard library only: it runs before the venv has anything.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections import deque
from pathlib import Path
from typing import TextIO

#: On a log that is not a terminal, the longest silence between two progress lines.
QUIET_SECONDS = 30.0
TAIL_LINES = 40


class Line:
    """The step's progress line: rewritten in place on a terminal, printed now and then
    elsewhere."""

    def __init__(self, label: str, out: TextIO) -> None:
        self.label = label
        self.out = out
        self.tty = out.isatty()
        self.started = time.monotonic()
        self.last_shown = self.started
        self.collected = 0
        self.lines = 0
        self.phase = "starting"

    def see(self, text: str) -> None:
        self.lines += 1
        if text.startswith(("Collecting ", "Processing ")):  # from an index, or a local wheel
            self.collected += 1
            self.phase = f"{self.collected} packages collected"
        elif text.startswith("Installing collected packages"):
            self.phase = f"installing {self.collected} packages"
        elif text.startswith(("Building", "Preparing")):
            self.phase = text.split(" ", 1)[0].lower() + " " + text.split(" ", 1)[-1][:40]
        now = time.monotonic()
        if self.tty:
            self.out.write(f"\r\033[K    {self.phase} ({now - self.started:.0f} s)")
            self.out.flush()
        elif now - self.last_shown >= QUIET_SECONDS:
            self.out.write(f"    ... {self.phase} ({now - self.started:.0f} s)\n")
            self.out.flush()
            self.last_shown = now

    def done(self, status: int) -> None:
        elapsed = time.monotonic() - self.started
        verdict = "done" if status == 0 else f"failed (exit {status})"
        clear = "\r\033[K" if self.tty else ""
        self.out.write(f"{clear}    {verdict} in {elapsed:.0f} s\n")
        self.out.flush()


def run(label: str, command: list[str], log: Path, out: TextIO) -> int:
    out.write(f"==> {label}\n")
    out.flush()
    line = Line(label, out)
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    with log.open("w", encoding="utf-8") as kept:
        process = subprocess.Popen(  # noqa: S603 - the Makefile's own commands
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},  # pip's lines as they come, not in blocks
        )
        assert process.stdout is not None  # noqa: S101 - stdout=PIPE above
        for text in process.stdout:
            kept.write(text)
            tail.append(text)
            line.see(text.strip())
        status = process.wait()
    line.done(status)
    if status != 0:
        out.write(f"    the last lines of its output ({log} has all of it):\n")
        out.writelines(f"    | {text}" for text in tail)
        out.flush()
    return status


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        usage="progress.py [--log FILE] LABEL -- COMMAND...", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("label")
    parser.add_argument("--log", type=Path, default=Path("step.log"))
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        parser.error("no command after --")
    cut = argv.index("--")
    args = parser.parse_args(argv[:cut])
    return run(args.label, argv[cut + 1 :], args.log, sys.stdout)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
