"""Canonical JSON and the digests computed over it, and the paths of a JSON value.

The canonical form is :func:`encode_canonical`, RFC 8785, the JSON Canonicalization Scheme
(JCS): keys sorted by UTF-16 code units, numbers written as ECMAScript writes them (``1`` not
``1.0``, ``5e-7`` not ``5e-07``), strings escaped as little as JSON allows. Any language with a
JCS library can recompute a digest over it, so policy digests (digest version 2), input digests
and record hashes use it.

JCS runs on every decision, so it must be fast. orjson writes the same bytes as JCS for every
string and for the numbers most documents hold; what it writes differently is detected on its
output with substring tests and mended there (integral floats: ``1.0``) or handed to the exact
writer below (exponents ECMAScript writes out, keys beyond the Basic Multilingual Plane, integers
beyond 2**53, lone surrogates, subclasses of JSON types). ``tests/test_json.py`` checks both
against the independent ``rfc8785`` package and its published vectors.

Two choices where RFC 8785 refuses a value, both as ECMAScript's ``JSON.stringify`` (on which JCS
is defined) makes them: a non-finite number is written ``null``, and a lone surrogate (which JSON
text may spell, ``"\\ud800"``) is written escaped, ``\\ud800``, so that a document holding one is
still decided, digested and logged as valid UTF-8.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterator, Mapping
from typing import Any

import orjson

# A location in a JSON value: keys and list indexes from the root.
JsonPath = tuple[str | int, ...]

# The digest version of policy digests, recorded in lock files: 2, over RFC 8785. Version 1
# (Python's json with sorted keys) was written before the first release and is no longer read.
DIGEST_VERSION = 2
RETIRED_DIGEST_VERSION = 1

_ORJSON_OPTIONS = (
    orjson.OPT_SORT_KEYS
    | orjson.OPT_STRICT_INTEGER
    | orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
)
# Exponents orjson writes where ECMAScript writes the number out: 1e-6 .. 9.99e-6 and 1e16 ..
# 9.99e20 (orjson writes a positive exponent with its sign). What also matches inside a string
# only sends the document to the exact writer, which is slower, not wrong.
# Two searches, each for a literal, which the regex engine finds with a fast scan: one pattern
# with an alternation would test every "e" of every text.
_POSITIVE_EXPONENT = re.compile(rb"e\+")
_SMALL_EXPONENT = re.compile(rb"e-6(?![0-9])")
# A JSON string in orjson's output, and what ends a number.
_STRING = re.compile(rb'("[^"\\]*(?:\\.[^"\\]*)*")')
_INTEGRAL_FLOAT = re.compile(rb"\.0(?=[,\]}\x00]|$)")
_NEGATIVE_ZERO = re.compile(rb"(?:(?<=[:,\[\x00])|^)-0(?=[,\]}\x00]|$)")
_SAFE_INTEGER = 2**53
_DIGITS = b"0123456789"
_KEY_END = 3  # the fewest bytes before a member's value that show its key: '"":' at least
# The options canonical_from expects orjson's output to be written with: a caller that runs orjson
# over a value anyway (the input screen of prunewarden.inputs) hands its output on, and the value
# is not serialized twice.
ORJSON_CANONICAL = _ORJSON_OPTIONS
_SURROGATE = re.compile("[\ud800-\udfff]")


def encode_canonical(value: Any) -> bytes:
    """RFC 8785 (JCS) bytes of a JSON value (dicts with string keys, lists, tuples, strings,
    numbers, booleans, None); TypeError for anything else."""
    try:
        encoded = orjson.dumps(value, option=_ORJSON_OPTIONS)
    except TypeError:  # orjson.JSONEncodeError: what only the exact writer takes or refuses
        return _encode_exact(value)
    return canonical_from(value, encoded)


def canonical_from(value: Any, encoded: bytes) -> bytes:
    """:func:`encode_canonical` of ``value``, given ``encoded``, orjson's output for it under
    :data:`ORJSON_CANONICAL` (which the caller computed and did not modify)."""
    if not encoded.isascii() and re.search(rb"[\xf0-\xf4]", encoded):
        return _encode_exact(value)  # UTF-16 order differs from code point order up there
    # A "+" is rare in text and found by memchr: the regex scan (tens of microseconds on a
    # document of span text) runs only when there is one.
    if (b"+" in encoded and _POSITIVE_EXPONENT.search(encoded)) or _SMALL_EXPONENT.search(encoded):
        return _encode_exact(value)
    # One scan finds every integral ending (a compiled search with a literal prefix: several
    # times faster than ``in`` here); most documents have none.
    starts = [found.start() for found in _INTEGRAL_FLOAT.finditer(encoded)]
    if not starts:
        return encoded
    return _mend_integral_floats(encoded, starts)


def written_alike(floats: list[float]) -> bool:
    """True when orjson writes each of ``floats`` as RFC 8785 does: none integral (``1.0``
    against ``1``), none with an exponent ECMAScript writes out (below 1e-5, from 1e16). A
    caller that knows every float of a value (and that its keys are ASCII) then needs no scan
    of orjson's output (:func:`canonical_from`), which reads every byte of every text."""
    if not floats:
        return True
    magnitudes = list(map(abs, floats))
    return (
        min(magnitudes) >= 1e-5
        and max(magnitudes) < 1e16
        and not any(map(float.is_integer, floats))
    )


def canonical_digest(value: Any) -> str:
    """``sha256:`` over the RFC 8785 bytes of ``value``."""
    return "sha256:" + hashlib.sha256(encode_canonical(value)).hexdigest()


def _mend_integral_floats(encoded: bytes, starts: list[int]) -> bytes:
    """orjson writes an integral float ``2.0`` (and ``-0.0``); JCS writes ``2`` (and ``0``).
    Outside strings only; ``starts``: where ``_INTEGRAL_FLOAT`` matched. Without a backslash
    in the text every quote opens or closes a string, so a match is outside one when an even
    number of quotes precede it: counted between matches, in C, unless every match is plainly
    a member's value (:func:`_member_value`), which needs no count (a count of the quotes of a
    document of span text costs more than finding the matches). With escapes, the strings are
    split off first."""
    if b"\\" in encoded:
        return _mend_between_strings(encoded)
    zeros = [_member_value(encoded, start) for start in starts]
    if None in zeros:
        zeros = _outside_strings(encoded, starts)
    pieces: list[bytes] = []
    done = 0
    for start, negative_zero in zip(starts, zeros, strict=True):
        if negative_zero is None:
            continue  # inside a string
        pieces.append(encoded[done : start - 2] + b"0" if negative_zero else encoded[done:start])
        done = start + 2
    pieces.append(encoded[done:])
    return b"".join(pieces)


def _member_value(encoded: bytes, start: int) -> bool | None:
    """Whether the number whose ``.0`` is at ``start`` is ``-0``, when it is plainly the value
    of an object member, ``"key":-12.0``, whose quote closes the key (in compact JSON an opening
    quote follows ``{``, ``[``, ``:`` or ``,``); None when telling takes counting quotes."""
    begin = start
    while begin > 0 and encoded[begin - 1] in _DIGITS:
        begin -= 1
    if begin == start:
        return None
    negative = encoded[begin - 1 : begin] == b"-"
    begin -= negative
    if begin < _KEY_END or encoded[begin - 2 : begin] != b'":' or encoded[begin - 3] in b"{[:,":
        return None
    return negative and encoded[begin:start] == b"-0"


def _outside_strings(encoded: bytes, starts: list[int]) -> list[bool | None]:
    """For each match, whether its number is ``-0``, or None when it is inside a string."""
    zeros: list[bool | None] = []
    counted = quotes = 0
    for start in starts:
        quotes += encoded.count(b'"', counted, start)
        counted = start
        if quotes % 2:
            zeros.append(None)
            continue
        zeros.append(
            encoded[start - 2 : start] == b"-0"
            and (start == 2 or encoded[start - 3 : start - 2] in b":,[")
        )
    return zeros


def _mend_between_strings(encoded: bytes) -> bytes:
    parts = _STRING.split(encoded)
    between = b"\x00".join(parts[0::2])  # a raw NUL never occurs in JSON text outside strings
    mended = _INTEGRAL_FLOAT.sub(b"", between)
    if b"-0" in mended:
        mended = _NEGATIVE_ZERO.sub(b"0", mended)
    parts[0::2] = mended.split(b"\x00")
    return b"".join(parts)


# --- the exact writer ----------------------------------------------------------------------------


def _encode_exact(value: Any) -> bytes:
    out: list[str] = []
    _write(value, out)
    return "".join(out).encode("utf-8")


def _quote(text: str) -> str:
    quoted = json.encoder.encode_basestring(text)
    if quoted.isascii() or not _SURROGATE.search(quoted):
        return quoted
    return _SURROGATE.sub(lambda found: f"\\u{ord(found.group()):04x}", quoted)


def _write(value: Any, out: list[str]) -> None:  # noqa: C901, PLR0912 - a branch per JSON type
    if isinstance(value, str):
        out.append(_quote(value))
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int | float):
        out.append(format_number(value))
    elif isinstance(value, Mapping):
        for key in value:
            if not isinstance(key, str):
                msg = f"JSON object keys are strings, not {type(key).__name__}"
                raise TypeError(msg)
        out.append("{")
        for i, key in enumerate(sorted(value, key=_utf16_order)):
            if i:
                out.append(",")
            out.append(_quote(key))
            out.append(":")
            _write(value[key], out)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _write(item, out)
        out.append("]")
    else:
        msg = f"{type(value).__name__} is not a JSON value"
        raise TypeError(msg)


def _utf16_order(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


def format_number(number: float) -> str:  # noqa: PLR0911 - one return per ECMAScript case
    """A number as ECMAScript's ``Number.prototype.toString`` writes it (RFC 8785 section
    3.2.2.3): the shortest digits that round-trip, written out from 1e-6 up to 1e21. An integer
    is a double there: beyond 2**53 it is rounded as JavaScript would read it."""
    if isinstance(number, int):
        if -_SAFE_INTEGER <= number <= _SAFE_INTEGER:
            return str(int(number))
        try:
            number = float(number)
        except OverflowError:
            return "null"
    if not math.isfinite(number):
        return "null"
    if number == 0:
        return "0"
    if number.is_integer() and -_SAFE_INTEGER <= number <= _SAFE_INTEGER:
        return str(int(number))
    sign = "-" if number < 0 else ""
    mantissa, _, exponent = repr(abs(number)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    # The number is 0.DIGITS x 10**point; then the digits lose their leading and trailing zeros.
    point = len(whole) + (int(exponent) if exponent else 0)
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    count = len(digits)
    if count <= point <= 21:
        return sign + digits + "0" * (point - count)
    if 0 < point <= 21:
        return sign + digits[:point] + "." + digits[point:]
    if -6 < point <= 0:
        return sign + "0." + "0" * -point + digits
    power = point - 1
    written = digits[0] + ("." + digits[1:] if count > 1 else "")
    return f"{sign}{written}e{'+' if power > 0 else '-'}{abs(power)}"


def paths(value: Any, path: JsonPath = ()) -> Iterator[JsonPath]:
    """Every location in ``value``, the root first, depth first in document order."""
    yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from paths(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from paths(item, (*path, i))
