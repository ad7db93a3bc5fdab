"""The three adapters on the real bundled model (all-MiniLM-L6-v2), embedded Chroma and SQLite:
recall by meaning, not by shared words."""

from __future__ import annotations

import pytest
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.memory.mnemonia import MnemoniaMemory, MnemoniaMemoryBlock, MnemoniaRetriever
from mnemonia import MemoryEngine

from tests.contracts.llama_index_helpers import Script

pytestmark = pytest.mark.integration

FACTS = [
    "I adopted a golden retriever puppy and named him Rex.",
    "My sister Ana moved to Porto last spring.",
    "I work night shifts as a nurse at the city hospital.",
    "We are repainting the kitchen a pale yellow.",
]


def test_chat_engine_recalls_a_paraphrase_in_a_new_session(real_engine: MemoryEngine) -> None:
    script = Script()
    monday = SimpleChatEngine.from_defaults(
        memory=MnemoniaMemory(engine=real_engine, tenant="alice", session_id="monday"),
        llm=script.chat_llm())
    for fact in FACTS:
        monday.chat(fact)
    friday = SimpleChatEngine.from_defaults(
        memory=MnemoniaMemory(engine=real_engine, tenant="alice", session_id="friday"),
        llm=script.chat_llm())
    friday.chat("What is my dog called?")
    sent = script.last
    assert sent[0].role == MessageRole.SYSTEM
    memories = sent[0].content or ""
    assert FACTS[0] in memories
    assert FACTS[3] not in memories  # the floor keeps the unrelated ones out


async def test_memory_block_recalls_a_paraphrase(real_engine: MemoryEngine) -> None:
    block = MnemoniaMemoryBlock(engine=real_engine, tenant="alice")
    await block.aput([ChatMessage(role=MessageRole.USER, content=f) for f in FACTS],
                     session_id="monday")
    content = await block.aget([ChatMessage(role=MessageRole.USER,
                                            content="Which city does my sister live in now?")])
    assert FACTS[1] in content
    assert FACTS[3] not in content


async def test_retriever_ranks_by_meaning(real_engine: MemoryEngine) -> None:
    real_engine.add_many([{"text": f} for f in FACTS], tenant="alice")
    retriever = MnemoniaRetriever(engine=real_engine, tenant="alice", k=2)
    for query, expected in [("Tell me about my pet", FACTS[0]),
                            ("What is my job?", FACTS[2]),
                            ("home renovation plans", FACTS[3])]:
        nodes = await retriever.aretrieve(query)
        assert len(nodes) == 2
        assert nodes[0].node.get_content() == expected, query
        assert nodes[0].node.metadata["explanation"]["cosine"] > 0.2
