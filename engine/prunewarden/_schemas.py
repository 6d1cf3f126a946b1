"""JSON Schema validation: a compiled yes or no for the hot path, and every problem, located
and sorted, when there is one.

Two validators read the same bundled schemas. jsonschema-rs (compiled, ~25 times faster on a
pruning pass) answers "is this valid?" on every document; python-jsonschema walks an invalid one
again to say what is wrong and where, with the messages of :func:`problems_of`. Where
jsonschema-rs has no wheel, the compiled answer falls back to python-jsonschema, chosen once at
import (:data:`COMPILED_BACKEND`).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import cache
from typing import TYPE_CHECKING, Any

try:
    import jsonschema_rs
except ImportError:  # pragma: no cover - a platform without its wheels
    jsonschema_rs = None  # type: ignore[assignment]

from prunewarden import _resources as resources
from prunewarden._files import read_regular
from prunewarden._source import Parsed, parse_yaml
from prunewarden.errors import Problem, describe_value
from prunewarden.limits import MAX_POLICY_BYTES, MAX_PROBLEMS

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError
    from referencing import Registry

# Which validator gives the compiled yes or no: "jsonschema-rs", or "jsonschema" without it.
COMPILED_BACKEND = "jsonschema" if jsonschema_rs is None else "jsonschema-rs"
IsValid = Callable[[Any], bool]


@cache
def validator(
    name: str, definition: str | None = None, version: int | None = None
) -> Draft202012Validator:
    """A validator that reports every problem, for a bundled schema (its latest version, or
    ``version``), or for one of its ``$defs`` when ``definition`` names it."""
    return _validator_class()(schema_of(name, definition, version), registry=_bundled())


@cache
def schema_of(
    name: str, definition: str | None = None, version: int | None = None
) -> dict[str, Any]:
    """A bundled schema (its latest version, or ``version``), or one of its ``$defs`` as a
    schema of its own. The bundled schemas are checked against the meta-schema by the tests
    (``tests/test_schemas.py``), not at every start: that took 0.4 s per schema, a third of a
    short replay's wall time."""
    schema = resources.schema(name, version)
    if definition is not None:
        schema = {"$defs": schema["$defs"], "$ref": f"#/$defs/{definition}"}
    return schema


def compile_schema(schema: Mapping[str, Any], backend: str | None = None) -> IsValid:
    """A fast "is this valid?" for ``schema`` (self-contained: its references are local).
    ``backend`` defaults to :data:`COMPILED_BACKEND`; a value the compiled validator cannot
    read (a Python type JSON has no name for) is not valid."""
    if (backend or COMPILED_BACKEND) == "jsonschema" or jsonschema_rs is None:
        return _validator_class()(schema).is_valid
    compiled = jsonschema_rs.Draft202012Validator(dict(schema))

    def is_valid(instance: Any) -> bool:
        try:
            return compiled.is_valid(instance)
        except ValueError:
            return False

    return is_valid


@cache
def _validator_class() -> type[Draft202012Validator]:
    """Draft 2020-12 where a tuple is a JSON array, as json.dumps and jsonschema-rs read it: both
    validators agree on it.

    python-jsonschema (with referencing, attrs, rpds) is imported here, when a document is first
    walked for its problems or a schema compiled without jsonschema-rs, rather than with this
    module: it takes a large share of ``import prunewarden`` and most programs never need it
    (docs/architecture.md, "Import cost"). Not to dodge a cycle: nothing of prunewarden is below.
    """
    from jsonschema import Draft202012Validator, validators  # noqa: PLC0415 - see the docstring

    extended: type[Draft202012Validator] = validators.extend(  # type: ignore[no-untyped-call]
        Draft202012Validator,
        type_checker=Draft202012Validator.TYPE_CHECKER.redefine(
            "array", lambda _checker, instance: isinstance(instance, list | tuple)
        ),
    )
    return extended


@cache
def _bundled() -> Registry:
    """Every bundled schema under its ``$id``, so one may ``$ref`` another's definitions (a trace
    line's segments and spans are the input document's)."""
    # Imported on first use, with python-jsonschema (see _validator_class).
    from referencing import Registry, Resource  # noqa: PLC0415 - see _validator_class

    schemas = [
        resources.schema(path.name.split(".")[0], int(path.name.split(".")[1][1:]))
        for path in resources.schema_files()
    ]
    return Registry().with_resources(
        (schema["$id"], Resource.from_contents(schema)) for schema in schemas
    )


def schema_problems(name: str, parsed: Parsed, definition: str | None = None) -> list[Problem]:
    """Every way ``parsed.data`` fails the schema ``name`` (or its ``$defs`` entry
    ``definition``), each pointing at the culprit; at most
    :data:`~prunewarden.limits.MAX_PROBLEMS` of them.

    The compiled validator answers first: a valid document (most of them) is not walked again,
    so python-jsonschema loads only to locate the problems of one that is not. Both read the
    same schema; a value the compiled one cannot read is walked as if invalid."""
    is_valid = _compiled(name, definition)
    if is_valid is not None and is_valid(parsed.data):
        return []
    return problems_of(validator(name, definition).iter_errors(parsed.data), parsed)


@cache
def _compiled(name: str, definition: str | None) -> IsValid | None:
    """The compiled yes or no for a bundled schema, where jsonschema-rs reads it alone (its
    references local); None where only python-jsonschema can."""
    schema = schema_of(name, definition)
    if jsonschema_rs is None or _refers_out(schema):
        return None
    return compile_schema(schema)


def _refers_out(value: Any) -> bool:
    """Whether ``value`` (a schema) holds a ``$ref`` to another document."""
    if isinstance(value, dict):
        ref = value.get("$ref")
        if isinstance(ref, str) and not ref.startswith("#"):
            return True
        return any(_refers_out(v) for v in value.values())
    if isinstance(value, list):
        return any(_refers_out(v) for v in value)
    return False


def read_yaml_file(path: str | os.PathLike[str], name: str) -> tuple[Parsed | None, list[Problem]]:
    """The YAML file at ``path`` (a regular file no larger than a policy may be) parsed and
    checked against the schema ``name``: the document, or None when it cannot be read, and
    every located problem."""
    shown = str(path)
    try:
        text = read_regular(path, MAX_POLICY_BYTES).decode("utf-8")
    except OSError as exc:
        return None, [Problem(shown, 0, 0, "$", f"cannot read: {exc.strerror}")]
    except UnicodeDecodeError as exc:
        return None, [Problem(shown, 0, 0, "$", f"not UTF-8 text (byte {exc.start})")]
    parsed, problems = parse_yaml(text, shown)
    if parsed.built:
        problems += schema_problems(name, parsed)
    return parsed, problems


def problems_of(errors: Iterable[ValidationError], parsed: Parsed) -> list[Problem]:
    """Schema errors as located problems (capped as :func:`capped` says)."""
    return capped((p for error in errors for p in _to_problems(error, parsed)), parsed.filename)


def capped(problems: Iterable[Problem], filename: str) -> list[Problem]:
    """The first :data:`~prunewarden.limits.MAX_PROBLEMS` problems, and a note if there were
    more: a document with a million bad values is reported in the time a hundred take."""
    shown = list(itertools.islice(problems, MAX_PROBLEMS + 1))
    if len(shown) > MAX_PROBLEMS:
        note = f"more problems not shown: at most {MAX_PROBLEMS} are reported"
        shown[MAX_PROBLEMS:] = [Problem(filename, 0, 0, "$", note)]
    return shown


def _leaves(error: ValidationError) -> list[ValidationError]:
    # The useful message of an if/then or anyOf branch is in its deepest errors. When every
    # alternative of an anyOf only failed on its type, one message naming the types is clearer.
    if _field_choice(error) is not None:
        return [error]
    if not error.context:
        return [error]
    if error.validator in ("anyOf", "oneOf") and all(
        e.validator == "type" and e.absolute_path == error.absolute_path for e in error.context
    ):
        types = " or ".join(repr(e.validator_value) for e in error.context)
        error.message = f"{describe_value(error.instance)} is not of type {types}"
        return [error]
    return [leaf for child in error.context for leaf in _leaves(child)]


def _field_choice(error: ValidationError) -> list[str] | None:
    """The fields of a ``oneOf`` whose every branch only requires fields (exactly one of them
    must be given), else None."""
    branches = error.validator_value
    if error.validator != "oneOf" or not isinstance(error.instance, dict):
        return None
    if not isinstance(branches, list):
        return None
    if not all(isinstance(b, dict) and set(b) == {"required"} for b in branches):
        return None
    return [name for branch in branches for name in branch["required"]]


def _choice_problem(
    error: ValidationError, fields: list[str], path: tuple[Any, ...], parsed: Parsed
) -> Problem:
    """'free_tokens' and 'keep_top_k' conflict (at the later one), or: one of them is needed."""
    instance: dict[str, Any] = error.instance if isinstance(error.instance, dict) else {}
    given = [name for name in instance if name in fields]
    named = " or ".join(repr(name) for name in fields)
    if len(given) > 1:
        conflict = " and ".join(repr(name) for name in given)
        message = f"{conflict} conflict: give only one of {named}"
        return parsed.problem((*path, given[-1]), message, at_key=True)
    return parsed.problem(path, f"one of {named} is required")


def _to_problems(error: ValidationError, parsed: Parsed) -> Iterator[Problem]:
    for leaf in _leaves(error):
        path = tuple(leaf.absolute_path)
        if (fields := _field_choice(leaf)) is not None:
            yield _choice_problem(leaf, fields, path, parsed)
            continue
        if leaf.validator == "additionalProperties" and isinstance(leaf.instance, dict):
            allowed = leaf.schema.get("properties", {}) if isinstance(leaf.schema, dict) else {}
            for key in leaf.instance:
                if key not in allowed:
                    names = ", ".join(sorted(allowed))
                    message = f"unknown field {key!r} (expected one of: {names})"
                    yield parsed.problem((*path, key), message, at_key=True)
            continue
        yield parsed.problem(path, _message(leaf))


def _message(error: ValidationError) -> str:
    if error.validator == "const":
        return f"{describe_value(error.instance)} should be {error.validator_value!r}"
    if error.validator == "pattern":
        hint = error.schema.get("description", "") if isinstance(error.schema, dict) else ""
        short = hint.split(":")[0] if hint else f"match {error.validator_value!r}"
        return f"{describe_value(error.instance)} is not valid here: {short}"
    if (limit := _limit_message(error)) is not None:
        return limit
    # jsonschema quotes the whole value; a long one is cut to a line.
    quoted = repr(error.instance)
    if len(quoted) > 80 and error.message.startswith(quoted):
        return describe_value(error.instance) + error.message[len(quoted) :]
    return error.message


def _limit_message(error: ValidationError) -> str | None:
    """Size limits (prunewarden.limits) named as limits, without quoting the oversized value."""
    limit, instance = error.validator_value, error.instance
    if not isinstance(instance, str | list | dict):
        return None
    if error.validator == "maxItems":
        return f"{len(instance)} items, more than the limit of {limit}"
    if error.validator == "maxProperties":
        return f"{len(instance)} entries, more than the limit of {limit}"
    if error.validator == "maxLength":
        return (
            f"{describe_value(instance)} is {len(instance)} characters long, more than the "
            f"limit of {limit}"
        )
    if error.validator == "uniqueItems" and isinstance(instance, list):
        return _duplicate_message(instance)
    return None


def _duplicate_message(items: list[Any]) -> str | None:
    seen: set[tuple[bool, Any]] = set()
    for item in items:
        key = (isinstance(item, bool), item)  # 1 and True differ, as in jsonschema
        try:
            if key in seen:
                return f"{describe_value(item)} is listed more than once"
            seen.add(key)
        except TypeError:  # unhashable: keep jsonschema's message
            return None
    return None


def apply_defaults(
    schema: dict[str, Any], instance: Any, root: dict[str, Any] | None = None
) -> Any:
    """Fill every omitted property that has a ``default`` in the schema, recursively.

    The schema is the single source of the defaults, so editors, docs and the engine agree.
    """
    root = root if root is not None else schema
    schema = _resolve(schema, root)
    if not isinstance(instance, dict):
        return instance
    filled = dict(instance)
    for key, sub in schema.get("properties", {}).items():
        sub_schema = _resolve(sub, root)
        if key not in filled and "default" in sub_schema:
            filled[key] = _copy(sub_schema["default"])
        if key in filled:
            filled[key] = apply_defaults(sub_schema, filled[key], root)
    return filled


def inline_refs(node: Any, root: Mapping[str, Any]) -> Any:
    """``node`` with every local ``$ref`` replaced by what it points at (the schemas have no
    recursive references), for code that reads a schema as a shape."""
    if isinstance(node, Mapping):
        ref = node.get("$ref")
        if isinstance(ref, str):
            target: Any = root
            for part in ref.removeprefix("#/").split("/"):
                target = target[part]
            merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
            return inline_refs(merged, root)
        return {key: inline_refs(value, root) for key, value in node.items()}
    if isinstance(node, list):
        return [inline_refs(value, root) for value in node]
    return node


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if not ref:
        return schema
    target: Any = root
    for part in ref.removeprefix("#/").split("/"):
        target = target[part]
    return {**target, **{k: v for k, v in schema.items() if k != "$ref"}}


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def plan_schema(decision: dict[str, Any]) -> dict[str, Any]:
    """The plan as ``prunewarden plan`` prints it, each decision as ``decision`` says (a
    ``$ref`` to ``decision.v1`` where it can be fetched, or to a copy inlined beside it)."""
    ids = {"type": "array", "items": {"type": "string"}}
    return {
        "type": "object",
        "description": "What a pruning pass may do, as `prunewarden plan` prints it",
        "required": [
            "evict",
            "tombstones",
            "pinned",
            "unscoreable",
            "recompute",
            "frozen",
            "target_met",
            "freed_tokens",
            "decisions",
        ],
        "properties": {
            "evict": ids,
            "tombstones": ids,
            "pinned": ids,
            "unscoreable": ids,
            "recompute": ids,
            "frozen": {"type": "boolean"},
            "target_met": {"type": "boolean"},
            "freed_tokens": {"type": "integer"},
            "decisions": {"type": "array", "items": decision},
        },
    }
