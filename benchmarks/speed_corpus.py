"""Synthetic corpora for the speed harness, generated batch by batch (nothing holds the whole
corpus, so a million memories stream in constant memory).

Two corpora:

* ``plain``: short memory-like sentences, no session, no explicit entity (the historical one).
* ``sessions``: a conversation log. Memories come in sessions of :data:`SESSION_LEN` turns
  between two speakers (``session_id``, ``speaker``, a creation time one minute apart); each
  turn names its speaker and a third of them a place or thing of the session, passed as ``entities``
  (``name:...``, the form the default extractor finds in the text too). The enrichment sweep
  turns this into ``follows`` (the previous turn), ``same_entity`` (other memories of the
  speaker / place) and ``related_to`` (close neighbours) relations, like a LoCoMo store.

Vectors come either from the real model (every text embedded) or, with ``synthetic=True``,
from :class:`SyntheticVectors`: the real model embeds once the 2,197 distinct
"subject verb object" cores of the texts, and each memory's vector is its core's embedding
plus seeded Gaussian noise, normalised, so that a million vectors cost no model time while
neighbourhoods stay those of real embeddings (siblings of one core sit at cosine ~0.7, and a
query through the real model lands near the cores it talks about).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["OBJECTS", "SESSION_LEN", "SUBJECTS", "Batch", "SyntheticVectors", "batches",
           "query_texts", "synthetic_texts"]

SUBJECTS = ["Maya", "the team", "our client", "Leo", "the backend", "my sister", "the cache",
            "the release", "Priya", "the router", "grandma", "the garden", "the API"]
VERBS = ["needs", "prefers", "broke", "moved", "reviewed", "ordered", "planned", "fixed",
         "mentioned", "postponed", "painted", "bought", "tested"]
OBJECTS = ["a new laptop", "the Friday deploy", "green tea", "a trip to Lisbon", "the invoice",
           "piano lessons", "the database migration", "a birthday cake", "the login page",
           "hiking boots", "the budget review", "a rescue dog", "the conference talk"]
TAILS = ["last week", "before the launch", "after lunch", "in March", "for the third time",
         "without telling anyone", "on a rainy morning", "at the office", "near the station",
         "because of the outage", "with great care", "in a hurry", "at midnight"]
SPEAKERS = ["Caroline", "Melanie", "Jonas", "Aiko", "Rafael", "Nadia", "Tomasz", "Ines",
            "Kwame", "Sofia", "Dmitri", "Leila", "Oscar", "Hana", "Mateo", "Freya", "Yusuf",
            "Greta", "Arjun", "Chloe", "Emeka", "Lucia", "Bjorn", "Mei", "Pavel", "Zara",
            "Hugo", "Amara", "Felix", "Noor"]
PLACES = ["Lisbon", "Kyoto", "Oslo", "Nairobi", "Montreal", "Seville", "Krakow", "Hanoi",
          "Porto", "Bergen", "Cusco", "Tallinn", "Dakar", "Quito", "Ghent", "Lyon",
          "Camp Juniper", "Project Atlas", "Blue Harbor", "Studio Nine", "Maple Street",
          "Riverside Park", "Hotel Aurora", "Cafe Lumen", "Pine Ridge", "Club Orbit",
          "Team Falcon", "Northwind", "Red Canyon", "Silver Lake"]
SESSION_LEN = 24
"""Turns per session (LoCoMo sessions have ~20-30)."""
PLACES_PER_SESSION = 3
PLACE_SHARE = 1 / 3
"""Share of turns that name a place of the session (every turn names its speaker)."""
START = datetime(2025, 1, 1, tzinfo=UTC)
NOISE = 0.035
"""Per-coordinate noise added to a core embedding (384 dims: cosine ~0.82 to the core)."""


def synthetic_texts(n: int, seed: int = 7) -> list[str]:
    """``n`` distinct short memory-like sentences, deterministic for a seed (``plain``)."""
    rng = random.Random(seed)
    return [f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} "
            f"{rng.choice(TAILS)} (note {i}, ref {rng.randrange(10**6)})" for i in range(n)]


def query_texts(queries: int) -> list[str]:
    return [f"what did {s} say about {o}? ({i})" for i, (s, o) in enumerate(zip(
        random.Random(3).choices(SUBJECTS, k=queries),
        random.Random(4).choices(OBJECTS, k=queries), strict=True))]


def _core(rng: random.Random) -> int:
    """Index of a (subject, verb, object) core, uniform."""
    return rng.randrange(len(SUBJECTS) * len(VERBS) * len(OBJECTS))


def _core_text(core: int) -> str:
    s, rest = divmod(core, len(VERBS) * len(OBJECTS))
    v, o = divmod(rest, len(OBJECTS))
    return f"{SUBJECTS[s]} {VERBS[v]} {OBJECTS[o]}"


@dataclass
class Batch:
    start: int
    items: list[dict[str, Any]]
    """``add_many`` items without ``embedding`` (the caller adds it)."""
    cores: np.ndarray

    @property
    def texts(self) -> list[str]:
        return [it["text"] for it in self.items]

    @property
    def ids(self) -> list[str]:
        return [it["id"] for it in self.items]


def _session_cast(session: int, seed: int) -> tuple[list[str], list[str]]:
    rng = random.Random(seed * 7_919 + session)
    return rng.sample(SPEAKERS, 2), rng.sample(PLACES, PLACES_PER_SESSION)


def _item(i: int, rng: random.Random, kind: str, seed: int, prefix: str) -> tuple[dict, int]:
    core = _core(rng)
    body = f"{_core_text(core)} {rng.choice(TAILS)}"
    if kind == "plain":
        return {"id": f"{prefix}{i:07d}", "text": f"{body} (note {i}, ref {rng.randrange(10**6)})"
                }, core
    session, turn = divmod(i, SESSION_LEN)
    speakers, places = _session_cast(session, seed)
    speaker, entities = speakers[turn % 2], [f"name:{speakers[turn % 2].lower()}"]
    if rng.random() < PLACE_SHARE:
        place = rng.choice(places)
        body += f" in {place}"
        entities.append(f"name:{place.lower()}")
    return {"id": f"{prefix}{i:07d}", "text": f"{speaker}: {body} (note {i})",
            "session_id": f"{prefix}s{session}", "speaker": speaker, "entities": entities,
            "at": START + timedelta(minutes=i)}, core


def batches(n: int, size: int, *, kind: str = "plain", seed: int = 7, prefix: str = "f"
            ) -> Iterator[Batch]:
    """The corpus of ``n`` memories in batches of ``size``, deterministic for a seed."""
    if kind not in ("plain", "sessions"):
        raise ValueError(f"corpus kind {kind!r}: expected 'plain' or 'sessions'")
    for start in range(0, n, size):
        rng = random.Random(f"{seed}-{kind}-{start}")
        pairs = [_item(i, rng, kind, seed, prefix) for i in range(start, min(n, start + size))]
        yield Batch(start, [p[0] for p in pairs], np.array([p[1] for p in pairs]))


class SyntheticVectors:
    """Core embeddings from the real model (computed once, cached), plus seeded noise."""

    def __init__(self, embedder: Any, cache: Path | None = None, seed: int = 11) -> None:
        cores = [_core_text(c) for c in range(len(SUBJECTS) * len(VERBS) * len(OBJECTS))]
        base = None
        if cache is not None and cache.exists():
            base = np.load(cache)
            if base.shape != (len(cores), embedder.dimension):
                base = None
        if base is None:
            base = np.asarray(embedder.embed_documents(cores), dtype=np.float32)
            if cache is not None:
                cache.parent.mkdir(parents=True, exist_ok=True)
                np.save(cache, base)
        self.base = base
        self.seed = seed

    def __call__(self, batch: Batch) -> np.ndarray:
        rng = np.random.default_rng((self.seed, batch.start))
        v = self.base[batch.cores] + rng.normal(scale=NOISE, size=(len(batch.cores),
                                                                  self.base.shape[1]))
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        return v.astype(np.float32)
