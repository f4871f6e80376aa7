#!/usr/bin/env python3
"""Writes the Meterly coding-session replay conversation used by tools/replay.

Larkspur Labs runs Meterly, a usage-based billing platform: Python services
under services/ (FastAPI and Celery on PostgreSQL and Redis: ledger,
webhooks, subscriptions, dunning, invoicing, fx, tax, payouts,
reconciliation, usage), a Go event collector under ingest/, Helm charts and
manifests under deploy/, Dockerfiles under docker/ and CI under .github/. A
backend developer spends a long day in the repository with a coding
assistant that can read files, run commands (pytest, go test, benchmarks,
kubectl, psql), grep, use git and apply patches: a double-posting bug, a
webhook signature problem, a proration rounding bug, dunning on weekends, a
failing Go encoder test, stale FX rates, payouts and reconciliation, the
invoice renderer, usage aggregation, and then the release.

The point of this conversation is recall measured honestly, as in
make_platform.py:
  * tool outputs are long and look like the real thing (source files of
    80-300 lines, pytest -v and go test runs with tracebacks, benchmarks,
    git log/blame/show, Helm values, manifests, Dockerfiles, .env files,
    CI workflows, lockfile excerpts, kubectl logs, psql tables);
  * the line holding a planted value names a constant, a test, a hash, a
    version, a port or a timeout, never its component; the component is
    only in the tool call's arguments (the path, the test directory, the
    `git log -- path`) and in the user's message of that turn, and the
    output that holds it never names the component at all;
  * the same constant names, keys and test shapes recur across components
    with other values, so that a question can only be answered from the
    one output the component's call produced;
  * the words a question would lean on (test, config, error, deploy,
    commit, timeout, version) occur on hundreds of lines of many outputs;
  * the assistant does not repeat tool values in its replies;
  * recall questions arrive 40 or more turns later in the developer's own
    words (abbreviations, plurals, possessives, loose module names,
    compounds referred to by their parts).

Two question sets ask about different facts at different turns: a tuning
set (coding_probes.jsonl) and a held-out set (coding_heldout_probes.jsonl).
Both files carry the same standing instructions and fact-count points, and
one unrelated question each.

Outputs (beside this file):
  coding.jsonl                  system prompt, then one item per line
  coding_facts.jsonl            id, turn, topic, source, text
  coding_probes.jsonl           instructions, fact counts, tuning recall set
  coding_heldout_probes.jsonl   instructions, fact counts, held-out recall set

Deterministic (seeded, no clock). Re-run after editing:
  python3 tools/replay_data/make_coding.py
"""

import datetime
import json
import os
import random
import re

rng = random.Random(20261124)
HERE = os.path.dirname(os.path.abspath(__file__))

SYSTEM = ("You are a coding assistant in the Meterly repository, Larkspur Labs' usage-based billing "
          "platform: Python services under services/ (FastAPI and Celery on PostgreSQL and Redis), a "
          "Go event collector under ingest/, Helm charts and manifests under deploy/, Dockerfiles "
          "under docker/ and CI under .github/. You can read files, run shell commands (tests, "
          "benchmarks, kubectl, psql), search with grep, use git and apply patches. Quote values "
          "exactly as the tools return them, and say so when you are unsure.")

RULES = [
    (2, "never push to main directly: every change goes through a pull request with a green CI run"),
    (3, "money stays in Decimal end to end, and no test may compare amounts as floats"),
]

# The words that name each component. A planted value's whole output must
# hold none of them (the call's arguments and the user's turn do).
COMPONENT_WORDS = {
    "ledger": ["ledger"],
    "worker": ["worker"],
    "webhooks": ["webhook"],
    "subscriptions": ["subscription"],
    "dunning": ["dunning"],
    "ingest": ["ingest"],
    "fx": ["fx", "foreign exchange"],
    "tax": ["tax"],
    "payouts": ["payout"],
    "reconciliation": ["reconcil", "recon"],
    "invoicing": ["invoicing"],
    "usage": ["usage"],
    "api": ["api"],
    "e2e": ["nightly"],
}

# ---------------------------------------------------------------------------
# Phase 1: every planted value, drawn before any output is written, so that
# no noise line anywhere can contain one of them.

RESERVED = []


def unique(make):
    """A value from `make` that neither contains nor is contained in any earlier one."""
    for _ in range(10000):
        v = make()
        if not any(v in r or r in v for r in RESERVED):
            RESERVED.append(v)
            return v
    raise RuntimeError("cannot draw a unique value")


def hexs(n):
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


def pick(values, avoid):
    return rng.choice([v for v in values if v not in avoid])


# Constants and keys that recur across components: the values noise lines
# use, and the values a planted fact uses (kept apart).
NOISE = {
    "MAX_RETRY_BACKOFF_MS": [2000, 5000, 10_000, 30_000, 60_000],
    "BASE_BACKOFF_MS": [50, 100, 200, 250, 500],
    "MAX_ATTEMPTS": [3, 5, 8],
    "SIGNATURE_TOLERANCE_S": [300, 600, 900],
    "GRACE_PERIOD_DAYS": [3, 7, 14, 30],
    "RATE_CACHE_TTL_S": [60, 300, 900, 3600],
    "MAX_BATCH_ITEMS": [100, 200, 250, 500, 1000],
    "MATCH_WINDOW_HOURS": [24, 48, 72],
    "LATE_EVENT_GRACE_S": [60, 300, 600, 900],
    "RENDER_POOL_SIZE": [2, 4, 8],
    "STATEMENT_TIMEOUT_MS": [5000, 15_000, 30_000],
    "LOCK_TIMEOUT_S": [2, 5, 10],
    "PAGE_SIZE": [50, 100, 200, 500],
    "IDEMPOTENCY_TTL_S": [3600, 86_400, 604_800],
    "replicaCount": [2, 3, 4, 6, 8],
    "maxReplicas": [6, 8, 10, 12, 16, 20],
    "minReplicas": [2, 3, 4],
    "memory": ["1Gi", "2Gi", "4Gi"],
    "timeout-minutes": [10, 15, 20, 30, 45, 60],
    "HTTP_TIMEOUT_SECONDS": [5, 10, 15, 20, 30],
    "DB_POOL_MAX": [10, 20, 25, 40, 50],
    "golang": ["1.22.7", "1.22.9", "1.21.13"],
    "schedule": ["0 2 * * *", "*/15 * * * *", "30 4 * * 1-5", "0 */6 * * *", "0 6 * * 1"],
}


def nz(key):
    """A noise value for `key`, as written."""
    v = rng.choice(NOISE[key])
    return f"{v:_}" if isinstance(v, int) and v >= 10_000 else str(v)


P = {}  # label -> planted text
P["L1"] = unique(lambda: f"MAX_RETRY_BACKOFF_MS = {pick([x for x in range(3100, 9900, 100) if x % 500], [])}")
P["L2"] = unique(lambda: f"test_repost_after_timeout_is_idempotent - assert {rng.choice([2, 3])} == 1")
P["L3"] = unique(lambda: hexs(8))
P["K2"] = unique(lambda: f"maxReplicas: {pick(range(13, 30), NOISE['maxReplicas'])}")
P["W1"] = unique(lambda: f"SIGNATURE_TOLERANCE_S = {pick(range(330, 590, 10), NOISE['SIGNATURE_TOLERANCE_S'])}")


def _schedule_lists():
    base = rng.choice([1, 2, 3, 5])
    cap = rng.choice([x for x in range(base * 12, base * 31) if x != base * 16 and x != base * 32])
    got = [base * 2 ** i for i in range(6)]
    want = [min(cap, g) for g in got]
    return (f"test_retry_schedule_doubles_until_cap - assert {got} == {want}")


P["W3"] = unique(_schedule_lists)
P["W2"] = unique(lambda: f"replicaCount: {pick([5, 7, 9, 11, 13], NOISE['replicaCount'])}")


def _decimals():
    a = rng.randint(1100, 9800)
    return (f"test_upgrade_mid_period_rounds_half_even - assert Decimal('{a // 100}.{a % 100:02d}') == "
            f"Decimal('{(a - 1) // 100}.{(a - 1) % 100:02d}')")


P["S1"] = unique(_decimals)
P["S2"] = unique(lambda: hexs(7))
P["D1"] = unique(lambda: f"GRACE_PERIOD_DAYS = {pick([5, 6, 9, 10, 11, 12, 13], NOISE['GRACE_PERIOD_DAYS'])}")


def _dates():
    d = rng.choice([6, 13, 20, 27])  # Fridays; the next business day is the Monday after
    return (f"test_third_notice_skips_weekend - assert datetime.date(2026, 11, {d}) == "
            f"datetime.date(2026, 11, {d + 3})")


P["D2"] = unique(_dates)


def _frame():
    n = rng.choice([2048, 4096, 8192, 16384])
    return f"encoder_test.go:{rng.randint(90, 240)}: flushed frame is {n + rng.randint(1, 4)} bytes, want {n}"


P["G1"] = unique(_frame)
P["G2"] = unique(lambda: f"{rng.randint(410, 980)}.{rng.randint(1, 9)} ns/op")
P["G3"] = unique(lambda: f"FROM golang:1.23.{rng.randint(1, 6)}-bookworm AS build")
P["F1"] = unique(lambda: f"RATE_CACHE_TTL_S = {pick([60 * m for m in range(11, 59)], NOISE['RATE_CACHE_TTL_S'])}")


def _ecb():
    d = rng.randint(10, 20)
    return f"test_stale_rate_is_refetched - assert 'ecb-2026-11-{d}' == 'ecb-2026-11-{d + 3}'"


P["F2"] = unique(_ecb)
P["T1"] = unique(lambda: f"REVERSE_CHARGE_MIN_CENTS = {rng.randint(11, 49) * 50_000:_}")
P["T2"] = unique(lambda: f"HTTP_TIMEOUT_SECONDS={pick(range(11, 29), NOISE['HTTP_TIMEOUT_SECONDS'])}")
P["P1"] = unique(lambda: f"MAX_BATCH_ITEMS = {pick([10 * m for m in range(27, 97) if m % 5], [])}")
P["P2"] = unique(lambda: f'schedule: "{pick(range(1, 59), [0, 15, 30, 45])} {rng.randint(1, 5)} * * *"')
P["R1"] = unique(lambda: f"test_matches_split_settlements - assert {rng.randint(2, 9)} == 0")
P["R2"] = unique(lambda: f"MATCH_WINDOW_HOURS = {pick(range(25, 71), NOISE['MATCH_WINDOW_HOURS'] + [36])}")
P["I1"] = unique(lambda: f"RENDER_POOL_SIZE = {pick([3, 5, 6, 7], NOISE['RENDER_POOL_SIZE'])}")
P["I2"] = unique(lambda: hexs(7))
P["I3"] = unique(lambda: f'version = "{rng.randint(60, 63)}.{rng.randint(0, 3)}"')
P["U1"] = unique(lambda: f"LATE_EVENT_GRACE_S = {pick([10 * m for m in range(31, 119)], NOISE['LATE_EVENT_GRACE_S'])}")
P["U2"] = unique(lambda: f"DB_POOL_MAX={pick(range(21, 59), NOISE['DB_POOL_MAX'])}")
P["K1"] = unique(lambda: f"memory: {rng.choice([1280, 1536, 1792, 2304, 2560, 3072])}Mi")
P["K3"] = unique(lambda: f"timeout-minutes: {pick(range(31, 59), NOISE['timeout-minutes'])}")

# The messages' facts.
M = {
    "name": unique(lambda: "Dara Kowalczyk"),
    "customer": unique(lambda: "Halcyon Freight Lines"),
    "ticket1": unique(lambda: "MTR-4821"),
    "release": unique(lambda: "v2.31.0"),
    "freeze": unique(lambda: "release branch is cut on Thursday at 14:00 UTC"),
    "oncall": unique(lambda: "Teodor Lind is on call for billing this week"),
    "credit": unique(lambda: "credit note of EUR 4,812.50"),
    "pr": unique(lambda: "PR #2291"),
    "reviewer": unique(lambda: "Ilse Marchetti"),
    "channel": unique(lambda: "#billing-release-231"),
    "ticket2": unique(lambda: "MTR-4907"),
    "backfill": unique(lambda: "one-off credit-note script instead of editing issued invoices"),
    "rollout": unique(lambda: "Tuesday 9 December"),
    "load": unique(lambda: "1,800 events per second per pod"),
    "canary": unique(lambda: "canary it in one availability zone for 48 hours"),
}


def clean(s):
    return not any(r in s for r in RESERVED)


def N(make):
    """A noise line: redrawn until it holds no planted value."""
    for _ in range(1000):
        s = make()
        if clean(s):
            return s
    raise RuntimeError("noise keeps hitting a planted value")


def fit(make, n, lo=1300, hi=9400):
    """make(n), with n shrunk or grown until the output is 1.3-9.4 kB."""
    for _ in range(60):
        out = make(n)
        size = len(out.encode())
        if size > hi:
            n = max(1, int(n * 0.85))
        elif size < lo:
            n = int(n * 1.3) + 1
        else:
            return out
    raise RuntimeError("cannot fit output size")


# ---------------------------------------------------------------------------
# Source code. Each service package is `app` (services/<name>/app/...), so a
# module's imports never name its service; the domain shows only through
# nouns that are not the service's name.

DOMAIN = {
    "ledger": dict(n="entry", ns="entries", C="Entry", o="journal", O="Journal", t="journal_entries", a="post"),
    "webhooks": dict(n="delivery", ns="deliveries", C="Delivery", o="endpoint", O="Endpoint", t="outbound_deliveries", a="deliver"),
    "subscriptions": dict(n="plan_change", ns="plan_changes", C="PlanChange", o="period", O="Period", t="plan_changes", a="prorate"),
    "dunning": dict(n="notice", ns="notices", C="Notice", o="cycle", O="Cycle", t="collection_notices", a="schedule"),
    "invoicing": dict(n="document", ns="documents", C="Document", o="page", O="Page", t="rendered_documents", a="render"),
    "fx": dict(n="quote", ns="quotes", C="RateQuote", o="pair", O="CurrencyPair", t="rate_quotes", a="convert"),
    "tax": dict(n="determination", ns="determinations", C="Determination", o="jurisdiction", O="Jurisdiction", t="vat_determinations", a="determine"),
    "payouts": dict(n="transfer", ns="transfers", C="Transfer", o="batch", O="Batch", t="bank_transfers", a="dispatch"),
    "reconciliation": dict(n="settlement", ns="settlements", C="Settlement", o="statement", O="Statement", t="settlement_lines", a="match"),
    "usage": dict(n="meter_event", ns="meter_events", C="MeterEvent", o="rollup", O="Rollup", t="meter_events", a="aggregate"),
}


def sub(template, d):
    for k in ("ns", "n", "C", "o", "O", "t", "a"):
        template = template.replace(f"@{k}@", d[k])
    return template


IMPORTS = [
    "import asyncio", "import enum", "import hashlib", "import hmac", "import itertools", "import json",
    "import random", "import time",
]
FROM_IMPORTS = [
    "from collections.abc import Awaitable, Callable, Iterable, Sequence",
    "from dataclasses import dataclass, field",
    "from datetime import date, datetime, timedelta, timezone",
    "from decimal import ROUND_HALF_EVEN, Decimal",
    "from typing import Any, Final",
    "from uuid import UUID, uuid4",
]
APP_IMPORTS = [
    "from sqlalchemy import text",
    "from sqlalchemy.ext.asyncio import AsyncSession",
    "",
    "from app.config import settings",
    "from app.errors import ConfigError, RetryableError, ValidationError",
    "from app.metrics import counter, histogram",
    "from app.db import session_scope",
    "from app.money import Money, quantize",
]


def header(doc):
    out = ['"""' + doc[0]] + doc[1:] + ['"""', "", "from __future__ import annotations", ""]
    out += sorted(rng.sample(IMPORTS, rng.randint(4, 6)) + ["import logging"])
    out.append("")
    out += FROM_IMPORTS[:2] + sorted(rng.sample(FROM_IMPORTS[2:], rng.randint(2, 4)))
    out.append("")
    out += APP_IMPORTS[:3] + sorted(APP_IMPORTS[3:6] + rng.sample(APP_IMPORTS[6:], rng.randint(0, 2)))
    out += ["", "log = logging.getLogger(__name__)", ""]
    return out


CONST_COMMENTS = [
    "see docs/runbooks/config.md before changing",
    "changing this is a config change: bump CONFIG_VERSION",
    "kept in sync with the Helm values by hand",
    "upper bound, not a target",
    "tests override this through the settings fixture",
    "measured on staging, not derived",
    "raise only together with the statement timeout",
    "the error budget assumes this value",
]


def constants(items):
    """items: (name, value) pairs, or a planted line as a plain string."""
    out = []
    for it in items:
        if isinstance(it, str):
            out.append(it)
            continue
        name, val = it
        line = f"{name}: Final = {val}" if rng.random() < 0.3 else f"{name} = {val}"
        if rng.random() < 0.35:
            line += f"  # {rng.choice(CONST_COMMENTS)}"
        out.append(N(lambda: line))
    out += [f'CONFIG_VERSION = "{rng.randint(3, 9)}.{rng.randint(0, 20)}"',
            f'SCHEMA_VERSION = {rng.randint(2, 14)}', ""]
    return out


SNIPPETS = {}

SNIPPETS["dataclass"] = '''
@dataclass(frozen=True, slots=True)
class @C@Request:
    """What a caller hands in; validated before anything touches the database."""

    reference: str
    amount: Decimal
    currency: str
    tenant_id: UUID
    idempotency_key: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    requested_at: datetime = field(default_factory=lambda: datetime.now(timezone.utc))

    def with_key(self, key: str) -> "@C@Request":
        return @C@Request(
            reference=self.reference,
            amount=self.amount,
            currency=self.currency,
            tenant_id=self.tenant_id,
            idempotency_key=key,
            metadata=dict(self.metadata),
            requested_at=self.requested_at,
        )
'''

SNIPPETS["enum"] = '''
class @C@Status(str, enum.Enum):
    PENDING = "pending"
    IN_FLIGHT = "in_flight"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self in (@C@Status.DONE, @C@Status.FAILED, @C@Status.CANCELLED)
'''

SNIPPETS["errors"] = '''
class @C@Error(Exception):
    """Base error of this module; carries the reference for the logs."""

    def __init__(self, message: str, *, reference: str | None = None) -> None:
        super().__init__(message)
        self.reference = reference


class @C@Conflict(@C@Error):
    """The same reference arrived with a different payload."""


class RetriesExhausted(@C@Error):
    def __init__(self, attempts: int, last_error: BaseException | None = None) -> None:
        super().__init__(f"gave up after {attempts} attempts: {last_error!r}")
        self.attempts = attempts
        self.last_error = last_error
'''

SNIPPETS["backoff"] = '''
def compute_backoff(attempt: int, *, base_ms: int = BASE_BACKOFF_MS, cap_ms: int = MAX_RETRY_BACKOFF_MS) -> float:
    """Full-jitter exponential backoff for `attempt` (0-based), in seconds."""
    if attempt < 0:
        raise ValueError(f"attempt must be >= 0, got {attempt}")
    ceiling = min(cap_ms, base_ms * (2**attempt))
    return random.uniform(0, ceiling) / 1000.0
'''

SNIPPETS["retry"] = '''
async def with_retries(
    factory: Callable[[], Awaitable[Any]],
    *,
    attempts: int = MAX_ATTEMPTS,
    timeout_s: float | None = None,
    retry_on: tuple[type[BaseException], ...] = (RetryableError, TimeoutError, ConnectionError),
) -> Any:
    """Awaits factory() until it succeeds, sleeping compute_backoff() between tries.

    factory is called again on every attempt, so whatever it builds (a
    request, a key, a connection) is built again too.
    """
    timeout_s = timeout_s if timeout_s is not None else settings.http_timeout_s
    last_error: BaseException | None = None
    for attempt in range(attempts):
        started = time.monotonic()
        try:
            return await asyncio.wait_for(factory(), timeout=timeout_s)
        except retry_on as exc:
            last_error = exc
            delay = compute_backoff(attempt)
            counter("retry_attempts_total").inc()
            log.warning(
                "attempt %d/%d failed after %.3fs (%s); retrying in %.2fs",
                attempt + 1,
                attempts,
                time.monotonic() - started,
                type(exc).__name__,
                delay,
            )
            await asyncio.sleep(delay)
    raise RetriesExhausted(attempts, last_error)
'''

SNIPPETS["repository"] = '''
class @C@Repository:
    """Reads and writes @t@ rows; every method runs inside the caller's transaction."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def get(self, @n@_id: UUID) -> dict[str, Any] | None:
        result = await self._session.execute(
            text("SELECT * FROM @t@ WHERE id = :id"),
            {"id": @n@_id},
        )
        row = result.mappings().first()
        return dict(row) if row else None

    async def find_by_reference(self, tenant_id: UUID, reference: str) -> dict[str, Any] | None:
        result = await self._session.execute(
            text("SELECT * FROM @t@ WHERE tenant_id = :tenant AND reference = :ref"),
            {"tenant": tenant_id, "ref": reference},
        )
        row = result.mappings().first()
        return dict(row) if row else None

    async def find_by_key(self, tenant_id: UUID, key: str | None) -> dict[str, Any] | None:
        if key is None:
            return None
        result = await self._session.execute(
            text("SELECT * FROM @t@ WHERE tenant_id = :tenant AND idempotency_key = :key"),
            {"tenant": tenant_id, "key": key},
        )
        row = result.mappings().first()
        return dict(row) if row else None

    async def list_pending(self, limit: int = PAGE_SIZE) -> list[dict[str, Any]]:
        await self._session.execute(text(f"SET LOCAL statement_timeout = {STATEMENT_TIMEOUT_MS}"))
        result = await self._session.execute(
            text(
                "SELECT * FROM @t@ WHERE status = 'pending' "
                "ORDER BY created_at LIMIT :limit FOR UPDATE SKIP LOCKED"
            ),
            {"limit": limit},
        )
        return [dict(r) for r in result.mappings()]

    async def mark(self, @n@_id: UUID, status: str, error: str | None = None) -> None:
        await self._session.execute(
            text("UPDATE @t@ SET status = :status, last_error = :error, updated_at = now() WHERE id = :id"),
            {"id": @n@_id, "status": status, "error": error},
        )
'''

SNIPPETS["validate"] = '''
def validate(request: @C@Request) -> None:
    """Raises ValidationError for anything the database would reject later anyway."""
    if not request.reference or len(request.reference) > 120:
        raise ValidationError(f"reference must be 1-120 characters, got {len(request.reference or '')}")
    if not isinstance(request.amount, Decimal):
        raise ValidationError(f"amount must be a Decimal, got {type(request.amount).__name__}")
    if request.amount.as_tuple().exponent < -4:
        raise ValidationError(f"amount has more than 4 decimal places: {request.amount}")
    if request.currency not in settings.supported_currencies:
        raise ConfigError(f"currency {request.currency} is not enabled in this config")
    if request.metadata and len(json.dumps(request.metadata)) > settings.max_metadata_bytes:
        raise ValidationError("metadata too large")
'''

SNIPPETS["quantize"] = '''
def to_minor_units(amount: Decimal, currency: str) -> int:
    """Decimal amount -> integer minor units, rounding half-even like the bank does."""
    exponent = settings.currency_exponents.get(currency, 2)
    quantum = Decimal(1).scaleb(-exponent)
    rounded = amount.quantize(quantum, rounding=ROUND_HALF_EVEN)
    return int(rounded.scaleb(exponent))


def from_minor_units(units: int, currency: str) -> Decimal:
    exponent = settings.currency_exponents.get(currency, 2)
    return Decimal(units).scaleb(-exponent)
'''

SNIPPETS["task"] = '''
@celery_app.task(
    bind=True,
    acks_late=True,
    max_retries=settings.task_max_retries,
    soft_time_limit=settings.task_soft_timeout_s,
    time_limit=settings.task_hard_timeout_s,
)
def @a@_pending(self, tenant_id: str) -> int:
    """Celery entry point: processes one page of pending @ns@ for a tenant."""
    try:
        return asyncio.run(_@a@_pending(UUID(tenant_id)))
    except RetryableError as exc:
        log.warning("task %s: retryable error %s; retry %d", self.request.id, exc, self.request.retries)
        raise self.retry(exc=exc, countdown=compute_backoff(self.request.retries))
    except Exception:
        log.exception("task %s failed for tenant %s", self.request.id, tenant_id)
        raise


async def _@a@_pending(tenant_id: UUID) -> int:
    done = 0
    async with session_scope() as session:
        repo = @C@Repository(session)
        for row in await repo.list_pending():
            if row["tenant_id"] != tenant_id:
                continue
            await repo.mark(row["id"], "in_flight")
            done += 1
    histogram("task_batch_size").observe(done)
    return done
'''

SNIPPETS["router"] = '''
router = APIRouter(prefix="/v1/@ns@", tags=["@ns@"])


@router.post("", status_code=201)
async def create_@n@(
    body: dict[str, Any],
    idempotency_key: str | None = Header(default=None, alias="Idempotency-Key"),
    session: AsyncSession = Depends(get_session),
) -> dict[str, Any]:
    request = @C@Request(
        reference=body["reference"],
        amount=Decimal(str(body["amount"])),
        currency=body["currency"],
        tenant_id=UUID(body["tenant_id"]),
        idempotency_key=idempotency_key,
    )
    try:
        validate(request)
    except ValidationError as exc:
        raise HTTPException(status_code=422, detail=str(exc)) from exc
    repo = @C@Repository(session)
    existing = await repo.find_by_reference(request.tenant_id, request.reference)
    if existing is not None:
        return existing
    return {"reference": request.reference, "status": "pending"}


@router.get("/{@n@_id}")
async def get_@n@(@n@_id: UUID, session: AsyncSession = Depends(get_session)) -> dict[str, Any]:
    row = await @C@Repository(session).get(@n@_id)
    if row is None:
        raise HTTPException(status_code=404, detail="not found")
    return row
'''

SNIPPETS["cache"] = '''
class TtlCache:
    """A small in-process cache; entries expire after ttl_s seconds."""

    def __init__(self, ttl_s: float, max_entries: int = 4096) -> None:
        self._ttl_s = ttl_s
        self._max = max_entries
        self._data: dict[str, tuple[float, Any]] = {}
        self._lock = asyncio.Lock()

    async def get_or_load(self, key: str, loader: Callable[[], Awaitable[Any]]) -> Any:
        now = time.monotonic()
        hit = self._data.get(key)
        if hit is not None and now - hit[0] < self._ttl_s:
            counter("cache_hits_total").inc()
            return hit[1]
        async with self._lock:
            hit = self._data.get(key)
            if hit is not None and now - hit[0] < self._ttl_s:
                return hit[1]
            value = await loader()
            if len(self._data) >= self._max:
                oldest = min(self._data, key=lambda k: self._data[k][0])
                self._data.pop(oldest, None)
            self._data[key] = (time.monotonic(), value)
            counter("cache_misses_total").inc()
            return value

    def invalidate(self, key: str | None = None) -> None:
        if key is None:
            self._data.clear()
        else:
            self._data.pop(key, None)
'''

SNIPPETS["metrics"] = '''
def observe(outcome: str, started: float, *, reference: str | None = None) -> None:
    """Records one outcome; the dashboards group by outcome and config version."""
    elapsed = time.monotonic() - started
    histogram("operation_seconds").labels(outcome=outcome, config_version=CONFIG_VERSION).observe(elapsed)
    if outcome != "ok":
        log.info("outcome=%s elapsed=%.3fs reference=%s", outcome, elapsed, reference)
'''

# File-specific snippets (each carries its own module constants).

SNIPPETS["writer"] = '''
class @C@Writer:
    """Writes @ns@ and their @o@ lines in one transaction."""

    def __init__(self, session_factory: Callable[[], Any] = session_scope) -> None:
        self._session_factory = session_factory

    async def post(self, request: @C@Request) -> UUID:
        validate(request)
        return await with_retries(
            lambda: self._post_once(request.with_key(request.idempotency_key or str(uuid4())))
        )

    async def _post_once(self, request: @C@Request) -> UUID:
        started = time.monotonic()
        async with self._session_factory() as session:
            repo = @C@Repository(session)
            existing = await repo.find_by_key(request.tenant_id, request.idempotency_key)
            if existing is not None and existing["reference"] == request.reference:
                observe("duplicate", started, reference=request.reference)
                return existing["id"]
            if existing is not None:
                raise @C@Conflict("key reused with another reference", reference=request.reference)
            @n@_id = uuid4()
            await session.execute(
                text(
                    "INSERT INTO @t@ (id, tenant_id, reference, amount, currency, idempotency_key) "
                    "VALUES (:id, :tenant, :ref, :amount, :currency, :key)"
                ),
                {
                    "id": @n@_id,
                    "tenant": request.tenant_id,
                    "ref": request.reference,
                    "amount": request.amount,
                    "currency": request.currency,
                    "key": request.idempotency_key,
                },
            )
            await session.commit()
        observe("ok", started, reference=request.reference)
        return @n@_id
'''

SNIPPETS["signing"] = '''
def sign(payload: bytes, secret: bytes, timestamp: int | None = None) -> str:
    """The signature header value: t=<unix seconds>,v1=<hex hmac-sha256>."""
    ts = int(time.time()) if timestamp is None else timestamp
    mac = hmac.new(secret, f"{ts}.".encode() + payload, hashlib.sha256).hexdigest()
    return f"t={ts},v1={mac}"


def verify(header: str, payload: bytes, secrets: Sequence[bytes], *, now: int | None = None) -> bool:
    """True if any current or previous secret signed payload within the tolerance."""
    try:
        parts = dict(p.split("=", 1) for p in header.split(","))
        ts = int(parts["t"])
        given = parts["v1"]
    except (KeyError, ValueError):
        log.info("malformed signature header")
        return False
    now = int(time.time()) if now is None else now
    if abs(now - ts) > SIGNATURE_TOLERANCE_S:
        counter("signature_rejected_total").labels(reason="timestamp").inc()
        return False
    for secret in secrets:
        expected = hmac.new(secret, f"{ts}.".encode() + payload, hashlib.sha256).hexdigest()
        if hmac.compare_digest(expected, given):
            return True
    counter("signature_rejected_total").labels(reason="mismatch").inc()
    return False


def rotate(current: bytes, previous: Sequence[bytes]) -> list[bytes]:
    """Secrets to try, newest first; old ones are kept for SECRET_OVERLAP_S after a rotation."""
    return [current, *previous[: settings.max_previous_secrets]]
'''

SNIPPETS["schedule"] = '''
def first_notice_date(due: date, calendar: "BusinessCalendar") -> date:
    """The first reminder goes out after the grace period, on a business day."""
    candidate = due + timedelta(days=GRACE_PERIOD_DAYS)
    while not calendar.is_business_day(candidate):
        candidate += timedelta(days=1)
    return candidate


def notice_dates(due: date, calendar: "BusinessCalendar", count: int = MAX_NOTICES) -> list[date]:
    """All reminder dates for one overdue amount, NOTICE_INTERVAL_DAYS apart."""
    dates = [first_notice_date(due, calendar)]
    while len(dates) < count:
        nxt = dates[-1] + timedelta(days=NOTICE_INTERVAL_DAYS)
        if nxt.weekday() >= 5:
            nxt -= timedelta(days=nxt.weekday() - 4)
        dates.append(nxt)
    return dates


class BusinessCalendar:
    def __init__(self, holidays: Iterable[date] = ()) -> None:
        self._holidays = frozenset(holidays)

    def is_business_day(self, day: date) -> bool:
        return day.weekday() < 5 and day not in self._holidays
'''

SNIPPETS["batching"] = '''
def batches(rows: Sequence[dict[str, Any]], limit: int = MAX_BATCH_ITEMS) -> Iterable[list[dict[str, Any]]]:
    """Splits rows into batches the bank file format accepts, never splitting a beneficiary."""
    current: list[dict[str, Any]] = []
    current_total = Decimal("0")
    for beneficiary, group in itertools.groupby(rows, key=lambda r: r["beneficiary_id"]):
        group = list(group)
        group_total = sum((r["amount"] for r in group), Decimal("0"))
        if current and (len(current) + len(group) > limit or current_total + group_total > MAX_BATCH_AMOUNT):
            yield current
            current, current_total = [], Decimal("0")
        current.extend(group)
        current_total += group_total
    if current:
        yield current


def cutoff_for(day: date) -> datetime:
    """The bank's cut-off for same-day value, in UTC."""
    return datetime.combine(day, datetime.min.time(), tzinfo=timezone.utc) + timedelta(hours=CUTOFF_HOUR_UTC)
'''

SNIPPETS["matcher"] = '''
def candidates(line: dict[str, Any], open_items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Open items that could explain one statement line."""
    window = timedelta(hours=MATCH_WINDOW_HOURS)
    out = []
    for item in open_items:
        if item["currency"] != line["currency"]:
            continue
        if abs(item["booked_at"] - line["value_date"]) > window:
            continue
        if abs(item["amount"] - line["amount"]) > AMOUNT_TOLERANCE:
            continue
        out.append(item)
    return sorted(out, key=lambda i: abs(i["booked_at"] - line["value_date"]))


def match(lines: Sequence[dict[str, Any]], open_items: Sequence[dict[str, Any]]) -> tuple[list, list]:
    """Greedy one-to-one matching; returns (matched pairs, unmatched lines)."""
    taken: set[UUID] = set()
    matched, unmatched = [], []
    for line in lines:
        options = [c for c in candidates(line, open_items) if c["id"] not in taken]
        if not options:
            unmatched.append(line)
            continue
        taken.add(options[0]["id"])
        matched.append((line, options[0]))
    return matched, unmatched
'''

SNIPPETS["window"] = '''
def bucket_start(ts: datetime, width_s: int = BUCKET_WIDTH_S) -> datetime:
    epoch = int(ts.timestamp())
    return datetime.fromtimestamp(epoch - epoch % width_s, tz=timezone.utc)


def is_late(event_ts: datetime, watermark: datetime) -> bool:
    """An event is late when it lands behind the watermark by more than the grace."""
    return (watermark - event_ts).total_seconds() > LATE_EVENT_GRACE_S


async def close_buckets(session: AsyncSession, watermark: datetime) -> int:
    """Seals every bucket the watermark has passed; later arrivals go to corrections."""
    cutoff = watermark - timedelta(seconds=LATE_EVENT_GRACE_S)
    result = await session.execute(
        text("UPDATE @t@_buckets SET sealed = true WHERE bucket_start < :cutoff AND NOT sealed"),
        {"cutoff": cutoff},
    )
    return result.rowcount or 0
'''

SNIPPETS["pool"] = '''
class RenderPool:
    """A fixed pool of headless renderers; each holds a warm browser context."""

    def __init__(self, size: int = RENDER_POOL_SIZE) -> None:
        self._queue: asyncio.Queue = asyncio.Queue(maxsize=size)
        self._size = size
        self._started = False

    async def start(self) -> None:
        for _ in range(self._size):
            await self._queue.put(await _new_context())
        self._started = True

    async def render(self, html: str, *, timeout_s: float = RENDER_TIMEOUT_S) -> bytes:
        if not self._started:
            raise ConfigError("render pool used before start()")
        ctx = await asyncio.wait_for(self._queue.get(), timeout=timeout_s)
        try:
            return await asyncio.wait_for(ctx.pdf(html), timeout=timeout_s)
        except TimeoutError:
            log.warning("render timed out after %.1fs; recycling context", timeout_s)
            ctx = await _new_context()
            raise
        finally:
            self._queue.put_nowait(ctx)
'''

SNIPPETS["thresholds"] = '''
def reverse_charge_applies(net_cents: int, seller_country: str, buyer: dict[str, Any]) -> bool:
    """B2B cross-border supplies above the minimum shift the VAT to the buyer."""
    if not buyer.get("vat_id_valid"):
        return False
    if buyer["country"] == seller_country:
        return False
    return net_cents >= REVERSE_CHARGE_MIN_CENTS


def rate_for(jurisdiction: str, category: str, on: date) -> Decimal:
    table = settings.vat_rates.get(jurisdiction)
    if table is None:
        raise ConfigError(f"no VAT table for {jurisdiction}")
    for valid_from, rates in sorted(table.items(), reverse=True):
        if on >= valid_from:
            return Decimal(rates.get(category, rates["standard"]))
    raise ConfigError(f"no VAT rate for {jurisdiction} on {on}")
'''

SNIPPETS["provider"] = '''
class RateProvider:
    """Reference rates from the central bank feed, cached per currency pair."""

    def __init__(self, client: Any, cache: TtlCache | None = None) -> None:
        self._client = client
        self._cache = cache or TtlCache(ttl_s=RATE_CACHE_TTL_S)

    async def rate(self, base: str, quote: str) -> tuple[Decimal, str]:
        """The rate and the feed's publication id it came from."""
        if base == quote:
            return Decimal(1), "identity"
        return await self._cache.get_or_load(f"{base}/{quote}", lambda: self._fetch(base, quote))

    async def _fetch(self, base: str, quote: str) -> tuple[Decimal, str]:
        resp = await with_retries(
            lambda: self._client.get(f"{settings.rates_url}/latest", params={"base": base, "symbols": quote}),
            timeout_s=settings.http_timeout_s,
        )
        body = resp.json()
        if body.get("error"):
            raise RetryableError(f"rate feed error: {body['error']}")
        return Decimal(str(body["rates"][quote])), body["publication"]
'''

SNIPPETS["proration"] = '''
def prorate(old_price: Decimal, new_price: Decimal, period_start: date, period_end: date, change: date) -> Decimal:
    """The amount to charge now for a mid-period change, in the plan currency."""
    if not period_start <= change < period_end:
        raise ValidationError(f"change date {change} outside the period {period_start}..{period_end}")
    total_days = Decimal((period_end - period_start).days)
    remaining = Decimal((period_end - change).days)
    delta = (new_price - old_price) * remaining / total_days
    return delta.quantize(Decimal("0.01"), rounding=ROUND_HALF_EVEN)
'''

PY_FILES = {
    # path: (domain, docstring lines, constants, snippets)
    "services/ledger/app/retry.py": ("ledger", [
        "Retries for database writes.", "",
        "Every write goes through with_retries(); the backoff is full jitter with a cap so a",
        "database failover does not turn into a thundering herd when it comes back."],
        [("BASE_BACKOFF_MS", None), "L1", ("MAX_ATTEMPTS", None), ("STATEMENT_TIMEOUT_MS", None)],
        ["errors", "backoff", "retry", "metrics"]),
    "services/ledger/app/posting.py": ("ledger", [
        "Posting: turns a request into rows, exactly once.", "",
        "A request carries an idempotency key; a retried request with the same key must",
        "find the row the first attempt wrote instead of writing a second one."],
        [("PAGE_SIZE", None), ("STATEMENT_TIMEOUT_MS", None), ("LOCK_TIMEOUT_S", None), ("IDEMPOTENCY_TTL_S", None)],
        ["dataclass", "enum", "validate", "repository", "writer", "metrics", "quantize"]),
    "services/webhooks/app/signing.py": ("webhooks", [
        "Outbound request signing and inbound signature checks.", "",
        "Receivers verify t= and v1= against their secret; we accept the same header format",
        "on the callbacks partners send us, with the same clock-skew tolerance."],
        ["W1", ("SECRET_OVERLAP_S", 86_400), ("MAX_ATTEMPTS", None)],
        ["signing", "errors", "metrics"]),
    "services/webhooks/app/dispatcher.py": ("webhooks", [
        "Sends queued deliveries to their endpoints, with retries and a dead-letter queue."],
        [("BASE_BACKOFF_MS", None), ("MAX_RETRY_BACKOFF_MS", None), ("MAX_ATTEMPTS", None), ("PAGE_SIZE", None),
         ("STATEMENT_TIMEOUT_MS", None)],
        ["enum", "errors", "backoff", "retry", "repository", "task"]),
    "services/subscriptions/app/proration.py": ("subscriptions", [
        "Mid-period plan changes: what to charge or credit now."],
        [("GRACE_PERIOD_DAYS", None), ("PAGE_SIZE", None), ("STATEMENT_TIMEOUT_MS", None)],
        ["dataclass", "proration", "quantize", "validate", "repository"]),
    "services/subscriptions/app/plans.py": ("subscriptions", [
        "Plan catalogue lookups and plan-change requests."],
        [("PAGE_SIZE", None), ("IDEMPOTENCY_TTL_S", None), ("GRACE_PERIOD_DAYS", None)],
        ["dataclass", "enum", "validate", "router", "repository"]),
    "services/dunning/app/schedule.py": ("dunning", [
        "When to send payment reminders for overdue amounts.", "",
        "Reminders never go out on weekends or bank holidays of the customer's country."],
        ["D1", ("NOTICE_INTERVAL_DAYS", 7), ("MAX_NOTICES", 3), ("PAGE_SIZE", None)],
        ["schedule", "enum", "repository", "task"]),
    "services/dunning/app/calendar.py": ("dunning", [
        "Bank holiday calendars per country, loaded from the holidays table."],
        [("PAGE_SIZE", None), ("STATEMENT_TIMEOUT_MS", None)],
        ["cache", "repository", "metrics"]),
    "services/invoicing/app/render.py": ("invoicing", [
        "HTML to PDF for issued documents.", "",
        "Rendering is CPU-bound in the browser process, so the pool is small and fixed."],
        ["I1", ("RENDER_TIMEOUT_S", 45), ("PAGE_SIZE", None), ("MAX_ATTEMPTS", None)],
        ["pool", "errors", "enum", "metrics", "task"]),
    "services/fx/app/provider.py": ("fx", [
        "Reference rates for conversions at issue time."],
        ["F1", ("BASE_BACKOFF_MS", None), ("MAX_RETRY_BACKOFF_MS", None), ("MAX_ATTEMPTS", None)],
        ["cache", "backoff", "retry", "provider", "quantize"]),
    "services/tax/app/thresholds.py": ("tax", [
        "VAT determination: rates, exemptions and the reverse-charge rule."],
        ["T1", ("RATE_CACHE_TTL_S", None), ("PAGE_SIZE", None)],
        ["thresholds", "cache", "dataclass", "validate", "quantize"]),
    "services/payouts/app/batching.py": ("payouts", [
        "Groups approved transfers into bank files.", "",
        "The bank rejects a whole file when one limit is exceeded, so the limits here are",
        "below the bank's published ones."],
        ["P1", ('MAX_BATCH_AMOUNT', 'Decimal("250000.00")'), ("CUTOFF_HOUR_UTC", 14), ("PAGE_SIZE", None),
         ("MAX_RETRY_BACKOFF_MS", None), ("BASE_BACKOFF_MS", None)],
        ["batching", "enum", "repository", "backoff", "task"]),
    "services/reconciliation/app/matcher.py": ("reconciliation", [
        "Matches bank statement lines to open items."],
        ["R2", ('AMOUNT_TOLERANCE', 'Decimal("0.00")'), ("PAGE_SIZE", None), ("MAX_BATCH_ITEMS", None)],
        ["matcher", "repository", "quantize", "metrics"]),
    "services/usage/app/aggregation.py": ("usage", [
        "Rolls raw meter events up into billable buckets.", "",
        "Buckets are sealed once the watermark has passed them by the grace; anything later",
        "becomes a correction on the next invoice."],
        ["U1", ("BUCKET_WIDTH_S", 3600), ("MAX_BATCH_ITEMS", None), ("PAGE_SIZE", None)],
        ["window", "repository", "task", "metrics"]),
}

EXTRA_IMPORTS = {
    "router": ["from fastapi import APIRouter, Depends, Header, HTTPException", "from app.db import get_session"],
    "task": ["from app.celery_app import celery_app"],
    "pool": ["from app.browser import new_context as _new_context"],
    "writer": ["from app.retry import @C@Conflict, with_retries"],
}


def py_file(path):
    dom, doc, consts, snips = PY_FILES[path]
    d = DOMAIN[dom]
    out = header(doc)
    extra = [sub(imp, d) for s in snips for imp in EXTRA_IMPORTS.get(s, [])]
    if "task" in snips and "backoff" not in snips:
        extra.append("from app.retry import compute_backoff")
    if extra:
        out[-3:-3] = extra
    items = []
    for c in consts:
        if isinstance(c, str):
            items.append(P[c])
        elif c[1] is None:
            items.append((c[0], nz(c[0])))
        else:
            items.append((c[0], f"{c[1]:_}" if isinstance(c[1], int) and c[1] >= 10_000 else str(c[1])))
    out += constants(items)
    while out and not out[-1]:
        out.pop()
    for s in snips:
        out += ["", ""] + sub(SNIPPETS[s], d).strip("\n").split("\n")
    return out


def numbered(lines, start=1):
    return "\n".join(f"{i:>5}\t{line}" for i, line in enumerate(lines, start))


def read_py(path):
    return numbered(py_file(path))


GO_FILES = {
    "ingest/internal/encoder/frame.go": '''// Package encoder packs validated events into length-prefixed frames for the
// broker. A frame never exceeds MaxFrameBytes; the writer flushes before an
// append would cross it.
package encoder

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sync"
	"time"

	"github.com/larkspur/meterly/collector/internal/event"
)

const (
	// MaxFrameBytes is the broker's message limit minus the envelope.
	MaxFrameBytes = 4096
	headerBytes   = 12
	frameVersion  = 3
	flushInterval = 250 * time.Millisecond
)

var (
	ErrFrameFull    = errors.New("encoder: frame full")
	ErrEventTooBig  = errors.New("encoder: event larger than a frame")
	ErrClosed       = errors.New("encoder: closed")
	crcTable        = crc32.MakeTable(crc32.Castagnoli)
)

// Writer accumulates events into one frame at a time.
type Writer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	count   int
	closed  bool
	flushFn func([]byte) error
	timer   *time.Timer
}

func NewWriter(flush func([]byte) error) *Writer {
	w := &Writer{flushFn: flush}
	w.buf.Grow(MaxFrameBytes)
	w.reset()
	return w
}

func (w *Writer) reset() {
	w.buf.Reset()
	var hdr [headerBytes]byte
	hdr[0] = frameVersion
	w.buf.Write(hdr[:])
	w.count = 0
}

// Append adds one event, flushing first if it would not fit.
func (w *Writer) Append(ev *event.Event) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	payload, err := ev.MarshalBinary()
	if err != nil {
		return fmt.Errorf("encoder: marshal %s: %w", ev.ID, err)
	}
	need := 4 + len(payload)
	if headerBytes+need > MaxFrameBytes {
		return ErrEventTooBig
	}
	if w.buf.Len()+len(payload) > MaxFrameBytes {
		if err := w.flushLocked(); err != nil {
			return err
		}
	}
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(payload)))
	w.buf.Write(n[:])
	w.buf.Write(payload)
	w.count++
	return nil
}

func (w *Writer) flushLocked() error {
	if w.count == 0 {
		return nil
	}
	b := w.buf.Bytes()
	binary.BigEndian.PutUint32(b[4:8], uint32(w.count))
	binary.BigEndian.PutUint32(b[8:12], crc32.Checksum(b[headerBytes:], crcTable))
	out := make([]byte, len(b))
	copy(out, b)
	w.reset()
	return w.flushFn(out)
}

// Flush sends the current frame, if any.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.flushLocked()
}

// Close flushes and refuses further appends.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	return w.flushLocked()
}

// Decode splits a frame back into payloads; used by tests and the replayer.
func Decode(frame []byte) ([][]byte, error) {
	if len(frame) < headerBytes {
		return nil, fmt.Errorf("encoder: short frame (%d bytes)", len(frame))
	}
	if frame[0] != frameVersion {
		return nil, fmt.Errorf("encoder: frame version %d, want %d", frame[0], frameVersion)
	}
	count := int(binary.BigEndian.Uint32(frame[4:8]))
	if got := crc32.Checksum(frame[headerBytes:], crcTable); got != binary.BigEndian.Uint32(frame[8:12]) {
		return nil, errors.New("encoder: checksum mismatch")
	}
	out := make([][]byte, 0, count)
	rest := frame[headerBytes:]
	for i := 0; i < count; i++ {
		if len(rest) < 4 {
			return nil, fmt.Errorf("encoder: truncated length at event %d", i)
		}
		n := int(binary.BigEndian.Uint32(rest[:4]))
		if len(rest) < 4+n {
			return nil, fmt.Errorf("encoder: truncated payload at event %d", i)
		}
		out = append(out, rest[4:4+n])
		rest = rest[4+n:]
	}
	return out, nil
}
''',
    "ingest/internal/batcher/batcher.go": '''// Package batcher fans events in from the HTTP handlers and hands full
// batches to the encoder. Appends are sharded to keep lock contention down.
package batcher

import (
	"context"
	"errors"
	"hash/fnv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/larkspur/meterly/collector/internal/config"
	"github.com/larkspur/meterly/collector/internal/event"
	"github.com/larkspur/meterly/collector/internal/metrics"
)

var ErrStopped = errors.New("batcher: stopped")

type shard struct {
	mu     sync.Mutex
	events []*event.Event
}

// Batcher groups events per shard and flushes on size or age.
type Batcher struct {
	shards   []shard
	maxBatch int
	maxAge   time.Duration
	out      chan []*event.Event
	stopped  atomic.Bool
	appended atomic.Int64
	wg       sync.WaitGroup
}

func New(cfg config.Batcher) *Batcher {
	b := &Batcher{
		shards:   make([]shard, cfg.Shards),
		maxBatch: cfg.MaxBatch,
		maxAge:   cfg.MaxAge,
		out:      make(chan []*event.Event, cfg.Shards*2),
	}
	for i := range b.shards {
		b.shards[i].events = make([]*event.Event, 0, cfg.MaxBatch)
	}
	return b
}

func (b *Batcher) shardFor(tenant string) *shard {
	h := fnv.New32a()
	_, _ = h.Write([]byte(tenant))
	return &b.shards[int(h.Sum32())%len(b.shards)]
}

// Append queues one event; it blocks only when the output channel is full.
func (b *Batcher) Append(ctx context.Context, ev *event.Event) error {
	if b.stopped.Load() {
		return ErrStopped
	}
	s := b.shardFor(ev.TenantID)
	s.mu.Lock()
	s.events = append(s.events, ev)
	var full []*event.Event
	if len(s.events) >= b.maxBatch {
		full = s.events
		s.events = make([]*event.Event, 0, b.maxBatch)
	}
	s.mu.Unlock()
	b.appended.Add(1)
	if full != nil {
		select {
		case b.out <- full:
			metrics.BatchesFlushed.WithLabelValues("size").Inc()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Run flushes shards older than maxAge until ctx is done.
func (b *Batcher) Run(ctx context.Context) {
	t := time.NewTicker(b.maxAge / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			b.stopped.Store(true)
			b.flushAll("shutdown")
			close(b.out)
			return
		case <-t.C:
			b.flushAll("age")
		}
	}
}

func (b *Batcher) flushAll(reason string) {
	for i := range b.shards {
		s := &b.shards[i]
		s.mu.Lock()
		if len(s.events) == 0 {
			s.mu.Unlock()
			continue
		}
		batch := s.events
		s.events = make([]*event.Event, 0, b.maxBatch)
		s.mu.Unlock()
		b.out <- batch
		metrics.BatchesFlushed.WithLabelValues(reason).Inc()
	}
}

// Out is the channel of full batches.
func (b *Batcher) Out() <-chan []*event.Event { return b.out }

// Appended reports the events accepted since start.
func (b *Batcher) Appended() int64 { return b.appended.Load() }
''',
}


def read_go(path):
    return numbered(GO_FILES[path].rstrip("\n").split("\n"))


# ---------------------------------------------------------------------------
# Test runs.

TEST_FILES = {
    "ledger": ["test_posting.py", "test_retry.py", "test_repository.py", "test_money.py", "test_api.py", "test_reversal.py"],
    "webhooks": ["test_signing.py", "test_dispatcher.py", "test_dead_letter.py", "test_endpoints.py", "test_payloads.py"],
    "subscriptions": ["test_proration.py", "test_plans.py", "test_trials.py", "test_renewals.py", "test_api.py"],
    "dunning": ["test_schedule.py", "test_calendar.py", "test_templates.py", "test_tasks.py"],
    "invoicing": ["test_render.py", "test_numbering.py", "test_lines.py", "test_pdf_metadata.py", "test_api.py"],
    "fx": ["test_provider.py", "test_conversion.py", "test_cache.py", "test_feed_parsing.py"],
    "tax": ["test_thresholds.py", "test_rates.py", "test_vat_ids.py", "test_exemptions.py"],
    "payouts": ["test_batching.py", "test_bank_files.py", "test_cutoffs.py", "test_approvals.py"],
    "reconciliation": ["test_matcher.py", "test_statements.py", "test_import.py", "test_reports.py"],
    "usage": ["test_aggregation.py", "test_windows.py", "test_corrections.py", "test_events_api.py"],
}
TEST_NAMES = [
    "test_@a@_happy_path", "test_@a@_rejects_negative_amount", "test_@a@_rejects_unknown_currency",
    "test_@n@_roundtrips_through_json", "test_@n@_status_transitions", "test_terminal_statuses",
    "test_validate_reference_length", "test_validate_metadata_size", "test_amount_must_be_decimal",
    "test_minor_units_half_even[EUR-2]", "test_minor_units_half_even[JPY-0]", "test_minor_units_half_even[KWD-3]",
    "test_repository_get_missing_returns_none", "test_list_pending_skips_locked_rows", "test_list_pending_respects_limit",
    "test_mark_sets_error_and_timestamp", "test_config_version_is_reported", "test_settings_override_fixture",
    "test_backoff_never_exceeds_cap", "test_backoff_rejects_negative_attempt", "test_retries_on_timeout",
    "test_retries_on_connection_error", "test_gives_up_after_max_attempts", "test_does_not_retry_validation_error",
    "test_task_retries_with_countdown", "test_task_logs_and_reraises", "test_metrics_labels_include_config_version",
    "test_@a@_is_idempotent_for_same_key", "test_conflict_on_reused_reference", "test_statement_timeout_is_set",
    "test_timeout_error_is_retryable", "test_error_message_includes_reference", "test_deploy_env_defaults_to_dev",
    "test_version_header_on_responses", "test_@ns@_endpoint_requires_auth", "test_@ns@_endpoint_404_for_other_tenant",
    "test_pagination_cursor_is_stable", "test_empty_page_has_no_cursor", "test_concurrent_@a@_is_serialized",
    "test_clock_skew_tolerated_in_tests", "test_@a@_dry_run_writes_nothing", "test_audit_row_written",
    "test_commit_happens_once_per_request", "test_rollback_on_error_leaves_no_rows",
    "test_commit_error_is_logged_with_reference", "test_no_commit_on_validation_error", "test_deploy_env_in_health_payload",
    "test_config_error_on_missing_deploy_env", "test_version_is_read_from_package_metadata",
]


DOMAIN_TESTS = {
    "ledger": ["test_reversal_creates_mirror_entry", "test_journal_lines_balance", "test_closed_period_rejects_post",
               "test_same_key_same_reference_returns_existing_id", "test_key_reused_with_other_reference_conflicts",
               "test_post_once_commits_once", "test_adjustment_needs_reason", "test_multi_currency_journal_balances"],
    "webhooks": ["test_signature_header_format", "test_verify_rejects_old_timestamp", "test_verify_accepts_previous_secret",
                 "test_verify_rejects_malformed_header", "test_rotate_keeps_two_previous_secrets",
                 "test_endpoint_disabled_after_consecutive_failures", "test_payload_is_canonical_json",
                 "test_dead_letter_keeps_last_response"],
    "subscriptions": ["test_downgrade_credits_remaining_days", "test_trial_conversion_starts_new_period",
                      "test_prorate_rejects_change_outside_period", "test_renewal_uses_new_price",
                      "test_cancel_at_period_end_keeps_access", "test_plan_change_same_day_is_noop",
                      "test_annual_to_monthly_change"],
    "dunning": ["test_first_notice_after_grace", "test_first_notice_moves_past_holiday", "test_notice_interval",
                "test_max_notices_stops_schedule", "test_paid_invoice_cancels_pending_notices",
                "test_calendar_loads_country_holidays", "test_template_locale_fallback"],
    "invoicing": ["test_number_allocated_in_transaction", "test_render_timeout_recycles_context",
                  "test_credit_note_references_original", "test_reverse_charge_note_on_document",
                  "test_pdf_metadata_has_document_number", "test_render_pool_start_is_required"],
    "fx": ["test_identity_rate_for_same_currency", "test_cache_hit_within_ttl", "test_cache_miss_after_ttl",
           "test_feed_error_is_retryable", "test_publication_id_recorded_on_conversion", "test_inverse_pair_not_derived"],
    "tax": ["test_reverse_charge_needs_valid_vat_id", "test_reverse_charge_not_domestic",
            "test_reverse_charge_at_minimum", "test_rate_for_uses_latest_valid_table", "test_no_table_is_config_error",
            "test_reduced_rate_category"],
    "payouts": ["test_batches_respect_item_limit", "test_batches_respect_amount_limit",
                "test_beneficiary_group_not_split", "test_cutoff_is_utc", "test_bank_file_header_totals",
                "test_approval_required_above_threshold"],
    "reconciliation": ["test_candidates_filter_currency", "test_candidates_within_window", "test_match_is_one_to_one",
                       "test_nearest_candidate_wins", "test_statement_import_dedupes_lines",
                       "test_report_lists_unmatched_by_reason"],
    "usage": ["test_bucket_start_aligns_to_width", "test_is_late_beyond_grace", "test_close_buckets_seals_passed",
              "test_duplicate_event_ids_ignored", "test_events_api_rejects_future_timestamps",
              "test_rollup_sums_quantities_as_decimal"],
}


def _pct(i, n):
    return f"[{100 * i // n:>3}%]"


def pytest_run(dom, n, failures=(), duration=None, flaky_skip=True):
    """pytest -v --no-header output; failures: (file, name, summary, block lines)."""
    d = DOMAIN[dom]
    files = TEST_FILES[dom]
    pool = [sub(t, d) for t in rng.sample(TEST_NAMES, 30)] + DOMAIN_TESTS[dom] * 2
    fail_at = {}
    for f in failures:
        fail_at[f[0] + "::" + f[1]] = f
    # Each test lives in one file; a parametrized one lists all its ids together.
    ids = []
    seen = set()
    for name in rng.sample(pool, len(pool)):
        if len(ids) >= n:
            break
        if name in seen:
            continue
        seen.add(name)
        home = rng.choice(files)
        if "[" not in name and rng.random() < 0.3 and any(w in name for w in (d["a"], "amount", "currency", "rate", "decimal")):
            params = rng.sample(["EUR", "GBP", "USD", "SEK", "CHF", "JPY"], rng.randint(2, 4))
            ids += [f"tests/{home}::{name}[{c}]" for c in params]
        else:
            ids.append(f"tests/{home}::{name}")
    for key in fail_at:
        ids.insert(rng.randint(1, len(ids) - 1), key)
    order = {f: k for k, f in enumerate(files)}
    ids.sort(key=lambda x: order.get(x.split("::")[0][6:], -1))
    out = ["============================= test session starts ==============================",
           f"collecting ... collected {len(ids)} items", ""]
    skipped = 0
    for i, nid in enumerate(ids, 1):
        if nid in fail_at:
            st = "FAILED"
        elif flaky_skip and rng.random() < 0.03:
            st = "SKIPPED (needs a live Redis)"
            skipped += 1
        else:
            st = "PASSED"
        line = f"{nid} {st}"
        out.append(N(lambda: (line.ljust(73) if len(line) < 73 else line + " ") + _pct(i, len(ids))))
    nwarn = rng.randint(1, 4)
    if failures:
        out += ["", "=================================== FAILURES ==================================="]
        for f in failures:
            out.append(f"{'_' * 20} {f[1]} {'_' * 20}")
            out += f[3]
            out.append("")
    out += ["=============================== warnings summary ===============================",
            ".venv/lib/python3.12/site-packages/celery/app/base.py:1163",
            "  DeprecationWarning: The 'CELERY_TIMEZONE' config key is deprecated; use 'timezone' instead.",
            "",
            "tests/conftest.py:41",
            f"  PytestDeprecationWarning: asyncio_default_fixture_loop_scope is unset; the default will change in a future version of pytest-asyncio.",
            "",
            "-- Docs: https://docs.pytest.org/en/stable/how-to/capture-warnings.html"]
    secs = duration or f"{rng.randint(6, 40)}.{rng.randint(10, 99)}"
    parts = []
    if failures:
        out += ["=========================== short test summary info ============================"]
        for f in failures:
            out.append(f"FAILED {f[0]}::{f[1]} - {f[2]}" if not f[2].startswith(f[1]) else f"FAILED {f[0]}::{f[2]}")
        parts.append(f"{len(failures)} failed")
    parts.append(f"{len(ids) - len(failures) - skipped} passed")
    if skipped:
        parts.append(f"{skipped} skipped")
    parts.append(f"{nwarn} warnings")
    tail = f" {', '.join(parts)} in {secs}s "
    out.append(tail.center(80, "="))
    return "\n".join(out)


def failure(file, name, summary, block):
    """One failure: the summary tail is `summary` (planted facts put the test name in it)."""
    return (file, name, summary, block)


def fail_block(fixtures, body, assert_line, e_lines, file, lineno, exc="AssertionError"):
    out = [f"{f} = <{v} object at 0x7f{hexs(10)}>" for f, v in fixtures]
    out.append("")
    out += ["    " + b for b in body]
    out.append(">   " + assert_line[4:] if assert_line.startswith("    ") else ">       " + assert_line)
    out += ["E       " + e for e in e_lines]
    out += ["", f"{file}:{lineno}: {exc}"]
    return out


GO_TESTS = {
    "encoder": ["TestFrameHeader", "TestAppendSingle", "TestAppendManySmall", "TestEventTooBig", "TestDecodeRoundTrip",
                "TestDecodeRejectsShortFrame", "TestDecodeRejectsVersion", "TestChecksumMismatch", "TestCloseFlushes",
                "TestAppendAfterClose", "TestFlushIdempotent", "TestConcurrentAppend", "TestFlushOnSize"],
    "batcher": ["TestShardForIsStable", "TestAppendFlushesOnSize", "TestRunFlushesOnAge", "TestStopDrains",
                "TestAppendAfterStop", "TestContextCancelUnblocks", "TestAppendedCounter", "TestConfigDefaults"],
}
GO_MOD = "github.com/larkspur/meterly/collector"


def go_test(pkg, fail_line=None, fail_test="TestFlushOnSize", n_sub=None):
    out = []
    tests = GO_TESTS[pkg]
    total = 0.0
    for t in tests:
        out.append(f"=== RUN   {t}")
        subs = []
        if rng.random() < 0.45:
            subs = [f"{t}/{s}" for s in rng.sample(["empty", "one_event", "exact_fit", "overflow", "tenant_a",
                                                    "tenant_b", "max_batch", "zero_age", "config_default",
                                                    "timeout", "large_payload", "unicode_tenant"], rng.randint(2, 5))]
            for s in subs:
                out.append(f"=== RUN   {s}")
        if t == "TestConcurrentAppend" or t == "TestRunFlushesOnAge":
            out.append(f"=== PAUSE {t}")
            out.append(f"=== CONT  {t}")
        secs = rng.choice([0.0, 0.0, 0.0, 0.01, 0.02, 0.05, 0.25])
        total += secs
        if fail_line and t == fail_test:
            out.append(f"    {fail_line}")
            out.append(f"--- FAIL: {t} ({secs:.2f}s)")
        else:
            if rng.random() < 0.2:
                out.append(N(lambda: f"    {pkg}_test.go:{rng.randint(30, 400)}: config: using defaults (timeout {rng.choice([100, 250, 500])}ms, version {rng.randint(2, 4)})"))
            out.append(f"--- PASS: {t} ({secs:.2f}s)")
        for s in subs:
            out.append(f"    --- PASS: {s} (0.00s)")
    if fail_line:
        out += ["FAIL", f"FAIL\t{GO_MOD}/internal/{pkg}\t{0.3 + total:.3f}s", "FAIL"]
    else:
        out += ["PASS", f"ok  \t{GO_MOD}/internal/{pkg}\t{0.3 + total:.3f}s"]
    return "\n".join(out)


BENCHES = ["BenchmarkAppend", "BenchmarkAppendParallel", "BenchmarkFlushAll", "BenchmarkShardFor",
           "BenchmarkAppendLargeEvent", "BenchmarkRunTick", "BenchmarkOutDrain"]


def go_bench(pkg, planted=None):
    out = ["goos: linux", "goarch: amd64", f"pkg: {GO_MOD}/internal/{pkg}",
           "cpu: AMD EPYC 7B13"]
    for b in BENCHES:
        variants = [""]
        if b in ("BenchmarkAppend", "BenchmarkFlushAll", "BenchmarkAppendLargeEvent"):
            variants = [f"/shards={s}" for s in (1, 4, 16, 64)]
        parallel = b == "BenchmarkAppendParallel"
        top = float(planted.split()[0]) if (planted and parallel) else rng.uniform(60, 900)
        bytes_op, allocs = rng.choice([0, 16, 48, 64, 128]), rng.choice([0, 1, 2])
        for k, v in enumerate(variants):
            base = top * (1 + 0.35 * k * rng.uniform(0.5, 1.5)) if not parallel else top
            for cpu in (1, 4, 8):
                name = f"{b}{v}-{cpu}" if cpu > 1 else f"{b}{v}"
                if parallel and cpu == 8:
                    val = base
                elif parallel:
                    val = base * {1: rng.uniform(4.5, 6.5), 4: rng.uniform(1.6, 2.2)}[cpu]
                else:
                    val = base * rng.uniform(0.9, 1.15)
                ns = planted if (planted and parallel and cpu == 8) else f"{val:.1f} ns/op"
                iters = int(1e9 / val * rng.uniform(0.8, 1.3))
                line = (lambda: f"{name:<40}\t{iters:>9}\t{ns:>16}\t{bytes_op:>6} B/op\t{allocs:>6} allocs/op")
                out.append(line() if ns == planted else N(line))
    out += ["PASS", f"ok  \t{GO_MOD}/internal/{pkg}\t{rng.randint(30, 90)}.{rng.randint(100, 999)}s"]
    return "\n".join(out)


def py_bench(n):
    """pytest-benchmark table."""
    names = rng.sample(["test_render_small", "test_render_100_lines", "test_render_1000_lines", "test_render_with_logo",
                        "test_render_rtl_locale", "test_render_credit_note", "test_html_template_only",
                        "test_number_allocation", "test_pdf_metadata_write", "test_render_multi_currency",
                        "test_render_reverse_charge_note", "test_render_zero_lines"], n)
    out = ["============================= test session starts ==============================",
           f"collecting ... collected {n} items", ""]
    for i, nm in enumerate(names, 1):
        out.append(f"benchmarks/test_bench.py::{nm} PASSED".ljust(73) + _pct(i, n))
    out += ["", "", f"{'-' * 30} benchmark: {n} tests {'-' * 30}",
            "Name (time in ms)                       Min                 Max                Mean            StdDev              Median               IQR            Outliers       OPS            Rounds  Iterations",
            "-" * 200]
    rows = []
    for nm in names:
        base = rng.uniform(2, 900)
        rows.append((base, nm))
    rows.sort()
    for i, (base, nm) in enumerate(rows):
        rel = base / rows[0][0]
        out.append(N(lambda: f"{nm:<36}{base:>12.4f} ({rel:.2f}){base * rng.uniform(1.2, 3):>16.4f}{base * rng.uniform(1.01, 1.2):>16.4f}"
                             f"{base * rng.uniform(0.01, 0.2):>16.4f}{base * rng.uniform(1.0, 1.1):>16.4f}{base * rng.uniform(0.02, 0.3):>16.4f}"
                             f"{rng.randint(0, 9):>8};{rng.randint(0, 9)}{1000 / base:>14.4f}{rng.randint(5, 200):>10}{1:>12}"))
    out += ["-" * 200, "", "Legend:",
            "  Outliers: 1 Standard Deviation from Mean; 1.5 IQR (InterQuartile Range) from 1st Quartile and 3rd Quartile.",
            "  OPS: Operations Per Second, computed as 1 / Mean",
            f"============================== {n} passed in {rng.randint(20, 90)}.{rng.randint(10, 99)}s =============================="]
    return "\n".join(out)


# ---------------------------------------------------------------------------
# git.

AUTHORS = [("Pia Lundgren", "pia"), ("Marco Esposito", "marco"), ("Lena Vogt", "lena"), ("Samir Haddad", "samir"),
           ("Grace Obi", "grace"), ("Tomasz Zielinski", "tomasz"), ("Ayako Mori", "ayako"), ("Ben Carver", "ben"),
           ("Ines Cabral", "ines"), ("Olu Adeyemi", "olu"), ("Dmitri Volkov", "dmitri"), ("Keira Walsh", "keira")]
SUBJECTS = [
    "fix: retry on connection reset during commit", "config: bump CONFIG_VERSION after timeout change",
    "test: cover the timeout path in the repository", "deploy: raise memory request for the staging chart",
    "chore(deps): bump sqlalchemy and asyncpg", "fix: handle statement timeout as retryable error",
    "refactor: move backoff helpers into retry module", "test: stop comparing money as floats",
    "ci: cache poetry virtualenvs between jobs", "fix: log the reference on every error path",
    "feat: expose config version on /healthz", "deploy: pin image digest in prod values",
    "test: deflake the clock-dependent tests", "docs: runbook entry for the retry alert",
    "fix: commit before acking the task", "chore: ruff 0.8 and the new lint rules",
    "feat: per-tenant rate limits in config", "fix: round half-even at minor-unit conversion",
    "ci: split unit and integration test jobs", "deploy: add PodDisruptionBudget",
    "fix: do not swallow TimeoutError in the task wrapper", "test: fixtures for the settings override",
    "chore: bump version to 2.30.4", "revert: \"config: shorter lock timeout\"", "fix: idempotency TTL in seconds, not ms",
    "feat: dry-run flag for the backfill commands", "ci: fail the build on new mypy errors",
    "fix: error message when the config file is missing", "deploy: readiness probe timeout 3s",
    "fix: commit the outbox row in the same transaction", "deploy: roll out with maxUnavailable 0",
    "test: commit hooks run in CI as well", "deploy: staging gets the prod config shape",
    "fix: do not commit on a dry run", "deploy: separate values for the canary",
]


def date_back(day, max_gap=3):
    return day - datetime.timedelta(days=rng.randint(0, max_gap))


GO_SUBJECTS = [
    "encoder: frame version 3 with count and checksum in the header", "encoder: reuse buffers between frames",
    "encoder: reject events larger than a frame", "test: table tests for Decode errors", "batcher: shard appends by tenant",
    "chore: go 1.23 and golangci-lint 1.62", "encoder: crc32c instead of crc32 IEEE", "fix: flush on Close even when empty",
    "test: fuzz Decode with the corpus from prod", "config: frame limit from the broker config",
    "fix: error wrapping in Append", "ci: race detector on the encoder tests", "deploy: collector readiness on first frame",
]


def git_log_oneline(n, day, planted=None, top_subject=None, code_only=False, go=False, since=None):
    """git log --date=short --format='%h %ad %an  %s'; a planted hash goes on the first line."""
    out = []
    d = day
    pool = GO_SUBJECTS if go else [x for x in SUBJECTS
                                   if not code_only or x.split(":")[0] in ("fix", "refactor", "test", "chore", "feat")]
    subjects = []
    while len(subjects) < n:
        subjects += rng.sample(pool, len(pool))
    for i in range(n):
        d = date_back(d)
        if since and d < since:
            break
        a = rng.choice(AUTHORS)[0]
        if i == 0 and planted:
            out.append(f"{planted} {d.isoformat()} {a}  {top_subject}")
            continue
        out.append(N(lambda: f"{hexs(7)} {d.isoformat()} {a}  {subjects[i]}"
                             + (f" (#{rng.randint(1800, 2280)})" if rng.random() < 0.5 else "")))
    return "\n".join(out)


def git_log_full(n, day):
    out = []
    d = day
    for _ in range(n):
        d = date_back(d)
        a, h = rng.choice(AUTHORS)
        subj = rng.choice(SUBJECTS)
        body = rng.choice([
            "The old behaviour hid the error behind a generic timeout; the test now covers it.",
            "Config change only; the deploy picks it up on the next rollout.",
            "No schema change. The version bump makes the caches reload.",
            "Reviewed with the on-call; the alert threshold follows the new value.",
            "Keeps the commit and the ack in the same order as the retry loop expects.",
        ])
        out.append(N(lambda: f"commit {hexs(40)}\nAuthor: {a} <{h}@larkspur.dev>\nDate:   {d.strftime('%a %b %d')} "
                             f"{rng.randint(8, 19):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d} 2026 +0100\n\n"
                             f"    {subj}\n\n    {body}\n"))
    return "\n".join(out)


def git_blame(code_lines, start, planted_hash=None, planted_at=None, planted_author=None, planted_date=None):
    out = []
    commits = [(hexs(8), rng.choice(AUTHORS)[0], datetime.date(2026, rng.randint(1, 10), rng.randint(1, 28)),
                f"{rng.randint(8, 19):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}")
               for _ in range(7)]
    cur = rng.choice(commits)
    pt = f"{rng.randint(8, 19):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"
    for i, line in enumerate(code_lines):
        no = start + i
        if rng.random() < 0.25:
            cur = rng.choice(commits)
        h, a, d, t = cur
        if planted_hash and i == planted_at:
            t = pt
            out.append(f"{planted_hash} ({planted_author:<17} {planted_date} {t} +0200 {no:>4}) {line}")
        else:
            out.append(N(lambda: f"{h} ({a:<17} {d.isoformat()} {t} +0200 {no:>4}) {line}"))
    return "\n".join(out)


def git_show(day, path, code_lines):
    """The earlier rounding commit of the proration module, with its diff."""
    a, h = AUTHORS[8]
    i = next(k for k, l in enumerate(code_lines) if "delta = (new_price - old_price)" in l)
    ctx_before, ctx_after = code_lines[i - 8:i], code_lines[i + 2:i + 10]
    out = [f"commit {hexs(40)}", f"Author: {a} <{h}@larkspur.dev>",
           f"Date:   {day.strftime('%a %b %d')} 1{rng.randint(0, 8)}:{rng.randint(10, 59)}:{rng.randint(10, 59)} 2026 +0100",
           "", "    fix: round prorated amounts once, half-even (#1967)", "",
           "    The previous version rounded the per-day price and then the product, which",
           "    drifts by a cent on long periods and rounds half-up where the bank rounds",
           "    half-even. Multiply first, divide, round once. The tests now compare the",
           "    Decimal result directly instead of a rounded float.", "",
           f"diff --git a/{path} b/{path}", f"index {hexs(7)}..{hexs(7)} 100644", f"--- a/{path}", f"+++ b/{path}",
           f"@@ -{i - 7},18 +{i - 7},18 @@"]
    out += [" " + l for l in ctx_before]
    out += ["-    per_day = ((new_price - old_price) / total_days).quantize(Decimal(\"0.0001\"), rounding=ROUND_HALF_UP)",
            "-    return (per_day * remaining).quantize(Decimal(\"0.01\"), rounding=ROUND_HALF_UP)",
            "+    delta = (new_price - old_price) * remaining / total_days",
            "+    return delta.quantize(Decimal(\"0.01\"), rounding=ROUND_HALF_EVEN)"]
    out += [" " + l for l in ctx_after]
    return "\n".join(out)


PRECOMMIT = ["ruff", "ruff-format", "mypy", "check-yaml", "check-toml", "end-of-file-fixer",
             "trailing-whitespace", "check-added-large-files", "detect-private-key", "no-float-money (local)",
             "helm-lint (local)", "gofmt (local)"]


# ---------------------------------------------------------------------------
# Deployment configuration.

IMAGE_TAG = "2.30.4"


def helm_values(env="prod", planted=()):
    """A chart's values-<env>.yaml; `planted` maps a key (replicaCount, maxReplicas,
    memory) to its planted line. Nothing in it names the chart."""
    planted = dict(planted)

    def val(key, indent=""):
        if key in planted:
            return indent + planted[key]
        return N(lambda: f"{indent}{key}: {nz(key)}")
    mem_req = N(lambda: f"    memory: {rng.choice(['256Mi', '512Mi', '768Mi'])}")
    out = [f"# Production overrides; defaults live in values.yaml next to this file." if env == "prod"
           else "# Staging overrides; keep the shape identical to values-prod.yaml.",
           "# Rendered by the deploy workflow with --set image.tag=<release version>.",
           "# The deploy job fails if the rendered manifests differ from the last deploy without a commit.",
           "# Any change here is a config change: it needs a PR and a green CI run.",
           "",
           "image:",
           "  repository: ghcr.io/larkspur/meterly",
           f'  tag: "{IMAGE_TAG}"',
           "  pullPolicy: IfNotPresent",
           "",
           val("replicaCount"),
           f"revisionHistoryLimit: {rng.choice([5, 10])}",
           "",
           "command: [\"python\", \"-m\", \"app.main\"]",
           f"args: [\"--log-level\", \"{rng.choice(['info', 'warning'])}\", \"--config\", \"/etc/meterly/config.yaml\"]",
           "",
           "podAnnotations:",
           "  prometheus.io/scrape: \"true\"",
           f"  prometheus.io/port: \"{rng.choice([9100, 9102, 9464])}\"",
           "  kubectl.kubernetes.io/default-container: app",
           "",
           "deploymentStrategy:",
           "  type: RollingUpdate",
           "  rollingUpdate:",
           f"    maxSurge: {rng.choice(['25%', '1', '2'])}",
           "    maxUnavailable: 0",
           "",
           "resources:",
           "  requests:",
           f"    cpu: {rng.choice(['250m', '500m', '750m', '1'])}",
           mem_req,
           "  limits:",
           f"    cpu: \"{rng.choice([1, 2, 4])}\"",
           val("memory", "    "),
           "",
           "autoscaling:",
           "  enabled: true",
           val("minReplicas", "  "),
           val("maxReplicas", "  "),
           f"  targetCPUUtilizationPercentage: {rng.choice([60, 65, 70, 75])}",
           "  behavior:",
           "    scaleDown:",
           f"      stabilizationWindowSeconds: {rng.choice([120, 300, 600])}",
           "",
           "podDisruptionBudget:",
           "  enabled: true",
           "  minAvailable: 1",
           "",
           "probes:",
           "  readiness:",
           "    path: /healthz/ready",
           f"    periodSeconds: {rng.choice([5, 10])}",
           f"    timeoutSeconds: {rng.choice([2, 3, 5])}",
           f"    failureThreshold: {rng.choice([3, 5])}",
           "  liveness:",
           "    path: /healthz/live",
           f"    periodSeconds: {rng.choice([10, 20])}",
           f"    timeoutSeconds: {rng.choice([3, 5])}",
           f"    initialDelaySeconds: {rng.choice([10, 15, 30])}",
           "",
           "env:",
           f"  DEPLOY_ENV: {env}",
           f"  LOG_FORMAT: json",
           f"  OTEL_EXPORTER_OTLP_ENDPOINT: http://otel-collector.observability:4317",
           f"  OTEL_TRACES_SAMPLER_ARG: \"{rng.choice(['0.05', '0.1', '0.2'])}\"",
           f"  HTTP_TIMEOUT_SECONDS: \"{nz('HTTP_TIMEOUT_SECONDS')}\"",
           f"  DB_POOL_MAX: \"{nz('DB_POOL_MAX')}\"",
           f"  DB_STATEMENT_TIMEOUT_MS: \"{nz('STATEMENT_TIMEOUT_MS').replace('_', '')}\"",
           f"  CONFIG_VERSION: \"{rng.randint(3, 9)}.{rng.randint(0, 20)}\"",
           "",
           "envFromSecrets:",
           "  - meterly-db-credentials",
           "  - meterly-redis-credentials",
           "  - meterly-sentry",
           "",
           "config:",
           f"  http_timeout_s: {rng.choice([5, 10, 15])}",
           f"  task_soft_timeout_s: {rng.choice([30, 60, 120])}",
           f"  task_hard_timeout_s: {rng.choice([180, 300])}",
           f"  task_max_retries: {rng.choice([3, 5, 8])}",
           f"  supported_currencies: [EUR, GBP, USD, CHF, SEK, DKK, PLN]",
           f"  max_metadata_bytes: {rng.choice([4096, 8192, 16384])}",
           "",
           "nodeSelector:",
           f"  larkspur.dev/pool: {rng.choice(['general', 'compute', 'memory'])}",
           "",
           "tolerations: []",
           "",
           "topologySpreadConstraints:",
           "  - maxSkew: 1",
           "    topologyKey: topology.kubernetes.io/zone",
           "    whenUnsatisfiable: ScheduleAnyway",
           "",
           "serviceMonitor:",
           "  enabled: true",
           f"  interval: {rng.choice(['15s', '30s'])}",
           f"  scrapeTimeout: {rng.choice(['10s', '5s'])}",
           ]
    return "\n".join(out)


def cronjob_manifest(planted_schedule=None, name="nightly-run", module="app.jobs.run"):
    sched = planted_schedule or N(lambda: f'schedule: "{nz("schedule")}"')
    out = [
        "# Applied by the deploy workflow with kubectl apply -k; the image tag is patched per release.",
        "apiVersion: batch/v1",
        "kind: CronJob",
        "metadata:",
        f"  name: {name}",
        "  labels:",
        "    app.kubernetes.io/part-of: meterly",
        "    app.kubernetes.io/managed-by: deploy-workflow",
        "spec:",
        f"  {sched}",
        "  timeZone: Etc/UTC",
        "  concurrencyPolicy: Forbid",
        f"  startingDeadlineSeconds: {rng.choice([300, 600, 900])}",
        "  successfulJobsHistoryLimit: 3",
        "  failedJobsHistoryLimit: 5",
        "  jobTemplate:",
        "    spec:",
        f"      backoffLimit: {rng.choice([1, 2, 3])}",
        f"      activeDeadlineSeconds: {rng.choice([1800, 3600, 7200])}",
        "      ttlSecondsAfterFinished: 86400",
        "      template:",
        "        metadata:",
        "          annotations:",
        "            cluster-autoscaler.kubernetes.io/safe-to-evict: \"false\"",
        "        spec:",
        "          restartPolicy: Never",
        "          serviceAccountName: meterly-jobs",
        "          securityContext:",
        "            runAsNonRoot: true",
        "            runAsUser: 10001",
        "            fsGroup: 10001",
        "          containers:",
        "            - name: main",
        f"              image: ghcr.io/larkspur/meterly:{IMAGE_TAG}",
        f"              command: [\"python\", \"-m\", \"{module}\"]",
        "              args: [\"--commit-every\", \"500\"]",
        "              env:",
        "                - name: DEPLOY_ENV",
        "                  value: prod",
        "                - name: HTTP_TIMEOUT_SECONDS",
        f"                  value: \"{nz('HTTP_TIMEOUT_SECONDS')}\"",
        "                - name: CONFIG_VERSION",
        f"                  value: \"{rng.randint(3, 9)}.{rng.randint(0, 20)}\"",
        "              envFrom:",
        "                - secretRef:",
        "                    name: meterly-db-credentials",
        "              resources:",
        "                requests:",
        f"                  cpu: {rng.choice(['100m', '250m'])}",
        f"                  memory: {rng.choice(['256Mi', '512Mi'])}",
        "                limits:",
        f"                  memory: {nz('memory')}",
        "---",
        "apiVersion: v1",
        "kind: ConfigMap",
        "metadata:",
        f"  name: {name}-config",
        "data:",
        "  config.yaml: |",
        f"    dry_run: false",
        f"    commit_every: 500",
        f"    statement_timeout_ms: {nz('STATEMENT_TIMEOUT_MS').replace('_', '')}",
        f"    lock_timeout_s: {nz('LOCK_TIMEOUT_S')}",
        f"    error_budget: 0.{rng.randint(1, 9)}",
        "---",
        "apiVersion: networking.k8s.io/v1",
        "kind: NetworkPolicy",
        "metadata:",
        f"  name: {name}-egress",
        "spec:",
        "  podSelector:",
        "    matchLabels:",
        f"      job-name: {name}",
        "  policyTypes: [Egress]",
        "  egress:",
        "    - to:",
        "        - namespaceSelector:",
        "            matchLabels:",
        "              kubernetes.io/metadata.name: data",
        "      ports:",
        "        - port: 5432",
        "        - port: 6379",
    ]
    return "\n".join(out)


def dockerfile_go(from_line, binary="collector"):
    return "\n".join([
        "# syntax=docker/dockerfile:1.7",
        "# Two stages: build with the Go toolchain, run on distroless.",
        "# The release workflow passes VERSION and COMMIT; local builds get dev/unknown.",
        "",
        from_line,
        "WORKDIR /src",
        "ENV CGO_ENABLED=0 GOFLAGS=-mod=readonly",
        "COPY go.mod go.sum ./",
        "RUN --mount=type=cache,target=/go/pkg/mod go mod download",
        "COPY . .",
        "ARG VERSION=dev",
        "ARG COMMIT=unknown",
        "RUN --mount=type=cache,target=/go/pkg/mod \\",
        "    --mount=type=cache,target=/root/.cache/go-build \\",
        f"    go build -trimpath -ldflags \"-s -w -X main.version=${{VERSION}} -X main.commit=${{COMMIT}}\" \\",
        f"      -o /out/{binary} ./cmd/{binary}",
        "RUN --mount=type=cache,target=/go/pkg/mod go test -count=1 ./... 2>&1 | tail -n 20",
        "",
        "# A debug variant for staging: same binary, with delve for live debugging.",
        "# Build it with --target debug; the release workflow never does.",
        "FROM build AS debug",
        "RUN go install github.com/go-delve/delve/cmd/dlv@v1.23.1",
        f"ENTRYPOINT [\"dlv\", \"exec\", \"/out/{binary}\", \"--headless\", \"--listen=:2345\", \"--accept-multiclient\", \"--\"]",
        "",
        "FROM gcr.io/distroless/static-debian12:nonroot",
        "LABEL org.opencontainers.image.source=\"https://github.com/larkspur/meterly\"",
        "LABEL org.opencontainers.image.vendor=\"Larkspur Labs\"",
        "ARG VERSION=dev",
        "ARG COMMIT=unknown",
        "LABEL org.opencontainers.image.version=\"${VERSION}\" org.opencontainers.image.revision=\"${COMMIT}\"",
        f"COPY --from=build /out/{binary} /usr/local/bin/{binary}",
        "# Config comes from a mounted ConfigMap; the timeout and version flags can be overridden per deploy.",
        "USER nonroot:nonroot",
        f"EXPOSE {rng.choice([8080, 8081])} {rng.choice([9100, 9102])}",
        f"ENTRYPOINT [\"/usr/local/bin/{binary}\"]",
        "CMD [\"--config\", \"/etc/meterly/config.yaml\"]",
    ])


def dockerfile_py(module="app.main"):
    return "\n".join([
        "# syntax=docker/dockerfile:1.7",
        "# One image per Python service; the build context is the service directory.",
        "",
        f"FROM python:3.12.{rng.choice([6, 7, 8])}-slim-bookworm AS base",
        "ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \\",
        "    POETRY_VERSION=1.8.4 POETRY_VIRTUALENVS_IN_PROJECT=true",
        "RUN apt-get update \\",
        "    && apt-get install -y --no-install-recommends libpq5 tini ca-certificates \\",
        "    && rm -rf /var/lib/apt/lists/*",
        "",
        "FROM base AS build",
        "RUN pip install \"poetry==${POETRY_VERSION}\"",
        "WORKDIR /app",
        "COPY pyproject.toml poetry.lock ./",
        "RUN --mount=type=cache,target=/root/.cache/pypoetry poetry install --only main --no-root --no-interaction",
        "COPY app ./app",
        "RUN poetry install --only main --no-interaction",
        "",
        "FROM build AS test",
        "RUN poetry install --no-interaction --with dev",
        "COPY tests ./tests",
        "RUN poetry run pytest -q -p no:randomly --timeout=120 || (echo 'unit tests failed in the image build' && exit 1)",
        "",
        "FROM base AS runtime",
        "RUN useradd --create-home --uid 10001 meterly",
        "WORKDIR /app",
        "COPY --from=build /app /app",
        "ENV PATH=/app/.venv/bin:$PATH",
        "ARG VERSION=dev",
        "ENV METERLY_VERSION=${VERSION}",
        "ARG COMMIT=unknown",
        "ENV METERLY_COMMIT=${COMMIT}",
        "LABEL org.opencontainers.image.source=\"https://github.com/larkspur/meterly\" \\",
        "      org.opencontainers.image.version=\"${VERSION}\" org.opencontainers.image.revision=\"${COMMIT}\"",
        "# uvicorn workers and timeouts come from the config file; DEPLOY_ENV picks the section.",
        "USER meterly",
        "EXPOSE 8000",
        f"HEALTHCHECK --interval=30s --timeout={rng.choice([3, 5])}s CMD python -c \"import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:8000/healthz/live', timeout=2)\" || exit 1",
        "ENTRYPOINT [\"tini\", \"--\"]",
        f"CMD [\"python\", \"-m\", \"{module}\"]",
    ])


def env_example(planted=None):
    planted = dict(planted or ())

    def kv(k, v):
        if k in planted:
            return planted[k]
        return N(lambda: f"{k}={v}")
    out = ["# Copy to .env for local development; docker compose reads it too.",
           "# Never commit a real .env: CI fails the build if one is tracked.",
           "", "# --- runtime ---",
           kv("DEPLOY_ENV", "dev"), kv("LOG_LEVEL", rng.choice(["debug", "info"])), kv("LOG_FORMAT", "console"),
           kv("CONFIG_VERSION", f"{rng.randint(3, 9)}.{rng.randint(0, 20)}"), kv("PORT", "8000"),
           kv("METRICS_PORT", str(rng.choice([9100, 9102]))),
           "", "# --- database ---",
           kv("DATABASE_URL", "postgresql+asyncpg://app:app@localhost:5432/app_dev"),
           kv("DB_POOL_MIN", str(rng.choice([1, 2, 5]))), kv("DB_POOL_MAX", nz("DB_POOL_MAX")),
           kv("DB_POOL_TIMEOUT_S", str(rng.choice([5, 10, 30]))),
           kv("DB_STATEMENT_TIMEOUT_MS", nz("STATEMENT_TIMEOUT_MS").replace("_", "")),
           kv("DB_LOCK_TIMEOUT_S", nz("LOCK_TIMEOUT_S")), kv("DB_ECHO", "false"),
           "", "# --- redis / celery ---",
           kv("REDIS_URL", "redis://localhost:6379/0"), kv("CELERY_BROKER_URL", "redis://localhost:6379/1"),
           kv("CELERY_RESULT_BACKEND", "redis://localhost:6379/2"),
           kv("TASK_SOFT_TIMEOUT_S", str(rng.choice([30, 60]))), kv("TASK_HARD_TIMEOUT_S", str(rng.choice([90, 180]))),
           kv("TASK_MAX_RETRIES", str(rng.choice([3, 5, 8]))),
           "", "# --- outbound HTTP ---",
           kv("HTTP_TIMEOUT_SECONDS", nz("HTTP_TIMEOUT_SECONDS")), kv("HTTP_CONNECT_TIMEOUT_SECONDS", str(rng.choice([2, 3, 5]))),
           kv("HTTP_MAX_CONNECTIONS", str(rng.choice([20, 50, 100]))), kv("HTTP_RETRY_ATTEMPTS", str(rng.choice([2, 3, 5]))),
           kv("HTTP_USER_AGENT", "meterly/dev (+https://larkspur.dev)"),
           "", "# --- observability ---",
           kv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4317"), kv("OTEL_SERVICE_NAMESPACE", "meterly"),
           kv("OTEL_TRACES_SAMPLER_ARG", "1.0"), kv("SENTRY_DSN", ""), kv("SENTRY_TRACES_SAMPLE_RATE", "0"),
           "", "# --- feature flags (comma separated) ---",
           kv("FEATURE_FLAGS", rng.choice(["strict_decimal,audit_rows", "audit_rows", "strict_decimal"])),
           kv("DRY_RUN_DEFAULT", "true"),
           "", "# --- local test helpers ---",
           kv("TEST_DATABASE_URL", "postgresql+asyncpg://app:app@localhost:5432/app_test"),
           kv("TEST_TIMEOUT_S", str(rng.choice([10, 30, 60]))), kv("PYTEST_ADDOPTS", "-p no:randomly"),
           kv("FREEZEGUN_DEFAULT", "2026-01-15T09:00:00Z"),
           "", "# --- rate limits and retries ---",
           kv("RATE_LIMIT_RPS", str(rng.choice([50, 100, 200]))), kv("RATE_LIMIT_BURST", str(rng.choice([100, 200, 400]))),
           kv("RETRY_BASE_BACKOFF_MS", nz("BASE_BACKOFF_MS")), kv("RETRY_MAX_ATTEMPTS", nz("MAX_ATTEMPTS")),
           ]
    return "\n".join(out)


def workflow(name, jobs, planted=None):
    """A GitHub Actions workflow; jobs: list of job names. A planted timeout line goes on the first job."""
    out = [f"name: {name}", "", "on:"]
    if name.startswith("e2e"):
        out += ["  schedule:", f"    - cron: \"{rng.randint(0, 59)} {rng.randint(0, 4)} * * *\"", "  workflow_dispatch: {}"]
    elif name == "deploy":
        out += ["  push:", "    tags: [\"v*\"]", "  workflow_dispatch:", "    inputs:", "      environment:",
                "        type: choice", "        options: [staging, prod]", "        default: staging"]
    else:
        out += ["  pull_request: {}", "  push:", "    branches: [main]"]
    out += ["", "concurrency:", "  group: ${{ github.workflow }}-${{ github.ref }}",
            f"  cancel-in-progress: {'true' if name == 'ci' else 'false'}", "", "permissions:", "  contents: read",
            "  packages: write" if name == "deploy" else "  checks: write", "", "env:",
            "  PYTHON_VERSION: \"3.12\"", "  POETRY_VERSION: \"1.8.4\"", "  GO_VERSION: \"1.23\"", "", "jobs:"]
    for i, job in enumerate(jobs):
        tline = planted if (planted and i == 0) else N(lambda: f"timeout-minutes: {nz('timeout-minutes')}")
        out += [f"  {job}:", "    runs-on: ubuntu-24.04", f"    {tline}"]
        if job == "report":
            out += ["    needs: [e2e]", "    if: always()", "    steps:",
                    "      - uses: actions/download-artifact@v4", "        with:", "          pattern: test-report-*",
                    "      - name: publish", "        uses: mikepenz/action-junit-report@v5", "        with:",
                    "          report_paths: '**/report.xml'", "          fail_on_failure: true",
                    "      - name: notify on failure", "        if: failure()",
                    "        run: ./scripts/notify.sh \"e2e failed on ${GITHUB_SHA::7}, see ${GITHUB_SERVER_URL}/${GITHUB_REPOSITORY}/actions/runs/${GITHUB_RUN_ID}\"",
                    ""]
            continue
        if job in ("integration", "e2e", "test"):
            out += ["    services:", "      postgres:", "        image: postgres:16", "        env:",
                    "          POSTGRES_PASSWORD: app", "        ports: [\"5432:5432\"]",
                    "        options: --health-cmd pg_isready --health-interval 5s --health-timeout 5s --health-retries 10",
                    "      redis:", "        image: redis:7", "        ports: [\"6379:6379\"]"]
        if job.startswith("deploy"):
            out += ["    environment: ${{ inputs.environment || 'staging' }}", "    needs: [build]"]
        if job in ("unit", "test", "e2e", "integration"):
            out += ["    strategy:", "      fail-fast: false", "      matrix:",
                    "        service: [ledger, webhooks, subscriptions, dunning, invoicing, fx, tax, payouts, reconciliation, usage]"]
        out += ["    steps:", "      - uses: actions/checkout@v4"]
        if job in ("go", "bench"):
            out += ["      - uses: actions/setup-go@v5", "        with:", "          go-version: ${{ env.GO_VERSION }}",
                    "      - run: go vet ./... && go test -race -count=1 ./...", "        working-directory: ingest"]
        elif job.startswith("deploy") or job == "build":
            out += ["      - uses: docker/setup-buildx-action@v3", "      - uses: docker/login-action@v3", "        with:",
                    "          registry: ghcr.io", "          username: ${{ github.actor }}",
                    "          password: ${{ secrets.GITHUB_TOKEN }}",
                    "      - name: build and push", "        run: |",
                    "          docker buildx build --push --build-arg VERSION=${GITHUB_REF_NAME} \\",
                    "            --build-arg COMMIT=${GITHUB_SHA} -t ghcr.io/larkspur/meterly:${GITHUB_REF_NAME} .",
                    "      - name: helm upgrade", "        if: startsWith(github.job, 'deploy')", "        run: |",
                    "          helm upgrade --install --atomic --timeout 10m \\",
                    "            -f deploy/helm/values-${{ inputs.environment || 'staging' }}.yaml \\",
                    "            --set image.tag=${GITHUB_REF_NAME} meterly deploy/helm"]
        else:
            out += ["      - uses: actions/setup-python@v5", "        with:", "          python-version: ${{ env.PYTHON_VERSION }}",
                    "      - uses: actions/cache@v4", "        with:", "          path: ~/.cache/pypoetry",
                    "          key: poetry-${{ runner.os }}-${{ hashFiles('**/poetry.lock') }}",
                    "      - run: pip install poetry==${{ env.POETRY_VERSION }}",
                    "      - name: install", "        run: poetry install --no-interaction",
                    "        working-directory: services/${{ matrix.service }}",
                    "      - name: test", f"        run: poetry run pytest -q --timeout={rng.choice([60, 120, 300])} --junitxml=report.xml"
                    + (" -m e2e" if job == "e2e" else ""),
                    "        working-directory: services/${{ matrix.service }}",
                    "        env:", "          DATABASE_URL: postgresql+asyncpg://postgres:app@localhost:5432/postgres",
                    "          DEPLOY_ENV: ci",
                    "      - uses: actions/upload-artifact@v4", "        if: always()", "        with:",
                    "          name: test-report-${{ matrix.service }}", "          path: '**/report.xml'"]
        out.append("")
    return "\n".join(out)


LOCK_PACKAGES = [
    ("anyio", "4.6.2.post1", "High level compatibility layer for multiple asynchronous event loop implementations"),
    ("asyncpg", "0.30.0", "An asyncio PostgreSQL driver"),
    ("brotli", "1.1.0", "Python bindings for the Brotli compression library"),
    ("cffi", "1.17.1", "Foreign Function Interface for Python calling C code."),
    ("cssselect2", "0.7.0", "CSS selectors for Python ElementTree"),
    ("fonttools", "4.55.0", "Tools to manipulate font files"),
    ("html5lib", "1.1", "HTML parser based on the WHATWG HTML specification"),
    ("pillow", "11.0.0", "Python Imaging Library (Fork)"),
    ("pydyf", "0.11.0", "A low-level PDF generator."),
    ("pyphen", "0.17.0", "Pure Python module to hyphenate text"),
    ("sqlalchemy", "2.0.36", "Database Abstraction Library"),
    ("tinycss2", "1.4.0", "A tiny CSS parser"),
    ("tinyhtml5", "2.0.0", "HTML parser based on the WHATWG HTML specification"),
    ("weasyprint", None, "The Awesome Document Factory"),
    ("zopfli", "0.2.3.post1", "Zopfli module for python"),
]


def lock_excerpt(planted_version):
    out = []
    for name, ver, desc in LOCK_PACKAGES:
        vline = planted_version if ver is None else N(lambda: f'version = "{ver}"')
        shown = ver or planted_version.split('"')[1]
        out += ["[[package]]", f'name = "{name}"', vline, f'description = "{desc}"', "optional = false",
                f'python-versions = ">={rng.choice(["3.8", "3.9", "3.10"])}"', "files = ["]
        for tag in rng.sample(["cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64", "py3-none-any",
                               "cp312-cp312-macosx_11_0_arm64", "cp312-cp312-musllinux_1_2_x86_64"], rng.randint(2, 3)):
            out.append(N(lambda: f'    {{file = "{name}-{shown}-{tag}.whl", hash = "sha256:{hexs(64)}"}},'))
        out += ["]", ""]
        if name in ("weasyprint", "sqlalchemy", "cffi"):
            out += ["[package.dependencies]"]
            deps = {"weasyprint": ['cffi = ">=0.6"', 'cssselect2 = ">=0.1"', 'fonttools = {version = ">=4.0.0", extras = ["woff"]}',
                                   'Pillow = ">=9.1.0"', 'pydyf = ">=0.11.0"', 'Pyphen = ">=0.9.1"', 'tinycss2 = ">=1.4.0"',
                                   'tinyhtml5 = ">=2.0.0b1"'],
                    "sqlalchemy": ['greenlet = {version = "!=0.4.17", markers = "python_version < \\"3.14\\""}',
                                   'typing-extensions = ">=4.6.0"'],
                    "cffi": ['pycparser = "*"']}[name]
            out += deps + [""]
    return "\n".join(out)


GO_MOD_TEXT = """module github.com/larkspur/meterly/collector

go 1.23

require (
	github.com/prometheus/client_golang v1.20.5
	github.com/segmentio/kafka-go v0.4.47
	github.com/google/uuid v1.6.0
	go.opentelemetry.io/otel v1.32.0
	go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc v1.32.0
	go.opentelemetry.io/otel/sdk v1.32.0
	golang.org/x/sync v0.9.0
	gopkg.in/yaml.v3 v3.0.1
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cenkalti/backoff/v4 v4.3.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/go-logr/logr v1.4.2 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/grpc-ecosystem/grpc-gateway/v2 v2.23.0 // indirect
	github.com/klauspost/compress v1.17.11 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/pierrec/lz4/v4 v4.1.21 // indirect
	github.com/prometheus/client_model v0.6.1 // indirect
	github.com/prometheus/common v0.60.1 // indirect
	github.com/prometheus/procfs v0.15.1 // indirect
	go.opentelemetry.io/otel/metric v1.32.0 // indirect
	go.opentelemetry.io/otel/trace v1.32.0 // indirect
	go.opentelemetry.io/proto/otlp v1.3.1 // indirect
	golang.org/x/net v0.31.0 // indirect
	golang.org/x/sys v0.27.0 // indirect
	golang.org/x/text v0.20.0 // indirect
	google.golang.org/genproto/googleapis/api v0.0.0-20241104194629-dd2ea8efbc28 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20241104194629-dd2ea8efbc28 // indirect
	google.golang.org/grpc v1.68.0 // indirect
	google.golang.org/protobuf v1.35.2 // indirect
)
"""

# ---------------------------------------------------------------------------
# Logs, tables and the rest.

LOGGERS = ["app.retry", "app.repository", "app.tasks", "app.api", "app.config", "app.db", "celery.app.trace",
           "uvicorn.access", "app.metrics", "app.cache"]
EVENTS = [
    ("info", "request completed"), ("info", "task succeeded"), ("warning", "attempt failed; retrying"),
    ("error", "statement timeout"), ("info", "config loaded"), ("warning", "slow query"),
    ("error", "commit failed: connection reset"), ("info", "cache refreshed"), ("warning", "deprecated config key"),
    ("info", "deploy marker"), ("error", "task timed out"), ("info", "version check ok"),
    ("warning", "pool exhausted; waiting"), ("info", "health check"), ("error", "upstream returned 503"),
    ("info", "commit ok"), ("info", "deploy config applied"), ("warning", "commit retried after timeout"),
]


def kube_logs(n, day, hour=6):
    out = []
    t = datetime.datetime(day.year, day.month, day.day, hour, rng.randint(0, 59), rng.randint(0, 59))
    pods = [f"{hexs(9)}-{hexs(5)}" for _ in range(3)]
    for _ in range(n):
        t += datetime.timedelta(seconds=rng.randint(1, 90), milliseconds=rng.randint(0, 999))
        lvl, ev = rng.choice(EVENTS)
        extra = {
            "request completed": lambda: f'"method":"{rng.choice(["GET", "POST"])}","status":{rng.choice([200, 200, 201, 404, 409])},"duration_ms":{rng.randint(3, 900)}',
            "attempt failed; retrying": lambda: f'"attempt":{rng.randint(1, 4)},"error":"TimeoutError","delay_s":{rng.uniform(0.01, 4):.2f}',
            "statement timeout": lambda: f'"query":"list_pending","timeout_ms":{rng.choice([5000, 15000])},"error":"QueryCanceledError"',
            "config loaded": lambda: f'"config_version":"{rng.randint(3, 9)}.{rng.randint(0, 20)}","deploy_env":"staging"',
            "commit failed: connection reset": lambda: f'"error":"ConnectionResetError","reference":"ref_{hexs(10)}"',
            "task timed out": lambda: f'"task":"app.tasks.run_pending","timeout_s":{rng.choice([60, 120])}',
            "version check ok": lambda: f'"version":"{IMAGE_TAG}","commit":"{hexs(7)}"',
            "deploy marker": lambda: f'"version":"{IMAGE_TAG}","revision":{rng.randint(40, 90)}',
        }.get(ev, lambda: f'"duration_ms":{rng.randint(1, 4000)}')
        out.append(N(lambda: f'{{"ts":"{t.isoformat(timespec="milliseconds")}Z","level":"{lvl}","logger":"{rng.choice(LOGGERS)}",'
                             f'"pod":"{rng.choice(pods)}","event":"{ev}",{extra()},"trace_id":"{hexs(16)}"}}'))
    return "\n".join(out)


def kube_pods(n, wide=False):
    rows = [["NAME", "READY", "STATUS", "RESTARTS", "AGE"] + (["IP", "NODE"] if wide else [])]
    for _ in range(n):
        comp = "collector" if wide else rng.choice(["ledger", "webhooks", "subscriptions", "dunning", "invoicing", "fx",
                                                     "tax", "payouts", "reconciliation", "usage", "api", "collector"])
        rows.append([f"meterly-{comp}-{hexs(9)}-{hexs(5)}", rng.choice(["1/1", "1/1", "1/1", "0/1"]),
                     rng.choice(["Running"] * 9 + ["CrashLoopBackOff", "Pending"]), str(rng.choice([0, 0, 0, 1, 2, 7])),
                     f"{rng.randint(1, 59)}{rng.choice(['m', 'h', 'h', 'd'])}"]
                    + ([f"10.{rng.randint(20, 60)}.{rng.randint(0, 255)}.{rng.randint(2, 254)}",
                        f"gke-prod-{rng.choice(['a', 'b', 'c'])}-pool-{hexs(8)}-{hexs(4)}"] if wide else []))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("   ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


def psql(headers, rows, numeric=()):
    cols = list(zip(*([headers] + rows)))
    widths = [max(len(str(x)) for x in c) for c in cols]
    out = [" " + " | ".join(h.center(w) for h, w in zip(headers, widths)).rstrip()]
    out.append("+".join("-" * (w + 2) for w in widths))
    for r in rows:
        cells = [str(x).rjust(w) if i in numeric else str(x).ljust(w) for i, (x, w) in enumerate(zip(r, widths))]
        out.append(" " + " | ".join(cells).rstrip())
    out.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(out)


def psql_rows(n, kind):
    rows = []
    for _ in range(n):
        if kind == "dupes":
            ts = f"2026-11-{rng.randint(17, 23)} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"
            rows.append([f"ref_{hexs(10)}", rng.randint(2, 3), f"{rng.randint(10, 9000)}.{rng.randint(0, 99):02d}",
                         rng.choice(["EUR", "EUR", "GBP", "USD"]), ts, rng.choice(["TimeoutError", "ConnectionResetError"])])
        elif kind == "tenants":
            a = f"2026-10-{rng.randint(20, 31)} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}"
            rows.append([f"{hexs(8)}-{hexs(4)}-{hexs(4)}-{hexs(4)}-{hexs(12)}", rng.randint(1, 60), a,
                         f"2026-11-{rng.randint(1, 23):02d} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}"])
        elif kind == "unmatched":
            rows.append([f"stl_{hexs(8)}", f"2026-11-{rng.randint(10, 23)}", f"{rng.randint(10, 90000)}.{rng.randint(0, 99):02d}",
                         rng.choice(["EUR", "GBP", "SEK"]), rng.choice(["split settlement", "fee netted", "late value date", "no candidate"])])
    if kind == "tenants":
        return psql(["tenant_id", "plan_changes", "min", "max"], rows, numeric=(1,))
    if kind == "dupes":
        return psql(["reference", "copies", "amount", "currency", "first_posted_at", "first_error"], rows, numeric=(1, 2))
    return psql(["line_id", "value_date", "amount", "currency", "reason"], rows, numeric=(2,))


GREP_SNIPPETS = [
    "timeout_s = timeout_s if timeout_s is not None else settings.http_timeout_s",
    "except TimeoutError as exc:", "raise ConfigError(f\"missing config key {key}\")",
    "log.warning(\"attempt %d/%d failed\", attempt + 1, attempts)",
    "await session.execute(text(f\"SET LOCAL statement_timeout = {STATEMENT_TIMEOUT_MS}\"))",
    "histogram(\"operation_seconds\").labels(outcome=outcome, config_version=CONFIG_VERSION)",
    "return amount.quantize(Decimal(\"0.01\"), rounding=ROUND_HALF_EVEN)",
    "if settings.deploy_env == \"prod\" and settings.dry_run_default:",
    "version = importlib.metadata.version(\"meterly\")",
    "raise RetryableError(f\"upstream error {resp.status_code}\")",
]


def grep_output(n, pattern_snips=None):
    comps = list(DOMAIN)
    files = ["retry.py", "repository.py", "tasks.py", "api.py", "config.py", "money.py", "db.py", "metrics.py"]
    out = []
    for _ in range(n):
        out.append(N(lambda: f"services/{rng.choice(comps)}/app/{rng.choice(files)}:{rng.randint(8, 400)}:    "
                             f"{rng.choice(pattern_snips or GREP_SNIPPETS)}"))
    out.sort()
    return "\n".join(out)


def ci_log(n, failing_step="test"):
    """gh run view --log-failed: checkout, a cold cache, the install, then tests until the timeout."""
    t = datetime.datetime(2026, 11, 24, 9, rng.randint(0, 30), 0)
    job = "integration (ledger)"

    def at(lo=0, hi=3):
        nonlocal t
        t += datetime.timedelta(seconds=rng.randint(lo, hi), microseconds=rng.randint(0, 999999))
        return f"{job}\tUNKNOWN STEP\t{t.isoformat()}Z "
    out = [at() + "##[group]Run actions/checkout@v4", at() + f"commit {hexs(40)} checked out at depth 1",
           at() + "##[endgroup]", at() + f"##[warning]Cache not found for input keys: poetry-Linux-{hexs(64)}",
           at() + "##[group]Run poetry install --no-interaction",
           at() + f"Installing dependencies from lock file ({rng.randint(90, 160)} packages)", at() + "",
           at() + f"Package operations: {rng.randint(90, 160)} installs, 0 updates, 0 removals", at() + ""]
    pkgs = ["anyio (4.6.2.post1)", "asyncpg (0.30.0)", "celery (5.4.0)", "fastapi (0.115.5)", "httpx (0.27.2)",
            "pydantic (2.10.1)", "pydantic-settings (2.6.1)", "pytest (8.3.3)", "pytest-asyncio (0.24.0)",
            "pytest-timeout (2.3.1)", "redis (5.2.0)", "sqlalchemy (2.0.36)", "structlog (24.4.0)", "uvicorn (0.32.1)",
            "alembic (1.14.0)", "freezegun (1.5.1)", "hypothesis (6.119.4)", "orjson (3.10.12)", "tenacity (9.0.0)"]
    for pk in pkgs:
        out.append(at() + f"  - Installing {pk}")
    out += [at() + "", at() + "Installing the current project: app (0.1.0)", at() + "##[endgroup]",
            at() + "##[group]Run poetry run pytest -q --timeout=120 --junitxml=report.xml",
            at() + "============================= test session starts ==============================",
            at() + f"collected {rng.randint(180, 260)} items", at() + ""]
    files = ["test_api.py", "test_money.py", "test_posting.py", "test_repository.py", "test_retry.py",
             "test_reversal.py", "test_tasks.py", "test_config.py"]
    for k in range(n):
        f = files[k % len(files)]
        out.append(N(lambda: at(4, 12) + f"tests/{f} {'.' * rng.randint(10, 50)}{'s' if rng.random() < 0.2 else ''} "
                                    f"[{min(99, 100 * (k + 1) // n):>3}%]"))
        if rng.random() < 0.15:
            out.append(at() + "  warning: config key 'CELERY_TIMEZONE' is deprecated")
    out += [at(100, 120) + "", at() + "+++++++++++++++++++++++++++++++++++ Timeout ++++++++++++++++++++++++++++++++++++",
            at() + "~~~~~~~~~~~~~~~~~~~~~ Stack of asyncio_0 (140213361125056) ~~~~~~~~~~~~~~~~~~~~~",
            at() + '  File "/usr/lib/python3.12/asyncio/base_events.py", line 1949, in _run_once',
            at() + "    event_list = self._selector.select(timeout)",
            at() + "+++++++++++++++++++++++++++++++++++ Timeout ++++++++++++++++++++++++++++++++++++",
            at() + "E   Failed: Timeout >120.0s",
            at() + f"FAILED tests/test_tasks.py::test_task_retries_with_countdown - Failed: Timeout >120.0s",
            at() + f"1 failed, {rng.randint(150, 220)} passed, 3 skipped in {rng.randint(300, 420)}.{rng.randint(10, 99)}s",
            at() + "##[error]Process completed with exit code 1.",
            at() + "deploy gate: skipped (not a tag)"]
    return "\n".join(out)


def make_test_summary(day):
    out = ["make test (all services, -q, parallel 2)", ""]
    for c in DOMAIN:
        n = rng.randint(60, 240)
        out.append(f"== services/{c} ==")
        out.append(f"{'.' * min(n, 76)}")
        if n > 76:
            out.append(f"{'.' * min(n - 76, 76)}")
        out.append(f"{n} passed, {rng.randint(0, 4)} skipped, {rng.randint(0, 6)} warnings in {rng.randint(4, 60)}.{rng.randint(10, 99)}s")
        out.append("")
    out.append("== ingest (go test ./...) ==")
    for p in ["encoder", "batcher", "event", "config", "httpapi", "metrics", "kafka"]:
        out.append(f"ok  \t{GO_MOD}/internal/{p}\t{rng.uniform(0.1, 4):.3f}s")
    out.append("")
    out.append("all test targets passed")
    return "\n".join(out)


def changelog():
    out = ["# Changelog", "", "All notable changes to Meterly. Versions follow SemVer; the deploy workflow reads the",
           "version from the tag.", "", "## [Unreleased]", "", "### Fixed", "- Retried writes reuse the request's idempotency key (see the release PRs).",
           "- Signature checks accept the configured clock skew on both sides.", "- Mid-period plan changes round half-even.",
           "- Reminders no longer land on weekends.", "- Collector frames never exceed the broker limit.", ""]
    v = [2, 30, 4]
    d = datetime.date(2026, 11, 17)
    for _ in range(9):
        out.append(f"## [{v[0]}.{v[1]}.{v[2]}] - {d.isoformat()}")
        out.append("")
        for sec in rng.sample(["### Added", "### Changed", "### Fixed", "### Deprecated"], rng.randint(1, 3)):
            out.append(sec)
            for _ in range(rng.randint(1, 4)):
                out.append(N(lambda: f"- {rng.choice(SUBJECTS).split(': ', 1)[-1].capitalize()} (#{rng.randint(1700, 2200)})"))
            out.append("")
        if v[2] == 0:
            v[1] -= 1
            v[2] = rng.randint(2, 5)
        else:
            v[2] -= 1
        d -= datetime.timedelta(days=rng.randint(5, 16))
    return "\n".join(out)


def helm_diff(n):
    out = []
    for c in rng.sample(list(DOMAIN) + ["api"], 5):
        out.append(f"meterly, meterly-{c}, Deployment (apps) has changed:")
        out.append("  # Source: meterly/templates/deployment.yaml")
        out.append("  spec:")
        out.append("    template:")
        out.append("      spec:")
        out.append("        containers:")
        out.append(f"-         image: ghcr.io/larkspur/meterly:2.30.{rng.randint(1, 3)}")
        out.append(f"+         image: ghcr.io/larkspur/meterly:{IMAGE_TAG}-rc1")
        for _ in range(rng.randint(1, n)):
            k, v1, v2 = rng.choice([("CONFIG_VERSION", "\"5.2\"", "\"5.3\""), ("OTEL_TRACES_SAMPLER_ARG", "\"0.2\"", "\"0.1\""),
                                    ("DB_STATEMENT_TIMEOUT_MS", "\"15000\"", "\"30000\""), ("LOG_LEVEL", "debug", "info")])
            out += [f"            - name: {k}", f"-             value: {v1}", f"+             value: {v2}"]
        out.append("")
    return "\n".join(out)


def outdated(n):
    pk = ["httpx", "celery", "fastapi", "pydantic", "pydantic-settings", "uvicorn", "structlog", "sentry-sdk", "redis",
          "opentelemetry-sdk", "pytest", "pytest-asyncio", "ruff", "mypy", "freezegun", "hypothesis", "alembic",
          "tenacity", "orjson", "boto3"]
    out = []
    for p in rng.sample(pk, min(n, len(pk))):
        a = f"{rng.randint(0, 9)}.{rng.randint(0, 40)}.{rng.randint(0, 9)}"
        b = f"{a.split('.')[0]}.{int(a.split('.')[1]) + rng.randint(1, 4)}.{rng.randint(0, 9)}"
        out.append(N(lambda: f"{p:<22} {a:<10} {b:<10} {rng.choice(['Minor release', 'Bug fixes, config changes', 'Security fix', 'Deprecations; see the changelog'])}"))
    return "\n".join(out)


PR_TITLES = [
    "chore(deps): bump the python-minor group across 10 directories", "ci: cache go build between jobs",
    "deploy: PodDisruptionBudget for the scheduler", "fix: timeout on statement import for large files",
    "feat: config flag for strict Decimal parsing", "test: deflake the dead-letter test", "docs: release runbook",
    "fix: error budget alert uses the wrong window", "refactor: share the settings fixture", "chore: bump version in charts",
    "deploy: staging canary values", "fix: commit outbox rows with the entry", "feat: expose build version on /healthz",
]


def pr_list(n):
    out = []
    for _ in range(n):
        num = rng.randint(2120, 2289)
        a = rng.choice(AUTHORS)[1]
        out.append(N(lambda: f"{num}\t{rng.choice(PR_TITLES)}\t{a}/{rng.choice(['fix', 'chore', 'feat', 'ci'])}-{hexs(4)}\t"
                             f"{rng.choice(['OPEN', 'OPEN', 'DRAFT'])}\t2026-11-{rng.randint(10, 24):02d}T{rng.randint(7, 18):02d}:{rng.randint(0, 59):02d}:00Z"))
    return "\n".join(out)


def run_list(n):
    out = ["STATUS  TITLE                                         WORKFLOW  BRANCH                  EVENT         ID           ELAPSED  AGE"]
    for _ in range(n):
        out.append(N(lambda: f"{rng.choice(['✓', '✓', '✓', 'X', '*']):<7} {rng.choice(PR_TITLES)[:44]:<45} "
                             f"{rng.choice(['ci', 'ci', 'deploy', 'e2e']):<9} {rng.choice(AUTHORS)[1] + '/' + hexs(6):<23} "
                             f"{rng.choice(['pull_request', 'push', 'schedule']):<13} {rng.randint(11900000000, 11999999999)}  "
                             f"{rng.randint(1, 40)}m{rng.randint(0, 59)}s   about {rng.randint(1, 20)} hours ago"))
    return "\n".join(out)


def kube_top(n):
    out = ["POD                                             NAME   CPU(cores)   MEMORY(bytes)"]
    for _ in range(n):
        comp = rng.choice(["ledger", "webhooks", "invoicing", "fx", "tax", "usage", "collector", "scheduler"])
        out.append(f"meterly-{comp}-{hexs(9)}-{hexs(5)}".ljust(48) + f"app    {rng.randint(3, 1900)}m".ljust(20)
                   + f"{rng.randint(90, 2900)}Mi")
    return "\n".join(out)


def govuln_output():
    out = ["Scanning your code and 212 packages across 31 dependent modules for known vulnerabilities...", "",
           "Fetching vulnerabilities from the database...", "", "Checking the code against the vulnerabilities...", ""]
    for m in GO_MOD_TEXT.split("\n"):
        m = m.strip()
        if m and " v" in m and not m.startswith("module") and not m.startswith("go "):
            out.append(f"  checked {m.split(' //')[0]}: no known vulnerabilities in called code")
    out += ["", "No vulnerabilities found.", "",
            "Share feedback at https://go.dev/s/govulncheck-feedback."]
    return "\n".join(out)


def makefile():
    return "\n".join([
        "# Meterly developer entry points. Each Python service is its own Poetry project.",
        "SERVICES := ledger webhooks subscriptions dunning invoicing fx tax payouts reconciliation usage",
        "PYTEST_FLAGS ?= -v --no-header -p no:randomly",
        "DEPLOY_ENV ?= dev",
        "",
        ".PHONY: help test lint typecheck bench up down migrate smoke deploy-staging release-notes",
        "",
        "help:  ## list targets",
        "\t@grep -E '^[a-zA-Z_%-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = \":.*?## \"}; {printf \"%-20s %s\\n\", $$1, $$2}'",
        "",
        "test: $(addprefix test-,$(SERVICES)) test-ingest  ## every test suite",
        "",
        "test-%:  ## one service's tests, e.g. make test-ledger",
        "\tcd services/$* && poetry run pytest $(PYTEST_FLAGS)",
        "",
        "test-ingest:  ## the Go collector",
        "\tcd ingest && go test -race -count=1 ./...",
        "",
        "bench-ingest:  ## Go benchmarks, no tests",
        "\tcd ingest && go test -run '^$$' -bench . -benchmem ./...",
        "",
        "bench-%:  ## pytest-benchmark suites",
        "\tcd services/$* && poetry run pytest benchmarks/ --benchmark-only $(PYTEST_FLAGS)",
        "",
        "lint:  ## ruff, ruff format --check, gofmt, helm lint",
        "\truff check services && ruff format --check services",
        "\tcd ingest && test -z \"$$(gofmt -l .)\"",
        "\thelm lint deploy/helm/* --values deploy/helm/values-ci.yaml",
        "",
        "typecheck:",
        "\tfor s in $(SERVICES); do (cd services/$$s && poetry run mypy app) || exit 1; done",
        "",
        "up:  ## postgres, redis and the otel collector for local runs",
        "\tdocker compose -f docker/compose.yaml up -d --wait",
        "",
        "down:",
        "\tdocker compose -f docker/compose.yaml down -v",
        "",
        "migrate:  ## alembic upgrade head in every service",
        "\tfor s in $(SERVICES); do (cd services/$$s && poetry run alembic upgrade head) || exit 1; done",
        "",
        "smoke:  ## smoke tests against DEPLOY_ENV (staging needs a kube context)",
        "\tpoetry -C tests/smoke run pytest $(PYTEST_FLAGS) --env $(DEPLOY_ENV)",
        "",
        "deploy-staging:  ## only from CI; locally this prints the helm diff",
        "\thelm diff upgrade meterly deploy/helm -f deploy/helm/values-staging.yaml --set image.tag=$(VERSION)",
        "",
        "release-notes:  ## changelog section for the next tag",
        "\tgit log --no-merges --format='- %s (%h)' $$(git describe --tags --abbrev=0)..HEAD",
        "",
        "clean:",
        "\tfind . -name __pycache__ -prune -exec rm -rf {} + ; rm -rf .pytest_cache .mypy_cache .ruff_cache",
    ])


def tree_output():
    out = ["."]
    top = [("services", list(DOMAIN)), ("ingest", ["cmd", "internal", "testdata"]),
           ("deploy", ["helm", "k8s"]), ("docker", []), (".github", ["workflows"])]
    for t, subs in top:
        out.append(f"├── {t}")
        for i, s in enumerate(subs):
            last = i == len(subs) - 1
            out.append(f"│   {'└──' if last else '├──'} {s}")
            kids = {"services": ["app", "benchmarks", "migrations", "tests"], "ingest": {"cmd": ["collector"],
                    "internal": ["batcher", "config", "encoder", "event", "httpapi", "kafka", "metrics"], "testdata": []},
                    "deploy": {"helm": ["api", "webhooks", "worker", "scheduler", "templates"],
                               "k8s": ["dunning", "payouts", "reconciliation", "usage", "collector"]},
                    ".github": {"workflows": []}}
            k = kids.get(t, [])
            k = k.get(s, []) if isinstance(k, dict) else k
            for j, g in enumerate(k):
                out.append(f"│   {'    ' if last else '│   '}{'└──' if j == len(k) - 1 else '├──'} {g}")
    out.append("")
    out.append(f"{len(out) - 2} directories")
    return "\n".join(out)


def lint_output():
    out = ["$ ruff check services", "All checks passed!", "$ ruff format --check services",
           f"{rng.randint(300, 420)} files already formatted", "$ mypy (per service)"]
    for c in DOMAIN:
        out.append(f"services/{c}: Success: no issues found in {rng.randint(20, 70)} source files")
    out += ["$ gofmt -l ingest", "(no output)", "$ helm lint deploy/helm/*"]
    for ch in ["api", "webhooks", "worker", "scheduler"]:
        out += [f"==> Linting deploy/helm/{ch}", "[INFO] Chart.yaml: icon is recommended", "",
                "1 chart(s) linted, 0 chart(s) failed"]
    out += ["$ kubeconform -strict deploy/k8s", f"Summary: {rng.randint(30, 60)} resources found in {rng.randint(10, 20)} files - Valid: all, Invalid: 0, Errors: 0, Skipped: 0"]
    return "\n".join(out)


def audit_output(n):
    out = ["Found 3 known vulnerabilities in 2 packages",
           "Name        Version ID                  Fix Versions",
           "----------- ------- ------------------- ------------"]
    for _ in range(3):
        out.append(N(lambda: f"{rng.choice(['jinja2', 'h11', 'starlette', 'urllib3']):<11} {rng.randint(0, 3)}.{rng.randint(0, 30)}.{rng.randint(0, 9):<3} "
                             f"GHSA-{hexs(4)}-{hexs(4)}-{hexs(4)} {rng.randint(0, 3)}.{rng.randint(0, 30)}.{rng.randint(0, 9)}"))
    out.append("")
    out.append("Name                Skip Reason")
    out.append("------------------- -----------------------------------------------")
    for _ in range(n):
        out.append(N(lambda: f"{rng.choice(['meterly-common', 'app', 'meterly-testing', 'local-fixtures'])}-{hexs(4):<8}    "
                             f"Dependency not found on PyPI and could not be audited: version {rng.randint(0, 3)}.{rng.randint(0, 9)}.{rng.randint(0, 9)}"))
    out.append("")
    out.append("govulncheck ./... (ingest)")
    out.append("Scanning your code and 212 packages across 31 dependent modules for known vulnerabilities...")
    out.append("No vulnerabilities found.")
    return "\n".join(out)


def smoke_output():
    checks = ["test_healthz_live", "test_healthz_ready", "test_version_header_matches_tag", "test_config_version_reported",
              "test_create_entry_roundtrip", "test_idempotent_retry_returns_same_id", "test_webhook_signature_header_format",
              "test_rate_quote_eur_usd", "test_vat_rate_lookup_de", "test_render_sample_document", "test_usage_event_accepted",
              "test_collector_accepts_batch", "test_payout_dry_run_file", "test_statement_import_dry_run",
              "test_notice_schedule_preview", "test_plan_change_preview", "test_timeout_budget_under_2s",
              "test_error_responses_are_problem_json", "test_deploy_marker_present", "test_commit_sha_in_build_info"]
    out = ["============================= test session starts ==============================",
           f"collecting ... collected {len(checks) * 2} items", ""]
    k = 0
    for env in ("eu-1", "eu-2"):
        for c in checks:
            k += 1
            out.append(f"tests/smoke/test_staging.py::{c}[{env}] PASSED".ljust(73) + _pct(k, len(checks) * 2))
    out.append(f"============================= {k} passed in {rng.randint(20, 60)}.{rng.randint(10, 99)}s ==============================")
    return "\n".join(out)


# ---------------------------------------------------------------------------
# Phase 2: the conversation.

items = []
facts = []
turn_no = 0
call_no = 0
topic = ""
fact_turns = {}  # label -> turn
fact_ids = {}    # label -> id
FILES = {}       # path -> lines, so that a file reads the same every time


def src(path):
    if path not in FILES:
        FILES[path] = py_file(path) if path in PY_FILES else GO_FILES[path].rstrip("\n").split("\n")
    return FILES[path]


def new_turn(t):
    global turn_no, topic
    turn_no += 1
    topic = t


def record(content, source):
    """Records every planted value `content` holds as a fact of this turn."""
    table = P if source == "tool" else M
    for label, text in table.items():
        if label not in fact_turns and text in content:
            fid = f"p{len(facts) + 1:03d}"
            facts.append({"id": fid, "turn": turn_no, "topic": topic, "source": source, "text": text})
            fact_turns[label] = turn_no
            fact_ids[label] = fid
            schedule(label)


def U(text):
    items.append({"turn": turn_no, "role": "user", "kind": "message", "content": text})
    record(text, "message")


FILLER = [
    "The change is small, so I would keep it in its own commit; a revert stays trivial if staging disagrees.",
    "The tests that touch the database use the transactional fixture, so they roll back and can run in any order.",
    "I would not trust a single green run on the retry paths; the timing-dependent tests only fail one run in a few.",
    "Nothing here needs a migration, which keeps the deploy a plain rollout.",
    "The settings object is read once at import, so a config change needs a restart rather than a reload.",
    "The CI integration job runs against a real Postgres, so it will catch what the unit tests mock away.",
    "It is worth adding the regression test before the fix, so the PR shows it failing first.",
    "The metrics already carry the config version label, so a dashboard can split before and after the rollout.",
    "Most of these modules share the same retry helper pattern, so a fix in one is worth a look in the others.",
    "I would keep the PR focused and leave the unrelated lint warnings for a separate cleanup.",
    "The staging data is a week-old snapshot of prod, which is good enough for reproducing this kind of bug.",
    "Errors from the task wrapper end up in Sentry with the reference attached, which makes them easy to correlate.",
    "The Helm values only override what differs from the chart defaults, so what is not there comes from values.yaml.",
    "None of this changes the public API, so the client SDKs are unaffected.",
    "A quick look at the git history before changing behaviour usually saves a round of review comments.",
    "Timeouts in this code base are in seconds unless the name says otherwise; the millisecond ones carry _MS.",
    "The freeze leaves enough time for this if the reviews come back today.",
    "I would rather spend ten minutes on a test than explain a regression in the postmortem.",
]

NEXT = [
    "add the regression test to the PR", "rerun the full suite before pushing", "ask for a review in the channel",
    "check the staging dashboards after the deploy", "note the change in the changelog",
    "link the ticket in the PR description", "watch the retry alert for a day", "update the runbook entry",
]


def A(body, pad=True):
    parts = []
    pre = rng.randint(1, 2) if pad and rng.random() < 0.5 else 0
    post = rng.randint(1, 2) if pad else 0
    drawn = rng.sample(FILLER, pre + post)
    if pre:
        parts.append(" ".join(drawn[:pre]))
    parts.append(body)
    if pad:
        parts.append(" ".join(drawn[pre:]))
        if rng.random() < 0.4:
            parts.append("Next steps:\n" + "\n".join(f"- {x}" for x in rng.sample(NEXT, rng.randint(2, 3))))
    content = "\n\n".join(parts)
    items.append({"turn": turn_no, "role": "assistant", "kind": "message", "content": content})
    record(content, "message")


def tool(name, args, output):
    global call_no
    call_no += 1
    cid = f"call_{call_no:03d}"
    items.append({"turn": turn_no, "role": "assistant", "kind": "tool_call",
                  "content": json.dumps(args), "tool_name": name, "call_id": cid})
    items.append({"turn": turn_no, "role": "tool", "kind": "tool_result",
                  "content": output, "tool_name": name, "call_id": cid})
    record(output, "tool")


def read(path, output=None, **extra):
    tool("read_file", dict({"path": path}, **extra), output if output is not None else numbered(src(path)))


def sh(cmd, output):
    tool("bash", {"cmd": cmd}, output)


def git(cmd, output):
    tool("git", {"cmd": cmd}, output)


PATCHES = {
    "services/ledger/app/posting.py": [
        ("class EntryWriter:", 0, [
            "def derive_key(request: EntryRequest) -> str:",
            "    \"\"\"A stable key for requests that arrive without one.\"\"\"",
            "    raw = f\"{request.tenant_id}:{request.reference}:{request.amount}:{request.currency}\"",
            "    return hashlib.sha256(raw.encode()).hexdigest()",
            "", ""]),
        ("return await with_retries(", 3, [
            "        # One key for every attempt: a retry after a lost commit ack must find the first row.",
            "        keyed = request.with_key(request.idempotency_key or derive_key(request))",
            "        return await with_retries(lambda: self._post_once(keyed))"]),
    ],
    "services/webhooks/app/dispatcher.py": [
        ("def compute_backoff(", 0, [
            "def delivery_delay_s(attempt: int) -> int:",
            "    \"\"\"Delay before redelivery `attempt`: doubling from the base, clamped at the cap.\"\"\"",
            "    return min(settings.delivery_backoff_cap_s, settings.delivery_backoff_base_s * 2**attempt)",
            "", ""]),
        ("await repo.mark(row[\"id\"], \"in_flight\")", 1, [
            "            # Sign now, not at enqueue: a stored timestamp ages with every retry.",
            "            headers = {\"Meterly-Signature\": sign(row[\"payload\"], settings.signing_secret)}",
            "            await repo.mark(row[\"id\"], \"in_flight\")",
            "            await send(row, headers=headers)"]),
    ],
    "services/webhooks/app/signing.py": [
        ("ts = int(time.time()) if timestamp is None else timestamp", 1, [
            "    # Called by the dispatcher right before each send; never stored with the delivery.",
            "    ts = int(time.time()) if timestamp is None else timestamp"]),
    ],
    "services/subscriptions/app/plans.py": [
        ("router = APIRouter(", 0, [
            "def charge_for_change(old_price: Decimal, new_price: Decimal, start: date, end: date, change: date) -> Decimal:",
            "    \"\"\"Prices reach prorate() as Decimals; minor units only for the resulting charge.\"\"\"",
            "    return prorate(old_price, new_price, start, end, change)",
            "", ""]),
    ],
    "services/subscriptions/app/proration.py": [
        ("delta = (new_price - old_price) * remaining / total_days", 2, [
            "    delta = (new_price - old_price) * remaining / total_days",
            "    # Round exactly once, half-even, on the final amount; callers pass unrounded prices.",
            "    return delta.quantize(Decimal(\"0.01\"), rounding=ROUND_HALF_EVEN)"]),
    ],
    "services/dunning/app/schedule.py": [
        ("if nxt.weekday() >= 5:", 2, [
            "        # Forward to the next business day, never back to the Friday before.",
            "        while not calendar.is_business_day(nxt):",
            "            nxt += timedelta(days=1)"]),
    ],
    "ingest/internal/encoder/frame.go": [
        ("if w.buf.Len()+len(payload) > MaxFrameBytes {", 1, [
            "\t// need includes the 4-byte length prefix of this event.",
            "\tif w.buf.Len()+need > MaxFrameBytes {"]),
    ],
    "services/fx/app/provider.py": [
        ("return await self._cache.get_or_load(f\"{base}/{quote}\"", 1, [
            "        key = f\"{base}/{quote}\"",
            "        rate, publication = await self._cache.get_or_load(key, lambda: self._fetch(base, quote))",
            "        if self._latest_publication and publication != self._latest_publication:",
            "            self._cache.invalidate(key)",
            "            rate, publication = await self._cache.get_or_load(key, lambda: self._fetch(base, quote))",
            "        return rate, publication"]),
    ],
    "services/reconciliation/app/matcher.py": [
        ("def match(lines", 0, [
            "def match_groups(lines: Sequence[dict[str, Any]], open_items: Sequence[dict[str, Any]]) -> list:",
            "    \"\"\"Second pass: lines sharing a reference that together pay one open item exactly.\"\"\"",
            "    by_ref: dict[str, list[dict[str, Any]]] = {}",
            "    for line in lines:",
            "        by_ref.setdefault(line[\"reference\"], []).append(line)",
            "    pairs = []",
            "    for item in open_items:",
            "        group = by_ref.get(item[\"reference\"], [])",
            "        if group and sum((g[\"amount\"] for g in group), Decimal(\"0\")) == item[\"amount\"]:",
            "            pairs += [(g, item) for g in group]",
            "    return pairs",
            "", ""]),
        ("return matched, unmatched", 1, [
            "    grouped = match_groups(unmatched, [i for i in open_items if i[\"id\"] not in taken])",
            "    done = {id(g) for g, _ in grouped}",
            "    return matched + grouped, [u for u in unmatched if id(u) not in done]"]),
    ],
    "services/payouts/app/batching.py": [
        ("group = list(group)", 1, [
            "        group = list(group)",
            "        if len(group) > limit:",
            "            # one beneficiary alone over the limit: its own limit-sized batches",
            "            if current:",
            "                yield current",
            "                current, current_total = [], Decimal(\"0\")",
            "            for i in range(0, len(group), limit):",
            "                yield group[i : i + limit]",
            "            continue"]),
    ],
    "services/usage/app/aggregation.py": [
        ("await repo.mark(row[\"id\"], \"in_flight\")", 1, [
            "            if is_late(row[\"event_ts\"], row[\"watermark\"]):",
            "                await repo.mark(row[\"id\"], \"correction\")",
            "                continue",
            "            await repo.mark(row[\"id\"], \"in_flight\")"]),
    ],
}


def make_patch(path):
    """A unified diff of PATCHES[path] against the file as read, and the edited file."""
    lines = src(path)
    edits = sorted(((next(k for k, l in enumerate(lines) if a in l), n, add) for a, n, add in PATCHES[path]),
                   key=lambda e: e[0])
    diff = [f"--- a/{path}", f"+++ b/{path}"]
    new = list(lines)
    offset = 0
    for i, nrm, add in edits:
        a, b = max(0, i - 3), min(len(lines), i + nrm + 3)
        diff.append(f"@@ -{a + 1},{b - a} +{a + 1 + offset},{b - a - nrm + len(add)} @@")
        diff += [" " + l for l in lines[a:i]] + ["-" + l for l in lines[i:i + nrm]]
        diff += ["+" + l for l in add] + [" " + l for l in lines[i + nrm:b]]
        new[i + offset:i + offset + nrm] = add
        offset += len(add) - nrm
    first = edits[0][0]
    return "\n".join(diff), new, first


def patch(path):
    diff, new, first = make_patch(path)
    start = max(0, first - 14)
    for k in range(start, first + 1):
        if not clean(new[k]):
            start = k + 1
    region = new[start:start + 44]
    out = [f"The file {path} has been edited ({diff.count(chr(10) + '@@')} hunk(s), "
           f"+{sum(1 for l in diff.split(chr(10)) if l.startswith('+') and not l.startswith('+++'))} "
           f"-{sum(1 for l in diff.split(chr(10)) if l.startswith('-') and not l.startswith('---'))}). "
           f"Here is the edited region with line numbers:", numbered(region, start + 1), ""]
    if path.endswith(".go"):
        out += ["gofmt -l ingest/internal/encoder: (no output)", "go vet ./internal/encoder/: ok"]
    else:
        out.append("pre-commit run --files " + path)
        for h in PRECOMMIT:
            status = "Passed" if not h.endswith("(local)") or "money" in h else "(no files to check)Skipped"
            out.append(f"{h}".ljust(72, ".") + status)
        out += ["", f"mypy: Success: no issues found in {rng.randint(30, 90)} source files"]
    tool("apply_patch", {"path": path, "patch": diff}, "\n".join(out))


def test_cmd(service):
    return f"cd services/{service} && poetry run pytest -v --no-header -p no:randomly"


# ---------------------------------------------------------------------------
# Recall questions: each asks about one planted tool value in the
# developer's own words, `delay` turns after it was planted (pushed later if
# another question is due). The tuning and held-out sets ask about
# different facts; `what` is how the assistant's non-answer refers to it.

QUESTIONS = [
    # tuning
    ("tune", ["L1"], 48, "Going back to the ledger retry thing from this morning: what's the max backoff it caps at, "
                         "in ms? Teodor wants to line the alert threshold up with it.",
     "the ledger's retry module"),
    ("tune", ["L3"], 55, "Which commit added the idempotency-key lookup to the ledger's posting code? I want to link "
                         "it in the postmortem.",
     "the blame of the ledger's posting code"),
    ("tune", ["K2"], 50, "How far can the celery workers scale in prod again? The max replicas from the worker "
                         "chart's values.",
     "the worker chart's prod values"),
    ("tune", ["W3"], 46, "When the webhook dispatcher's tests went red earlier, what did the retry-schedule "
                         "assertion compare? Both lists, for the PR description.",
     "the first webhooks test run"),
    ("tune", ["S1"], 52, "What were the two Decimals in the failing subs proration test?",
     "the first subscriptions test run"),
    ("tune", ["D1"], 44, "Remind me how many days of grace dunning gives before the first notice. It was a constant "
                         "at the top of the scheduling module.",
     "the dunning schedule module"),
    ("tune", ["G2"], 47, "What did the ingest batcher's parallel-append benchmark come out at, in ns per op? The "
                         "8-CPU line.",
     "the batcher benchmark run"),
    ("tune", ["F1"], 42, "How long are FX rates cached for? The rate cache TTL in the fx provider, in seconds.",
     "the fx provider module"),
    ("tune", ["T2"], 49, "What HTTP timeout does the tax svc's env example set?",
     "the tax service's .env.example"),
    ("tune", ["P2"], 43, "When does the payouts cron fire? The schedule from its k8s manifest.",
     "the payouts cronjob manifest"),
    ("tune", ["R2"], 41, "What match window, in hours, does the recon matcher allow?",
     "the reconciliation matcher module"),
    # held-out
    ("held", ["L2"], 58, "What did the ledger's failing test assert before the double-posting fix? The idempotent "
                         "repost one.",
     "the first ledger test run"),
    ("held", ["W1"], 51, "How many seconds of clock skew does the webhook signing code tolerate?",
     "the webhooks signing module"),
    ("held", ["W2"], 60, "How many replicas do we run for webhooks in prod, per the chart values?",
     "the webhooks chart's prod values"),
    ("held", ["S2"], 45, "What's the hash of the last commit that touched subscription proration?",
     "the git log of the proration file"),
    ("held", ["D2"], 53, "Which two dates did the failing dunning notice test compare?",
     "the first dunning test run"),
    ("held", ["G1"], 44, "What byte counts did the ingest encoder's failing test report?",
     "the first encoder test run"),
    ("held", ["G3"], 48, "Which golang base image does the ingest Dockerfile build from?",
     "the collector's Dockerfile"),
    ("held", ["T1"], 46, "What's the reverse-charge minimum in the tax service's thresholds, in cents?",
     "the tax thresholds module"),
    ("held", ["P1"], 50, "What's the max number of items per payout batch in the batching code?",
     "the payouts batching module"),
    ("held", ["I1"], 41, "How big is the invoice renderer's pool? The PDF render pool size.",
     "the invoicing render module"),
    ("held", ["U1"], 40, "How long a grace does the usage aggregator give late events, in secs?",
     "the usage aggregation module"),
]
OFF_TOPIC = [
    ("tune", 96, "Totally unrelated, but do you have a trick for getting a cast-iron pan properly non-stick again "
                 "after someone put it in the dishwasher?",
     "Scrub off the rust with steel wool and a little soap, dry it completely on the stove, then wipe on a very "
     "thin layer of a high-smoke-point oil and wipe most of it off again. Bake it upside down at about 230 C for "
     "an hour and let it cool in the oven. Three or four rounds of that get the surface back; after that, cooking "
     "something fatty a few times does the rest."),
    ("held", 113, "Off topic: my daughter wants to learn to juggle. Three balls straight away, or start with one?",
     "Start with one ball, thrown in an arc from hand to hand at about eye height, until the throws land without "
     "her looking at the hands. Then two: throw the second when the first peaks. Three comes quickly after that, "
     "usually within a week of short sessions. Bean bags are easier than balls because they do not roll away."),
]

probes = {"tune": [], "held": []}
pending = []  # [due, order, spec]
last_was_question = False


def schedule(label):
    for order, (which, labels, delay, text, what) in enumerate(QUESTIONS):
        if label in labels and all(l in fact_turns for l in labels):
            due = max(fact_turns[l] for l in labels) + delay
            pending.append([due, order, (which, labels, text, what)])


for order, (which, at, text, answer) in enumerate(OFF_TOPIC):
    pending.append([at, 100 + order, (which, None, text, answer)])

ANSWERS = {
    "const": [
        "That is the module-level constant near the top of {what}, from when we opened it. I would rather you copy "
        "it from that read than from my memory; nobody has changed the file since, as far as I can see.",
        "It is set as a constant at the top of {what}; the read from earlier today has it. Nothing we merged "
        "touched that line, so the value there still holds.",
    ],
    "test": [
        "Both sides of that assertion are in the short test summary of {what}, at the bottom of the output. I would "
        "paste the line as printed into the PR rather than retype it.",
        "The failure line at the end of {what} has the comparison exactly as pytest printed it; the traceback "
        "above it shows where it came from.",
    ],
    "gotest": [
        "The test's own log line in {what} has both numbers, right above the FAIL line; I would quote that line "
        "verbatim in the PR.",
    ],
    "commit": [
        "The hash is on the line in {what} that we looked at; I would link the commit from there rather than "
        "retype it, since short hashes are easy to get wrong.",
    ],
    "config": [
        "It is in {what} as we read it today. The deploy workflow renders that file as is, so what we saw is what "
        "runs, unless someone changed it after we looked.",
        "That comes from {what}; the value is in the read from earlier. If it matters for a decision, a quick "
        "re-read before quoting it would not hurt.",
    ],
    "bench": [
        "It is in {what}, on the parallel-append line for the 8-CPU run. Benchmark numbers move a little between "
        "runs, so I would quote that run as printed and say which machine it was.",
    ],
}
KIND = {"L1": "const", "W1": "const", "D1": "const", "F1": "const", "T1": "const", "P1": "const", "R2": "const",
        "I1": "const", "U1": "const", "L2": "test", "W3": "test", "S1": "test", "D2": "test", "R1": "test",
        "F2": "test", "G1": "gotest", "L3": "commit", "S2": "commit", "I2": "commit", "K1": "config",
        "K2": "config", "W2": "config", "P2": "config", "T2": "config", "U2": "config", "K3": "config",
        "G3": "config", "G2": "bench", "I3": "config"}


def ask(spec):
    global last_was_question
    which, labels = spec[0], spec[1]
    if labels is None:
        new_turn("off-topic")
        U(spec[2])
        probes[which].append({"kind": "recall", "turn": turn_no, "facts": []})
        A(spec[3], pad=False)
        last_was_question = True
        return
    text, what = spec[2], spec[3]
    new_turn("recall")
    U(text)
    for l in labels:
        gap = turn_no - fact_turns[l]
        assert gap >= 40, (text, l, gap)
    probes[which].append({"kind": "recall", "turn": turn_no, "facts": [fact_ids[l] for l in labels]})
    A(rng.choice(ANSWERS[KIND[labels[0]]]).format(what=what))
    last_was_question = True


def maybe_ask():
    """Before a regular turn: one due question, never two in a row."""
    global last_was_question
    if last_was_question:
        last_was_question = False
        return
    due = sorted(p for p in pending if p[0] <= turn_no + 1)
    if due:
        pending.remove(due[0])
        ask(due[0][2])


def regular(t):
    global last_was_question
    maybe_ask()
    last_was_question = False
    new_turn(t)


# ---------------------------------------------------------------------------
# Failing tests (planted ones carry the test name in their summary tail).

def fx_obj(name):
    return f"<{name} object at 0x7f{hexs(10)}>"


def f_ledger():
    n = P["L2"].split("assert ")[1].split(" ==")[0]
    return failure("tests/test_posting.py", "test_repost_after_timeout_is_idempotent", P["L2"], [
        f"writer = {fx_obj('app.posting.EntryWriter')}",
        f"fake_db = {fx_obj('tests.fakes.FakeDatabase')}", "",
        "    async def test_repost_after_timeout_is_idempotent(writer, fake_db):",
        "        request = make_request(amount=Decimal(\"125.00\"), reference=\"ref-timeout-1\", idempotency_key=None)",
        "        # the first commit lands, but its acknowledgement times out",
        "        fake_db.drop_commit_ack(times=1, error=TimeoutError)",
        "        await writer.post(request)",
        ">       assert await fake_db.count_rows(reference=\"ref-timeout-1\") == 1",
        f"E       assert {n} == 1",
        f"E        +  where {n} = await <bound method FakeDatabase.count_rows of {fx_obj('tests.fakes.FakeDatabase')}>(reference='ref-timeout-1')",
        "", "tests/test_posting.py:214: AssertionError",
        "------------------------------ Captured log call -------------------------------",
        "WARNING  app.retry:retry.py:71 attempt 1/5 failed after 5.002s (TimeoutError); retrying in 0.04s",
    ])


def f_webhooks():
    got = P["W3"].split("assert ")[1].split(" == ")[0]
    want = P["W3"].split(" == ")[1]
    g, w = json.loads(got), json.loads(want)
    idx = next(i for i in range(len(g)) if g[i] != w[i])
    return failure("tests/test_dispatcher.py", "test_retry_schedule_doubles_until_cap", P["W3"], [
        f"settings_override = {fx_obj('tests.conftest.SettingsOverride')}", "",
        "    def test_retry_schedule_doubles_until_cap(settings_override):",
        f"        settings_override(delivery_backoff_cap_s={w[-1]}, delivery_backoff_base_s={w[0]})",
        "        schedule = [delivery_delay_s(attempt) for attempt in range(6)]",
        f">       assert schedule == {want}",
        f"E       assert {got} == {want}",
        "E         ",
        f"E         At index {idx} diff: {g[idx]} != {w[idx]}",
        "E         Use -v to get more diff",
        "", "tests/test_dispatcher.py:88: AssertionError",
    ])


def f_timeout_flake():
    return failure("tests/test_dead_letter.py", "test_dead_letter_after_max_attempts",
                   "TimeoutError", [
        f"queue = {fx_obj('tests.fakes.FakeQueue')}", f"dlq = {fx_obj('tests.fakes.FakeQueue')}", "",
        "    async def test_dead_letter_after_max_attempts(queue, dlq, always_503):",
        "        await queue.put(make_message(attempts=MAX_ATTEMPTS - 1))",
        "        await run_once(queue, dlq, client=always_503)",
        ">       message = await asyncio.wait_for(dlq.get(), timeout=5.0)", "",
        "tests/test_dead_letter.py:41: ",
        "_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _",
        "/usr/lib/python3.12/asyncio/tasks.py:519: in wait_for",
        "    async with timeouts.timeout(timeout):", "_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _",
        "/usr/lib/python3.12/asyncio/timeouts.py:115: in __aexit__",
        "    raise TimeoutError from exc_val", "E   TimeoutError", "",
        "tests/test_dead_letter.py:41: TimeoutError",
    ])


def f_proration():
    a = P["S1"].split("Decimal('")[1].split("'")[0]
    b = P["S1"].split("Decimal('")[2].split("'")[0]
    return failure("tests/test_proration.py", "test_upgrade_mid_period_rounds_half_even", P["S1"], [
        "    def test_upgrade_mid_period_rounds_half_even():",
        "        # 31-day period, upgrade on day 12: the finance sheet rounds once, at the end",
        "        delta = prorate(",
        f"            old_price=Decimal(\"{rng.randint(19, 49)}.00\"),",
        f"            new_price=Decimal(\"{rng.randint(59, 149)}.00\"),",
        "            period_start=date(2026, 10, 1),",
        "            period_end=date(2026, 11, 1),",
        "            change=date(2026, 10, 12),",
        "        )",
        f">       assert delta == Decimal(\"{b}\")",
        f"E       AssertionError: assert Decimal('{a}') == Decimal('{b}')",
        "", "tests/test_proration.py:57: AssertionError",
    ])


def f_dunning():
    m = re.findall(r"datetime\.date\(2026, 11, (\d+)\)", P["D2"])
    return failure("tests/test_schedule.py", "test_third_notice_skips_weekend", P["D2"], [
        f"calendar = {fx_obj('app.schedule.BusinessCalendar')}", "",
        "    def test_third_notice_skips_weekend(calendar):",
        f"        due = date(2026, 11, {int(m[1])}) - timedelta(days=14 + GRACE_PERIOD_DAYS)",
        "        dates = notice_dates(due, calendar, count=3)",
        f">       assert dates[2] == date(2026, 11, {m[1]})",
        f"E       assert datetime.date(2026, 11, {m[0]}) == datetime.date(2026, 11, {m[1]})",
        "", "tests/test_schedule.py:102: AssertionError",
    ])


def f_fx():
    m = re.findall(r"'(ecb-[0-9-]+)'", P["F2"])
    return failure("tests/test_provider.py", "test_stale_rate_is_refetched", P["F2"], [
        f"provider = {fx_obj('app.provider.RateProvider')}", f"feed = {fx_obj('tests.fakes.FakeFeed')}",
        f"frozen_clock = {fx_obj('tests.fakes.FrozenClock')}", "",
        "    async def test_stale_rate_is_refetched(provider, feed, frozen_clock):",
        "        await provider.rate(\"EUR\", \"USD\")",
        "        feed.publish(\"EUR\", \"USD\", Decimal(\"1.0712\"))",
        "        frozen_clock.advance(hours=25)",
        "        _, publication = await provider.rate(\"EUR\", \"USD\")",
        f">       assert publication == \"{m[1]}\"",
        f"E       AssertionError: assert '{m[0]}' == '{m[1]}'",
        "E         ", f"E         - {m[1]}", f"E         + {m[0]}",
        "", "tests/test_provider.py:77: AssertionError",
    ])


def f_recon():
    n = P["R1"].split("assert ")[1].split(" ==")[0]
    return failure("tests/test_matcher.py", "test_matches_split_settlements", P["R1"], [
        f"statement = {fx_obj('tests.factories.Statement')}", "",
        "    def test_matches_split_settlements(statement):",
        "        lines = statement.lines(split_into=3)",
        "        open_items = [make_open_item(amount=Decimal(\"300.00\"), reference=\"INV-1001\")]",
        "        matched, unmatched = match(lines, open_items)",
        ">       assert len(unmatched) == 0",
        f"E       assert {n} == 0",
        f"E        +  where {n} = len([{{'amount': Decimal('100.00'), 'currency': 'EUR', 'reference': 'INV-1001', ...}}, ...])",
        "", "tests/test_matcher.py:64: AssertionError",
    ])


def run_tests(service, failures=(), n=None):
    return fit(lambda k: pytest_run(service, k, failures), n or rng.randint(50, 75))


# ---------------------------------------------------------------------------
# The conversation.

TODAY = datetime.date(2026, 11, 24)

new_turn("kickoff")
U(f"Morning! I'm {M['name']}, backend on the billing team. Big day: {M['customer']} got charged twice for "
  f"the same usage last week ({M['ticket1']}), and there's a handful of smaller fixes I want in before the "
  f"release. Give me a quick lay of the land first: what's landed on main recently?")
git("git log --date=short --format='%h %ad %an  %s' -n 80", fit(lambda n: git_log_oneline(n, TODAY), 80))
sh("gh pr list --state open --limit 40", fit(lambda n: pr_list(n), 30))
A("Main has been busy but not dramatic: retry and timeout fixes, dependency bumps, a few tweaks to the charts "
  "and CI splitting unit from integration tests. Nothing in the last couple of weeks changes money arithmetic "
  "directly, which is a useful hint for a double charge: it is more likely in how writes are retried than in "
  "how amounts are computed.")

new_turn("kickoff")
U(f"Ground rules, because the last release went badly: {RULES[0][1]}. That's standing, for everything we "
  f"touch today. We're shipping {M['release']}; the {M['freeze']}, so anything not merged by then waits. "
  f"How do I run one service's tests locally again?")
read("Makefile", makefile())
A("Understood, no direct pushes: everything goes through a PR and waits for green CI. For one service it is "
  "`make test-<service>`, which runs pytest verbosely inside that service's directory with its own Poetry "
  "environment; the Go collector has its own target, and the benchmark targets are separate so they never "
  "slow the normal suite down.")

new_turn("kickoff")
U(f"And a second rule from finance, also permanent: {RULES[1][1]}. They found a float in a test fixture last "
  f"quarter and it hid a rounding bug for weeks. FYI, {M['oncall']}, so ping him before anything touches "
  f"prod. Show me the repo layout so we both know where things live.")
sh("tree -L 3 -d services ingest deploy docker .github", tree_output())
A("Noted, and I will hold every test we write or touch to it: Decimal in, Decimal compared. The layout is one "
  "Poetry project per service under services/, each with an app package, tests, benchmarks and migrations; "
  "the Go collector under ingest/ with its internal packages; Helm charts for the long-running deployments and "
  "plain manifests for the cron jobs under deploy/.")

new_turn("kickoff")
U("How is CI wired? I want to know which jobs gate a merge before I open anything.")
read(".github/workflows/ci.yml", workflow("ci", ["lint", "unit", "integration", "go", "build"]))
A("Five jobs gate a merge: lint, the unit matrix over every service, an integration job against real Postgres "
  "and Redis service containers, the Go tests with the race detector, and an image build. Each job has its own "
  "timeout, and the test reports are uploaded even when a job fails, which helps when the integration job "
  "flakes.")

# --- ledger -----------------------------------------------------------------

regular("ledger")
U("OK, the double charge. Support traced the duplicates to the ledger: two postings with the same reference, "
  "seconds apart, both right after a timeout. Let's start with the ledger's retry module.")
read("services/ledger/app/retry.py")
A("The retry helper is generic: `with_retries` awaits a factory until it succeeds and sleeps a full-jitter "
  "exponential backoff between attempts, capped by the constant near the top of the file. The docstring is "
  "the interesting part: the factory is called again on every attempt, so whatever it builds is built again. "
  "If a caller builds its idempotency key inside that factory, every retry gets a brand-new key.")

regular("ledger")
U("That smells right. Open the ledger's posting code.")
read("services/ledger/app/posting.py")
A("Found it, I think. `post()` hands `with_retries` a lambda that mints a fresh UUID whenever the request "
  "arrives without a key, which is every call from the usage-billing path. `_post_once` looks existing rows up "
  "by that key, so when the first attempt's commit lands but its acknowledgement times out, the retry cannot "
  "see the row and inserts a second one with the same reference.")

regular("ledger")
U("Ines pushed a regression test for this to my branch last night. Run the ledger tests and let's see it fail.")
sh(test_cmd("ledger"), run_tests("ledger", [f_ledger()]))
A("One failure, and it is exactly the scenario: the repost-after-timeout test drops the first commit "
  "acknowledgement, posts once, and counts the rows for the reference afterwards. The captured log shows the "
  "retry helper kicking in after the timeout. Everything else in the suite passes.")

regular("ledger")
U("Who added the lookup by idempotency key in the first place? Blame the write path in the ledger's posting.py.")
lines = src("services/ledger/app/posting.py")
start = next(i for i, l in enumerate(lines) if l.startswith("class EntryWriter"))
end = next(i for i, l in enumerate(lines) if "return entry_id" in l)
key_line = next(i for i, l in enumerate(lines) if "repo.find_by_key(" in l)
git(f"git blame -L {start + 1},{end + 1} services/ledger/app/posting.py",
    git_blame(lines[start:end + 1], start + 1, P["L3"], key_line - start, "Samir Haddad", "2026-08-19"))
A("The lookup line comes from a single commit from the summer; the rest of the method is older or from the "
  "retry refactor. That commit added the lookup by key but left the key generation inside the retried lambda, "
  "which is how the gap opened. Worth linking in the postmortem, without blame in the other sense.")

regular("ledger")
U("And what else changed in the ledger since October? I want to know whether the retry refactor is in there.")
git("git log --since=2026-10-01 --date=short --format='%h %ad %an  %s' -- services/ledger",
    fit(lambda n: git_log_oneline(n, TODAY, since=datetime.date(2026, 10, 1)), 35))
A("Yes: the retry refactor that moved the backoff helpers into the retry module is in the October range, along "
  "with timeout handling in the repository and a few config bumps. The refactor made the factory-per-attempt "
  "behaviour explicit in the docstring, but the posting code predates it and was never adjusted.")

regular("ledger")
U("What did the ledger do in staging this morning? Pull its logs and look for the retries.")
sh("kubectl -n meterly-staging logs deploy/meterly-ledger --since=6h --max-log-requests=6",
   fit(lambda n: kube_logs(n, TODAY), 40))
A("The pattern is there in staging too: commit failures with connection resets and timeouts, each followed by "
  "a retry a few hundred milliseconds later. The references on the failed commits are the ones we would expect "
  "to see doubled. There are also a few slow-query warnings that look unrelated.")

regular("ledger")
U(f"How many references got doubled in prod? Finance wants the list before they issue the {M['credit']} to "
  f"Halcyon.")
sh("psql \"$METERLY_PROD_REPLICA\" -c \"select reference, count(*) as copies, max(amount) as amount, currency, "
   "min(created_at) as first_posted_at, min(last_error) as first_error from journal_entries where created_at > "
   "now() - interval '14 days' group by reference, currency having count(*) > 1 order by 5\"",
   fit(lambda n: psql_rows(n, "dupes"), 40))
A("The replica shows every doubled reference of the last two weeks with the first error recorded on it; all of "
  "them start with a timeout or a connection reset, which fits the diagnosis. I would hand finance this list "
  "as a CSV rather than a screenshot, so their credit note matches row for row.")

regular("worker")
U("The postings themselves run on the celery workers. How far can they scale in prod? If we get a retry storm "
  "I want to know the ceiling.")
read("deploy/helm/worker/values-prod.yaml", helm_values("prod", {"maxReplicas": P["K2"]}))
A("The worker chart autoscales on CPU between the minimum and maximum in its autoscaling block, with a slow "
  "scale-down window so a burst does not flap. The ceiling matters less than the database pool: every replica "
  "opens its own pool, so the pool size times the maximum is the worst case the database has to absorb.")

regular("ledger")
U("Fix it: build the key once, before the retried call, and keep the lookup by key.")
patch("services/ledger/app/posting.py")
A("Done: the key is derived once in `post()` from the request (or minted once if absent) and every attempt "
  "reuses it, so a retry after a lost acknowledgement finds the first row and returns its id. The hooks pass, "
  "including the local check that rejects floats in money code.")

regular("ledger")
U("Rerun the ledger suite.")
sh(test_cmd("ledger"), run_tests("ledger"))
A("All green, including the repost-after-timeout test. The skipped one needs a live Redis and is skipped on "
  "every laptop run; CI runs it in the integration job.")

regular("ledger")
U(f"Nice. I've opened {M['pr']} for it and asked {M['reviewer']} to review, since she wrote most of the "
  f"retry code. Before we move on: does anything else call with_retries with a lambda that builds state?")
tool("grep", {"pattern": "with_retries(", "path": "services/", "flags": "-rn --include=*.py"},
     fit(lambda n: grep_output(n, ["return await with_retries(lambda: self._send_once(delivery))",
                                   "resp = await with_retries(lambda: self._client.get(url, params=params))",
                                   "await with_retries(lambda: self._flush(batch), attempts=MAX_ATTEMPTS)",
                                   "return await with_retries(factory, timeout_s=settings.http_timeout_s)",
                                   "from app.retry import with_retries",
                                   "result = await with_retries(lambda: repo.mark(row[\"id\"], \"done\"))"]), 50))
A("Most callers pass a lambda that only re-sends something built outside it, which is safe. The two that "
  "build a request inside the lambda are in the webhooks and payouts services; neither mints a key, but I "
  "would keep an eye on them in review. Nothing else has the same shape as the ledger bug.")

# --- webhooks ----------------------------------------------------------------

regular("webhooks")
U("Next fire: Halcyon's receiving side rejects about one in twenty of our webhook signatures since Friday. "
  "Open the webhooks signing module.")
read("services/webhooks/app/signing.py")
A("Signing is the usual `t=<timestamp>,v1=<hmac>` scheme. Verification rejects anything whose timestamp is "
  "further from now than the tolerance constant at the top, then tries the current and previous secrets. One "
  "in twenty failing points at time rather than secrets: if we sign when a delivery is queued and send it "
  "minutes later, the receiver sees an old timestamp.")

regular("webhooks")
U("Where do we sign, at enqueue or at send? Show me the dispatcher.")
read("services/webhooks/app/dispatcher.py")
A("The dispatcher pulls pending deliveries in pages, locks them with SKIP LOCKED and sends them with the shared "
  "retry helper. The signature header is stored on the row when the delivery is created, so a retried delivery "
  "goes out with the original timestamp. After a couple of backoffs that is easily outside the receiver's "
  "window.")

regular("webhooks")
U("Run the webhooks tests.")
sh(test_cmd("webhooks"), run_tests("webhooks", [f_webhooks(), f_timeout_flake()]))
A("Two failures. The retry-schedule test fails because the expected list in the test assumes the cap applies "
  "from the fifth attempt on, and the code doubles past it; that one is real. The dead-letter test timed out "
  "waiting on the fake queue, which is the known flake on slow laptops and passes on a rerun.")

regular("webhooks")
U("What do the staging logs say about webhook retries since this morning?")
sh("kubectl -n meterly-staging logs deploy/meterly-webhooks --since=4h --max-log-requests=6",
   fit(lambda n: kube_logs(n, TODAY, 8), 45))
A("Retries cluster around upstream 503s and timeouts, and the retried sends go out several seconds to minutes "
  "after the first attempt. That matches the theory: the signature timestamp ages with every backoff.")

regular("webhooks")
U("How many webhook dispatcher pods do we run in prod? If each one drains its own queue, the delay could be "
  "per-pod.")
read("deploy/helm/webhooks/values-prod.yaml", helm_values("prod", {"replicaCount": P["W2"]}))
A("The chart runs a fixed replica count with autoscaling on top, and every pod pulls from the same table with "
  "SKIP LOCKED, so there is no per-pod queue; the delay is the backoff, not the pod count. The readiness "
  "probe and the PDB look sane.")

regular("webhooks")
U("Show me the webhooks .env.example too; I want to reproduce the skew locally with a fake receiver.")
read("services/webhooks/.env.example", env_example())
A("For a local repro the outbound HTTP settings matter most: the timeouts decide how long a slow fake receiver "
  "can hold a delivery before the retry path kicks in. Setting the fake receiver to answer 503 a few times is "
  "enough to age the timestamp past the window.")

regular("webhooks")
U("Patch it: sign at send time, and fix the schedule so it stops doubling at the cap.")
patch("services/webhooks/app/dispatcher.py")
patch("services/webhooks/app/signing.py")
A("Done: the header is computed right before each send, from the stored payload and the current time, and "
  "the delay function clamps at the configured cap. The row no longer stores a signature at all, which also "
  "removes a secret-derived value from the database.")

regular("webhooks")
U("Rerun the webhooks suite.")
sh(test_cmd("webhooks"), run_tests("webhooks"))
A("Green, and the dead-letter test passed this time. I would still mark it with a longer timeout in a "
  "follow-up, since it will flake again on a busy runner.")

regular("webhooks")
U("What changed in the webhooks service recently? I want to know whether Friday's deploy did this.")
git("git log --since=2026-10-15 --date=short --format='%h %ad %an  %s' -- services/webhooks",
    fit(lambda n: git_log_oneline(n, TODAY, since=datetime.date(2026, 10, 15)), 30))
A("Nothing in the webhooks history since mid-October touches signing; there is a retry refactor and some "
  "config changes. Friday's deploy more likely changed the timing: the retry refactor lengthened the backoff, "
  "which pushed more retried sends outside the receivers' window.")

# --- subscriptions --------------------------------------------------------------

regular("subscriptions")
U(f"{M['ticket2']}: a customer upgraded mid-cycle and was charged a cent more than finance's spreadsheet. Run "
  f"the subscriptions tests; I think there's a failing proration case already.")
sh(test_cmd("subscriptions"), run_tests("subscriptions", [f_proration()]))
A("One failure, the half-even proration case: the function's result and the spreadsheet's differ by exactly one "
  "cent, in the direction that suggests rounding twice. The rest of the suite passes.")

regular("subscriptions")
U("Open the subscriptions proration module.")
read("services/subscriptions/app/proration.py")
A("`prorate` itself quantizes once, half-even, which is right. The extra rounding happens before it: the "
  "plan-change path converts both prices to minor units and back before calling it, so the per-day price is "
  "already rounded when the remaining days are multiplied in.")

regular("subscriptions")
U("When was proration.py last changed, and by whom?")
git("git log --date=short --format='%h %ad %an  %s' -n 25 -- services/subscriptions/app/proration.py",
    git_log_oneline(25, TODAY - datetime.timedelta(days=6), P["S2"],
                    "refactor: share minor-unit helpers with plans (#2214)", code_only=True))
A("The newest commit on that file is a refactor that moved the minor-unit helpers into a shared place, and "
  "that is when the double rounding crept in: the plan-change path started calling the helpers on the way "
  "in. The older commits are the original rounding work.")

regular("subscriptions")
U("Show me the rounding commit from before that refactor, I want to see what it intended.")
git(f"git show -U8 {hexs(7)} -- services/subscriptions/app/proration.py",
    git_show(TODAY - datetime.timedelta(days=40), "services/subscriptions/app/proration.py",
             src("services/subscriptions/app/proration.py")))
A("The earlier commit's message says it plainly: compare the Decimal result, round once at the end. The later "
  "refactor undid that for the plan-change path without touching the test, which is why the test only "
  "started failing when Ines added the mid-period case.")

regular("subscriptions")
U("Open the subscriptions plans module, where the plan-change path starts.")
read("services/subscriptions/app/plans.py")
A("The plan-change request is validated and then handed to the repository; the conversion to minor units "
  "happens in the handler right before `prorate`, using the shared helper. That is the first rounding; "
  "`prorate` then rounds again.")

regular("subscriptions")
U("Fix it so we round once, at the end, and keep everything Decimal on the way.")
patch("services/subscriptions/app/plans.py")
patch("services/subscriptions/app/proration.py")
A("The plan-change path now passes the Decimal prices straight to `prorate` and converts to minor units only "
  "for the charge itself. No floats anywhere on the path, and the test compares Decimals.")

regular("subscriptions")
U("Rerun the subs suite.")
sh(test_cmd("subscriptions"), run_tests("subscriptions"))
A("All green. The mid-period case and the older half-even cases pass together, which is the combination the "
  "refactor had broken.")

regular("subscriptions")
U("Finance asks how we fix the customers who were already billed the extra cent. Editing invoices in place "
  "makes them nervous.")
sh("psql \"$METERLY_PROD_REPLICA\" -c \"select tenant_id, count(*) as plan_changes, min(changed_at), max(changed_at) "
   "from plan_changes where changed_at > '2026-10-20' and kind = 'upgrade' group by tenant_id order by 2 desc\"",
   fit(lambda n: psql_rows(n, "tenants"), 40))
A(f"They are right to be nervous: issued invoices are legal documents. I would use a {M['backfill']}: select "
  f"the plan changes since the refactor went out, recompute the charge with the fixed path, and issue a credit "
  f"note for each difference, in a dry run first so finance can review the list before anything is sent.")

# --- dunning ---------------------------------------------------------------------

regular("dunning")
U("Dunning next. Finance says first reminders sometimes go out a day early when the due date is near a "
  "weekend. Open the dunning schedule module.")
read("services/dunning/app/schedule.py")
A("The first notice is the due date plus the grace period, pushed forward to a business day. The later "
  "notices are spaced by the interval constant, but when one lands on a weekend the code moves it back to "
  "Friday instead of forward to Monday, which is the 'early' finance sees, only on later notices.")

regular("dunning")
U("Run dunning's tests.")
sh(test_cmd("dunning"), run_tests("dunning", [f_dunning()]))
A("One failure, on the third notice: the computed date is the Friday before the weekend, the test expects the "
  "following business day. It confirms the backwards shift.")

regular("dunning")
U("And the cronjob that triggers the reminder run: when does it fire, and how long may it run?")
read("deploy/k8s/dunning/cronjob.yaml", cronjob_manifest(None, "reminder-run", "app.jobs.send_notices"))
A("It is a plain CronJob in UTC with concurrency forbidden, a bounded active deadline and a couple of retries. "
  "Since it is UTC, a customer in a later time zone can receive a notice dated 'today' that is still yesterday "
  "for them; not our bug, but worth knowing when finance compares dates.")

regular("dunning")
U("What do the dunning job's logs from last night's run look like?")
sh("kubectl -n meterly-prod logs job/reminder-run-29393280 --tail=400",
   fit(lambda n: kube_logs(n, TODAY - datetime.timedelta(days=1), 2), 40))
A("A normal run: tasks succeed, a couple of slow queries and one statement timeout that the retry absorbed. The "
  "early notices are not visible in the logs because the dates are computed correctly by the wrong rule.")

regular("dunning")
U("Is the holiday calendar loaded per country? Open calendar.py.")
read("services/dunning/app/calendar.py")
A("It caches holiday rows per country with a TTL and loads them through the repository; the schedule module "
  "only asks whether a date is a business day. The calendar is fine; the bug is only the direction of the "
  "weekend shift.")

regular("dunning")
U("Patch the weekend shift to move forward to the next business day.")
patch("services/dunning/app/schedule.py")
A("Done: a later notice that lands on a weekend or holiday now moves forward to the next business day, the "
  "same rule the first notice already followed. The interval between notices can therefore stretch by a day "
  "or two, which finance agreed to in the ticket.")

regular("dunning")
U("Rerun dunning's tests.")
sh(test_cmd("dunning"), run_tests("dunning"))
A("Green. The third-notice test passes, and the holiday tests still pass, so the forward shift respects the "
  "calendar as well.")

# --- ingest (Go) -----------------------------------------------------------------

regular("ingest")
U("Switching languages. The ingest collector's Go tests failed on CI overnight, something in the encoder. Run "
  "them.")
sh("cd ingest && go test -v -count=1 ./internal/encoder/", go_test("encoder", P["G1"]))
A("One failing test, the flush-on-size case: a frame came out a few bytes larger than the limit. Every other "
  "encoder test passes, including the round trip and the checksum tests, so the framing itself is fine; the "
  "size check is off.")

regular("ingest")
U("Show me the encoder's frame.go in the ingest service.")
read("ingest/internal/encoder/frame.go")
A("The size check in `Append` is the problem. Each event goes into the frame behind a four-byte length "
  "prefix; `need` counts that prefix and is used for the oversized-event check, but the flush check compares "
  "the buffer plus the bare payload with the limit. So the last event of a frame can push it up to four bytes "
  "over, which is what the test caught.")

regular("ingest")
U("git log for the ingest encoder directory, please.")
git("git log --date=short --format='%h %ad %an  %s' -n 30 -- ingest/internal/encoder",
    fit(lambda n: git_log_oneline(n, TODAY, go=True), 30))
A("The encoder changed two weeks ago with a 'frame version 3' change that moved the count and checksum into "
  "the header; that is when the header grew and the boundary case appeared.")

regular("ingest")
U("Fix the boundary check and rerun the encoder tests.")
patch("ingest/internal/encoder/frame.go")
sh("cd ingest && go test -v -count=1 ./internal/encoder/", go_test("encoder"))
A("Fixed and green: the check now counts the prefix consistently, and the flush-on-size test builds a frame "
  "that ends exactly at the limit. gofmt is happy too.")

regular("ingest")
U(f"Ines reworked the batcher locking last week. Run the batcher benchmarks so we have numbers before the "
  f"rollout; the target is {M['load']}.")
sh("cd ingest && go test -run '^$' -bench . -benchmem -cpu 1,4,8 ./internal/batcher/", go_bench("batcher", P["G2"]))
A("The sharded appends scale the way they should: single-threaded appends are cheap, the parallel ones cost "
  "more per operation but total throughput grows with the cores, and the flush benchmarks stay flat across "
  "shard counts. Comfortably above the per-pod target, even at the parallel cost.")

regular("ingest")
U("Read the batcher code.")
read("ingest/internal/batcher/batcher.go")
A("Appends hash the tenant to a shard and hold only that shard's lock; a full shard is swapped for a fresh "
  "slice under the lock and sent outside it, so the channel send never blocks other shards. The age-based "
  "flush walks the shards one by one. It looks right to me.")

regular("ingest")
U("Which Go toolchain does the ingest image build with? Show me its Dockerfile.")
read("docker/ingest.Dockerfile", dockerfile_go(P["G3"]))
A("A two-stage build: the Go toolchain image for building with the module and build caches mounted, then "
  "distroless static as non-root for running. The version and commit are stamped via ldflags from build args. "
  "One oddity: it runs the tests inside the image build, which slows every release build down.")

regular("ingest")
U("And the ingest go.mod, to see what we pull in.")
read("ingest/go.mod", GO_MOD_TEXT.rstrip("\n") + "\n\n// go.sum: " + str(rng.randint(80, 120)) + " lines, verified by `go mod verify` in CI")
A("A small dependency set: kafka-go for the broker, the Prometheus client, OpenTelemetry for traces and uuid. "
  "Everything is reasonably current; nothing I would bump before the release.")

regular("ingest")
U(f"Ops wants to roll the new collector out on {M['rollout']}. Anything you'd do differently? Check what's "
  f"running there now first.")
sh("kubectl -n meterly-prod get pods -l app.kubernetes.io/name=collector -o wide", fit(lambda n: kube_pods(n, wide=True), 30))
A(f"I would {M['canary']} before the full rollout: the encoder fix changes the frame boundaries, and the "
  f"consumers have only seen version-3 frames from the old build. If the consumer lag and the decode errors "
  f"stay flat in that zone, the rest can follow in one step.")

# --- fx and tax -------------------------------------------------------------------------

regular("fx")
U("Halcyon's EUR invoices show yesterday's rate on some lines. Open the fx provider.")
read("services/fx/app/provider.py")
A("Rates come from the central bank feed through a TTL cache keyed by currency pair. The cache does not know "
  "when the feed publishes, so a pair fetched just before publication keeps the old rate for the whole TTL. "
  "Lines issued in that window get yesterday's rate.")

regular("fx")
U("Run the fx tests.")
sh(test_cmd("fx"), run_tests("fx", [f_fx()]))
A("One failure that describes exactly that: after the feed publishes and the clock moves on, the provider "
  "still returns the previous publication. The test is older than the bug report; someone saw this before.")

regular("fx")
U("What do the fx logs in prod say around the publication time?")
sh("kubectl -n meterly-prod logs deploy/meterly-fx --since=26h --max-log-requests=4",
   fit(lambda n: kube_logs(n, TODAY - datetime.timedelta(days=1), 15), 40))
A("Cache refreshes happen on the TTL schedule only, and around publication time there are a few upstream 503s "
  "followed by retries; nothing forces a refresh when a new publication appears.")

regular("fx")
U("Patch the provider to invalidate a pair when the feed publishes, then rerun the fx tests.")
patch("services/fx/app/provider.py")
sh(test_cmd("fx"), run_tests("fx"))
A("The provider now compares the publication id on each fetch and invalidates the pair when it changes, and "
  "the publication webhook from the feed clears the whole cache. The stale-rate test passes, and so does the "
  "rest of the suite.")

regular("tax")
U("While we're on money: tax. Open the tax service's thresholds module; finance asked how the reverse-charge "
  "rule decides.")
read("services/tax/app/thresholds.py")
A("Reverse charge applies to a cross-border B2B supply when the buyer's VAT id is valid and the net amount is "
  "at or above the minimum constant, in minor units. Rates come from a dated table per jurisdiction. The "
  "threshold is in cents, so a Decimal net amount is converted before the comparison, correctly half-even.")

regular("tax")
U("What's in the tax service's .env.example? I need to run it locally against the VIES sandbox.")
read("services/tax/.env.example", env_example({"HTTP_TIMEOUT_SECONDS": P["T2"]}))
A("The example has everything for a local run: database and Redis URLs, Celery settings, outbound HTTP "
  "timeouts and limits, observability endpoints and feature flags. The VIES calls use the outbound HTTP "
  "settings, so the sandbox's slowness will show up as timeouts there first.")

regular("tax")
U("Run the tax tests.")
sh(test_cmd("tax"), run_tests("tax"))
A("All green. The rate-table tests cover the January changes already, which is reassuring for the release.")

regular("tax")
U("Grep for quantize( across services; I want to be sure nobody rounds twice anywhere else.")
tool("grep", {"pattern": "quantize(", "path": "services/", "flags": "-rn --include=*.py"},
     fit(lambda n: grep_output(n, ["return amount.quantize(Decimal(\"0.01\"), rounding=ROUND_HALF_EVEN)",
                                   "rounded = amount.quantize(quantum, rounding=ROUND_HALF_EVEN)",
                                   "total = sum(lines, Decimal(\"0\")).quantize(Decimal(\"0.01\"), rounding=ROUND_HALF_EVEN)",
                                   "from app.money import Money, quantize",
                                   "delta = quantize(delta, currency)  # once, at the end",
                                   "net = quantize(net, currency)"]), 50))
A("Every service quantizes once at its boundary, half-even, through the shared helper or the same expression. "
  "The only place that did it twice was the plan-change path we just fixed.")

# --- payouts and reconciliation ----------------------------------------------------------

regular("payouts")
U("Payouts. The bank rejected yesterday's file for too many items. Open payouts' batching module.")
read("services/payouts/app/batching.py")
A("Batches are built per beneficiary group, closed when the next group would exceed the item limit or the "
  "amount limit. One beneficiary with a very large group can still produce a batch above the limit, because a "
  "group is never split and the check only runs when the batch already holds something.")

regular("payouts")
U("And when does the payouts job run? Show me its k8s cronjob.")
read("deploy/k8s/payouts/cronjob.yaml", cronjob_manifest(P["P2"], "nightly-run", "app.jobs.run_batches"))
A("A UTC CronJob with concurrency forbidden, so two runs never overlap, and a bounded active deadline. It runs "
  "well before the bank's cut-off, which leaves room for a rerun if a file is rejected.")

regular("payouts")
U("What does payouts' .env.example look like? I want to run a dry-run bank file locally.")
read("services/payouts/.env.example", env_example())
A("Dry runs are the default in the example, which is what we want locally; the database block points at the "
  "local test database and the outbound HTTP settings only matter for the bank's sandbox upload.")

regular("payouts")
U("Run the payouts tests.")
sh(test_cmd("payouts"), run_tests("payouts"))
A("Green, but no test covers a single beneficiary whose group alone exceeds the item limit, which is what "
  "happened yesterday. I would add that case with the fix.")

regular("reconciliation")
U("Recon is complaining about unmatched settlements since the bank started splitting payments. Run the "
  "reconciliation tests.")
sh(test_cmd("reconciliation"), run_tests("reconciliation", [f_recon()]))
A("One failure: the split-settlement test, where one open item is paid by several statement lines. The matcher "
  "is one-to-one, so all but one of the lines stay unmatched.")

regular("reconciliation")
U("Open the reconciliation matcher.")
read("services/reconciliation/app/matcher.py")
A("`candidates` filters open items by currency, by the time window constant and by an exact-amount tolerance, "
  "and `match` takes the nearest candidate greedily, one line per item. Split payments need a second pass that "
  "groups lines by reference and matches the sum.")

regular("reconciliation")
U("git log for the reconciliation service since September, please.")
git("git log --since=2026-09-01 --date=short --format='%h %ad %an  %s' -- services/reconciliation",
    fit(lambda n: git_log_oneline(n, TODAY, since=datetime.date(2026, 9, 1)), 30))
A("Quiet history: config and timeout tweaks, a dependency bump and the statement import rework. Nothing touched "
  "the matching rules since the spring, so the split payments are new behaviour on the bank's side, not a "
  "regression on ours.")

regular("reconciliation")
U("How many statement lines are unmatched in prod right now, and why?")
sh("psql \"$METERLY_PROD_REPLICA\" -c \"select line_id, value_date, amount, currency, reason from unmatched_lines "
   "where value_date > current_date - 14 order by value_date\"", fit(lambda n: psql_rows(n, "unmatched"), 45))
A("Most of the unmatched lines are split settlements, as expected; a few are fees netted by the bank and late "
  "value dates, which the grouping pass will not fix. I would leave those for the finance team's manual queue.")

regular("reconciliation")
U("Patch the matcher with a grouping pass by reference, then rerun its tests.")
patch("services/reconciliation/app/matcher.py")
sh(test_cmd("reconciliation"), run_tests("reconciliation"))
A("The second pass groups unmatched lines by reference and matches the group when the sum equals an open item "
  "in Decimal, exactly. The split-settlement test passes, and the fee-netted cases stay unmatched as intended.")

regular("payouts")
U("Back to payouts: split an oversized beneficiary group across batches and add the test.")
patch("services/payouts/app/batching.py")
sh(test_cmd("payouts"), run_tests("payouts"))
A("A group larger than the limit is now split into limit-sized chunks, each in its own batch, and the new test "
  "builds a single beneficiary with more items than the limit. The amount limit applies per chunk as well.")

# --- invoicing and usage -----------------------------------------------------------------

regular("invoicing")
U("Invoice PDF rendering got slow at month-end. Open the invoicing render module.")
read("services/invoicing/app/render.py")
A("Rendering goes through a fixed pool of browser contexts sized by the constant at the top, with a per-render "
  "timeout that recycles a context when it fires. At month-end every tenant's documents queue for the same few "
  "contexts, so the wait is in the queue, not in the rendering.")

regular("invoicing")
U("Run the invoicing benchmarks.")
sh("cd services/invoicing && poetry run pytest benchmarks/ --benchmark-only -v --no-header", py_bench(12))
A("Single renders are fast; the thousand-line document and the ones with embedded logos dominate. Nothing "
  "regressed against the numbers in the last benchmark PR, which supports the queueing explanation.")

regular("invoicing")
U("Invoice numbering: when did numbering.py change last? Finance saw a gap in the sequence.")
git("git log --date=short --format='%h %ad %an  %s' -n 20 -- services/invoicing/app/numbering.py",
    git_log_oneline(20, TODAY - datetime.timedelta(days=9), P["I2"],
                    "fix: allocate the number inside the issuing transaction (#2198)", code_only=True))
A("The last change moved number allocation into the issuing transaction, which is the right fix for gaps "
  "caused by failed renders. A gap before that commit is expected; one after it would be new.")

regular("invoicing")
U("Which weasyprint is invoicing locked to? Show me that part of its poetry.lock.")
read("services/invoicing/poetry.lock", lock_excerpt(P["I3"]), start_line=1412, end_line=1588)
A("The lock pins weasyprint together with its rendering stack: pydyf, tinycss2, tinyhtml5, fonttools and "
  "Pillow. They move together, so a bump of one means regenerating the lock rather than editing a line.")

regular("usage")
U("Usage: late events get dropped instead of becoming corrections. Open the usage aggregation module.")
read("services/usage/app/aggregation.py")
A("Buckets are sealed once the watermark has passed them by the grace constant, and a late event is detected "
  "against the same grace. The bug is in the caller: the task drops late events instead of writing them to "
  "the corrections table this module's docstring promises.")

regular("usage")
U("And usage's .env.example; I want the pool settings for a local repro.")
read("services/usage/.env.example", env_example({"DB_POOL_MAX": P["U2"]}))
A("The pool settings are in the database block: minimum, maximum and the acquire timeout, plus the statement "
  "and lock timeouts. For a local repro the defaults are fine; the late-event path is not pool-bound.")

regular("usage")
U("When does the usage rollup job run? Its cronjob manifest.")
read("deploy/k8s/usage/cronjob.yaml", cronjob_manifest(None, "rollup-run", "app.jobs.seal_buckets"))
A("The rollup job runs on a fixed UTC schedule with concurrency forbidden; each run seals the buckets the "
  "watermark has passed. Late events arriving after a run are exactly the ones the corrections path should "
  "catch.")

regular("usage")
U("Run the usage tests.")
sh(test_cmd("usage"), run_tests("usage"))
A("Green, which is the problem: no test sends an event behind the watermark and checks the corrections table. "
  "I would add one with the fix.")

regular("usage")
U("Patch the task to write late events as corrections, with the test.")
patch("services/usage/app/aggregation.py")
sh(test_cmd("usage"), run_tests("usage"))
A("Late events now go to the corrections table with the bucket they belonged to, and the next invoice run picks "
  "them up as adjustments. The new test sends one event behind the watermark and checks it lands there.")

# --- release ---------------------------------------------------------------------------

regular("release")
U(f"Release prep. We're coordinating in {M['channel']}. Show me the changelog so I can see what's already "
  f"written up.")
read("CHANGELOG.md", fit(lambda n: changelog(), 1))
A("The Unreleased section already lists most of today's fixes in one line each; the older sections follow "
  "the usual Added/Changed/Fixed shape with PR numbers. I would add the FX cache, the batching split and the "
  "late-event corrections before the freeze.")

regular("release")
U("Run every test suite once, Python and Go.")
sh("make test PYTEST_FLAGS=-q -j2", make_test_summary(TODAY))
A("Every service and every Go package passes. The skips are the live-Redis tests again, which the integration "
  "job covers.")

regular("release")
U("CI failed on the integration job of the ledger PR. Show me the failed log.")
sh("gh run view 11982044517 --log-failed", fit(lambda n: ci_log(n), 60))
A("One test hit the per-test timeout: the task-retry test, which waits on the real Redis service container in "
  "the integration job; everything else passed. The cache was cold because the lock file changed in the same "
  "PR, so the install ran long as well. A rerun should pass; if it flakes again, that test wants a shorter "
  "countdown in its fixture.")

regular("e2e")
U("What's the timeout on the nightly e2e workflow? If integration timed out, e2e might too tonight.")
read(".github/workflows/nightly-e2e.yml", workflow("e2e (scheduled)", ["e2e", "report"], P["K3"]))
A("The scheduled workflow runs the end-to-end suite against fresh Postgres and Redis containers with its own "
  "job timeout, and a small report job after it. It does not share the integration job's cache key, so "
  "tonight's run starts cold anyway and has more headroom.")

regular("api")
U("The API pods were OOM-killed twice at month-end. Show me the API's prod values.")
read("deploy/helm/api/values-prod.yaml", helm_values("prod", {"memory": P["K1"]}))
sh("kubectl -n meterly-prod top pods --sort-by=memory --containers", fit(lambda n: kube_top(n), 40))
A("The API chart sets a memory request well below its limit, and the month-end OOMs fit a spike in PDF previews "
  "served through the API. I would raise the request closer to the limit so the scheduler places the pods on "
  "nodes with real headroom, rather than raising the limit.")

regular("api")
U("And the API's staging values, for comparison.")
read("deploy/helm/api/values-staging.yaml", helm_values("staging"))
A("Staging mirrors prod's shape with smaller numbers, as intended. The probes are the same, so a readiness "
  "problem would show in staging first.")

regular("release")
U("The scheduler chart changed too, didn't it? Show me its prod values.")
read("deploy/helm/scheduler/values-prod.yaml", helm_values("prod"))
A("The scheduler's prod values have the same shape as the other charts, and nothing in this release changes "
  "them; the diff will show only the image tag for it.")

regular("release")
U("Helm diff of the whole release against staging.")
sh("helm diff upgrade meterly deploy/helm -f deploy/helm/values-staging.yaml --set image.tag=rc1",
   fit(lambda n: helm_diff(n), 4))
A("The diff is the image tag on every deployment plus a handful of env changes: the config version bump, a "
  "lower trace sampling rate and a longer statement timeout on one service. Nothing structural.")

regular("release")
U("Read the deploy workflow; I want to know what happens on tag push.")
read(".github/workflows/deploy.yml", workflow("deploy", ["build", "deploy-staging", "deploy-prod"]))
A("A tag push builds and pushes the image, deploys to staging with an atomic Helm upgrade, and waits for a "
  "manual approval on the prod environment before doing the same there. Rollback is Helm's atomic flag plus "
  "the previous tag.")

regular("release")
U("Deps: anything outdated in the ledger?")
sh("cd services/ledger && poetry show --outdated --top-level", fit(lambda n: outdated(n), 20))
A("Mostly minor releases; nothing that fixes a bug we have. I would not bump anything before the freeze, apart "
  "from security fixes, and there are none in that list.")

regular("release")
U("Run the vulnerability scanners, pip-audit for Python and govulncheck for ingest.")
sh("cd services/ledger && poetry run pip-audit --strict", fit(lambda n: audit_output(n), 20))
sh("cd ingest && govulncheck -show verbose ./...", govuln_output())
A("Three known advisories in transitive dependencies, all with fixed versions available and none reachable "
  "from our request paths as far as I can tell; govulncheck finds nothing in the collector. I would schedule the "
  "bumps for the week after the release.")

regular("release")
U("Lint and typecheck everything before I push the last branch.")
sh("make lint typecheck", lint_output())
A("Clean: ruff, formatting, mypy for every service, gofmt, helm lint and kubeconform all pass.")

regular("release")
U("The release candidate is on staging. How do the pods look?")
sh("kubectl -n meterly-staging get pods", fit(lambda n: kube_pods(n), 50))
A("Almost everything is running with zero or one restart. One pod is in CrashLoopBackOff and another pending; "
  "both belong to services without changes in this release, so I would check them separately rather than "
  "block on them.")

regular("release")
U("Any errors in the API logs since the staging deploy?")
sh("kubectl -n meterly-staging logs deploy/meterly-api --since=1h --max-log-requests=6",
   fit(lambda n: kube_logs(n, TODAY, 13), 45))
A("A few upstream 503s with retries, a statement timeout on a listing endpoint and the deploy marker with the "
  "release candidate's version. No error that points at today's changes.")

regular("release")
U("Show me the API Dockerfile; I want to check the healthcheck timeout.")
read("docker/api.Dockerfile", dockerfile_py())
A("A three-stage build on the slim Python image with Poetry, running as a non-root user under tini. The "
  "healthcheck calls the live endpoint with a short timeout, and the version is baked into an environment "
  "variable from the build argument.")

regular("release")
U("And the migrate image, which is Go as well, right?")
read("docker/migrate.Dockerfile", dockerfile_go(N(lambda: f"FROM golang:{nz('golang')}-bookworm AS build"), "migrate"))
A("Yes, the same two-stage Go pattern as the collector, building the migration runner. It is on an older "
  "toolchain than the collector; worth aligning after the release.")

regular("release")
U("git log of main since the last tag, full messages.")
git("git log v2.30.4..HEAD --no-merges", fit(lambda n: git_log_full(n, TODAY), 20))
A("Everything since the last tag is here: today's fixes plus a few dependency and CI changes from earlier in "
  "the week. The messages are good enough to generate the release notes from.")

regular("release")
U("Smoke tests against staging, both regions.")
sh("make smoke DEPLOY_ENV=staging", smoke_output())
A("All smoke checks pass in both regions, including the idempotent-retry roundtrip and the signature header "
  "format, which are the two user-visible fixes.")

regular("release")
U("Grep the TODOs that reference MTR tickets; I want to close the ones we fixed today.")
tool("grep", {"pattern": "TODO(MTR-", "path": ".", "flags": "-rn --include=*.py --include=*.go --include=*.yaml"},
     fit(lambda n: grep_output(n, ["# TODO(MTR-3990): drop the float fallback once every caller sends strings",
                                   "# TODO(MTR-4102): move the timeout into config",
                                   "# TODO(MTR-4377): test the version header in the smoke suite",
                                   "# TODO(MTR-4410): retry the commit, not the whole request",
                                   "// TODO(MTR-4455): deploy the frame version 4 behind a flag",
                                   "# TODO(MTR-4590): remove after the error budget review"]), 35))
A("None of the TODOs reference today's tickets; the retry one is related but describes a broader refactor. "
  "I would leave them as they are.")

regular("release")
U("Draft the PR description for the ledger fix; Ilse wants the reasoning in it.")
A("Here is a draft:\n\n**Retried postings reuse the request's idempotency key**\n\nA posting whose commit "
  "landed but whose acknowledgement timed out was retried with a freshly minted key, so the lookup by key found "
  "nothing and a second row was written for the same reference. The key is now derived once, before the "
  "retried call, and every attempt reuses it.\n\n- regression test: repost after a lost commit acknowledgement\n"
  "- no schema change, no config change\n- finance is handling the affected customers with credit notes\n\n"
  "I kept the blame reference and the doubled-reference list out of the description; they belong in the "
  "postmortem.")

regular("release")
U("Write a short message for Halcyon's account manager: what happened and what we did.")
A("Draft:\n\n\"Last week a network timeout between our services and the database caused some of Halcyon's "
  "usage charges to be recorded twice. We found the cause, fixed it, and added a test so it cannot return "
  "unnoticed; the fix ships with this week's release. Finance is issuing a credit note for the duplicated "
  "amount, and the affected invoices are listed in the attachment. Separately, some webhook signatures were "
  "rejected by Halcyon's endpoint because retried deliveries carried an old timestamp; that is fixed in the "
  "same release.\"")

regular("release")
U("What's left before the freeze? Check the open release-blocker PRs.")
sh("gh pr list --label release-blocker --state open", fit(lambda n: pr_list(n), 20))
A("The ledger and webhooks PRs need their reviews and a green rerun of the integration job; the subscriptions, "
  "dunning and FX fixes are ready for review; the collector fix waits for its own rollout date; payouts, "
  "reconciliation and usage need a second pair of eyes on the new tests. The changelog needs the last three "
  "entries.")

regular("release")
U("Start the postmortem outline for the double charge.")
A("Outline:\n\n1. Summary: duplicate postings after commit timeouts, customer impact and credit notes.\n2. "
  "Timeline: the summer change that introduced lookup by key, the retry refactor, the first duplicates, the "
  "support escalation, today's fix.\n3. Root cause: the key was minted inside the retried call.\n4. Why tests "
  "missed it: no test simulated a lost acknowledgement until last night.\n5. Actions: regression test (done), "
  "review the other with_retries callers (done, none affected), an alert on duplicate references per hour, and "
  "a lint rule against minting keys inside retried lambdas.")

FILLER_TURNS = [
    ("Any review comments on the open PRs yet? Check the CI runs too.",
     "Two small ones on the ledger PR: a naming nit and a request to assert the returned id in the regression "
     "test as well. Both are quick; I would address them together in one commit."),
    ("Is the integration job green on rerun?",
     "Yes, the rerun with the warm cache passed in well under its timeout."),
    ("Anything else we should double-check before the freeze?",
     "Only that every PR has its ticket linked and a changelog line; the code side is in good shape."),
    ("Can you summarise the day in three lines for standup tomorrow?",
     "Fixed duplicate postings and stale webhook signatures; fixed rounding in proration, weekend reminders, stale "
     "FX rates, oversized payout batches, split settlements and dropped late events; the collector fix waits for "
     "its rollout. All PRs are open with green tests."),
]
fi = 0
while pending:
    if last_was_question or not any(p[0] <= turn_no + 1 for p in pending):
        q, a = FILLER_TURNS[fi % len(FILLER_TURNS)]
        new_turn("wrap-up")
        U(q)
        if fi % 2 == 0:
            sh("gh run list --limit 30", fit(lambda n: run_list(n), 30))
        fi += 1
        A(a)
        last_was_question = False
        continue
    maybe_ask()

new_turn("wrap-up")
U("Thanks, that's it for today. Anything you'd flag for tomorrow?")
A("Only the reviews and the reruns of CI; everything we changed today is on a branch with its PR and passing "
  "tests, nothing was pushed to main, and every money path we touched stays in Decimal with tests comparing "
  "Decimals.", pad=False)


# ---------------------------------------------------------------------------

def main():
    blob = "\n".join(i["content"] for i in items)
    assert set(fact_turns) == set(P) | set(M), set(P) | set(M) - set(fact_turns)
    for f in facts:
        holders = [i for i in items if f["text"] in i["content"]]
        assert len(holders) == 1 and holders[0]["content"].count(f["text"]) == 1, (f, len(holders))
        assert holders[0]["turn"] == f["turn"], f
        if f["source"] == "tool":
            assert holders[0]["kind"] == "tool_result", f
        else:
            assert holders[0]["kind"] == "message", f
    # A tool fact's output never names its component; its call or its turn's user message does.
    owner = {"L": "ledger", "W": "webhooks", "S": "subscriptions", "D": "dunning", "G": "ingest", "F": "fx",
             "T": "tax", "P": "payouts", "R": "reconciliation", "I": "invoicing", "U": "usage"}
    special = {"K1": "api", "K2": "worker", "K3": "e2e"}
    for label, text in P.items():
        comp = special.get(label) or owner[label[0]]
        res = next(k for k, i in enumerate(items) if text in i["content"])
        call, out = items[res - 1], items[res]["content"]
        for w in COMPONENT_WORDS[comp]:
            assert not re.search(r"(?i)\b" + re.escape(w), out), (label, w)
        user = next(i for i in items if i["turn"] == items[res]["turn"] and i["role"] == "user")
        named = [w for w in COMPONENT_WORDS[comp] if re.search(r"(?i)\b" + re.escape(w), call["content"] + user["content"])]
        assert named or comp == "e2e", (label, comp)
    for _, rule in RULES:
        assert rule in blob, rule
    bad = [(i["turn"], i["tool_name"], len(i["content"].encode())) for i in items
           if i["kind"] == "tool_result" and not 1200 <= len(i["content"].encode()) <= 10000]
    assert not bad, bad
    assert 120 <= turn_no <= 130, turn_no
    tool_lines = [l for i in items if i["kind"] == "tool_result" for l in i["content"].split("\n")]
    common = {w: sum(1 for l in tool_lines if re.search(w, l, re.I)) for w in
              ["test", "config", "error", "deploy", "commit", "timeout", "version"]}
    fact_points = [40, 80, 120, turn_no]

    def write(name, rows):
        with open(os.path.join(HERE, name), "w") as out:
            for r in rows:
                out.write(json.dumps(r, ensure_ascii=False) + "\n")

    write("coding.jsonl", [{"system_prompt": SYSTEM}] + items)
    write("coding_facts.jsonl", facts)
    common_probes = ([{"kind": "instruction", "turn": t, "text": rule} for t, rule in RULES]
                     + [{"kind": "facts", "turn": t} for t in fact_points])
    write("coding_probes.jsonl", common_probes + sorted(probes["tune"], key=lambda p: p["turn"]))
    write("coding_heldout_probes.jsonl", common_probes + sorted(probes["held"], key=lambda p: p["turn"]))
    sizes = [len(i["content"].encode()) for i in items if i["kind"] == "tool_result"]
    print(f"{turn_no} turns, {len(items)} items, {call_no} tool calls ({min(sizes)}-{max(sizes)} bytes), "
          f"{len(facts)} facts ({sum(f['source'] == 'tool' for f in facts)} from tools), "
          f"{len(probes['tune'])} tuning and {len(probes['held'])} held-out probes, "
          f"{len(blob.encode())} bytes of content; tool-output lines with: "
          + ", ".join(f"{w} {n}" for w, n in common.items()))


main()
