r"""A seeded, synthetic knowledge-update set (DESIGN section 5b; the recipe is
``../shared/bench/updates-recipe.md``).

Usage::

    python benchmarks/updates_data.py --seed 0 --out /tmp/updates-dev.json   # write a set
    python benchmarks/updates_data.py --seed 0 --stats                       # counts only

``benchmarks/updates.py`` generates the set from the seed itself (nothing is shipped but this
script); ``--data`` there reads a file written here (or a held-out set in the same format).

The pattern is the recipe's: a *slot* (subject, attribute) gets a value, later another value
(sometimes a third), and a question asks for the slot's value now. Each tenant is one chat:

* ``chat`` tenants: one user (a generated name) and ``Assistant``; the user's questions are in
  the first person ("Where do I live?").
* ``dialogue`` tenants: two people in conversation (LoCoMo-like), each stating things about
  themselves in the first person; questions name the person ("Where does Mara live?"), and one
  speaker's "I moved to Graz." must not move the other.

Both kinds also talk about two invented third parties ("Ana lives in Porto.").

Cases (one question each; ``category``):

* ``one_cue`` / ``one_bare`` / ``one_message``: a single-valued attribute (ONE) restated with a
  new value, through an explicit change cue ("I moved to ...", "Update: ..."), a bare
  restatement (only order tells the versions apart) or a new value inside a longer request.
  Gold: the last version; stale: every earlier one.
* ``retraction``: the value is withdrawn with no replacement ("I don't have a car anymore.").
  Gold: the retraction; stale: the earlier versions.
* ``many``: a multi-valued attribute (MANY: likes, languages, allergies, pets, hobbies) gets a
  second (or third) value, sometimes with words that look like change cues ("now also",
  "these days"). Gold: every value; stale: none. A control: nothing may be superseded.
* ``negative``: a hard negative after a slot's only statement that must not replace it
  (``subtype``): ``other_speaker`` (the other person's first-person statement),
  ``other_subject`` (a third party's new value), ``other_attribute`` (same subject, a sibling
  attribute with a value of the same kind: "I work in Graz" vs "I live in Lisbon"),
  ``hypothetical`` (plans, maybes), ``past_event`` ("I visited Graz in May"), ``question``
  ("Should I move to Graz?"). Gold: the statement; stale: none; ``negatives``: the memories
  that must not override it.

Between versions sit other cases' memories and distractors (small talk, assistant replies,
topic-near sentences). The number of memories between the last two versions is set on purpose
(0, 5, 50, or 5-20), and so is whether they fall in the same session (minutes apart) or in a
later one (days to weeks). Turns of a session are one minute apart; sessions are 1 to 28 days
apart. Every memory has a speaker, a session and a time (``at``); the questions are asked one
day after the tenant's last memory.

Same seed, same file: only ``random.Random`` seeded per tenant, no set iteration, no clock.
All phrasings are this project's own. Change the seed now and then (the recipe's rule): a
method that only works for one seed is fitted to it.

Format (``mnemonia-updates/1``): ``{"format", "seed", "generator", "params", "tenants": [...]}``;
a tenant is ``{"tenant", "kind", "speakers", "subjects", "ask_at", "memories", "questions"}``;
a memory ``{"id", "text", "speaker", "at" (ISO, UTC), "session_id", "role", "slot"}`` in time
order (``role``: ``old`` / ``gold`` / ``negative`` / ``filler`` / ``near``; ``slot``:
``"<subject>/<attribute>"`` of a statement, else null; both for reading results only, never
for a method); a question ``{"id", "question", "category", "subtype", "attribute",
"cardinality", "slot", "subject", "subject_kind", "gold", "stale", "negatives" (memory ids),
"gap_memories", "gap_seconds", "same_session"}`` (the gap between the last two memories of
the case).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

FORMAT = "mnemonia-updates/1"
DEFAULT_SEED = 0
DEFAULT_TENANTS = 24
DEFAULT_MEMORIES_PER_TENANT = 200
SMALL_TENANTS = 4
BASE_TIME = datetime(2030, 1, 1, 9, 0, tzinfo=UTC)
TURN_SPACING = timedelta(minutes=1)
SESSION_GAP_DAYS = (1, 2, 3, 7, 14, 28)
SESSION_LENGTH = (12, 40)  # turns, when nothing forces a longer or shorter session

CATEGORIES = ("one_cue", "one_bare", "one_message", "retraction", "many", "negative")
NEGATIVE_KINDS = ("other_speaker", "other_subject", "other_attribute", "hypothetical",
                  "past_event", "question")
# Cases per tenant: (category, count). Negatives: one of each subtype (chat tenants, which
# have no second person, get two ``other_subject`` instead of ``other_speaker``).
CASES_PER_TENANT = (("one_cue", 6), ("one_bare", 6), ("one_message", 6), ("retraction", 3),
                    ("many", 4), ("negative", 6))
# Memories between the last two versions: (count or None for "5 to 20", weight).
GAPS = ((0, 0.2), (5, 0.2), (50, 0.15), (None, 0.45))
THIRD_PARTY_SHARE = 0.3
THREE_VERSIONS_SHARE = 0.3

Pool = Sequence[str] | Callable[[random.Random], str]


# --------------------------------------------------------------------------------------------
# templates
# --------------------------------------------------------------------------------------------
# A template is rendered for a subject in the first person (the speaker about themselves:
# "I", "my") or the third person (a name). ``[first|third]`` picks a form; then ``{S}`` is
# I / the name, ``{P}`` / ``{p}`` My / my / the name's, ``{me}`` me / the name, ``{n}`` the
# name, ``{v}`` the new value, ``{old}`` the previous one. The first letter is capitalised.
@dataclass(frozen=True, kw_only=True)
class Attribute:
    """One attribute: its cardinality, values and phrasings."""

    name: str
    card: str  # "one" or "many"
    pool: Pool
    statements: tuple[str, ...]
    cue: tuple[str, ...]  # ONE: explicit change cue; MANY: additive phrasing, often cue-like
    message: tuple[str, ...]  # the new value inside a longer request
    questions: tuple[str, ...]
    sibling: tuple[str, ...] = ()  # same subject, another attribute, a value of the same kind
    hypothetical: tuple[str, ...] = ()
    past: tuple[str, ...] = ()
    asks: tuple[str, ...] = ()  # questions the speaker asks that mention a value
    near: tuple[str, ...] = ()  # topic-near distractors (no claim about anyone's slot)
    retract: tuple[str, ...] = ()  # a retraction without a new value
    third_ok: bool = True  # may be about a third party


_SYL_ON = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "dr",
           "kr", "st", "tr", "sh")
_SYL_V = ("a", "e", "i", "o", "u", "ai", "ei", "ou")
_SYL_END = ("", "", "", "n", "l", "r", "s", "k", "th")


def invented_name(rnd: random.Random) -> str:
    """A pronounceable invented name from syllables (never a real person on purpose)."""
    parts = [rnd.choice(_SYL_ON) + rnd.choice(_SYL_V) for _ in range(rnd.choice((2, 2, 3)))]
    return ("".join(parts) + rnd.choice(_SYL_END)).capitalize()


_COMPANY_SUFFIX = ("Labs", "Foods", "Systems", "Works", "Studio", "Logistics", "Health",
                   "Robotics", "Media")


def _company(rnd: random.Random) -> str:
    return f"{invented_name(rnd)} {rnd.choice(_COMPANY_SUFFIX)}"


def _phone(rnd: random.Random) -> str:
    return f"0{rnd.randint(100, 999)} {rnd.randint(100, 999)} {rnd.randint(1000, 9999)}"


_WIFI_WORDS = ("otter", "lamp", "cedar", "pixel", "harbor", "maple", "comet", "ember", "falcon",
               "quartz", "meadow", "violet", "copper", "walrus", "juniper", "lantern")


def _wifi(rnd: random.Random) -> str:
    a, b = rnd.sample(_WIFI_WORDS, 2)
    return f"{a}-{b}-{rnd.randint(10, 99)}"


def _money(rnd: random.Random) -> str:
    return f"${rnd.randrange(300, 3000, 50):,}"


def _words(rnd: random.Random) -> str:
    return f"{rnd.randrange(2000, 20001, 500):,} words"


def _percent(rnd: random.Random) -> str:
    return f"{rnd.randint(40, 95)}%"


def _requests(rnd: random.Random) -> str:
    return f"{rnd.randrange(1000, 100001, 500):,}"


_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December")


def _date(rnd: random.Random) -> str:
    return f"{rnd.choice(_MONTHS)} {rnd.randint(1, 28)}"


ATTRIBUTES: tuple[Attribute, ...] = (
    Attribute(
        name="city", card="one",
        pool=("Lisbon", "Porto", "Tallinn", "Graz", "Leuven", "Aarhus", "Valencia", "Krakow",
              "Ghent", "Bergen", "Turin", "Bilbao", "Tartu", "Utrecht", "Brno", "Lyon"),
        statements=("{S} [live|lives] in {v}.", "[I'm|{n} is] based in {v}.",
                    "Home for {me} is {v}."),
        cue=("{S} moved to {v} last month.", "[We've|{n} has] relocated to {v}.",
             "{S} no longer [live|lives] in {old}; [I'm|{n} is] in {v} now.",
             "{S} used to live in {old}, now it's {v}.",
             "Actually, {S} [live|lives] in {v} now, not {old}."),
        message=("Can you help me plan the move? [We're|{n} is] in {v} since May and the boxes "
                 "are still everywhere.",
                 "Any good bakeries near the station in {v}? [I|{n}] just settled there and "
                 "[need|needs] a morning routine.",
                 "I need a dentist in {v}, that's where [I|{n}] [live|lives] these days, and "
                 "the old one is too far away."),
        questions=("Where [do I|does {n}] live?", "Which city [am I|is {n}] based in now?"),
        sibling=("{S} [work|works] in {v}.", "{P} office is in {v}.",
                 "[I'm|{n} is] from {v} originally."),
        hypothetical=("{S} might move to {v} next year.",
                      "[I'm|{n} is] thinking about moving to {v} someday.",
                      "If [I|{n}] ever [move|moves], it would be to {v}."),
        past=("{S} visited {v} in May.", "{S} spent a long weekend in {v} last year."),
        asks=("Do you think [I|{n}] should move to {v}?", "Is {v} a nice place to live?"),
        near=("Rent prices keep going up everywhere.", "Packing boxes is the worst part of "
              "moving.", "There was a documentary about {x} on TV last night.")),
    Attribute(
        name="employer", card="one", pool=_company,
        statements=("{S} [work|works] at {v}.", "[I'm|{n} is] employed by {v}.",
                    "{P} employer is {v}."),
        cue=("{S} no longer [work|works] at {old}; [I'm|{n} is] at {v} now.",
             "{S} switched jobs, [I'm|{n} is] with {v} now.", "{S} left {old} and joined {v}.",
             "Starting this week {S} [work|works] for {v} instead of {old}."),
        message=("Could you help me update {p} CV? The new job at {v} needs to go at the top, "
                 "and the old entry needs an end date.",
                 "What should [I|{n}] wear on the first day at {v}? The dress code there is a "
                 "mystery.",
                 "Can you draft a short bio? [I|{n}] [do|does] backend work at {v} and [like|"
                 "likes] climbing."),
        questions=("Where [do I|does {n}] work?", "Who is {p} employer?",
                   "Which company [am I|is {n}] working for these days?"),
        sibling=("{S} [volunteer|volunteers] at {v} on weekends.", "{P} biggest client is {v}."),
        hypothetical=("{S} might apply to {v} next year.",
                      "[I'm|{n} is] considering an offer from {v}."),
        past=("{S} interviewed at {v} back in spring.", "{S} did an internship at {v} years "
              "ago."),
        asks=("Do you think [I|{n}] should apply to {v}?", "Is {v} a good place to work?"),
        near=("The quarterly review is next week.", "My commute took forever today.",
              "There's a job fair downtown on Saturday."),
        retract=("{S} quit {old}; [I'm|{n} is] between jobs right now.",
                 "[I'm|{n} is] not working anywhere at the moment.",
                 "{S} [don't|doesn't] have a job anymore.")),
    Attribute(
        name="job", card="one",
        pool=("data engineer", "product designer", "nurse", "high school teacher", "line cook",
              "architect", "paralegal", "user researcher", "accountant", "pharmacist",
              "sound engineer", "civil engineer", "translator", "veterinarian", "copywriter",
              "electrician"),
        statements=("[I'm|{n} is] a {v}.", "{S} [work|works] as a {v}.", "{P} job title is {v}."),
        cue=("{S} got promoted, [I'm|{n} is] a {v} now.",
             "{S} changed careers and [am|is] now a {v}.",
             "{S} used to be a {old}, now [I'm|{n} is] a {v}.",
             "Since the reorg [I'm|{n} is] officially a {v} instead of a {old}."),
        message=("Could you review {p} cover letter? It says [I'm|{n} is] a {v}, and the tone "
                 "feels stiff.",
                 "What books would you suggest for a {v}? That's {p} role since the spring, and "
                 "[I|{n}] [want|wants] to get better at it."),
        questions=("What [do I|does {n}] do for a living?", "What is {p} job title?"),
        sibling=("{P} side gig is working as a {v} on weekends.",
                 "{P} dream job would be {v}."),
        hypothetical=("{S} might retrain as a {v}.", "Maybe [I'll|{n} will] become a {v} one "
                      "day."),
        past=("{S} worked as a {v} for a summer in college.", "{S} shadowed a {v} last week."),
        asks=("Do you think [I'd|{n} would] make a good {v}?", "How much does a {v} earn?"),
        near=("Performance reviews are coming up.", "I updated my profile photo on the job "
              "site.")),
    Attribute(
        name="colour", card="one",
        pool=("blue", "green", "teal", "orange", "burgundy", "yellow", "lilac", "grey", "ochre",
              "crimson", "navy", "mint green", "coral", "mustard"),
        statements=("{P} favourite colour is {v}.", "{S} [love|loves] {v} more than any other "
                    "colour.", "{v} is {p} favourite colour."),
        cue=("{P} favourite colour changed, it's {v} now.",
             "{S} used to love {old}, but now {p} favourite colour is {v}.",
             "Actually, {p} favourite colour is {v}, not {old}.",
             "[I'm|{n} is] over {old}; {v} is {p} favourite colour these days."),
        message=("Can you suggest a bedroom paint? Something {v}, since that's {p} favourite "
                 "colour, with warm lights.",
                 "Help me pick a phone case for {me}: {v} would be ideal, it's {p} favourite "
                 "colour."),
        questions=("What is {p} favourite colour?", "Which colour [do I|does {n}] like best?"),
        sibling=("{P} car is {v}.", "{P} front door is painted {v}."),
        hypothetical=("{S} might paint the hallway {v}.",
                      "Maybe [I'll|{n} will] dye {p} hair {v} next summer."),
        past=("{S} wore a {v} suit to the wedding last year.", "{S} painted the fence {v} "
              "last summer."),
        asks=("Does {v} go well with grey curtains?", "Should [I|{n}] get the {v} sofa?"),
        near=("The sunset tonight was all pink and purple.", "I can never decide between paint "
              "samples.")),
    Attribute(
        name="phone", card="one", pool=_phone,
        statements=("{P} phone number is {v}.", "You can reach {me} on {v}.",
                    "{P} mobile number is {v}."),
        cue=("{P} number changed to {v}.", "{S} got a new phone number, it's {v} now.",
             "Actually, {p} number is {v}, not {old}.", "Update: {p} mobile is now {v}."),
        message=("Could you add {me} to the team sheet? Use {v} for the phone column, and put "
                 "the email below it.",
                 "If the courier calls, tell them to ring {v}, that's {p} number since the "
                 "switch."),
        questions=("What is {p} phone number?",
                   "[What number should people call me on|What number should I call {n} on]?"),
        sibling=("{P} work landline is {v}.", "{P} emergency contact's number is {v}."),
        hypothetical=("If the new plan goes through, {p} number would become {v}.",),
        past=("{S} had the number {v} back in school.", "{S} called {v} by mistake yesterday."),
        asks=("Is {v} a local number?", "Whose number is {v}, do you know?"),
        near=("My phone battery dies so fast lately.", "Spam calls are getting out of hand.")),
    Attribute(
        name="partner", card="one", pool=invented_name,
        statements=("{P} partner is {v}.", "[I'm|{n} is] in a relationship with {v}.",
                    "[I'm|{n} is] with {v}, it's been serious for a while."),
        cue=("{old} and [I|{n}] split up, and [I'm|{n} is] seeing {v} now.",
             "{S} [am|is] dating {v} these days.", "{P} new partner is {v}.",
             "Actually {p} partner is {v} now, not {old}."),
        message=("Can you suggest an anniversary gift for {v}? [We've|{v} and {n} have] been "
                 "together a year now.",
                 "Any restaurant ideas for a date night with {v}? Something quiet, {p} partner "
                 "hates loud places."),
        questions=("Who is {p} partner?", "Who [am I|is {n}] dating?"),
        sibling=("{P} best friend is {v}.", "{P} flatmate is {v}."),
        hypothetical=("{S} might ask {v} out next week.", "[I'd|{n} would] like to date "
                      "someone like {v}."),
        past=("{S} went on one date with {v} years ago.", "{S} had dinner with {v} last "
              "night."),
        asks=("Do you think {v} likes {me}?", "Should [I|{n}] ask {v} out?"),
        near=("Wedding season is exhausting.", "My friends keep trying to set me up."),
        retract=("{old} and [I|{n}] broke up; [I'm|{n} is] single now.",
                 "[I'm|{n} is] not seeing anyone anymore.")),
    Attribute(
        name="car", card="one",
        pool=("Toyota Corolla", "Honda Civic", "Skoda Octavia", "Mazda 3", "Volvo V60",
              "Kia Niro", "Renault Zoe", "VW Golf", "Fiat Panda", "Ford Focus",
              "Subaru Outback", "Peugeot 208", "Hyundai Ioniq", "Dacia Duster"),
        statements=("{S} [drive|drives] a {v}.", "{P} car is a {v}.", "[I've|{n} has] got a "
                    "{v}."),
        cue=("{S} sold the {old} and bought a {v}.", "{S} used to drive a {old}, now it's a {v}.",
             "{S} switched to a {v} last month.", "Update: {p} car is a {v} now."),
        message=("How often should a {v} get serviced? [Mine|{n}'s] is making a noise since "
                 "the long trip.",
                 "Can you find winter tyres for a {v}? That's what [I|{n}] [drive|drives] now, "
                 "and the old ones don't fit."),
        questions=("What car [do I|does {n}] drive?", "What kind of car [do I|does {n}] have?"),
        sibling=("{P} dream car is a {v}.", "{P} company van is a {v}."),
        hypothetical=("{S} might buy a {v} next year.", "[I'm|{n} is] tempted to lease a {v}."),
        past=("{S} rented a {v} on holiday.", "{S} test-drove a {v} last weekend."),
        asks=("Is a {v} reliable?", "Should [I|{n}] get a {v}?"),
        near=("Parking downtown is impossible.", "Petrol prices went up again."),
        retract=("{S} sold the {old} and [don't|doesn't] have a car anymore.",
                 "[I'm|{n} is] car-free now.", "{S} [don't|doesn't] own a car any more.")),
    Attribute(
        name="manager", card="one", pool=invented_name,
        statements=("{P} manager is {v}.", "{S} [report|reports] to {v}.", "{P} boss is {v}."),
        cue=("{S} [report|reports] to {v} now, not {old}.", "{P} manager changed, it's {v} now.",
             "{old} moved on, so {p} new boss is {v}."),
        message=("How should [I|{n}] prepare for a first one-to-one with {v}? That's {p} "
                 "manager since the reorg.",
                 "Can you draft an email to {v} asking for Friday off? {v} approves {p} leave "
                 "now."),
        questions=("Who is {p} manager?", "Who [do I|does {n}] report to?"),
        sibling=("{P} mentor is {v}.", "{P} landlord is {v}."),
        hypothetical=("{S} might move to {v}'s group next quarter.",),
        past=("{S} had lunch with {v} yesterday.", "{S} worked under {v} at a previous job."),
        asks=("Is {v} a good manager, do you think?",),
        near=("One-to-ones always run over.", "The reorg memo came out today."),
        retract=("{S} [don't|doesn't] have a manager anymore; [I'm|{n} is] freelancing.",)),
    Attribute(
        name="team", card="one",
        pool=("Payments", "Search", "Platform", "Growth", "Billing", "Mobile", "Infrastructure",
              "Onboarding", "Security", "Analytics", "Checkout", "Support Tools"),
        statements=("[I'm|{n} is] on the {v} team.", "{S} [work|works] in the {v} team.",
                    "{P} team is {v}."),
        cue=("{S} moved from {old} to the {v} team.", "[I'm|{n} is] on the {v} team now.",
             "{S} switched teams, it's {v} instead of {old}."),
        message=("Can you explain how the {v} team usually plans sprints? [I|{n}] just joined "
                 "it and the rituals are confusing.",
                 "Write a short intro for {me} for the {v} team channel, please, since that's "
                 "where [I|{n}] [sit|sits] now."),
        questions=("Which team [am I|is {n}] on?", "What team [do I|does {n}] work in?"),
        sibling=("{S} often [help|helps] the {v} team with reviews.",),
        hypothetical=("{S} might transfer to the {v} team.", "[I'd|{n} would] love to join the "
                      "{v} team someday."),
        past=("{S} spent a week with the {v} team during onboarding.",),
        asks=("Is the {v} team hiring?",),
        near=("The all-hands ran long today.", "Our standups keep getting longer.")),
    Attribute(
        name="laptop_os", card="one",
        pool=("Linux", "Windows", "macOS", "ChromeOS", "Fedora", "FreeBSD"),
        statements=("{P} laptop runs {v}.", "{S} [use|uses] {v} on {p} laptop."),
        cue=("{S} switched {p} laptop to {v}.", "{S} wiped {p} laptop and put {v} on it instead "
             "of {old}.", "{P} laptop is on {v} now."),
        message=("How would [I|{n}] set up a printer on {v}? The laptop has it now and the "
                 "settings are nowhere.",),
        questions=("What OS does {p} laptop run?", "Which operating system [do I|does {n}] use "
                   "on the laptop?"),
        sibling=("{P} work desktop runs {v}.", "{P} home server runs {v}."),
        hypothetical=("{S} might try {v} on the laptop next month.",),
        past=("{S} tried {v} in a virtual machine last weekend.",),
        asks=("Is {v} good for gaming?", "Should [I|{n}] switch to {v}?"),
        near=("My laptop fan is so loud.", "I need more storage for photos.")),
    Attribute(
        name="gym_day", card="one",
        pool=("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"),
        statements=("{S} [go|goes] to the gym on {v}s.", "{P} gym day is {v}."),
        cue=("{S} moved {p} gym day to {v}.", "{S} [go|goes] to the gym on {v}s now instead of "
             "{old}s.", "Since the new schedule, {p} gym day is {v}."),
        message=("Can you plan a leg workout for {v}? That's when [I|{n}] [hit|hits] the gym "
                 "these days.",
                 "Remind {me} to pack the gym bag on {v} mornings, the new class is early."),
        questions=("What day [do I|does {n}] go to the gym?", "When is {p} gym day?"),
        sibling=("{S} [do|does] the grocery shopping on {v}s.", "{P} piano lesson is on {v}."),
        hypothetical=("{S} might add a gym session on {v}s.",),
        past=("{S} skipped the gym last {v}.",),
        asks=("Is {v} a good day for a long run?",),
        near=("My legs are sore from yesterday.", "The gym was packed tonight."),
        retract=("{S} stopped going to the gym.", "{S} cancelled {p} gym membership; no gym "
                 "day anymore.")),
    Attribute(
        name="wifi", card="one", pool=_wifi,
        statements=("The wifi password at {p} place is {v}.", "{P} home wifi password is {v}."),
        cue=("{S} changed the home wifi password to {v}.",
             "Update: the wifi password at {p} place is now {v}.",
             "The old wifi password at {p} place, {old}, is gone; it's {v} now."),
        message=("Can you write a note for the house sitter? Wifi at {p} place is {v}, and the "
                 "plants need water twice a week.",),
        questions=("What is the wifi password at {p} place?", "What's {p} home wifi password?"),
        sibling=("The wifi password at {p} office is {v}.", "{P} laptop password is {v}."),
        hypothetical=("{S} might change the wifi password to {v} later.",),
        past=("The café wifi password was {v} when [I|{n}] visited.",),
        asks=("Is {v} a strong enough password?",),
        near=("The router keeps dropping the connection.", "Internet was down all morning.")),
    Attribute(
        name="budget", card="one", pool=_money,
        statements=("{P} monthly budget is {v}.", "{S} [spend|spends] at most {v} a month."),
        cue=("{P} budget was adjusted to {v} a month.", "Update: {p} monthly budget is {v} now.",
             "{S} changed {p} monthly budget from {old} to {v}."),
        message=("Can you plan meals for the week? {P} budget is {v} a month since the rent "
                 "went up, so keep it cheap.",),
        questions=("What is {p} monthly budget?", "How much can [I|{n}] spend each month?"),
        sibling=("{P} monthly rent is {v}.", "{P} yearly travel budget is {v}."),
        hypothetical=("{S} might raise the budget to {v} if the bonus comes.",),
        past=("{S} spent {v} on the trip in March.",),
        asks=("Is {v} a month enough to live on?",),
        near=("Groceries are so expensive this year.", "I should cancel some subscriptions.")),
    Attribute(
        name="word_target", card="one", pool=_words, third_ok=False,
        statements=("{P} weekly word target is {v}.", "{S} [aim|aims] for {v} a week on the "
                    "novel."),
        cue=("{S} reset {p} weekly target to {v}.", "Update: {p} weekly word target is now "
             "{v}.", "{S} moved {p} weekly goal from {old} to {v}."),
        message=("Can you set up a writing schedule? [I'm|{n} is] aiming for {v} a week on the "
                 "novel, mostly mornings.",),
        questions=("What is {p} weekly word target?", "How many words a week [am I|is {n}] "
                   "aiming for?"),
        sibling=("{P} thesis has {v} so far.",),
        hypothetical=("{S} might push the weekly target to {v} in summer.",),
        past=("{S} wrote {v} last week.",),
        asks=("Is {v} a week realistic for a first draft?",),
        near=("Writer's block hit hard today.", "I reorganised the chapters again.")),
    Attribute(
        name="coverage", card="one", pool=_percent,
        statements=("Test coverage on {p} project is {v}.", "{P} project's test coverage sits "
                    "at {v}."),
        cue=("Test coverage on {p} project has now reached {v}.",
             "Coverage on {p} project went from {old} to {v}.",
             "Update: {p} project's coverage is {v} now."),
        message=("Can you write the release notes? Mention that coverage on {p} project is {v} "
                 "and that the flaky tests are fixed.",),
        questions=("What is the test coverage on {p} project?", "How much of {p} project is "
                   "covered by tests?"),
        sibling=("{P} project's CPU usage peaks at {v}.", "Only {v} of {p} tickets are closed."),
        hypothetical=("{S} [hope|hopes] to get coverage to {v} by the release.",),
        past=("Coverage on {p} project was {v} back in January.",),
        asks=("Is {v} coverage good enough?",),
        near=("The CI pipeline is slow today.", "A flaky test failed three times.")),
    Attribute(
        name="api_quota", card="one", pool=_requests, third_ok=False,
        statements=("{P} API quota is {v} requests per day.", "{S} can make {v} API requests a "
                    "day."),
        cue=("{P} API quota was changed to {v} requests per day.",
             "The provider changed {p} daily quota from {old} to {v} requests.",
             "Update: {p} API limit is {v} requests a day now."),
        message=("Can you help me batch these jobs? {P} quota is {v} requests a day since the "
                 "plan upgrade, and the backlog is big.",),
        questions=("What is {p} daily API quota?", "How many API requests can [I|{n}] make per "
                   "day?"),
        sibling=("{P} newsletter has {v} subscribers.",),
        hypothetical=("{S} might ask for {v} requests a day next month.",),
        past=("{S} used {v} requests yesterday.",),
        asks=("Is {v} requests a day enough for a chatbot?",),
        near=("The API was rate limiting us all afternoon.", "Our provider changed the pricing "
              "page.")),
    Attribute(
        name="deadline", card="one", pool=_date,
        statements=("{P} grant report is due on {v}.", "The deadline for {p} grant report is "
                    "{v}."),
        cue=("Update: the deadline for {p} grant report is now {v}.",
             "{P} grant report deadline was moved from {old} to {v}.",
             "They pushed {p} grant report to {v}."),
        message=("Can you block time in the calendar? {P} grant report is due {v}, so the "
                 "drafts need to be done a week before.",),
        questions=("When is {p} grant report due?", "What is the deadline for {p} grant "
                   "report?"),
        sibling=("{P} visa renewal is due on {v}.", "{P} dentist appointment is on {v}."),
        hypothetical=("{S} might ask for an extension to {v}.",),
        past=("{S} submitted the last report on {v}.",),
        asks=("Is {v} a Friday?",),
        near=("Deadlines everywhere this month.", "I need to finish the budget tables.")),
    # ---------------------------------------------------------------- MANY (controls)
    Attribute(
        name="food", card="many",
        pool=("sushi", "ramen", "tacos", "dumplings", "falafel", "pho", "paella", "Thai curry",
              "pierogi", "shakshuka", "lasagne", "poke bowls"),
        statements=("{S} [love|loves] {v}.", "{S} really [enjoy|enjoys] {v}."),
        cue=("{S} also [love|loves] {v}.", "[I've|{n} has] got into {v} recently, on top of "
             "{old}.", "These days {S} [love|loves] {v} as well."),
        message=("Can you find a restaurant that does {v}? [I'm|{n} is] craving it, and a quiet "
                 "table would be great.",),
        questions=("What food [do I|does {n}] like?", "Which dishes [do I|does {n}] enjoy?")),
    Attribute(
        name="music", card="many",
        pool=("jazz", "techno", "folk", "hip hop", "classical", "bossa nova", "metal", "k-pop",
              "reggae", "blues", "synthwave"),
        statements=("{S} [listen|listens] to a lot of {v}.", "{S} [love|loves] {v} music."),
        cue=("{S} [have|has] been getting into {v} lately too.",
             "Besides {old}, {S} now also [enjoy|enjoys] {v}."),
        message=("Can you make a playlist for the drive? Lots of {v}, since [I|{n}] can't get "
                 "enough of it.",),
        questions=("What music [do I|does {n}] like?", "Which genres [do I|does {n}] listen "
                   "to?")),
    Attribute(
        name="language", card="many",
        pool=("Dutch", "Greek", "Swahili", "Portuguese", "Japanese", "Polish", "Turkish",
              "Hindi", "Korean", "Finnish", "Catalan"),
        statements=("{S} [speak|speaks] {v}.", "{S} can hold a conversation in {v}."),
        cue=("{S} also [speak|speaks] {v}.", "{S} can now get by in {v} as well.",
             "[I've|{n} has] picked up {v} on top of {old}."),
        message=("Could you recommend podcasts in {v}? [I|{n}] [speak|speaks] it well enough "
                 "to follow.",),
        questions=("What languages [do I|does {n}] speak?", "Which languages can [I|{n}] "
                   "speak?")),
    Attribute(
        name="allergy", card="many",
        pool=("peanuts", "shellfish", "pollen", "cats", "penicillin", "latex", "dust mites",
              "sesame", "wasp stings", "kiwi"),
        statements=("[I'm|{n} is] allergic to {v}.", "{S} [have|has] an allergy to {v}."),
        cue=("Turns out [I'm|{n} is] allergic to {v} too.",
             "[I|{n}] just learned of an allergy to {v} as well."),
        message=("Can you check this recipe for {v}? [I'm|{n} is] allergic, and the label is "
                 "unclear.",),
        questions=("What [am I|is {n}] allergic to?", "Which allergies [do I|does {n}] "
                   "have?")),
    Attribute(
        name="pet", card="many",
        pool=("a dog", "a cat", "a parrot", "a rabbit", "a tortoise", "two goldfish",
              "a hamster", "a gecko", "a ferret"),
        statements=("{S} [have|has] {v}.", "{S} [own|owns] {v}."),
        cue=("{S} adopted {v} as well.", "[We|{n}] now also [have|has] {v}.",
             "On top of {old}, [I've|{n} has] got {v} now."),
        message=("What should [I|{n}] feed {v}? The new arrival came home yesterday.",),
        questions=("What pets [do I|does {n}] have?", "Which animals [do I|does {n}] own?")),
    Attribute(
        name="hobby", card="many",
        pool=("climbing", "pottery", "chess", "birdwatching", "baking", "running", "knitting",
              "woodworking", "salsa dancing", "photography", "gardening"),
        statements=("{S} [do|does] {v} in {p} free time.", "One of {p} hobbies is {v}."),
        cue=("{S} took up {v} as well.", "[I've|{n} has] started {v} too, alongside {old}.",
             "These days {S} also [do|does] {v}."),
        message=("Can you find a {v} club nearby? [I|{n}] [want|wants] to do it with other "
                 "people.",),
        questions=("What are {p} hobbies?", "What [do I|does {n}] do for fun?")),
)
BY_NAME = {a.name: a for a in ATTRIBUTES}
ONE = tuple(a for a in ATTRIBUTES if a.card == "one")
MANY = tuple(a for a in ATTRIBUTES if a.card == "many")
RETRACTABLE = tuple(a for a in ONE if a.retract)

# Distractors: small talk of anyone, assistant replies (chat tenants). Fills keep them varied.
_SMALL_TALK = (
    "I had {snack} for lunch today.", "The printer jammed again.", "Remind me to call the bank "
    "on {day}.", "It's been raining all {part} here.", "Did you see the {sport} game last night?",
    "{friend} sent me a funny video of a goat.", "I finally finished that {show} series.",
    "My neighbour is drilling again.", "I need to buy {item} before the weekend.",
    "The train was {mins} minutes late this morning.", "I can't find my {lost} anywhere.",
    "We should try the new {cuisine} place sometime.", "I slept badly, the heating was too loud.",
    "Can you summarise this article about {topic} for me?", "What's a good recipe with {veg}?",
    "I'm meeting {friend} for coffee on {day}.", "The {show} finale was disappointing.",
    "I spilled coffee on my notebook.", "How long should I boil {veg}?",
    "My sister's birthday is coming up and I have no idea what to get.",
    "Is it normal for {appliance} to make that noise?", "I walked {mins} minutes to clear my head.",
    "Give me three ideas for a rainy {day}.", "The plants on the balcony look sad.",
    "I started reading a book about {topic}.", "What's the difference between baking soda and "
    "baking powder?", "The {sport} season starts in {mins} days, apparently.",
    "I keep forgetting to drink water.", "My headphones broke on the bus.",
    "Explain {topic} like I'm five.", "I'm trying to cut down on sugar.",
    "There's a street market on {day} mornings.", "Our group chat is all memes today.",
    "Could you fix the grammar in this email to {friend}?", "I cleaned out the fridge finally.",
)
_ASSISTANT = (
    "Sure, here's a quick outline to start with.", "Happy to help with that.",
    "That sounds like a long day.", "Good luck, let me know how it goes!",
    "Here are three options to consider.", "Noted. Anything else?", "That makes sense.",
    "Let's break it into smaller steps.", "I'd start with the easiest part first.",
    "Here's a shorter version of the text.", "A good rule of thumb is to keep it simple.",
    "That depends on how much time you have.", "Great question, here's what I'd suggest.",
    "You could try a checklist for that.", "Here's a draft you can edit.",
)
_FILLS: dict[str, tuple[str, ...]] = {
    "snack": ("a sandwich", "leftover soup", "a salad", "noodles", "a burrito", "toast",
              "a bagel", "rice and beans"),
    "day": ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"),
    "part": ("morning", "afternoon", "week", "day"),
    "sport": ("football", "basketball", "tennis", "rugby", "hockey", "cricket"),
    "show": ("detective", "cooking", "space", "history", "baking", "courtroom"),
    "item": ("batteries", "a new umbrella", "coffee filters", "a phone charger", "stamps",
             "bin bags", "light bulbs"),
    "lost": ("keys", "wallet", "charger", "umbrella", "reading glasses", "library card"),
    "cuisine": ("noodle", "burrito", "bagel", "salad", "dumpling", "pizza"),
    "appliance": ("the dishwasher", "the fridge", "the boiler", "the washing machine"),
    "mins": ("10", "15", "20", "25", "30", "40"),
    "topic": ("black holes", "inflation", "sourdough", "sleep cycles", "bird migration",
              "compound interest", "volcanoes", "jazz history"),
    "friend": ("my cousin", "a colleague", "my old roommate", "the neighbour", "my brother"),
    "veg": ("leeks", "beetroot", "spinach", "cauliflower", "sweet potatoes", "fennel"),
}


_CHOICE = re.compile(r"\[([^\[\]|]*)\|([^\[\]]*)\]")
_FILL = re.compile(r"\{(\w+)\}")
_ARTICLE = re.compile(r"\b([Aa]) ([aeioAEIO])")


def render(template: str, *, first: bool, name: str = "", v: str = "", old: str = "") -> str:
    """One sentence of ``template`` for a subject in the first (``first``) or third person."""
    text = _CHOICE.sub(lambda m: m.group(1 if first else 2), template)
    text = text.format(S="I" if first else name, P="My" if first else f"{name}'s",
                       p="my" if first else f"{name}'s", me="me" if first else name, n=name,
                       v=v, old=old)
    text = _ARTICLE.sub(r"\1n \2", text)  # "a architect" -> "an architect"
    if not first and name:
        # "Ana switched Ana's laptop" -> "Ana switched their laptop"
        head, sep, tail = text.partition(name)
        text = head + sep + tail.replace(f"{name}'s", "their")
    return text[0].upper() + text[1:]


# --------------------------------------------------------------------------------------------
# cases
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Subject:
    """Whom a slot is about. ``kind``: ``user`` (a chat's user: first person, asked in the
    first person), ``speaker`` (a dialogue's person: first person, asked by name), ``third``
    (a third party: third person, said by one of the speakers)."""

    name: str
    kind: str


@dataclass
class Case:
    """One question and the memories it owns (in order, with the memories between them)."""

    category: str
    subtype: str
    attribute: str
    subject: Subject
    question: str
    mems: list[tuple[str, str, str]]  # (text, speaker, role: old / gold / negative)
    gaps: list[int]  # memories between consecutive ``mems``
    later_session: bool  # whether the last two should fall in different sessions
    negative_slot: str | None = None  # another subject's slot a negative states a value for
    positions: list[int] = field(default_factory=list)

    @property
    def slot(self) -> str:
        return f"{self.subject.name}/{self.attribute}"


@dataclass
class Tenant:
    name: str
    kind: str
    speakers: list[str]
    subjects: list[Subject]
    rnd: random.Random
    used: set[tuple[str, str]] = field(default_factory=set)


def _values(rnd: random.Random, attr: Attribute, n: int) -> list[str]:
    pool = attr.pool
    if not callable(pool):
        return rnd.sample(list(pool), n)
    out: list[str] = []
    while len(out) < n:
        v = pool(rnd)
        if v not in out:
            out.append(v)
    return out


def _gap(rnd: random.Random) -> int:
    r, acc = rnd.random(), 0.0
    for gap, weight in GAPS:
        acc += weight
        if r < acc:
            return rnd.randint(5, 20) if gap is None else gap
    return rnd.randint(5, 20)


def _say(t: Tenant, subject: Subject, template: str, **kw: str) -> tuple[str, str]:
    """(text, speaker) of a statement about ``subject``: first person by its own speaker, or
    third person by one of the tenant's speakers (the user, in a chat)."""
    if subject.kind == "third":
        humans = [s for s in t.speakers if s != "Assistant"]
        return render(template, first=False, name=subject.name, **kw), t.rnd.choice(humans)
    return render(template, first=True, name=subject.name, **kw), subject.name


def _ask(subject: Subject, attr: Attribute, rnd: random.Random) -> str:
    return render(rnd.choice(attr.questions), first=subject.kind == "user", name=subject.name)


def _pick_slot(t: Tenant, attrs: Sequence[Attribute], *, primary_only: bool = False
               ) -> tuple[Subject, Attribute]:
    """A free (subject, attribute) slot: a speaker/user most of the time, else a third party."""
    rnd = t.rnd
    primaries = [s for s in t.subjects if s.kind != "third"]
    thirds = [s for s in t.subjects if s.kind == "third"]
    for _ in range(1000):
        third = not primary_only and rnd.random() < THIRD_PARTY_SHARE
        subject = rnd.choice(thirds if third else primaries)
        attr = rnd.choice(list(attrs))
        if (third and not attr.third_ok) or (subject.name, attr.name) in t.used:
            continue
        t.used.add((subject.name, attr.name))
        return subject, attr
    raise RuntimeError(f"no free slot left in tenant {t.name}")  # pragma: no cover


def _later(rnd: random.Random, gap: int) -> bool:
    """Whether the last two versions should be in different sessions (weeks vs minutes)."""
    return rnd.random() < (0.7 if gap >= 50 else 0.5)


def _update_case(t: Tenant, category: str) -> Case:
    rnd = t.rnd
    attrs = RETRACTABLE if category == "retraction" else ONE
    subject, attr = _pick_slot(t, attrs)
    n_versions = 3 if rnd.random() < THREE_VERSIONS_SHARE else 2
    # the values stated, oldest first (a retraction states none: it withdraws the last one)
    values = _values(rnd, attr, n_versions - (category == "retraction"))
    first_template = rnd.choice(attr.statements)
    mems = [(*_say(t, subject, first_template, v=values[0]), "old")]
    for i in range(1, n_versions - 1):
        template = rnd.choice(attr.cue + attr.statements)  # an intermediate: either phrasing
        mems.append((*_say(t, subject, template, v=values[i], old=values[i - 1]), "old"))
    if category == "retraction":
        text, speaker = _say(t, subject, rnd.choice(attr.retract), old=values[-1])
    else:
        if category == "one_bare":
            # half the bare restatements repeat the first wording (only the value moves)
            template = first_template if rnd.random() < 0.5 else rnd.choice(attr.statements)
        else:
            template = rnd.choice(attr.cue if category == "one_cue" else attr.message)
        text, speaker = _say(t, subject, template, v=values[-1], old=values[-2])
    mems.append((text, speaker, "gold"))
    gaps = [_gap(rnd) for _ in range(len(mems) - 1)]
    return Case(category, phrasing(category), attr.name, subject, _ask(subject, attr, rnd),
                mems, gaps, _later(rnd, gaps[-1]))


def phrasing(category: str) -> str:
    return {"one_cue": "cue", "one_bare": "bare", "one_message": "in-message",
            "retraction": "retraction"}.get(category, category)


def _many_case(t: Tenant) -> Case:
    rnd = t.rnd
    subject, attr = _pick_slot(t, MANY)
    values = _values(rnd, attr, 3 if rnd.random() < THREE_VERSIONS_SHARE else 2)
    mems = [(*_say(t, subject, rnd.choice(attr.statements), v=values[0]), "gold")]
    kinds = []
    for i in range(1, len(values)):
        kind = rnd.choice(("bare", "cue", "in-message"))
        kinds.append(kind)
        pool = {"bare": attr.statements, "cue": attr.cue, "in-message": attr.message}[kind]
        mems.append((*_say(t, subject, rnd.choice(pool), v=values[i], old=values[i - 1]),
                     "gold"))
    gaps = [_gap(rnd) for _ in range(len(mems) - 1)]
    return Case("many", kinds[-1], attr.name, subject, _ask(subject, attr, rnd), mems, gaps,
                _later(rnd, gaps[-1]))


def _negative_case(t: Tenant, subtype: str) -> Case:
    rnd = t.rnd
    def usable(a: Attribute) -> bool:
        return {"other_attribute": bool(a.sibling), "hypothetical": bool(a.hypothetical),
                "past_event": bool(a.past), "question": bool(a.asks)}.get(subtype, True)

    attrs = [a for a in ONE if usable(a)]
    if subtype == "other_speaker":
        for _ in range(1000):
            attr = rnd.choice(attrs)
            a, b = rnd.sample([s for s in t.subjects if s.kind == "speaker"], 2)
            if (a.name, attr.name) not in t.used and (b.name, attr.name) not in t.used:
                t.used.update({(a.name, attr.name), (b.name, attr.name)})
                break
        else:  # pragma: no cover
            raise RuntimeError(f"no free slot pair in tenant {t.name}")
        subject = a
    elif subtype == "other_subject":
        for _ in range(1000):
            subject, attr = _pick_slot(t, [x for x in attrs if x.third_ok])
            others = [s for s in t.subjects if s.kind == "third" and s != subject
                      and (s.name, attr.name) not in t.used]
            if others:
                b = rnd.choice(others)
                t.used.add((b.name, attr.name))
                break
            t.used.discard((subject.name, attr.name))
        else:  # pragma: no cover
            raise RuntimeError(f"no free third party in tenant {t.name}")
    else:
        subject, attr = _pick_slot(t, attrs)
    v, w = _values(rnd, attr, 2)
    gold = (*_say(t, subject, rnd.choice(attr.statements), v=v), "gold")
    plain = tuple(s for s in attr.statements + attr.cue if "{old}" not in s)
    if subtype in ("other_speaker", "other_subject"):
        negative = (*_say(t, b, rnd.choice(plain), v=w), "negative")
    else:
        pool = {"other_attribute": attr.sibling, "hypothetical": attr.hypothetical,
                "past_event": attr.past, "question": attr.asks}[subtype]
        text, speaker = _say(t, subject, rnd.choice(pool), v=w)
        if subtype == "question":  # a question is asked by one of the people, not stated
            humans = [s for s in t.speakers if s != "Assistant"]
            speaker = subject.name if subject.kind != "third" else rnd.choice(humans)
        negative = (text, speaker, "negative")
    gaps = [_gap(rnd)]
    other = f"{b.name}/{attr.name}" if subtype in ("other_speaker", "other_subject") else None
    return Case("negative", subtype, attr.name, subject, _ask(subject, attr, rnd),
                [gold, negative], gaps, _later(rnd, gaps[-1]), negative_slot=other)


# --------------------------------------------------------------------------------------------
# layout: positions, sessions, times
# --------------------------------------------------------------------------------------------
def _offsets(gaps: Sequence[int]) -> list[int]:
    out = [0]
    for g in gaps:
        out.append(out[-1] + g + 1)
    return out


def _place(rnd: random.Random, cases: list[Case], length: int) -> list[Case | None]:
    """Each case's memories at positions with exactly its gaps between them (biggest spans
    first); the timeline grows when a case fits nowhere."""
    slots: list[Case | None] = [None] * length
    order = sorted(range(len(cases)), key=lambda i: (-_offsets(cases[i].gaps)[-1], i))
    for i in order:
        offs = _offsets(cases[i].gaps)
        for _ in range(2000):
            start = rnd.randrange(0, max(1, len(slots) - offs[-1]))
            if start + offs[-1] < len(slots) and all(slots[start + o] is None for o in offs):
                break
        else:
            start = len(slots)
            slots.extend([None] * (offs[-1] + 1))
        cases[i].positions = [start + o for o in offs]
        for o in offs:
            slots[start + o] = cases[i]
    return slots


def _sessions(rnd: random.Random, cases: Sequence[Case], length: int) -> list[int]:
    """Session starts (positions): a boundary inside the last gap of each ``later_session``
    case, none inside that of the others, and otherwise sessions of 12-40 turns."""
    forbidden: set[int] = set()
    for c in cases:
        if not c.later_session:
            forbidden.update(range(c.positions[-2] + 1, c.positions[-1] + 1))
    forced: set[int] = set()
    for c in sorted(cases, key=lambda c: c.positions[-1]):
        span = range(c.positions[-2] + 1, c.positions[-1] + 1)
        if not c.later_session or any(b in forced for b in span):
            continue
        allowed = [b for b in span if b not in forbidden]
        if allowed:  # else the case keeps both versions in one session (recorded as such)
            forced.add(rnd.choice(allowed))
    starts = {0, *forced}
    pos = 0
    while True:
        pos += rnd.randint(*SESSION_LENGTH)
        while pos in forbidden:
            pos += 1
        if pos >= length:
            break
        # no session shorter than 3 turns beside a forced boundary
        if all(abs(pos - b) >= 3 for b in forced):
            starts.add(pos)
    return sorted(starts)


def _filler(t: Tenant, near: Sequence[tuple[str, str]]) -> tuple[str, str, str]:
    """(text, speaker, role) of one distractor: small talk, an assistant reply, topic-near."""
    rnd = t.rnd
    humans = [s for s in t.speakers if s != "Assistant"]
    r = rnd.random()
    if "Assistant" in t.speakers:
        if r < 0.25:
            return rnd.choice(_ASSISTANT), "Assistant", "filler"
        r -= 0.25
    if r < 0.2:
        name, template = rnd.choice(near)
        x = _values(rnd, BY_NAME[name], 1)[0]
        return template.format(x=x), rnd.choice(humans), "near"
    text = _FILL.sub(lambda m: rnd.choice(_FILLS[m.group(1)]), rnd.choice(_SMALL_TALK))
    return text[0].upper() + text[1:], rnd.choice(humans), "filler"


def _tenant(seed: int, index: int, n_memories: int) -> dict[str, Any]:
    rnd = random.Random(seed * 100_003 + index)
    kind = "chat" if index % 2 == 0 else "dialogue"
    names: list[str] = []
    while len(names) < 4:
        n = invented_name(rnd)
        if n not in names and len(n) >= 3:
            names.append(n)
    if kind == "chat":
        subjects = [Subject(names[0], "user"), Subject(names[2], "third"),
                    Subject(names[3], "third")]
        speakers = [names[0], "Assistant"]
    else:
        subjects = [Subject(names[0], "speaker"), Subject(names[1], "speaker"),
                    Subject(names[2], "third"), Subject(names[3], "third")]
        speakers = [names[0], names[1]]
    t = Tenant(f"upd-{seed}-{index:02d}", kind, speakers, subjects, rnd)
    cases: list[Case] = []
    for category, count in CASES_PER_TENANT:
        for j in range(count):
            if category == "negative":
                subtype = NEGATIVE_KINDS[j % len(NEGATIVE_KINDS)]
                if subtype == "other_speaker" and kind == "chat":
                    subtype = "other_subject"
                cases.append(_negative_case(t, subtype))
            elif category == "many":
                cases.append(_many_case(t))
            else:
                cases.append(_update_case(t, category))
    slots = _place(rnd, cases, max(n_memories, sum(len(c.mems) for c in cases)))
    length = len(slots)
    starts = _sessions(rnd, cases, length)
    near = [(a.name, s) for a in ATTRIBUTES for s in a.near]
    # times: session k starts 1-28 days after session k-1, turns one minute apart
    at: list[datetime] = []
    session_of: list[int] = []
    begin = BASE_TIME + timedelta(days=rnd.randint(0, 60), hours=rnd.randint(0, 10))
    bounds = [*starts, length]
    for k in range(len(starts)):
        if k:  # 1-28 days (and up to 10 hours) after the previous session's last turn
            begin = at[-1] + timedelta(days=rnd.choice(SESSION_GAP_DAYS),
                                       minutes=rnd.randint(0, 600))
        for i in range(bounds[k + 1] - bounds[k]):
            at.append(begin + i * TURN_SPACING)
            session_of.append(k + 1)
    memories: list[dict[str, Any]] = []
    owner: dict[int, tuple[Case, int]] = {}
    for c in cases:
        for j, p in enumerate(c.positions):
            owner[p] = (c, j)
    for p in range(length):
        slot: str | None = None
        if p in owner:
            c, j = owner[p]
            text, speaker, role = c.mems[j]
            slot = c.negative_slot if role == "negative" else c.slot
        else:
            text, speaker, role = _filler(t, near)
        memories.append({"id": f"{t.name}-m{p:04d}", "text": text, "speaker": speaker,
                         "at": at[p].isoformat(), "session_id": f"{t.name}-S{session_of[p]}",
                         "role": role, "slot": slot})
    questions = []
    for qi, c in enumerate(cases):
        ids = [memories[p]["id"] for p in c.positions]
        roles = [m[2] for m in c.mems]
        p1, p2 = c.positions[-2], c.positions[-1]
        questions.append({
            "id": f"{t.name}-q{qi:02d}", "question": c.question, "category": c.category,
            "subtype": c.subtype, "attribute": c.attribute,
            "cardinality": BY_NAME[c.attribute].card, "slot": c.slot,
            "subject": c.subject.name, "subject_kind": c.subject.kind,
            "gold": [i for i, r in zip(ids, roles, strict=True) if r == "gold"],
            "stale": [i for i, r in zip(ids, roles, strict=True) if r == "old"],
            "negatives": [i for i, r in zip(ids, roles, strict=True) if r == "negative"],
            "gap_memories": p2 - p1 - 1,
            "gap_seconds": (at[p2] - at[p1]).total_seconds(),
            "same_session": session_of[p1] == session_of[p2],
        })
    ask_at = at[-1] + timedelta(days=1)
    return {"tenant": t.name, "kind": kind, "speakers": speakers,
            "subjects": [{"name": s.name, "kind": s.kind} for s in subjects],
            "ask_at": ask_at.isoformat(), "memories": memories, "questions": questions}


def generate(seed: int = DEFAULT_SEED, *, tenants: int = DEFAULT_TENANTS,
             memories_per_tenant: int = DEFAULT_MEMORIES_PER_TENANT) -> dict[str, Any]:
    """The whole set for ``seed`` (a JSON-ready dict; the same seed gives the same set)."""
    return {"format": FORMAT, "seed": seed,
            "generator": "benchmarks/updates_data.py",
            "params": {"tenants": tenants, "memories_per_tenant": memories_per_tenant},
            "tenants": [_tenant(seed, i, memories_per_tenant) for i in range(tenants)]}


def load(path: str | Path) -> dict[str, Any]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if data.get("format") != FORMAT:
        raise ValueError(f"{path}: format {data.get('format')!r}, expected {FORMAT!r}")
    return data


def summary(data: dict[str, Any]) -> str:
    tenants = data["tenants"]
    n_mem = sum(len(t["memories"]) for t in tenants)
    qs = [q for t in tenants for q in t["questions"]]
    cats = Counter(q["category"] for q in qs)
    subs = Counter(q["subtype"] for q in qs if q["category"] == "negative")
    roles = Counter(m["role"] for t in tenants for m in t["memories"])
    gaps = Counter(min(q["gap_memories"], 50) if q["gap_memories"] in (0, 5, 50) else "5-20"
                   for q in qs)
    same = sum(q["same_session"] for q in qs)
    return "\n".join([
        f"seed {data['seed']}: {len(tenants)} tenants, {n_mem} memories, {len(qs)} questions",
        "categories: " + ", ".join(f"{c} {cats[c]}" for c in CATEGORIES),
        "negatives: " + ", ".join(f"{s} {subs[s]}" for s in NEGATIVE_KINDS),
        "roles: " + ", ".join(f"{r} {n}" for r, n in sorted(roles.items())),
        "memories between the last two versions: " + ", ".join(
            f"{g}: {gaps[g]}" for g in (0, 5, "5-20", 50)),
        f"last two versions in the same session: {same}, in different sessions: "
        f"{len(qs) - same}"])


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("--tenants", type=int, default=DEFAULT_TENANTS)
    ap.add_argument("--memories", type=int, default=DEFAULT_MEMORIES_PER_TENANT,
                    help="memories per tenant (at least; default %(default)s)")
    ap.add_argument("--out", help="write the set here (JSON)")
    ap.add_argument("--stats", action="store_true", help="print counts")
    args = ap.parse_args(argv)
    data = generate(args.seed, tenants=args.tenants, memories_per_tenant=args.memories)
    if args.out:
        Path(args.out).write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n",
                                  encoding="utf-8")
    if args.stats or not args.out:
        print(summary(data), file=sys.stdout)


if __name__ == "__main__":
    main()
