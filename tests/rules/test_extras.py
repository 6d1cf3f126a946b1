"""The extra that brings a rules backend brings everything the backend imports: ``cel-native``
alone loads and evaluates a policy with a rule on either backend, and a module missing from it
is a usage error naming the extra (exit 2), never an internal error."""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import io
import json
import subprocess
import sys
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from _support.wheels import (
    ROOT,
    build_wheel,
    distribution_name,
    install_wheel,
    isolated_environment,
)
from packaging.requirements import Requirement
from prunewarden.cli import run
from prunewarden.rules import _backend as backend_module
from prunewarden.rules import _typecheck

# Each extra that brings a rules backend, and every module that backend imports.
BACKEND_EXTRAS = {
    backend_module.NATIVE_EXTRA: (backend_module._MODULE, *backend_module.RUNTIME_MODULES),
}
RULE_POLICY = (
    "apiVersion: prunewarden/v1\nkind: Policy\nmetadata: {name: rules, version: 1.0.0}\n"
    "spec:\n  rules:\n    - name: rules-stay\n      check: eviction\n      effect: deny\n"
    '      when: segment.kind == "constraint" && score < {floor}\n      message: rules stay\n'
)
DOCUMENT = ROOT / "examples" / "inputs" / "eviction-utc-constraint.json"


def _declared(extra: str) -> list[str]:
    """What pyproject.toml makes ``pip install 'prunewarden[extra]'`` install: the package's
    dependencies and the extra's."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return [*project["dependencies"], *project["optional-dependencies"][extra]]


def _closure(requirements: list[str]) -> set[str]:
    """The distributions ``requirements`` install, with what each of them declares in turn (as
    installed here), markers evaluated for this interpreter."""
    found: set[str] = set()
    pending = [Requirement(r) for r in requirements]
    while pending:
        requirement = pending.pop()
        name = distribution_name(requirement.name)
        if name in found or (requirement.marker and not requirement.marker.evaluate()):
            continue
        found.add(name)
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for text in requires:
            nested = Requirement(text)
            if nested.marker is None or nested.marker.evaluate({"extra": ""}):
                pending.append(nested)
    return found


@functools.cache
def _distributions_of() -> Mapping[str, list[str]]:
    """Top-level module -> the installed distributions providing it (read once: it walks every
    distribution's file list)."""
    return importlib.metadata.packages_distributions()


def _providers(module: str) -> set[str]:
    """The installed distributions whose files hold ``module``."""
    spec = importlib.util.find_spec(module)
    assert spec is not None, module
    assert spec.origin is not None, module
    origin = Path(spec.origin).resolve()
    top = module.split(".", maxsplit=1)[0]
    candidates = _distributions_of().get(top, [])
    return {
        distribution_name(name)
        for name in candidates
        if any(
            Path(str(importlib.metadata.distribution(name).locate_file(f))).resolve() == origin
            for f in importlib.metadata.files(name) or ()
        )
    }


class TestDeclared:
    @pytest.mark.parametrize(
        ("extra", "module"), [(e, m) for e, ms in BACKEND_EXTRAS.items() for m in ms]
    )
    def test_the_extra_installs_every_module_its_backend_imports(
        self, extra: str, module: str
    ) -> None:
        """Each module the backend imports comes from a distribution the extra installs (itself
        or through what it requires): cel-expr-python imports protobuf without declaring it."""
        providers = _providers(module)
        assert providers, f"{module} comes from no installed distribution"
        assert providers & _closure(_declared(extra)), (
            f"{module} (from {sorted(providers)}) is not installed by prunewarden[{extra}]"
        )


@pytest.fixture
def without_protobuf(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """As if cel-expr-python were installed without the protobuf runtime it loads."""
    backend_module.cel_module.cache_clear()
    _typecheck._environment.cache_clear()
    for module in backend_module.RUNTIME_MODULES:
        monkeypatch.setitem(sys.modules, module, None)
    yield
    backend_module.cel_module.cache_clear()
    _typecheck._environment.cache_clear()


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return run(list(argv), out, err), out.getvalue(), err.getvalue()


@pytest.mark.usefixtures("without_protobuf")
class TestHalfInstalled:
    def test_the_native_backend_is_missing_naming_the_extra(self) -> None:
        """The backend without protobuf is unavailable, naming protobuf and the extra."""
        with pytest.raises(backend_module.BackendUnavailableError) as caught:
            backend_module.cel_module()
        assert caught.value.missing == "protobuf"
        assert "pip install 'prunewarden[cel-native]'" in str(caught.value)

    def test_evaluate_is_a_usage_error_not_an_internal_one(self, tmp_path: Path) -> None:
        """evaluate of a policy with a rule on the native backend (--cel or PRUNEWARDEN_CEL):
        exit 2 naming the extra, nothing decided; validate on cel-python loads it (exit 0),
        without cel-cpp's type check, as where the extra is not installed."""
        policy = tmp_path / "rules.yaml"
        policy.write_text(RULE_POLICY.replace("{floor}", "0.125"), encoding="utf-8")
        log = str(tmp_path / "audit.jsonl")
        code, out, err = _cli(
            "evaluate",
            "--policy",
            str(policy),
            "--cel",
            "native",
            "--audit-log",
            log,
            str(DOCUMENT),
        )
        assert (code, out) == (2, "")
        assert "needs protobuf: pip install 'prunewarden[cel-native]'" in err
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("PRUNEWARDEN_CEL", "native")
            code, out, err = _cli(
                "evaluate", "--policy", str(policy), "--audit-log", log, str(DOCUMENT)
            )
        assert (code, out) == (2, "")
        assert err.startswith("prunewarden: the native CEL backend needs protobuf")
        code, out, err = _cli("validate", str(policy))
        assert code == 0, err


@pytest.fixture(scope="module")
def installed_extra(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding the wheel with the cel-native extra, nothing else."""
    work = tmp_path_factory.mktemp("cel-native")
    return install_wheel(build_wheel(work), work / "venv", backend_module.NATIVE_EXTRA)


@pytest.mark.slow
class TestExtraAlone:
    @pytest.mark.parametrize("backend", ["python", "native"])
    def test_a_policy_with_a_rule_loads_and_decides(
        self, installed_extra: Path, tmp_path: Path, backend: str
    ) -> None:
        """pip install 'prunewarden[cel-native]' alone: validate and evaluate a policy with a
        rule, on either backend (cel-cpp's type check runs at load on both)."""
        policy = tmp_path / "rules.yaml"
        policy.write_text(RULE_POLICY.replace("{floor}", "0.5"), encoding="utf-8")
        command = str(installed_extra / "prunewarden")
        validate = subprocess.run(
            [command, "validate", str(policy)],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            check=False,
            env=isolated_environment(),
        )
        assert validate.returncode == 0, validate.stderr
        evaluate = subprocess.run(
            [command, "evaluate", "--policy", str(policy), "--cel", backend, str(DOCUMENT)],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            check=False,
            env=isolated_environment(),
        )
        assert evaluate.returncode == 1, evaluate.stderr
        decision = json.loads(evaluate.stdout)
        assert [r["code"] for r in decision["reasons"]] == ["pinned", "rule:rules-stay"]
