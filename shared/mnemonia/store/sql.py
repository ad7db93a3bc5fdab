"""Deprecated home of the side-store: the tables and migrations are now in
:mod:`mnemonia.store.schema`, the statements in the store classes that
:mod:`mnemonia.store.repository` composes. Kept so that ``from mnemonia.store import sql`` goes
on working."""

from __future__ import annotations

from mnemonia.store.keyword_index import MAX_KEYWORD_POSTINGS
from mnemonia.store.repository import SideStore
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
from mnemonia.store.statements import chunks

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
