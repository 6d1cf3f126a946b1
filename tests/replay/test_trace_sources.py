"""Traces from anywhere fsspec reads, gzip- and zstd-compressed: the same decisions as the plain
local file, with the local guarantees kept (regular files only, bounded lines)."""

from __future__ import annotations

import gzip
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path

import fsspec
import pytest
import zstandard
from _support.blocking import call_guarded, make_fifo, run_bounded
from prunewarden.cli._main import run
from prunewarden.errors import InputError
from prunewarden.limits import (
    DECOMPRESSION_RATIO_GRACE_BYTES,
    MAX_DECOMPRESSED_BYTES,
    MAX_DECOMPRESSION_RATIO,
    MAX_TRACE_FILES,
    MAX_TRACE_LINE_BYTES,
)
from prunewarden.replay import _sources, expand_traces
from prunewarden.replay._trace import check_trace

ROOT = Path(__file__).resolve().parents[2]
HEALTHY = ROOT / "examples" / "traces" / "healthy-session.jsonl"
NARROWING = ROOT / "examples" / "traces" / "collapse-narrowing.jsonl"
HEADER = b'{"type": "session", "trace_version": 1, "session_id": "s"}\n'
# The grace before the ratio is held, lowered so that a bomb of a few MiB shows what one of
# gigabytes would do.
SMALL_GRACE = 1024 * 1024
NOT_REGULAR = "cannot read: {}, not a regular file: only regular files are read"


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


def zstd_bomb(size: int) -> bytes:
    """A trace header, then ``size`` zero bytes on one line: zstd shrinks it about 8000 times."""
    writer = zstandard.ZstdCompressor(level=3).compressobj()
    parts = [writer.compress(HEADER)]
    parts += [writer.compress(b"\0" * (1024 * 1024)) for _ in range(size // (1024 * 1024))]
    return b"".join([*parts, writer.flush()])


def decompressed(message: str) -> int:
    """The bytes a ratio refusal says were decompressed."""
    found = re.search(r"MAX_DECOMPRESSION_RATIO: (\d+) bytes from", message)
    assert found is not None, message
    return int(found[1])


class TestDecompressionBounds:
    def test_a_gzip_bomb_stops_at_its_ratio(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A .gz of one endless line (1000:1) is refused once it has decompressed past the grace
        at more than MAX_DECOMPRESSION_RATIO, not decompressed to its end to be skipped: a
        located problem naming the file, the line and the limit, exit 2."""
        monkeypatch.setattr(_sources, "DECOMPRESSION_RATIO_GRACE_BYTES", SMALL_GRACE)
        bomb = tmp_path / "bomb.jsonl.gz"
        bomb.write_bytes(gzip.compress(HEADER + b" " * (32 * SMALL_GRACE), compresslevel=9))
        code, _, err = cli("replay", str(bomb))
        assert code == 2
        prefix = f"{bomb}:2:1: $: cannot read: decompresses to more than "
        assert err.startswith(f"{prefix}{MAX_DECOMPRESSION_RATIO} times its compressed size")
        # gzip reads its input 8 KiB ahead of what it has decompressed: 4 MiB more at 500:1.
        assert decompressed(err) < 16 * SMALL_GRACE  # of the 32 MiB the bomb holds

    def test_a_zstd_bomb_through_fsspec_stops_at_its_ratio(
        self, memory: fsspec.AbstractFileSystem, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A remote .zst bomb (16 KB ran 135 s) is held to the same ratio as a local one."""
        monkeypatch.setattr(_sources, "DECOMPRESSION_RATIO_GRACE_BYTES", SMALL_GRACE)
        memory.pipe("/fleet/bomb.jsonl.zst", zstd_bomb(64 * SMALL_GRACE))
        (problem,) = check_trace("memory://fleet/bomb.jsonl.zst")
        assert (problem.file, problem.line, problem.path) == (
            "memory://fleet/bomb.jsonl.zst",
            2,
            "$",
        )
        assert "(MAX_DECOMPRESSION_RATIO: " in problem.message
        assert decompressed(problem.message) < 2 * SMALL_GRACE

    def test_output_past_the_byte_limit_is_refused_after_the_events_before_it(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A trace that compresses as any trace does is still read no further than
        MAX_DECOMPRESSED_BYTES: the events before the limit count, then a located problem."""
        monkeypatch.setattr(_sources, "MAX_DECOMPRESSED_BYTES", 16 * 1024)
        trace = tmp_path / "t.jsonl.zst"
        trace.write_bytes(zstandard.ZstdCompressor().compress(HEALTHY.read_bytes()))
        code, out, err = cli("replay", str(trace), "--format", "json")
        assert code == 2
        assert re.fullmatch(
            rf"{re.escape(str(trace))}:\d+:1: \$: cannot read: decompresses to more than 16384 "
            r"bytes \(MAX_DECOMPRESSED_BYTES\); refused\n",
            err,
        )
        assert json.loads(out)["traces"][0]["events"] > 0

    def test_the_limits_leave_room_for_real_traces(self) -> None:
        """JSON Lines compress 5 to 50 times; the limits sit far above that."""
        data = HEALTHY.read_bytes() * 50
        level19 = zstandard.ZstdCompressor(level=19).compress(data)
        assert len(data) / len(level19) < MAX_DECOMPRESSION_RATIO
        assert DECOMPRESSION_RATIO_GRACE_BYTES >= MAX_TRACE_LINE_BYTES
        assert MAX_DECOMPRESSED_BYTES >= 1024**3


class TestRemoteNamesAreFiles:
    def test_a_file_url_to_a_fifo_is_refused_without_blocking(self, tmp_path: Path) -> None:
        """file:// names go through the regular-file check as local names do: a FIFO is
        refused, not waited on."""
        fifo = make_fifo(tmp_path / "t.jsonl")
        problems = call_guarded(lambda: check_trace(f"file://{fifo}"), fifo)
        assert [p.message for p in problems] == [NOT_REGULAR.format("a FIFO")]

    def test_a_file_url_to_a_device_is_refused_unread(self) -> None:
        """file:///dev/zero is refused at once (in a child with a timeout and a memory cap:
        reading it would never end)."""
        code = (
            "import sys; from prunewarden.replay._trace import check_trace; "
            "print([p.message for p in check_trace(sys.argv[1])])"
        )
        done = run_bounded(code, "file:///dev/zero")
        assert done.returncode == 0, done.stderr
        assert done.stdout == f"[{NOT_REGULAR.format('a character device')!r}]\n"

    def test_a_chained_url_reaching_a_fifo_is_refused(self, tmp_path: Path) -> None:
        """Any other fsspec store must say the name is a file before it is opened: a cache
        chained over file:// reaches the FIFO's kind instead of copying from it."""
        fifo = make_fifo(tmp_path / "t.jsonl")
        problems = call_guarded(lambda: check_trace(f"simplecache::file://{fifo}"), fifo)
        assert [p.message for p in problems] == [NOT_REGULAR.format("a FIFO")]

    def test_a_remote_directory_is_refused(self, memory: fsspec.AbstractFileSystem) -> None:
        """A name a store lists as a directory is not opened as a trace."""
        memory.pipe("/fleet/day/a.jsonl", HEALTHY.read_bytes())
        problems = check_trace("memory://fleet/day")
        assert [p.message for p in problems] == [NOT_REGULAR.format("a directory")]
