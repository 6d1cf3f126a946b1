"""A batch's body as lines, as it is read and decompressed: never the whole body at once.

The collector checks each line as soon as it is whole, so a batch whose first line is not a
record is refused after that line, not after decompressing the rest (a 200 KiB gzip body can
hold 200 MiB of zeros). What is held is the lines checked so far (the batch, once) and one
chunk of compressed and decompressed bytes.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Protocol

from prunewarden.limits import MAX_SHIP_BATCH_BYTES
from prunewarden.shipping._receiving import BatchRefused

_CHUNK = 64 * 1024  # compressed bytes read at once, and decompressed bytes made from them


class _Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


def batch_lines(
    stream: _Readable, length: int, encoding: str, limit: int = MAX_SHIP_BATCH_BYTES
) -> Iterator[bytes]:
    """The ``length`` bytes of ``stream`` (``gzip`` or ``identity``) as lines, each with its
    newline; the last one without it when the body does not end with one. Raises
    :class:`BatchRefused`: not gzip, cut short, or over ``limit`` bytes decompressed."""
    inflate = zlib.decompressobj(wbits=31) if encoding == "gzip" else None
    pending: list[bytes] = []  # the start of a line not ended yet (a record may be long)
    total = 0
    for chunk in _chunks(stream, length):
        for piece in _inflated(inflate, chunk):
            total += len(piece)
            if total > limit:
                raise BatchRefused("batch-too-large", f"more than {limit} bytes decompressed")
            *whole, rest = piece.split(b"\n")
            for part in whole:
                pending.append(part)
                pending.append(b"\n")
                yield b"".join(pending)
                pending = []
            if rest:
                pending.append(rest)
    if inflate is not None and not inflate.eof:
        raise BatchRefused("invalid-batch", "the gzip body is cut short")
    if pending:
        yield b"".join(pending)


def _chunks(stream: _Readable, length: int) -> Iterator[bytes]:
    left = length
    while left > 0:
        chunk = stream.read(min(_CHUNK, left))
        if not chunk:
            raise BatchRefused("invalid-batch", f"the body ended {left} bytes short")
        left -= len(chunk)
        yield chunk


def _inflated(inflate: zlib._Decompress | None, chunk: bytes) -> Iterator[bytes]:
    """``chunk`` decompressed, a bounded piece at a time."""
    if inflate is None:
        yield chunk
        return
    data = chunk
    try:
        while data and not inflate.eof:
            piece = inflate.decompress(data, _CHUNK)
            data = inflate.unconsumed_tail
            if piece:
                yield piece
        while not inflate.eof:  # output still held back for want of room
            piece = inflate.decompress(b"", _CHUNK)
            if not piece:
                break
            yield piece
    except zlib.error as exc:
        raise BatchRefused("invalid-batch", f"the body is not gzip: {exc}") from None
