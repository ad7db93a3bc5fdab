r"""Knowledge updates (issue 34 point 6, DESIGN section 5b): does recall put the current fact first?

Usage::

    .venv/bin/python benchmarks/updates.py                    # seed 0: 24 tenants, 4,800 memories
    .venv/bin/python benchmarks/updates.py --maintain         # + a store with every maintenance job
    .venv/bin/python benchmarks/updates.py --small --show 3   # 4 tenants, 3 failures per category
    .venv/bin/python benchmarks/updates.py --data set.json --json out.json

The set is generated from ``--seed`` by ``updates_data.py`` (the recipe in
``../shared/bench/updates-recipe.md``), or read from ``--data`` (a file that script wrote, or a
held-out set in the same format). Each tenant of the set goes into its own tenant of one
fresh embedded store (a temporary folder, deleted at the end):
``MemoryEngine.open(path, maintenance="manual", clock=ManualClock(...))`` with the shipped
defaults, one memory per ``add_many`` call with the clock at the memory's time (the recipe:
one memory per add; ``--batch session`` adds a session per call instead), each item
``{"id", "text", "speaker", "at", "session_id", "metadata": {"ref": <set id>}}`` (the id a
hash of the set id: runs repeat, and it says nothing about time order). After the tenant's
last memory it gets the enrichment sweep (``engine.enrich``, as ``locomo.py`` does);
``--maintain`` builds a second store that runs ``engine.maintain`` instead (every job once,
consolidation included, as the background jobs would). Then the clock moves to the tenant's
ask time (a day after its last memory) and every question goes through
``engine.recall(question, tenant=..., k=5, touch=False)`` at the default floor
(``--min-activation 0`` fills up to k).

Scores per question (the recipe's definitions; a hit holds the set memory it is, or, for a
consolidated ``concept``, every member consolidated into it):

* ``R@1``: the top hit holds a gold memory and no rival (stale version or hard negative); a
  concept holding both counts as no answer. MANY: the top hit holds one of the values.
* ``R@5``: gold is in the top 5 (itself or inside a concept); MANY: every value is.
* ``stale>=gold`` (questions with an older version): a stale version ranks at or above gold,
  or is there while gold is not. A shared rank inside one concept counts, and is also
  counted on its own in ``merged``.
* ``merged``: a hit is a concept that holds gold and a rival (MANY: two of the values).
* ``false sup.`` (MANY controls and hard negatives): the older value leaves the top 5 while a
  newer one is there (MANY); the hard negative ranks at or above gold, or is there while gold
  is not (negatives).

The first store is asked twice: as built, then after every stale version is superseded by
the next version of its slot through ``engine.supersede`` (an oracle: what perfect detection
would give with today's ranking; ``--no-oracle`` skips it).

Below the tables: the engine's own supersessions, read from every memory of every tenant
(``superseded_by`` set): how many stale versions were superseded, and the false
supersessions (a memory superseded though the set says nothing replaced it).

The baselines run in the same process over the same texts (``Speaker said, "text"``, in
time order): BM25 (``baselines.BM25Baseline``, ties older first) and dense MiniLM cosine
(the engine's own vectors). They never supersede.

Then two diagnostic tables for every method: R@1 and the bad rate by the number of memories
between the last two versions, same or later session and the kind of subject, and by kind of
hard negative; and, over the update questions missed at rank 1, what held rank 1 instead (the
stale version, the same attribute of another subject, another attribute of the same subject,
a hard negative, a distractor). ``--show N`` prints N missed questions per category with what
came back.

Every text is embedded once before the stores are built (large batches, kept in the
embedder's cache): one memory per ``add_many`` then times the engine, not the model's
per-call overhead, and the vectors are the same. The full set takes about two minutes per
store on two busy cores; ``--small`` (4 tenants) about twenty seconds.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:  # allow `python benchmarks/updates.py` and `import updates`
    sys.path.insert(0, _HERE)

import updates_data  # noqa: E402
from baselines import BM25Baseline, DenseBaseline  # noqa: E402
from locomo import CachedEmbedder  # noqa: E402
from mnemonia import ManualClock, MemoryEngine, MnemoniaConfig  # noqa: E402
from mnemonia.config import DEFAULT_EMBEDDER_BACKEND, EMBEDDER_BACKENDS  # noqa: E402
from mnemonia.embeddings import default_embedder  # noqa: E402
from mnemonia.validation import embed_text  # noqa: E402

K = 5
UPDATES = ("one_cue", "one_bare", "one_message", "retraction")
ROWS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("ONE cue", ("one_cue",)),
    ("ONE bare", ("one_bare",)),
    ("ONE in-message", ("one_message",)),
    ("retraction", ("retraction",)),
    ("MANY control", ("many",)),
    ("hard negative", ("negative",)),
    ("update questions (ONE + retraction)", UPDATES),
    ("overall", updates_data.CATEGORIES),
)
Hits = list[frozenset[str]]  # per rank: the set ids the hit holds


# --------------------------------------------------------------------------------------------
# scoring
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Score:
    """One question's outcome (``None``: the metric does not apply to its category)."""

    r1: bool
    r5: bool
    stale_above: bool | None
    merged: bool
    false_sup: bool | None


def _first(hits: Hits, ids: set[str]) -> int | None:
    return next((r for r, h in enumerate(hits) if h & ids), None)


def score(q: Mapping[str, Any], hits: Hits) -> Score:
    """The recipe's metrics for one question and its top hits (best first)."""
    hits = hits[:K]
    gold, rivals = set(q["gold"]), set(q["stale"]) | set(q["negatives"])
    held = frozenset().union(*hits) if hits else frozenset()
    top = hits[0] if hits else frozenset()
    r1 = bool(top & gold) and not top & rivals
    if q["category"] == "many":
        r5 = gold <= held
        merged = any(len(h & gold) >= 2 for h in hits)
        oldest = q["gold"][0]
        return Score(r1, r5, None, merged, oldest not in held and bool(held & (gold - {oldest})))
    g, s = _first(hits, gold), _first(hits, rivals)
    above = s is not None and (g is None or s <= g)
    merged = any(h & gold and h & rivals for h in hits)
    if q["category"] == "negative":
        return Score(r1, g is not None, None, merged, above)
    return Score(r1, g is not None, above, merged, None)


def _rate(values: Sequence[bool | None]) -> tuple[float, int] | None:
    xs = [v for v in values if v is not None]
    return (sum(xs) / len(xs), len(xs)) if xs else None


def summarise(questions: Sequence[Mapping[str, Any]], scores: Mapping[str, Score],
              rows: Sequence[tuple[str, Sequence[str]]] = ROWS,
              key: Callable[[Mapping[str, Any]], str] = lambda q: q["category"]
              ) -> dict[str, dict[str, Any]]:
    """Per row: n and each metric as (rate, number of questions it applies to) or None."""
    out: dict[str, dict[str, Any]] = {}
    for name, keys in rows:
        mine = [scores[q["id"]] for q in questions if key(q) in keys]
        out[name] = {"n": len(mine),
                     "r1": _rate([s.r1 for s in mine]), "r5": _rate([s.r5 for s in mine]),
                     "stale_above": _rate([s.stale_above for s in mine]),
                     "merged": _rate([s.merged for s in mine]),
                     "false_sup": _rate([s.false_sup for s in mine])}
    return out


COLUMNS = (("R@1", "r1"), ("R@5", "r5"), ("stale>=gold", "stale_above"), ("merged", "merged"),
           ("false sup.", "false_sup"))


def _cell(v: tuple[float, int] | None) -> str:
    return "-" if v is None or v[1] == 0 else f"{100 * v[0]:.1f}"


def markdown_table(summary: Mapping[str, Mapping[str, Any]]) -> str:
    head = "| category | n | " + " | ".join(c for c, _ in COLUMNS) + " |"
    lines = [head, "|---|---:|" + "---:|" * len(COLUMNS)]
    for name, row in summary.items():
        label = f"**{name}**" if name in ("overall", ROWS[-2][0]) else name
        lines.append(f"| {label} | {row['n']} | "
                     + " | ".join(_cell(row[k]) for _, k in COLUMNS) + " |")
    return "\n".join(lines)


def _gap_bucket(q: Mapping[str, Any]) -> str:
    g = q["gap_memories"]
    return {0: "0 memories between", 5: "5 between", 50: "50 between"}.get(g, "6-20 between")


def breakdown_table(questions: Sequence[Mapping[str, Any]],
                    methods: Mapping[str, Mapping[str, Score]]) -> str:
    """R@1 / stale>=gold of the update questions by gap, session and subject; R@1 / false sup.
    of the hard negatives by subtype; one column per method."""
    updates = [q for q in questions if q["category"] in UPDATES]
    negatives = [q for q in questions if q["category"] == "negative"]
    groups: list[tuple[str, list[Mapping[str, Any]], str]] = []
    for b in ("0 memories between", "5 between", "6-20 between", "50 between"):
        groups.append((f"update, {b}", [q for q in updates if _gap_bucket(q) == b],
                       "stale_above"))
    for same, label in ((True, "same session (minutes)"), (False, "later session (days)")):
        groups.append((f"update, {label}", [q for q in updates if q["same_session"] is same],
                       "stale_above"))
    for kind in ("user", "speaker", "third"):
        groups.append((f"update, subject {kind}", [q for q in updates
                                                   if q["subject_kind"] == kind], "stale_above"))
    for sub in updates_data.NEGATIVE_KINDS:
        groups.append((f"negative: {sub}", [q for q in negatives if q["subtype"] == sub],
                       "false_sup"))
    names = list(methods)
    lines = ["| group | n | " + " | ".join(f"{m}: R@1 / bad" for m in names) + " |",
             "|---|---:|" + "---:|" * len(names)]
    for label, qs, bad in groups:
        if not qs:
            continue
        cells = []
        for m in names:
            sc = [methods[m][q["id"]] for q in qs]
            r1 = _rate([s.r1 for s in sc])
            b = _rate([getattr(s, bad) for s in sc])
            cells.append(f"{_cell(r1)} / {_cell(b)}")
        lines.append(f"| {label} | {len(qs)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# the engine
# --------------------------------------------------------------------------------------------
@dataclass
class EngineRun:
    """What one store answered: hits per question, the store's supersessions, timings."""

    label: str
    sweep: str
    oracle: bool = False
    hits: dict[str, Hits] = field(default_factory=dict)
    texts: dict[str, list[str]] = field(default_factory=dict)  # the hits' texts (for --show)
    returned: list[int] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    superseded: dict[str, str | None] = field(default_factory=dict)  # ref -> ref/engine id
    concepts: int = 0
    consolidated: int = 0
    memories: int = 0
    ingest_seconds: float = 0.0
    sweep_seconds: float = 0.0


def engine_id(ref: str) -> str:
    """The engine id of a set memory: fixed (so runs repeat: score ties are broken by id)
    but unrelated to time order (so the id tells no method which version is newer)."""
    return hashlib.blake2b(ref.encode(), digest_size=16).hexdigest()


def _item(m: Mapping[str, Any]) -> dict[str, Any]:
    return {"id": engine_id(m["id"]), "text": m["text"], "speaker": m["speaker"],
            "at": datetime.fromisoformat(m["at"]), "session_id": m["session_id"],
            "metadata": {"ref": m["id"]}}


def ingest(engine: MemoryEngine, clock: ManualClock, tenant: Mapping[str, Any], *,
           batch: str = "turn") -> None:
    """Add one tenant's memories in time order (one per call, or one session per call)."""
    name = tenant["tenant"]
    if batch == "turn":
        for m in tenant["memories"]:
            item = _item(m)
            clock.set(item["at"])
            engine.add_many([item], tenant=name)
        return
    sessions: dict[str, list[dict[str, Any]]] = {}
    for m in tenant["memories"]:
        sessions.setdefault(m["session_id"], []).append(_item(m))
    for items in sessions.values():
        clock.set(items[-1]["at"])
        engine.add_many(items, tenant=name)


def prewarm(emb: CachedEmbedder, data: Mapping[str, Any], batch: int = 256) -> None:
    """Embed every text the engine will see in a few large batches, so that adding one
    memory per call measures the engine's work, not the model's per-call overhead (the
    stores read the vectors from ``emb``'s cache; the dense baseline uses the same)."""
    texts = list(dict.fromkeys(embed_text(m["text"], m["speaker"])
                               for t in data["tenants"] for m in t["memories"]))
    for i in range(0, len(texts), batch):
        emb.embed_documents(texts[i:i + batch])


def run_engine(data: Mapping[str, Any], emb: CachedEmbedder, *, sweep: str, batch: str,
               min_activation: float | None, oracle: bool,
               progress: Callable[[str], None], config: MnemoniaConfig | None = None,
               variants: Sequence[tuple[str, MnemoniaConfig]] = ()) -> list[EngineRun]:
    """One fresh store: ingest, sweep, ask; each of ``variants`` asks the same store again
    under its configuration (keys read at recall); with ``oracle``, then supersede every
    stale version by the next version of its slot (``engine.supersede``: perfect
    detection) and ask again. The store is deleted afterwards."""
    config = config or MnemoniaConfig()
    run = EngineRun(label=f"Mnemonia recall k={K} ({sweep})", sweep=sweep)
    others = [EngineRun(label=f"{run.label} {name}", sweep=sweep) for name, _ in variants]
    perfect = EngineRun(label=f"{run.label} + oracle supersession", sweep=sweep,
                        oracle=True)
    root = Path(tempfile.mkdtemp(prefix="mnemonia-updates-"))
    tenants = data["tenants"]
    clock = ManualClock(datetime.fromisoformat(tenants[0]["memories"][0]["at"]))
    try:
        with MemoryEngine.open(root / "store", config=config, clock=clock,
                               embedder=emb, maintenance="manual") as engine:
            for t in tenants:
                t0 = time.perf_counter()
                ingest(engine, clock, t, batch=batch)
                t1 = time.perf_counter()
                if sweep == "enrich":
                    engine.enrich(tenant=t["tenant"])
                elif sweep == "maintain":
                    engine.maintain(t["tenant"])
                t2 = time.perf_counter()
                run.ingest_seconds += t1 - t0
                run.sweep_seconds += t2 - t1
                ask(engine, clock, t, run, min_activation)
                for other, (_, cfg) in zip(others, variants, strict=True):
                    engine.runtime.config = cfg
                    ask(engine, clock, t, other, min_activation)
                    engine.runtime.config = config
                if oracle:
                    supersede_stale(engine, t)
                    ask(engine, clock, t, perfect, min_activation)
                progress(f"  {run.label} {t['tenant']}: ingest {t1 - t0:.1f}s, {sweep} "
                         f"{t2 - t1:.1f}s, ask {time.perf_counter() - t2:.1f}s")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return [run, *others, *([perfect] if oracle else [])]


def supersede_stale(engine: MemoryEngine, tenant: Mapping[str, Any]) -> None:
    """What a perfect detector would do: each stale version superseded by the next version
    of its slot (a retraction supersedes the value it withdraws)."""
    name = tenant["tenant"]
    by_ref = {m.metadata.get("ref"): m.id for m in engine.list(tenant=name)}
    for q in tenant["questions"]:
        if q["category"] not in UPDATES:
            continue
        versions = q["stale"] + q["gold"]
        for old, new in itertools.pairwise(versions):
            if old in by_ref and new in by_ref:
                engine.supersede(by_ref[old], by_ref[new], tenant=name)


def ask(engine: MemoryEngine, clock: ManualClock, tenant: Mapping[str, Any], run: EngineRun,
        min_activation: float | None) -> None:
    """Every question of the tenant at its ask time; then read every memory of the tenant
    for its supersessions and concepts."""
    name = tenant["tenant"]
    stored = engine.list(tenant=name, include_deleted=True)
    ref = {m.id: m.metadata.get("ref") for m in stored}
    members: dict[str, set[str]] = {}
    for m in stored:
        if m.consolidated_into is not None and ref.get(m.id):
            members.setdefault(m.consolidated_into, set()).add(ref[m.id])
    clock.set(datetime.fromisoformat(tenant["ask_at"]))
    for q in tenant["questions"]:
        t0 = time.perf_counter()
        res = engine.recall(q["question"], tenant=name, k=K, touch=False,
                            min_activation=min_activation)
        run.latencies.append(time.perf_counter() - t0)
        run.returned.append(len(res.memories))
        run.hits[q["id"]] = [frozenset(members.get(h.memory.id, set())) if
                             h.memory.kind == "concept" else
                             frozenset({ref[h.memory.id]} if ref.get(h.memory.id) else ())
                             for h in res.memories]
        run.texts[q["id"]] = [f"[{h.memory.kind}] {h.memory.text}" for h in res.memories]
    run.memories += len(stored)
    run.concepts += sum(m.kind == "concept" for m in stored)
    run.consolidated += sum(m.consolidated_into is not None for m in stored)
    for m in stored:
        if m.superseded_by is not None:
            key = ref.get(m.id) or m.id
            run.superseded[key] = ref.get(m.superseded_by) or m.superseded_by


def supersession_lines(data: Mapping[str, Any], run: EngineRun) -> list[str]:
    """The store's supersessions against the set: stale versions superseded (by a later
    version of their slot), and false supersessions (nothing replaced the memory)."""
    later: dict[str, set[str]] = {}  # stale ref -> later versions of its slot
    for t in data["tenants"]:
        for q in t["questions"]:
            versions = q["stale"] + q["gold"] if q["category"] in UPDATES else []
            for i, s in enumerate(q["stale"]):
                later[s] = set(versions[i + 1:])
    stale_total = len(later)
    hit = [r for r in run.superseded if r in later]
    right = [r for r in hit if run.superseded[r] in later[r]]
    false = [r for r in run.superseded if r not in later]
    pct = 100 * len(false) / max(1, run.memories)
    return [f"- memories in the store: {run.memories} ({run.concepts} concepts, "
            f"{run.consolidated} memories consolidated into them)",
            f"- stale versions superseded: {len(hit)} of {stale_total} "
            f"({len(right)} by a later version of their own slot)",
            f"- **false supersessions** (superseded, though nothing replaced it): {len(false)} "
            f"of {run.memories} memories ({pct:.2f}%)"]


# --------------------------------------------------------------------------------------------
# baselines
# --------------------------------------------------------------------------------------------
def run_baselines(data: Mapping[str, Any], emb: CachedEmbedder) -> dict[str, dict[str, Hits]]:
    """BM25 and dense rankings (top K) of every question, each tenant indexed on its own."""
    dense = DenseBaseline(emb.model, cache={**emb.cache, **emb.queries})
    bm25 = BM25Baseline()
    out: dict[str, dict[str, Hits]] = {"BM25 (Okapi, ties older first)": {},
                                       "dense MiniLM cosine": {}}
    for t in data["tenants"]:
        ids = [m["id"] for m in t["memories"]]
        texts = [embed_text(m["text"], m["speaker"]) for m in t["memories"]]
        bm25.index_texts(ids, texts)
        dense.index_texts(ids, texts)
        for q in t["questions"]:
            for name, ranker in (("BM25 (Okapi, ties older first)", bm25),
                                 ("dense MiniLM cosine", dense)):
                out[name][q["id"]] = [frozenset({i}) for i in ranker.rank(q["question"])[:K]]
    return out


INTRUDERS = ("stale version", "concept (merged)", "same attribute, other subject",
             "same subject, other attribute", "other slot", "hard negative of a slot",
             "topic-near distractor", "small talk", "nothing returned")


def _intruder(q: Mapping[str, Any], top: frozenset[str] | None,
              mems: Mapping[str, Mapping[str, Any]]) -> str:
    """What kind of memory holds rank 1 instead of gold."""
    if not top:
        return "nothing returned"
    if len(top) > 1:
        return "concept (merged)"
    (ref,) = top
    if ref in q["stale"]:
        return "stale version"
    m = mems[ref]
    if m["role"] == "negative":
        return "hard negative of a slot"
    if m["role"] == "near":
        return "topic-near distractor"
    if m["role"] == "filler":
        return "small talk"
    subject, attribute = m["slot"].split("/")
    if attribute == q["attribute"]:  # the same slot would be stale or gold
        return "same attribute, other subject"
    return "same subject, other attribute" if subject == q["subject"] else "other slot"


def intruder_table(data: Mapping[str, Any], hits: Mapping[str, Mapping[str, Hits]],
                   scores: Mapping[str, Mapping[str, Score]]) -> str:
    """Over the update questions that miss R@1: what holds rank 1 (share of those misses)."""
    mems = {m["id"]: m for t in data["tenants"] for m in t["memories"]}
    qs = [q for t in data["tenants"] for q in t["questions"] if q["category"] in UPDATES]
    names = list(hits)
    counts = {}
    for name in names:
        missed = [q for q in qs if not scores[name][q["id"]].r1]
        c = Counter(_intruder(q, (hits[name][q["id"]] or [None])[0], mems) for q in missed)
        counts[name] = (c, len(missed))
    kinds = [k for k in INTRUDERS if any(counts[n][0][k] for n in names)]
    lines = ["| rank 1 holds | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names),
             "| (update questions missed at rank 1) | "
             + " | ".join(str(counts[n][1]) for n in names) + " |"]
    for k in kinds:
        lines.append(f"| {k} | " + " | ".join(
            f"{100 * counts[n][0][k] / max(1, counts[n][1]):.1f}" for n in names) + " |")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
def _examples(data: Mapping[str, Any], run: EngineRun, scores: Mapping[str, Score],
              n: int) -> list[str]:
    """Up to ``n`` failed questions per category (R@1 missed), with what came back."""
    text = {m["id"]: m for t in data["tenants"] for m in t["memories"]}
    lines: list[str] = []
    for cat in updates_data.CATEGORIES:
        bad = [q for t in data["tenants"] for q in t["questions"]
               if q["category"] == cat and not scores[q["id"]].r1][:n]
        for q in bad:
            lines.append(f"[{cat}/{q['subtype']}] {q['question']}  (gap {q['gap_memories']}, "
                         f"{'same session' if q['same_session'] else 'later session'})")
            for role in ("stale", "gold", "negatives"):
                for i in q[role]:
                    lines.append(f"    {role:9} {text[i]['speaker']}: {text[i]['text']}")
            role_of = {i: r for r in ("stale", "gold", "negatives") for i in q[r]}
            for r, (held, shown) in enumerate(zip(run.hits[q["id"]], run.texts[q["id"]],
                                                  strict=True), start=1):
                roles = sorted({role_of.get(i, "other") for i in held}) or ["other"]
                lines.append(f"    #{r} ({'+'.join(roles)}) {shown[:110]}")
    return lines


def _env(key: str) -> str:
    return f"MNEMONIA_{key.upper()}"


def _pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise SystemExit(f"{text!r}: expected KEY=VALUE")
    return key.strip(), value.strip()


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--seed", type=int, default=updates_data.DEFAULT_SEED)
    ap.add_argument("--data", help="a set written by updates_data.py (default: generate "
                    "from --seed)")
    ap.add_argument("--small", action="store_true",
                    help=f"{updates_data.SMALL_TENANTS} tenants instead of "
                         f"{updates_data.DEFAULT_TENANTS} (a quick check)")
    ap.add_argument("--tenants", type=int, help="generate this many tenants")
    ap.add_argument("--maintain", action="store_true",
                    help="also a store where every maintenance job runs after ingest")
    ap.add_argument("--only-maintain", action="store_true",
                    help="only the store with maintenance (no enrichment-only store)")
    ap.add_argument("--no-oracle", action="store_true",
                    help="skip the oracle row (stale versions superseded by hand, asked again)")
    ap.add_argument("--batch", choices=("turn", "session"), default="turn",
                    help="one memory per add_many call (default, the recipe's) or a session")
    ap.add_argument("--min-activation", type=float, default=None,
                    help="the recall floor (default: the shipped one; 0 fills up to k)")
    ap.add_argument("--backend", choices=EMBEDDER_BACKENDS, default=DEFAULT_EMBEDDER_BACKEND)
    ap.add_argument("--show", type=int, default=0, metavar="N",
                    help="print N missed questions per category for each engine store")
    ap.add_argument("--json", help="write every figure here")
    ap.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                    help="a configuration key of the store (repeatable)")
    ap.add_argument("--vary", metavar="KEY=V1,V2,...",
                    help="ask the same store again with KEY at each value (a recall key)")
    ap.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    args = ap.parse_args(argv)

    def progress(msg: str) -> None:
        if not args.quiet:
            print(msg, file=sys.stderr, flush=True)

    if args.data:
        data = updates_data.load(args.data)
        source = args.data
    else:
        n = args.tenants or (updates_data.SMALL_TENANTS if args.small
                             else updates_data.DEFAULT_TENANTS)
        data = updates_data.generate(args.seed, tenants=n)
        source = f"updates_data.py seed {args.seed}, {n} tenants"
    questions = [q for t in data["tenants"] for q in t["questions"]]
    print(f"# Knowledge updates: {source}")
    print()
    print(f"{len(data['tenants'])} tenants, {sum(len(t['memories']) for t in data['tenants'])} "
          f"memories, {len(questions)} questions; recall k={K}, "
          f"min_activation={'default' if args.min_activation is None else args.min_activation}"
          f", adds per {args.batch}")
    emb = CachedEmbedder(default_embedder(args.backend))
    t0 = time.perf_counter()
    prewarm(emb, data)
    progress(f"embedded {len(emb.cache)} distinct texts in {time.perf_counter() - t0:.0f} s")
    sweeps = ["maintain"] if args.only_maintain else (["enrich", "maintain"] if args.maintain
                                                       else ["enrich"])
    config = MnemoniaConfig.from_env({_env(k): v for k, v in map(_pair, args.config)})
    variants = []
    if args.vary:
        key, values = _pair(args.vary)
        variants = [(f"{key}={v}", config.replace(**{key: getattr(
            MnemoniaConfig.from_env({_env(key): v}), key)})) for v in values.split(",")]
    runs = [r for s in sweeps
            for r in run_engine(data, emb, sweep=s, batch=args.batch,
                                min_activation=args.min_activation, config=config,
                                variants=variants,
                                oracle=s == sweeps[0] and not args.no_oracle, progress=progress)]
    progress("baselines ...")
    t0 = time.perf_counter()
    base = run_baselines(data, emb)
    base_s = time.perf_counter() - t0
    by_q = {q["id"]: q for q in questions}
    scores: dict[str, dict[str, Score]] = {}
    for run in runs:
        scores[run.label] = {i: score(by_q[i], h) for i, h in run.hits.items()}
    for name, table in base.items():
        scores[name] = {i: score(by_q[i], h) for i, h in table.items()}
    summaries = {name: summarise(questions, sc) for name, sc in scores.items()}
    for run in runs:
        print()
        print(f"## {run.label}")
        print()
        print(markdown_table(summaries[run.label]))
        print()
        print("\n".join(supersession_lines(data, run)))
        if run.oracle:
            print("- the same store after `engine.supersede(stale, next version)` for every "
                  "stale version: what perfect detection would give with today's ranking")
            continue
        print(f"- ingest {run.ingest_seconds:.0f} s, {run.sweep} "
              f"{run.sweep_seconds:.0f} s; recall p50 "
              f"{1000 * statistics.median(run.latencies):.1f} ms, "
              f"{statistics.fmean(run.returned):.2f} hits per question")
    for name in base:
        print()
        print(f"## {name}")
        print()
        print(markdown_table(summaries[name]))
    print(f"\n(baselines: {base_s:.0f} s)")
    print()
    print("## By gap, session, subject and negative kind (R@1 / stale>=gold or false sup.)")
    print()
    print(breakdown_table(questions, scores))
    print()
    print("## What holds rank 1 when gold does not (update questions; % of those missed)")
    print()
    hits = {**{run.label: run.hits for run in runs}, **base}
    print(intruder_table(data, hits, scores))
    if args.show:
        for run in runs:
            print()
            print(f"## Missed at rank 1: {run.label} (first {args.show} per category)")
            print()
            print("```")
            print("\n".join(_examples(data, run, scores[run.label], args.show)))
            print("```")
    if args.json:
        out = {"source": source, "seed": data.get("seed"), "k": K, "batch": args.batch,
               "min_activation": args.min_activation,
               "summaries": summaries,
               "store": {run.label: {"memories": run.memories, "concepts": run.concepts,
                                     "consolidated": run.consolidated,
                                     "superseded": run.superseded} for run in runs},
               "per_question": {name: {i: vars(s) for i, s in sc.items()}
                                for name, sc in scores.items()}}
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
