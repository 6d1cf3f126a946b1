"""Audit log speed, as ratios against plain references.

    python benchmarks/bench_auditlog.py [--records 1000000] [--dir DIR] [--writers 4]

Reading: generates a chained log of N decision records (real decisions, varied ids, sessions,
policies and times) and times verify, query, report and sql over it against a plain reference
(reading every line, and ``json.loads`` of every line). Writing: times Engine.evaluate with no
sink against the same with an audit file under each fsync mode. Appending: ``--writers``
processes append prepared records to one chained file at once (``fsync="batch"``, in batches of
``--batch`` records: ``AuditLog.write_batch``), against one process writing the same lines
with no lock and no chain.
"""

from __future__ import annotations

import argparse
import io
import json
import multiprocessing
import os
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prunewarden import AuditLog, Engine, parse_policy
from prunewarden.audit import seal
from prunewarden.audit._log import FsyncMode
from prunewarden.audit._record import (
    DecisionContext,
    decision_record,
    input_digest,
    policy_activated_record,
    subject_of,
)
from prunewarden.audit._review import RecordFilter, Skipped, query, report
from prunewarden.audit._verify import verify_files
from prunewarden.inputs._parse import parse_request
from prunewarden.review._sql import sql

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples" / "inputs").glob("*.json"))


class _Null:
    def info(self, *_: Any, **__: Any) -> None:
        pass


def generate(path: Path, count: int) -> None:
    """A log of ``count`` decisions under three policy versions, one day per 100k records."""
    rng = random.Random(7)
    policies = [
        parse_policy(
            "apiVersion: prunewarden/v1\nkind: Policy\n"
            f"metadata: {{name: prod-eu, version: 1.{minor}.0}}\n"
            f"spec: {{eviction: {{stability_delta: {0.2 + minor / 10}}}}}\n",
            "policies/prod-eu.yaml",
        )
        for minor in range(3)
    ]
    documents = [json.loads(p.read_text()) for p in EXAMPLES]
    templates = []
    for policy in policies:
        engine = Engine(policy, logger=_Null())
        for document in documents:
            _, request = parse_request(document, policy.spec.scores)
            decision = engine.evaluate(document)
            context = DecisionContext(input_digest(document), subject_of(request))
            templates.append((policy, decision_record(decision, context, policy)))
    start = time.mktime((2025, 11, 1, 0, 0, 0, 0, 0, 0))
    last, active = "sha256:" + "0" * 64, set()
    with path.open("wb") as out:
        for i in range(count):
            policy, template = templates[rng.randrange(len(templates))]
            if policy.digest not in active:
                line, last = seal(policy_activated_record(policy), last, None)
                out.write(line)
                active.add(policy.digest)
            record = dict(template)
            record["decision_id"] = f"{rng.getrandbits(128):032x}"
            moment = start + i * 0.864  # 100,000 records a day
            record["ts"] = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(moment)) + ".000000Z"
            record["session_id"] = f"agent-{rng.randrange(40)}"
            if "segment" in record["subject"]:
                segment = dict(record["subject"]["segment"])
                segment["id"] = "s41" if i == count // 2 else f"seg-{i}"
                record["subject"] = {"segment": segment}
            line, last = seal(record, last, None)
            out.write(line)


def timed(run: Callable[[], Any]) -> float:
    began = time.perf_counter()
    run()
    return time.perf_counter() - began


def read_lines(path: Path) -> int:
    with path.open("rb") as handle:
        return sum(1 for _ in handle)


def parse_lines(path: Path) -> int:
    with path.open("rb") as handle:
        return sum(1 for line in handle if json.loads(line))


def reading(path: Path) -> list[tuple[str, float]]:
    skipped = Skipped()
    try:
        import duckdb  # noqa: F401, PLC0415 - optional

        has_duckdb = True
    except ImportError:
        has_duckdb = False
    results = [
        ("reference: json.loads every line", timed(lambda: parse_lines(path))),
        ("read every line (no parsing)", timed(lambda: read_lines(path))),
        ("verify", timed(lambda: verify_files([path]))),
        (
            "query --subject s41 (selective)",
            timed(lambda: list(query([path], RecordFilter(subject="s41"), skipped))),
        ),
        (
            "query --outcome deny --check eviction",
            timed(
                lambda: sum(
                    1
                    for _ in query([path], RecordFilter(outcome="deny", check="eviction"), skipped)
                )
            ),
        ),
        (
            "query (every decision)",
            timed(lambda: sum(1 for _ in query([path], RecordFilter(), skipped))),
        ),
        ("report", timed(lambda: report([path], RecordFilter(), skipped))),
    ]
    if has_duckdb:
        statement = (
            'SELECT policy_version, "check", outcome, reason, count(*), min(ts), max(ts) '
            "FROM decisions GROUP BY ALL"
        )
        results.append(
            ("sql: report as GROUP BY (duckdb)", timed(lambda: list(sql(statement, [path])[2])))
        )
    return results


def writing(directory: Path, count: int) -> list[tuple[str, float]]:
    documents = [json.loads(p.read_text()) for p in EXAMPLES]

    def run(engine: Engine) -> None:
        for i in range(count):
            engine.evaluate(documents[i % len(documents)])

    results = [("reference: evaluate, no sink", timed(lambda: run(Engine.default(logger=_Null()))))]
    results.append(
        (
            "evaluate + stream sink",
            timed(lambda: run(Engine.default(audit=AuditLog(io.StringIO())))),
        )
    )
    modes: tuple[FsyncMode, ...] = ("never", "batch", "always")
    for mode in modes:
        path = directory / f"write-{mode}.jsonl"
        with AuditLog(path, fsync=mode) as audit:
            results.append(
                (f"evaluate + file, fsync {mode}", timed(lambda: run(Engine.default(audit=audit))))
            )
    return results


def _templates() -> tuple[Any, list[dict[str, Any]]]:
    policy = parse_policy(
        "apiVersion: prunewarden/v1\nkind: Policy\nmetadata: {name: prod-eu, version: 1.0.0}\n"
    )
    engine = Engine(policy, logger=_Null())
    records = []
    for document in (json.loads(p.read_text()) for p in EXAMPLES):
        _, request = parse_request(document, policy.spec.scores)
        context = DecisionContext(input_digest(document), subject_of(request))
        records.append(decision_record(engine.evaluate(document), context, policy))
    return policy, records


def _append(path: Path, batches: int, size: int, start: Any) -> None:
    policy, templates = _templates()
    batch = [dict(templates[i % len(templates)]) for i in range(size)]
    with AuditLog(path, fsync="batch") as audit:
        audit.add_policy(policy)
        start.wait()
        for _ in range(batches):
            audit.write_batch(batch)


def appending(directory: Path, writers: int, count: int, size: int) -> list[tuple[str, float]]:
    """``writers`` processes appending ``count`` records in all to one chained file."""
    batches = max(count // (writers * size), 1)
    total = batches * size * writers
    _, templates = _templates()
    lines = [
        seal(templates[i % len(templates)], "sha256:" + "0" * 64, None)[0] for i in range(size)
    ]
    plain = directory / "plain.jsonl"

    def reference() -> None:
        fd = os.open(plain, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            for _ in range(total // size):
                os.write(fd, b"".join(lines))
        finally:
            os.close(fd)

    path = directory / "append.jsonl"
    context = multiprocessing.get_context("fork")
    start = context.Barrier(writers + 1)
    processes = [
        context.Process(target=_append, args=(path, batches, size, start)) for _ in range(writers)
    ]
    for process in processes:
        process.start()
    began = time.perf_counter()
    start.wait()
    for process in processes:
        process.join()
    seconds = time.perf_counter() - began
    verified = verify_files([path])
    assert verified.ok, verified  # noqa: S101 - a benchmark of a broken chain measures nothing
    return [
        ("reference: one process, no lock, no chain", timed(reference)),
        (f"{writers} writers, chained, fsync batch, batches of {size}", seconds),
    ]


def show(title: str, results: list[tuple[str, float]], count: int) -> None:
    reference = results[0][1]
    print(f"\n{title}")
    for name, seconds in results:
        rate = count / seconds if seconds else float("inf")
        print(f"  {name:42s} {seconds:8.2f} s  {rate:>12,.0f}/s  x{seconds / reference:6.2f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--writes", type=int, default=2_000)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--appends", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--only-append", action="store_true", help="skip reading and writing")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as directory:
        results = appending(Path(directory), args.writers, args.appends, args.batch)
        batches = max(args.appends // (args.writers * args.batch), 1)
        total = batches * args.batch * args.writers
        show(f"appending {total:,} records (ratio against no lock, no chain)", results, total)
        if args.only_append:
            return
        path = Path(directory) / "audit.jsonl"
        seconds = timed(lambda: generate(path, args.records))
        size = path.stat().st_size
        print(f"generated {args.records:,} records, {size / 1e6:,.0f} MB, in {seconds:.1f} s")
        show(
            f"reading {args.records:,} records (ratio against json.loads of every line)",
            reading(path),
            args.records,
        )
        show(
            f"writing {args.writes:,} decisions (ratio against no sink)",
            writing(Path(directory), args.writes),
            args.writes,
        )


if __name__ == "__main__":
    main()
