"""`MemoryEngine`: the one public entry point of Mnemonia, and only its front door: it opens
and closes a store, checks arguments, and makes one call per public method into the layer below
(ingest, recall, lifecycle, transfer, maintenance), which receive the store's
:class:`~mnemonia.runtime.Runtime`. No SQL here.

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
import dataclasses
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from mnemonia import consistency, ingest, lifecycle, maintenance, transfer
from mnemonia import entities as ent
from mnemonia import recall as recall_mod
from mnemonia import validation as check
from mnemonia.clock import Clock, SystemClock
from mnemonia.config import MnemoniaConfig, config_file
from mnemonia.embeddings import as_embedder, as_reranker
from mnemonia.errors import InvalidInputError
from mnemonia.items import ItemStore
from mnemonia.maintenance.scheduler import Scheduler
from mnemonia.models import Event, Memory, RecallResult, Relation
from mnemonia.runtime import Runtime, Summariser, store_folder
from mnemonia.scoring import sm2
from mnemonia.store.repository import SideStore
from mnemonia.store.vectors import VectorIndex

__all__ = ["MemoryEngine"]


_SHARED: dict[Path, MemoryEngine] = {}
_SHARED_LOCK = threading.Lock()


class MemoryEngine:
    """Long-term memory: add, recall (spreading activation), feedback, forget, maintain.

    Open one with :meth:`open`. Thread-safe within one process; an embedded store is opened by
    one process at a time.
    """

    def __init__(self, runtime: Runtime) -> None:
        self._rt = runtime
        self.config: MnemoniaConfig = runtime.config
        self.clock: Clock = runtime.clock
        self.embedder: Any = runtime.embedder
        self.path: Path | None = runtime.path
        self.scheduler: Scheduler | None = None  # background maintenance, when it runs
        self.items = ItemStore(runtime)  # keyed JSON items in namespaces (LangGraph's model)

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
        summariser: Summariser | None = None,
        namespace: str = "mnemonia",
        maintenance: str | None = None,
        rerank: Any = None,
        verify: bool = True,
    ) -> MemoryEngine:
        """Open (or create) a store.

        Args:
            path: Folder of an embedded store (Chroma + SQLite inside); default ``./memory``.
            chroma_url: A Chroma server, e.g. ``http://127.0.0.1:8000`` (server mode).
            sql_url: Any SQLAlchemy URL for the side-store (e.g. ``postgresql+psycopg://...``);
                in server mode without it, a SQLite file in ``path`` is used.
            config: Tunables; default: ``MNEMONIA_CONFIG`` or ``<path>/mnemonia.json`` (if
                there is one), then ``MNEMONIA_*`` (:meth:`MnemoniaConfig.load`).
            clock: Where ``now`` comes from; default the system clock (UTC).
            embedder: ``None`` for the bundled all-MiniLM-L6-v2 (run by
                ``config.embedder_backend``), or any LangChain ``Embeddings`` / LlamaIndex
                ``BaseEmbedding`` / Mnemonia embedder.
            entity_extractor: ``text -> ['type:name', ...]``; default rule-based.
            summariser: ``texts -> text`` used by consolidation for concept texts.
            namespace: Chroma collection prefix (``<namespace>-<tenant>``) on a shared server.
            maintenance: ``background`` (the default: jobs run by themselves, see
                :class:`~mnemonia.Scheduler`) or ``manual``; default ``config.maintenance``.
            rerank: A sentence-transformers ``CrossEncoder`` or ``(query, texts) -> scores``:
                re-scores the best ``rerank_candidates`` as ``0.4*score + 0.6*sigmoid(logit)``.
            verify: Compare Chroma with the side-store (counts first): lost vectors are
                rebuilt; vectors of no memory stop the open (``StoreInconsistentError``).
        """
        cfg = config if config is not None else MnemoniaConfig.load(config_file(path, chroma_url))
        if not isinstance(cfg, MnemoniaConfig):
            raise InvalidInputError(f"config must be a MnemoniaConfig, got {type(cfg).__name__}")
        check.namespace(namespace)
        if maintenance is not None:
            cfg = dataclasses.replace(cfg, maintenance=maintenance)
        verify = check.boolean(verify, "verify")
        emb = as_embedder(embedder, backend=cfg.embedder_backend,
                          onnx_cache_dir=cfg.onnx_cache_dir)
        rt = Runtime.open(path, chroma_url=chroma_url, sql_url=sql_url, config=cfg,
                          clock=clock or SystemClock(), embedder=emb,
                          entity_extractor=entity_extractor, summariser=summariser,
                          namespace=namespace, reranker=as_reranker(rerank))
        engine = cls(consistency.open_store(rt, verify_stores=verify))
        if cfg.maintenance == "background":
            engine.scheduler = Scheduler(engine, poll_interval=cfg.maintenance_poll_seconds,
                                         run_at_start=False, follow_clock=True).start()
        return engine

    @classmethod
    def shared(cls, path: str | os.PathLike[str] | None = None, **options: Any) -> MemoryEngine:
        """This process's one engine for the embedded store at ``path`` (default ``./memory``),
        opened on first use with ``options`` (of :meth:`open`); adapters share it."""
        folder = store_folder(path)
        with _SHARED_LOCK:
            engine = _SHARED.get(folder)
            if engine is None or engine.closed:
                engine = _SHARED[folder] = cls.open(folder, **options)
            return engine

    def close(self) -> None:
        """Stop the background maintenance, release the store. Safe to call twice."""
        if self.scheduler is not None:
            self.scheduler.stop()
        consistency.close_store(self._rt)

    def __enter__(self) -> MemoryEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        where = str(self.path) if self.path else self._rt.vectors.mode
        return f"MemoryEngine({where!r}, embedder={self.embedder.name!r})"

    @property
    def runtime(self) -> Runtime:
        """The store's runtime (config, clock, embedder, stores) the layers below receive."""
        return self._rt

    @property
    def closed(self) -> bool:
        return self._rt.closed

    @property
    def summariser(self) -> Summariser | None:
        return self._rt.summariser

    @summariser.setter
    def summariser(self, value: Summariser | None) -> None:
        self._rt.summariser = value

    @property
    def sql(self) -> SideStore:
        """The SQL side-store (its repository of statements)."""
        return self._rt.sql

    @property
    def vectors(self) -> VectorIndex:
        """The Chroma vector index."""
        return self._rt.vectors

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
        id: str | None = None,
    ) -> Memory:
        """Store one memory and return it.

        Args:
            text: The memory, 1..``max_text_chars`` characters, not only whitespace.
            tenant: Whose memory; tenants never see each other.
            importance: In [0, 1]. kind: ``episode`` (a turn or event), ``fact``, ``concept``.
            topic: Optional topic; recall with ``topic=`` keeps that topic and untopiced ones.
            entities: ``type:name`` strings, e.g. ``["tool:redis"]``.
            session_id: Its conversation or session. metadata: a JSON-safe dict.
            at: When it happened (past or now; importing history); default now.
            pinned: Pinned memories are never evicted.
            speaker: Who said it (embedded as ``Speaker said, "text"``). id: default a UUID.
        """
        item: dict[str, Any] = {"text": text, "importance": importance, "kind": kind,
                                "topic": topic, "entities": entities, "session_id": session_id,
                                "metadata": metadata, "at": at,
                                "pinned": pinned, "speaker": speaker, "id": id}
        tenant = check.tenant(tenant)
        prepared = check.prepare(item, self._rt.now(), config=self.config)
        return ingest.add(self._rt, tenant, [prepared])[0]

    def add_many(self, items: Sequence[Mapping[str, Any]], *, tenant: str,
                 replace: bool = False) -> builtins.list[Memory]:
        """Store many memories with one batched embedding pass; all or nothing.

        Each item is a dict with the keyword arguments of :meth:`add` (``text`` required) and
        optionally a precomputed ``embedding``. With ``replace=True`` an item whose ``id``
        already exists in the tenant replaces that memory in place (text, vector, metadata;
        its history, access statistics and relations stay); the new vector is written before
        the old text goes, so a failure never loses the stored version.
        """
        tenant = check.tenant(tenant)
        prepared = check.prepare_many(items, self._rt.now(), config=self.config)
        if not prepared:
            return []
        if check.boolean(replace, "replace"):
            return ingest.replace_or_add(self._rt, tenant, prepared)
        return ingest.add(self._rt, tenant, prepared)

    async def aadd(self, text: str, **kwargs: Any) -> Memory:
        """Async :meth:`add`."""
        return await asyncio.to_thread(self.add, text, **kwargs)

    async def aadd_many(self, items: Sequence[Mapping[str, Any]], *, tenant: str,
                        replace: bool = False) -> builtins.list[Memory]:
        """Async :meth:`add_many`."""
        return await asyncio.to_thread(self.add_many, items, tenant=tenant, replace=replace)

    def get(self, memory_id: str, *, tenant: str, touch: bool = False) -> Memory:
        """The memory with that id in that tenant (deleted ones too), or MemoryNotFoundError;
        ``touch=True`` counts the read as an access (a recall hit at rank 1)."""
        return lifecycle.get(self._rt, check.tenant(tenant), memory_id,
                             touch=check.boolean(touch, "touch"))

    def list(self, *, tenant: str, session_id: str | None = None, include_deleted: bool = False,
             limit: int | None = None) -> builtins.list[Memory]:
        """A tenant's memories in insertion order (optionally one session's)."""
        return lifecycle.list_memories(self._rt, check.tenant(tenant), session_id=session_id,
                                       include_deleted=include_deleted, limit=limit)

    def history(self, memory_id: str, *, tenant: str) -> builtins.list[Event]:
        """The audit trail of one memory, oldest first."""
        return lifecycle.history(self._rt, check.tenant(tenant), memory_id)

    def relations(self, memory_id: str, *, tenant: str) -> builtins.list[Relation]:
        """Every relation from or to one memory."""
        return lifecycle.relations(self._rt, check.tenant(tenant), memory_id)

    def tenants(self) -> builtins.list[str]:
        """Every tenant that has memories, sorted."""
        return self._rt.tenants()

    def stats(self, tenant: str | None = None) -> dict[str, Any]:
        """Counts: active, deleted, consolidated, superseded, relations, by state and kind."""
        return lifecycle.stats(self._rt, None if tenant is None else check.tenant(tenant))

    def recall(self, query: str | None = None, *, tenant: str, k: int | None = None,
               topic: str | None = None, entity: str | None = None,
               episode_k: int | None = None, mode: str | None = None,
               min_activation: float | None = None, touch: bool = True,
               user_id: str | None = None, include_superseded: bool = False,
               exclude_ids: Iterable[str] | None = None) -> RecallResult:
        """Recall by spreading activation (DESIGN section 5, steps 1-7).

        Args:
            query: What to recall for; may be omitted (or blank) with ``entity``: then the
                entity's memories come ranked by the lifecycle (composite priority).
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
            include_superseded: Also return superseded memories (``SUPERSEDED BY [id]: ...``).
            exclude_ids: Memories to leave out before scoring (e.g. the chat a prompt already
                shows), so they neither appear nor lower the others' relative scores.
        """
        self._rt.check_open()
        args = check.recall_args(self.config, query=query, tenant=tenant, k=k, topic=topic,
                                 entity=entity, episode_k=episode_k, mode=mode,
                                 min_activation=min_activation, touch=touch, user_id=user_id,
                                 include_superseded=include_superseded,
                                 exclude_ids=exclude_ids)
        return recall_mod.recall(self._rt, recall_mod.RecallRequest.of(args, now=self._rt.now()))

    async def arecall(self, query: str | None = None, **kwargs: Any) -> RecallResult:
        """Async :meth:`recall` (runs the blocking model and store calls off the loop)."""
        return await asyncio.to_thread(self.recall, query, **kwargs)

    def feedback(self, memory_id: str, quality: int, *, tenant: str,
                 query: str | None = None) -> Memory:
        """One SM-2 review with ``quality`` 0..5 plus the utility update; 4-5 count as a use
        (for the query ``query``, else the last recall here that returned the memory)."""
        tenant = check.tenant(tenant)
        query = None if query is None else check.text(query, "query")
        return lifecycle.feedback(self._rt, tenant, memory_id, sm2.validate_quality(quality),
                                  query)

    def relate(self, src: str, dst: str, rel_type: str, *, tenant: str,
               strength: float = 1.0) -> Relation:
        """Add (or update) a typed relation ``src -> dst``."""
        return lifecycle.relate(self._rt, check.tenant(tenant), src, dst, rel_type, strength)

    def supersede(self, old_id: str, new_id: str, *, tenant: str) -> Memory:
        """Mark ``old_id`` as superseded by ``new_id``: the old one leaves recall, the new one
        carries a ``supersedes`` link to it. Returns the old memory."""
        return lifecycle.supersede(self._rt, check.tenant(tenant), old_id, new_id)

    def unsupersede(self, old_id: str, *, tenant: str) -> Memory:
        """Undo :meth:`supersede` (or a detected supersession): ``old_id`` comes back to
        recall, and the pair is never superseded automatically again. Returns the memory."""
        return lifecycle.unsupersede(self._rt, check.tenant(tenant), old_id)

    def forget(self, memory_id: str, *, tenant: str, hard: bool = False) -> None:
        """Soft-delete (restorable) or, with ``hard=True``, remove vector, rows and logs."""
        lifecycle.forget(self._rt, check.tenant(tenant), memory_id, hard=hard)

    def restore(self, memory_id: str, *, tenant: str) -> Memory:
        """Bring back a soft-deleted memory whole."""
        return lifecycle.restore(self._rt, check.tenant(tenant), memory_id)

    def pin(self, memory_id: str, *, tenant: str, pinned: bool = True) -> Memory:
        """Pin (never evicted) or unpin a memory."""
        tenant = check.tenant(tenant)
        return lifecycle.pin(self._rt, tenant, memory_id, check.boolean(pinned, "pinned"))

    def update_metadata(self, memory_id: str, *, tenant: str,
                        metadata: Mapping[str, Any]) -> Memory:
        """Merge ``metadata`` keys into a memory's metadata; text and vector stay as they are.

        Writes one ``metadata_updated`` event with the previous and new values of the keys.
        ``speaker`` is part of the embedded text and cannot change here.
        """
        tenant = check.tenant(tenant)
        patch = check.metadata_patch(metadata, max_bytes=self.config.max_metadata_bytes,
                                     max_depth=self.config.max_metadata_depth)
        return lifecycle.update_metadata(self._rt, tenant, memory_id, patch)

    def export(self, path: str | os.PathLike[str], *, tenant: str | None = None,
               with_vectors: bool = False, on_progress: transfer.Progress | None = None) -> int:
        """Stream one tenant (or all) to JSONL format 2: every stored column, relations, audit
        trail, access log; vectors with ``with_vectors``. Returns the memory count."""
        return transfer.export(self._rt, path, tenant, with_vectors=with_vectors,
                               on_progress=on_progress)

    def import_(self, path: str | os.PathLike[str], *, reembed: bool = False,
                on_conflict: str = "error", on_progress: transfer.Progress | None = None) -> int:
        """Load a JSONL export (format 1 or 2) whole or not at all; stored ids: ``on_conflict``
        ``error``/``skip``/``replace``; another model: ``reembed=True``. Returns the count."""
        return transfer.import_file(self._rt, path, reembed=reembed, on_conflict=on_conflict,
                                    on_progress=on_progress)

    def doctor(self, *, repair: bool = False) -> consistency.DoctorReport:
        """Compare each tenant's memories with Chroma, the kept vectors and the keyword index;
        ``repair=True`` rebuilds what is missing and deletes Chroma vectors of no memory."""
        return consistency.doctor(self._rt, repair=check.boolean(repair, "repair"))

    def evict(self, *, tenant: str, force: bool = True) -> maintenance.EvictionReport:
        """Soft-delete the lowest-priority active memories (budget ``eviction_budget``)."""
        return maintenance.evict(self._rt, tenant=check.tenant(tenant), force=force)

    def consolidate(self, *, tenant: str,
                    summariser: Summariser | None = None) -> maintenance.ConsolidationReport:
        """Merge near-duplicates into ``concept`` memories (non-destructive, idempotent)."""
        return maintenance.consolidate(self._rt, tenant=check.tenant(tenant),
                                       summariser=summariser or self.summariser)

    def review(self, *, tenant: str) -> maintenance.ReviewReport:
        """One SM-2 review pass over the tenant's due memories."""
        return maintenance.review(self._rt, tenant=check.tenant(tenant))

    def enrich(self, *, tenant: str) -> maintenance.EnrichmentReport:
        """Enrich the tenant's ``batched`` memories that are not enriched yet."""
        return maintenance.enrich(self._rt, tenant=check.tenant(tenant))

    def reevaluate(self) -> maintenance.ReevaluationReport:
        """One re-evaluation tick over every tenant (promotes memories that got hot)."""
        return maintenance.reevaluate(self._rt)

    def maintain(self, tenant: str | None = None, *,
                 on_step: Callable[[str, str | None], None] | None = None
                 ) -> maintenance.MaintenanceReport:
        """Run every job of ``maintenance.JOBS`` once (eviction only over ``max_memories``);
        ``on_step(job, tenant)`` is called after each step (progress bars)."""
        return maintenance.maintain(self._rt, None if tenant is None else check.tenant(tenant),
                                    on_step=on_step)

    def snapshot(self, tenant: str, *, limit: int | None = None) -> str:
        """The tenant's top enriched memories by priority, rendered as text."""
        return maintenance.snapshot(self._rt, tenant=check.tenant(tenant), limit=limit)

    def report_use(self, reply: str, recalled_ids: Sequence[str] | RecallResult | None = None,
                   *, tenant: str) -> builtins.list[str]:
        """Tell the engine which recalled memories (ids, a RecallResult, or ``None``: the last
        recall here in the tenant) a reply used (echoed); returns their ids."""
        return maintenance.report_use(self._rt, reply, recalled_ids,
                                      tenant=check.tenant(tenant))
