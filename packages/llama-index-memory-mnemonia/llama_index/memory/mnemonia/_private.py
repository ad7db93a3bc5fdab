"""Helpers shared by the LlamaIndex adapters. Not public API: names here may change."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole, TextBlock, ToolCallBlock

from mnemonia import MemoryEngine, RecallResult, validation
from mnemonia.errors import InvalidInputError

#: Metadata keys written on every message stored as an episode.
ROLE_KEY = "role"
#: True when the episode is a turn of a session's chat history (``MnemoniaMemory``).
CHAT_HISTORY_KEY = "chat_history"
#: The full ``ChatMessage.model_dump(mode="json")``, so ``get_all`` returns messages exactly.
MESSAGE_KEY = "message"
#: Set (to the time of the reset) when ``reset``/``set`` removed the turn from the session's
#: short-term history; the episode itself stays a long-term memory.
RESET_KEY = "chat_reset_at"
#: Which adapter wrote the episode.
SOURCE_KEY = "source"

DEFAULT_MEMORY_TEMPLATE = (
    "Long-term memory: what you remember from earlier conversations with this user. "
    "Use it when it helps to answer; it may be incomplete or out of date.\n\n{memories}"
)


check_tenant = validation.tenant


def resolve_engine(engine: Any) -> MemoryEngine:
    """The engine to use: the one given, or the embedded default store (``./memory``, the
    bundled model) that every adapter built without one shares in this process, LangChain's
    too (:meth:`mnemonia.MemoryEngine.shared`)."""
    if engine is None:
        return MemoryEngine.shared()
    if not isinstance(engine, MemoryEngine):
        raise InvalidInputError(
            f"engine={engine!r}: must be a mnemonia.MemoryEngine "
            "(e.g. MemoryEngine.open('./memory')) or None for the embedded default")
    return engine


def check_k(k: Any) -> int:
    return validation.positive_int(k, "k")


def check_optional_k(k: Any) -> int | None:
    """``None`` (the engine's ``default_k``) or a valid ``k``."""
    return None if k is None else check_k(k)


def check_session_id(session_id: Any) -> str:
    if not isinstance(session_id, str) or not session_id or len(session_id) > 256:
        raise InvalidInputError(f"session_id={session_id!r}: must be a 1-256 character string")
    return session_id


def check_importance(value: Any) -> float:
    return validation.finite_unit(value, "importance")


def role_of(message: ChatMessage) -> str:
    role = message.role
    return role.value if isinstance(role, MessageRole) else str(role)


def message_text(message: ChatMessage) -> str:
    """The text of a message (its text blocks), or '' when it has none."""
    parts = [b.text for b in message.blocks if isinstance(b, TextBlock)]
    return "\n".join(p for p in parts if p).strip()


def describe_message(message: ChatMessage) -> str:
    """A non-empty text for a message: its text, else a short description (tool calls)."""
    text = message_text(message)
    if text:
        return text
    calls = [f"{b.tool_name}({b.tool_kwargs})" for b in message.blocks
             if isinstance(b, ToolCallBlock)]
    for call in message.additional_kwargs.get("tool_calls") or []:
        name = call.get("tool_name") if isinstance(call, dict) else getattr(call, "tool_name", None)
        if name is None and isinstance(call, dict):
            name = (call.get("function") or {}).get("name")
        if name and not any(c.startswith(f"{name}(") for c in calls):
            calls.append(f"{name}(...)")
    if calls:
        return "called " + ", ".join(calls)
    return f"[{role_of(message)} message without text]"


def speaker_of(message: ChatMessage) -> str:
    name = message.additional_kwargs.get("name")
    if isinstance(name, str) and name.strip():
        return name.strip()
    return role_of(message)


def message_item(message: ChatMessage, *, session_id: str | None, max_chars: int,
                 importance: float, topic: str | None, chat_history: bool,
                 source: str) -> dict[str, Any]:
    """An ``engine.add_many`` item storing one message as an episode."""
    if not isinstance(message, ChatMessage):
        raise InvalidInputError(
            f"expected a llama_index ChatMessage, got {type(message).__name__}: {message!r}")
    metadata: dict[str, Any] = {ROLE_KEY: role_of(message), SOURCE_KEY: source}
    if chat_history:
        metadata[CHAT_HISTORY_KEY] = True
        metadata[MESSAGE_KEY] = message.model_dump(mode="json")
    return {"text": describe_message(message)[:max_chars], "kind": "episode",
            "session_id": session_id, "speaker": speaker_of(message), "importance": importance,
            "topic": topic, "metadata": metadata}


def turn_ids(messages: Sequence[ChatMessage], *, tenant: str, session_id: str | None,
             max_chars: int) -> list[str]:
    """A stable memory id per message: the same message of the same session of the same
    tenant (its role, its stored text, and which repeat of that text it is in ``messages``)
    always gets the same id, so storing it again is a no-op (the engine's ``add`` of an id
    it holds with the same text returns the stored memory)."""
    seen: dict[tuple[str, str], int] = {}
    ids = []
    for m in messages:
        key = (role_of(m), describe_message(m)[:max_chars])
        n = seen[key] = seen.get(key, -1) + 1
        digest = hashlib.sha256("\x00".join(
            (tenant, session_id or "", key[0], key[1], str(n))).encode()).hexdigest()
        ids.append(f"li-{digest[:40]}")
    return ids


def load_message(metadata: dict[str, Any]) -> ChatMessage:
    return ChatMessage.model_validate(metadata[MESSAGE_KEY])


def same_message(a: ChatMessage, b: ChatMessage) -> bool:
    return bool(a.model_dump(mode="json") == b.model_dump(mode="json"))


def query_from(messages: Sequence[ChatMessage], window: int) -> str:
    """The text of the latest ``window`` messages that have text, oldest first."""
    texts: list[str] = []
    for m in reversed(messages):
        text = message_text(m)
        if text:
            texts.append(text)
            if len(texts) >= window:
                break
    return "\n".join(reversed(texts))


def last_user_text(messages: Sequence[ChatMessage]) -> str:
    for m in reversed(messages):
        if m.role == MessageRole.USER:
            text = message_text(m)
            if text:
                return text
    return query_from(messages, 1)


def without(result: RecallResult, ids: set[str]) -> RecallResult:
    """``result`` without the hits whose memory id is in ``ids``."""
    if not ids:
        return result
    return replace(result, memories=[h for h in result.memories if h.memory.id not in ids],
                   episodes=[h for h in result.episodes if h.memory.id not in ids])


def render(result: RecallResult, snapshot: str = "") -> str:
    """``result.render()`` followed by the snapshot text, if any."""
    text = result.render()
    snapshot = snapshot.strip()
    if snapshot:
        text = f"{text}\n\n{snapshot}" if text else snapshot
    return text


def shrink(result: RecallResult, snapshot: str, fits: Callable[[str], bool]
           ) -> tuple[str, RecallResult, str]:
    """Drop the snapshot, then the lowest-scored hits, until ``fits(rendered text)``.

    Returns the text ('' when nothing fits), and the result and snapshot it renders.
    """
    order = sorted([*result.memories, *result.episodes], key=lambda h: (h.score, h.id))
    while True:
        text = render(result, snapshot)
        if not text or fits(text):
            return text, result, snapshot
        if snapshot:
            snapshot = ""
            continue
        if not order:
            return "", result, snapshot
        drop = order.pop(0).id
        result = replace(result, memories=[h for h in result.memories if h.id != drop],
                         episodes=[h for h in result.episodes if h.id != drop])


def shown_ids(result: RecallResult) -> list[str]:
    return [h.memory.id for h in result.memories] + [h.memory.id for h in result.episodes]


def report_use(engine: MemoryEngine, reply: str, ids: Sequence[str], *, tenant: str) -> list[str]:
    """Tell the engine which recalled memories a reply used (DESIGN section 5, review worker)."""
    if not ids or not reply.strip():
        return []
    return list(engine.report_use(reply, list(ids), tenant=tenant))
