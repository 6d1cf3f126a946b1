"""benchmarks/sql_scale.py: ``audit sql`` over one pass record of growing size.

Nothing here is timed (``make bench`` measures): a tiny run proves the benchmark builds the
record it says and prints the table docs/dev/benchmarks.md shows.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from prunewarden.audit import decision_rows

from benchmarks import sql_scale

DOC = Path(__file__).resolve().parents[1] / "docs" / "dev" / "benchmarks.md"


def documented_table() -> list[str]:
    """The lines of the output block docs/dev/benchmarks.md shows for the benchmark."""
    text = DOC.read_text(encoding="utf-8")
    after = text[text.index("`benchmarks/sql_scale.py` (in `make bench`)") :]
    return after.split("```\n", 2)[1].splitlines()


class TestSqlScale:
    def test_the_record_holds_every_kind_of_verdict(self, tmp_path: Path) -> None:
        """The pass record a size gets is one line of that many verdicts, allowed and refused,
        an action naming the segments a verdict waits on among them."""
        path = tmp_path / "audit.jsonl"
        line_bytes = sql_scale.log_of(path, 12)
        last = path.read_bytes().splitlines()[-1]
        assert len(last) + 1 == line_bytes
        rows = decision_rows(json.loads(last))
        assert len(rows) == 12
        assert {row["outcome"] for row in rows} == {"allow", "deny"}
        actions = [a for row in rows for a in row["actions"]]
        assert {"action": "resolve_dependencies_first", "ids": ["a", "d"]} in actions
        assert all(len(row["subject"]["segment"]["id"]) == sql_scale.ID_CHARACTERS for row in rows)

    def test_a_tiny_run_prints_the_documented_table(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Two small sizes: the header docs/dev/benchmarks.md shows, a row per size shaped like its
        rows, and the linear verdict; the 100,000-verdict target is reported only when run."""
        pytest.importorskip("duckdb")
        assert sql_scale.main(["--sizes", "30,60", "--repeat", "1"]) == 0
        printed = capsys.readouterr().out.splitlines()
        documented = documented_table()
        assert printed[0] == documented[0]
        row = re.compile(r" *[\d,]+ +[\d.]+MB +[\d.]+s +[\d.]+ us +[\d.]+s")
        assert [bool(row.fullmatch(line)) for line in printed[1:3]] == [True, True]
        assert all(row.fullmatch(line) for line in documented[1:-2])
        assert printed[3].startswith("time per verdict, 60 against 30 verdicts: ")
        assert documented[-2].startswith("time per verdict, 100,000 against 10,000 verdicts: ")
        assert documented[-1].startswith("100,000 verdicts: ")
        assert [line.rsplit(" ", 1)[1] for line in documented[-2:]] == ["met", "met"]
        assert len(printed) == 4
