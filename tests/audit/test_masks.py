"""Default input masks: derived from the input schema, so no field that holds text is logged."""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from prunewarden import AuditLog, Engine
from prunewarden._resources import schema
from prunewarden.audit import DEFAULT_MASKS
from prunewarden.audit._redaction import text_pointers

INPUT = schema("input")


def document_types() -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Each document an engine logs as input: the three checks and the plan."""
    for name in ("collapse", "eviction", "staleness", "plan"):
        yield name, INPUT["$defs"][name]


def fields(node: Mapping[str, Any], path: str = "") -> Iterator[tuple[str, str, Mapping[str, Any]]]:
    """(pointer, field name, schema) of every field reachable from ``node``."""
    if "$ref" in node:
        yield from fields(INPUT["$defs"][node["$ref"].rsplit("/", 1)[1]], path)
    for branch in node.get("anyOf", ()):
        yield from fields(branch, path)
    for name, child in node.get("properties", {}).items():
        yield f"{path}/{name}", name, child
        yield from fields(child, f"{path}/{name}")
    if isinstance(node.get("items"), Mapping):
        yield from fields(node["items"], f"{path}/*")
    if isinstance(node.get("additionalProperties"), Mapping):
        yield from fields(node["additionalProperties"], f"{path}/*")


def holds_text(name: str, field: Mapping[str, Any]) -> bool:
    """A field holds text when it is named for it (not a hash of it), or it is free-form."""
    if name == "text" or (name.endswith("text") and not name.endswith("_sha256")):
        return True
    free_form = "properties" not in field and "additionalProperties" not in field
    return field.get("type") == "object" and free_form


class TestDerivedMasks:
    def test_every_text_field_of_every_document_type_is_masked(self) -> None:
        """Walking input.v1, every field that holds text has a default mask."""
        text_fields = {
            (kind, pointer)
            for kind, node in document_types()
            for pointer, name, field in fields(node)
            if holds_text(name, field)
        }
        assert {pointer for _, pointer in text_fields} >= {"/segment/text", "/segments/*/text"}
        unmasked = sorted(item for item in text_fields if item[1] not in DEFAULT_MASKS)
        assert unmasked == []

    def test_a_new_text_field_is_masked_without_a_code_change(self) -> None:
        """An unbounded string added to a document type is masked by default."""
        changed = copy.deepcopy(INPUT)
        changed["$defs"]["turn"]["properties"]["note"] = {"type": "string"}
        assert "/turns/*/note" in text_pointers(changed)
        assert "/turns/*/note" not in DEFAULT_MASKS

    def test_ids_kinds_and_hashes_stay_logged(self) -> None:
        """Bounded strings (ids, kinds, hashes) are not masked: a record stays reviewable."""
        assert not {"/segment/id", "/segment/kind", "/spans/*/text_sha256"} & set(DEFAULT_MASKS)


class TestPlanInputs:
    def test_a_logged_plan_carries_no_segment_text(self, tmp_path: Path) -> None:
        """plan with inputs logged: the window's text and metadata are erased from every record."""
        private = "the launch code is 0000"
        digest = hashlib.sha256(private.encode()).hexdigest()
        segment = {"kind": "turn", "text": private, "tokens": 5, "text_sha256": digest}
        window = [
            {**segment, "id": f"s{i}", "score": i / 4, "metadata": {"note": private}}
            for i in range(3)
        ]
        log_path = tmp_path / "audit.jsonl"
        with AuditLog(log_path, inputs=True) as audit:
            Engine.default(audit=audit).plan({"segments": window, "free_tokens": 5})
        text = log_path.read_text()
        assert private not in text
        logged = [json.loads(line) for line in text.splitlines()][1:]
        assert [r["kind"] for r in logged] == ["pass"]
        assert [v["check"] for v in logged[0]["verdicts"]][:2] == ["staleness", "eviction"]
        assert "/segments/0/text" in logged[0]["input_erased"]
        assert "/segments/0/metadata" in logged[0]["input_erased"]
