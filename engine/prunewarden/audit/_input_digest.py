"""Input digests over a document's texts' hashes (input digest version 3, docs/audit-log.md).

Apart from the record format (:mod:`._record`), which only names the version a record's digest
was computed under.
"""

from __future__ import annotations

from typing import Any

from prunewarden.audit._record import input_digest
from prunewarden.inputs import StalenessRequest
from prunewarden.inputs._columns import hashed_text_document

# The input digest of a staleness document with each span's text replaced by
# ``{"sha256": HEX}`` (:func:`hashed_text_document`); a record digested so says so in
# ``input_digest_version``. Without that field, a record's input digest is over the document as
# given: Python's sorted-keys JSON in record_version 1, RFC 8785 from 2 on.
HASHED_TEXT_DIGEST_VERSION = 3


def staleness_digest(document: Any, request: StalenessRequest) -> tuple[str, int | None]:
    """The input digest of a valid staleness document and the version it is computed under:
    :data:`HASHED_TEXT_DIGEST_VERSION` over its texts' hashes, which typing it computed; the
    document as given (None: the record's own version) when a text has no hash (a lone
    surrogate)."""
    digests = [span.text_digest for span in request.spans]
    if not all(digests) or type(document) is not dict:
        return input_digest(document), None
    hashed = hashed_text_document(document, "spans", digests)
    return input_digest(hashed), HASHED_TEXT_DIGEST_VERSION
