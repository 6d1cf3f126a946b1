"""A URL as prunewarden shows it: in statuses, problems, records and standard error.

A destination's or a bundle's URL may carry credentials (``https://user:secret@host/...``) or
a signed query (``?X-Amz-Signature=...``): neither is ever shown. What is shown is the scheme,
the host and port, and the path. A path is not a URL and is shown as it is.
"""

from __future__ import annotations

import urllib.parse


def shown_location(location: str) -> str:
    """``location`` without its userinfo, query and fragment when it is a URL."""
    parts = urllib.parse.urlsplit(location)
    if not parts.scheme or not parts.netloc:
        return location
    try:
        port = parts.port
    except ValueError:  # a port that is not a number: shown without it
        port = None
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host if port is None else f"{host}:{port}"
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))
