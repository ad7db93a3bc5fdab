"""A fake chat model for tests: it records what it was shown and answers from it."""

from __future__ import annotations

from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field


class MemoryEchoChatModel(BaseChatModel):
    """Answers with the first ``- `` line of its system prompt (the best recalled memory), or
    ``"I don't know."``; keeps every list of messages it was given in ``seen``."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "memory-echo"

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: Any = None, **kwargs: Any) -> ChatResult:
        self.seen.append(list(messages))
        system = "\n".join(m.text for m in messages if m.type == "system")
        lines = [line[2:] for line in system.splitlines() if line.startswith("- ")]
        reply = lines[0] if lines else "I don't know."
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=reply))])
