"""A stand-in for the reader's ``anthropic.Anthropic()`` client (docs/transitions.md): no request
leaves the machine; ``client.beta.messages.create`` answers with a message of the SDK's own type
whose ``context_management`` reports the tool uses the server cleared, as recorded in
examples/agents/anthropic_context_editing.py for a request compiled from the policy."""

from __future__ import annotations

from typing import Any

from anthropic.types.beta import BetaMessage


class _Messages:
    def __init__(self, cleared_tool_uses: int) -> None:
        self.cleared_tool_uses = cleared_tool_uses
        self.requests: list[dict[str, Any]] = []

    def create(self, **request: Any) -> BetaMessage:
        """The reply to ``request``, which is kept."""
        self.requests.append(request)
        cleared = self.cleared_tool_uses
        edit = {
            "type": "clear_tool_uses_20250919",
            "cleared_tool_uses": cleared,
            "cleared_input_tokens": 41 * cleared,
        }
        return BetaMessage.model_validate(
            {
                "id": "msg_01",
                "type": "message",
                "role": "assistant",
                "model": request["model"],
                "content": [{"type": "text", "text": "Noted."}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1},
                "context_management": {"applied_edits": [edit] if cleared else []},
            }
        )


class _Beta:
    def __init__(self, messages: _Messages) -> None:
        self.messages = messages


class RecordedAnthropic:
    """``client.beta.messages.create(...)`` as the Messages API answers it, offline."""

    def __init__(self, cleared_tool_uses: int = 5) -> None:
        self.beta = _Beta(_Messages(cleared_tool_uses))
