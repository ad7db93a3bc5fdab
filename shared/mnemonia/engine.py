"""`MemoryEngine`: the one public entry point of Mnemonia.

A Chroma collection per tenant holds the vectors; a SQL side-store holds everything else
(lifecycle state, relations, logs, the keyword index). Scoring comes from the pure
:mod:`mnemonia.scoring` core; this module does the I/O around it.

Example:
    >>> from mnemonia import MemoryEngine
    >>> from mnemonia.embeddings import HashingEmbedder
    >>> import tempfile
    >>> with MemoryEngine.open(tempfile.mkdtemp(), embedder=HashingEmbedder()) as engine:
    ...     _ = engine.add("Alice prefers tea over coffee", tenant="alice", importance=0.8)
    ...     engine.recall("what does Alice drink?", tenant="alice").memories[0].memory.text
    'Alice prefers tea over coffee'
"""

from __future__ import annotations

import asyncio
import builtins
import fcntl
import json
import logging
import math
import os
import re
import threading
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import sqlalchemy as sa

from mnemonia import entities as ent
from mnemonia.clock import Clock, SystemClock, ensure_aware
from mnemonia.config import TENANT_PATTERN, MnemoniaConfig
from mnemonia.embeddings import Embedder, QueryCache, as_embedder
from mnemonia.errors import (
    CrossTenantError,
    EmbeddingModelMismatchError,
    FutureTimeError,
    InvalidImportanceError,
    InvalidInputError,
    InvalidTenantError,
    InvalidTextError,
    MemoryNotFoundError,
    MnemoniaError,
    StoreError,
)
from mnemonia.models import KINDS, Event, Explanation, Hit, Memory, RecallResult, Relation
from mnemonia.scoring import activation as act
from mnemonia.scoring import modes as modes_mod
from mnemonia.scoring import reevaluation as reeval
from mnemonia.scoring import retention as ret
from mnemonia.scoring import sm2
from mnemonia.store import sql as S
from mnemonia.store.vector import VectorIndex

__all__ = ["MemoryEngine"]

log = logging.getLogger("mnemonia")

_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")
_HIDDEN_RELATIONS = ("contradicts", "supersedes")
_SAME_ENTITY_LINKS = 5  # same_entity edges made per entity for a new memory
_NEIGHBOURS = 6  # nearest neighbours read at ingest for novelty and related_to
_NAME_MATCH_STRENGTH = 0.5  # entity similarity credited when a query word names the entity
_EDGES_PER_SOURCE = 16  # strongest relations one memory spreads along per hop in recall
_QUERY_ENTITIES = 4  # entities one query may activate (the strongest by s * weight)
_MIN_ENTITY_WEIGHT = 0.05  # entities linked to nearly every memory carry no signal
_ENTITY_POOL = 5  # linked memories read per entity: entity_fanout * this, best fused kept
# Every column of ``memories`` by name (PostgreSQL adds a tsvector column recall never reads).
_MEMORY_COLUMNS = ", ".join(f"m.{c.name}" for c in S.memories.columns)
_MEMORY_COLUMNS_EDGES = _MEMORY_COLUMNS + (
    ", (EXISTS (SELECT 1 FROM relations AS r WHERE r.tenant = m.tenant AND r.src = m.id)"
    " OR EXISTS (SELECT 1 FROM relations AS r WHERE r.tenant = m.tenant AND r.dst = m.id))"
    " AS has_edges")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December")  # not %B: that follows the locale


def _ts(dt: datetime) -> float:
    return dt.timestamp()


def _dt(ts: float | None) -> datetime | None:
    return None if ts is None else datetime.fromtimestamp(ts, tz=timezone.utc)


def _finite_unit(value: Any, name: str, exc: type[MnemoniaError] = InvalidInputError) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or not 0.0 <= float(value) <= 1.0:
        raise exc(f"{name}={value!r}: must be a finite number in [0, 1]")
    return float(value)


@dataclass
class _Prepared:
    """One validated memory waiting to be written."""

    id: str
    text: str
    embed_text: str
    kind: str
    topic: str | None
    entities: builtins.list[str]
    importance: float
    at: float
    session_id: str | None
    metadata: dict[str, Any]
    pinned: bool
    vector: np.ndarray | None = None


@dataclass
class _EntityIndex:
    """Per-tenant entity names, document frequencies and label vectors, kept in memory."""

    labels: builtins.list[str]
    names: builtins.list[str]
    df: dict[str, int]
    matrix: np.ndarray | None
    active: int | None = None  # active memories of the tenant, read once (recall's IDF)
    # first 3+ character word of a name -> (name, all its 3+ character words), built once
    by_word: dict[str, list[tuple[str, tuple[str, ...]]]] | None = None


class _StoreLock:
    """An exclusive advisory lock on an embedded store folder: one writing process at a time."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / ".mnemonia.lock"
        self._fh = open(self.path, "a+")  # noqa: SIM115 - held for the engine's lifetime
        try:
            fcntl.flock(self._fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as e:
            self._fh.close()
            raise StoreError(
                f"the embedded store at {str(folder)!r} is open in another process; an embedded "
                "store allows one process at a time (close the other engine, or use server mode: "
                "MemoryEngine.open(chroma_url=..., sql_url=...))"
            ) from e

    def release(self) -> None:
        if not self._fh.closed:
            fcntl.flock(self._fh.fileno(), fcntl.LOCK_UN)
            self._fh.close()


class MemoryEngine:
    """Long-term memory: add, recall (spreading activation), feedback, forget, maintain.

    Open one with :meth:`open`. Thread-safe within one process; an embedded store is opened by
    one process at a time.
    """

    def __init__(
        self,
        *,
        vectors: VectorIndex,
        sql: S.SideStore,
        config: MnemoniaConfig,
        clock: Clock,
        embedder: Embedder,
        path: Path | None = None,
        lock: _StoreLock | None = None,
        entity_extractor: ent.EntityExtractor | None = None,
        summariser: Callable[[builtins.list[str]], str] | None = None,
    ) -> None:
        self.config = config
        self.clock = clock
        self.embedder = embedder
        self.path = path
        self._vectors = vectors
        self._sql = sql
        self._lock = lock
        self._write = threading.RLock()
        self._query_cache = QueryCache(config.query_cache_size)
        self._entities: dict[str, _EntityIndex] = {}
        self._extract = entity_extractor or ent.extract_entities
        self.summariser = summariser
        self._closed = False
        self._type_weights = dict(config.relation_types)
        self._known_tenants: set[str] = set()

    # ------------------------------------------------------------------------------------
    # opening and closing
    # ------------------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        chroma_url: str | None = None,
        sql_url: str | None = None,
        config: MnemoniaConfig | None = None,
        clock: Clock | None = None,
        embedder: Any = None,
        entity_extractor: ent.EntityExtractor | None = None,
        summariser: Callable[[builtins.list[str]], str] | None = None,
        namespace: str = "mnemonia",
    ) -> MemoryEngine:
        """Open (or create) a store.

        Args:
            path: Folder of an embedded store (Chroma + SQLite inside); default ``./memory``.
            chroma_url: A Chroma server, e.g. ``http://127.0.0.1:8000`` (server mode).
            sql_url: Any SQLAlchemy URL for the side-store (e.g. ``postgresql+psycopg://...``);
                in server mode without it, a SQLite file in ``path`` is used.
            config: Tunables; default :class:`MnemoniaConfig` loaded from ``MNEMONIA_*``.
            clock: Where ``now`` comes from; default the system clock (UTC).
            embedder: ``None`` for the bundled all-MiniLM-L6-v2, or any LangChain
                ``Embeddings`` / LlamaIndex ``BaseEmbedding`` / Mnemonia embedder.
            entity_extractor: ``text -> ['type:name', ...]``; default rule-based.
            summariser: ``texts -> text`` used by consolidation for concept texts.
            namespace: Prefix of the Chroma collection names (``<namespace>-<tenant>``), so
                several stores can share one Chroma server.
        """
        cfg = config if config is not None else MnemoniaConfig.load()
        if not isinstance(cfg, MnemoniaConfig):
            raise InvalidInputError(f"config must be a MnemoniaConfig, got {type(cfg).__name__}")
        if not isinstance(namespace, str) or not TENANT_PATTERN.match(namespace):
            raise InvalidInputError(
                f"namespace={namespace!r}: must be 1-64 letters, digits, '_' or '-'")
        emb = as_embedder(embedder)
        folder: Path | None = None
        lock: _StoreLock | None = None
        if chroma_url is None:
            folder = Path(path if path is not None else "./memory").expanduser().resolve()
            folder.mkdir(parents=True, exist_ok=True)
            lock = _StoreLock(folder)
        elif path is not None:
            folder = Path(path).expanduser().resolve()
            folder.mkdir(parents=True, exist_ok=True)
        if sql_url is None:
            if folder is None:
                raise InvalidInputError(
                    "server mode needs sql_url (e.g. 'postgresql+psycopg://user@host/db') or a "
                    "path for a local SQLite side-store"
                )
            sql_url = f"sqlite:///{folder / 'mnemonia.sqlite3'}"
        try:
            side = S.SideStore(sql_url, attempts=cfg.retry_attempts,
                               max_wait=cfg.retry_max_wait)
            side.setup()
            vectors = VectorIndex(
                path=str(folder / "chroma") if chroma_url is None and folder else None,
                url=chroma_url, attempts=cfg.retry_attempts, max_wait=cfg.retry_max_wait,
                namespace=namespace,
            )
            engine = cls(vectors=vectors, sql=side, config=cfg, clock=clock or SystemClock(),
                         embedder=emb, path=folder, lock=lock,
                         entity_extractor=entity_extractor, summariser=summariser)
            engine._check_models()
            engine._repair()
        except BaseException:
            if lock is not None:
                lock.release()
            raise
        return engine

    def close(self) -> None:
        """Release the store. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        self._vectors.close()
        self._sql.dispose()
        if self._lock is not None:
            self._lock.release()

    def __enter__(self) -> MemoryEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        where = str(self.path) if self.path else self._vectors.mode
        return f"MemoryEngine({where!r}, embedder={self.embedder.name!r})"

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("this MemoryEngine is closed; open a new one")

    def _check_models(self) -> None:
        with self._sql.connect() as conn:
            rows = conn.execute(sa.select(S.collections)).fetchall()
        for row in rows:
            if row.embedding_model != self.embedder.name:
                raise EmbeddingModelMismatchError(
                    f"tenant {row.tenant!r} was embedded with {row.embedding_model!r} "
                    f"(dimension {row.dimension}) but this engine uses {self.embedder.name!r}. "
                    "Open it with the original embedder, or re-embed: engine.export(path) with "
                    "the old embedder, then MemoryEngine.open(new_path, embedder=new)"
                    ".import_(path, reembed=True)"
                )

    def _repair(self) -> None:
        """Finish or undo writes a crash left half-done (see DESIGN section 3)."""
        with self._sql.connect() as conn:
            rows = conn.execute(
                sa.select(S.memories.c.id, S.memories.c.tenant, S.memories.c.status)
                .where(S.memories.c.status != "committed")
            ).fetchall()
        if not rows:
            return
        by_tenant: dict[str, builtins.list[tuple[str, str]]] = {}
        for r in rows:
            by_tenant.setdefault(r.tenant, []).append((r.id, r.status))
        for tenant, items in by_tenant.items():
            col = self._collection(tenant, create=False)
            ids = [i for i, _ in items]
            present = self._vectors.existing(col, ids) if col is not None else set()
            finish = [i for i, st in items if st == "pending" and i in present]
            undo = [i for i, st in items if st == "pending" and i not in present]
            deleting = [i for i, st in items if st == "deleting"]
            if col is not None and deleting:
                self._vectors.delete(col, deleting)
            with self._sql.begin() as conn:
                if finish:
                    conn.execute(S.memories.update().where(S.memories.c.id.in_(finish))
                                 .values(status="committed"))
                self._purge_rows(conn, tenant, undo + deleting)
            log.info("repaired tenant %s: %d finished, %d undone, %d deletions completed",
                     tenant, len(finish), len(undo), len(deleting))

    # ------------------------------------------------------------------------------------
    # validation helpers
    # ------------------------------------------------------------------------------------
    def _tenant(self, tenant: Any) -> str:
        if not isinstance(tenant, str) or not TENANT_PATTERN.match(tenant):
            raise InvalidTenantError(
                f"tenant={tenant!r}: must be 1-64 characters of letters, digits, '_' or '-', "
                "starting and ending with a letter or digit"
            )
        return tenant

    def _text(self, text: Any, name: str = "text") -> str:
        if not isinstance(text, str):
            raise InvalidTextError(f"{name} must be a string, got {type(text).__name__}")
        if not text.strip():
            raise InvalidTextError(f"{name}={text!r}: must not be empty or whitespace only")
        if len(text) > self.config.max_text_chars:
            raise InvalidTextError(
                f"{name} has {len(text)} characters; the maximum is "
                f"{self.config.max_text_chars} (config max_text_chars)"
            )
        return text

    def _time(self, at: Any, now: datetime) -> float:
        if at is None:
            return _ts(now)
        value = ensure_aware(at, "at")
        if value > now:
            raise FutureTimeError(
                f"at={value.isoformat()} is in the future (now is {now.isoformat()}); "
                "only past or present times are allowed"
            )
        return _ts(value)

    def _prepare(self, item: Mapping[str, Any], now: datetime, index: int | None = None) -> _Prepared:
        where = "" if index is None else f"item {index}: "
        allowed = {"text", "importance", "kind", "topic", "entities", "session_id", "metadata",
                   "at", "pinned", "id", "speaker", "embedding"}
        unknown = set(item) - allowed
        if unknown:
            raise InvalidInputError(
                f"{where}unknown field(s) {sorted(unknown)}; allowed: {sorted(allowed)}")
        try:
            text = self._text(item.get("text"))
            importance = _finite_unit(item.get("importance", 0.5), "importance",
                                      InvalidImportanceError)
            kind = item.get("kind", "episode")
            if kind not in KINDS:
                raise InvalidInputError(f"kind={kind!r}: must be one of {', '.join(KINDS)}")
            topic = item.get("topic")
            if topic is not None and (not isinstance(topic, str) or not topic.strip()
                                      or len(topic) > 128):
                raise InvalidInputError(f"topic={topic!r}: must be None or a 1-128 char string")
            session_id = item.get("session_id")
            if session_id is not None and (not isinstance(session_id, str) or not session_id
                                           or len(session_id) > 256):
                raise InvalidInputError(
                    f"session_id={session_id!r}: must be None or a 1-256 char string")
            metadata = item.get("metadata") or {}
            if not isinstance(metadata, dict):
                raise InvalidInputError(f"metadata={metadata!r}: must be a dict")
            try:
                metadata = json.loads(json.dumps(metadata, allow_nan=False))
            except (TypeError, ValueError) as e:
                raise InvalidInputError(f"metadata is not JSON-safe: {e}") from e
            speaker = item.get("speaker")
            if speaker is not None:
                if not isinstance(speaker, str) or not speaker.strip():
                    raise InvalidInputError(f"speaker={speaker!r}: must be a non-empty string")
                metadata = {**metadata, "speaker": speaker}
            pinned = item.get("pinned", False)
            if not isinstance(pinned, bool):
                raise InvalidInputError(f"pinned={pinned!r}: must be True or False")
            mid = item.get("id")
            if mid is None:
                mid = uuid.uuid4().hex
            elif not isinstance(mid, str) or not _ID_PATTERN.match(mid):
                raise InvalidInputError(
                    f"id={mid!r}: must be 1-64 characters of letters, digits, '_', '.', ':', '-'")
            entities = ent.normalise_entities(item.get("entities"))
            at = self._time(item.get("at"), now)
            vector = item.get("embedding")
            if vector is not None:
                vector = np.asarray(vector, dtype=np.float32)
                if vector.ndim != 1 or not np.all(np.isfinite(vector)):
                    raise InvalidInputError("embedding must be a finite 1-d vector")
                norm = float(np.linalg.norm(vector))
                vector = vector / norm if norm else vector
        except MnemoniaError as e:
            if where:
                raise type(e)(f"{where}{e}") from e
            raise
        embed_text = f'{speaker} said, "{text}"' if speaker else text
        return _Prepared(id=mid, text=text, embed_text=embed_text, kind=kind, topic=topic,
                         entities=entities, importance=importance, at=at,
                         session_id=session_id, metadata=metadata, pinned=pinned, vector=vector)

    # ------------------------------------------------------------------------------------
    # collections and rows
    # ------------------------------------------------------------------------------------
    def _collection(self, tenant: str, *, create: bool) -> Any:
        if create:
            return self._vectors.collection(tenant, model=self.embedder.name,
                                            dimension=self.embedder.dimension, create=True)
        if tenant not in self._known_tenants:
            with self._sql.connect() as conn:
                known = conn.execute(sa.select(S.collections.c.tenant)
                                     .where(S.collections.c.tenant == tenant)).first()
            if known is None:
                return None
            self._known_tenants.add(tenant)
        return self._vectors.collection(tenant, model=self.embedder.name, dimension=0,
                                        create=False)

    def _row_to_memory(self, r: Any) -> Memory:
        return Memory(
            id=r.id, tenant=r.tenant, text=r.text, kind=r.kind, topic=r.topic,
            entities=tuple(json.loads(r.entities)), importance=r.importance,
            created_at=_dt(r.created_at), accessed_at=_dt(r.accessed_at),  # type: ignore[arg-type]
            access_count=r.access_count, stability=r.stability,
            sm2=sm2.SM2State(easiness=r.easiness, interval_days=r.interval_days,
                             repetitions=r.repetitions, next_review=_dt(r.next_review),
                             last_quality=r.last_quality),
            utility=r.utility, state=r.state, pinned=bool(r.pinned),
            deleted_at=_dt(r.deleted_at), superseded_by=r.superseded_by,
            consolidated_into=r.consolidated_into, session_id=r.session_id,
            metadata=json.loads(r.metadata), embedding_model=r.embedding_model,
        )

    def _rows(self, conn: Any, tenant: str, ids: Iterable[str], *, edges: bool = False
              ) -> dict[str, Any]:
        """Committed rows of ``ids`` in ``tenant``; with ``edges``, each row also says in
        ``has_edges`` whether any relation starts or ends at it (so spreading reads
        relations only for memories that have some)."""
        ids = list(dict.fromkeys(ids))
        out: dict[str, Any] = {}
        columns = _MEMORY_COLUMNS_EDGES if edges else _MEMORY_COLUMNS
        for chunk in S.chunks(ids):
            # Only the primary key in WHERE: with the tenant there too, SQLite may choose the
            # tenant index and scan the whole tenant. Tenant and status are checked here.
            for r in self._sql.fetch(conn, f"SELECT {columns} FROM memories AS m "
                                     f"WHERE m.id IN ({self._sql.in_marks(len(chunk))})",
                                     chunk, named=True):
                if r.tenant == tenant and r.status == "committed":
                    out[r.id] = r
        return out

    def _candidate_vectors(self, conn: Any, col: Any, ids: Sequence[str]
                           ) -> dict[str, np.ndarray]:
        """Vectors of ``ids``: from the side-store, and from Chroma for memories stored
        before the side-store kept vectors."""
        out = {i: np.frombuffer(b, dtype="<f4") for i, b in self._sql.vectors_get(conn, ids).items()}
        missing = [i for i in ids if i not in out]
        if missing:
            out.update(self._vectors.get_vectors(col, missing))
        return out

    def _row(self, conn: Any, tenant: str, memory_id: Any) -> Any:
        if not isinstance(memory_id, str) or not memory_id:
            raise InvalidInputError(f"id={memory_id!r}: must be a non-empty string")
        r = conn.execute(sa.select(S.memories).where(S.memories.c.id == memory_id,
                                                     S.memories.c.status == "committed")).first()
        if r is None or r.tenant != tenant:
            # Another tenant's memory is reported exactly like a missing one: no leak.
            raise MemoryNotFoundError(f"no memory with id {memory_id!r} in tenant {tenant!r}")
        return r

    def _event(self, conn: Any, tenant: str, memory_id: str, event: str, at: float,
               before: Mapping[str, Any] | None = None,
               after: Mapping[str, Any] | None = None) -> None:
        conn.execute(S.memory_events.insert().values(
            tenant=tenant, memory_id=memory_id, event=event, at=at,
            before=json.dumps(before, default=str) if before is not None else None,
            after=json.dumps(after, default=str) if after is not None else None))

    # ------------------------------------------------------------------------------------
    # writing
    # ------------------------------------------------------------------------------------
    def add(
        self,
        text: str,
        *,
        tenant: str,
        importance: float = 0.5,
        kind: str = "episode",
        topic: str | None = None,
        entities: Sequence[str] | None = None,
        session_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        at: datetime | None = None,
        pinned: bool = False,
        speaker: str | None = None,
        id: str | None = None,  # noqa: A002 - the public name
    ) -> Memory:
        """Store one memory and return it.

        Args:
            text: The memory, 1..``max_text_chars`` characters, not only whitespace.
            tenant: Whose memory; tenants never see each other.
            importance: In [0, 1].
            kind: ``episode`` (a turn or event), ``fact`` or ``concept``.
            topic: Optional topic; recall with ``topic=`` keeps that topic and untopiced ones.
            entities: ``type:name`` strings, e.g. ``["tool:redis"]``.
            session_id: Conversation or session the memory belongs to.
            metadata: JSON-safe dict kept with the memory.
            at: When it happened (past or now; importing history); default now.
            pinned: Pinned memories are never evicted.
            speaker: Who said it; embedded as ``Speaker said, "text"``.
            id: An explicit id (default a new UUID).
        """
        item: dict[str, Any] = {"text": text, "importance": importance, "kind": kind,
                                "topic": topic, "entities": entities, "session_id": session_id,
                                "metadata": dict(metadata) if metadata else {}, "at": at,
                                "pinned": pinned, "speaker": speaker, "id": id}
        return self._add_prepared(self._tenant(tenant), [self._prepare(item, self.clock.now())])[0]

    def add_many(self, items: Sequence[Mapping[str, Any]], *, tenant: str,
                 replace: bool = False) -> builtins.list[Memory]:
        """Store many memories with one batched embedding pass; all or nothing.

        Each item is a dict with the keyword arguments of :meth:`add` (``text`` required) and
        optionally a precomputed ``embedding``. With ``replace=True`` an item whose ``id``
        already exists in the tenant replaces that memory in place (text, vector, metadata;
        its history, access statistics and relations stay); the new vector is written before
        the old text goes, so a failure never loses the stored version.
        """
        tenant = self._tenant(tenant)
        if isinstance(items, Mapping) or isinstance(items, str) or not isinstance(items, Sequence):
            raise InvalidInputError("add_many takes a list of dicts, e.g. [{'text': '...'}]")
        now = self.clock.now()
        prepared = []
        for i, item in enumerate(items):
            if not isinstance(item, Mapping):
                raise InvalidInputError(f"item {i}: expected a dict with 'text', got {item!r}")
            prepared.append(self._prepare(item, now, i))
        if not prepared:
            return []
        if not isinstance(replace, bool):
            raise InvalidInputError(f"replace={replace!r}: must be True or False")
        if replace:
            return self._replace_or_add(tenant, prepared)
        return self._add_prepared(tenant, prepared)

    def _replace_or_add(self, tenant: str, items: builtins.list[_Prepared]
                        ) -> builtins.list[Memory]:
        ids = [p.id for p in items]
        if len(set(ids)) != len(ids):
            raise InvalidInputError("add_many: two items have the same id")
        with self._sql.connect() as conn:
            found: dict[str, str] = {}
            for chunk in S.chunks(ids):
                found.update({r[0]: r[1] for r in conn.execute(sa.select(
                    S.memories.c.id, S.memories.c.tenant).where(S.memories.c.id.in_(chunk)))})
        foreign = [i for i, t in found.items() if t != tenant]
        if foreign:
            raise InvalidInputError(f"id(s) {foreign[:5]} are taken; choose other ids")
        old = [p for p in items if p.id in found]
        new = [p for p in items if p.id not in found]
        done = {m.id: m for m in self._add_prepared(tenant, new)} if new else {}
        if old:
            todo = [p for p in old if p.vector is None]
            if todo:
                vecs = self.embedder.embed_documents([p.embed_text for p in todo])
                for p, v in zip(todo, vecs, strict=True):
                    p.vector = v
            nowts = _ts(self.clock.now())
            with self._write:
                col = self._collection(tenant, create=True)
                self._vectors.upsert(col, [p.id for p in old],
                                     np.stack([p.vector for p in old]).astype(np.float32),  # type: ignore[misc]
                                     [p.embed_text for p in old], [{"kind": p.kind} for p in old])
                with self._sql.begin() as conn:
                    prev = self._rows(conn, tenant, [p.id for p in old])
                    self._sql.fts_delete(conn, [p.id for p in old])
                    self._sql.fts_insert(conn, [(p.id, tenant, p.embed_text) for p in old])
                    self._sql.vectors_put(conn, [(p.id, p.vector) for p in old], replace=True)
                    for p in old:
                        conn.execute(S.memories.update().where(S.memories.c.id == p.id).values(
                            text=p.text, kind=p.kind, topic=p.topic,
                            entities=json.dumps(p.entities), importance=p.importance,
                            session_id=p.session_id, metadata=json.dumps(p.metadata),
                            pinned=p.pinned))
                        conn.execute(S.memory_entities.delete().where(
                            S.memory_entities.c.memory_id == p.id))
                        if p.entities:
                            conn.execute(S.memory_entities.insert(), [dict(
                                tenant=tenant, entity=e, memory_id=p.id) for e in p.entities])
                        r = prev.get(p.id)
                        self._event(conn, tenant, p.id, "updated", nowts,
                                    {"text": r.text if r is not None else None},
                                    {"text": p.text})
                    rows = self._rows(conn, tenant, [p.id for p in old])
                self._entities.pop(tenant, None)
            done.update({i: self._row_to_memory(r) for i, r in rows.items()})
        return [done[i] for i in ids]

    def _add_prepared(self, tenant: str, items: builtins.list[_Prepared]) -> builtins.list[Memory]:
        self._check_open()
        ids = [p.id for p in items]
        if len(set(ids)) != len(ids):
            raise InvalidInputError("add_many: two items have the same id")
        # Embed outside any transaction: nothing is written until every vector exists.
        todo = [p for p in items if p.vector is None]
        if todo:
            vecs = self.embedder.embed_documents([p.embed_text for p in todo])
            for p, v in zip(todo, vecs, strict=True):
                p.vector = v
        dim = self.embedder.dimension
        for p in items:
            assert p.vector is not None
            if p.vector.shape[0] != dim:
                raise InvalidInputError(
                    f"embedding of {p.id!r} has dimension {p.vector.shape[0]}; the embedder "
                    f"{self.embedder.name!r} has {dim}")
        with self._write:
            with self._sql.connect() as conn:
                clash = []
                for chunk in S.chunks(ids):
                    clash += [r[0] for r in conn.execute(
                        sa.select(S.memories.c.id).where(S.memories.c.id.in_(chunk)))]
            if clash:
                raise InvalidInputError(f"id(s) already exist: {clash[:5]}; ids must be unique")
            col = self._collection(tenant, create=True)
            matrix = np.stack([p.vector for p in items]).astype(np.float32)  # type: ignore[misc]
            states, neighbours = self._gatekeep(col, items, matrix)
            now = self.clock.now()
            mem_rows = self._insert_pending(tenant, items, states, neighbours, now)
            try:
                self._vectors.upsert(
                    col, ids, matrix, [p.embed_text for p in items],
                    [{"kind": p.kind} for p in items])
            except BaseException:
                with self._sql.begin() as conn:
                    self._purge_rows(conn, tenant, ids)
                raise
            with self._sql.begin() as conn:
                for chunk in S.chunks(ids):
                    conn.execute(S.memories.update().where(S.memories.c.id.in_(chunk))
                                 .values(status="committed"))
            self._entities.pop(tenant, None)
        return [self._row_to_memory(r) for r in mem_rows]

    def _gatekeep(self, col: Any, items: builtins.list[_Prepared], matrix: np.ndarray
                  ) -> tuple[builtins.list[str], builtins.list[builtins.list[tuple[str, float]]]]:
        """Gatekeeper state per item, and its nearest existing or earlier-in-batch memories."""
        ids_existing, sims_existing = self._vectors.query(col, matrix, _NEIGHBOURS)
        within = matrix @ matrix.T
        states: builtins.list[str] = []
        neighbours: builtins.list[builtins.list[tuple[str, float]]] = []
        for i, p in enumerate(items):
            near = list(zip(ids_existing[i], sims_existing[i], strict=True))
            near += [(items[j].id, float(within[i, j])) for j in range(i)]
            near.sort(key=lambda t: -t[1])
            near = near[:_NEIGHBOURS]
            max_sim = near[0][1] if near else 0.0
            g = reeval.gatekeeper_score(
                importance=p.importance, novelty=min(1.0, max(0.0, 1.0 - max_sim)),
                distinct_tokens=len(act.word_tokens(p.text)))
            states.append(reeval.gatekeeper_state(
                g, immediate_threshold=self.config.immediate_threshold,
                batch_threshold=self.config.batch_threshold))
            neighbours.append(near)
        return states, neighbours

    def _insert_pending(self, tenant: str, items: builtins.list[_Prepared], states: builtins.list[str],
                        neighbours: builtins.list[builtins.list[tuple[str, float]]], now: datetime) -> builtins.list[Any]:
        nowts = _ts(now)
        with self._sql.begin() as conn:
            coll = conn.execute(sa.select(S.collections).where(
                S.collections.c.tenant == tenant)).first()
            if coll is None:
                seq0 = 0
                conn.execute(S.collections.insert().values(
                    tenant=tenant, embedding_model=self.embedder.name,
                    dimension=self.embedder.dimension, created_at=nowts, next_seq=len(items)))
            else:
                seq0 = coll.next_seq
                conn.execute(S.collections.update().where(S.collections.c.tenant == tenant)
                             .values(next_seq=seq0 + len(items)))
            rows = []
            for i, (p, state) in enumerate(zip(items, states, strict=True)):
                rows.append(dict(
                    id=p.id, tenant=tenant, seq=seq0 + i, text=p.text, kind=p.kind,
                    topic=p.topic, entities=json.dumps(p.entities), importance=p.importance,
                    created_at=p.at, accessed_at=p.at, access_count=0, stability=1.0,
                    easiness=2.5, interval_days=0, repetitions=0, next_review=None,
                    last_quality=0, utility=0.5, state=state, pinned=p.pinned, deleted_at=None,
                    superseded_by=None, consolidated_into=None, session_id=p.session_id,
                    metadata=json.dumps(p.metadata), embedding_model=self.embedder.name,
                    enriched_at=None, last_reviewed_at=None, last_reevaluated_at=None,
                    heat_counter=0.0, heat_at=None, status="pending"))
            conn.execute(S.memories.insert(), rows)
            self._sql.vectors_put(conn, [(p.id, p.vector) for p in items])
            self._sql.fts_insert(conn, [(p.id, tenant, p.embed_text) for p in items])
            links = [dict(tenant=tenant, entity=e, memory_id=p.id)
                     for p in items for e in p.entities]
            if links:
                conn.execute(S.memory_entities.insert(), links)
            conn.execute(S.memory_events.insert(), [dict(
                tenant=tenant, memory_id=p.id, event="created", at=nowts, before=None,
                after=json.dumps({"state": st, "importance": p.importance, "kind": p.kind}))
                for p, st in zip(items, states, strict=True)])
            enrich = [(p, near) for p, st, near in zip(items, states, neighbours, strict=True)
                      if st == reeval.IMMEDIATE]
            if enrich:
                self._enrich(conn, tenant, enrich, nowts)
            result = conn.execute(sa.select(S.memories).where(
                S.memories.c.id.in_([p.id for p in items]))).fetchall()
        order = {p.id: i for i, p in enumerate(items)}
        return sorted(result, key=lambda r: order[r.id])

    def _enrich(self, conn: Any, tenant: str,
                items: Sequence[tuple[_Prepared, builtins.list[tuple[str, float]]]], nowts: float) -> None:
        """Entities, automatic relations and SM-2 scheduling for enriched memories."""
        edges: dict[tuple[str, str, str], float] = {}
        new_links: builtins.list[dict[str, Any]] = []
        for p, near in items:
            extracted = [e for e in self._extract(p.text) if e not in p.entities]
            if extracted:
                p.entities = p.entities + extracted
                new_links += [dict(tenant=tenant, entity=e, memory_id=p.id) for e in extracted]
                conn.execute(S.memories.update().where(S.memories.c.id == p.id)
                             .values(entities=json.dumps(p.entities)))
            for other, sim in near:
                if other != p.id and sim >= self.config.related_threshold:
                    edges[(p.id, other, "related_to")] = min(1.0, max(sim, 1e-6))
            if p.session_id is not None:
                prev = conn.execute(
                    sa.select(S.memories.c.id).where(
                        S.memories.c.tenant == tenant, S.memories.c.session_id == p.session_id,
                        S.memories.c.id != p.id, sa.or_(S.memories.c.created_at < p.at, sa.and_(
                            S.memories.c.created_at == p.at,  # same time: an earlier seq only
                            S.memories.c.seq < sa.select((me := S.memories.alias("me")).c.seq)
                            .where(me.c.id == p.id).scalar_subquery())))
                    .order_by(S.memories.c.created_at.desc(), S.memories.c.seq.desc()).limit(1)
                ).first()
                if prev is not None:
                    edges[(prev[0], p.id, "follows")] = 1.0
        if new_links:
            conn.execute(S.memory_entities.insert().prefix_with("OR IGNORE")
                         if self._sql.dialect == "sqlite" else S.memory_entities.insert(),
                         new_links)
        for p, _ in items:
            for e in p.entities:
                others = conn.execute(
                    sa.select(S.memory_entities.c.memory_id).where(
                        S.memory_entities.c.tenant == tenant, S.memory_entities.c.entity == e,
                        S.memory_entities.c.memory_id != p.id)
                    .order_by(S.memory_entities.c.memory_id).limit(_SAME_ENTITY_LINKS)).fetchall()
                for (other,) in others:
                    edges.setdefault((p.id, other, "same_entity"), 0.5)
            conn.execute(S.memories.update().where(S.memories.c.id == p.id)
                         .values(enriched_at=nowts))
        self._insert_edges(conn, tenant, edges, nowts)

    def _insert_edges(self, conn: Any, tenant: str, edges: Mapping[tuple[str, str, str], float],
                      nowts: float) -> None:
        if not edges:
            return
        existing = set()
        keys = list(edges)
        srcs = list({k[0] for k in keys})
        for chunk in S.chunks(srcs):
            existing |= {(r.src, r.dst, r.type) for r in conn.execute(
                sa.select(S.relations.c.src, S.relations.c.dst, S.relations.c.type).where(
                    S.relations.c.tenant == tenant, S.relations.c.src.in_(chunk)))}
        rows = [dict(tenant=tenant, src=s, dst=d, type=t, strength=w, created_at=nowts)
                for (s, d, t), w in edges.items() if (s, d, t) not in existing and s != d]
        if rows:
            conn.execute(S.relations.insert(), rows)

    def _purge_rows(self, conn: Any, tenant: str, ids: Sequence[str]) -> None:
        """Remove every SQL trace of ``ids`` (used by hard forget and by rollback)."""
        ids = list(ids)
        if not ids:
            return
        for chunk in S.chunks(ids):
            conn.execute(S.relations.delete().where(S.relations.c.tenant == tenant, sa.or_(
                S.relations.c.src.in_(chunk), S.relations.c.dst.in_(chunk))))
            conn.execute(S.access_log.delete().where(S.access_log.c.memory_id.in_(chunk)))
            conn.execute(S.memory_events.delete().where(S.memory_events.c.memory_id.in_(chunk)))
            conn.execute(S.memory_entities.delete().where(
                S.memory_entities.c.memory_id.in_(chunk)))
            conn.execute(S.memories.delete().where(S.memories.c.id.in_(chunk)))
        self._sql.vectors_delete(conn, ids)
        self._sql.fts_delete(conn, ids)
        self._entities.pop(tenant, None)

    # ------------------------------------------------------------------------------------
    # reading
    # ------------------------------------------------------------------------------------
    def get(self, memory_id: str, *, tenant: str) -> Memory:
        """The memory with that id in that tenant (deleted ones too), or MemoryNotFoundError."""
        tenant = self._tenant(tenant)
        with self._sql.connect() as conn:
            return self._row_to_memory(self._row(conn, tenant, memory_id))

    def list(self, *, tenant: str, session_id: str | None = None, include_deleted: bool = False,
             limit: int | None = None) -> builtins.list[Memory]:
        """A tenant's memories in insertion order (optionally one session's)."""
        tenant = self._tenant(tenant)
        q = sa.select(S.memories).where(S.memories.c.tenant == tenant,
                                        S.memories.c.status == "committed")
        if session_id is not None:
            q = q.where(S.memories.c.session_id == session_id)
        if not include_deleted:
            q = q.where(S.memories.c.deleted_at.is_(None))
        q = q.order_by(S.memories.c.seq)
        if limit is not None:
            q = q.limit(limit)
        with self._sql.connect() as conn:
            return [self._row_to_memory(r) for r in conn.execute(q)]

    def history(self, memory_id: str, *, tenant: str) -> builtins.list[Event]:
        """The audit trail of one memory, oldest first."""
        tenant = self._tenant(tenant)
        with self._sql.connect() as conn:
            self._row(conn, tenant, memory_id)
            rows = conn.execute(sa.select(S.memory_events).where(
                S.memory_events.c.memory_id == memory_id, S.memory_events.c.tenant == tenant)
                .order_by(S.memory_events.c.id)).fetchall()
        return [Event(memory_id=r.memory_id, event=r.event, at=_dt(r.at),  # type: ignore[arg-type]
                      before=json.loads(r.before) if r.before else None,
                      after=json.loads(r.after) if r.after else None) for r in rows]

    def relations(self, memory_id: str, *, tenant: str) -> builtins.list[Relation]:
        """Every relation from or to one memory."""
        tenant = self._tenant(tenant)
        with self._sql.connect() as conn:
            self._row(conn, tenant, memory_id)
            rows = conn.execute(sa.select(S.relations).where(
                S.relations.c.tenant == tenant,
                sa.or_(S.relations.c.src == memory_id, S.relations.c.dst == memory_id))
                .order_by(S.relations.c.created_at, S.relations.c.type)).fetchall()
        return [Relation(tenant=r.tenant, src=r.src, dst=r.dst, type=r.type,
                         strength=r.strength, created_at=_dt(r.created_at))  # type: ignore[arg-type]
                for r in rows]

    def tenants(self) -> builtins.list[str]:
        with self._sql.connect() as conn:
            return [r[0] for r in conn.execute(sa.select(S.collections.c.tenant)
                                               .order_by(S.collections.c.tenant))]

    def stats(self, tenant: str | None = None) -> dict[str, Any]:
        """Counts: active, deleted, consolidated, superseded, relations, by state and kind."""
        if tenant is not None:
            tenant = self._tenant(tenant)
        m = S.memories
        cond = [m.c.status == "committed"]
        if tenant is not None:
            cond.append(m.c.tenant == tenant)
        with self._sql.connect() as conn:
            total = conn.execute(sa.select(sa.func.count()).where(*cond)).scalar_one()
            deleted = conn.execute(sa.select(sa.func.count()).where(
                *cond, m.c.deleted_at.is_not(None))).scalar_one()
            consolidated = conn.execute(sa.select(sa.func.count()).where(
                *cond, m.c.consolidated_into.is_not(None))).scalar_one()
            superseded = conn.execute(sa.select(sa.func.count()).where(
                *cond, m.c.superseded_by.is_not(None))).scalar_one()
            by_state: dict[str, int] = dict(conn.execute(sa.select(m.c.state, sa.func.count()).where(
                *cond, m.c.deleted_at.is_(None)).group_by(m.c.state)).all())
            by_kind: dict[str, int] = dict(conn.execute(sa.select(m.c.kind, sa.func.count()).where(
                *cond, m.c.deleted_at.is_(None)).group_by(m.c.kind)).all())
            rq = sa.select(sa.func.count()).select_from(S.relations)
            lq = sa.select(sa.func.count()).select_from(S.access_log)
            if tenant is not None:
                rq = rq.where(S.relations.c.tenant == tenant)
                lq = lq.where(S.access_log.c.tenant == tenant)
            rel_count = conn.execute(rq).scalar_one()
            log_count = conn.execute(lq).scalar_one()
            tenants = conn.execute(sa.select(sa.func.count()).select_from(S.collections)
                                   ).scalar_one() if tenant is None else 1
        return {"tenants": tenants, "memories": total, "active": total - deleted,
                "deleted": deleted, "consolidated": consolidated, "superseded": superseded,
                "relations": rel_count, "accesses": log_count,
                "by_state": {s: by_state.get(s, 0) for s in reeval.STATES},
                "by_kind": {k: by_kind.get(k, 0) for k in KINDS}}

    # ------------------------------------------------------------------------------------
    # recall
    # ------------------------------------------------------------------------------------
    def _query_vector(self, query: str) -> np.ndarray:
        vec = self._query_cache.get(query)
        if vec is None:
            vec = self.embedder.embed_query(query)
            self._query_cache.put(query, vec)
        return vec

    def _entity_index(self, conn: Any, tenant: str) -> _EntityIndex:
        idx = self._entities.get(tenant)
        if idx is not None:
            return idx
        rows = conn.execute(sa.select(S.memory_entities.c.entity, sa.func.count())
                            .select_from(S.memory_entities.join(
                                S.memories, S.memories.c.id == S.memory_entities.c.memory_id))
                            .where(S.memory_entities.c.tenant == tenant,
                                   S.memories.c.deleted_at.is_(None))
                            .group_by(S.memory_entities.c.entity)).fetchall()
        names = [r[0] for r in rows]
        labels = [ent.entity_label(n) for n in names]
        df = {r[0]: int(r[1]) for r in rows}
        # Label vectors outlive the index (which every add drops): only new labels are embedded.
        known: dict[str, np.ndarray] = self.__dict__.setdefault("_label_vectors", {})
        new = [lb for lb in dict.fromkeys(labels) if lb not in known]
        if new:
            known.update(zip(new, self.embedder.embed_documents(new), strict=True))
        matrix = np.stack([known[lb] for lb in labels]) if labels else None
        idx = _EntityIndex(labels=labels, names=names, df=df, matrix=matrix)
        self._entities[tenant] = idx
        return idx

    def recall(
        self,
        query: str,
        *,
        tenant: str,
        k: int | None = None,
        topic: str | None = None,
        entity: str | None = None,
        episode_k: int | None = None,
        mode: str | None = None,
        min_activation: float | None = None,
        touch: bool = True,
        user_id: str | None = None,
    ) -> RecallResult:
        """Recall by spreading activation (DESIGN section 5, steps 1-7).

        Args:
            query: What to recall for.
            tenant: Whose memories.
            k: How many memories (default ``config.default_k``).
            topic: Keep memories of this topic and untopiced ones; spreading into other topics
                is penalised.
            entity: Keep only memories linked to this ``type:name`` entity.
            episode_k: How many direct episode hits for the ``RELEVANT EPISODES`` section.
            mode: Score blend (``agent_memory``, ``general``, ``belief``, ``procedural``,
                ``relevance``); default ``config.default_mode``.
            min_activation: Activation floor; default ``config.min_activation``; 0 fills up
                to ``k``.
            touch: Record the access (count, stability, access log). Default True.
            user_id: Who asked (re-evaluation counts distinct users).
        """
        self._check_open()
        tenant = self._tenant(tenant)
        query = self._text(query, "query")
        cfg = self.config
        if k is None:
            k = cfg.default_k
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise InvalidInputError(f"k={k!r}: must be an integer >= 1")
        if episode_k is None:
            episode_k = cfg.episode_k
        if isinstance(episode_k, bool) or not isinstance(episode_k, int) or episode_k < 0:
            raise InvalidInputError(f"episode_k={episode_k!r}: must be an integer >= 0")
        mode_name = cfg.default_mode if mode is None else mode
        weights = modes_mod.mode_weights(mode_name)
        floor = cfg.min_activation if min_activation is None else _finite_unit(
            min_activation, "min_activation")
        if topic is not None and (not isinstance(topic, str) or not topic):
            raise InvalidInputError(f"topic={topic!r}: must be None or a non-empty string")
        if entity is not None:
            entity = ent.normalise_entities([entity])[0]
        if user_id is not None and not isinstance(user_id, str):
            raise InvalidInputError(f"user_id={user_id!r}: must be None or a string")
        if not isinstance(touch, bool):
            raise InvalidInputError(f"touch={touch!r}: must be True or False")
        now = self.clock.now()
        col = self._collection(tenant, create=False)
        if col is None:
            return RecallResult(query=query, tenant=tenant, mode=mode_name, memories=[])
        qvec = self._query_vector(query)
        qtok = act.query_tokens(query)

        with self._sql.connect() as conn:
            scored = self._activate(conn, col, tenant, query, qvec, qtok, k, topic, entity,
                                    floor, weights, now)
            hits = self._score(conn, tenant, scored, weights, mode_name, floor, now,
                               k=k, episode_k=episode_k)
        top = hits[:k]
        top_ids = {h.memory.id for h in top}
        episodes = [h for h in hits if h.memory.kind == "episode" and h.explanation.path is None
                    and h.memory.id not in top_ids][:episode_k]
        if touch and top:
            self._touch(tenant, top, k, user_id, now)
        return RecallResult(query=query, tenant=tenant, mode=mode_name, memories=top,
                            episodes=episodes)

    async def arecall(self, query: str, **kwargs: Any) -> RecallResult:
        """Async :meth:`recall` (runs the blocking model and store calls off the loop)."""
        return await asyncio.to_thread(self.recall, query, **kwargs)

    async def aadd(self, text: str, **kwargs: Any) -> Memory:
        """Async :meth:`add`."""
        return await asyncio.to_thread(self.add, text, **kwargs)

    async def aadd_many(self, items: Sequence[Mapping[str, Any]], *, tenant: str) -> builtins.list[Memory]:
        """Async :meth:`add_many`."""
        return await asyncio.to_thread(self.add_many, items, tenant=tenant)

    def _visible(self, r: Any, topic: str | None) -> bool:
        if r.deleted_at is not None or r.superseded_by is not None:
            return False
        return topic is None or r.topic is None or r.topic == topic

    def _activate(self, conn: Any, col: Any, tenant: str, query: str, qvec: np.ndarray,
                  qtok: builtins.list[str], k: int, topic: str | None, entity: str | None,
                  floor: float, weights: modes_mod.ModeWeights | None = None,
                  now: datetime | None = None
                  ) -> tuple[dict[str, act.Activation], dict[str, Any], dict[str, dict[str, Any]]]:
        cfg = self.config
        # 1. dense + keyword candidates, widened until enough visible ones remain
        n_dense = max(cfg.recall_initial_candidates * 2, 2 * k)
        rows: dict[str, Any] = {}
        cos: dict[str, float] = {}
        kw_hits = self._sql.keyword_search(
            conn, tenant, qtok, cfg.keyword_candidates and max(cfg.keyword_candidates, k),
            max_postings=cfg.keyword_postings)
        while True:
            ids, sims = self._vectors.query(col, qvec[None, :], n_dense)
            got = dict(zip(ids[0], sims[0], strict=True))
            # one read for the dense and the keyword candidates
            rows.update(self._rows(conn, tenant, [i for i in (*got, *(i for i, _ in kw_hits))
                                                  if i not in rows], edges=True))
            visible = [i for i in got if i in rows and self._visible(rows[i], topic)]
            if len(visible) >= min(n_dense // 2, k) or len(got) < n_dense:
                break
            n_dense *= 4
        cos.update({i: got[i] for i in visible})
        need_vec = [i for i, _ in kw_hits if i not in cos and i in rows
                    and self._visible(rows[i], topic)]
        if need_vec:
            vecs = self._candidate_vectors(conn, col, need_vec)
            cos.update({i: float(v @ qvec) for i, v in vecs.items()})
        info: dict[str, dict[str, Any]] = {}
        seeds: dict[str, float] = {}
        # 2. fusion
        kw_score = act.keyword_scorer(qtok)
        for mid, c in cos.items():
            r = rows[mid]
            kw = kw_score(self._keyword_text(r))
            fused = act.fuse(max(0.0, c), kw, keyword_weight=cfg.hybrid_keyword_weight)
            info[mid] = {"cosine": c, "keyword": kw, "seed": fused}
            if fused >= cfg.initial_threshold or floor == 0:
                seeds[mid] = fused
        # 3. entities (only boosts that could reach the top k are worth reading)
        self._entity_seeds(conn, col, tenant, qvec, qtok, kw_score, topic, rows, info, seeds, cos,
                           self._spread_bound(seeds, rows, k, floor, weights, now, entity))
        # 4. spreading: only the spread_frontier most activated memories spread per hop, each
        # along its _EDGES_PER_SOURCE strongest relations, and only where the spread value
        # could still matter (reach the top k, or pass the floor).
        topics = {mid: r.topic for mid, r in rows.items()}
        spread_types = self._spread_types()
        type_weight = {t: act.relation_weight(t, self._type_weights or None)
                       for t in spread_types}
        symmetric = sorted(act.SYMMETRIC_RELATIONS)
        bound = self._spread_bound(seeds, rows, k, floor, weights, now, entity)
        decay = cfg.spread_decay

        def neighbours(given: Collection[str]) -> builtins.list[act.Edge]:
            level = given if isinstance(given, Mapping) else dict.fromkeys(given, 1.0)
            frontier = {m for m, a in level.items() if a * decay >= bound
                        and m in rows and rows[m].has_edges}
            if not frontier:
                return []
            raw = []
            for chunk in S.chunks(sorted(frontier)):
                # outgoing edges, and the strongest few symmetric edges pointing at the frontier
                marks = self._sql.in_marks(len(chunk))
                raw += self._sql.fetch(conn, (
                    "SELECT src, dst, type, strength FROM relations "
                    f"WHERE tenant = ? AND src IN ({marks}) "
                    "UNION ALL SELECT src, dst, type, strength FROM ("
                    "SELECT src, dst, type, strength, ROW_NUMBER() OVER ("
                    "PARTITION BY dst ORDER BY strength DESC, src) AS n FROM relations "
                    f"WHERE tenant = ? AND dst IN ({marks}) "
                    f"AND type IN ({self._sql.in_marks(len(symmetric))})) AS incoming "
                    "WHERE n <= ?"),
                    (tenant, *chunk, tenant, *chunk, *symmetric, _EDGES_PER_SOURCE))
            # Each frontier memory spreads along its _EDGES_PER_SOURCE strongest edges only,
            # so a hub (a memory many others link to) costs no more than any other memory.
            by_source: dict[str, builtins.list[tuple[float, str, str, str, float]]] = {}
            symmetric_types = act.SYMMETRIC_RELATIONS
            for src, dst, rtype, strength in raw:  # (src, dst, type, strength) tuples
                tw = type_weight.get(rtype)
                if tw is None:
                    continue  # not a spreading type
                w = strength * tw
                if src in frontier and level[src] * w * decay >= bound:
                    by_source.setdefault(src, []).append((-w, dst, rtype, src, strength))
                if dst in frontier and rtype in symmetric_types \
                        and level[dst] * w * decay >= bound:
                    by_source.setdefault(dst, []).append((-w, src, rtype, src, strength))
            chosen: dict[tuple[str, str, str], act.Edge] = {}
            for source, out in by_source.items():
                out.sort()
                for _, other, rtype, src, strength in out[:_EDGES_PER_SOURCE]:
                    dst = other if src == source else source
                    if (src, dst, rtype) not in chosen:
                        chosen[(src, dst, rtype)] = act.Edge(src=src, dst=dst, type=rtype,
                                                             strength=strength)
            edges = list(chosen.values())
            others = {e.dst for e in edges} | {e.src for e in edges}
            new = [i for i in others if i not in rows]
            if new:
                rows.update(self._rows(conn, tenant, new, edges=True))
                topics.update({i: rows[i].topic for i in new if i in rows})
            return [e for e in edges
                    if e.src in rows and e.dst in rows
                    and self._visible(rows[e.src], topic) and self._visible(rows[e.dst], topic)]

        activations = act.spread(
            seeds, neighbours, depth=cfg.spread_depth, decay=cfg.spread_decay,
            type_weights=self._type_weights or None, topics=topics, query_topic=topic,
            cross_topic_penalty=cfg.cross_topic_penalty,
            max_frontier=cfg.spread_frontier)
        if entity is not None:
            linked = {r[0] for r in conn.execute(sa.select(S.memory_entities.c.memory_id).where(
                S.memory_entities.c.tenant == tenant, S.memory_entities.c.entity == entity))}
            activations = {m: a for m, a in activations.items() if m in linked}
        return activations, rows, info

    def _spread_bound(self, seeds: Mapping[str, float], rows: Mapping[str, Any], k: int,
                      floor: float, weights: modes_mod.ModeWeights | None,
                      now: datetime | None, entity: str | None) -> float:
        """The least spread activation that can still change what ``recall`` returns.

        Below ``floor`` a memory is dropped anyway. And since spreading only raises
        activations, the k-th best seed score is a floor for the k-th best final score; a
        memory whose activation ``a`` gives at most ``w_sim*a + (1 - w_sim)`` cannot beat it,
        so activations under ``(kth - (1 - w_sim)) / w_sim`` need not be spread at all.
        """
        if weights is None or now is None or entity is not None or weights.sim <= 0:
            return floor
        scores = sorted((self._final_score(rows[m], a, weights, now)
                         for m, a in seeds.items()
                         if m in rows and rows[m].consolidated_into is None), reverse=True)
        if len(scores) < k:
            return floor
        return max(floor, (scores[k - 1] - (1.0 - weights.sim)) / weights.sim)

    def _final_score(self, r: Any, activation: float, weights: modes_mod.ModeWeights,
                     now: datetime) -> float:
        """The mode's final score of one memory row at ``activation``."""
        if weights.conf == 0.0 and weights.rec == 0.0 and weights.util == 0.0:
            return weights.sim * min(1.0, activation)  # relevance: nothing else to read
        R = self._retention(r, now) if weights.rec > 0.0 else 0.0
        return modes_mod.final_score(activation=min(1.0, activation), importance=r.importance,
                                     retention=R, utility=r.utility, weights=weights)

    def _retention(self, r: Any, now: datetime) -> float:
        return ret.retention(accessed_at=_dt(r.accessed_at), now=now,  # type: ignore[arg-type]
                             importance=r.importance, stability=r.stability,
                             half_life=self.config.retention_half_life)

    def _spread_types(self) -> set[str]:
        return (set(act.RELATION_WEIGHTS) | set(self._type_weights))

    @staticmethod
    def _indexed_text(r: Any) -> str:
        speaker = json.loads(r.metadata).get("speaker") if r.metadata != "{}" else None
        return f'{speaker} said, "{r.text}"' if speaker else r.text

    def _keyword_text(self, r: Any) -> str:
        """The text a query's words are matched against in fusion: the indexed text plus,
        with ``keyword_dates``, the memory's date (``on 7 February 2022``, UTC), so a query
        that names a month or a year matches what was said then."""
        text = self._indexed_text(r)
        if not self.config.keyword_dates:
            return text
        when = datetime.fromtimestamp(r.created_at, tz=timezone.utc)
        return f"{text} on {when.day} {_MONTHS[when.month - 1]} {when.year}"

    def _entity_seeds(self, conn: Any, col: Any, tenant: str, qvec: np.ndarray,
                      qtok: builtins.list[str], kw_score: Callable[[str], float],
                      topic: str | None, rows: dict[str, Any],
                      info: dict[str, dict[str, Any]], seeds: dict[str, float],
                      cos: dict[str, float], bound: float = 0.0) -> None:
        """Step 3: entities the query names or resembles boost their memories.

        An entity's strength ``s`` is ``_NAME_MATCH_STRENGTH`` when every 3+ character word of
        its name is a query word, else the cosine of its label to the query when that reaches
        ``entity_similarity_threshold``. Its weight ``ln((N+1)/df) / ln(N+1)`` (N active
        memories, df of them linked to it) discounts entities spread over much of the tenant
        (a speaker's name in a long chat); under ``_MIN_ENTITY_WEIGHT`` it is ignored. The
        ``_QUERY_ENTITIES`` strongest entities (by ``s*weight``) each seed at most
        ``entity_fanout`` memories, best fused first: ``seed = max(seed,
        0.8*s*importance*weight)``. An entity whose boost could not reach ``bound`` (the
        activation a memory needs to reach the top k, or the floor) is skipped.
        """
        cfg = self.config
        if cfg.entity_fanout == 0:
            return
        idx = self._entity_index(conn, tenant)
        if not idx.names:
            return
        words = {t for t in act.word_tokens(" ".join(qtok)) if len(t) >= 3}
        if idx.by_word is None:
            by_word: dict[str, builtins.list[tuple[str, tuple[str, ...]]]] = {}
            for name, label in zip(idx.names, idx.labels, strict=True):
                parts = tuple(w for w in label.split() if len(w) >= 3)
                if parts:
                    by_word.setdefault(parts[0], []).append((name, parts))
            idx.by_word = by_word
        strength: dict[str, float] = {}
        for word in words:  # names whose every word is in the query
            for name, parts in idx.by_word.get(word, ()):
                if all(w in words for w in parts):
                    strength[name] = _NAME_MATCH_STRENGTH
        if idx.matrix is not None:
            sims = idx.matrix @ qvec
            for j in np.nonzero(sims >= cfg.entity_similarity_threshold)[0]:
                name = idx.names[int(j)]
                strength[name] = max(strength.get(name, 0.0), float(sims[j]))
        if not strength:
            return
        if idx.active is None:
            idx.active = self._active_count(conn, tenant)
        total = max(1, idx.active)
        weighted = []
        for name, s in strength.items():
            df = min(total, max(1, idx.df.get(name, 1)))
            weight = math.log((total + 1) / df) / math.log(total + 1)
            if weight >= _MIN_ENTITY_WEIGHT and 0.8 * s * weight >= bound:
                weighted.append((s * weight, name, s, weight))
        weighted.sort(key=lambda t: (-t[0], t[1]))
        me, m = S.memory_entities.c, S.memories.c
        for _, name, s, weight in weighted[:_QUERY_ENTITIES]:
            # only memories important enough for their boost to reach the bound
            least = bound / (0.8 * s * weight)
            linked = [r[0] for r in conn.execute(
                sa.select(me.memory_id).select_from(
                    S.memory_entities.join(S.memories, m.id == me.memory_id)).where(
                    me.tenant == tenant, me.entity == name, m.importance >= least)
                .limit(cfg.entity_fanout * _ENTITY_POOL))]
            new = [i for i in linked if i not in rows]
            if new:
                rows.update(self._rows(conn, tenant, new, edges=True))
            linked = [i for i in linked if i in rows and self._visible(rows[i], topic)]
            need = [i for i in linked if i not in cos]
            if need:
                vecs = self._candidate_vectors(conn, col, need)
                cos.update({i: float(v @ qvec) for i, v in vecs.items()})
            for i in linked:
                if i not in info:
                    kw = kw_score(self._keyword_text(rows[i]))
                    fused = act.fuse(max(0.0, cos.get(i, 0.0)), kw,
                                     keyword_weight=cfg.hybrid_keyword_weight)
                    info[i] = {"cosine": cos.get(i), "keyword": kw, "seed": None, "fused": fused}
            linked.sort(key=lambda i: (-(info[i]["seed"] or info[i].get("fused", 0.0)), i))
            for i in linked[:cfg.entity_fanout]:
                boost = 0.8 * s * rows[i].importance * weight
                if boost > seeds.get(i, 0.0) and boost >= bound:
                    seeds[i] = boost
                    info[i]["entity"] = name

    def _active_count(self, conn: Any, tenant: str) -> int:
        return int(conn.execute(sa.select(sa.func.count()).where(
            S.memories.c.tenant == tenant, S.memories.c.deleted_at.is_(None),
            S.memories.c.status == "committed")).scalar_one())

    def _score(self, conn: Any, tenant: str,
               scored: tuple[dict[str, act.Activation], dict[str, Any], dict[str, dict[str, Any]]],
               weights: modes_mod.ModeWeights, mode_name: str, floor: float, now: datetime,
               k: int | None = None, episode_k: int = 0) -> builtins.list[Hit]:
        """Score every activated memory; build hits for the top ``k`` (all when ``None``)
        and, after them, for the first ``episode_k`` direct episode hits (what ``recall``
        returns), so the work past scoring does not grow with the activated set."""
        activations, rows, info = scored
        prelim: builtins.list[tuple[float, str, act.Activation]] = []
        for mid, a in activations.items():
            if a.value < floor or mid not in rows:
                continue
            prelim.append((self._final_score(rows[mid], a.value, weights, now), mid, a))
        prelim.sort(key=lambda t: (-t[0], t[1]))
        present = {mid for _, mid, _ in prelim}
        prelim = [t for t in prelim if rows[t[1]].consolidated_into not in present]
        if k is not None:
            extra = [t for t in prelim[k:] if rows[t[1]].kind == "episode"
                     and not (t[2].source and t[2].relation)][:episode_k]
            prelim = prelim[:k] + extra
        ids = [mid for _, mid, _ in prelim]
        links = self._links(conn, tenant, ids)
        hits = []
        for score, mid, a in prelim:
            r = rows[mid]
            R = self._retention(r, now)
            meta = info.get(mid, {})
            exp = Explanation(
                cosine=meta.get("cosine"), keyword=meta.get("keyword"),
                seed=a.seed if a.seed > 0 else None,
                path=(a.source, a.relation) if a.source and a.relation else None,
                entity=meta.get("entity"), activation=a.value, importance=r.importance,
                retention=R, utility=r.utility, mode=mode_name, score=score)
            contra, sup = links.get(mid, ((), ()))
            hits.append(Hit(memory=self._row_to_memory(r), score=score, explanation=exp,
                            contradictions=contra, supersedes=sup,
                            superseded_by=r.superseded_by))
        return hits

    def _links(self, conn: Any, tenant: str, ids: Sequence[str]
               ) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
        if not ids:
            return {}
        contra: dict[str, builtins.list[str]] = {}
        sup: dict[str, builtins.list[str]] = {}
        hidden = self._sql.in_marks(len(_HIDDEN_RELATIONS))
        for chunk in S.chunks(list(ids)):
            marks = self._sql.in_marks(len(chunk))
            # Two index searches (by source, by target); one OR of both would scan the tenant.
            # (strength is read so that no index covers the query: SQLite would otherwise
            # scan the tenant's primary-key range for the target side.)
            for src, dst, rtype, _ in self._sql.fetch(conn, (
                    "SELECT src, dst, type, strength FROM relations WHERE tenant = ? "
                    f"AND src IN ({marks}) AND type IN ({hidden}) UNION SELECT src, dst, type, "
                    f"strength FROM relations WHERE tenant = ? AND dst IN ({marks}) "
                    f"AND type IN ({hidden})"),
                    (tenant, *chunk, *_HIDDEN_RELATIONS, tenant, *chunk, *_HIDDEN_RELATIONS)):
                if rtype == "contradicts":
                    contra.setdefault(src, []).append(dst)
                    contra.setdefault(dst, []).append(src)
                else:
                    sup.setdefault(src, []).append(dst)
        return {i: (tuple(dict.fromkeys(contra.get(i, ()))), tuple(sup.get(i, ())))
                for i in ids}

    def _touch(self, tenant: str, hits: Sequence[Hit], k: int, user_id: str | None,
               now: datetime) -> None:
        nowts = _ts(now)
        cfg = self.config
        # One statement for every hit (executemany); the stability update is the one of
        # scoring.retention.access (x growth, capped), done in SQL so it cannot race.
        sql = self._sql.sql
        with self._write, self._sql.begin() as conn:
            conn.exec_driver_sql(sql(
                "UPDATE memories SET access_count = access_count + 1, accessed_at = ?, "
                "stability = CASE WHEN stability * ? > ? THEN ? ELSE stability * ? END "
                "WHERE id = ?"),
                [(nowts, cfg.stability_growth, cfg.stability_cap, cfg.stability_cap,
                  cfg.stability_growth, h.memory.id) for h in hits])
            conn.exec_driver_sql(sql(
                "INSERT INTO access_log (tenant, memory_id, rank, k, score, user_id, at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)"),
                [(tenant, h.memory.id, rank, k, h.score, user_id, nowts)
                 for rank, h in enumerate(hits, start=1)])

    # ------------------------------------------------------------------------------------
    # feedback, relations, lifecycle
    # ------------------------------------------------------------------------------------
    def feedback(self, memory_id: str, quality: int, *, tenant: str) -> Memory:
        """One SM-2 review with ``quality`` 0..5 plus the utility update."""
        tenant = self._tenant(tenant)
        q = sm2.validate_quality(quality)
        now = self.clock.now()
        with self._write, self._sql.begin() as conn:
            r = self._row(conn, tenant, memory_id)
            mem = self._row_to_memory(r)
            new_state, _ = sm2.review(mem.sm2, q, now)
            utility, _ = sm2.update_utility(mem.utility, q)
            conn.execute(S.memories.update().where(S.memories.c.id == memory_id).values(
                easiness=new_state.easiness, interval_days=new_state.interval_days,
                repetitions=new_state.repetitions,
                next_review=_ts(new_state.next_review) if new_state.next_review else None,
                last_quality=new_state.last_quality, utility=utility, last_reviewed_at=_ts(now)))
            self._event(conn, tenant, memory_id, "feedback", _ts(now),
                        {"quality": None, "utility": mem.utility,
                         "interval_days": mem.sm2.interval_days, "easiness": mem.sm2.easiness},
                        {"quality": q, "utility": utility,
                         "interval_days": new_state.interval_days,
                         "easiness": new_state.easiness})
            r = self._row(conn, tenant, memory_id)
        return self._row_to_memory(r)

    def relate(self, src: str, dst: str, rel_type: str, *, tenant: str,
               strength: float = 1.0) -> Relation:
        """Add (or update) a typed relation ``src -> dst``."""
        tenant = self._tenant(tenant)
        act.relation_weight(rel_type, self._type_weights or None)
        s = act.validate_strength(strength)
        if src == dst:
            raise InvalidInputError(f"a memory cannot relate to itself (id {src!r})")
        now = self.clock.now()
        with self._write, self._sql.begin() as conn:
            for mid in (src, dst):
                if not isinstance(mid, str):
                    raise InvalidInputError(f"id={mid!r}: must be a string")
                r = conn.execute(sa.select(S.memories.c.tenant).where(
                    S.memories.c.id == mid, S.memories.c.status == "committed")).first()
                if r is not None and r.tenant != tenant:
                    raise CrossTenantError(
                        f"memory {mid!r} is not in tenant {tenant!r}; relations across tenants "
                        "are refused")
                self._row(conn, tenant, mid)
            key = sa.and_(S.relations.c.tenant == tenant, S.relations.c.src == src,
                          S.relations.c.dst == dst, S.relations.c.type == rel_type)
            if conn.execute(sa.select(S.relations.c.src).where(key)).first():
                conn.execute(S.relations.update().where(key).values(strength=s))
            else:
                conn.execute(S.relations.insert().values(tenant=tenant, src=src, dst=dst,
                                                         type=rel_type, strength=s,
                                                         created_at=_ts(now)))
        return Relation(tenant=tenant, src=src, dst=dst, type=rel_type, strength=s,
                        created_at=now)

    def supersede(self, old_id: str, new_id: str, *, tenant: str) -> Memory:
        """Mark ``old_id`` as superseded by ``new_id``: the old one leaves recall, the new one
        carries a ``supersedes`` link to it. Returns the old memory."""
        tenant = self._tenant(tenant)
        if old_id == new_id:
            raise InvalidInputError(f"a memory cannot supersede itself (id {old_id!r})")
        self.relate(new_id, old_id, "supersedes", tenant=tenant)
        now = self.clock.now()
        with self._write, self._sql.begin() as conn:
            conn.execute(S.memories.update().where(S.memories.c.id == old_id)
                         .values(superseded_by=new_id))
            self._event(conn, tenant, old_id, "superseded", _ts(now), {"superseded_by": None},
                        {"superseded_by": new_id})
            r = self._row(conn, tenant, old_id)
        return self._row_to_memory(r)

    def forget(self, memory_id: str, *, tenant: str, hard: bool = False) -> None:
        """Soft-delete (restorable) or, with ``hard=True``, remove vector, rows and logs."""
        tenant = self._tenant(tenant)
        now = self.clock.now()
        if not hard:
            with self._write, self._sql.begin() as conn:
                r = self._row(conn, tenant, memory_id)
                if r.deleted_at is None:
                    conn.execute(S.memories.update().where(S.memories.c.id == memory_id)
                                 .values(deleted_at=_ts(now)))
                    self._event(conn, tenant, memory_id, "deleted", _ts(now),
                                {"deleted_at": None}, {"deleted_at": now.isoformat()})
            self._entities.pop(tenant, None)
            return
        with self._write:
            with self._sql.begin() as conn:
                self._row(conn, tenant, memory_id)
                conn.execute(S.memories.update().where(S.memories.c.id == memory_id)
                             .values(status="deleting"))
            col = self._collection(tenant, create=False)
            if col is not None:
                self._vectors.delete(col, [memory_id])
            with self._sql.begin() as conn:
                self._purge_rows(conn, tenant, [memory_id])
                conn.execute(S.memories.update().where(S.memories.c.superseded_by == memory_id)
                             .values(superseded_by=None))
                conn.execute(S.memories.update().where(
                    S.memories.c.consolidated_into == memory_id).values(consolidated_into=None))

    def restore(self, memory_id: str, *, tenant: str) -> Memory:
        """Bring back a soft-deleted memory whole."""
        tenant = self._tenant(tenant)
        now = self.clock.now()
        with self._write, self._sql.begin() as conn:
            r = self._row(conn, tenant, memory_id)
            if r.deleted_at is not None:
                conn.execute(S.memories.update().where(S.memories.c.id == memory_id)
                             .values(deleted_at=None))
                self._event(conn, tenant, memory_id, "restored", _ts(now),
                            {"deleted_at": _dt(r.deleted_at).isoformat()},  # type: ignore[union-attr]
                            {"deleted_at": None})
            r = self._row(conn, tenant, memory_id)
        self._entities.pop(tenant, None)
        return self._row_to_memory(r)

    def pin(self, memory_id: str, *, tenant: str, pinned: bool = True) -> Memory:
        """Pin (never evicted) or unpin a memory."""
        tenant = self._tenant(tenant)
        if not isinstance(pinned, bool):
            raise InvalidInputError(f"pinned={pinned!r}: must be True or False")
        with self._write, self._sql.begin() as conn:
            self._row(conn, tenant, memory_id)
            conn.execute(S.memories.update().where(S.memories.c.id == memory_id)
                         .values(pinned=pinned))
            r = self._row(conn, tenant, memory_id)
        return self._row_to_memory(r)

    def update_metadata(self, memory_id: str, *, tenant: str,
                        metadata: Mapping[str, Any]) -> Memory:
        """Merge ``metadata`` keys into a memory's metadata; text and vector stay as they are.

        Writes one ``metadata_updated`` event with the previous and new values of the keys.
        ``speaker`` is part of the embedded text and cannot change here.
        """
        tenant = self._tenant(tenant)
        if not isinstance(metadata, Mapping):
            raise InvalidInputError(f"metadata={metadata!r}: must be a dict")
        if "speaker" in metadata:
            raise InvalidInputError(
                "metadata key 'speaker' is part of the embedded text and cannot be updated")
        try:
            patch = json.loads(json.dumps(dict(metadata), allow_nan=False))
        except (TypeError, ValueError) as e:
            raise InvalidInputError(f"metadata is not JSON-safe: {e}") from e
        now = self.clock.now()
        with self._write, self._sql.begin() as conn:
            r = self._row(conn, tenant, memory_id)
            before = json.loads(r.metadata)
            conn.execute(S.memories.update().where(S.memories.c.id == memory_id)
                         .values(metadata=json.dumps({**before, **patch})))
            self._event(conn, tenant, memory_id, "metadata_updated", _ts(now),
                        {k: before.get(k) for k in patch}, patch)
            r = self._row(conn, tenant, memory_id)
        return self._row_to_memory(r)

    # ------------------------------------------------------------------------------------
    # export / import
    # ------------------------------------------------------------------------------------
    def export(self, path: str | os.PathLike[str], *, tenant: str | None = None) -> int:
        """Write memories and relations as JSONL (with embeddings, model and dimension)."""
        tenants = [self._tenant(tenant)] if tenant is not None else self.tenants()
        count = 0
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(json.dumps({"type": "header", "embedding_model": self.embedder.name,
                                 "dimension": self.embedder.dimension}) + "\n")
            for t in tenants:
                mems = self.list(tenant=t, include_deleted=True)
                col = self._collection(t, create=False)
                vecs: dict[str, np.ndarray] = {}
                for chunk in S.chunks([m.id for m in mems], 1000):
                    vecs.update(self._vectors.get_vectors(col, chunk))
                for m in mems:
                    rec = {"type": "memory", **m.to_dict(),
                           "embedding": [round(float(x), 7) for x in vecs[m.id]]}
                    fh.write(json.dumps(rec) + "\n")
                    count += 1
                with self._sql.connect() as conn:
                    for r in conn.execute(sa.select(S.relations).where(S.relations.c.tenant == t)):
                        fh.write(json.dumps({"type": "relation", "tenant": t, "src": r.src,
                                             "dst": r.dst, "rel_type": r.type,
                                             "strength": r.strength}) + "\n")
        return count

    def import_(self, path: str | os.PathLike[str], *, reembed: bool = False) -> int:
        """Load a JSONL export. With another embedding model, pass ``reembed=True``."""
        with open(path, encoding="utf-8") as fh:
            records = [json.loads(line) for line in fh if line.strip()]
        header = records[0] if records and records[0].get("type") == "header" else {}
        same = header.get("embedding_model") == self.embedder.name
        if not same and not reembed:
            raise EmbeddingModelMismatchError(
                f"{str(path)!r} was exported with {header.get('embedding_model')!r}; this engine "
                f"uses {self.embedder.name!r}: pass reembed=True to embed the texts again")
        by_tenant: dict[str, builtins.list[dict[str, Any]]] = {}
        rels = []
        for rec in records:
            if rec.get("type") == "memory":
                item = {"id": rec["id"], "text": rec["text"], "importance": rec["importance"],
                        "kind": rec["kind"], "topic": rec["topic"],
                        "entities": rec["entities"], "session_id": rec["session_id"],
                        "metadata": {k: v for k, v in rec["metadata"].items() if k != "speaker"},
                        "at": datetime.fromisoformat(rec["created_at"]),
                        "pinned": rec["pinned"], "speaker": rec["metadata"].get("speaker")}
                if same and not reembed:
                    item["embedding"] = rec["embedding"]
                by_tenant.setdefault(rec["tenant"], []).append(item)
            elif rec.get("type") == "relation":
                rels.append(rec)
        count = 0
        for tenant, items in by_tenant.items():
            count += len(self.add_many(items, tenant=tenant))
        for rec in rels:
            self.relate(rec["src"], rec["dst"], rec["rel_type"], tenant=rec["tenant"],
                        strength=rec["strength"])
        return count

    # ------------------------------------------------------------------------------------
    # maintenance (the logic lives in mnemonia.maintenance; these are the public entry points)
    # ------------------------------------------------------------------------------------
    def evict(self, *, tenant: str, force: bool = True) -> Any:
        """Soft-delete the lowest-priority active memories (budget ``eviction_budget``)."""
        from mnemonia import maintenance
        return maintenance.evict(self, tenant=self._tenant(tenant), force=force)

    def consolidate(self, *, tenant: str,
                    summariser: Callable[[builtins.list[str]], str] | None = None) -> Any:
        """Merge near-duplicates into ``concept`` memories (non-destructive, idempotent)."""
        from mnemonia import maintenance
        return maintenance.consolidate(self, tenant=self._tenant(tenant),
                                       summariser=summariser or self.summariser)

    def review(self, *, tenant: str) -> Any:
        """One SM-2 review pass over the tenant's due memories."""
        from mnemonia import maintenance
        return maintenance.review(self, tenant=self._tenant(tenant))

    def enrich(self, *, tenant: str) -> Any:
        """Enrich the tenant's ``batched`` memories that are not enriched yet."""
        from mnemonia import maintenance
        return maintenance.enrich(self, tenant=self._tenant(tenant))

    def reevaluate(self) -> Any:
        """One re-evaluation tick over every tenant (promotes memories that got hot)."""
        from mnemonia import maintenance
        return maintenance.reevaluate(self)

    def maintain(self, tenant: str | None = None) -> Any:
        """Enrich, evict (only over ``max_memories``), consolidate, review and re-evaluate."""
        from mnemonia import maintenance
        return maintenance.maintain(self, tenant=None if tenant is None else self._tenant(tenant))

    def snapshot(self, tenant: str, *, limit: int | None = None) -> str:
        """The tenant's top enriched memories by priority, rendered as text."""
        from mnemonia import maintenance
        return maintenance.snapshot(self, tenant=self._tenant(tenant), limit=limit)

    def report_use(self, reply: str, recalled_ids: Sequence[str], *, tenant: str) -> builtins.list[str]:
        """Tell the engine which recalled memories a reply used (echoed); returns their ids."""
        from mnemonia import maintenance
        return maintenance.report_use(self, reply, recalled_ids, tenant=self._tenant(tenant))

    # used by maintenance
    @property
    def sql(self) -> S.SideStore:
        return self._sql

    @property
    def vectors(self) -> VectorIndex:
        return self._vectors
