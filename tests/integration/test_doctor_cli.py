"""`mnemonia doctor [--repair] --path DIR` on an embedded store (the CLI opens it with the
bundled model, so the store is made with it too): a table per tenant, exit code 0 when the
store is consistent or was repaired, 1 when problems remain."""

from __future__ import annotations

from pathlib import Path

import chromadb
import numpy as np
import pytest
from chromadb.config import Settings
from mnemonia import MemoryEngine
from mnemonia.cli import app
from typer.testing import CliRunner

pytestmark = pytest.mark.integration


def _doctor(*args: str) -> tuple[int, str]:
    out = CliRunner().invoke(app, ["doctor", *args], env={"COLUMNS": "200"})
    return out.exit_code, out.output


def test_doctor_reports_then_repairs(tmp_path: Path, real_embedder) -> None:  # type: ignore[no-untyped-def]
    store = tmp_path / "store"
    with MemoryEngine.open(store, embedder=real_embedder) as engine:
        mems = engine.add_many([{"text": f"Note {i}: the blue door key is in box {i}"}
                                for i in range(6)], tenant="home")
        engine.add("The standup is at 9:30", tenant="work")

    code, text = _doctor("--path", str(store))
    assert code == 0, text
    assert "home" in text and "work" in text and "consistent" in text

    with chromadb.PersistentClient(path=str(store / "chroma"),
                                   settings=Settings(anonymized_telemetry=False)) as client:
        col = client.get_collection("mnemonia-home")
        col.delete(ids=[mems[0].id, mems[1].id])
        col.add(ids=["stray"], embeddings=np.full((1, real_embedder.dimension), 0.05))

    code, text = _doctor("--path", str(store))
    assert code == 1, text
    assert "2 missing in Chroma, 1 orphan(s) in Chroma" in text
    assert "mnemonia doctor --repair" in text

    code, text = _doctor("--repair", "--path", str(store))
    assert code == 0, text
    assert "repaired: 2 missing in Chroma, 1 orphan(s) in Chroma" in text

    code, text = _doctor("--path", str(store))
    assert code == 0 and "problem" not in text, text
    with MemoryEngine.open(store, embedder=real_embedder) as engine:
        health = engine.doctor().tenant("home")
        assert health.memories == health.chroma_vectors == 6 and health.orphans == 0
        hit = engine.recall("where is the blue door key? box 0", tenant="home", k=6)
        assert mems[0].id in hit.ids
