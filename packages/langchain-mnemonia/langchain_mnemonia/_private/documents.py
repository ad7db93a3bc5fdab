"""Turn recall hits into LangChain ``Document`` objects."""

from __future__ import annotations

from typing import Any

from langchain_core.documents import Document
from mnemonia import Hit

__all__ = ["hit_to_document"]


def hit_to_document(hit: Hit, rank: int) -> Document:
    """A ``Document`` whose metadata carries the memory's id, score and score explanation.

    The memory's own metadata comes first; the keys Mnemonia sets win on a clash.
    """
    mem = hit.memory
    metadata: dict[str, Any] = {
        **mem.metadata,
        "id": mem.id,
        "score": hit.score,
        "rank": rank,
        "explanation": hit.explanation.to_dict(),
        "tenant": mem.tenant,
        "kind": mem.kind,
        "topic": mem.topic,
        "importance": mem.importance,
        "entities": list(mem.entities),
        "session_id": mem.session_id,
        "created_at": mem.created_at.isoformat(),
        "contradictions": list(hit.contradictions),
        "supersedes": list(hit.supersedes),
    }
    return Document(id=mem.id, page_content=mem.text, metadata=metadata)
