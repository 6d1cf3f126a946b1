"""One long-lived audit writer in a process of its own, whose file size limit (RLIMIT_FSIZE) the
steps move, for the full-disk tests: the OS cuts a write exactly where the limit says.

    python diskwriter.py LOG FSYNC [--key-env NAME] [--max-bytes N] STEP...

Steps, run in order by one ``Engine`` on one ``AuditLog``:

- ``decide``: one eviction decision; prints its reason codes;
- ``pass``: one pass of five evictions (one record); prints the codes of its decisions;
- ``room:N``: from now on the log may grow by N bytes only (the rest of the write is refused);
- ``limit:N``: from now on no file may grow past N bytes;
- ``unlimited``: space is back;
- ``open``: ``AuditLog.open()``; prints ``ok`` or the error;
- ``copy:PATH``: copy the log as it is now to PATH.

Prints one JSON list with the outcome of each step that has one.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import signal
from pathlib import Path
from typing import Any

from prunewarden import AuditError, AuditLog, Engine


def eviction(segment_id: str) -> dict[str, Any]:
    return {
        "segment": {"id": segment_id, "kind": "turn", "tombstone_written": True},
        "score": 0.08,
        "perturbed_score": 0.1,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("log", type=Path)
    parser.add_argument("fsync")
    parser.add_argument("--key-env")
    parser.add_argument("--max-bytes", type=int)
    parser.add_argument("steps", nargs="+")
    args = parser.parse_args()
    # Past the limit the kernel sends SIGXFSZ; ignored, the write fails with EFBIG instead.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    rotation = {} if args.max_bytes is None else {"max_bytes": args.max_bytes}
    audit = AuditLog(args.log, fsync=args.fsync, hmac_key_env=args.key_env, **rotation)
    engine = Engine.default(audit=audit)
    outcomes: list[Any] = []
    for number, step in enumerate(args.steps):
        name, _, argument = step.partition(":")
        if name == "decide":
            decision = engine.evaluate({"check": "eviction", **eviction(f"d{number}")})
            outcomes.append(list(decision.codes))
        elif name == "pass":
            decisions = engine.authorize_evictions([eviction(f"p{number}-{i}") for i in range(5)])
            outcomes.append(sorted({code for d in decisions for code in d.codes}))
        elif name == "room":
            limit = args.log.stat().st_size + int(argument)
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
        elif name == "limit":
            resource.setrlimit(resource.RLIMIT_FSIZE, (int(argument), resource.RLIM_INFINITY))
        elif name == "unlimited":
            resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY,) * 2)
        elif name == "open":
            try:
                audit.open()
                outcomes.append("ok")
            except AuditError as exc:
                outcomes.append(str(exc))
        elif name == "copy":
            shutil.copyfile(args.log, argument)
        else:
            raise SystemExit(f"unknown step {step!r}")
    audit.close()
    print(json.dumps(outcomes))  # noqa: T201


if __name__ == "__main__":
    main()
