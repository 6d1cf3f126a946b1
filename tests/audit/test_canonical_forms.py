"""The bytes a record's hash covers (version 1's canonical form, RFC 8785 after it) and which
lines are records."""

from __future__ import annotations

import json

import pytest
from prunewarden.audit._chain import canonical_record, parse_record, sealed_form


class TestVersionOneCanonicalForm:
    def test_sorted_keys_no_spaces_ascii_only(self) -> None:
        """Version 1's form sorts keys, has no spaces and escapes any non-ASCII text."""
        body = canonical_record({"b": 1, "a": "caf\u00e9", "c": [1, 2]})
        assert body == b'{"a":"caf\\u00e9","b":1,"c":[1,2]}'

    def test_nan_is_refused(self) -> None:
        """A NaN has no canonical form: it is refused, not written as a bare token."""
        with pytest.raises(ValueError, match="JSON compliant"):
            canonical_record({"x": float("nan")})

    def test_a_record_is_sealed_in_rfc_8785(self) -> None:
        """A record is hashed over RFC 8785: non-ASCII text as UTF-8, not escaped."""
        record = {"record_version": 2, "text": "caf\u00e9"}
        assert sealed_form(record) == '{"record_version":2,"text":"caf\u00e9"}'.encode()


class TestWhichLinesAreRecords:
    def test_an_object_with_a_hash_is_a_record(self) -> None:
        """A JSON object with a string `hash` is a record."""
        line = json.dumps({"a": 1, "hash": "sha256:" + "0" * 64}).encode()
        assert parse_record(line) == {"a": 1, "hash": "sha256:" + "0" * 64}

    def test_an_object_without_a_hash_is_not(self) -> None:
        """An object without `hash` is not a record."""
        assert parse_record(b'{"a": 1}') is None

    def test_a_hash_that_is_not_text_is_not(self) -> None:
        """An object whose `hash` is not a string is not a record."""
        assert parse_record(b'{"hash": 7}') is None

    def test_a_list_is_not(self) -> None:
        """A JSON array, even of a record, is not a record."""
        assert parse_record(b'[{"hash": "sha256:00"}]') is None

    def test_a_torn_line_is_not(self) -> None:
        """A line cut short is not a record."""
        assert parse_record(b'{"hash": "sha2') is None
