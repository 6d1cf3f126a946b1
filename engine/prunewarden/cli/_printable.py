"""Text for a terminal: ids, messages and labels come from inputs and logs, and may spell
control sequences (``ESC [ 2 J`` clears a screen, OSC 8 forges a link, a bidi override reverses
what a reviewer reads). Rendered for people, every control character is shown escaped instead.
JSON output needs nothing of this: its encoder escapes them itself.
"""

from __future__ import annotations

import re

# C0 and C1 controls and DEL, the bidi embeddings, overrides and isolates, and the line and
# paragraph separators: nothing a reviewer should have interpreted rather than shown.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2028\u2029\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` with every control character spelled as an escape (``\\x1b``, ``\\u202e``)."""
    return _CONTROL.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"
