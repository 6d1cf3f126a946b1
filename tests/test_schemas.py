"""Every bundled schema is a valid JSON Schema (2020-12): checked here once, not at every start."""

from __future__ import annotations

from pathlib import Path

import pytest
from jsonschema import Draft202012Validator
from prunewarden._resources import schema, schema_files

FILES = schema_files()


class TestBundledSchemas:
    @pytest.mark.parametrize("path", FILES, ids=[path.name for path in FILES])
    def test_each_schema_is_valid_under_the_meta_schema(self, path: Path) -> None:
        """The schema passes Draft 2020-12's meta-schema."""
        name, version = path.name.split(".")[0], int(path.name.split(".")[1][1:])
        Draft202012Validator.check_schema(schema(name, version))

    def test_a_name_gives_its_latest_version(self) -> None:
        """schema("audit-record") is version 2; version 1 stays readable by number."""
        assert schema("audit-record")["$id"].endswith("audit-record.v2.schema.json")
        assert schema("audit-record", 1)["$id"].endswith("audit-record.v1.schema.json")
