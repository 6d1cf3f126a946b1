"""Every bundled schema is a valid JSON Schema (2020-12): checked here once, not at every start.
Each has a stable ``$id``, the catalog lists them all, and every shipped policy and test suite
names its schema for editors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator
from prunewarden._resources import catalog, schema, schema_files

ROOT = Path(__file__).resolve().parent.parent
FILES = schema_files()
ID_BASE = "https://prunewarden.dev/schemas/"
MODELINE = re.compile(r"# yaml-language-server: \$schema=(\S+)\n")
# Written by prunewarden calibrate, which does not know where its output will live.
GENERATED = {ROOT / "examples" / "agents" / "minilm-calibrated.yaml"}


class TestBundledSchemas:
    @pytest.mark.parametrize("path", FILES, ids=[path.name for path in FILES])
    def test_each_schema_is_valid_under_the_meta_schema(self, path: Path) -> None:
        """The schema passes Draft 2020-12's meta-schema."""
        name, version = path.name.split(".")[0], int(path.name.split(".")[1][1:])
        Draft202012Validator.check_schema(schema(name, version))

    def test_a_name_gives_its_latest_version(self) -> None:
        """schema("audit-record") is version 3, the only one bundled."""
        assert schema("audit-record")["$id"].endswith("audit-record.v3.schema.json")

    @pytest.mark.parametrize(
        "name", ["audit-record", "session-state", "policy-lock", "tenants", "server-config"]
    )
    def test_one_version_of_each_format_is_bundled(self, name: str) -> None:
        """Before the first release each record, state and file format has one version."""
        assert [p.name for p in FILES if p.name.split(".")[0] == name] == [
            schema(name)["$id"].rsplit("/", 1)[1]
        ]

    @pytest.mark.parametrize("path", FILES, ids=[path.name for path in FILES])
    def test_each_schema_has_a_stable_id(self, path: Path) -> None:
        """A schema's $id is the base URL and its file name: renaming either breaks it here."""
        name, version = path.name.split(".")[0], int(path.name.split(".")[1][1:])
        assert schema(name, version)["$id"] == ID_BASE + path.name


class TestCatalog:
    def test_the_catalog_is_in_schemastore_format(self) -> None:
        """The catalog has SchemaStore's top-level fields; each entry a name, description, url."""
        document = catalog()
        assert document["$schema"] == "https://json.schemastore.org/schema-catalog.json"
        assert document["version"] == 1
        for entry in document["schemas"]:
            assert set(entry) <= {"name", "description", "fileMatch", "url", "versions"}
            assert entry["name"].startswith("prunewarden ")
            assert entry["description"]

    def test_the_catalog_lists_every_schema_at_its_latest_version(self) -> None:
        """One entry per schema: its url is the latest version's $id, older ones in versions."""
        names = sorted({path.name.split(".")[0] for path in FILES})
        urls = {entry["url"]: entry for entry in catalog()["schemas"]}
        assert sorted(urls) == sorted(schema(name)["$id"] for name in names)
        ids = {schema(p.name.split(".")[0], int(p.name.split(".")[1][1:]))["$id"] for p in FILES}
        listed = {url for entry in urls.values() for url in entry.get("versions", {}).values()}
        assert listed | set(urls) == ids
        assert [entry for entry in urls.values() if "versions" in entry] == []


def _shipped_yaml() -> list[Path]:
    """The policies and test suites shipped in policies/, examples/ and deploy/."""
    found = []
    for folder in ("policies", "examples", "deploy"):
        for path in sorted((ROOT / folder).glob("**/*.yaml")):
            documents = list(yaml.safe_load_all(path.read_text(encoding="utf-8")))
            kinds = {doc.get("kind") for doc in documents if isinstance(doc, dict)}
            if kinds & {"Policy", "TestSuite"} and path not in GENERATED:
                found.append(path)
    return found


SHIPPED = _shipped_yaml()


class TestModelines:
    def test_policies_and_suites_are_found(self) -> None:
        """The scan finds the bundled policy, its suite and the example policies."""
        names = {path.relative_to(ROOT).as_posix() for path in SHIPPED}
        assert {"policies/default.yaml", "policies/tests/default_test.yaml"} <= names
        assert "examples/policies/content-pins.yaml" in names

    @pytest.mark.parametrize("path", SHIPPED, ids=[p.relative_to(ROOT).as_posix() for p in SHIPPED])
    def test_each_names_its_schema_on_its_first_line(self, path: Path) -> None:
        """The first line is the yaml-language-server modeline, pointing at the right schema."""
        first = path.read_text(encoding="utf-8").splitlines(keepends=True)[0]
        match = MODELINE.fullmatch(first)
        assert match is not None, first
        target = (path.parent / match.group(1)).resolve()
        expected = "test-suite" if path.name.endswith("_test.yaml") else "policy"
        assert target == (ROOT / "schemas" / f"{expected}.v1.schema.json").resolve()
