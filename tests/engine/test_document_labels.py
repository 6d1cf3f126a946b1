"""Every decision document accepts a ``labels`` object, and its decision's record carries it."""

from __future__ import annotations

import hashlib
import io
import json
from typing import Any

import pytest
from prunewarden import Engine
from prunewarden.audit import AuditLog
from prunewarden.errors import InputError

LABELS = {"deployment": "prod-eu", "team": "search"}
X_SHA256 = hashlib.sha256(b"x").hexdigest()

DOCUMENTS: dict[str, dict[str, Any]] = {
    "collapse": {
        "check": "collapse",
        "history": [{"cycle": 1, "scores": {"a": 0.9, "b": 0.2}, "pinned": ["a"]}],
    },
    "eviction": {
        "check": "eviction",
        "segment": {"id": "s1", "kind": "turn", "tokens": 10},
        "score": 0.1,
        "perturbed_score": 0.1,
    },
    "staleness": {
        "check": "staleness",
        "spans": [{"span_id": "p1", "text": "x", "score": 0.5, "text_sha256": X_SHA256}],
        "keep_top_k": 1,
    },
    "transition": {
        "check": "transition",
        "before": [{"id": "a", "kind": "turn", "text": "hello"}],
        "after": [{"id": "a", "kind": "turn", "text": "hello"}],
    },
}


def records(stream: io.StringIO) -> list[dict[str, Any]]:
    """The decision records of a log (not the policy's own)."""
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    return [record for record in lines if "check" in record]


class TestDocumentLabels:
    @pytest.mark.parametrize("check", sorted(DOCUMENTS))
    def test_a_documents_labels_reach_its_record(self, check: str) -> None:
        """A document of every check takes ``labels``; its decision's record carries them."""
        stream = io.StringIO()
        engine = Engine.default(audit=AuditLog(stream))
        engine.evaluate({**DOCUMENTS[check], "labels": LABELS})
        (record,) = records(stream)
        assert record["labels"] == LABELS
        assert record["check"] == check

    @pytest.mark.parametrize("check", sorted(DOCUMENTS))
    def test_the_callers_labels_win_over_the_documents(self, check: str) -> None:
        """``labels=`` given to the call replaces the document's own, as for a session id."""
        stream = io.StringIO()
        engine = Engine.default(audit=AuditLog(stream))
        engine.evaluate({**DOCUMENTS[check], "labels": LABELS}, labels={"deployment": "x"})
        (record,) = records(stream)
        assert record["labels"] == {"deployment": "x"}

    @pytest.mark.parametrize("check", sorted(DOCUMENTS))
    def test_a_label_value_that_is_not_a_string_is_located(self, check: str) -> None:
        """A label's value must be a string: refused at ``$.labels.<key>``."""
        engine = Engine.default()
        with pytest.raises(InputError) as caught:
            engine.evaluate({**DOCUMENTS[check], "labels": {"deployment": 3}})
        assert [p.path for p in caught.value.problems] == ["$.labels.deployment"]
