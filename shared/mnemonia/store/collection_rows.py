"""A tenant's ``collections`` row: the tenant exists, its embedding model and dimension, and
the counter that gives its memories their insertion order (``seq``)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from mnemonia.store.database import Connection, Database
from mnemonia.store.schema import collections

__all__ = ["CollectionRows"]


class CollectionRows:
    """The ``collections`` table: one row per tenant."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def has_collection(self, conn: Connection, tenant: str) -> bool:
        return conn.execute(sa.select(collections.c.tenant)
                            .where(collections.c.tenant == tenant)).first() is not None

    def collections(self, conn: Connection) -> list[Any]:
        return list(conn.execute(sa.select(collections)).fetchall())

    def tenants(self, conn: Connection) -> list[str]:
        return [r[0] for r in conn.execute(sa.select(collections.c.tenant)
                                           .order_by(collections.c.tenant))]

    def collection_row(self, conn: Connection, tenant: str) -> Any:
        """The tenant's ``collections`` row, or ``None``."""
        return conn.execute(sa.select(collections).where(collections.c.tenant == tenant)).first()

    def put_collection(self, conn: Connection, tenant: str, *, model: str, dimension: int,
                       created_at: float, next_seq: int) -> None:
        """Make the tenant's ``collections`` row, or set the ``next_seq`` of the one there."""
        c = collections.c
        if self.collection_row(conn, tenant) is None:
            conn.execute(collections.insert().values(
                tenant=tenant, embedding_model=model, dimension=dimension,
                created_at=created_at, next_seq=next_seq))
        else:
            conn.execute(collections.update().where(c.tenant == tenant)
                         .values(next_seq=next_seq))

    def reserve_seq(self, conn: Connection, tenant: str, n: int, *, model: str, dimension: int,
                    at: float) -> int:
        """The first of ``n`` insertion numbers for new memories of ``tenant`` (the tenant's
        collection row is made on its first memory). Safe when several processes add to one
        tenant at once, new or not: the row is inserted unless there, and the counter moved
        by one atomic ``UPDATE ... RETURNING`` (which holds the row until the commit)."""
        self.db.insert_or_ignore(conn, collections, [dict(
            tenant=tenant, embedding_model=model, dimension=dimension, created_at=at,
            next_seq=0)])
        c = collections.c
        after = conn.execute(collections.update().where(c.tenant == tenant)
                             .values(next_seq=c.next_seq + n)
                             .returning(c.next_seq)).scalar_one()
        return int(after) - n
