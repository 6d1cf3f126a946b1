"""Text rendered for a terminal shows control characters escaped, never interprets them."""

from __future__ import annotations

import io
import json
from pathlib import Path

from prunewarden.cli._main import run
from prunewarden.cli._printable import printable

CLEAR_SCREEN = "\x1b[2J"
HOSTILE_ID = f"s41{CLEAR_SCREEN}\x07\u202egnp.exe\nfake: ALLOW"


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def hostile_eviction(tmp_path: Path) -> Path:
    document = {
        "check": "eviction",
        "segment": {"id": HOSTILE_ID, "kind": "turn", "tombstone_written": True},
        "score": 0.08,
        "perturbed_score": 0.5,
        "eviction_candidates": [HOSTILE_ID],
    }
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(document))
    return path


def assert_no_controls(text: str) -> None:
    """Only the newlines ending lines; no escape, bell, bidi override or forged line."""
    assert not [c for c in text if (ord(c) < 0x20 and c != "\n") or 0x7F <= ord(c) <= 0x9F]
    assert "\u202e" not in text
    assert "\nfake: ALLOW" not in text


class TestPrintable:
    def test_controls_are_spelled_as_escapes(self) -> None:
        """ESC, BEL, DEL, C1, bidi overrides and newlines become visible escapes."""
        assert printable("a\x1b[2Jb\x07\x7f\x9b\u202ec\nd") == (
            "a\\x1b[2Jb\\x07\\x7f\\x9b\\u202ec\\x0ad"
        )

    def test_ordinary_text_is_unchanged(self) -> None:
        """Letters, accents, CJK and emoji print as they are."""
        assert printable("café 日本 🙂 turn-3") == "café 日本 🙂 turn-3"


class TestRendering:
    def test_evaluate_text_escapes_a_hostile_id(self, tmp_path: Path) -> None:
        """evaluate --format text prints the id's escape sequences escaped."""
        code, out, _ = cli(
            "evaluate", "--format", "text", "--audit-log", str(tmp_path / "a.jsonl"),
            str(hostile_eviction(tmp_path)),
        )  # fmt: skip
        assert code == 1
        assert_no_controls(out)
        assert "\\x1b[2J" in out

    def test_audit_query_escapes_a_hostile_id(self, tmp_path: Path) -> None:
        """audit query's table prints logged ids escaped; its JSON stays exact."""
        log = tmp_path / "a.jsonl"
        cli("evaluate", "--audit-log", str(log), str(hostile_eviction(tmp_path)))
        code, out, _ = cli("audit", "query", str(log))
        assert code == 0
        assert_no_controls(out)
        assert "\\x1b[2J" in out
        code, out, _ = cli("audit", "query", "--format", "json", str(log))
        assert json.loads(out.splitlines()[-1])["subject"]["segment"]["id"] == HOSTILE_ID
