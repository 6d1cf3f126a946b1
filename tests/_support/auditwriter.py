"""A separate process that makes decisions into an audit log, for the concurrency tests.

    python auditwriter.py LOG SESSION COUNT [--max-bytes N] [--fsync MODE]
        [--then forever | stall | limit]

After COUNT decisions: ``forever`` keeps deciding until killed; ``stall`` makes the next write
stop halfway (it writes half the record, prints ``stalled`` and sleeps, waiting for ``kill -9``);
``limit`` caps the process's file size a few bytes past the log's end (RLIMIT_FSIZE) so the next
write fails partway, and prints that decision's reason codes.
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import sys
import time
from pathlib import Path
from typing import Any

from prunewarden import AuditLog, Engine


def eviction(segment_id: str) -> dict[str, Any]:
    return {
        "check": "eviction",
        "segment": {"id": segment_id, "kind": "turn", "tombstone_written": True},
        "score": 0.08,
        "perturbed_score": 0.1,
        "eviction_candidates": [segment_id],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("log")
    parser.add_argument("session")
    parser.add_argument("count", type=int)
    parser.add_argument("--max-bytes", type=int, default=None)
    parser.add_argument("--fsync", default="batch")
    parser.add_argument("--then", choices=["forever", "stall", "limit"])
    args = parser.parse_args()
    audit = AuditLog(args.log, fsync=args.fsync, max_bytes=args.max_bytes)
    engine = Engine.default(audit=audit)
    for i in range(args.count):
        decision = engine.evaluate(eviction(f"{args.session}-{i}"), session_id=args.session)
        if decision.codes != ("authorized",):
            sys.exit(f"unexpected decision {decision.codes}")
    if args.then == "forever":
        i = args.count
        while True:
            engine.evaluate(eviction(f"{args.session}-{i}"), session_id=args.session)
            i += 1
    elif args.then == "stall":
        stall_next_write()
        engine.evaluate(eviction(f"{args.session}-stalled"), session_id=args.session)
    elif args.then == "limit":
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        size = Path(args.log).stat().st_size
        resource.setrlimit(resource.RLIMIT_FSIZE, (size + 40, resource.RLIM_INFINITY))
        decision = engine.evaluate(eviction(f"{args.session}-limited"), session_id=args.session)
        print(",".join(decision.codes), flush=True)  # noqa: T201
    audit.close()


def stall_next_write() -> None:
    """Write half of the next record, then wait to be killed mid-write."""
    real_write = os.write

    def half_then_wait(fd: int, data: Any) -> int:
        real_write(fd, bytes(data)[: len(data) // 2])
        print("stalled", flush=True)  # noqa: T201
        time.sleep(60)
        return 0

    os.write = half_then_wait


if __name__ == "__main__":
    main()
