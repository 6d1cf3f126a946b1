"""What one ``prunewarden hook claude-code`` run costs on a 2,000-message transcript.

    python benchmarks/hook_claude_code.py [--messages 2000] [--repeat 5]

A transcript of ``--messages`` records as Claude Code writes them (a user or assistant text, every
fifth turn a tool use and its result) is compacted with a summary; each repeat runs the hook's
``PreCompact`` (read the transcript, record the window, one audit record) and ``SessionStart``
with ``source: compact`` (judge the compaction against the recorded window, one audit record, the
repair), in this process with the package imported (the work of a run) and as a fresh
``prunewarden`` process (what the agent waits for: the interpreter's start and imports included).
CPU time: ``time.process_time`` in the process, the child's user + system time for the command.
Where a command's CPU goes is measured apart, each as a fresh process: the interpreter alone
(``python -c pass``) and ``import prunewarden``. The package's bytecode is compiled first, as an
install compiles it (a source tree run with ``PYTHONDONTWRITEBYTECODE`` would otherwise compile
every module at every start). Each figure is the median of the repeats, with
their range. The target is at most 0.15 s of CPU for each event.
"""

from __future__ import annotations

import argparse
import compileall
import io
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from unittest import mock

import prunewarden
from prunewarden.cli._main import run

TARGET_SECONDS = 0.15


def write_transcript(path: Path, messages: int) -> None:
    """``messages`` records: the task first, then texts, every fifth turn a tool use and result."""
    lines = []
    parent = None
    for i in range(messages):
        uuid = f"r{i}"
        if i == 0:
            record = {
                "type": "user",
                "message": {
                    "role": "user",
                    "content": (
                        "Fix the exporter. All timestamps must be UTC; never emit local time."
                    ),
                },
            }
        elif i % 5 == 3:
            record = {
                "type": "assistant",
                "message": {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": f"t{i}",
                            "name": "Read",
                            "input": {"file_path": f"f{i}.py"},
                        }
                    ],
                },
            }
        elif i % 5 == 4:
            record = {
                "type": "user",
                "message": {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": f"t{i - 1}",
                            "content": f"line {i}: x = {i}",
                        }
                    ],
                },
            }
        else:
            role = "assistant" if i % 2 else "user"
            record = {
                "type": role,
                "message": {"role": role, "content": f"Step {i}: checked f{i}.py."},
            }
        lines.append(
            json.dumps({**record, "uuid": uuid, "parentUuid": parent, "sessionId": "bench"})
        )
        parent = uuid
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def compact(path: Path) -> None:
    summary = {
        "type": "user",
        "uuid": "s",
        "isCompactSummary": True,
        "message": {
            "role": "user",
            "content": "The exporter is being fixed. All timestamps must be UTC; "
            "never emit local time.",
        },
    }
    boundary = {"type": "system", "subtype": "compact_boundary", "uuid": "b"}
    with path.open("a", encoding="utf-8") as stream:
        stream.write(json.dumps(boundary) + "\n" + json.dumps(summary) + "\n")


def payloads(folder: Path, transcript: Path) -> dict[str, dict[str, Any]]:
    base = {"session_id": "bench", "transcript_path": str(transcript), "cwd": str(folder)}
    return {
        "PreCompact": {**base, "hook_event_name": "PreCompact", "trigger": "auto"},
        "SessionStart": {**base, "hook_event_name": "SessionStart", "source": "compact"},
    }


def in_process(payload: dict[str, Any], audit: Path) -> float:
    argv = ["hook", "claude-code", "--audit-log", str(audit)]
    with mock.patch.object(sys, "stdin", io.StringIO(json.dumps(payload))):
        start = time.process_time()
        code = run(argv, io.StringIO(), sys.stderr)
        spent = time.process_time() - start
    if code != 0:
        raise SystemExit(f"the hook exited {code}")
    return spent


def as_process(payload: dict[str, Any], audit: Path) -> float:
    script = Path(sys.executable).with_name("prunewarden")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "prunewarden"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(  # noqa: S603
        [*command, "hook", "claude-code", "--audit-log", str(audit)],
        input=json.dumps(payload),
        text=True,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def fresh_cpu(code: str) -> float:
    """The CPU seconds of ``python -c code`` in a fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", code], check=True)  # noqa: S603
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(messages: int, repeat: int) -> dict[str, dict[str, list[float]]]:
    """The CPU seconds of each event, in process and as a command, one sample per repeat; and
    of a command's start (``start``: the interpreter, ``import prunewarden``)."""
    results: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        for n in range(repeat):
            transcript = folder / f"t{n}.jsonl"
            audit = folder / f"audit-{n}.jsonl"
            events = payloads(folder, transcript)
            for mode, measured in (("in process", in_process), ("command", as_process)):
                write_transcript(transcript, messages)
                for event in ("PreCompact", "SessionStart"):
                    if event == "SessionStart":
                        compact(transcript)
                    key = results.setdefault(event, {}).setdefault(mode, [])
                    key.append(measured(events[event], folder / f"{mode[0]}-{audit.name}"))
            start = results.setdefault("start", {})
            start.setdefault("interpreter", []).append(fresh_cpu("pass"))
            start.setdefault("import prunewarden", []).append(fresh_cpu("import prunewarden"))
    return results


def spread(samples: list[float]) -> str:
    """The median and the range of ``samples``, in milliseconds."""
    low, mid, high = min(samples), statistics.median(samples), max(samples)
    return f"{mid * 1000:.1f} ms ({low * 1000:.1f}-{high * 1000:.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    compileall.compile_dir(Path(prunewarden.__file__).parent, quiet=1)
    results = measure(args.messages, args.repeat)
    start = results.pop("start")
    for event, modes in results.items():
        work = statistics.median(modes["in process"])
        command = statistics.median(modes["command"])
        verdict = "ok" if work <= TARGET_SECONDS else "OVER"
        as_command = "ok" if command <= TARGET_SECONDS else "OVER"
        print(
            f"hook claude-code {event} on {args.messages} messages, median (range) of "
            f"{args.repeat}: {spread(modes['in process'])} CPU in process "
            f"(target {TARGET_SECONDS * 1000:.0f} ms: {verdict}), "
            f"{spread(modes['command'])} as a command ({as_command})"
        )
    print(
        f"a fresh command's start: the interpreter {spread(start['interpreter'])}, "
        f"import prunewarden {spread(start['import prunewarden'])} (interpreter included)"
    )


if __name__ == "__main__":
    main()
