"""Deprecated home of the side-store: the tables and migrations are now in
:mod:`mnemonia.store.schema`, the statements in :mod:`mnemonia.store.repository`. Kept so that
``from mnemonia.store import sql`` goes on working."""

from __future__ import annotations

from mnemonia.store.repository import MAX_KEYWORD_POSTINGS, SideStore, chunks
from mnemonia.store.schema import (
    MIGRATIONS,
    access_log,
    collections,
    keyword_terms,
    kv,
    memories,
    memory_entities,
    memory_events,
    memory_vectors,
    metadata,
    relations,
    schema_migrations,
    tenant_token,
)

__all__ = [
    "MAX_KEYWORD_POSTINGS",
    "MIGRATIONS",
    "SideStore",
    "access_log",
    "chunks",
    "collections",
    "keyword_terms",
    "kv",
    "memories",
    "memory_entities",
    "memory_events",
    "memory_vectors",
    "metadata",
    "relations",
    "schema_migrations",
    "tenant_token",
]
