"""How a chat message becomes an episode memory, and back."""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import BaseMessage, message_to_dict, messages_from_dict

__all__ = [
    "CLEARED_FLAG",
    "HISTORY_FLAG",
    "episode_text",
    "message_from_record",
    "message_record",
    "speaker_of",
]

HISTORY_FLAG = "chat_history"
CLEARED_FLAG = "history_cleared"


def speaker_of(message: BaseMessage, human: str, ai: str) -> str:
    """``message.name`` if set, else the prefix for its role (LangChain's buffer-string names)."""
    if isinstance(message.name, str) and message.name.strip():
        return message.name.strip()
    return {"human": human, "ai": ai, "system": "System", "tool": "Tool",
            "function": "Function"}.get(message.type, message.type.capitalize() or "Chat")


def episode_text(message: BaseMessage, max_chars: int) -> str:
    """The text stored (and embedded) for a message: its text content, or a short stand-in.

    A message without text (an AI turn that only calls tools) is stored as what it did, so it
    still gets an episode; the full message is kept in metadata either way.
    """
    text = message.text.strip()
    if not text:
        calls = [c.get("name", "?") for c in getattr(message, "tool_calls", None) or []]
        text = (f"[called {', '.join(calls)}]" if calls
                else f"[{message.type} message without text]")
    return text[:max_chars]


def message_record(message: BaseMessage) -> dict[str, Any]:
    """``message_to_dict`` made JSON-safe (anything exotic becomes a string)."""
    record: dict[str, Any] = json.loads(json.dumps(message_to_dict(message), default=str))
    return record


def message_from_record(record: dict[str, Any]) -> BaseMessage:
    return messages_from_dict([record])[0]
