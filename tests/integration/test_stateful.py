"""Model-based stateful test in the style of Chroma's own property tests: a hypothesis state
machine drives add / recall / forget / restore / relate / reopen, losing the Chroma folder,
export/import round trips and the doctor on two tenants against a plain in-memory reference,
checking after every step that no recall crosses tenants, no deleted memory is recalled,
counts match, and nothing is lost across reopen (real model, Chroma, SQLite)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from mnemonia import ManualClock, MemoryEngine, MnemoniaConfig
from mnemonia.embeddings import default_embedder
from mnemonia.errors import MemoryDeletedError

from tests.conftest import START

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TENANTS = ("alice", "bob")
WORDS = ["garden", "piano", "coffee", "train", "winter", "python", "river", "castle",
         "violin", "lemon", "rocket", "forest"]
texts = st.lists(st.sampled_from(WORDS), min_size=2, max_size=5).map(
    lambda ws: "notes about " + " ".join(ws))


class EngineMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="mnemonia-sm-"))
        self.clock = ManualClock(START)
        self.cfg = MnemoniaConfig.load(env={}, maintenance="manual")
        self.engine = self._open()
        self.ref: dict[str, dict[str, bool]] = {t: {} for t in TENANTS}  # id -> deleted

    def _open(self) -> MemoryEngine:
        return MemoryEngine.open(self.dir, clock=self.clock, config=self.cfg,
                                 embedder=default_embedder())

    def teardown(self) -> None:
        self.engine.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule(tenant=st.sampled_from(TENANTS), text=texts)
    def add(self, tenant: str, text: str) -> None:
        m = self.engine.add(text, tenant=tenant)
        self.ref[tenant][m.id] = False

    @rule(tenant=st.sampled_from(TENANTS), query=texts, k=st.integers(1, 8))
    def recall(self, tenant: str, query: str, k: int) -> None:
        res = self.engine.recall(query, tenant=tenant, k=k, min_activation=0)
        live = [i for i, deleted in self.ref[tenant].items() if not deleted]
        assert all(h.memory.tenant == tenant for h in res.memories)
        assert all(h.memory.id in self.ref[tenant] for h in res.memories), "cross-tenant hit"
        assert all(not self.ref[tenant][h.memory.id] for h in res.memories), "deleted recalled"
        assert len(res.memories) == min(k, len(live))

    @precondition(lambda self: any(self.ref[t] for t in TENANTS))
    @rule(data=st.data())
    def forget_or_restore(self, data: st.DataObject) -> None:
        tenant = data.draw(st.sampled_from([t for t in TENANTS if self.ref[t]]))
        mid = data.draw(st.sampled_from(sorted(self.ref[tenant])))
        if self.ref[tenant][mid]:
            self.engine.restore(mid, tenant=tenant)
            self.ref[tenant][mid] = False
        else:
            self.engine.forget(mid, tenant=tenant)
            self.ref[tenant][mid] = True

    @precondition(lambda self: any(len(self.ref[t]) >= 2 for t in TENANTS))
    @rule(data=st.data())
    def relate(self, data: st.DataObject) -> None:
        tenant = data.draw(st.sampled_from([t for t in TENANTS if len(self.ref[t]) >= 2]))
        a, b = data.draw(st.lists(st.sampled_from(sorted(self.ref[tenant])), min_size=2,
                                  max_size=2, unique=True))
        if self.ref[tenant][a] or self.ref[tenant][b]:  # a deleted memory: restore it first
            with pytest.raises(MemoryDeletedError):
                self.engine.relate(a, b, "related_to", tenant=tenant, strength=0.9)
            return
        self.engine.relate(a, b, "related_to", tenant=tenant, strength=0.9)

    @rule()
    def reopen(self) -> None:
        self.engine.close()
        self.engine = self._open()

    @rule()
    def lose_chroma_and_reopen(self) -> None:
        """The Chroma folder of the closed store disappears; the open rebuilds it."""
        self.engine.close()
        shutil.rmtree(self.dir / "chroma")
        self.engine = self._open()

    @rule()
    def doctor(self) -> None:
        report = self.engine.doctor()
        assert report.consistent and report.problems == 0, report.as_dict()
        assert {h.tenant for h in report.tenants} == {t for t in TENANTS if self.ref[t]}
        for h in report.tenants:
            ref = self.ref[h.tenant]
            assert h.memories == h.chroma_vectors == h.side_vectors == h.keyword_rows == len(ref)
            assert h.active == sum(not deleted for deleted in ref.values())

    @rule(with_vectors=st.booleans())
    def export_import_round_trip(self, with_vectors: bool) -> None:
        """A backup restored into a fresh store holds the same memories, with the same state
        (deleted ones stay deleted), the same relations and recall answers; the restored
        store then replaces this one."""
        backup = self.dir.with_name(self.dir.name + "-backup.jsonl")
        copy = self.dir.with_name(self.dir.name + "-copy")
        self.engine.export(backup, with_vectors=with_vectors)
        with MemoryEngine.open(copy, clock=self.clock, config=self.cfg,
                               embedder=default_embedder()) as restored:
            assert restored.import_(backup) == sum(len(r) for r in self.ref.values())
            for t in TENANTS:
                if not self.ref[t]:
                    continue
                mine = [m.to_dict() for m in self.engine.list(tenant=t, include_deleted=True)]
                theirs = [m.to_dict() for m in restored.list(tenant=t, include_deleted=True)]
                assert theirs == mine
                assert restored.stats(t) == self.engine.stats(t)
                for m in self.engine.list(tenant=t):
                    assert restored.relations(m.id, tenant=t) == self.engine.relations(
                        m.id, tenant=t)
                q = "notes about garden piano"
                assert restored.recall(q, tenant=t, k=4, touch=False).ids == self.engine.recall(
                    q, tenant=t, k=4, touch=False).ids
        self.engine.close()
        shutil.rmtree(self.dir)
        shutil.move(copy, self.dir)
        backup.unlink()
        self.engine = self._open()

    @invariant()
    def counts_match(self) -> None:
        for t in TENANTS:
            if not self.ref[t]:
                continue
            s = self.engine.stats(t)
            assert s["memories"] == len(self.ref[t])
            assert s["deleted"] == sum(self.ref[t].values())
            assert {m.id for m in self.engine.list(tenant=t, include_deleted=True)} == set(
                self.ref[t])


TestEngineMachine = EngineMachine.TestCase
TestEngineMachine.settings = settings(max_examples=8, stateful_step_count=15, deadline=None,
                                      suppress_health_check=[HealthCheck.too_slow])
