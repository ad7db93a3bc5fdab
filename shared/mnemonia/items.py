"""Keyed items: JSON values under a key in a namespace (the data model of LangGraph's
``BaseStore``), each one a memory of its namespace's tenant. Reached as
:attr:`mnemonia.MemoryEngine.items`.

- A namespace (a tuple of labels) in a *space* (a short prefix; one space per store that
  shares the engine) is its own tenant, so recall never crosses namespaces.
- The item's value, key, namespace, times and TTL live in the memory's metadata under
  :data:`~mnemonia.store.schema.ITEM_KEY`; its *path* (space and labels, sortable), key,
  update and expiry times are indexed in the side-store (migration 9). So ``get``, a search
  without a query, value filters and the namespace listing are index walks with a SQL
  ``LIMIT``: their cost follows the page asked for, not the namespace's size or how many
  other namespaces there are.
- A search with a query runs the recall pipeline in each namespace under the prefix with the
  filter pushed into its candidate reads (:class:`~mnemonia.recall.RecallRequest` ``where``).
- An item with a TTL (minutes) expires that long after its last write (or read, with
  ``refresh_ttl``); expired items are gone from every read at once and removed for good by
  the ``expire`` maintenance job (:func:`mnemonia.maintenance.expire`).

Example:
    >>> import tempfile
    >>> from mnemonia import MemoryEngine
    >>> from mnemonia.embeddings import HashingEmbedder
    >>> from mnemonia.models import ItemWrite
    >>> with MemoryEngine.open(tempfile.mkdtemp(), embedder=HashingEmbedder()) as engine:
    ...     engine.items.put([
    ...         ItemWrite(namespace=("users", "alice"), key="drink", value={"n": 1},
    ...                   text="Alice drinks green tea"),
    ...         ItemWrite(namespace=("users", "bob"), key="drink", value={"n": 2},
    ...                   text="Bob drinks black coffee")])
    ...     [i.key for i in engine.items.search(("users", "alice"), query="tea", limit=1)]
    ...     [i.value for i in engine.items.search(("users",), filter={"n": {"$gt": 1}})]
    ...     engine.items.namespaces()
    ['drink']
    [{'n': 2}]
    [('users', 'alice'), ('users', 'bob')]
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from mnemonia import ingest, lifecycle
from mnemonia import recall as recall_mod
from mnemonia import validation as check
from mnemonia.clock import from_ts, to_ts
from mnemonia.errors import InvalidInputError, shown
from mnemonia.maintenance.expire import expire
from mnemonia.models import KINDS, ItemWrite, KeyedItem, Memory
from mnemonia.runtime import Runtime
from mnemonia.store.schema import (
    DEFAULT_ITEM_SPACE,
    ITEM_KEY,
    item_id,
    item_labels,
    item_path,
    item_tenant,
)
from mnemonia.store.statements import SqlCondition

__all__ = ["DEFAULT_ITEM_SPACE", "ITEM_KEY", "MATCH_TYPES", "ItemStore", "namespace_matches"]

MATCH_TYPES = ("prefix", "suffix")
"""How a namespace listing condition matches: at the start or at the end of the labels."""
WILDCARD = "*"
"""A label of a listing condition that matches any one label."""


def namespace_matches(namespace: Sequence[str], path: Sequence[str], *, suffix: bool) -> bool:
    """Prefix (or suffix) match where ``"*"`` in ``path`` matches any one label."""
    if len(namespace) < len(path):
        return False
    pairs = (zip(reversed(namespace), reversed(path), strict=False) if suffix
             else zip(namespace, path, strict=False))
    return all(p == WILDCARD or n == p for n, p in pairs)


def _keyed(memory_id: str, item: Mapping[str, Any], score: float | None = None) -> KeyedItem:
    expires = item.get("expires_at")
    return KeyedItem(namespace=tuple(item["namespace"]), key=item["key"],
                     value=item["value"], created_at=datetime.fromisoformat(item["created_at"]),
                     updated_at=from_ts(item["updated_at"]), memory_id=memory_id, score=score,
                     expires_at=None if expires is None else from_ts(expires))


def _item_of(metadata: str | Mapping[str, Any]) -> dict[str, Any]:
    meta = json.loads(metadata) if isinstance(metadata, str) else metadata
    return dict(meta[ITEM_KEY])


def _page_args(limit: Any, offset: Any) -> tuple[int, int]:
    return (check.positive_int(limit, "limit", minimum=0),
            check.positive_int(offset, "offset", minimum=0))


class ItemStore:
    """Keyed items of one engine (see the module). Thread-safe as the engine is."""

    def __init__(self, rt: Runtime) -> None:
        self._rt = rt

    def __repr__(self) -> str:
        return f"ItemStore({self._rt.sql.where!r})"

    @staticmethod
    def tenant(namespace: Sequence[str], *, space: str = DEFAULT_ITEM_SPACE) -> str:
        """The tenant that holds the items of ``namespace`` in ``space``."""
        return item_tenant(check.item_space(space), check.item_namespace(namespace))

    # -- writes --------------------------------------------------------------------------------
    def _checked(self, writes: Iterable[ItemWrite], space: str
                 ) -> dict[tuple[str, ...], dict[str, ItemWrite]]:
        """Every write checked before anything is written, grouped by namespace; of several
        writes to one key, the last wins."""
        cfg = self._rt.config
        by_ns: dict[tuple[str, ...], dict[str, ItemWrite]] = {}
        for w in writes:
            if not isinstance(w, ItemWrite):
                raise InvalidInputError(f"expected ItemWrite objects, got {shown(w)}")
            ns, key = check.item_namespace(w.namespace), check.item_key(w.key)
            check.item_ttl(w.ttl)
            if w.value is not None:
                if not isinstance(w.value, Mapping):
                    raise InvalidInputError(f"value={shown(w.value)}: an item value is a dict")
                if w.text is not None:
                    check.text(w.text, "text", max_chars=10**9)
                try:  # as it will be kept: two levels deep in the memory's metadata
                    check.json_safe(self._metadata(space, ns, w, (None, None), 0.0),
                                    max_bytes=cfg.max_metadata_bytes,
                                    max_depth=cfg.max_metadata_depth)
                except InvalidInputError as e:
                    raise InvalidInputError(f"value of key {key!r}: {e}") from e
            group = by_ns.setdefault(ns, {})
            group.pop(key, None)
            group[key] = w
        return by_ns

    def put(self, writes: Iterable[ItemWrite], *, space: str = DEFAULT_ITEM_SPACE,
            kind: str = "fact", importance: float = 0.5) -> None:
        """Write items (a ``None`` value deletes the item for good). Every write is checked
        first; then each namespace's writes go in one batch (one embedding pass). A key
        written again keeps its ``created_at`` and its memory (replaced in place)."""
        rt = self._rt
        rt.check_open()
        space = check.item_space(space)
        if kind not in KINDS:
            raise InvalidInputError(f"kind={shown(kind)}: must be one of {', '.join(KINDS)}")
        importance = check.finite_unit(importance, "importance")
        for ns, group in self._checked(writes, space).items():
            self._put_namespace(space, ns, list(group.values()), kind, importance)

    def _put_namespace(self, space: str, ns: tuple[str, ...], writes: list[ItemWrite],
                       kind: str, importance: float) -> None:
        rt = self._rt
        path, tenant = item_path([space, *ns]), item_tenant(space, ns)
        live_writes = [w for w in writes if w.value is not None]
        texts = [self._stored_text(w) for w in live_writes]
        vectors: Any = rt.embedder.embed_documents(texts) if texts else []  # unlocked
        with rt.exclusive():
            now = rt.now()
            nowts = to_ts(now)
            with rt.reading() as conn:
                rows = rt.sql.items.item_rows(conn, path, [w.key for w in writes])
            live: dict[str, tuple[str, dict[str, Any]]] = {}
            gone: list[str] = []
            for r in rows:
                item = _item_of(r.metadata)
                fresh = r.deleted_at is None and (r.expires is None or r.expires > nowts)
                if fresh and item["key"] not in live:
                    live[item["key"]] = (r.id, item)
                else:
                    gone.append(r.id)  # deleted, expired, or a duplicate: replaced anew
            gone += [live.pop(w.key)[0] for w in writes if w.value is None and w.key in live]
            lifecycle.purge(rt, tenant, gone)
            if not live_writes:
                return
            items = [self._memory_item(space, ns, w, text, vec, live.get(w.key), now, kind,
                                       importance)
                     for w, text, vec in zip(live_writes, texts, vectors, strict=True)]
            ingest.replace_or_add(rt, tenant, check.prepare_many(items, now, config=rt.config))

    def _stored_text(self, w: ItemWrite) -> str:
        """What the memory's text is: ``w.text``, or the value as JSON when not indexed."""
        if w.text is not None:
            text = w.text
        else:
            text = json.dumps(w.value, ensure_ascii=False, sort_keys=True, default=str)
        return text[: self._rt.config.max_text_chars] if text.strip() else (w.key or "{}")

    @staticmethod
    def _metadata(space: str, ns: tuple[str, ...], w: ItemWrite, created: tuple[Any, Any],
                  nowts: float) -> dict[str, Any]:
        """The memory's metadata: the item under :data:`ITEM_KEY` (``created``: the stored
        ``(id, item)`` of the key, or ``(None, None)``)."""
        ttl = w.ttl
        item = {"namespace": list(ns), "key": w.key, "value": dict(w.value or {}),
                "created_at": created[1]["created_at"] if created[1] is not None
                else from_ts(nowts).isoformat(),
                "updated_at": nowts, "indexed": w.text is not None,
                "path": item_path([space, *ns]), "ttl": ttl,
                "expires_at": None if ttl is None else nowts + 60.0 * ttl}
        return {ITEM_KEY: item}

    def _memory_item(self, space: str, ns: tuple[str, ...], w: ItemWrite, text: str,
                     vector: Any, old: tuple[str, dict[str, Any]] | None, now: datetime,
                     kind: str, importance: float) -> dict[str, Any]:
        stored = old if old is not None else (None, None)
        return {"id": old[0] if old is not None else item_id(space, ns, w.key), "text": text,
                "kind": kind, "importance": importance, "embedding": vector,
                "metadata": self._metadata(space, ns, w, stored, to_ts(now))}

    # -- reads ---------------------------------------------------------------------------------
    def get(self, namespace: Sequence[str], keys: Sequence[str], *,
            space: str = DEFAULT_ITEM_SPACE, refresh_ttl: bool = False) -> dict[str, KeyedItem]:
        """The live items of ``keys`` in ``namespace``, by key (missing and expired keys are
        left out); ``refresh_ttl`` restarts the TTL of those returned."""
        rt = self._rt
        rt.check_open()
        ns = check.item_namespace(namespace)
        keys = [check.item_key(k) for k in keys]
        path = item_path([check.item_space(space), *ns])
        nowts = to_ts(rt.now())
        with rt.reading() as conn:
            rows = rt.sql.items.item_rows(conn, path, keys) if keys else []
        found = {}
        for r in rows:
            if r.deleted_at is None and (r.expires is None or r.expires > nowts):
                item = _item_of(r.metadata)
                found[item["key"]] = (r.id, item)
        if check.boolean(refresh_ttl, "refresh_ttl"):
            self._refresh([(mid, item) for mid, item in found.values()], nowts)
        return {key: _keyed(mid, item) for key, (mid, item) in found.items()}

    def _refresh(self, found: Sequence[tuple[str, dict[str, Any]]], nowts: float) -> None:
        """Restart the TTL of items that have one (in ``found``'s dicts too)."""
        rows = []
        for mid, item in found:
            if item.get("ttl") is not None:
                item["expires_at"] = nowts + 60.0 * float(item["ttl"])
                rows.append({"b_id": mid, "metadata": json.dumps({ITEM_KEY: item})})
        if rows:
            with self._rt.writing() as conn:
                self._rt.sql.memories.update_each(conn, rows, ["metadata"])

    def _paths_under(self, space: str, prefix: tuple[str, ...], nowts: float) -> list[str]:
        """Paths of the namespaces at or under ``prefix`` that hold live items, in order:
        one index seek each."""
        base = item_path([space, *prefix])
        out: list[str] = []
        with self._rt.reading() as conn:
            if prefix and self._rt.sql.items.next_item_path(conn, base, base + "\x01", now=nowts,
                                                            inclusive=True) == base:
                out.append(base)
            low, inclusive = base + "\x01", True
            while (p := self._rt.sql.items.next_item_path(conn, low, base + "\x02", now=nowts,
                                                          inclusive=inclusive)) is not None:
                out.append(p)
                low, inclusive = p, False
        return out

    def search(self, prefix: Sequence[str] = (), *, space: str = DEFAULT_ITEM_SPACE,
               query: str | None = None, filter: Mapping[str, Any] | None = None,
               limit: int = 10, offset: int = 0, refresh_ttl: bool = False,
               mode: str | None = None, touch: bool = True) -> list[KeyedItem]:
        """Items of the namespaces at or under ``prefix`` whose value passes ``filter``.

        Without a query: last updated first (then by key). With one: best first by recall
        score (each namespace's recall records the access if ``touch``); items written
        without a text fill the page after the ranked ones, with ``score`` ``None``.

        Args:
            prefix: Namespace prefix; ``()`` is every namespace of the space.
            space: The items' space (a store's tenant-name prefix).
            query: What to search for; ``None`` or blank: no ranking.
            filter: Value filter (:func:`mnemonia.validation.item_filter`).
            limit, offset: The page.
            refresh_ttl: Restart the TTL of the items returned.
            mode: Recall mode; ``None``: the engine's default.
            touch: Record the access of recalled items.
        """
        rt = self._rt
        rt.check_open()
        space = check.item_space(space)
        ns = check.item_namespace(prefix, empty=True)
        flt = check.item_filter(filter)
        limit, offset = _page_args(limit, offset)
        if query is not None and not isinstance(query, str):
            raise InvalidInputError(f"query={shown(query)}: must be a string or None")
        text = (query or "").strip()[: rt.config.max_text_chars]
        now = rt.now()
        nowts = to_ts(now)
        paths = self._paths_under(space, ns, nowts)
        where = rt.sql.items.item_filter(flt) if flt else None
        if text:
            found = self._ranked(space, paths, text, where, limit, offset, mode, touch, now)
        else:
            found = [(mid, item, None) for mid, item in
                     self._listed(paths, where, limit, offset, nowts)]
        if check.boolean(refresh_ttl, "refresh_ttl"):
            self._refresh([(mid, item) for mid, item, _ in found], nowts)
        return [_keyed(mid, item, score) for mid, item, score in found]

    def _listed(self, paths: Sequence[str], where: SqlCondition | None, limit: int,
                offset: int, nowts: float, indexed: bool | None = None
                ) -> list[tuple[str, dict[str, Any]]]:
        """A page of live items of ``paths`` (last updated first), matching ``where``."""
        rt = self._rt
        if indexed is not None:
            where = rt.sql.items.item_indexed(indexed).and_(where)
        if not paths or limit == 0:
            return []
        with rt.reading() as conn:
            if len(paths) == 1:
                rows = rt.sql.items.item_page(conn, paths[0], now=nowts, where=where, limit=limit,
                                              offset=offset)
                return [(r.id, _item_of(r.metadata)) for r in rows]
            found = [(r.id, _item_of(r.metadata)) for p in paths for r in rt.sql.items.item_page(
                conn, p, now=nowts, where=where, limit=offset + limit)]
        found.sort(key=lambda t: (-float(t[1]["updated_at"]), _desc(t[1]["key"]),
                                  _desc(t[1]["path"])))
        return found[offset: offset + limit]

    def _ranked(self, space: str, paths: Sequence[str], query: str,
                where: SqlCondition | None, limit: int, offset: int, mode: str | None,
                touch: bool, now: datetime) -> list[tuple[str, dict[str, Any], float | None]]:
        """Recall in each namespace (the filter pushed into its reads), best first; then the
        items written without a text, to fill the page."""
        rt = self._rt
        need = offset + limit
        if need == 0 or not paths:
            return []
        nowts = to_ts(now)
        ranked: list[tuple[float, Memory]] = []
        for path in paths:
            tenant = item_tenant(space, item_labels(path)[1:])
            args = check.recall_args(rt.config, query=query, tenant=tenant, k=need, topic=None,
                                     entity=None, episode_k=0, mode=mode, min_activation=0,
                                     touch=touch, user_id=None)
            cond = rt.sql.items.item_condition(path, now=nowts, where=where, indexed=True)
            result = recall_mod.recall(rt, recall_mod.RecallRequest.of(args, now=now, where=cond))
            ranked += [(h.score, h.memory) for h in result.memories]
        ranked.sort(key=lambda p: -p[0])
        out: list[tuple[str, dict[str, Any], float | None]] = [
            (m.id, _item_of(m.metadata), s) for s, m in ranked[offset:need]]
        if len(out) < limit:
            skip = max(0, offset - len(ranked))
            rest = self._listed(paths, where, skip + limit - len(out), 0, nowts, indexed=False)
            out += [(mid, item, None) for mid, item in rest[skip:]]
        return out

    def namespaces(self, *, space: str = DEFAULT_ITEM_SPACE,
                   match: Sequence[tuple[str, Sequence[str]]] = (),
                   max_depth: int | None = None, limit: int = 100, offset: int = 0
                   ) -> list[tuple[str, ...]]:
        """The namespaces that hold live items, sorted; each ``(match_type, labels)`` of
        ``match`` must hold (``prefix`` or ``suffix``; a ``"*"`` label matches any one
        label); ``max_depth`` truncates them (distinct after truncation).

        A loose index scan: one index seek per namespace visited, from the first one under
        the literal head of the prefix condition until the page is full."""
        rt = self._rt
        rt.check_open()
        space = check.item_space(space)
        conds = self._conditions(match)
        if max_depth is not None:
            max_depth = check.positive_int(max_depth, "max_depth")
        limit, offset = _page_args(limit, offset)
        head: tuple[str, ...] = ()
        for kind, labels in conds:
            if kind == "prefix":
                fixed = tuple(labels[: labels.index(WILDCARD)] if WILDCARD in labels else labels)
                head = fixed if len(fixed) > len(head) else head
        base = item_path([space, *head])
        high = base + "\x02"
        low, inclusive = (base, True) if head else (base + "\x01", True)
        nowts = to_ts(rt.now())
        out: list[tuple[str, ...]] = []
        with rt.reading() as conn:
            while len(out) < offset + limit:
                p = rt.sql.items.next_item_path(conn, low, high, now=nowts, inclusive=inclusive)
                if p is None:
                    break
                ns = item_labels(p)[1:]
                low, inclusive = p, False
                if not all(namespace_matches(ns, labels, suffix=kind == "suffix")
                           for kind, labels in conds):
                    continue
                shown_ns = ns if max_depth is None else ns[:max_depth]
                if not out or out[-1] != shown_ns:
                    out.append(shown_ns)
                if max_depth is not None and len(ns) >= max_depth:
                    # every namespace below shows as the same truncated one: skip them
                    low, inclusive = item_path([space, *shown_ns]) + "\x02", True
        return out[offset: offset + limit]

    @staticmethod
    def _conditions(match: Any) -> list[tuple[str, tuple[str, ...]]]:
        if isinstance(match, str | bytes) or not isinstance(match, Sequence):
            raise InvalidInputError(f"match={shown(match)}: must be a list of "
                                    "(match_type, labels) pairs")
        out = []
        for cond in match:
            if not (isinstance(cond, Sequence) and len(cond) == 2):
                raise InvalidInputError(f"match condition {shown(cond)}: must be a "
                                        "(match_type, labels) pair")
            kind, labels = cond
            if kind not in MATCH_TYPES:
                raise InvalidInputError(f"match type {shown(kind)}: must be one of "
                                        f"{', '.join(MATCH_TYPES)}")
            out.append((str(kind), check.item_namespace(labels, empty=True)))
        return out

    # -- expiry --------------------------------------------------------------------------------
    def sweep(self) -> int:
        """Remove every expired item now (what the ``expire`` maintenance job does on its
        cadence); returns how many."""
        return expire(self._rt).expired


def _desc(text: str) -> tuple[int, ...]:
    """A sort key that orders strings descending (for ``sort`` ascending)."""
    return (*(-ord(c) for c in text), 1)
