"""An LCEL RAG chain over MnemoniaRetriever, on the real model (paraphrased questions)."""

from __future__ import annotations

import pytest
from langchain_core.documents import Document
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnablePassthrough
from langchain_mnemonia import MnemoniaRetriever
from mnemonia import MemoryEngine

from tests.langchain.conftest import FACTS
from tests.langchain.fakes import MemoryEchoChatModel

pytestmark = pytest.mark.integration


def _format(docs: list[Document]) -> str:
    return "\n".join(f"- {d.page_content}" for d in docs)


@pytest.fixture
def rag(real_engine: MemoryEngine) -> tuple[object, MemoryEchoChatModel, MnemoniaRetriever]:
    real_engine.add_many([{"text": t} for t in FACTS], tenant="alice")
    retriever = MnemoniaRetriever(engine=real_engine, tenant="alice", k=2)
    model = MemoryEchoChatModel()
    prompt = ChatPromptTemplate.from_messages([
        ("system", "Answer from what you remember about the user:\n{context}"),
        ("human", "{question}"),
    ])
    chain = ({"context": retriever | _format, "question": RunnablePassthrough()}
             | prompt | model | StrOutputParser())
    return chain, model, retriever


@pytest.mark.parametrize(("question", "answer"), [
    ("What pet does Alice have?", "Alice's cat is called Miso and loves tuna."),
    ("What is Alice's job?", "Alice works as a nurse at the city hospital."),
    ("Which musical instrument is she practising?",
     "Alice is learning to play the cello on weekends."),
    ("What hot drink does Alice like?", "Alice prefers green tea over coffee in the morning."),
])
def test_rag_chain_answers_from_memory(rag: tuple, question: str, answer: str) -> None:
    chain, model, _ = rag
    assert chain.invoke(question) == answer
    [system, human] = model.seen[-1]
    assert system.type == "system" and human.content == question
    # The model saw exactly k=2 recalled memories, the right one first.
    assert system.text.count("\n- ") == 2
    assert system.text.split("\n- ")[1] == answer


async def test_rag_chain_async_and_batch(rag: tuple) -> None:
    chain, _, _ = rag
    assert await chain.ainvoke("When is the report due?") == (
        "The quarterly report is due on the 30th of June.")
    assert chain.batch(["What pet does Alice have?", "What does the web app cache with?"]) == [
        "Alice's cat is called Miso and loves tuna.",
        "The team uses Redis as the cache for the web app."]


def test_retriever_k_can_be_bound_per_call(rag: tuple) -> None:
    _, _, retriever = rag
    docs = retriever.invoke("Alice", k=5)
    assert len(docs) == 5
    assert all(d.metadata["explanation"]["cosine"] is not None for d in docs)
