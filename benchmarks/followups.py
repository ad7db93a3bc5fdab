"""How many recent messages should MnemoniaMemoryBlock's recall query use (``context_window``)?

Two kinds of turns pull in opposite directions:

- a follow-up ("And what about her school?") names nothing itself: the memory it needs is
  found only if the query also holds the turn before it;
- a change of subject ("Can Maya eat peanuts?" after talk about the weather) is found best by
  the new message alone: the previous turns in the query pull recall towards the old subject.

Each case is a tenant's earlier memories (the same 24 facts for every case), a short chat,
and the fact the last message needs. For each window the block (real model, real Chroma and
SQLite) renders what it recalls; a case counts when the needed fact is in it. Run:

    .venv/bin/python benchmarks/followups.py
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from llama_index.core.base.llms.types import ChatMessage, MessageRole

FACTS = [
    "Emma, Alice's daughter, is seven years old.",
    "Emma goes to Riverside Primary School, in year two.",
    "Emma takes ballet lessons on Wednesday afternoons.",
    "Alice's son Leo is allergic to peanuts.",
    "Leo plays football for the Hillside under-tens on Saturdays.",
    "Alice works as a nurse at St Mary's hospital, on night shifts.",
    "Alice's manager at the hospital is called Dr Patel.",
    "Alice's husband Tom is an architect working from home.",
    "Tom's birthday is on the 14th of March.",
    "The family's dog is a border collie called Biscuit.",
    "Biscuit has a vet appointment for his vaccinations next Friday.",
    "Alice is training for the Lisbon half marathon in October.",
    "Alice runs 30 kilometres a week, mostly before her night shifts.",
    "Alice drinks green tea, never coffee.",
    "Alice is vegetarian since 2019.",
    "The family is going to Crete for two weeks in August.",
    "They booked a hotel in Chania for the Crete holiday.",
    "Alice's mother Rosa lives in Porto and visits at Christmas.",
    "Rosa has diabetes and needs insulin twice a day.",
    "Alice is learning Portuguese on Duolingo to talk with Rosa's friends.",
    "The car, a blue Skoda estate, is due for its MOT in June.",
    "Alice's favourite author is Elena Ferrante.",
    "Alice's book club meets on the first Monday of each month.",
    "Alice pays 1,150 pounds a month for the mortgage.",
]

U, A = MessageRole.USER, MessageRole.ASSISTANT

# (messages, the fact the last message needs): follow-ups first, then changes of subject.
FOLLOW_UPS = [
    ([(U, "How old is my daughter Emma now?"), (A, "Emma is seven."),
      (U, "And what about her school?")], 1),
    ([(U, "How old is my daughter Emma now?"), (A, "Emma is seven."),
      (U, "Which day are her dance classes?")], 2),
    ([(U, "What is my son allergic to?"), (A, "Leo is allergic to peanuts."),
      (U, "When does he have matches?")], 4),
    ([(U, "Where do I work again?"), (A, "You are a nurse at St Mary's."),
      (U, "Who is my boss there?")], 6),
    ([(U, "What does my husband do?"), (A, "Tom is an architect."),
      (U, "When is his birthday?")], 8),
    ([(U, "What breed is our dog?"), (A, "Biscuit is a border collie."),
      (U, "When does he see the vet?")], 10),
    ([(U, "Which race am I training for?"), (A, "The Lisbon half marathon."),
      (U, "How much do I run each week?")], 12),
    ([(U, "Where are we going this summer?"), (A, "To Crete for two weeks in August."),
      (U, "Where are we staying?")], 16),
    ([(U, "Where does my mother live?"), (A, "Rosa lives in Porto."),
      (U, "What medication does she need?")], 18),
    ([(U, "Who is my favourite author?"), (A, "Elena Ferrante."),
      (U, "And when does my club meet to discuss her?")], 22),
    ([(U, "Which car do we have?"), (A, "A blue Skoda estate."),
      (U, "When is it due for its check?")], 20),
    ([(U, "What does Rosa do at Christmas?"), (A, "She visits you."),
      (U, "Which language am I learning for her friends?")], 19),
]

CHANGES = [
    ([(U, "What's the weather like today?"), (A, "Sunny, 18 degrees."),
      (U, "Can Leo eat peanut butter?")], 3),
    ([(U, "Tell me a joke."), (A, "Why did the scarecrow win an award?"),
      (U, "Which school does Emma go to?")], 1),
    ([(U, "Where are we going this summer?"), (A, "To Crete for two weeks in August."),
      (U, "What should I order at the cafe, coffee or tea?")], 13),
    ([(U, "How old is my daughter Emma now?"), (A, "Emma is seven."),
      (U, "How much is our mortgage?")], 23),
    ([(U, "Which race am I training for?"), (A, "The Lisbon half marathon."),
      (U, "Do I eat meat?")], 14),
    ([(U, "What does my husband do?"), (A, "Tom is an architect."),
      (U, "What is the name of our dog?")], 9),
    ([(U, "What's the capital of Australia?"), (A, "Canberra."),
      (U, "When is the car's MOT?")], 20),
    ([(U, "Who is my favourite author?"), (A, "Elena Ferrante."),
      (U, "What shift do I work at the hospital?")], 5),
    ([(U, "When does Biscuit see the vet?"), (A, "Next Friday."),
      (U, "Where does my mum live?")], 17),
    ([(U, "Can you recommend a film?"), (A, "Try Paddington 2."),
      (U, "When is Tom's birthday?")], 8),
    ([(U, "What medication does Rosa need?"), (A, "Insulin twice a day."),
      (U, "Which hotel did we book in Greece?")], 16),
    ([(U, "Where does Leo play football?"), (A, "For the Hillside under-tens."),
      (U, "Which day is Emma's ballet?")], 2),
]

WINDOWS = (1, 2, 3, 4, 5)


async def _score(block_cls: type, engine: object, cases: list, window: int,
                 store: bool) -> int:
    hits = 0
    for n, (turns, need) in enumerate(cases):
        block = block_cls(engine=engine, tenant="alice", context_window=window,
                          store_each_turn=store, report_use=False)
        messages = [ChatMessage(role=r, content=t) for r, t in turns]
        session = f"case-{window}-{n}"
        if store:  # as in an agent: a get per message put, so the earlier turns are stored
            for i in range(1, len(messages)):
                await block.aget(messages[:i], session_id=session)
        text = await block.aget(messages, session_id=session)
        hits += FACTS[need] in text
    return hits


def main() -> int:
    from llama_index.memory.mnemonia import MnemoniaMemoryBlock
    from mnemonia import MemoryEngine, MnemoniaConfig

    config = MnemoniaConfig.load(env={}, maintenance="manual")
    for store in (False, True):
        print(f"store_each_turn={store}")
        print(f"context_window  follow-ups (of {len(FOLLOW_UPS)})  "
              f"changes of subject (of {len(CHANGES)})  both")
        for w in WINDOWS:
            # a fresh store per window: recall strengthens what it finds, which must not
            # carry over
            with tempfile.TemporaryDirectory() as folder:
                engine = MemoryEngine.open(Path(folder), config=config)
                try:
                    engine.add_many([{"text": f, "kind": "fact"} for f in FACTS],
                                    tenant="alice")
                    f = asyncio.run(_score(MnemoniaMemoryBlock, engine, FOLLOW_UPS, w, store))
                    c = asyncio.run(_score(MnemoniaMemoryBlock, engine, CHANGES, w, store))
                finally:
                    engine.close()
            print(f"{w:>14}  {f:>20}  {c:>29}  {f + c:>4}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
