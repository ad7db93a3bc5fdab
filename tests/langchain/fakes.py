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


class ScriptedToolChatModel(BaseChatModel):
    """A chat model that calls memory tools as an LLM would, from commands in the user's
    last message, with nothing random and no network:

    - ``remember: TEXT`` -> ``manage_memory(content=TEXT, action="create")``
    - ``update ID: TEXT`` -> ``manage_memory(content=TEXT, action="update", id=ID)``
    - ``forget ID`` -> ``manage_memory(action="delete", id=ID)``
    - ``recall: QUERY`` -> ``search_memory(query=QUERY)``
    - anything else -> a plain answer naming the first ``- `` line of its system prompt

    After a tool result it answers with that result, so the final message shows what the tool
    returned. ``seen`` keeps every list of messages it was given; ``bound`` the tool names of
    the last ``bind_tools``.
    """

    seen: list[list[BaseMessage]] = Field(default_factory=list)
    bound: list[str] = Field(default_factory=list)
    manage_tool: str = "manage_memory"
    search_tool: str = "search_memory"

    @property
    def _llm_type(self) -> str:
        return "scripted-tools"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedToolChatModel:  # type: ignore[override]
        self.bound = [t.get("name", "?") if isinstance(t, dict)
                      else getattr(t, "name", getattr(t, "__name__", str(t))) for t in tools]
        return self

    def _reply(self, messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if last.type == "tool":
            return AIMessage(content=f"Tool said: {last.text}")
        text = last.text.strip()
        n = sum(1 for m in messages if m.type == "human")
        call_id = f"call-{n}-{len(messages)}"
        head, _, rest = text.partition(":")
        if head == "remember":
            args: dict[str, Any] = {"content": rest.strip(), "action": "create"}
            return _call(self.manage_tool, args, call_id)
        if head.startswith("update "):
            args = {"content": rest.strip(), "action": "update", "id": head[7:].strip()}
            return _call(self.manage_tool, args, call_id)
        if text.startswith("forget "):
            return _call(self.manage_tool, {"action": "delete", "id": text[7:].strip()},
                         call_id)
        if head == "recall":
            return _call(self.search_tool, {"query": rest.strip()}, call_id)
        system = "\n".join(m.text for m in messages if m.type == "system")
        lines = [line[2:] for line in system.splitlines() if line.startswith("- ")]
        return AIMessage(content=lines[0] if lines else "I don't know.")

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: Any = None, **kwargs: Any) -> ChatResult:
        self.seen.append(list(messages))
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages))])


def _call(name: str, args: dict[str, Any], call_id: str) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id,
                                              "type": "tool_call"}])


class ScriptedChatModel(BaseChatModel):
    """Plays the part of an LLM in the guides' examples (docs/examples/), deterministically:

    - a user message that is a key of ``tool_calls`` -> that tool call (``(name, args)``), as
      an LLM would act on "Remember that ...";
    - after a tool result -> ``"<tool name>: <result>"``;
    - anything else -> the memory lines (``- ...``) of its system prompt joined with ``"; "``
      (what a real model would answer from), or ``"I don't know."``.

    ``seen`` keeps every list of messages it was given; ``bound`` the tool names of the last
    ``bind_tools``.
    """

    tool_calls: dict[str, tuple[str, dict[str, Any]]] = Field(default_factory=dict)
    seen: list[list[BaseMessage]] = Field(default_factory=list)
    bound: list[str] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:  # type: ignore[override]
        self.bound = [t.get("name", "?") if isinstance(t, dict)
                      else getattr(t, "name", getattr(t, "__name__", str(t))) for t in tools]
        return self

    def system_prompts(self) -> list[str]:
        """The system message of each call, in order ("" when a call had none)."""
        return ["\n".join(m.text for m in messages if m.type == "system")
                for messages in self.seen]

    def _reply(self, messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if last.type == "tool":
            return AIMessage(content=f"{last.name}: {last.text}")
        if last.type == "human" and last.text in self.tool_calls:
            name, args = self.tool_calls[last.text]
            return _call(name, args, f"call-{len(self.seen)}")
        system = "\n".join(m.text for m in messages if m.type == "system")
        lines = [line[2:] for line in system.splitlines() if line.startswith("- ")]
        return AIMessage(content="; ".join(lines) if lines else "I don't know.")

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: Any = None, **kwargs: Any) -> ChatResult:
        self.seen.append(list(messages))
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages))])
