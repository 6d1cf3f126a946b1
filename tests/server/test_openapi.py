"""The OpenAPI document: committed as served, true to the routes, and the server true to it.

schemathesis generates requests from ``/openapi.json`` (valid and invalid, a bounded number per
operation) against a real server with a token, and checks every answer: never a 5xx, a status
and a content type the document declares, a body its schema admits. The document refers to the
bundled JSON Schemas by ``$id``; they are resolved from the package, never fetched.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from _support.server import Server, running_server
from hypothesis import HealthCheck, given, settings
from prunewarden import _resources
from prunewarden.server import Listen, ServerConfig, build_app, openapi_document
from schemathesis.checks import not_a_server_error
from schemathesis.core.jsonschema import resolver
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)
from starlette.routing import Route

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "schemas" / "openapi.v1.json"
SCHEMA_BASE = "https://prunewarden.dev/schemas/"
TOKEN = "test-token-for-schemathesis"  # noqa: S105 - the test server's own token
# Examples per operation: enough to reach every branch of a body's schema, few enough for CI.
EXAMPLES = 25

# Valid by the schema is not always valid: scores must also lie in the policy's range, and ids
# be unique (input.v1 says so), so "schema-valid data accepted" is not checked.
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    negative_data_rejection,
]


def bundled(uri: str) -> Any:
    """A $ref target by $id, from the package (the test never reaches the network)."""
    assert uri.startswith(SCHEMA_BASE), uri
    return _resources.schema(uri[len(SCHEMA_BASE) :].split(".", maxsplit=1)[0])


@pytest.fixture(scope="module")
def secured(policy_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(policy_file, tmp_path_factory.mktemp("openapi"), token=TOKEN) as running:
        yield running


class TestDocument:
    def test_committed_document_is_what_the_server_serves(self, secured: Server) -> None:
        """schemas/openapi.v1.json equals GET /openapi.json (regenerate: serve --print-openapi)."""
        with secured.client(TOKEN) as http:
            served = http.get("/openapi.json").json()
        assert json.loads(COMMITTED.read_text(encoding="utf-8")) == served
        assert served == openapi_document()

    def test_every_route_is_described(self, policy_file: Path, tmp_path: Path) -> None:
        """The document's operations are the app's routes (less the document and metrics)."""
        config = ServerConfig(str(policy_file), str(tmp_path / "audit.jsonl"), Listen())
        built = build_app(config)
        try:
            routes = {
                (method.lower(), route.path)
                for route in built.app.routes
                if isinstance(route, Route)
                for method in route.methods or ()
                if method != "HEAD"
            }
        finally:
            built.close()
        described = {(method, path) for method, path in _operations()}
        assert routes - {("get", "/openapi.json"), ("get", "/metrics")} == described

    def test_refs_point_into_the_bundled_schemas(self) -> None:
        """Every external $ref names a bundled schema by $id and a definition it has."""
        refs = [r for r in _refs(openapi_document()) if not r.startswith("#")]
        assert refs
        for ref in refs:
            target, _, pointer = ref.partition("#")
            node = bundled(target)
            for part in pointer.strip("/").split("/") if pointer else []:
                node = node[part]
            assert isinstance(node, dict)


class TestConformance:
    def test_generated_requests_get_conforming_answers(self, secured: Server) -> None:
        """No operation answers 5xx or outside its description, for bounded generated input."""
        headers = {"Authorization": f"Bearer {TOKEN}"}
        original = resolver.load_remote_uri
        resolver.load_remote_uri = bundled
        try:
            schema = schemathesis.openapi.from_url(f"{secured.url}/openapi.json", headers=headers)
            operations = [result.ok() for result in schema.get_all_operations()]  # type: ignore[union-attr]
            assert len(operations) == len(_operations())
            for operation in operations:
                _exercise(operation, secured.url, headers)
        finally:
            resolver.load_remote_uri = original


def _exercise(operation: Any, url: str, headers: dict[str, str]) -> None:
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy())
    def run(case: Any) -> None:
        response = case.call(base_url=url, headers=headers, timeout=30)
        case.validate_response(response, checks=CHECKS)

    run()


def _operations() -> list[tuple[str, str]]:
    paths = openapi_document()["paths"]
    return [(method, path) for path, item in paths.items() for method in item]


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            yield node["$ref"]
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)
