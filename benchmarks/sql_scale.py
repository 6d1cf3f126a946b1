"""``audit sql`` over one version 3 pass record of 10k to 100k verdicts: time per verdict flat.

    python -m benchmarks.sql_scale [--sizes 10000,30000,100000] [--repeat 3]

Each size writes a log whose last record is one eviction pass of that many verdicts, its columns
those of a real pass (``Engine.authorize_evictions`` over a window with every kind of verdict:
authorized, pinned, waiting on another segment's score, without a perturbed score) repeated over
segment ids of 200 characters (a 100,000-verdict pass is a 21 MB line), sealed as the log seals
it. A pass of 100,000 segments takes seconds to decide; only its record is made bigger. Then it
runs the report as one ``GROUP BY`` over the ``decisions`` view (every column of a verdict built:
outcome, reasons, actions with their dependencies) through ``prunewarden.audit.sql``, against
DuckDB reading the same records without the view (``records``: the part no view can avoid).
Targets: the time per verdict at the largest size within twice that at the smallest (linear), and
100,000 verdicts counted in at most 10 s.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from prunewarden import AuditLog, Engine
from prunewarden.audit import seal
from prunewarden.review import sql

SIZES = (10_000, 30_000, 100_000)
LINEAR_FACTOR = 2.0
TARGET_VERDICTS, TARGET_SECONDS = 100_000, 10.0
ID_CHARACTERS = 200
REPORT = (
    'SELECT "check", outcome, reason, count(decision_id) AS decisions, count(actions) AS actions,'
    " max(segment_id) AS last FROM decisions GROUP BY ALL ORDER BY ALL"
)
READ = "SELECT count(*), sum(len(segments)), max(len(allowed)) FROM records"


def _item(segment_id: str, **fields: Any) -> dict[str, Any]:
    segment = {"id": segment_id, "kind": fields.pop("kind", "turn"), "text": "t"}
    segment.update(tombstone_written=True, **fields)
    return {"segment": segment, "score": 0.1, "perturbed_score": 0.11}


def real_pass(path: Path) -> dict[str, Any]:
    """Log one real eviction pass with every kind of verdict; its record, unsealed."""
    items = [
        _item("a"),
        _item("b", kind="constraint"),
        _item("c", score_dependencies=["a", "d"]),
        {**_item("d"), "perturbed_score": None},
        _item("e"),
    ]
    with AuditLog(path) as audit:
        Engine.default(audit=audit).authorize_evictions(items)
    last = json.loads(path.read_bytes().splitlines()[-1])
    return {k: v for k, v in last.items() if k not in ("hash", "prev_hash")}


def log_of(path: Path, verdicts: int) -> int:
    """A log whose last record is a pass of ``verdicts`` verdicts; the length of that line."""
    record = real_pass(path)
    pattern = len(record["segments"])
    ids = [f"{i:09d}-".ljust(ID_CHARACTERS, "x") for i in range(verdicts)]
    dependencies = record["dependencies"]
    record.update(
        segments=ids,
        reasons=[record["reasons"][i % pattern] for i in range(verdicts)],
        allowed="".join(record["allowed"][i % pattern] for i in range(verdicts)),
        dependencies={
            str(i): dependencies[str(i % pattern)]
            for i in range(verdicts)
            if str(i % pattern) in dependencies
        },
    )
    *before, _ = path.read_bytes().splitlines(keepends=True)
    line, _ = seal(record, json.loads(before[-1])["hash"], None)
    path.write_bytes(b"".join([*before, line]))
    return len(line)


def run(statement: str, path: Path) -> list[tuple[Any, ...]]:
    """The rows of ``statement`` over the log, every one fetched."""
    _, _, rows = sql(statement, [path])
    return list(rows)


def measure(path: Path, verdicts: int, repeat: int) -> tuple[float, float]:
    """The best of ``repeat`` seconds for the report over ``decisions`` and for the read."""
    best, best_read = float("inf"), float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        counted = sum(row[3] for row in run(REPORT, path))
        best = min(best, time.perf_counter() - started)
        if counted != verdicts:
            msg = f"the decisions view held {counted} of {verdicts} verdicts"
            raise AssertionError(msg)
        started = time.perf_counter()
        run(READ, path)
        best_read = min(best_read, time.perf_counter() - started)
    return best, best_read


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(str(s) for s in SIZES))
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"{'verdicts':>9}  {'record':>8}  {'audit sql':>9}  {'per verdict':>11}  {'read':>7}")
    per_verdict, seconds_at = [], {}
    with tempfile.TemporaryDirectory() as folder:
        warm = Path(folder) / "warm.jsonl"
        log_of(warm, 10)
        measure(warm, 10, 1)  # DuckDB imported and loaded before the first size is timed
        for size in sizes:
            path = Path(folder) / f"audit-{size}.jsonl"
            line_bytes = log_of(path, size)
            seconds, read_seconds = measure(path, size, args.repeat)
            per_verdict.append(seconds / size)
            seconds_at[size] = seconds
            print(
                f"{size:>9,}  {line_bytes / 1e6:>6.1f}MB  {seconds:>8.2f}s  "
                f"{seconds / size * 1e6:>8.1f} us  {read_seconds:>6.2f}s"
            )
    growth = per_verdict[-1] / per_verdict[0]
    verdict = "met" if growth <= LINEAR_FACTOR else "MISSED"
    print(
        f"time per verdict, {sizes[-1]:,} against {sizes[0]:,} verdicts: {growth:.2f}x "
        f"(linear: <= {LINEAR_FACTOR}x) {verdict}"
    )
    if TARGET_VERDICTS in seconds_at:
        seconds = seconds_at[TARGET_VERDICTS]
        verdict = "met" if seconds <= TARGET_SECONDS else "MISSED"
        print(f"{TARGET_VERDICTS:,} verdicts: {seconds:.2f}s (<= {TARGET_SECONDS:.0f} s) {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
