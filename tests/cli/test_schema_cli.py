"""``prunewarden schema``: one bundled schema, or with ``--catalog`` the catalog of them all."""

from __future__ import annotations

import io
import json
from pathlib import Path

from prunewarden.cli._main import run
from prunewarden.errors import ExitCode

ROOT = Path(__file__).resolve().parents[2]


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


class TestSchemaCatalog:
    def test_catalog_prints_the_committed_catalog(self) -> None:
        """--catalog prints schemas/catalog.json as JSON, each entry by its schema's $id."""
        code, out, err = cli("schema", "--catalog")
        assert (code, err) == (ExitCode.OK, "")
        printed = json.loads(out)
        assert printed == json.loads((ROOT / "schemas" / "catalog.json").read_text())
        assert "https://prunewarden.dev/schemas/policy.v1.schema.json" in {
            entry["url"] for entry in printed["schemas"]
        }

    def test_a_name_and_the_catalog_together_are_a_usage_error(self) -> None:
        """Asking for both prints nothing and exits 2, saying which to give."""
        code, out, err = cli("schema", "policy", "--catalog")
        assert (code, out) == (ExitCode.USAGE, "")
        assert err == "prunewarden schema: give a schema NAME or --catalog, not both\n"

    def test_neither_a_name_nor_the_catalog_is_a_usage_error(self) -> None:
        """A bare `prunewarden schema` exits 2, naming what it needs."""
        code, out, err = cli("schema")
        assert (code, out) == (ExitCode.USAGE, "")
        assert err == "prunewarden schema: give a schema NAME, or --catalog\n"
