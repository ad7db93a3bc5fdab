"""The corpus the golden reference test (``test_golden.py``) builds: hand-written, shipped.

Three tenants, 50 memories each: a software team (``acme-dev``), a family's household
assistant (``hearth``) and a travel agent (``wayfare``). Every memory has an explicit id and
an explicit ``at`` (UTC, increasing, from 2024-12-27 08:00 to 2025-01-01 03:48, all before the
test clock's start, 2025-01-01 09:00 UTC), a kind, importance (from 0 to 0.95), a topic or none,
a session or none, and entities; some have metadata, a speaker or ``pinned``.

What the texts are made to exercise:

* near-duplicate groups (Jaccard of word sets >= 0.7) that consolidation merges, e.g.
  ``dev-001``/``dev-017``/``dev-032``, ``dev-010``/``dev-011``, ``hh-009``/``hh-010``,
  ``tv-041``/``tv-042`` (one of them ``dev-033``/``dev-034``: "failed" vs "passed", which
  merge although they disagree); ``hh-048``/``hh-049`` have the same word set;
* but no two texts (nor a concept and its members) the same bag of words: the hashing
  embedder would give them the same vector, and Chroma orders exactly tied neighbours
  arbitrarily, so which of them fills the last candidate slot of a recall would vary from run
  to run (``test_golden.py`` checks that no two stored vectors are equal);
* short, unimportant or near-duplicate texts the gatekeeper stores as ``skipped``, long novel
  important ones it enriches at once (``immediate``), and the ``batched`` middle;
* shared entities (``tool:redis``, ``person:mia``, ``place:lisbon``) for entity boosts and
  ``same_entity`` links; sessions for ``follows`` links; words shared across memories for
  keyword matches; contradictions and supersessions.

The order of :data:`MEMORIES` is the ingest order. Consecutive memories of one tenant with
the same ``batch`` label go in one ``add_many`` call; a memory with ``batch=None`` goes in
through ``add``. Change nothing here without regenerating the reference (see
``test_golden.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

__all__ = [
    "CORPUS_START",
    "LIFECYCLE",
    "MEMORIES",
    "QUERIES",
    "TENANTS",
    "USAGE",
    "CorpusMemory",
    "Query",
]

TENANTS = ("acme-dev", "hearth", "wayfare")
CORPUS_START = datetime(2024, 12, 27, 8, 0, tzinfo=UTC)


@dataclass(frozen=True)
class CorpusMemory:
    tenant: str
    id: str
    at: datetime
    kind: str
    importance: float
    topic: str | None
    session_id: str | None
    batch: str | None
    entities: tuple[str, ...]
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)
    pinned: bool = False
    speaker: str | None = None

    def item(self) -> dict[str, Any]:
        """The keyword arguments of ``engine.add`` (also an ``add_many`` item)."""
        out: dict[str, Any] = {
            "id": self.id, "text": self.text, "kind": self.kind, "importance": self.importance,
            "topic": self.topic, "session_id": self.session_id, "entities": list(self.entities),
            "metadata": dict(self.metadata), "at": self.at, "pinned": self.pinned}
        if self.speaker is not None:
            out["speaker"] = self.speaker
        return out


@dataclass(frozen=True)
class _Partial:
    id: str
    at: str
    kind: str
    importance: float
    topic: str | None
    entities: list[str]
    text: str
    metadata: dict[str, Any]
    pinned: bool
    speaker: str | None


def _m(mid: str, at: str, kind: str, importance: float, *, topic: str | None,
       entities: list[str], text: str, metadata: dict[str, Any] | None = None,
       pinned: bool = False, speaker: str | None = None) -> _Partial:
    return _Partial(mid, at, kind, importance, topic, entities, text, metadata or {}, pinned,
                    speaker)


def _chunk(tenant: str, *, session: str | None, batch: str | None,
           memories: list[_Partial]) -> list[CorpusMemory]:
    return [CorpusMemory(
        tenant=tenant, id=p.id,
        at=datetime.fromisoformat(p.at).replace(tzinfo=UTC), kind=p.kind,
        importance=p.importance, topic=p.topic, session_id=session, batch=batch,
        entities=tuple(p.entities), text=p.text, metadata=p.metadata, pinned=p.pinned,
        speaker=p.speaker) for p in memories]


_CHUNKS: list[list[CorpusMemory]] = [
    _chunk("acme-dev", session="standup-1227", batch="d1", memories=[
        _m("dev-001", "2024-12-27T08:00", "episode", 0.55, topic="release",
           entities=["person:lena", "project:atlas"], metadata={"channel": "#standup"},
           text="Lena said the 4.2 release branch is cut and frozen; only blocker fixes go in "
                "until Thursday."),
        _m("dev-002", "2024-12-27T08:06", "episode", 0.5, topic="infra",
           entities=["person:omar", "tool:redis", "tool:memcached"],
           text="Omar is migrating the session cache from Memcached to Redis this sprint."),
        _m("dev-003", "2024-12-27T08:12", "fact", 0.8, topic="infra",
           entities=["tool:redis"],
           text="The production Redis cluster runs in three availability zones with one replica "
                "each."),
        _m("dev-004", "2024-12-27T08:18", "episode", 0.3, topic=None,
           entities=["person:priya"],
           text="Priya is out on Friday for a dentist appointment."),
        _m("dev-005", "2024-12-27T08:24", "episode", 0.4, topic="oncall",
           entities=["tool:grafana"],
           text="The Grafana alert for API latency fired twice overnight but resolved itself."),
        _m("dev-006", "2024-12-27T08:30", "episode", 0.0, topic=None,
           entities=[],
           text="ok, sounds good"),
        _m("dev-007", "2024-12-27T08:36", "fact", 0.95, topic="oncall",
           entities=["tool:postgres"],
           text="Never restart the primary Postgres node during business hours; fail over to the "
                "replica first."),
        _m("dev-008", "2024-12-27T08:42", "episode", 0.6, topic="release",
           entities=["person:jonas", "project:atlas"],
           text="Jonas will write the release notes for Atlas 4.2 and post them in the "
                "changelog."),
    ]),
    _chunk("hearth", session="kitchen-1227", batch="h1", memories=[
        _m("hh-001", "2024-12-27T11:49", "fact", 0.9, topic="health",
           entities=["person:mia"], pinned=True,
           text="Mia is allergic to peanuts; the EpiPen is in the blue pouch in the kitchen "
                "drawer."),
        _m("hh-002", "2024-12-27T11:55", "fact", 0.7, topic="meals",
           entities=["person:ben"],
           text="Ben is vegetarian but eats fish on Fridays."),
        _m("hh-003", "2024-12-27T12:01", "episode", 0.4, topic="meals",
           entities=["person:anna"], speaker="Anna",
           text="Anna asked for a shopping list for the weekend: oat milk, lentils, rice, "
                "spinach and apples."),
        _m("hh-004", "2024-12-27T12:07", "episode", 0.35, topic="school",
           entities=["person:mia", "place:lakeside-school"],
           text="Mia's class at Lakeside School has a field trip to the aquarium on January 9."),
        _m("hh-005", "2024-12-27T12:13", "fact", 0.8, topic="school",
           entities=["person:leo", "place:lakeside-school"],
           text="School pickup for Leo is at 15:15 on weekdays, except Wednesdays at 13:00."),
        _m("hh-006", "2024-12-27T12:19", "episode", 0.1, topic=None,
           entities=[],
           text="ok thanks"),
    ]),
    _chunk("wayfare", session="kenji-call-1", batch="t1", memories=[
        _m("tv-001", "2024-12-27T16:03", "fact", 0.8, topic="preferences",
           entities=["person:kenji"],
           text="Kenji prefers aisle seats and never takes red-eye flights."),
        _m("tv-002", "2024-12-27T16:09", "episode", 0.6, topic="bookings",
           entities=["person:kenji", "place:lisbon", "airline:tap"],
           metadata={"pnr": "K7Q2LM", "fare": 1184.5},
           text="Booked Kenji a return flight Tokyo to Lisbon on March 3, returning March 17, "
                "with TAP."),
        _m("tv-003", "2024-12-27T16:15", "fact", 0.85, topic="visas",
           entities=["person:kenji", "place:lisbon"],
           text="Kenji holds a Japanese passport, so no visa is needed for Portugal for stays "
                "under 90 days."),
        _m("tv-004", "2024-12-27T16:21", "episode", 0.5, topic="bookings",
           entities=["person:sofia", "place:kyoto"],
           text="Sofia wants a week in Kyoto during cherry blossom season, late March or early "
                "April."),
        _m("tv-005", "2024-12-27T16:27", "fact", 0.7, topic="preferences",
           entities=["person:sofia"],
           text="Sofia is vegan and needs hotels with a vegan breakfast option."),
    ]),
    _chunk("acme-dev", session="design-review-1227", batch="d2", memories=[
        _m("dev-009", "2024-12-27T19:18", "fact", 0.7, topic="infra",
           entities=["tool:kubernetes"],
           text="All Kubernetes deployments must set CPU and memory limits; the admission "
                "controller rejects pods without them."),
        _m("dev-010", "2024-12-27T19:24", "episode", 0.5, topic="infra",
           entities=["tool:terraform"],
           text="We agreed to move Terraform state to an S3 bucket with DynamoDB locking."),
        _m("dev-011", "2024-12-27T19:30", "episode", 0.5, topic="infra",
           entities=["tool:terraform"],
           text="We agreed to move the Terraform state to an S3 bucket with DynamoDB locking."),
        _m("dev-012", "2024-12-27T19:36", "fact", 0.6, topic="infra",
           entities=["tool:redis"],
           text="Redis keys for sessions expire after 30 minutes of inactivity."),
        _m("dev-013", "2024-12-27T19:42", "episode", 0.45, topic="infra",
           entities=["person:lena", "tool:redis"], speaker="Lena",
           text="the eviction policy should be allkeys-lru instead of volatile-lru"),
        _m("dev-014", "2024-12-27T19:48", "episode", 0.2, topic=None,
           entities=[],
           text="coffee machine on floor 3 is broken again"),
    ]),
    _chunk("acme-dev", session=None, batch=None, memories=[
        _m("dev-015", "2024-12-27T23:16", "fact", 0.9, topic="oncall",
           entities=[], pinned=True,
           text="The on-call rotation changes every Monday at 10:00 Berlin time; handover "
                "happens in the #oncall channel."),
    ]),
    _chunk("acme-dev", session=None, batch=None, memories=[
        _m("dev-016", "2024-12-28T01:51", "episode", 0.35, topic="oncall",
           entities=["tool:sentry", "service:checkout"],
           text="Sentry reported a spike of TimeoutError in the checkout service after the 4.1.3 "
                "deploy."),
    ]),
    _chunk("hearth", session="evening-1227", batch="h2", memories=[
        _m("hh-007", "2024-12-28T05:03", "episode", 0.5, topic="chores",
           entities=["pet:biscuit"],
           text="Biscuit needs his flea treatment on the first of every month."),
        _m("hh-008", "2024-12-28T05:09", "fact", 0.6, topic="health",
           entities=["person:rosa"],
           text="Grandma Rosa takes her blood pressure pill every morning at 8."),
        _m("hh-009", "2024-12-28T05:15", "episode", 0.45, topic="meals",
           entities=["person:anna"],
           text="Anna wants to try a lentil curry recipe on Sunday."),
        _m("hh-010", "2024-12-28T05:21", "episode", 0.45, topic="meals",
           entities=["person:anna"],
           text="Anna wants to try the lentil curry recipe on Sunday night."),
        _m("hh-011", "2024-12-28T05:27", "episode", 0.3, topic="chores",
           entities=[],
           text="The dishwasher makes a grinding noise when it drains."),
        _m("hh-012", "2024-12-28T05:33", "episode", 0.5, topic="chores",
           entities=[], metadata={"cost_estimate": 85},
           text="The plumber is booked for Tuesday morning to look at the dishwasher drain."),
    ]),
    _chunk("wayfare", session="sofia-email-1", batch="t2", memories=[
        _m("tv-006", "2024-12-28T09:22", "episode", 0.45, topic="bookings",
           entities=["person:sofia", "place:kyoto"],
           text="Held two rooms at the Hotel Kanra Kyoto from March 29 to April 5 for Sofia."),
        _m("tv-007", "2024-12-28T09:28", "episode", 0.05, topic=None,
           entities=[],
           text="noted"),
        _m("tv-008", "2024-12-28T09:34", "fact", 0.92, topic="preferences",
           entities=["person:duarte"], pinned=True,
           text="Duarte travels with his guide dog; every booking must confirm the airline and "
                "hotel accept service animals."),
        _m("tv-009", "2024-12-28T09:40", "episode", 0.5, topic="bookings",
           entities=["person:duarte", "place:reykjavik"],
           text="Duarte asked for a quiet guesthouse in Reykjavik for the northern lights, "
                "February 10 to 15."),
        _m("tv-010", "2024-12-28T09:46", "episode", 0.5, topic="bookings",
           entities=["person:duarte", "place:reykjavik"],
           text="Duarte asked for a quiet guesthouse in Reykjavik to see the northern lights, "
                "February 10 to 15."),
        _m("tv-011", "2024-12-28T09:52", "fact", 0.6, topic="visas",
           entities=["place:reykjavik"],
           text="Visitors to Iceland from the Schengen area only need a national ID card."),
    ]),
    _chunk("hearth", session=None, batch=None, memories=[
        _m("hh-013", "2024-12-28T12:48", "fact", 0.75, topic="health",
           entities=["person:leo"],
           text="Leo's pediatrician is Dr. Okafor at the Elm Street clinic; appointments by "
                "phone only."),
    ]),
    _chunk("hearth", session=None, batch=None, memories=[
        _m("hh-014", "2024-12-28T16:21", "episode", 0.2, topic=None,
           entities=[],
           text="it is raining again"),
    ]),
    _chunk("acme-dev", session="standup-1228", batch="d3", memories=[
        _m("dev-017", "2024-12-28T19:01", "episode", 0.55, topic="release",
           entities=["person:lena", "project:atlas"],
           text="Lena said again the 4.2 release branch is cut and frozen, only blocker fixes "
                "go in until Thursday."),
        _m("dev-018", "2024-12-28T19:07", "episode", 0.5, topic="infra",
           entities=["person:omar", "tool:redis", "tool:memcached"],
           text="Omar finished migrating the session cache from Memcached to Redis this sprint."),
        _m("dev-019", "2024-12-28T19:13", "episode", 0.6, topic="oncall",
           entities=["tool:postgres", "service:checkout"],
           text="The checkout TimeoutError was caused by a missing index on the orders table in "
                "Postgres."),
        _m("dev-020", "2024-12-28T19:19", "fact", 0.7, topic="oncall",
           entities=["person:priya", "tool:postgres"],
           text="Priya added the index on orders.customer_id and checkout latency dropped back "
                "under 200 ms."),
        _m("dev-021", "2024-12-28T19:25", "episode", 0.25, topic=None,
           entities=["person:jonas"],
           text="Jonas asked whether anyone has the Figma link for the new dashboard."),
        _m("dev-022", "2024-12-28T19:31", "episode", 0.0, topic=None,
           entities=[],
           text="thanks!"),
    ]),
    _chunk("wayfare", session="kenji-call-2", batch="t3", memories=[
        _m("tv-012", "2024-12-28T22:48", "episode", 0.45, topic="bookings",
           entities=["person:kenji", "place:porto"],
           text="Kenji wants to add three nights in Porto after Lisbon."),
        _m("tv-013", "2024-12-28T22:54", "episode", 0.5, topic="bookings",
           entities=["person:kenji", "place:porto"],
           text="Booked the train from Lisbon to Porto for Kenji on March 10, first class, aisle "
                "seat."),
        _m("tv-014", "2024-12-28T23:00", "fact", 0.55, topic="preferences",
           entities=["person:sofia"],
           text="Sofia likes small design hotels over big chains."),
        _m("tv-015", "2024-12-28T23:06", "episode", 0.3, topic=None,
           entities=["person:sofia"],
           text="Sofia's credit card was declined for the Kyoto deposit; she will call her bank."),
        _m("tv-016", "2024-12-28T23:12", "episode", 0.4, topic="bookings",
           entities=["person:sofia"],
           text="Sofia paid the Kyoto deposit by bank transfer."),
        _m("tv-017", "2024-12-28T23:18", "fact", 0.7, topic="visas",
           entities=["person:sofia", "place:kyoto"],
           text="Sofia's Brazilian passport allows visa-free entry to Japan for short stays."),
        _m("tv-018", "2024-12-28T23:24", "episode", 0.2, topic=None,
           entities=[],
           text="Kenji called to say thanks for the itinerary."),
    ]),
    _chunk("acme-dev", session="retro-1228", batch="d4", memories=[
        _m("dev-023", "2024-12-29T03:18", "episode", 0.5, topic="release",
           entities=[],
           text="The retro agreed that release freezes should start on Monday, not Wednesday."),
        _m("dev-024", "2024-12-29T03:24", "fact", 0.6, topic="release",
           entities=[],
           text="Release freezes start on Wednesday and last until the release is tagged."),
        _m("dev-025", "2024-12-29T03:30", "fact", 0.65, topic="release",
           entities=[],
           text="Release freezes start on Monday and last until the release is tagged."),
        _m("dev-026", "2024-12-29T03:36", "episode", 0.4, topic=None,
           entities=["tool:grafana"],
           text="Too many alerts go to the whole team; the retro wants Grafana alerts routed by "
                "service owner."),
        _m("dev-027", "2024-12-29T03:42", "episode", 0.4, topic=None,
           entities=["tool:grafana"],
           text="Too many alerts go to the whole team, and the retro wants Grafana alerts routed "
                "by the service owner."),
        _m("dev-028", "2024-12-29T03:48", "episode", 0.35, topic=None,
           entities=["person:omar", "tool:redis"],
           text="Action item: Omar to document the Redis failover runbook."),
    ]),
    _chunk("hearth", session="weekend-1228", batch="h3", memories=[
        _m("hh-015", "2024-12-29T06:49", "episode", 0.55, topic="school",
           entities=["person:ben", "person:leo"],
           text="Ben signed Leo up for swimming lessons on Saturdays at 10."),
        _m("hh-016", "2024-12-29T06:55", "episode", 0.55, topic="school",
           entities=["person:ben", "person:leo"],
           text="Ben signed Leo up for swimming lessons on Saturdays at 10 am."),
        _m("hh-017", "2024-12-29T07:01", "fact", 0.65, topic="meals",
           entities=["person:mia"],
           text="Mia does not eat mushrooms."),
        _m("hh-018", "2024-12-29T07:07", "fact", 0.65, topic="meals",
           entities=["person:mia"],
           text="Mia eats mushrooms now if they are cooked in soup."),
        _m("hh-019", "2024-12-29T07:13", "episode", 0.4, topic="chores",
           entities=[],
           text="Recycling goes out on Thursday evening; paper and glass alternate weeks."),
        _m("hh-020", "2024-12-29T07:19", "episode", 0.3, topic="chores",
           entities=["person:leo"],
           text="Leo forgot his gym bag twice this week."),
        _m("hh-021", "2024-12-29T07:25", "fact", 0.7, topic="health",
           entities=["person:anna"],
           text="Anna's dentist appointment is on January 7 at 9:30."),
        _m("hh-022", "2024-12-29T07:31", "fact", 0.7, topic="health",
           entities=["person:anna"],
           text="Anna's dentist appointment moved to January 14 at 9:30."),
    ]),
    _chunk("acme-dev", session=None, batch=None, memories=[
        _m("dev-029", "2024-12-29T11:09", "fact", 0.85, topic="infra",
           entities=["tool:grafana", "tool:terraform"],
           text="Grafana dashboards live in the infra-dashboards repo and are deployed by "
                "Terraform."),
    ]),
    _chunk("acme-dev", session=None, batch=None, memories=[
        _m("dev-030", "2024-12-29T13:54", "episode", 0.05, topic=None,
           entities=[],
           text="lunch?"),
    ]),
    _chunk("acme-dev", session=None, batch=None, memories=[
        _m("dev-031", "2024-12-29T17:16", "episode", 0.5, topic="oncall",
           entities=["tool:redis"], metadata={"incident": "INC-2291", "severity": 2},
           text="Pager went off at 03:12 because the Redis replica in zone b lost its connection "
                "to the primary."),
    ]),
    _chunk("wayfare", session="duarte-visit", batch="t4", memories=[
        _m("tv-019", "2024-12-29T21:15", "episode", 0.35, topic="bookings",
           entities=["person:duarte"],
           text="Travel insurance for Duarte's Iceland trip covers cancellation and medical "
                "costs."),
        _m("tv-020", "2024-12-29T21:21", "episode", 0.35, topic="bookings",
           entities=["person:duarte"],
           text="Travel insurance for Duarte's Iceland trip covers cancellation and the medical "
                "costs."),
        _m("tv-021", "2024-12-29T21:27", "fact", 0.65, topic="preferences",
           entities=["person:kenji"],
           text="Kenji collects Star Alliance miles; always add his frequent flyer number."),
        _m("tv-022", "2024-12-29T21:33", "fact", 0.6, topic="preferences",
           entities=["person:kenji"],
           text="Kenji collects Oneworld miles; always add his frequent flyer number."),
        _m("tv-023", "2024-12-29T21:39", "episode", 0.5, topic="bookings",
           entities=["person:duarte", "place:reykjavik"],
           text="The Reykjavik guesthouse confirmed that guide dogs are welcome."),
        _m("tv-024", "2024-12-29T21:45", "episode", 0.45, topic="bookings",
           entities=["person:duarte", "airline:icelandair"],
           text="Icelandair confirmed Duarte's guide dog can travel in the cabin."),
        _m("tv-025", "2024-12-29T21:51", "episode", 0.0, topic=None,
           entities=[],
           text="asked about weather in Reykjavik in February"),
        _m("tv-026", "2024-12-29T21:57", "fact", 0.5, topic=None,
           entities=["place:reykjavik"],
           text="Northern lights are most visible from September to March on clear, dark nights."),
    ]),
    _chunk("hearth", session="sunday-1229", batch="h4", memories=[
        _m("hh-023", "2024-12-30T01:03", "episode", 0.5, topic="meals",
           entities=["person:rosa"],
           text="Grandma Rosa is coming for dinner on Saturday; she cannot have salt."),
        _m("hh-024", "2024-12-30T01:09", "episode", 0.25, topic=None,
           entities=["pet:biscuit"],
           text="Biscuit chewed the sofa cushion."),
        _m("hh-025", "2024-12-30T01:15", "episode", 0.35, topic="school",
           entities=["person:mia"],
           text="Mia needs a costume for the school play: she is a tree."),
        _m("hh-026", "2024-12-30T01:21", "episode", 0.35, topic="school",
           entities=["person:mia"],
           text="Mia needs a costume for the school play, she is playing a tree."),
        _m("hh-027", "2024-12-30T01:27", "fact", 0.6, topic="chores",
           entities=[],
           text="The Wi-Fi password is on the back of the router in the hallway cupboard."),
        _m("hh-028", "2024-12-30T01:33", "episode", 0.4, topic="meals",
           entities=["person:ben", "person:leo"],
           text="Ben made the lentil curry and everyone liked it except Leo."),
        _m("hh-029", "2024-12-30T01:39", "episode", 0.15, topic=None,
           entities=[],
           text="good night"),
    ]),
    _chunk("acme-dev", session="standup-1229", batch="d5", memories=[
        _m("dev-032", "2024-12-30T05:22", "episode", 0.55, topic="release",
           entities=["person:lena", "project:atlas"],
           text="Reminder: Lena said the 4.2 release branch is cut and frozen; only blocker "
                "fixes go in until Thursday!"),
        _m("dev-033", "2024-12-30T05:28", "episode", 0.5, topic="release",
           entities=["project:atlas"],
           text="Atlas 4.2 release candidate 1 failed the smoke tests on the payments page."),
        _m("dev-034", "2024-12-30T05:34", "episode", 0.55, topic="release",
           entities=["project:atlas"],
           text="Atlas 4.2 release candidate 2 passed the smoke tests on the payments page."),
        _m("dev-035", "2024-12-30T05:40", "fact", 0.7, topic="infra",
           entities=["tool:kubernetes"],
           text="Kubernetes nodes are upgraded by rolling replacement; never drain more than one "
                "node per zone at a time."),
        _m("dev-036", "2024-12-30T05:46", "episode", 0.3, topic=None,
           entities=["person:priya"],
           text="Priya shared a postmortem template in the wiki."),
        _m("dev-037", "2024-12-30T05:52", "episode", 0.45, topic="oncall",
           entities=["tool:redis"],
           text="The Redis failover runbook is now in the wiki under Operations / Redis."),
    ]),
    _chunk("wayfare", session=None, batch=None, memories=[
        _m("tv-027", "2024-12-30T08:42", "episode", 0.4, topic="bookings",
           entities=["person:sofia", "place:nara"],
           text="Sofia added a day trip to Nara to see the deer park."),
    ]),
    _chunk("wayfare", session=None, batch=None, memories=[
        _m("tv-028", "2024-12-30T12:09", "episode", 0.35, topic="bookings",
           entities=["person:sofia", "place:nara"],
           text="Sofia added a day trip to Nara to visit the deer park."),
    ]),
    _chunk("hearth", session="monday-1230", batch="h5", memories=[
        _m("hh-030", "2024-12-30T14:43", "fact", 0.5, topic="chores",
           entities=["pet:biscuit"],
           text="Biscuit's vet is the Harbour Animal Clinic, open Saturdays until noon."),
        _m("hh-031", "2024-12-30T14:49", "episode", 0.45, topic="health",
           entities=["person:leo"],
           text="Leo had a mild fever on Sunday; it was gone by Monday."),
        _m("hh-032", "2024-12-30T14:55", "episode", 0.45, topic="health",
           entities=["person:leo"],
           text="Leo had a mild fever on Sunday, it was gone by Monday morning."),
        _m("hh-033", "2024-12-30T15:01", "fact", 0.55, topic="meals",
           entities=[],
           text="The family eats dinner at 18:30 on school nights."),
        _m("hh-034", "2024-12-30T15:07", "episode", 0.3, topic="school",
           entities=["place:lakeside-school"],
           text="Lakeside School sends the weekly newsletter on Fridays by email."),
        _m("hh-035", "2024-12-30T15:13", "episode", 0.5, topic="chores",
           entities=["person:anna"],
           text="Anna wants the heating to drop to 17 degrees after 22:00."),
        _m("hh-036", "2024-12-30T15:19", "episode", 0.0, topic="chores",
           entities=["person:anna"],
           text="Anna wants the heating at 17 degrees after 22:00."),
        _m("hh-037", "2024-12-30T15:25", "fact", 0.6, topic="meals",
           entities=["person:anna", "person:ben"],
           text="Oat milk is for Anna; Ben and the kids drink regular milk."),
    ]),
    _chunk("wayfare", session="ops-1230", batch="t5", memories=[
        _m("tv-029", "2024-12-30T18:36", "fact", 0.55, topic="preferences",
           entities=["person:duarte"],
           text="Duarte prefers morning flights and a window seat so the dog can lie by the "
                "wall."),
        _m("tv-030", "2024-12-30T18:42", "episode", 0.3, topic=None,
           entities=["person:kenji", "place:lisbon"],
           text="Lisbon hotel for Kenji: Memmo Alfama, sea view room, breakfast included."),
        _m("tv-031", "2024-12-30T18:48", "episode", 0.45, topic="bookings",
           entities=["person:kenji", "airline:tap"],
           text="Kenji's TAP flight on March 3 was rescheduled to depart two hours later."),
        _m("tv-032", "2024-12-30T18:54", "episode", 0.25, topic=None,
           entities=["person:sofia"],
           text="Sent Sofia the JR Pass comparison."),
        _m("tv-033", "2024-12-30T19:00", "fact", 0.6, topic="visas",
           entities=["person:duarte", "place:reykjavik"],
           text="Iceland is in the Schengen area, so Duarte's Portuguese passport is enough."),
        _m("tv-034", "2024-12-30T19:06", "episode", 0.5, topic="bookings",
           entities=["person:kenji", "place:lisbon"],
           text="Kenji wants a cooking class in Lisbon with a local chef."),
        _m("tv-035", "2024-12-30T19:12", "episode", 0.4, topic="bookings",
           entities=["person:kenji", "place:lisbon"],
           text="Booked a Portuguese cooking class in Lisbon for Kenji on March 6."),
        _m("tv-036", "2024-12-30T19:18", "episode", 0.15, topic=None,
           entities=[],
           text="will do"),
        _m("tv-037", "2024-12-30T19:24", "fact", 0.5, topic=None,
           entities=["place:kyoto"],
           text="Cherry blossom season in Kyoto usually peaks in the first week of April."),
    ]),
    _chunk("acme-dev", session="release-4.2", batch="d6", memories=[
        _m("dev-038", "2024-12-30T23:12", "fact", 0.0, topic=None,
           entities=[],
           text="Old staging credentials were rotated; the old ones no longer work."),
        _m("dev-039", "2024-12-30T23:18", "episode", 0.6, topic="infra",
           entities=["tool:postgres", "tool:pgbouncer"],
           text="Postgres connection pool is capped at 200 connections per service via "
                "PgBouncer."),
        _m("dev-040", "2024-12-30T23:24", "fact", 0.75, topic="infra",
           entities=["tool:postgres", "tool:pgbouncer"],
           text="The Postgres connection pool is capped at 200 connections per service through "
                "PgBouncer."),
        _m("dev-041", "2024-12-30T23:30", "episode", 0.5, topic="oncall",
           entities=["person:omar"], speaker="Omar",
           text="I want a second on-call person for the Redis and Postgres alerts during the "
                "holidays."),
        _m("dev-042", "2024-12-30T23:36", "episode", 0.4, topic=None,
           entities=["person:jonas"], metadata={"source": "1:1"},
           text="Jonas prefers async code reviews over meetings for small pull requests."),
        _m("dev-043", "2024-12-30T23:42", "fact", 0.55, topic="release",
           entities=[],
           text="Hotfix releases skip the freeze but need two approvals."),
        _m("dev-044", "2024-12-30T23:48", "episode", 0.5, topic="release",
           entities=["project:atlas"],
           text="Atlas 4.2 was tagged and rolled out to 10 percent of traffic."),
        _m("dev-045", "2024-12-30T23:54", "episode", 0.6, topic="release",
           entities=["project:atlas", "service:checkout"],
           text="Atlas 4.2 rollout paused at 10 percent after the error rate in checkout "
                "doubled."),
        _m("dev-046", "2024-12-31T00:00", "episode", 0.55, topic="oncall",
           entities=["project:atlas", "service:checkout"],
           text="Rolled Atlas 4.2 back to 4.1.3; checkout error rate back to normal."),
    ]),
    _chunk("acme-dev", session=None, batch=None, memories=[
        _m("dev-047", "2024-12-31T02:55", "episode", 0.2, topic=None,
           entities=[],
           text="the build is green now"),
    ]),
    _chunk("acme-dev", session="release-4.2", batch="d7", memories=[
        _m("dev-048", "2024-12-31T06:27", "episode", 0.2, topic=None,
           entities=[],
           text="The build is green. Green!"),
        _m("dev-049", "2024-12-31T06:33", "fact", 0.5, topic=None,
           entities=["tool:redis"],
           text="Redis is also used as the rate limiter backend for the public API."),
        _m("dev-050", "2024-12-31T06:39", "fact", 0.6, topic=None,
           entities=["tool:sentry", "service:checkout"],
           text="Sentry alerts for the checkout service page the payments squad."),
    ]),
    _chunk("hearth", session="tuesday-1231", batch="h6", memories=[
        _m("hh-038", "2024-12-31T09:18", "episode", 0.4, topic="school",
           entities=["person:mia"],
           text="Mia got a gold star for her reading log this week."),
        _m("hh-039", "2024-12-31T09:24", "episode", 0.35, topic="chores",
           entities=[],
           text="The car is due for its winter tyre change before January 15."),
        _m("hh-040", "2024-12-31T09:30", "episode", 0.55, topic="health",
           entities=["person:rosa", "person:anna"],
           text="Rosa's blood pressure readings were high all week; Anna will call her doctor."),
        _m("hh-041", "2024-12-31T09:36", "fact", 0.5, topic="meals",
           entities=["person:ben"],
           text="Friday is pizza night; Ben makes the dough on Thursday."),
        _m("hh-042", "2024-12-31T09:42", "episode", 0.3, topic=None,
           entities=["person:leo"],
           text="Leo asked if we can get a second cat."),
        _m("hh-043", "2024-12-31T09:48", "episode", 0.45, topic="school",
           entities=["person:leo"],
           text="Parent-teacher meeting for Leo is on January 16 at 17:00."),
        _m("hh-044", "2024-12-31T09:54", "episode", 0.2, topic=None,
           entities=[],
           text="the dishwasher is fixed"),
    ]),
    _chunk("hearth", session=None, batch=None, memories=[
        _m("hh-045", "2024-12-31T13:10", "episode", 0.4, topic="meals",
           entities=["person:rosa"], metadata={"attachment": "soup.pdf"},
           text="Rosa sent her recipe for salt-free tomato soup."),
    ]),
    _chunk("wayfare", session="ops-1231", batch="t6", memories=[
        _m("tv-038", "2024-12-31T17:03", "episode", 0.45, topic="bookings",
           entities=["person:sofia", "place:kyoto"],
           text="Sofia asked to move the Kyoto dates one day later because of the blossom "
                "forecast."),
        _m("tv-039", "2024-12-31T17:09", "episode", 0.35, topic="bookings",
           entities=["person:kenji", "place:lisbon"],
           text="Kenji's Lisbon hotel upgraded him to a river view suite."),
        _m("tv-040", "2024-12-31T17:15", "episode", 0.5, topic="bookings",
           entities=["person:duarte"],
           text="Duarte's Reykjavik trip is fully booked: flights, guesthouse, insurance and a "
                "northern lights tour."),
        _m("tv-041", "2024-12-31T17:21", "episode", 0.3, topic=None,
           entities=[],
           text="Remember to send invoices before the end of the month."),
        _m("tv-042", "2024-12-31T17:27", "episode", 0.3, topic=None,
           entities=[],
           text="Remember to send the invoices before the end of the month."),
        _m("tv-043", "2024-12-31T17:33", "fact", 0.7, topic="preferences",
           entities=["person:sofia"],
           text="Sofia does not fly on budget airlines after a lost luggage incident in 2022."),
        _m("tv-044", "2024-12-31T17:39", "episode", 0.4, topic="bookings",
           entities=["person:sofia", "airline:ana", "place:osaka"],
           text="Sofia's flights to Osaka Kansai are on ANA, arriving March 28."),
    ]),
    _chunk("hearth", session="tuesday-1231", batch="h7", memories=[
        _m("hh-046", "2024-12-31T20:39", "fact", 0.6, topic="chores",
           entities=["pet:biscuit"],
           text="Biscuit gets half a cup of dry food twice a day, never chocolate or grapes."),
        _m("hh-047", "2024-12-31T20:45", "episode", 0.5, topic="health",
           entities=["person:mia", "place:lakeside-school"],
           text="Mia's peanut allergy action plan was updated by the school nurse."),
        _m("hh-048", "2024-12-31T20:51", "episode", 0.25, topic=None,
           entities=[],
           text="Remind me to buy batteries for the smoke alarm."),
        _m("hh-049", "2024-12-31T20:57", "episode", 0.25, topic=None,
           entities=[],
           text="remind me to buy batteries for the smoke alarm, remind me"),
        _m("hh-050", "2024-12-31T21:03", "fact", 0.45, topic="school",
           entities=["place:lakeside-school"],
           text="Lakeside School is closed on January 20 for a teacher training day."),
    ]),
    _chunk("wayfare", session=None, batch=None, memories=[
        _m("tv-045", "2025-01-01T00:40", "episode", 0.25, topic=None,
           entities=[],
           text="New client inquiry about a honeymoon in the Azores."),
    ]),
    _chunk("wayfare", session="ops-1231", batch="t7", memories=[
        _m("tv-046", "2025-01-01T03:24", "fact", 0.45, topic=None,
           entities=["place:porto", "place:lisbon"],
           text="Porto to Lisbon trains run every hour and take about three hours."),
        _m("tv-047", "2025-01-01T03:30", "episode", 0.35, topic="bookings",
           entities=["person:kenji"],
           text="Kenji asked whether he needs an adapter for Portugal; yes, type F plugs."),
        _m("tv-048", "2025-01-01T03:36", "episode", 0.55, topic="visas",
           entities=["person:kenji"],
           text="ETIAS pre-travel authorisation is not yet required for Kenji's March trip."),
        _m("tv-049", "2025-01-01T03:42", "episode", 0.2, topic=None,
           entities=[],
           text="printer out of toner"),
        _m("tv-050", "2025-01-01T03:48", "fact", 0.5, topic="preferences",
           entities=["person:duarte"], metadata={"dog": "Farol"},
           text="Duarte's dog is called Farol and needs a water bowl on long transfers."),
    ]),
]

MEMORIES: tuple[CorpusMemory, ...] = tuple(m for chunk in _CHUNKS for m in chunk)

# After ingest, in this order (the test moves the clock one minute before each step):
# (operation, tenant, positional arguments, keyword arguments).
LIFECYCLE: tuple[tuple[str, str, tuple[Any, ...], dict[str, Any]], ...] = (
    # acme-dev
    ("relate", "acme-dev", ("dev-019", "dev-016", "causes"), {"strength": 0.9}),
    ("relate", "acme-dev", ("dev-020", "dev-019", "follows"), {}),
    ("relate", "acme-dev", ("dev-023", "dev-024", "contradicts"), {}),
    ("supersede", "acme-dev", ("dev-024", "dev-025"), {}),
    ("relate", "acme-dev", ("dev-033", "dev-034", "follows"), {"strength": 0.8}),
    ("relate", "acme-dev", ("dev-037", "dev-028", "context_of"), {"strength": 0.8}),
    ("relate", "acme-dev", ("dev-044", "dev-045", "follows"), {}),
    ("relate", "acme-dev", ("dev-045", "dev-046", "causes"), {"strength": 0.7}),
    ("relate", "acme-dev", ("dev-003", "dev-031", "generalizes"), {"strength": 0.6}),
    ("relate", "acme-dev", ("dev-012", "dev-003", "part_of"), {"strength": 0.8}),
    ("relate", "acme-dev", ("dev-049", "dev-003", "correlates"), {"strength": 0.5}),
    ("relate", "acme-dev", ("dev-007", "dev-039", "implies"), {"strength": 0.6}),
    ("relate", "acme-dev", ("dev-026", "dev-005", "related_to"), {"strength": 0.7}),
    ("feedback", "acme-dev", ("dev-003", 5), {}),
    ("feedback", "acme-dev", ("dev-003", 4), {}),
    ("feedback", "acme-dev", ("dev-013", 1), {}),
    ("feedback", "acme-dev", ("dev-046", 3), {}),
    ("forget", "acme-dev", ("dev-004",), {}),
    ("restore", "acme-dev", ("dev-004",), {}),
    ("forget", "acme-dev", ("dev-030",), {}),
    ("pin", "acme-dev", ("dev-029",), {}),
    ("update_metadata", "acme-dev", ("dev-042",), {"metadata": {"reviewed": True, "team": "web"}}),
    ("report_use", "acme-dev",
     ("We rolled Atlas 4.2 back to 4.1.3 and the checkout error rate is back to normal.",
      ["dev-046", "dev-045", "dev-044"]), {}),
    # hearth
    ("relate", "hearth", ("hh-011", "hh-012", "causes"), {}),
    ("relate", "hearth", ("hh-012", "hh-044", "causes"), {"strength": 0.8}),
    ("relate", "hearth", ("hh-017", "hh-018", "contradicts"), {}),
    ("supersede", "hearth", ("hh-021", "hh-022"), {}),
    ("relate", "hearth", ("hh-008", "hh-040", "context_of"), {}),
    ("relate", "hearth", ("hh-001", "hh-047", "generalizes"), {"strength": 0.9}),
    ("relate", "hearth", ("hh-009", "hh-028", "follows"), {}),
    ("relate", "hearth", ("hh-045", "hh-023", "part_of"), {"strength": 0.7}),
    ("relate", "hearth", ("hh-046", "hh-030", "same_entity"), {"strength": 0.6}),
    ("feedback", "hearth", ("hh-005", 3), {}),
    ("feedback", "hearth", ("hh-014", 0), {}),
    ("feedback", "hearth", ("hh-001", 5), {}),
    ("forget", "hearth", ("hh-042",), {}),
    ("pin", "hearth", ("hh-046",), {}),
    ("pin", "hearth", ("hh-046",), {"pinned": False}),
    ("update_metadata", "hearth", ("hh-012",), {"metadata": {"cost_estimate": 120,
                                                             "paid": False}}),
    # wayfare
    ("relate", "wayfare", ("tv-012", "tv-013", "causes"), {}),
    ("relate", "wayfare", ("tv-015", "tv-016", "follows"), {}),
    ("relate", "wayfare", ("tv-022", "tv-021", "contradicts"), {}),
    ("supersede", "wayfare", ("tv-021", "tv-022"), {}),
    ("relate", "wayfare", ("tv-008", "tv-023", "generalizes"), {}),
    ("relate", "wayfare", ("tv-027", "tv-006", "part_of"), {}),
    ("relate", "wayfare", ("tv-031", "tv-002", "correlates"), {"strength": 0.6}),
    ("relate", "wayfare", ("tv-011", "tv-033", "implies"), {}),
    ("relate", "wayfare", ("tv-034", "tv-035", "causes"), {}),
    ("relate", "wayfare", ("tv-024", "tv-040", "part_of"), {"strength": 0.9}),
    ("relate", "wayfare", ("tv-037", "tv-038", "causes"), {"strength": 0.75}),
    ("relate", "wayfare", ("tv-012", "tv-013", "causes"), {"strength": 0.5}),  # an update
    ("feedback", "wayfare", ("tv-003", 5), {}),
    ("feedback", "wayfare", ("tv-025", 2), {}),
    ("feedback", "wayfare", ("tv-008", 4), {}),
    ("forget", "wayfare", ("tv-045",), {}),
    ("forget", "wayfare", ("tv-049",), {"hard": True}),
    ("pin", "wayfare", ("tv-026",), {}),
    ("update_metadata", "wayfare", ("tv-009",), {"metadata": {"status": "confirmed"}}),
)


@dataclass(frozen=True)
class Query:
    qid: str
    tenant: str
    text: str
    topic: str | None
    entity: str | None = None


QUERIES: tuple[Query, ...] = (
    Query("q01", "acme-dev", "redis failover runbook", "oncall", "tool:redis"),
    Query("q02", "acme-dev", "who is migrating the session cache to Redis?", "infra",
          "person:omar"),
    Query("q03", "acme-dev", "when do release freezes start?", "release"),
    Query("q04", "acme-dev", "why did checkout time out after the deploy", "oncall",
          "service:checkout"),
    Query("q05", "acme-dev", "postgres connection pool limit", "infra", "tool:postgres"),
    Query("q06", "acme-dev", "kubernetes resource limits for pods", "infra", "tool:kubernetes"),
    Query("q07", "acme-dev", "Atlas 4.2 rollout status", "release", "project:atlas"),
    Query("q08", "acme-dev", "how should grafana alerts be routed", "oncall", "tool:grafana"),
    Query("q09", "acme-dev", "where is the terraform state stored", "infra", "tool:terraform"),
    Query("q10", "acme-dev", "on-call rotation handover on Monday", "oncall"),
    Query("q11", "hearth", "what is Mia allergic to?", "health", "person:mia"),
    Query("q12", "hearth", "when is Leo picked up from school", "school", "person:leo"),
    Query("q13", "hearth", "lentil curry recipe", "meals", "person:anna"),
    Query("q14", "hearth", "when is Anna's dentist appointment", "health", "person:anna"),
    Query("q15", "hearth", "grandma Rosa blood pressure", "health", "person:rosa"),
    Query("q16", "hearth", "what does Biscuit eat", "chores", "pet:biscuit"),
    Query("q17", "hearth", "dishwasher grinding noise", "chores"),
    Query("q18", "hearth", "swimming lessons on Saturday", "school", "person:ben"),
    Query("q19", "hearth", "costume for the school play", "school", "person:mia"),
    Query("q20", "hearth", "heating temperature at night", "chores"),
    Query("q21", "wayfare", "Kenji seat preference on flights", "preferences", "person:kenji"),
    Query("q22", "wayfare", "Kenji's hotel in Lisbon", "bookings", "place:lisbon"),
    Query("q23", "wayfare", "Sofia Kyoto trip dates", "bookings", "place:kyoto"),
    Query("q24", "wayfare", "does Duarte need a visa for Iceland", "visas", "person:duarte"),
    Query("q25", "wayfare", "can the guide dog fly in the cabin", "bookings"),
    Query("q26", "wayfare", "best time to see the northern lights", "bookings",
          "place:reykjavik"),
    Query("q27", "wayfare", "which frequent flyer miles does Kenji collect", "preferences",
          "person:kenji"),
    Query("q28", "wayfare", "Nara day trip deer park", "bookings", "place:nara"),
    Query("q29", "wayfare", "cooking class in Lisbon", "bookings"),
    Query("q30", "wayfare", "hotels with vegan breakfast", "preferences", "person:sofia"),
)

# Recalls that count (touch=True): (tenant, query, users, rounds before the first maintenance,
# rounds before the second). Each round asks once per user; ``None`` is an anonymous caller.
USAGE: tuple[tuple[str, str, tuple[str | None, ...], int, int], ...] = (
    ("acme-dev", "is the build green?", ("lena", "omar", "priya", "jonas", "kim"), 2, 1),
    ("hearth", "buy batteries for the smoke alarm", ("anna", "ben", "mia", "leo", "rosa"), 2, 1),
    ("wayfare", "send the invoices before the end of the month",
     ("desk-1", "desk-2", "desk-3", "desk-4", "desk-5"), 2, 1),
    ("acme-dev", "coffee machine on floor 3", ("lena", "omar", "kim"), 1, 1),
    ("hearth", "what is Mia allergic to?", ("anna", "ben"), 1, 1),
    ("wayfare", "Kenji's hotel in Lisbon", (None, "desk-1"), 2, 1),
    ("acme-dev", "Atlas 4.2 rollout status", ("jonas",), 1, 1),
    ("hearth", "Biscuit chewed the sofa cushion", ("anna", "ben", "leo", "mia"), 1, 0),
    ("wayfare", "weather in Reykjavik in February", ("desk-2", "desk-3", "desk-4"), 0, 2),
    ("hearth", "good night", ("mia", "leo", "ben", "anna", "rosa"), 0, 1),
)
