"""Canonical JSON by RFC 8785: byte-identical to an independent implementation, and to Node."""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import struct
import subprocess
from collections import OrderedDict
from pathlib import Path
from typing import Any

import orjson
import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st
from prunewarden import AuditLog, Engine, load_policy
from prunewarden._json import (
    _encode_exact,
    _member_value,
    _outside_strings,
    canonical_digest,
    encode_canonical,
    format_number,
    written_alike,
)
from prunewarden.policy import _lock as lock

ROOT = Path(__file__).resolve().parent.parent
VERIFIER = ROOT / "examples" / "verify" / "jcs_verify.mjs"

# RFC 8785 Appendix B: IEEE 754 values (as bit patterns) and what JCS writes for them.
RFC_NUMBERS = [
    ("0000000000000000", "0"),
    ("8000000000000000", "0"),
    ("0000000000000001", "5e-324"),
    ("8000000000000001", "-5e-324"),
    ("7fefffffffffffff", "1.7976931348623157e+308"),
    ("ffefffffffffffff", "-1.7976931348623157e+308"),
    ("4340000000000000", "9007199254740992"),
    ("c340000000000000", "-9007199254740992"),
    ("4430000000000000", "295147905179352830000"),
    ("44b52d02c7e14af5", "9.999999999999997e+22"),
    ("44b52d02c7e14af6", "1e+23"),
    ("44b52d02c7e14af7", "1.0000000000000001e+23"),
    ("444b1ae4d6e2ef4e", "999999999999999700000"),
    ("444b1ae4d6e2ef4f", "999999999999999900000"),
    ("444b1ae4d6e2ef50", "1e+21"),
    ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
    ("3eb0c6f7a0b5ed8d", "0.000001"),
    ("41b3de4355555553", "333333333.3333332"),
    ("41b3de4355555554", "333333333.33333325"),
    ("41b3de4355555555", "333333333.3333333"),
    ("41b3de4355555556", "333333333.3333334"),
    ("41b3de4355555557", "333333333.33333343"),
    ("becbf647612f3696", "-0.0000033333333333333333"),
    ("43143ff3c1cb0959", "1424953923781206.2"),
]

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=6) | st.dictionaries(st.text(), children, max_size=6)
    ),
    max_leaves=40,
)
# What a string may hold that looks like JSON around a number, to tell strings from values
# (no quote: an escape takes another way).
PUNCTUATION = ":,[]{}.0-19a"
# Numbers at the edges where orjson and ECMAScript spell them differently.
edge_floats = st.sampled_from(
    [1.0, -0.0, 0.0, 2.0, 1e-6, 1.5e-6, 9.99e-6, 1e-7, 1e15, 1e16, 2.5e20, 1e21, 123456789.0]
)


def _from_bits(bits: str) -> float:
    return float(struct.unpack(">d", bytes.fromhex(bits))[0])


class TestNumbers:
    @pytest.mark.parametrize(("bits", "expected"), RFC_NUMBERS, ids=[b for b, _ in RFC_NUMBERS])
    def test_rfc_appendix_b_numbers(self, bits: str, expected: str) -> None:
        """Every number of RFC 8785 Appendix B is written as the RFC says, by both writers."""
        number = _from_bits(bits)
        assert format_number(number) == expected
        assert encode_canonical([number]) == f"[{expected}]".encode()

    def test_integral_floats_lose_their_point(self) -> None:
        """1.0 is written 1 and -0.0 is written 0, also inside objects and next to strings."""
        value = {"a": 1.0, "b": [-0.0, 2.0, "x.0,"], "c": 0.5}
        assert encode_canonical(value) == b'{"a":1,"b":[0,2,"x.0,"],"c":0.5}'

    @pytest.mark.parametrize(
        "value",
        [
            {"a": "x.0,", "b": 1.0, "c": "q.0]", "d": [-0.0, 10.0, -10.0], "e": "-0.0}"},
            {"a": 'say "1.0," twice', "b": [2.0, "\\", "0.0]"], "c": -0.0},
            [0.0, "a.0}b", {"x": 3.0}, '"', 4.0],
            {"k": -0.0, "": 1.0, "n": -12.0, "m": {"z": 0.0}},
            {"a": ":1.0,", "b": 2.0},
            {"a": "1.0}", "b": 2.0},
            {"a:": 1.0, "b,": -0.0, "[": 3.0, "{": 4.0},
            {"a": [1.0, -0.0], "b": 2.0},
        ],
        ids=[
            "strings",
            "escapes",
            "quote-inside",
            "member-values",
            "string-spelling-a-member",
            "string-spelling-a-number",
            "keys-ending-in-punctuation",
            "array-and-member",
        ],
    )
    def test_integral_floats_mended_outside_strings_only(self, value: Any) -> None:
        """Strings that spell an integral float are left as they are, escapes or not."""
        assert encode_canonical(value) == rfc8785.dumps(value)

    def test_exponents_as_ecmascript_writes_them(self) -> None:
        """5e-7 keeps its exponent; 1e-6 and 1e16 are written out; 1e21 is not."""
        assert encode_canonical([5e-7, 1e-6, 1e16, 1e21]) == (
            b"[5e-7,0.000001,10000000000000000,1e+21]"
        )

    def test_integers_beyond_two_to_the_53_are_doubles(self) -> None:
        """A large integer is written as JavaScript reads it: the nearest double."""
        assert encode_canonical(2**60 + 1) == b"1152921504606847000"
        assert encode_canonical(10**400) == b"null"

    def test_non_finite_numbers_are_null(self) -> None:
        """NaN and the infinities are written null, as JSON.stringify writes them."""
        assert encode_canonical([math.nan, math.inf, -math.inf]) == b"[null,null,null]"


class TestStringsAndKeys:
    def test_keys_in_utf16_order(self) -> None:
        """A key beyond the BMP sorts by its surrogates, before U+E000 (RFC 8785 3.2.3)."""
        value = {"\ue000": 1, "\U0001f600": 2, "a": 3}
        assert encode_canonical(value) == rfc8785.dumps(value)
        assert encode_canonical(value).index("😀".encode()) < encode_canonical(value).index(
            "\ue000".encode()
        )

    def test_control_characters_escaped_as_the_rfc_says(self) -> None:
        """Controls as \\b \\t \\n \\f \\r or \\u00xx; DEL, U+2028 and '/' as they are."""
        text = "".join(map(chr, range(0x20))) + '"\\/\x7f\u2028é'
        assert encode_canonical(text) == rfc8785.dumps(text)

    def test_lone_surrogates_are_escaped(self) -> None:
        """A lone surrogate is written escaped, as JSON.stringify writes it: valid UTF-8."""
        assert encode_canonical({"a": "x\ud800", "\udfff": 1}) == (b'{"a":"x\\ud800","\\udfff":1}')

    def test_subclasses_and_tuples_are_json(self) -> None:
        """An OrderedDict, a str subclass and a tuple are written as their JSON values."""

        class Name(str):
            __slots__ = ()

        value = OrderedDict([("b", (1, 2)), (Name("a"), Name("x"))])
        assert encode_canonical(value) == b'{"a":"x","b":[1,2]}'

    def test_non_json_values_are_refused(self) -> None:
        """A set, or a key that is not a string, is a TypeError."""
        with pytest.raises(TypeError):
            encode_canonical({"a": {1, 2}})
        with pytest.raises(TypeError):
            encode_canonical({1: "a"})


class TestConformance:
    @settings(max_examples=400)
    @given(json_values)
    def test_identical_to_rfc8785_package(self, value: Any) -> None:
        """Any JSON value is written byte for byte as the rfc8785 package writes it."""
        expected = rfc8785.dumps(value)
        assert encode_canonical(value) == expected
        assert _encode_exact(value) == expected

    @given(st.dictionaries(st.text(max_size=3), edge_floats | st.floats(), max_size=8))
    def test_edge_numbers_identical_to_rfc8785_package(self, value: dict[str, float]) -> None:
        """Floats at the spelling edges agree with the rfc8785 package (non-finite aside)."""
        finite = {k: v for k, v in value.items() if math.isfinite(v)}
        assert encode_canonical(finite) == rfc8785.dumps(finite)

    @settings(max_examples=300)
    @given(
        st.dictionaries(
            st.text(alphabet=PUNCTUATION, max_size=4),
            edge_floats | st.text(alphabet=PUNCTUATION, max_size=6) | st.lists(edge_floats),
            max_size=6,
        )
    )
    def test_integral_floats_beside_punctuation(self, value: dict[str, Any]) -> None:
        """Keys and strings spelled of JSON's punctuation and digits next to integral floats
        are written as the rfc8785 package writes them."""
        assert encode_canonical(value) == rfc8785.dumps(value)

    @given(json_values)
    def test_canonical_form_is_a_fixed_point(self, value: Any) -> None:
        """Reading the canonical bytes back and writing them again changes nothing."""
        encoded = encode_canonical(value)
        assert encode_canonical(json.loads(encoded)) == encoded

    def test_numbers_are_written_as_ecmascript_writes_them(self) -> None:
        """1.0 is written 1 and 5e-07 is written 5e-7, as JSON.stringify writes them."""
        assert encode_canonical([1.0, 5e-7]) == b"[1,5e-7]"


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
class TestNodeVerifier:
    def _node(self, *arguments: str) -> subprocess.CompletedProcess[str]:
        node = shutil.which("node")
        assert node is not None
        return subprocess.run(
            [node, str(VERIFIER), *arguments], capture_output=True, text=True, check=False
        )

    def test_node_recomputes_a_policy_digest(self, tmp_path: Path) -> None:
        """Node's JCS digest of a policy document equals the one Python computes."""
        policy = load_policy("builtin:default")
        document = tmp_path / "policy.json"
        document.write_text(json.dumps(policy.document), encoding="utf-8")
        result = self._node("digest", str(document))
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == canonical_digest(policy.document)

    @pytest.mark.parametrize("score", [0.5, 1.0, 5e-6], ids=["plain", "integral", "exponent"])
    def test_node_recomputes_an_input_digest_of_version_3(
        self, tmp_path: Path, score: float
    ) -> None:
        """The input digest of a staleness record (version 3: texts as their SHA-256) is what
        Node computes from the document, non-ASCII and astral texts included."""
        texts = ["caf\u00e9 \u2028 line", "\U0001f600 emoji", ""]
        spans = [
            {
                "span_id": f"s{i}",
                "text": text,
                "score": score,
                "text_sha256": hashlib.sha256(text.encode()).hexdigest(),
            }
            for i, text in enumerate(texts)
        ]
        document = {"check": "staleness", "spans": spans, "keep_top_k": 2}
        log = tmp_path / "audit.jsonl"
        Engine.default(audit=AuditLog(log)).evaluate(document)
        record = json.loads(log.read_text(encoding="utf-8").splitlines()[-1])
        assert record["input_digest_version"] == 3
        path = tmp_path / "input.json"
        path.write_text(json.dumps(document), encoding="utf-8")
        hashed = self._node("digest", str(path), "3")
        assert hashed.returncode == 0, hashed.stderr
        assert hashed.stdout.strip() == record["input_digest"]
        plain = self._node("digest", str(path))
        assert plain.stdout.strip() == canonical_digest(document) != record["input_digest"]

    def test_node_verifies_a_chain_written_by_python(self, tmp_path: Path) -> None:
        """Node recomputes every hash of a JCS-sealed chain and follows its links."""
        log = tmp_path / "audit.jsonl"
        log.write_bytes(b"".join(_chain([{"n": 1.0, "text": "é\u2028"}, {"n": 5e-7}])))
        result = self._node("chain", str(log))
        assert (result.returncode, result.stdout.strip()) == (0, "ok 2 records")

    def test_node_detects_a_changed_record(self, tmp_path: Path) -> None:
        """A record edited after it was sealed fails Node's check."""
        lines = _chain([{"n": 1}, {"n": 2}])
        log = tmp_path / "audit.jsonl"
        log.write_bytes(lines[0] + lines[1].replace(b'"n":2', b'"n":3'))
        result = self._node("chain", str(log))
        assert result.returncode == 1
        assert result.stdout.startswith("FAIL line 2: hash")


def _chain(records: list[dict[str, Any]]) -> list[bytes]:
    """Lines sealed as record_version 2 seals them: JCS body, then the hash appended."""
    previous = "sha256:" + "0" * 64
    lines = []
    for record in records:
        body = encode_canonical({**record, "record_version": 2, "prev_hash": previous})
        previous = "sha256:" + hashlib.sha256(body).hexdigest()
        lines.append(body[:-1] + b',"hash":"' + previous.encode() + b'"}\n')
    return lines


class TestIntegersAtTheEdgeOfDoubles:
    def test_integers_past_two_to_the_53_are_rounded_as_javascript_reads_them(self) -> None:
        """2**53 is the last integer every double holds; 2**53 + 1 and 2**53 + 3 are read by
        JavaScript as the nearest doubles, 2**53 and 2**53 + 4."""
        assert encode_canonical(2**53) == b"9007199254740992"
        assert encode_canonical(2**53 + 1) == b"9007199254740992"
        assert encode_canonical(-(2**53) - 1) == b"-9007199254740992"
        assert encode_canonical([2**53 + 3]) == b"[9007199254740996]"


class TestWrittenAlike:
    @pytest.mark.parametrize(
        ("floats", "alike"),
        [
            ([], True),
            ([0.5, -2.5], True),
            ([1e15 + 0.5], True),
            ([1e16], False),
            ([1e-5], True),
            ([math.nextafter(1e-5, 0.0)], False),
            ([2.0], False),
        ],
        ids=["none", "plain", "below-1e16", "at-1e16", "1e-5", "below-1e-5", "integral"],
    )
    def test_what_orjson_writes_as_rfc_8785_does(self, floats: list[float], alike: bool) -> None:
        """written_alike says True only where orjson's bytes are RFC 8785's (a caller then
        skips the scan of orjson's output): at the edges of the range it answers for, exactly."""
        assert written_alike(floats) is alike
        if alike:
            assert orjson.dumps(floats) == encode_canonical(floats)
        else:
            assert orjson.dumps(floats) != encode_canonical(floats)


class TestTheDigestVersion:
    def test_a_lock_written_now_holds_version_2_digests(self, tmp_path: Path) -> None:
        """The lock file `policy lock` writes says `digestVersion: 2` (docs/deployments.md):
        its digests are over RFC 8785, and it is read back as such."""
        path = tmp_path / "prunewarden.lock"
        lock.write(path, {"default@1.0.0": "sha256:" + "0" * 64})
        assert "\ndigestVersion: 2\n" in path.read_text(encoding="utf-8")
        assert lock.read(path).digest_version == 2


class TestTheMemberValueShortcut:
    @pytest.mark.parametrize(
        ("encoded", "answer"),
        [
            (b'{"k":1.0}', False),
            (b'{"k":12.0}', False),
            (b'{"k":-0.0}', True),
            (b'{"k":-10.0}', False),
            (b'{"a":"x","k":1.0}', False),
            (b'{"":1.0}', False),
            (b"[1.0]", None),
            (b'{"k":[1.0]}', None),
            (b"1.0", None),
            (b"-0.0", None),
            (b'{"k":"1.0"}', None),
            (b'["a",1.0]', None),
            (b'["a",":1.0"]', None),
            (b'{"k":":1.0"}', None),
            (b'[":1.0"]', None),
        ],
    )
    def test_it_answers_for_plain_member_values_only(
        self, encoded: bytes, answer: bool | None
    ) -> None:
        """Of the ``.0`` ending a number in orjson's compact output, the shortcut tells whether
        the number is -0 when it is plainly an object member's value (its key's closing quote and
        colon before it, and the key opened after ``{`` or ``,``); anything else it leaves to the
        count of quotes (None). Either way the mended output is RFC 8785's."""
        start = encoded.rindex(b".0")
        assert _member_value(encoded, start) is answer
        if answer is not None:
            assert _outside_strings(encoded, [start]) == [answer]


class TestNumbersAndTheLegacyForm:
    def test_what_no_finite_double_holds_is_null(self) -> None:
        """A NaN, an infinity, or an integer no double holds (JavaScript reads it as Infinity)
        is written null by the exact writer too."""
        assert [format_number(n) for n in (math.nan, math.inf, -math.inf)] == ["null"] * 3
        assert format_number(10**400) == "null"
        assert format_number(-(10**400)) == "null"

    def test_two_digits_with_an_exponent_keep_their_point(self) -> None:
        """A number ECMAScript writes with an exponent keeps every digit of its mantissa."""
        assert format_number(1.5e-7) == "1.5e-7"
        assert format_number(-2.5e21) == "-2.5e+21"
        assert format_number(1e-7) == "1e-7"
