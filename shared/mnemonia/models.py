"""Value objects the engine returns: memories, recall hits with explanations, results."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from mnemonia.scoring.sm2 import SM2State

__all__ = ["KINDS", "Event", "Explanation", "Hit", "ItemWrite", "KeyedItem", "Link", "Memory",
           "RecallResult", "Relation"]

KINDS = ("episode", "fact", "concept")


@dataclass(frozen=True, kw_only=True)
class Memory:
    """One memory as stored. Returned by ``add``, ``get`` and inside recall hits."""

    id: str
    tenant: str
    text: str
    kind: str
    topic: str | None
    entities: tuple[str, ...]
    importance: float
    created_at: datetime
    accessed_at: datetime
    access_count: int
    stability: float
    sm2: SM2State
    utility: float
    state: str
    pinned: bool
    deleted_at: datetime | None
    superseded_by: str | None
    consolidated_into: str | None
    session_id: str | None
    metadata: dict[str, Any]
    embedding_model: str

    @property
    def deleted(self) -> bool:
        return self.deleted_at is not None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["entities"] = list(self.entities)
        for key in ("created_at", "accessed_at", "deleted_at"):
            value = getattr(self, key)
            out[key] = value.isoformat() if value else None
        nr = self.sm2.next_review
        out["sm2"] = {**asdict(self.sm2), "next_review": nr.isoformat() if nr else None}
        return out


@dataclass(frozen=True, kw_only=True)
class Link:
    """A contradiction or supersession of a hit: ``kind`` is ``contradicts``, ``supersedes``
    or ``superseded_by``; ``summary`` the other memory's first line."""

    kind: str
    id: str
    summary: str
    evidence: str = ""
    """For a supersession detected at ingest: the slot, the values, the cue and the
    confidence ("ana / home: boston -> denver, cue 'moved to', confidence 0.95")."""

    def render(self) -> str:
        label = {"contradicts": "CONTRADICTS", "supersedes": "supersedes",
                 "superseded_by": "SUPERSEDED BY"}.get(self.kind, self.kind)
        why = f" (detected: {self.evidence})" if self.evidence else ""
        return f"{label} [{self.id}]: {self.summary}{why}"


@dataclass(frozen=True, kw_only=True)
class Explanation:
    """Why a memory was recalled and how its score was made."""

    cosine: float | None
    keyword: float | None
    seed: float | None
    path: tuple[str, str] | None  # (source memory id, relation type) when reached by spreading
    entity: str | None
    activation: float
    importance: float
    retention: float
    utility: float
    mode: str
    score: float
    links: tuple[Link, ...] = ()
    rerank: float | None = None  # the cross-encoder's logit, when a reranker ran
    uses: int = 0  # reported uses and feedback 4-5 (the lifecycle mode's prior)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["path"] = list(self.path) if self.path else None
        # (a link's evidence only when there is some: a detected supersession)
        out["links"] = [{k: v for k, v in asdict(x).items() if k != "evidence" or v}
                        for x in self.links]
        return out

    def __str__(self) -> str:
        parts = []
        if self.cosine is not None:
            parts.append(f"cos={self.cosine:.2f}")
        if self.keyword:
            parts.append(f"kw={self.keyword:.2f}")
        if self.path:
            parts.append(f"via {self.path[1]} from {self.path[0][:8]}")
        elif self.entity:
            parts.append(f"entity {self.entity}")
        parts.append(f"act={self.activation:.2f}")
        parts.append(f"R={self.retention:.2f}")
        parts.append(f"util={self.utility:.2f}")
        if self.uses:
            parts.append(f"uses={self.uses}")
        if self.rerank is not None:
            parts.append(f"rerank={self.rerank:.2f}")
        parts.append(f"score={self.score:.3f}")
        parts += [x.render() for x in self.links]
        return " ".join(parts)


@dataclass(frozen=True, kw_only=True)
class Hit:
    """One recalled memory."""

    memory: Memory
    score: float
    explanation: Explanation
    contradictions: tuple[str, ...] = ()
    supersedes: tuple[str, ...] = ()
    superseded_by: str | None = None

    @property
    def id(self) -> str:
        return self.memory.id

    @property
    def text(self) -> str:
        return self.memory.text


@dataclass(frozen=True, kw_only=True)
class RecallResult:
    """What ``recall`` returns: the top hits, the episode section, and a text rendering."""

    query: str
    tenant: str
    mode: str
    memories: list[Hit]
    episodes: list[Hit] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.memories)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.memories)

    @property
    def ids(self) -> list[str]:
        return [h.memory.id for h in self.memories]

    def render(self) -> str:
        """The ``RELEVANT EPISODES`` then ``RELEVANT MEMORY`` sections, for a prompt."""
        lines: list[str] = []
        if self.episodes:
            lines.append("RELEVANT EPISODES")
            for h in self.episodes:
                when = h.memory.created_at.strftime("%Y-%m-%d %H:%M")
                lines.append(f"- [{when}] {h.memory.text}")
        if self.memories:
            if lines:
                lines.append("")
            lines.append("RELEVANT MEMORY")
            for h in self.memories:
                lines.append(f"- {h.memory.text}")
                lines += [f"  {x.render()}" for x in h.explanation.links]
        return "\n".join(lines)


@dataclass(frozen=True, kw_only=True)
class Relation:
    tenant: str
    src: str
    dst: str
    type: str
    strength: float
    created_at: datetime


@dataclass(frozen=True, kw_only=True)
class Event:
    """One audit row of ``memory_events``."""

    memory_id: str
    event: str
    at: datetime
    before: dict[str, Any] | None
    after: dict[str, Any] | None


@dataclass(frozen=True, kw_only=True)
class ItemWrite:
    """One write of a keyed item (:attr:`MemoryEngine.items`): ``value`` ``None`` deletes it.

    ``text`` is what is embedded and searched; ``None`` keeps the item out of ranked search
    (its value is then stored as the memory's text). ``ttl`` is in minutes (``None``: it
    never expires); each refresh sets the expiry ``ttl`` minutes from then."""

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any] | None
    text: str | None = None
    ttl: float | None = None


@dataclass(frozen=True, kw_only=True)
class KeyedItem:
    """A keyed item as stored: its namespace, key and JSON value; ``score`` is the recall
    score in a search with a query (``None`` otherwise, or for items that are not indexed);
    ``expires_at`` is ``None`` for items without a TTL."""

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    memory_id: str
    score: float | None = None
    expires_at: datetime | None = None
