"""The side-store schema: tables, the keyword index's term format, and the append-only list of
migrations that :meth:`mnemonia.store.repository.SideStore.setup` applies.

Times are stored as float seconds since the epoch (UTC).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from mnemonia.store.kept_counts import POSTGRES_TRIGGERS, SQLITE_TRIGGERS, fill_kept_counts
from mnemonia.validation import row_embed_text

__all__ = [
    "DEFAULT_ITEM_SPACE",
    "ITEM_KEY",
    "MIGRATIONS",
    "access_log",
    "collections",
    "fill_keyword_df",
    "item_expressions",
    "item_id",
    "item_labels",
    "item_path",
    "item_tenant",
    "keyword_df_key",
    "keyword_docs",
    "keyword_terms",
    "kv",
    "maintenance_leases",
    "memories",
    "memory_entities",
    "memory_events",
    "memory_vectors",
    "memory_writers",
    "metadata",
    "relations",
    "schema_migrations",
    "tenant_token",
    "term_vectors",
]

metadata = sa.MetaData()

memories = sa.Table(
    "memories", metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("tenant", sa.String(64), nullable=False),
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("topic", sa.String(128)),
    sa.Column("entities", sa.Text, nullable=False, default="[]"),
    sa.Column("importance", sa.Float, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("accessed_at", sa.Float, nullable=False),
    sa.Column("access_count", sa.Integer, nullable=False, default=0),
    sa.Column("stability", sa.Float, nullable=False, default=1.0),
    sa.Column("easiness", sa.Float, nullable=False, default=2.5),
    sa.Column("interval_days", sa.Integer, nullable=False, default=0),
    sa.Column("repetitions", sa.Integer, nullable=False, default=0),
    sa.Column("next_review", sa.Float),
    sa.Column("last_quality", sa.Integer, nullable=False, default=0),
    sa.Column("utility", sa.Float, nullable=False, default=0.5),
    sa.Column("state", sa.String(16), nullable=False, default="batched"),
    sa.Column("pinned", sa.Boolean, nullable=False, default=False),
    sa.Column("deleted_at", sa.Float),
    sa.Column("superseded_by", sa.String(64)),
    sa.Column("consolidated_into", sa.String(64)),
    sa.Column("session_id", sa.String(256)),
    sa.Column("metadata", sa.Text, nullable=False, default="{}"),
    sa.Column("embedding_model", sa.String(256), nullable=False),
    sa.Column("enriched_at", sa.Float),
    sa.Column("last_reviewed_at", sa.Float),
    sa.Column("last_reevaluated_at", sa.Float),
    sa.Column("heat_counter", sa.Float, nullable=False, default=0.0),
    sa.Column("heat_at", sa.Float),
    # 'pending' while the vector write is under way, 'committed' once both stores agree,
    # 'deleting' while a hard forget is under way.
    sa.Column("status", sa.String(16), nullable=False, default="pending"),
    sa.Index("ix_memories_tenant_seq", "tenant", "seq"),
    sa.Index("ix_memories_session_time", "tenant", "session_id", "created_at", "seq"),
    sa.Index("ix_memories_status", "status"),
)

relations = sa.Table(
    "relations", metadata,
    sa.Column("tenant", sa.String(64), nullable=False),
    sa.Column("src", sa.String(64), nullable=False),
    sa.Column("dst", sa.String(64), nullable=False),
    sa.Column("type", sa.String(48), nullable=False),
    sa.Column("strength", sa.Float, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    # the source memory's seq (migration 14): a memory's strongest incoming edges of a type,
    # the first stored sources first, are one index range (ix_relations_incoming)
    sa.Column("src_seq", sa.Integer, nullable=False, server_default=sa.text("0")),
    # the target memory's seq (migration 18): the edges leaving a memory come with their
    # targets' order of storing from ix_relations_outgoing alone (no read of the targets)
    sa.Column("dst_seq", sa.Integer, nullable=False, server_default=sa.text("0")),
    sa.PrimaryKeyConstraint("tenant", "src", "dst", "type"),
    sa.Index("ix_relations_dst", "tenant", "dst"),
    # recall reads one type's links of a few memories (migrations 13 and 18;
    # ix_relations_incoming, migration 14, serves the reads by target)
    sa.Index("ix_relations_outgoing", "tenant", "type", "src", "dst", "strength", "dst_seq"),
)

access_log = sa.Table(
    "access_log", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("tenant", sa.String(64), nullable=False),
    sa.Column("memory_id", sa.String(64), nullable=False),
    sa.Column("rank", sa.Integer, nullable=False),
    sa.Column("k", sa.Integer, nullable=False),
    sa.Column("score", sa.Float, nullable=False),
    sa.Column("user_id", sa.String(256)),
    sa.Column("at", sa.Float, nullable=False),
    sa.Index("ix_access_log_memory", "memory_id"),
    sa.Index("ix_access_log_at", "at"),
)

memory_events = sa.Table(
    "memory_events", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("tenant", sa.String(64), nullable=False),
    sa.Column("memory_id", sa.String(64), nullable=False),
    sa.Column("event", sa.String(32), nullable=False),
    sa.Column("at", sa.Float, nullable=False),
    sa.Column("before", sa.Text),
    sa.Column("after", sa.Text),
    sa.Index("ix_memory_events_memory", "memory_id", "id"),
)

# ``seq`` is the linked memory's own ``seq`` (its place in the tenant): an entity's memories
# are read in the order they were stored (migration 12), never in the order of their ids.
memory_entities = sa.Table(
    "memory_entities", metadata,
    sa.Column("tenant", sa.String(64), nullable=False),
    sa.Column("entity", sa.String(256), nullable=False),
    sa.Column("memory_id", sa.String(64), nullable=False),
    sa.Column("seq", sa.Integer, nullable=False, server_default=sa.text("0")),
    sa.PrimaryKeyConstraint("tenant", "entity", "memory_id"),
    sa.Index("ix_memory_entities_memory", "memory_id"),
    sa.Index("ix_memory_entities_seq", "tenant", "entity", "seq"),
)

collections = sa.Table(
    "collections", metadata,
    sa.Column("tenant", sa.String(64), primary_key=True),
    sa.Column("embedding_model", sa.String(256), nullable=False),
    sa.Column("dimension", sa.Integer, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("next_seq", sa.Integer, nullable=False, default=0),
)

kv = sa.Table(
    "kv", metadata,
    sa.Column("key", sa.String(128), primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)

# Each memory's vector, also kept here so recall can score keyword and entity candidates
# without a round trip to Chroma (float32 bytes, little-endian).
memory_vectors = sa.Table(
    "memory_vectors", metadata,
    sa.Column("memory_id", sa.String(64), primary_key=True),
    sa.Column("vector", sa.LargeBinary, nullable=False),
)

# Word vectors of the words memories use (per embedding model, shared by every tenant): a
# query word also matches the words whose vectors are close to its own (recall's keyword
# expansion). Filled by enrichment.
term_vectors = sa.Table(
    "term_vectors", metadata,
    sa.Column("model", sa.String(200), primary_key=True),
    sa.Column("term", sa.String(200), primary_key=True),
    sa.Column("vector", sa.LargeBinary, nullable=False),
)

# Who runs which maintenance job now: several processes may open one server store, and only
# the holder of a job's unexpired lease runs it (a crashed holder's lease runs out).
maintenance_leases = sa.Table(
    "maintenance_leases", metadata,
    sa.Column("job", sa.String(64), primary_key=True),
    sa.Column("holder", sa.String(128), nullable=False),
    sa.Column("expires_at", sa.Float, nullable=False),
)

# Which process is writing a memory that is not committed yet ('pending' or 'deleting'): the
# holder of the writer lease ``writer:<holder>`` in maintenance_leases. Repair at open takes
# only the rows whose writer's lease ran out (or that have no row here); a live writer's
# in-flight writes are left alone.
memory_writers = sa.Table(
    "memory_writers", metadata,
    sa.Column("memory_id", sa.String(64), primary_key=True),
    sa.Column("writer", sa.String(128), nullable=False),
    sa.Column("at", sa.Float, nullable=False),
)

schema_migrations = sa.Table(
    "schema_migrations", metadata,
    sa.Column("version", sa.Integer, primary_key=True),
    sa.Column("name", sa.String(128), nullable=False),
    sa.Column("applied_at", sa.Float, nullable=False),
)


def tenant_token(tenant: str) -> str:
    """A single alphanumeric token for a tenant (17 characters: ``t`` and 16 hex digits)."""
    return "t" + hashlib.blake2b(tenant.encode(), digest_size=8).hexdigest()


_TERM = re.compile(r"[^\W_]+")


def keyword_terms(text: str, token: str) -> list[str]:
    """The keyword-index terms of ``text`` for the tenant whose token is ``token``.

    Words are case-folded, stripped of diacritics and split on anything that is not a letter
    or digit; each is prefixed with the tenant token, so a term's postings list (and its
    document frequency) belongs to one tenant alone and a search never reads another tenant's
    postings. Indexing and search both go through here, so they always agree.
    """
    words = _folded_word(text) if len(text) <= _WORD_CHARS else _folded(text)
    return [token + w for w in words]


TOKEN_CHARS = len(tenant_token(""))
"""The length of a tenant token, which begins every keyword term."""
DF_KEY_BYTES = 200
"""PostgreSQL's ``keyword_df`` keeps a term longer than this (in UTF-8) under a digest."""


def keyword_df_key(term: str) -> str:
    """The ``keyword_df`` key of a keyword term on PostgreSQL: the term, or for a long one
    (a btree key holds at most ~2.7 KB; a memory may hold a long unbroken string) its
    tenant token and a digest of it (``#`` occurs in no term, so no term is taken for it)."""
    raw = term.encode()
    if len(raw) <= DF_KEY_BYTES:
        return term
    return term[:TOKEN_CHARS] + "#" + hashlib.blake2b(raw, digest_size=16).hexdigest()


def keyword_docs(rows: Sequence[tuple[str, str]]) -> Counter[str]:
    """``{keyword_df key: how many of the (tenant, indexed text) rows hold it}``."""
    df: Counter[str] = Counter()
    for tenant, text in rows:
        df.update({keyword_df_key(t) for t in keyword_terms(text, tenant_token(tenant))})
    return df


_WORD_CHARS = 40
"""Texts this short (a query word) have their folded words kept (recall folds the same query
words, and their related words, on every call)."""


def _folded(text: str) -> list[str]:
    folded = unicodedata.normalize("NFKD", text.casefold())
    folded = "".join(c for c in folded if not unicodedata.combining(c))
    return _TERM.findall(folded)


@functools.lru_cache(maxsize=16384)
def _folded_word(text: str) -> tuple[str, ...]:
    return tuple(_folded(text))


# -- keyed items (mnemonia.items: the LangGraph store's data model) ------------------------
ITEM_KEY = "langgraph"
"""The metadata key of a keyed item: ``{namespace, key, value, created_at, updated_at,
indexed, path, ttl, expires_at}``. The LangGraph store adapter wrote items under this key
before the core kept them; the name stays so that older stores read as they are."""
DEFAULT_ITEM_SPACE = "lg"
"""The space (tenant-name prefix) of items when none is given."""

_SEP = "\x01"
_ESCAPED = re.compile("\x02(.)", re.DOTALL)
_NOT_SLUG = re.compile(r"[^A-Za-z0-9]+")
_TENANT_DIGEST = 16


def item_path(labels: Sequence[str]) -> str:
    """The sortable text of a label path (an item space, then the namespace's labels).

    Labels are joined by ``\\x01``, after ``\\x02`` and ``\\x01`` in them became ``\\x02\\x03``
    and ``\\x02\\x02``: every label character then sorts above the separator, so code-point
    order of the text is tuple order of the paths (a parent before its children, ``("a",
    "b", "c")`` before ``("a", "bc")``), and a namespace's descendants are the one range
    ``[path + "\\x01", path + "\\x02")``."""
    return _SEP.join(label.replace("\x02", "\x02\x03").replace("\x01", "\x02\x02")
                     for label in labels)


def item_labels(path: str) -> tuple[str, ...]:
    """The labels of an :func:`item_path` text."""
    return tuple(_ESCAPED.sub(lambda m: "\x01" if m.group(1) == "\x02" else "\x02", part)
                 for part in path.split(_SEP))


def _digest(obj: object, n: int) -> str:
    raw = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()
    return hashlib.sha256(raw).hexdigest()[:n]


def item_tenant(space: str, namespace: Sequence[str]) -> str:
    """The tenant holding a namespace's items: ``<space>-<slug>-<digest>`` (a digest of the
    exact labels, so two namespaces never share a tenant; a readable slug for debugging)."""
    slug = _NOT_SLUG.sub("-", "-".join(namespace)).strip("-")
    head = f"{space}-{slug}" if slug else space
    head = head[: 64 - _TENANT_DIGEST - 1].rstrip("-_")
    return f"{head}-{_digest(list(namespace), _TENANT_DIGEST)}"


def item_id(space: str, namespace: Sequence[str], key: str) -> str:
    """The memory id of a new item (unique in the store: the digest covers the space too).
    Items are found by namespace and key, so ids made by earlier versions stay valid."""
    return f"lg-{_digest([space, list(namespace), key], 40)}"


def item_expressions(dialect: str) -> dict[str, str]:
    """SQL expressions of an item's ``path``, ``key``, ``updated`` and ``expires`` over the
    ``metadata`` column, exactly as the indexes of migration 9 are built on them (a query
    must spell an expression the same way for the index to serve it)."""
    if dialect == "postgresql":
        def field(name: str) -> str:
            return f"((metadata::jsonb) #>> '{{{ITEM_KEY},{name}}}')"
        return {"path": f"({field('path')} COLLATE \"C\")", "key": field("key"),
                "updated": f"({field('updated_at')}::float8)",
                "expires": f"({field('expires_at')}::float8)"}
    return {name: f"json_extract(metadata, '$.{ITEM_KEY}.{field}')"
            for name, field in (("path", "path"), ("key", "key"), ("updated", "updated_at"),
                                ("expires", "expires_at"))}


def _create_core(conn: Connection) -> None:
    metadata.create_all(conn, tables=[
        memories, relations, access_log, memory_events, memory_entities, collections, kv,
    ])


def _create_fts(conn: Connection) -> None:
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql(
            "CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5("
            "body, ttok, memory_id UNINDEXED, tokenize='unicode61 remove_diacritics 2')"
        )
    elif conn.dialect.name == "postgresql":
        conn.exec_driver_sql(
            "ALTER TABLE memories ADD COLUMN IF NOT EXISTS tsv tsvector "
            "GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED"
        )
        conn.exec_driver_sql(
            "CREATE INDEX IF NOT EXISTS ix_memories_tsv ON memories USING GIN (tsv)"
        )


def _create_fts_vocab(conn: Connection) -> None:
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql(
            "CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts_vocab "
            "USING fts5vocab(memories_fts, 'row')"
        )


def _tenant_terms(conn: Connection) -> None:
    """Move the keyword index to tenant-prefixed terms (see :func:`keyword_terms`).

    The first index matched ``ttok:<tenant> AND (words)``, which reads the tenant's whole
    postings list on every search (its cost grew with the tenant) and took document
    frequencies across all tenants.
    """
    if conn.dialect.name != "sqlite":
        return
    conn.exec_driver_sql(
        "CREATE VIRTUAL TABLE IF NOT EXISTS memories_kw USING fts5("
        "body, memory_id UNINDEXED, tokenize='ascii')")
    conn.exec_driver_sql(
        "CREATE VIRTUAL TABLE IF NOT EXISTS memories_kw_vocab USING fts5vocab(memories_kw, 'row')")
    old = conn.exec_driver_sql("SELECT body, ttok, memory_id FROM memories_fts").fetchall()
    if old:
        conn.exec_driver_sql(
            "INSERT INTO memories_kw(body, memory_id) VALUES (?, ?)",
            [(" ".join(keyword_terms(body, ttok)), mid) for body, ttok, mid in old])
    conn.exec_driver_sql("DROP TABLE IF EXISTS memories_fts_vocab")
    conn.exec_driver_sql("DROP TABLE IF EXISTS memories_fts")


def _create_vectors(conn: Connection) -> None:
    # Stores made before this keep their vectors in Chroma only; recall reads those from Chroma.
    metadata.create_all(conn, tables=[memory_vectors])


def _keyword_df(conn: Connection) -> None:
    """Document frequencies in a table of their own, kept by every index write.

    fts5vocab counts a term's documents by walking its postings, so looking up a common
    word cost as much as searching it (0.5 ms for five words at 100k memories).
    """
    if conn.dialect.name != "sqlite":
        return
    conn.exec_driver_sql(
        "CREATE TABLE IF NOT EXISTS keyword_df (term TEXT PRIMARY KEY, docs INTEGER NOT NULL)"
        " WITHOUT ROWID")
    conn.exec_driver_sql(
        "INSERT INTO keyword_df(term, docs) SELECT term, doc FROM memories_kw_vocab")
    conn.exec_driver_sql("DROP TABLE IF EXISTS memories_kw_vocab")


def _create_leases(conn: Connection) -> None:
    metadata.create_all(conn, tables=[maintenance_leases])


def _create_memory_writers(conn: Connection) -> None:
    metadata.create_all(conn, tables=[memory_writers])


def _event_kind_index(conn: Connection) -> None:
    """Use events (the cues recall reads) by tenant and kind, without a scan of the trail."""
    conn.exec_driver_sql("CREATE INDEX IF NOT EXISTS ix_memory_events_kind "
                         "ON memory_events (tenant, event)")


def _create_term_vectors(conn: Connection) -> None:
    metadata.create_all(conn, tables=[term_vectors])


def _space_of(tenant: str, namespace: Sequence[str]) -> str | None:
    """The space an item of ``namespace`` in ``tenant`` was written with (``None``: the row
    is no item after all)."""
    for i, c in enumerate(tenant):
        if c == "-" and item_tenant(tenant[:i], namespace) == tenant:
            return tenant[:i]
    return None


def _keyed_items(conn: Connection) -> None:
    """Keyed items found by SQL: their path, key, update and expiry times are indexed.

    Items written before (by the LangGraph store adapter) get the fields the indexes read:
    the path, ``updated_at`` (their memory's ``created_at``, what they reported), no TTL.
    """
    m = memories.c
    rows = conn.execute(sa.select(m.id, m.tenant, m.metadata, m.created_at).where(
        m.metadata.contains(f'"{ITEM_KEY}"', autoescape=True))).fetchall()
    for r in rows:
        meta = json.loads(r.metadata)
        item = meta.get(ITEM_KEY)
        if not isinstance(item, dict) or "path" in item \
                or not isinstance(item.get("namespace"), list) \
                or not isinstance(item.get("key"), str):
            continue
        space = _space_of(r.tenant, item["namespace"])
        if space is None:
            continue
        item.update(path=item_path([space, *item["namespace"]]), updated_at=r.created_at,
                    ttl=None, expires_at=None)
        conn.execute(memories.update().where(m.id == r.id).values(metadata=json.dumps(meta)))
    x = item_expressions(conn.dialect.name)
    if conn.dialect.name not in ("sqlite", "postgresql"):
        return  # no JSON expressions there: keyed items are a SQLite / PostgreSQL feature
    conn.exec_driver_sql(
        f"CREATE INDEX IF NOT EXISTS ix_memories_item_order ON memories "
        f"({x['path']}, {x['updated']}, {x['key']}) WHERE {x['path']} IS NOT NULL")
    conn.exec_driver_sql(
        f"CREATE INDEX IF NOT EXISTS ix_memories_item_key ON memories "
        f"({x['path']}, {x['key']}) WHERE {x['path']} IS NOT NULL")
    conn.exec_driver_sql(
        f"CREATE INDEX IF NOT EXISTS ix_memories_item_expires ON memories "
        f"({x['expires']}) WHERE {x['expires']} IS NOT NULL")


def _entity_link_order(conn: Connection) -> None:
    """Entity links in the order their memories were stored: ``memory_entities.seq`` (the
    memory's ``seq``) and an index on ``(tenant, entity, seq)``, so that the first memories
    of an entity are one index range, the same in every process (they were the first by id,
    a random uuid). Links of a store made before get their memory's ``seq`` (a link whose
    memory is gone keeps 0). A store created since migration 1 has the column already."""
    if "seq" not in {c["name"] for c in sa.inspect(conn).get_columns("memory_entities")}:
        conn.exec_driver_sql(
            "ALTER TABLE memory_entities ADD COLUMN seq INTEGER NOT NULL DEFAULT 0")
        conn.exec_driver_sql(
            "UPDATE memory_entities SET seq = (SELECT m.seq FROM memories AS m "
            "WHERE m.id = memory_entities.memory_id) WHERE EXISTS (SELECT 1 FROM memories "
            "AS m WHERE m.id = memory_entities.memory_id)")
    conn.exec_driver_sql("CREATE INDEX IF NOT EXISTS ix_memory_entities_seq "
                         "ON memory_entities (tenant, entity, seq)")


def _relation_type_indexes(conn: Connection) -> None:
    """Relations by tenant, type and either end, covering what recall reads of them (the
    ``follows`` links of the candidates, contradictions and supersessions of the hits, the
    edges spreading follows): such a read touches only the links of that type, not every
    relation of each memory. Measured on a 10k-memory enriched tenant (16 relations a
    memory): the ``follows`` links of 100 memories 2.6 -> 0.5 ms, the contradictions and
    supersessions of 15 0.45 -> 0.04 ms. A store created since migration 1 has them."""
    conn.exec_driver_sql("CREATE INDEX IF NOT EXISTS ix_relations_type_src "
                         "ON relations (tenant, type, src, dst, strength)")
    conn.exec_driver_sql("CREATE INDEX IF NOT EXISTS ix_relations_type_dst "
                         "ON relations (tenant, type, dst, src, strength)")


def _incoming_relations(conn: Connection) -> None:
    """Each relation knows its source memory's ``seq`` (``src_seq``; a relation whose source
    is gone keeps 0), and ``ix_relations_incoming`` orders a memory's incoming relations of a
    type strongest first, then the first stored sources first: spreading reads the strongest
    few of them as one index range each, where it ranked every one (a memory named by many
    others, such as the first memories of an entity, has a number of incoming
    ``same_entity`` relations that grows with the tenant: 18,728 at 100k memories). It also
    covers the reads by target that ``ix_relations_type_dst`` (migration 13) served, which
    goes. A store created since migration 1 has the column already."""
    if "src_seq" not in {c["name"] for c in sa.inspect(conn).get_columns("relations")}:
        conn.exec_driver_sql(
            "ALTER TABLE relations ADD COLUMN src_seq INTEGER NOT NULL DEFAULT 0")
        conn.exec_driver_sql(
            "UPDATE relations SET src_seq = (SELECT m.seq FROM memories AS m "
            "WHERE m.id = relations.src) WHERE EXISTS (SELECT 1 FROM memories AS m "
            "WHERE m.id = relations.src)")
    conn.exec_driver_sql("CREATE INDEX IF NOT EXISTS ix_relations_incoming ON relations "
                         "(tenant, type, dst, strength DESC, src_seq, src)")
    conn.exec_driver_sql("DROP INDEX IF EXISTS ix_relations_type_dst")


def _outgoing_relations(conn: Connection) -> None:
    """Each relation knows its target memory's ``seq`` (``dst_seq``; a relation whose target
    is gone keeps 0), and ``ix_relations_outgoing`` (which replaces
    ``ix_relations_type_src``, migration 13) holds it: the edges leaving the memories
    spreading reaches, with their targets' order of storing (equal weights: the first stored
    target first), are read from that index alone, where each was joined on ``memories``.
    Enriched 100k-memory tenant (1.6 million relations), the edges of every spreading type
    leaving 10 random memories (159 rows), 400 sets in turns: p50 413 us with the join
    against 137 us from the index alone. A store created since migration 1 has the column
    already."""
    if "dst_seq" not in {c["name"] for c in sa.inspect(conn).get_columns("relations")}:
        conn.exec_driver_sql(
            "ALTER TABLE relations ADD COLUMN dst_seq INTEGER NOT NULL DEFAULT 0")
        conn.exec_driver_sql(
            "UPDATE relations SET dst_seq = (SELECT m.seq FROM memories AS m "
            "WHERE m.id = relations.dst) WHERE EXISTS (SELECT 1 FROM memories AS m "
            "WHERE m.id = relations.dst)")
    conn.exec_driver_sql("CREATE INDEX IF NOT EXISTS ix_relations_outgoing ON relations "
                         "(tenant, type, src, dst, strength, dst_seq)")
    conn.exec_driver_sql("DROP INDEX IF EXISTS ix_relations_type_src")


_BACKFILL_PAGE = 2000


def _server_keyword_df(conn: Connection) -> None:
    """PostgreSQL keeps the keyword terms' document counts per tenant in ``keyword_df``, as
    SQLite does since migration 6, kept by every write of the keyword index (see
    ``PostgresDialect.index_keywords``): recall counted each query word's memories through
    the GIN index, visiting every memory that holds the word, so its idf weights cost time
    linear in the tenant (54 of a 96 ms recall at 66,000 memories). The counts are SQLite's:
    the terms of each memory's indexed text (:func:`keyword_terms` of its text as the
    embedder reads it, the speaker's words included), for every row from its insert until
    it is purged. Filled here from every memory row, one tenant at a time."""
    if conn.dialect.name != "postgresql":
        return
    conn.exec_driver_sql(
        "CREATE TABLE IF NOT EXISTS keyword_df (term TEXT PRIMARY KEY, docs INTEGER NOT NULL)")
    fill_keyword_df(conn)


def fill_keyword_df(conn: Connection) -> None:
    """Count every memory row's keyword terms into an empty ``keyword_df`` (PostgreSQL),
    one tenant at a time."""
    m = memories.c
    tenant: str | None = None
    token = ""
    df: Counter[str] = Counter()
    after: tuple[str, int, str] | None = None
    while True:
        q = sa.select(m.id, m.tenant, m.seq, m.text, m.metadata)
        if after is not None:
            q = q.where(sa.tuple_(m.tenant, m.seq, m.id) > sa.tuple_(*after))
        rows = conn.execute(q.order_by(m.tenant, m.seq, m.id).limit(_BACKFILL_PAGE)).fetchall()
        for r in rows:
            if r.tenant != tenant:  # a tenant's terms are its own: write them and forget
                _insert_docs(conn, df)
                tenant, df, token = r.tenant, Counter(), tenant_token(r.tenant)
            df.update({keyword_df_key(t) for t in keyword_terms(row_embed_text(r), token)})
        if len(rows) < _BACKFILL_PAGE:
            break
        after = (rows[-1].tenant, rows[-1].seq, rows[-1].id)
    _insert_docs(conn, df)


def _insert_docs(conn: Connection, df: Counter[str]) -> None:
    items = sorted(df.items())
    for at in range(0, len(items), 5000):
        part = items[at:at + 5000]
        conn.execute(sa.text("INSERT INTO keyword_df(term, docs) SELECT * FROM "
                             "unnest(CAST(:t AS text[]), CAST(:d AS integer[]))"),
                     {"t": [t for t, _ in part], "d": [n for _, n in part]})


def _session_time_index(conn: Connection) -> None:
    """Memories by tenant, session and time (``created_at``, then ``seq``): the memory just
    before a new one in its session (its ``follows`` link, read for every enriched memory)
    is one step of this index, where ``ix_memories_tenant_session`` (which goes: this one
    serves its reads too) made the read sort every memory of the session. A chat kept in one
    session (SQLite, 10,000 turns added 1,000 at a time, every memory enriched): 4.8-8.9 ms a
    read at 7,000-10,000 turns, growing with the session; 0.014-0.023 ms with this index.
    ``tests/integration/test_side_store.py`` checks the plan. A store created since
    migration 1 has it."""
    conn.exec_driver_sql("CREATE INDEX IF NOT EXISTS ix_memories_session_time "
                         "ON memories (tenant, session_id, created_at, seq)")
    conn.exec_driver_sql("DROP INDEX IF EXISTS ix_memories_tenant_session")


def _kept_counts(conn: Connection) -> None:
    """Each tenant's entity document counts and active memories, kept by triggers on every
    write (:mod:`mnemonia.store.kept_counts`): recall's entity weights read them instead of
    counting the tenant's links and memories at its first recall in a process."""
    fill_kept_counts(conn, POSTGRES_TRIGGERS if conn.dialect.name == "postgresql"
                     else SQLITE_TRIGGERS)


# Append-only: never edit or reorder an entry that has shipped; add a new one.
MIGRATIONS: list[tuple[int, str, Callable[[Connection], None]]] = [
    (1, "core tables", _create_core),
    (2, "keyword index", _create_fts),
    (3, "keyword document frequencies", _create_fts_vocab),
    (4, "keyword index with tenant-prefixed terms", _tenant_terms),
    (5, "vectors in the side-store", _create_vectors),
    (6, "keyword document frequencies kept on write", _keyword_df),
    (7, "maintenance leases", _create_leases),
    (8, "memory events by tenant and kind", _event_kind_index),
    (9, "keyed items by path, key, update and expiry", _keyed_items),
    (10, "word vectors for keyword expansion", _create_term_vectors),
    (11, "writers of unfinished memory writes", _create_memory_writers),
    (12, "entity links in the order their memories were stored", _entity_link_order),
    (13, "relations by type and either end", _relation_type_indexes),
    (14, "relations by target, strongest and first stored sources first",
     _incoming_relations),
    (15, "keyword document counts kept on write in PostgreSQL", _server_keyword_df),
    (16, "memories by session and time", _session_time_index),
    (17, "entity and tenant counts kept on write", _kept_counts),
    (18, "relations know their target's order of storing", _outgoing_relations),
]
