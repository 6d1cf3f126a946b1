"""Traces from anywhere fsspec reads, gzip- and zstd-compressed: the same decisions as the plain
local file, with the local guarantees kept (regular files only, bounded lines)."""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Iterator
from pathlib import Path

import fsspec
import pytest
import zstandard
from _support.blocking import call_guarded, make_fifo
from prunewarden.cli._main import run
from prunewarden.errors import InputError
from prunewarden.limits import MAX_TRACE_FILES, MAX_TRACE_LINE_BYTES
from prunewarden.replay import _sources, expand_traces
from prunewarden.replay._trace import check_trace

ROOT = Path(__file__).resolve().parents[2]
HEALTHY = ROOT / "examples" / "traces" / "healthy-session.jsonl"
NARROWING = ROOT / "examples" / "traces" / "collapse-narrowing.jsonl"


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def report(*traces: str) -> dict[str, object]:
    code, out, err = cli("replay", *traces, "--format", "json")
    assert (code, err) == (0, "")
    document: dict[str, object] = json.loads(out)
    return document


def counts(document: dict[str, object]) -> list[tuple[object, ...]]:
    traces = document["traces"]
    assert isinstance(traces, list)
    return [(t["session_id"], t["decisions"], t["outcomes"], t["first_halt"]) for t in traces]


@pytest.fixture
def memory() -> Iterator[fsspec.AbstractFileSystem]:
    """fsspec's memory filesystem, emptied after the test."""
    filesystem = fsspec.filesystem("memory")
    yield filesystem
    filesystem.rm("/fleet", recursive=True)


class TestCompressedTraces:
    def test_gzip_and_zstd_decide_as_the_plain_file(self, tmp_path: Path) -> None:
        """A .gz and a .zst copy of a trace replay to the plain file's decisions."""
        data = NARROWING.read_bytes()
        gz, zst = tmp_path / "t.jsonl.gz", tmp_path / "t.jsonl.zst"
        gz.write_bytes(gzip.compress(data))
        zst.write_bytes(zstandard.ZstdCompressor().compress(data))
        plain = counts(report(str(NARROWING)))
        assert counts(report(str(gz))) == plain
        assert counts(report(str(zst))) == plain

    def test_a_compressed_line_over_the_limit_is_refused_unheld(self, tmp_path: Path) -> None:
        """A line that decompresses past the limit is a located problem, read a bounded piece at
        a time (a decompression bomb ends at its first long line)."""
        header = b'{"type": "session", "trace_version": 1, "session_id": "s"}\n'
        bomb = tmp_path / "bomb.jsonl.gz"
        bomb.write_bytes(gzip.compress(header + b" " * (MAX_TRACE_LINE_BYTES + 1) + b"\n"))
        problems = check_trace(str(bomb))
        assert [(p.line, p.message) for p in problems] == [
            (2, f"line is longer than the limit of {MAX_TRACE_LINE_BYTES} bytes")
        ]

    def test_a_fifo_named_like_a_gzip_trace_is_refused_unread(self, tmp_path: Path) -> None:
        """The regular-file check comes before decompression: a FIFO is refused, not waited on."""
        fifo = make_fifo(tmp_path / "t.jsonl.gz")
        problems = call_guarded(lambda: check_trace(str(fifo)), fifo)
        assert [p.message for p in problems] == [
            "cannot read: a FIFO, not a regular file: only regular files are read"
        ]

    def test_a_corrupt_gzip_trace_stops_that_trace(self, tmp_path: Path) -> None:
        """Bytes that are not gzip are reported for that trace (exit 2), not a traceback."""
        broken = tmp_path / "t.jsonl.gz"
        broken.write_bytes(b"not gzip at all\n")
        code, out, err = cli("replay", str(broken), str(HEALTHY))
        assert code == 2
        assert err.startswith(f"{broken}:1:1: $: cannot read: cannot decompress: ")
        assert "healthy-session" in out

    def test_a_truncated_zstd_trace_keeps_the_events_before_the_cut(self, tmp_path: Path) -> None:
        """A .zst cut short replays what it held, then reports where it ended (exit 2)."""
        writer = zstandard.ZstdCompressor().compressobj()
        blocks = [
            writer.compress(line) + writer.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
            for line in NARROWING.read_bytes().splitlines(keepends=True)
        ]
        data = b"".join(blocks) + writer.flush()
        cut = tmp_path / "t.jsonl.zst"
        cut.write_bytes(data[: len(data) // 2])
        code, out, err = cli("replay", str(cut), "--format", "json")
        assert code == 2
        assert "cannot read: cannot decompress: " in err
        assert json.loads(out)["traces"][0]["events"] > 0


class TestRemoteTraces:
    def test_a_memory_glob_replays_its_traces_in_name_order(
        self, memory: fsspec.AbstractFileSystem
    ) -> None:
        """memory://fleet/2026-11-*/*.jsonl.gz names every match, sorted, each decided as the
        local file is."""
        memory.pipe("/fleet/2026-11-02/b.jsonl.gz", gzip.compress(HEALTHY.read_bytes()))
        memory.pipe("/fleet/2026-11-01/a.jsonl.gz", gzip.compress(NARROWING.read_bytes()))
        memory.pipe("/fleet/2026-12-01/c.jsonl.gz", gzip.compress(HEALTHY.read_bytes()))
        found = report("memory://fleet/2026-11-*/*.jsonl.gz")
        assert counts(found) == counts(report(str(NARROWING), str(HEALTHY)))
        traces = found["traces"]
        assert isinstance(traces, list)
        assert [t["trace"] for t in traces] == [
            "memory:///fleet/2026-11-01/a.jsonl.gz",
            "memory:///fleet/2026-11-02/b.jsonl.gz",
        ]

    def test_a_local_file_url_reads_as_the_path(self) -> None:
        """file:// URLs go through fsspec's local filesystem to the same decisions."""
        assert counts(report(f"file://{NARROWING}")) == counts(report(str(NARROWING)))

    def test_a_glob_matching_nothing_is_a_located_usage_error(self) -> None:
        """A remote pattern that matches no trace exits 2 with the pattern named."""
        code, _, err = cli("replay", "memory://nowhere/*.jsonl")
        assert code == 2
        assert err == "memory://nowhere/*.jsonl: $: no trace matches this pattern\n"

    def test_a_missing_remote_trace_is_a_located_problem(self) -> None:
        """A remote name that does not exist is reported for that trace; the others replay."""
        code, out, err = cli("replay", "memory://fleet/absent.jsonl", str(HEALTHY))
        assert code == 2
        assert err == "memory://fleet/absent.jsonl: $: cannot read: no such file\n"
        assert "healthy-session" in out

    def test_too_many_matches_are_refused_before_reading(
        self, memory: fsspec.AbstractFileSystem, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A glob past the limit of traces is refused whole."""
        monkeypatch.setattr(_sources, "MAX_TRACE_FILES", 1)
        memory.pipe("/fleet/a.jsonl", b"")
        memory.pipe("/fleet/b.jsonl", b"")
        with pytest.raises(InputError, match="more than 1 traces match"):
            expand_traces(["memory://fleet/*.jsonl"])
        assert MAX_TRACE_FILES >= 100_000

    def test_local_names_are_left_to_the_shell(self) -> None:
        """A local name is passed on as given, even with glob characters in it."""
        assert expand_traces(["a*.jsonl", "b.jsonl"]) == ["a*.jsonl", "b.jsonl"]
