#!/usr/bin/env python3
"""Writes the Fernhill Goods storefront coding-session replay conversation used by tools/replay.

Fernhill Goods runs its web shop from one monorepo: Python/FastAPI services
under services/ (cart, checkout, pricing, inventory, search, promotions,
notifications), a Go image-resizer, a TypeScript admin frontend under
apps/admin, Helm charts under deploy/charts and GitHub Actions workflows. A
backend developer of the payments-core squad spends a day with an assistant
chasing a coupon-stacking bug and a checkout timeout across the services:
settings reads, test runs (pytest, go test, jest), git log / blame / show /
diff, ripgrep, patches, kubectl and helm output, curl responses and profiles.

How the conversation is built:
  * most turns carry a tool call with a long output that looks like the real
    thing (Python modules, Go files, YAML values, package.json and Dockerfiles
    read with line numbers, pytest / go test / jest output, git output, helm
    history, health JSON, cProfile tables);
  * the line holding a planted value names a constant, a test, a setting or a
    hash, never its service, and neither does the rest of that output: the
    service is named only in the call's arguments (a path, a cd, a URL, a
    release name) and in the user's message of that turn;
  * every service's settings.py has the same keys (HTTP_TIMEOUT_S,
    RETRY_LIMIT, DB_POOL_SIZE, CACHE_TTL_S, ...), every pytest run ends with
    the same summary line, every chart's values have the same keys, so a
    question can only be answered from the one output its subject's call
    produced;
  * the assistant does not repeat tool values in its replies, and its answers
    to recall questions stay vague;
  * a few facts are stated only in messages (the user's name and squad, the
    ticket, the PR, the release, the reviewer, a date agreed by the assistant);
  * recall questions come 40 or more turns after the fact.

Outputs (beside this file):
  storefront.jsonl                  system prompt, then one item per line
  storefront_facts.jsonl            id, turn, topic, source, text
  storefront_probes.jsonl           instructions, fact counts, recall questions
                                    asked in words close to the stored exchange
  storefront_heldout_probes.jsonl   instructions, fact counts, other recall
                                    questions asked in other words, and one
                                    unrelated question
  storefront_dev_questions.jsonl    more questions in other words, not asked in
                                    the conversation (fact, turn, question)

The questions were written from the conversation alone, before any recall
evaluation was run on this set.

Deterministic (seeded, no clock, standard library only). Re-run after editing:
  python3 tools/replay_data/make_storefront.py
"""

import datetime
import json
import os
import random
import re

rng = random.Random(20260630)
HERE = os.path.dirname(os.path.abspath(__file__))

SYSTEM = ("You are a coding assistant working in Fernhill Goods' storefront monorepo. Python/FastAPI services live "
          "under services/<name>/ (cart, checkout, pricing, inventory, search, promotions, notifications), each with "
          "app/settings.py, tests/ and a Dockerfile; the Go image-resizer is in services/image-resizer; the "
          "TypeScript admin frontend is in apps/admin; Helm charts and per-environment values are under "
          "deploy/charts/<name>/; CI runs on GitHub Actions (.github/workflows). Production runs in the shop-prod "
          "namespace of the fh-prod Kubernetes cluster, staging in shop-staging. You can read files (with line "
          "numbers), run shell commands (pytest, go test, npm, git, rg, kubectl, helm, curl, gh, py-spy) and apply "
          "patches. Quote values exactly as the tools return them, and say so when you are unsure.")

RULES = [
    (2, "never bump a dependency in the same PR as a fix; version bumps go in their own PR"),
    (3, "don't edit any values-prod.yaml on a feature branch, prod values only change through the release branch"),
    (4, "no bare skips: every pytest.mark.skip or xfail you add needs a ticket id in its reason"),
]

TODAY = datetime.date(2026, 6, 30)

# ---------------------------------------------------------------------------
# Planted values: drawn before any output is written.

RESERVED = []


def unique(make):
    for _ in range(10000):
        v = make()
        if not any(v in r or r in v for r in RESERVED):
            RESERVED.append(v)
            return v
    raise RuntimeError("no unique value")


def hexs(n):
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


def pick(values):
    return rng.choice(values)


P = {}  # label -> planted tool text

# settings.py constants (every service has the same keys)
P["CA1"] = unique(lambda: f"CACHE_TTL_S = {pick([420, 540, 660, 780])}")
P["CO1"] = unique(lambda: f"HTTP_TIMEOUT_S = {pick(['12.5', '17.5', '22.5'])}")
P["PR1"] = unique(lambda: f"RETRY_LIMIT = {pick([6, 7, 9])}")
P["IN1"] = unique(lambda: f"DB_POOL_SIZE = {pick([35, 45, 55])}")
P["SE1"] = unique(lambda: f"MAX_PAGE_SIZE = {pick([120, 160, 180])}")
P["PM1"] = unique(lambda: f"RATE_LIMIT_PER_MIN = {pick([900, 1500, 2100])}")
P["NO1"] = unique(lambda: f"RETRY_BACKOFF_MS = {pick([2500, 3500, 4500])}")
# pytest summaries and failures
P["CA2"] = unique(lambda: f"{rng.randint(1010, 1090)} passed")
P["PR3"] = unique(lambda: f"{rng.randint(850, 899)} passed")
P["NO3"] = unique(lambda: f"{rng.randint(610, 680)} passed")
P["PM3"] = unique(lambda: f"{rng.randint(1160, 1199)} passed")
P["PM2"] = unique(lambda: "FAILED tests/unit/test_stacking.py::test_coupon_stacking_rejects_expired")
P["CO4"] = unique(lambda: "FAILED tests/integration/test_orders.py::test_idempotent_replay_returns_same_order")
P["IN3"] = unique(lambda: "FAILED tests/unit/test_reservations.py::test_reservation_expiry_releases_stock")
# go test, jest
P["IR1"] = unique(lambda: "--- FAIL: TestEncodeWebPPreservesICC")
P["AD2"] = unique(lambda: (lambda p: f"{p} passed, {p + 1} total")(rng.randint(301, 329)))
P["AD3"] = unique(lambda: "RefundDialog › disables refund button when order is settled")
# git
P["CO2"] = unique(lambda: hexs(7))
P["IN5"] = unique(lambda: hexs(7))
P["SE4"] = unique(lambda: hexs(7))
P["AD4"] = unique(lambda: hexs(7))
P["CA3"] = unique(lambda: hexs(8))
P["PM4"] = unique(lambda: hexs(8))
# helm values and history
P["CA4"] = unique(lambda: f"maxReplicas: {pick([18, 22, 26])}")
P["PM5"] = unique(lambda: f"maxReplicas: {pick([9, 11, 13])}")
P["IN4"] = unique(lambda: f"memory: {pick(['1536Mi', '1792Mi', '2304Mi'])}")
P["CO3"] = unique(lambda: f"1.{rng.randint(84, 89)}.{rng.randint(2, 9)}")
# curl
P["CO5"] = unique(lambda: f'"p99_latency_ms": {rng.randint(810, 990)}')
P["SE2"] = unique(lambda: f'"doc_count": {rng.randint(1810000, 1890000)}')
# profiles
P["PR2"] = unique(lambda: f"{rng.randint(28, 36)}.{rng.randint(100, 999)}")
P["SE3"] = unique(lambda: f"{rng.randint(17, 22)}.{rng.randint(100, 999)}")
# dependencies, images, migrations
P["PR4"] = unique(lambda: f"pydantic==2.{pick([6, 7])}.{rng.randint(1, 4)}")
P["SE5"] = unique(lambda: f"python:3.11.{pick([7, 8, 9])}-slim-bookworm")
P["NO2"] = unique(lambda: f"python:3.12.{pick([2, 3, 4])}-slim-bookworm")
P["IR3"] = unique(lambda: f"golang:1.22.{pick([3, 4, 5])}-bookworm")
P["IR2"] = unique(lambda: f"github.com/davidbyttow/govips/v2 v2.{pick([13, 14])}.{rng.randint(0, 2)}")
P["AD1"] = unique(lambda: f'"@tanstack/react-query": "^5.{rng.randint(40, 49)}.{rng.randint(1, 9)}"')
P["IN2"] = unique(lambda: f"Rev: {hexs(12)} (head)")
P["IR4"] = unique(lambda: f"DefaultWebPQuality = {pick([74, 78, 86])}")
P["NO4"] = unique(lambda: f"BATCH_SEND_SIZE = {pick([480, 640, 720])}")

# The messages' facts.
M = {
    "name": unique(lambda: "Nadia Okonjo-Brandt"),
    "team": unique(lambda: "payments-core squad"),
    "ticket": unique(lambda: "SHOP-4471"),
    "incident": unique(lambda: "INC-20931"),
    "release": unique(lambda: "3.41.0"),
    "date": unique(lambda: "Wednesday 15 July"),
    "pr": unique(lambda: "PR #2318"),
    "reviewer": unique(lambda: "Kenji Aldous"),
}

SVCS = ["cart", "checkout", "pricing", "inventory", "search", "promotions", "notifications"]
SVC_OF = {"CA": "cart", "CO": "checkout", "PR": "pricing", "IN": "inventory", "SE": "search", "PM": "promotions",
          "NO": "notifications", "IR": "image-resizer", "AD": "admin"}
SVC_PATTERN = {
    "cart": r"\bcarts?\b",
    "checkout": r"checkout",
    "pricing": r"pricing",
    "inventory": r"inventory",
    "search": r"\bsearch",
    "promotions": r"promotions?\b|\bpromo",
    "notifications": r"notification|\bnotif",
    "image-resizer": r"image[-_ ]?resizer|\bresizer",
    "admin": r"\badmin",
}


def subject_of(label):
    return SVC_PATTERN[SVC_OF[re.match(r"[A-Z]+", label).group(0)]]


def clean(s):
    return not any(r in s for r in RESERVED)


def N(make):
    for _ in range(3000):
        s = make()
        if clean(s):
            return s
    raise RuntimeError("noise keeps hitting a planted value")


def fit(make, n, lo=1300, hi=9600):
    size = 0
    for _ in range(80):
        out = make(n)
        size = len(out)
        if size > hi:
            n = max(1, int(n * 0.85))
        elif size < lo:
            n = int(n * 1.25) + 1
        else:
            return out
    raise RuntimeError(f"cannot fit output size ({size} chars at n={n})")


def planted(make, labels):
    for _ in range(3000):
        out = make()
        held = {l for l, v in P.items() if v in out} | {l for l, v in M.items() if v in out}
        if held == set(labels) and not any(re.search(subject_of(l), out, re.I) for l in labels):
            return out
    raise RuntimeError(f"cannot draw an output holding exactly {labels}")


def fmake(label, make, n, lo=1300, hi=9600):
    if label:
        return fit(lambda k: planted(lambda: make(k), [label]), n, lo, hi)
    return fit(lambda k: N(lambda: make(k)), n, lo, hi)


# ---------------------------------------------------------------------------
# Formatting helpers.

def numbered(lines, start=1):
    return "\n".join(f"{i:6d}\t{l}" for i, l in enumerate(lines, start))


def table(headers, rows, gap="   "):
    rows = [[str(c) for c in r] for r in rows]
    w = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    out = [gap.join(h.ljust(w[i]) for i, h in enumerate(headers)).rstrip()]
    for r in rows:
        out.append(gap.join(c.ljust(w[i]) for i, c in enumerate(r)).rstrip())
    return "\n".join(out)


AUTHORS = ["Marta Kowalczyk", "Owen Achterberg", "Sunita Rao", "Luis Ferrándiz", "Hannah Oyelaran", "Tobias Lindahl",
           "Grace Mbeki", "Pavel Sorokin", "Aoife Brennan"]
EMAILS = {a: a.lower().split()[0] + "@fernhill.co.uk" for a in AUTHORS}


def day(offset):
    return TODAY - datetime.timedelta(days=offset)


def stamp(offset, h=None):
    d = day(offset)
    return f"{d.isoformat()} {h if h is not None else rng.randint(8, 18):02d}:{rng.randint(0, 59):02d}:" \
           f"{rng.randint(0, 59):02d} +0100"


# ---------------------------------------------------------------------------
# Output generators.

SET_SECTIONS = [
    ("HTTP clients", "Applies to outbound calls made through shopcore.http.Client.", [
        ("HTTP_TIMEOUT_S", ["2.5", "4.0", "5.0", "6.0", "8.0", "10.0", "15.0"]),
        ("HTTP_CONNECT_TIMEOUT_S", ["0.5", "1.0", "1.5", "2.0", "3.0"]),
        ("RETRY_LIMIT", [2, 3, 4, 5, 8]),
        ("RETRY_BACKOFF_MS", [100, 150, 200, 250, 400, 500, 750, 1000, 1500]),
        ("CIRCUIT_BREAKER_THRESHOLD", [5, 8, 10, 12, 20]),
        ("CIRCUIT_BREAKER_RESET_S", [15, 30, 45, 60, 90])]),
    ("Database", "SQLAlchemy async engine; the pool is per worker process.", [
        ("DB_POOL_SIZE", [5, 8, 10, 12, 15, 20, 25, 30]),
        ("DB_MAX_OVERFLOW", [0, 2, 4, 5, 10]),
        ("DB_POOL_RECYCLE_S", [600, 900, 1800, 3600]),
        ("DB_STATEMENT_TIMEOUT_MS", [1500, 2000, 3000, 5000, 8000])]),
    ("Cache", "Redis-backed read-through cache (shopcore.cache).", [
        ("CACHE_TTL_S", [30, 60, 90, 120, 180, 240, 300, 600, 900]),
        ("CACHE_MAX_ENTRIES", [1024, 2048, 4096, 10000, 50000]),
        ("REDIS_DB", [0, 1, 2, 3, 4, 5, 6, 7])]),
    ("API", "Public and internal HTTP API limits.", [
        ("MAX_PAGE_SIZE", [50, 100, 150, 200, 250, 500]),
        ("DEFAULT_PAGE_SIZE", [20, 24, 25, 48, 50]),
        ("RATE_LIMIT_PER_MIN", [120, 300, 600, 1200, 1800, 2400, 3000]),
        ("IDEMPOTENCY_TTL_S", [3600, 21600, 86400, 172800])]),
    ("Workers", "Background workers (outbox relay, sweepers).", [
        ("WORKER_CONCURRENCY", [2, 4, 6, 8, 16]),
        ("OUTBOX_POLL_INTERVAL_MS", [200, 250, 500, 1000]),
        ("OUTBOX_BATCH_SIZE", [50, 100, 200, 500])]),
]

EXTRAS = {
    "cart": ['RESERVATION_HOLD_S = {}'.format(pick([600, 900, 1200])), "MERGE_GUEST_ON_LOGIN = True",
             "MAX_LINE_QUANTITY = 99", 'ABANDONED_AFTER_H = 72'],
    "checkout": ['PAYMENT_GATEWAY_URL = os.environ.get("PAYMENT_GATEWAY_URL", "https://api.sandbox.payfast.example")',
                 "THREE_DS_CHALLENGE_TIMEOUT_S = 300", 'ORDER_NUMBER_PREFIX = "FH"', "CAPTURE_ON_DISPATCH = True"],
    "pricing": ['ROUNDING_MODE = "ROUND_HALF_EVEN"', 'DEFAULT_CURRENCY = "GBP"', "FX_REFRESH_S = 900",
                "PRICE_LIST_PRELOAD = True"],
    "inventory": ["SAFETY_STOCK_DEFAULT = 2", "RESERVATION_SWEEP_INTERVAL_S = 30",
                  'WAREHOUSE_CODES = env_list("WAREHOUSE_CODES", ["DTF1", "MAN2"])', "ALLOW_BACKORDER = False"],
    "search": ['OPENSEARCH_URL = os.environ.get("OPENSEARCH_URL", "http://localhost:9200")', 'INDEX_ALIAS = "products"',
               'SYNONYMS_PATH = "/etc/synonyms/en_gb.txt"', "REINDEX_BATCH_SIZE = 2000"],
    "promotions": ['COUPON_CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"', "BUDGET_GUARD_ENABLED = True",
                   "EVALUATION_CACHE = True"],
    "notifications": ['SMTP_HOST = os.environ.get("SMTP_HOST", "localhost")', 'SMS_PROVIDER = "twilio"',
                      'TEMPLATE_DIR = "/app/templates"', "QUIET_HOURS = (22, 7)"],
}
UPSTREAMS = {"cart": ["pricing", "inventory", "promotions"], "checkout": ["cart", "pricing", "inventory", "promotions"],
             "pricing": ["promotions"], "inventory": ["search"], "search": ["pricing", "inventory"],
             "promotions": ["pricing"], "notifications": ["checkout"]}


def settings_py(svc, plant):
    key = plant.split(" = ")[0] if plant else None
    L = ['"""Service settings.', "",
         "Defaults for every environment. Any UPPER_CASE name below can be overridden by an",
         "environment variable of the same name (apply_env_overrides at the bottom); the chart's",
         "env block sets the per-environment values.", '"""', "", "from __future__ import annotations", "",
         "import os", "", "from shopcore.settings import apply_env_overrides, env_list", "",
         'ENVIRONMENT = os.environ.get("ENVIRONMENT", "local")', f'LOG_LEVEL = "{pick(["INFO", "INFO", "WARNING"])}"',
         'LOG_JSON = ENVIRONMENT != "local"', 'DATABASE_URL = os.environ.get("DATABASE_URL", '
         '"postgresql+asyncpg://app:app@localhost:5432/app")', 'REDIS_URL = os.environ.get("REDIS_URL", '
         '"redis://localhost:6379")', ""]
    for title, note, keys in SET_SECTIONS:
        L += [f"# --- {title} " + "-" * (70 - len(title)), f"# {note}"]
        for k, vals in keys:
            L.append(plant if k == key else f"{k} = {pick(vals)}")
        if title == "HTTP clients" and rng.random() < 0.5:
            L.append("# Keep RETRY_LIMIT * RETRY_BACKOFF_MS well under the ingress timeout (30 s).")
        L.append("")
    L += ["# --- Upstreams " + "-" * 61]
    for u in UPSTREAMS[svc]:
        L.append(f'{u.upper()}_URL = os.environ.get("{u.upper()}_URL", "http://{u}.shop.svc.cluster.local:8080")')
    L += ["", "# --- Service " + "-" * 63] + EXTRAS[svc] + ["", "# --- Feature flags " + "-" * 57]
    for f in rng.sample(["FEATURE_ASYNC_OUTBOX", "FEATURE_STRICT_VALIDATION", "FEATURE_OTEL_TRACES",
                         "FEATURE_SHADOW_READS", "FEATURE_PROBLEM_JSON"], 3):
        L.append(f"{f} = {pick(['True', 'False'])}")
    L += ["", "apply_env_overrides(globals())"]
    return L


PY_FILES = ["test_api.py", "test_settings.py", "test_health.py", "test_repository.py", "test_outbox.py",
            "test_schemas.py", "test_http_client.py", "test_cache.py", "test_auth.py", "test_pagination.py",
            "test_errors.py", "test_events.py", "test_migrations.py", "test_rate_limit.py", "test_idempotency.py"]
PY_OWN = {
    "cart": ["test_lines.py", "test_merge.py", "test_totals.py", "test_guest_sessions.py", "test_reservation_hold.py"],
    "checkout": ["test_orders.py", "test_payments.py", "test_three_ds.py", "test_capture.py", "test_refunds.py"],
    "pricing": ["test_tiered.py", "test_rounding.py", "test_fx.py", "test_price_lists.py", "test_vat.py"],
    "inventory": ["test_reservations.py", "test_stock_levels.py", "test_sweeper.py", "test_warehouses.py"],
    "search": ["test_query_builder.py", "test_synonyms.py", "test_facets.py", "test_reindex.py", "test_ranking.py"],
    "promotions": ["test_stacking.py", "test_coupons.py", "test_budgets.py", "test_eligibility.py", "test_codes.py"],
    "notifications": ["test_email.py", "test_sms.py", "test_templates.py", "test_quiet_hours.py", "test_batches.py"],
}

FAILURE_BODY = {
    "PM2": ("tests/unit/test_stacking.py", "test_coupon_stacking_rejects_expired", 88, [
        "    def test_coupon_stacking_rejects_expired(clock, make_coupon, basket):",
        "        clock.set(\"2026-06-30T09:00:00Z\")",
        "        live = make_coupon(code=\"SUMMER-15\", ends_at=\"2026-07-31T23:59:59Z\")",
        "        expired = make_coupon(code=\"SPRING-10\", ends_at=\"2026-05-31T23:59:59Z\")",
        "        result = evaluate_stack(basket, [live, expired])",
        ">       assert result.rejected == [expired.code]",
        "E       AssertionError: assert [] == ['SPRING-10']",
        "E         Right contains one more item: 'SPRING-10'",
        "E         Use -v to get more diff"], "AssertionError: assert [] == ['SPRING-10']"),
    "CO4": ("tests/integration/test_orders.py", "test_idempotent_replay_returns_same_order", 141, [
        "    async def test_idempotent_replay_returns_same_order(client, payment_stub):",
        "        payment_stub.delay(seconds=9)",
        "        key = \"5d0f1c2e-replay\"",
        "        first = await client.post(\"/v1/orders\", json=ORDER, headers={\"Idempotency-Key\": key})",
        "        second = await client.post(\"/v1/orders\", json=ORDER, headers={\"Idempotency-Key\": key})",
        ">       assert second.json()[\"order_id\"] == first.json()[\"order_id\"]",
        "E       KeyError: 'order_id'",
        "",
        "        # second response: {'type': 'about:blank', 'title': 'Upstream timeout', 'status': 504}"],
        "KeyError: 'order_id'"),
    "IN3": ("tests/unit/test_reservations.py", "test_reservation_expiry_releases_stock", 57, [
        "    async def test_reservation_expiry_releases_stock(repo, clock, sweeper):",
        "        await repo.set_level(\"SKU-00412\", \"DTF1\", on_hand=3)",
        "        await repo.reserve(\"SKU-00412\", \"DTF1\", qty=3, hold_s=60)",
        "        clock.advance(seconds=61)",
        "        await sweeper.run_once()",
        ">       assert (await repo.available(\"SKU-00412\", \"DTF1\")) == 3",
        "E       assert 0 == 3",
        "E        +  where 0 = await <bound method StockRepository.available ...>"], "assert 0 == 3"),
}
NOISE_FAILS = [("tests/unit/test_http_client.py", "test_retry_gives_up_after_limit", "AssertionError: assert 4 == 3"),
               ("tests/unit/test_cache.py", "test_ttl_is_respected", "AssertionError: assert 'hit' == 'miss'"),
               ("tests/unit/test_outbox.py", "test_relay_marks_sent_once",
                "AssertionError: expected call not found.")]


def pytest_out(svc, n, fail_label=None, sum_plant=None, noise_fails=0):
    files = rng.sample(PY_FILES, min(len(PY_FILES), max(3, n - len(PY_OWN[svc])))) + PY_OWN[svc]
    rng.shuffle(files)
    fails = []
    if fail_label:
        fails.append(fail_label)
    for _ in range(noise_fails):
        fails.append(pick(NOISE_FAILS))
    fail_files = {FAILURE_BODY[f][0] if isinstance(f, str) else f[0] for f in fails}
    total = 0
    lines = ["============================= test session starts ==============================",
             f"platform linux -- Python 3.11.{pick([7, 8, 9])}, pytest-8.2.2, pluggy-1.5.0",
             "rootdir: /src", "configfile: pyproject.toml", "testpaths: tests",
             "plugins: anyio-4.4.0, asyncio-0.23.7, cov-5.0.0, xdist-3.6.1, respx-0.21.1",
             "asyncio: mode=Mode.STRICT"]
    body = []
    for f in files:
        path = ("tests/integration/" if f in ("test_orders.py", "test_api.py", "test_migrations.py") else
                "tests/unit/") + f
        k = rng.randint(15, 170 + max(0, n - 20) * 12)
        total += k
        marks = ["." if rng.random() > 0.02 else "s" for _ in range(k)]
        if path in fail_files:
            marks[rng.randrange(k)] = "F"
        s = "".join(marks)
        first = 72 - len(path) - 1
        chunks = [s[:first]] + [s[i:i + 72] for i in range(first, len(s), 72)]
        for j, c in enumerate(chunks):
            if c:
                body.append([path if j == 0 else None, c])
    running = 0
    out_body = []
    for path, c in body:
        running += len(c)
        head = f"{path} {c}" if path else c
        out_body.append(head.ljust(73) + f"[{min(100, running * 100 // total):3d}%]")
    skipped = sum(c.count("s") for _, c in body)
    if sum_plant:
        total = int(sum_plant.split()[0]) + skipped + len(fails)
    lines += [f"collected {total} items", ""] + out_body + [""]
    summary = []
    if fails:
        lines.append("=================================== FAILURES ===================================")
        for f in fails:
            if isinstance(f, str):
                path, name, lineno, src, short = FAILURE_BODY[f]
            else:
                path, name, short = f
                lineno = rng.randint(20, 200)
                src = [f"    def {name}(*fixtures):", "        ...", f">       {short.split(': ', 1)[-1]}"]
            lines += [f" {name} ".center(80, "_"), ""] + src + ["", f"{path}:{lineno}: {short.split(':')[0]}"]
            summary.append(f"FAILED {path}::{name} - {short}")
        lines += ["=========================== short test summary info ============================"] + summary
    passed = total - skipped - len(fails)
    ptxt = sum_plant if sum_plant else f"{passed} passed"
    res = (f"{len(fails)} failed, " if fails else "") + f"{ptxt}, {skipped} skipped, {rng.randint(1, 6)} warnings " \
          f"in {rng.uniform(20, 95):.2f}s"
    lines.append(f" {res} ".center(80, "="))
    return "\n".join(lines)


def blame_out(code, plant_line=None, plant_hash=None, start=1):
    commits = [(hexs(8), pick(AUTHORS), stamp(rng.randint(40, 700))) for _ in range(6)]
    out = []
    cur = pick(commits)
    for i, line in enumerate(code, start):
        if rng.random() < 0.25:
            cur = pick(commits)
        h, a, s = cur
        if plant_line is not None and line == plant_line:
            h, a, s = plant_hash, pick(AUTHORS), stamp(rng.randint(20, 90))
        out.append(f"{h} ({a.ljust(16)} {s} {i:3d}) {line}")
    return "\n".join(out)


def git_log(n, subjects, plant=None, plant_subject=None):
    rows = []
    at = rng.randint(0, 3)
    pos = rng.randint(3, max(4, n - 4)) if plant else -1
    for i in range(n):
        at += rng.randint(0, 4)
        if i == pos:
            rows.append(f"{plant} {day(at).isoformat()} {pick(AUTHORS)}  {plant_subject}")
        else:
            rows.append(f"{hexs(7)} {day(at).isoformat()} {pick(AUTHORS)}  {pick(subjects)}")
    return "\n".join(rows)


SUBJECTS = ["bump shopcore to 0.19.2", "add request id to problem+json errors", "tidy settings comments",
            "pin uvicorn workers via env", "move outbox relay to its own task group", "log slow queries over 500 ms",
            "fix flaky test_ttl_is_respected", "split repository module", "add OTEL spans around upstream calls",
            "make pagination cursor opaque", "drop python 3.10 from CI matrix", "use Decimal for all money fields",
            "handle 429 from upstream with Retry-After", "rename internal route prefix", "add healthz dependency list",
            "raise pool recycle to 30 min", "typing: strict mode for app/api", "Merge pull request from release/3.40",
            "retry on connection reset only", "fix N+1 in list endpoint", "add index on updated_at",
            "remove dead feature flag", "backfill script for null currency", "cache negative lookups for 30s"]


def values_yaml(plant=None, kind=None):
    mem_req = pick(["256Mi", "384Mi", "512Mi", "768Mi"])
    mem_lim = pick(["512Mi", "768Mi", "1Gi", "1280Mi"])
    maxr = pick([4, 5, 6, 8, 10, 12, 16])
    L = ["# Production values. Changes go through the release branch (see deploy/README.md).",
         "# image.repository comes from the release name (templates/_helpers.tpl).", "",
         f"replicaCount: {pick([2, 3, 4])}", "", "image:", f'  tag: "3.40.{rng.randint(0, 6)}"',
         "  pullPolicy: IfNotPresent", "", "podAnnotations:", '  prometheus.io/scrape: "true"',
         '  prometheus.io/port: "9100"', "", "service:", "  type: ClusterIP", "  port: 8080", "",
         "resources:", "  requests:", f"    cpu: {pick(['100m', '200m', '250m', '500m'])}",
         f"    memory: {mem_req}", "  limits:", f"    cpu: {pick(['500m', '1', '1500m', '2'])}",
         ("    " + plant) if kind == "mem" else f"    memory: {mem_lim}", "",
         "autoscaling:", "  enabled: true", f"  minReplicas: {pick([2, 3, 4])}",
         ("  " + plant) if kind == "hpa" else f"  maxReplicas: {maxr}",
         f"  targetCPUUtilizationPercentage: {pick([60, 65, 70, 75])}", "",
         "podDisruptionBudget:", "  minAvailable: 1", "", "env:",
         f'  LOG_LEVEL: "{pick(["INFO", "WARNING"])}"', f'  HTTP_TIMEOUT_S: "{pick(["5.0", "8.0", "10.0"])}"',
         f'  WORKER_CONCURRENCY: "{pick([2, 4, 8])}"', '  ENVIRONMENT: "prod"', "",
         "envFromSecrets:", "  - name: DATABASE_URL", "    secretKeyRef: {name: db-credentials, key: url}",
         "  - name: REDIS_URL", "    secretKeyRef: {name: redis-credentials, key: url}", "",
         "probes:", "  liveness:", "    path: /healthz", f"    periodSeconds: {pick([10, 15, 20])}",
         "  readiness:", "    path: /readyz", f"    periodSeconds: {pick([5, 10])}",
         f"    failureThreshold: {pick([3, 5])}", "", "nodeSelector:", "  fh.io/pool: general", "",
         "tolerations: []", "", "topologySpreadConstraints:", "  - maxSkew: 1",
         "    topologyKey: topology.kubernetes.io/zone", "    whenUnsatisfiable: ScheduleAnyway", "",
         "serviceMonitor:", "  enabled: true", "  interval: 30s", "",
         "ingress:", "  enabled: false  # traffic comes through the storefront gateway", "",
         "networkPolicy:", "  enabled: true", "  allowFrom:", "    - namespace: shop-prod",
         "    - namespace: observability", "", "migrations:", f"  enabled: {pick(['true', 'false'])}",
         "  hook: pre-upgrade", f"  activeDeadlineSeconds: {pick([300, 600, 900])}", "",
         "securityContext:", "  runAsNonRoot: true", "  runAsUser: 10001", "  readOnlyRootFilesystem: true",
         "  allowPrivilegeEscalation: false", "  capabilities:", "    drop: [ALL]", "",
         "affinity:", "  podAntiAffinity:", "    preferredDuringSchedulingIgnoredDuringExecution:",
         "      - weight: 100", "        podAffinityTerm:", "          topologyKey: kubernetes.io/hostname",
         "          labelSelector:", "            matchLabels:", "              app.kubernetes.io/instance: "
         "'{{ .Release.Name }}'", "", "otel:", "  enabled: true",
         "  endpoint: http://otel-collector.observability:4317", f"  sampleRatio: {pick(['0.05', '0.1', '0.2'])}"]
    return L


def helm_history(n, plant=None):
    rows = []
    rev = rng.randint(120, 180)
    d = datetime.datetime(2026, 5, 4, 9, 0)
    last = [int(x) for x in (plant or f"1.{rng.randint(60, 99)}.{rng.randint(0, 9)}").split(".")]
    versions = [last[:]]
    for _ in range(n - 1):
        v = versions[-1][:]
        if v[2] > 0 and rng.random() < 0.7:
            v[2] -= 1
        else:
            v[1] -= 1
            v[2] = rng.randint(0, 3)
        versions.append(v)
    versions.reverse()
    chart = rng.randint(0, 2)
    for i in range(n):
        d += datetime.timedelta(days=rng.randint(1, 3), minutes=rng.randint(0, 600))
        ver = versions[i]
        if rng.random() < 0.15:
            chart += 1
        status = "superseded"
        desc = pick(["Upgrade complete", "Upgrade complete", "Upgrade complete", "Rollback to {}"])
        if i == n - 1:
            status = "deployed"
            desc = "Upgrade complete"
        appv = ".".join(map(str, ver))
        rows.append([rev + i, d.strftime("%a %b %e %H:%M:%S %Y"), status,
                     f"fastapi-service-2.{6 + chart // 5}.{chart % 5}", appv,
                     desc.format(rev + i - 2)])
    return table(["REVISION", "UPDATED", "STATUS", "CHART", "APP VERSION", "DESCRIPTION"], rows, gap="\t")


ROUTES = {
    "checkout": ["POST /v1/orders", "GET /v1/orders/{id}", "POST /v1/payments/authorise", "POST /v1/payments/3ds/return",
                 "POST /v1/payments/capture", "POST /v1/refunds", "GET /v1/orders", "POST /internal/orders/{id}/cancel",
                 "GET /internal/metrics", "POST /v1/orders/{id}/confirm"],
    "cart": ["GET /v1/carts/{id}", "POST /v1/carts/{id}/lines", "PATCH /v1/carts/{id}/lines/{line}",
             "DELETE /v1/carts/{id}/lines/{line}", "POST /v1/carts/{id}/merge", "POST /v1/carts/{id}/recalculate",
             "GET /internal/metrics", "POST /v1/carts"],
    "pricing": ["POST /v1/quotes", "GET /v1/price-lists/{id}", "POST /internal/price-lists/reload", "GET /v1/fx",
                "GET /internal/metrics", "POST /v1/quotes/batch"],
    "promotions": ["POST /v1/evaluate", "GET /v1/coupons/{code}", "POST /v1/coupons", "GET /v1/campaigns",
                   "POST /internal/budgets/sync", "GET /internal/metrics"],
    "inventory": ["GET /v1/levels/{sku}", "POST /v1/holds", "DELETE /v1/holds/{id}", "POST /internal/sweep",
                  "GET /v1/levels", "GET /internal/metrics"],
    "search": ["GET /v1/search", "GET /v1/suggest", "GET /v1/facets", "POST /internal/reindex", "GET /internal/metrics"],
    "notifications": ["POST /v1/send", "POST /v1/batches", "GET /v1/batches/{id}", "POST /internal/webhooks/sms",
                      "GET /internal/metrics"],
}


def health_json(n, plant=None, svc="checkout"):
    deps = {"postgres": {"status": "ok", "latency_ms": round(rng.uniform(0.4, 4), 2)},
            "redis": {"status": "ok", "latency_ms": round(rng.uniform(0.1, 2), 2)}}
    ext = {"checkout": ["payment_gateway", "fraud_check"], "search": ["opensearch"], "notifications": ["smtp", "sms"],
           "pricing": ["fx_rates"]}.get(svc, [])
    for u in ext:
        deps[u] = {"status": pick(["ok", "ok", "degraded"]), "latency_ms": round(rng.uniform(20, 400), 1),
                   "breaker": pick(["closed", "closed", "half-open"])}
    lines = ["{", '  "status": "ok",', f'  "version": "3.40.{rng.randint(0, 6)}",', f'  "git_sha": "{hexs(12)}",',
             f'  "uptime_s": {rng.randint(2000, 900000)},', f'  "workers": {pick([2, 4, 8])},', '  "latency": {',
             f'    "p50_latency_ms": {rng.randint(20, 120)},', f'    "p95_latency_ms": {rng.randint(200, 700)},',
             f'    {plant if plant else chr(34) + "p99_latency_ms" + chr(34) + ": " + str(rng.randint(300, 1400))},',
             f'    "window_s": 300', "  },", '  "routes": [']
    routes = []
    for r in rng.sample(ROUTES[svc], min(n, len(ROUTES[svc]))):
        p50 = rng.randint(3, 200)
        routes.append(f'    {{"route": "{r}", "count": {rng.randint(100, 900000)}, "p50_ms": {p50}, '
                      f'"p95_ms": {p50 + rng.randint(5, 700)}, "errors_4xx": {rng.randint(0, 900)}, '
                      f'"errors_5xx": {rng.randint(0, 40)}}}')
    lines += [",\n".join(routes), "  ],", '  "db_pool": {', f'    "size": {pick([10, 15, 20, 25])},',
              f'    "checked_out": {rng.randint(0, 9)},', f'    "overflow": {rng.randint(0, 3)},',
              f'    "waiters": {rng.randint(0, 2)}', "  },", '  "outbox": {', f'    "pending": {rng.randint(0, 300)},',
              f'    "oldest_pending_s": {rng.randint(0, 90)},', f'    "relayed_last_5m": {rng.randint(100, 90000)}',
              "  },", '  "build": {', f'    "python": "3.11.{pick([7, 8, 9])}",', '    "fastapi": "0.111.0",',
              f'    "image_created": "{day(rng.randint(1, 20))}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:00Z"',
              "  },", '  "dependencies": ' + json.dumps(deps, indent=2).replace("\n", "\n  "),
              "}"]
    return "\n".join(lines)


def pstats_out(n, func, plant, sort="cumulative", total=None):
    common = [("shopcore/cache.py", 140, "get_or_load"), ("pydantic/main.py", 176, "model_validate"),
              ("json/encoder.py", 200, "encode"), ("asyncio/base_events.py", 1910, "_run_once"),
              ("sqlalchemy/engine/base.py", 1411, "execute"), ("shopcore/http.py", 98, "request"),
              ("copy.py", 128, "deepcopy"), ("typing.py", 1260, "__instancecheck__"),
              ("asyncio/events.py", 80, "_run"), ("orjson", 0, "<built-in method dumps>")]
    if func == "apply_tiered_discounts":
        own = [("app/api/routes.py", 88, "quote"), ("app/rules/tiered.py", 212, "apply_tiered_discounts"),
               ("app/rules/tiered.py", 147, "_band_for"), ("app/repository.py", 61, "fetch_price_list"),
               ("app/money.py", 23, "quantize"), ("decimal.py", 0, "<method 'quantize' of 'decimal.Decimal'>"),
               ("app/rules/tiered.py", 96, "eligible_lines"), ("app/models.py", 140, "tiers_for"),
               ("app/vat.py", 31, "apply_vat")]
    else:
        own = [("app/api/routes.py", 54, "query"), ("app/query/builder.py", 77, "build_query"),
               ("app/ranking/bm25.py", 31, "bm25_score"), ("app/ranking/boosts.py", 52, "apply_boosts"),
               ("app/query/synonyms.py", 19, "expand"), ("app/facets.py", 40, "aggregate"),
               ("app/ranking/rerank.py", 12, "rerank"), ("re.py", 230, "sub"), ("app/query/tokens.py", 9, "tokenize")]
    funcs = own + rng.sample(common, 8)
    total = total or rng.uniform(40, 70)
    rows = []
    chosen = [f for f in funcs if f[2] in (func, own[0][2])] + \
        rng.sample([f for f in funcs if f[2] not in (func, own[0][2])], min(n, len(funcs)) - 2)
    pv = float(plant) if plant else rng.uniform(total * 0.3, total * 0.6)
    root = own[0][2]
    for path, ln, fn in chosen:
        if sort == "cumulative":
            cum = rng.uniform(0.2, pv * 0.9)
            tot = rng.uniform(0.05, cum)
        else:
            tot = rng.uniform(0.05, pv * 0.9)
            cum = tot + rng.uniform(0, pv)
        if fn == root:
            cum, tot = total * rng.uniform(0.95, 0.99), rng.uniform(0.1, 1.5)
        if fn == func and plant:
            if sort == "cumulative":
                cum = float(plant)
                tot = rng.uniform(cum * 0.2, cum * 0.5)
            else:
                tot = float(plant)
                cum = tot + rng.uniform(1, 6)
        nc = rng.randint(1, 900000)
        rows.append([nc, tot, cum, path, ln, fn])
    key = 2 if sort == "cumulative" else 1
    rows.sort(key=lambda r: -r[key])
    out = [f"         {rng.randint(30, 90) * 1000000 + rng.randint(0, 999999)} function calls "
           f"({rng.randint(20, 29) * 1000000 + rng.randint(0, 999999)} primitive calls) in {total:.3f} seconds", "",
           f"   Ordered by: {sort} time", f"   List reduced from {rng.randint(1800, 2600)} to {len(rows)} due to "
           f"restriction <{len(rows)}>", "",
           "   ncalls  tottime  percall  cumtime  percall filename:lineno(function)"]
    for nc, tot, cum, path, ln, fn in rows:
        t = f"{tot:.3f}"
        c = f"{cum:.3f}"
        out.append(f"{nc:>9} {t:>8} {tot / nc:>8.3f} {c:>8} {cum / nc:>8.3f} {path}:{ln}({fn})")
    return "\n".join(out)


def requirements_txt(n, plant=None, own=None):
    pkgs = [("fastapi", ["0.110.3", "0.111.0", "0.111.1"]), ("starlette", ["0.37.2"]),
            ("pydantic", ["2.5.3", "2.8.2", "2.9.1"]), ("pydantic-core", ["2.18.4", "2.20.1"]),
            ("pydantic-settings", ["2.3.4"]), ("uvicorn[standard]", ["0.29.0", "0.30.1"]),
            ("sqlalchemy[asyncio]", ["2.0.30", "2.0.31"]), ("asyncpg", ["0.29.0"]), ("alembic", ["1.13.1", "1.13.2"]),
            ("redis", ["5.0.4", "5.0.7"]), ("httpx", ["0.27.0"]), ("anyio", ["4.4.0"]), ("orjson", ["3.10.5"]),
            ("opentelemetry-api", ["1.25.0"]), ("opentelemetry-sdk", ["1.25.0"]), ("structlog", ["24.2.0"]),
            ("tenacity", ["8.4.1", "8.5.0"]), ("python-dateutil", ["2.9.0.post0"]), ("idna", ["3.7"]),
            ("h11", ["0.14.0"]), ("sniffio", ["1.3.1"]), ("typing-extensions", ["4.12.2"]), ("greenlet", ["3.0.3"]),
            ("prometheus-client", ["0.20.0"]), ("shopcore", ["0.19.2", "0.19.3"]), ("babel", ["2.15.0"])]
    via = {"starlette": "fastapi", "pydantic-core": "pydantic", "anyio": "httpx\n    #   starlette", "idna": "httpx",
           "h11": "uvicorn", "sniffio": "anyio", "greenlet": "sqlalchemy", "typing-extensions":
           "fastapi\n    #   pydantic\n    #   pydantic-core"}
    L = ["#", "# This file is autogenerated by pip-compile with Python 3.11", "# by the following command:", "#",
         "#    pip-compile --generate-hashes=false --output-file=requirements.txt requirements.in", "#"]
    for name, vers in sorted(pkgs[:n]):
        line = plant if (plant and name == "pydantic") else f"{name}=={pick(vers)}"
        L.append(line)
        L.append(f"    # via {via.get(name, '-r requirements.in')}")
    return L


def dockerfile(base, go=False):
    if go:
        return ["# syntax=docker/dockerfile:1.7", "# Build stage: cgo is needed for libvips.",
                f"FROM {base} AS build", "WORKDIR /src", "RUN apt-get update && apt-get install -y --no-install-"
                "recommends libvips-dev pkg-config && rm -rf /var/lib/apt/lists/*", "COPY go.mod go.sum ./",
                "RUN --mount=type=cache,target=/go/pkg/mod go mod download", "COPY . .",
                "ARG VERSION=dev", "RUN --mount=type=cache,target=/root/.cache/go-build \\",
                "    CGO_ENABLED=1 go build -trimpath -ldflags \"-s -w -X main.version=${VERSION}\" -o /out/imgproc "
                "./cmd/imgproc", "", "FROM debian:bookworm-slim", "RUN apt-get update && apt-get install -y "
                "--no-install-recommends libvips42 ca-certificates tini && rm -rf /var/lib/apt/lists/*",
                "RUN useradd --system --uid 10001 --home /nonexistent app", "COPY --from=build /out/imgproc "
                "/usr/local/bin/imgproc", "USER 10001", "EXPOSE 8080 9100", "ENV VIPS_CONCURRENCY=2 "
                "GOMEMLIMIT=900MiB", "ENTRYPOINT [\"/usr/bin/tini\", \"--\"]", "CMD [\"imgproc\", \"serve\", "
                "\"--addr=:8080\"]", "HEALTHCHECK --interval=30s --timeout=3s CMD [\"imgproc\", \"ping\"]", "",
                "# Test stage, used by CI: docker build --target test .", "FROM build AS test",
                "RUN --mount=type=cache,target=/root/.cache/go-build go vet ./... && go test ./... -count=1",
                "", "# Notes:", "# - libvips in bookworm is 8.14; keep the runtime and build packages in step.",
                "# - GOMEMLIMIT is set below the container limit so the GC works before the OOM killer does."]
    return ["# syntax=docker/dockerfile:1.7", "#", "# Multi-stage build shared by the Python services. The build",
            "# context is the service directory (see .github/workflows/docker.yml); wheels are built",
            "# in a throwaway stage so the runtime image carries no compiler.", "#",
            "# Targets: runtime (default, deployed) and test (CI runs the suite inside it).", "",
            "ARG PIP_INDEX_URL=https://pypi.fernhill.internal/simple", f"FROM {base} AS base", "ENV PYTHONDONTWRITEBYTECODE=1 \\",
            "    PYTHONUNBUFFERED=1 \\", "    PIP_NO_CACHE_DIR=1 \\", "    PIP_DISABLE_PIP_VERSION_CHECK=1", "",
            "FROM base AS build", "RUN apt-get update && apt-get install -y --no-install-recommends build-essential "
            "libpq-dev && rm -rf /var/lib/apt/lists/*", "WORKDIR /build", "COPY requirements.txt .",
            "RUN pip wheel --wheel-dir /wheels -r requirements.txt", "", "FROM base AS runtime",
            "RUN apt-get update && apt-get install -y --no-install-recommends libpq5 tini curl && rm -rf "
            "/var/lib/apt/lists/*", "RUN useradd --system --uid 10001 --home /app app", "WORKDIR /app",
            "COPY --from=build /wheels /wheels", "RUN pip install --no-index --find-links=/wheels /wheels/* && "
            "rm -rf /wheels", "COPY app ./app", "COPY migrations ./migrations", "COPY alembic.ini gunicorn.conf.py ./",
            "USER 10001", "EXPOSE 8080 9100", f"ENV WEB_CONCURRENCY={pick([2, 3, 4])}",
            "ENTRYPOINT [\"/usr/bin/tini\", \"--\"]",
            "CMD [\"gunicorn\", \"app.main:app\", \"-c\", \"gunicorn.conf.py\"]",
            "HEALTHCHECK --interval=30s --timeout=3s --retries=3 CMD curl -fsS http://127.0.0.1:8080/healthz || exit 1",
            "", "FROM runtime AS test", "USER root", "COPY requirements-dev.txt .",
            "RUN pip install -r requirements-dev.txt", "COPY tests ./tests", "USER 10001",
            "CMD [\"python\", \"-m\", \"pytest\", \"-q\"]"]


def go_mod(plant=None):
    return ["module github.com/fernhill/storefront/imgproc", "", "go 1.22", "", "toolchain go1.22.5", "", "require (",
            "\t" + (plant or f"github.com/davidbyttow/govips/v2 v2.{pick([11, 12])}.{rng.randint(0, 3)}"),
            "\tgithub.com/go-chi/chi/v5 v5.0.12", "\tgithub.com/prometheus/client_golang v1.19.1",
            "\tgithub.com/redis/go-redis/v9 v9.5.3", "\tgithub.com/stretchr/testify v1.9.0",
            "\tgo.opentelemetry.io/otel v1.27.0", "\tgo.opentelemetry.io/otel/trace v1.27.0",
            "\tgolang.org/x/sync v0.7.0", "\tgocloud.dev v0.37.0", ")", "", "require (",
            "\tgithub.com/beorn7/perks v1.0.1 // indirect", "\tgithub.com/cespare/xxhash/v2 v2.3.0 // indirect",
            "\tgithub.com/davecgh/go-spew v1.1.1 // indirect", "\tgithub.com/dgryski/go-rendezvous "
            "v0.0.0-20200823014737-9f7001d12a5f // indirect", "\tgithub.com/go-logr/logr v1.4.2 // indirect",
            "\tgithub.com/go-logr/stdr v1.2.2 // indirect", "\tgithub.com/google/wire v0.6.0 // indirect",
            "\tgithub.com/googleapis/gax-go/v2 v2.12.4 // indirect", "\tgithub.com/pmezard/go-difflib v1.0.0 // "
            "indirect", "\tgithub.com/prometheus/client_model v0.6.1 // indirect", "\tgithub.com/prometheus/common "
            "v0.54.0 // indirect", "\tgithub.com/prometheus/procfs v0.15.1 // indirect", "\tgo.opencensus.io v0.24.0 "
            "// indirect", "\tgo.opentelemetry.io/otel/metric v1.27.0 // indirect", "\tgolang.org/x/image v0.18.0 "
            "// indirect", "\tgolang.org/x/net v0.26.0 // indirect", "\tgolang.org/x/sys v0.21.0 // indirect",
            "\tgolang.org/x/text v0.16.0 // indirect", "\tgolang.org/x/xerrors v0.0.0-20231012003039-104605ab7028 "
            "// indirect", "\tgoogle.golang.org/protobuf v1.34.2 // indirect", "\tgopkg.in/yaml.v3 v3.0.1 // "
            "indirect", ")"]


GO_PKGS = ["cmd/imgproc", "internal/cache", "internal/config", "internal/encode", "internal/fetch", "internal/httpapi",
           "internal/metrics", "internal/sign", "internal/transform", "internal/origin"]
GO_TESTS = {"internal/cache": ["TestLRUEvicts", "TestKeyIncludesVariant", "TestTTLHonoured"],
            "internal/config": ["TestDefaults", "TestEnvOverrides", "TestRejectsZeroQuality"],
            "internal/encode": ["TestEncodeJPEGProgressive", "TestEncodeWebPLossless", "TestEncodeWebPPreservesICC",
                                "TestEncodeAVIFFallback", "TestStripMetadata"],
            "internal/fetch": ["TestFetchFollowsOneRedirect", "TestFetchRejectsLargeBodies", "TestFetchTimeout"],
            "internal/httpapi": ["TestResizeHandler", "TestSignedURLRequired", "TestETagStable", "TestVaryAccept"],
            "internal/sign": ["TestHMACRoundTrip", "TestExpiredSignature"],
            "internal/transform": ["TestFitCover", "TestFitContain", "TestUpscaleRefused", "TestSmartCrop",
                                   "TestRotateFromEXIF"],
            "internal/origin": ["TestS3Keying", "TestOriginFallback"]}


def go_test_out(n, plant=None):
    mod = "github.com/fernhill/storefront/imgproc"
    out = []
    for pkg in GO_PKGS[:max(3, n)]:
        tests = GO_TESTS.get(pkg)
        if not tests:
            out.append(f"?   \t{mod}/{pkg}\t[no test files]")
            continue
        failed = False
        for t in tests:
            out.append(f"=== RUN   {t}")
            dur = rng.uniform(0, 0.6)
            if t == "TestEncodeWebPPreservesICC" and plant:
                out += [f"    encode_test.go:{rng.randint(120, 160)}: ICC profile missing after encode: got 0 bytes, "
                        f"want {rng.randint(3000, 3200)}", f"{plant} ({dur:.2f}s)"]
                failed = True
            else:
                if rng.random() < 0.3:
                    for sub in rng.sample(["small", "large", "cmyk", "grey", "alpha"], 2):
                        out.append(f"=== RUN   {t}/{sub}")
                    out.append(f"--- PASS: {t} ({dur:.2f}s)")
                else:
                    out.append(f"--- PASS: {t} ({dur:.2f}s)")
        if failed:
            out += ["FAIL", f"FAIL\t{mod}/{pkg}\t{rng.uniform(0.5, 3):.3f}s"]
        else:
            out += ["PASS", f"ok  \t{mod}/{pkg}\t{rng.uniform(0.01, 2):.3f}s"]
    if plant:
        out.append("FAIL")
    return "\n".join(out)


JEST_SUITES = ["src/features/orders/OrderTable.test.tsx", "src/features/orders/OrderDetail.test.tsx",
               "src/features/refunds/RefundDialog.test.tsx", "src/features/refunds/useRefund.test.ts",
               "src/features/coupons/CouponForm.test.tsx", "src/features/coupons/CouponList.test.tsx",
               "src/features/catalog/ProductEditor.test.tsx", "src/features/catalog/ImageUploader.test.tsx",
               "src/features/stock/StockGrid.test.tsx", "src/lib/api/client.test.ts", "src/lib/money.test.ts",
               "src/lib/dates.test.ts", "src/components/DataTable.test.tsx", "src/components/ConfirmModal.test.tsx",
               "src/auth/RequireRole.test.tsx", "src/features/customers/CustomerSearch.test.tsx"]


VERBOSE_CASES = {
    "RefundDialog": ["renders the order total and refundable amount", "prefills the full refundable amount",
                     "validates amount against the refundable balance", "requires a reason code",
                     "disables refund button when order is settled", "shows partial refund option for captured orders",
                     "submits the refund and closes", "shows the API error as a toast", "keeps focus trap while open",
                     "announces the result to screen readers", "formats amounts in the order currency",
                     "blocks double submit while pending"],
    "useRefund": ["posts to /v1/refunds with idempotency key", "invalidates the order query on success",
                  "maps 409 to a conflict message", "maps 422 field errors", "retries once on network error",
                  "does not retry on 4xx", "exposes isPending while in flight", "resets state on close"],
}


def jest_out(n, total_plant=None, fail_plant=None, only=None):
    suites = [s for s in JEST_SUITES if not only or only in s]
    suites = suites[:max(2, n)] if not only else suites
    out = []
    failed_s = 0
    fails = []
    if total_plant:
        fails = [("OrderTable", "paginates after filter change")]
    if fail_plant:
        fails = [tuple(fail_plant.split(" › "))]
    nt = 0
    for s in suites:
        comp = s.split("/")[-1].split(".")[0]
        f = [x for x in fails if x[0] == comp]
        k = len(VERBOSE_CASES.get(comp, [])) if only else rng.randint(4, 30)
        nt += 0 if only else k
        if f:
            failed_s += 1
            out.append(f" FAIL  {s} ({rng.uniform(1, 9):.3f} s)")
            for c, t in f:
                ln = rng.randint(91, 99)
                if c == "RefundDialog":
                    body = ["    expect(element).toBeDisabled()", "", "    Received element is not disabled:",
                            "      <button class=\"btn btn-danger\" type=\"button\" />", "",
                            f"      {ln - 1} |     await user.click(row);",
                            f"    > {ln} |     expect(screen.getByRole('button', {{ name: /refund/i }})).toBeDisabled();",
                            "         |                                                                ^"]
                else:
                    body = ["    expect(received).toHaveLength(expected)", "", "    Expected length: 25",
                            f"    Received length: {rng.randint(3, 24)}", "",
                            f"      {ln - 1} |     await user.selectOptions(status, 'settled');",
                            f"    > {ln} |     expect(await screen.findAllByRole('row')).toHaveLength(25);",
                            "         |                                                  ^"]
                out += [f"  ● {c} › {t}", ""] + body + ["", f"      at Object.<anonymous> ({s}:{ln}:51)", ""]
        else:
            out.append(f" PASS  {s}" + (f" ({rng.uniform(1, 9):.3f} s)" if rng.random() < 0.5 else ""))
        if only:
            names = VERBOSE_CASES.get(comp, [])
            nt += len(names)
            out.append(f"  {comp}")
            for name in names:
                failed_here = any(t == name for _, t in f)
                out.append(f"    {'✕' if failed_here else '✓'} {name} ({rng.randint(3, 240)} ms)")
            out.append("")
    tp = total_plant or f"{nt - len(fails)} passed, {nt} total"
    tests = (f"{len(fails)} failed, " if fails else "") + tp
    out += ["", f"Test Suites: {failed_s} failed, {len(suites) - failed_s} passed, {len(suites)} total"
            if failed_s else f"Test Suites: {len(suites)} passed, {len(suites)} total",
            f"Tests:       {tests}", "Snapshots:   {0} passed, {0} total".format(rng.randint(5, 20) if not only else 2),
            f"Time:        {rng.uniform(8, 60):.3f} s", "Ran all test suites" +
            (f" matching /{only}/i." if only else ".")]
    return "\n".join(out)


def package_json(plant=None):
    deps = {"@mantine/core": "^7.11.0", "@mantine/dates": "^7.11.0", "@tanstack/react-query":
            f"^5.{rng.randint(20, 39)}.{rng.randint(0, 9)}", "@tanstack/react-table": "^8.17.3", "axios": "^1.7.2",
            "dayjs": "^1.11.11", "react": "^18.3.1", "react-dom": "^18.3.1", "react-hook-form": "^7.52.0",
            "react-router-dom": "^6.24.0", "zod": "^3.23.8", "zustand": "^4.5.4"}
    dev = {"@testing-library/jest-dom": "^6.4.6", "@testing-library/react": "^16.0.0",
           "@testing-library/user-event": "^14.5.2", "@types/jest": "^29.5.12", "@types/react": "^18.3.3",
           "@typescript-eslint/eslint-plugin": "^7.14.1", "@vitejs/plugin-react": "^4.3.1", "eslint": "^8.57.0",
           "jest": "^29.7.0", "jest-environment-jsdom": "^29.7.0", "msw": "^2.3.1", "prettier": "^3.3.2",
           "ts-jest": "^29.1.5", "typescript": "~5.4.5", "vite": "^5.3.2"}
    L = ["{", '  "name": "@fernhill/backoffice-web",', '  "private": true,', f'  "version": "0.{rng.randint(60, 69)}.0",',
         '  "type": "module",', '  "engines": { "node": ">=20.11" },', '  "scripts": {',
         '    "dev": "vite",', '    "build": "tsc -b && vite build",', '    "lint": "eslint src --max-warnings 0",',
         '    "test": "jest",', '    "test:ci": "jest --ci --coverage --reporters=default --reporters=jest-junit",',
         '    "typecheck": "tsc --noEmit"', "  },", '  "dependencies": {']
    items = []
    for k, v in deps.items():
        items.append(f"    {plant}" if (plant and k == "@tanstack/react-query") else f'    "{k}": "{v}"')
    L += [x + ("," if i < len(items) - 1 else "") for i, x in enumerate(items)]
    L += ["  },", '  "devDependencies": {']
    dv = [f'    "{k}": "{v}"' for k, v in dev.items()]
    L += [x + ("," if i < len(dv) - 1 else "") for i, x in enumerate(dv)]
    L += ["  },", '  "jest": {', '    "preset": "ts-jest",', '    "testEnvironment": "jsdom",',
          '    "setupFilesAfterEnv": ["<rootDir>/src/test/setup.ts"]', "  }", "}"]
    return L


def go_config(plant=None):
    L = ["package config", "", "import (", '\t"fmt"', '\t"os"', '\t"strconv"', '\t"time"', ")", "",
         "// Defaults, overridden by IMGPROC_* environment variables (see Load).", "const (",
         f"\tDefaultJPEGQuality = {pick([80, 82, 85])}",
         "\t" + (plant or f"DefaultWebPQuality = {pick([70, 75, 80])}"),
         f"\tDefaultAVIFQuality = {pick([50, 55, 60])}", f"\tMaxSourcePixels = {pick([40, 50, 60])}_000_000",
         f"\tMaxOutputWidth = {pick([2400, 3000, 4096])}", f"\tFetchTimeout = {pick([4, 5, 8])} * time.Second",
         f"\tCacheTTL = {pick([24, 48, 168])} * time.Hour", f"\tVipsConcurrency = {pick([1, 2, 4])}", ")", "",
         "type Config struct {", "\tAddr            string", "\tOriginBucket    string", "\tSigningKey      []byte",
         "\tJPEGQuality     int", "\tWebPQuality     int", "\tAVIFQuality     int", "\tMaxSourcePixels int",
         "\tFetchTimeout    time.Duration", "\tRedisURL        string", "}", "",
         "func Load() (Config, error) {", "\tc := Config{", '\t\tAddr:            env("IMGPROC_ADDR", ":8080"),',
         '\t\tOriginBucket:    os.Getenv("IMGPROC_ORIGIN_BUCKET"),',
         '\t\tSigningKey:      []byte(os.Getenv("IMGPROC_SIGNING_KEY")),',
         '\t\tJPEGQuality:     envInt("IMGPROC_JPEG_QUALITY", DefaultJPEGQuality),',
         '\t\tWebPQuality:     envInt("IMGPROC_WEBP_QUALITY", DefaultWebPQuality),',
         '\t\tAVIFQuality:     envInt("IMGPROC_AVIF_QUALITY", DefaultAVIFQuality),',
         "\t\tMaxSourcePixels: MaxSourcePixels,", "\t\tFetchTimeout:    FetchTimeout,",
         '\t\tRedisURL:        env("IMGPROC_REDIS_URL", "redis://localhost:6379/3"),', "\t}",
         "\tif len(c.SigningKey) == 0 {", '\t\treturn c, fmt.Errorf("IMGPROC_SIGNING_KEY is required")', "\t}",
         "\tfor _, q := range []int{c.JPEGQuality, c.WebPQuality, c.AVIFQuality} {", "\t\tif q < 1 || q > 100 {",
         '\t\t\treturn c, fmt.Errorf("quality %d out of range", q)', "\t\t}", "\t}", "\treturn c, nil", "}", "",
         "func env(k, def string) string {", "\tif v := os.Getenv(k); v != \"\" {", "\t\treturn v", "\t}",
         "\treturn def", "}", "", "func envInt(k string, def int) int {", "\tv, err := strconv.Atoi(os.Getenv(k))",
         "\tif err != nil {", "\t\treturn def", "\t}", "\treturn v", "}"]
    return L


def alembic_out(n, plant=None):
    rev = plant.split()[1] if plant else hexs(12)
    parent = hexs(12)
    out = ["INFO  [alembic.runtime.migration] Context impl PostgresqlImpl.",
           "INFO  [alembic.runtime.migration] Will assume transactional DDL.",
           "Current revision(s) for postgresql+asyncpg://app_ro:***@pg-shop-prod-3.internal:5432/stockdb:",
           plant or f"Rev: {rev} (head)", f"Parent: {parent}",
           f"Path: /app/migrations/versions/{rev}_add_hold_expiry_index.py", "", "    add hold expiry index", "",
           f"    Revision ID: {rev}", f"    Revises: {parent}", f"    Create Date: {day(rng.randint(8, 30))} "
           f"{rng.randint(8, 18):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}.{rng.randint(100000, 999999)}",
           ""]
    msgs = ["add warehouse table", "levels: add reserved column", "add holds table", "index holds on sku",
            "add backorder flag", "drop legacy location column", "add updated_at triggers",
            "partition movements by month", "add sweep cursor table", "unique (sku, warehouse) on levels",
            "add audit columns", "widen sku to 32 chars", "add movements table", "levels: add on_order",
            "holds: add released_at", "add reservation audit view"]
    chain = [f"{parent} -> {rev} (head), add hold expiry index"]
    cur = parent
    for m in rng.sample(msgs, min(n, len(msgs)) - 1):
        down = hexs(12)
        chain.append(f"{down} -> {cur}, {m}")
        cur = down
    out += chain
    return "\n".join(out)


def rg_out(n, plant=None):
    files = ["app/senders/email.py", "app/senders/sms.py", "app/senders/push.py", "app/batches.py", "app/worker.py",
             "app/templates/registry.py", "tests/unit/test_batches.py", "tests/unit/test_email.py", "app/quiet_hours.py"]
    out = []
    for i in range(n):
        f = pick(files)
        ln = rng.randint(5, 300)
        txt = pick(["    for chunk in chunked(recipients, BATCH_SEND_SIZE):",
                    "from app.batches import BATCH_SEND_SIZE, BATCH_PAUSE_MS",
                    "    assert len(calls) == math.ceil(n / BATCH_SEND_SIZE)",
                    f"BATCH_PAUSE_MS = {pick([50, 100, 250])}",
                    "        await asyncio.sleep(BATCH_PAUSE_MS / 1000)",
                    "    # BATCH_SEND_SIZE is capped by the provider's bulk endpoint",
                    "    monkeypatch.setattr(batches, \"BATCH_SEND_SIZE\", 3)",
                    "def batch_size_for(channel: str) -> int:",
                    "        return min(BATCH_SEND_SIZE, provider.max_bulk)"])
        out.append(f"{f}:{ln}:{txt}")
    out.sort()
    pos = rng.randrange(len(out))
    out.insert(pos, f"app/batches.py:14:{plant or 'BATCH_SEND_SIZE = ' + str(pick([200, 250, 500]))}")
    return "\n".join(out)


def kubectl_pods(n):
    rows = []
    for s in SVCS + ["image-resizer", "admin-web"]:
        for _ in range(rng.randint(2, max(2, n))):
            rows.append([f"{s}-{hexs(9)}-{hexs(5)}", f"{pick([1, 1, 2])}/{pick([1, 2])}".replace("2/1", "1/1"),
                         "Running", pick([0, 0, 0, 1, 2]), f"{rng.randint(1, 14)}d",
                         f"10.42.{rng.randint(0, 9)}.{rng.randint(2, 250)}",
                         f"fh-prod-general-{hexs(5)}"])
    return table(["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE"], rows)


def kubectl_logs(n):
    out = []
    t = datetime.datetime(2026, 6, 30, 8, 12, 0)
    for _ in range(n):
        t += datetime.timedelta(seconds=rng.randint(1, 40), milliseconds=rng.randint(0, 999))
        lvl = pick(["info", "info", "info", "warning", "error"])
        ev = {"info": pick(["request finished", "outbox relay batch", "upstream call"]),
              "warning": pick(["upstream slow", "breaker half-open"]),
              "error": pick(["upstream timeout", "payment authorisation timed out"])}[lvl]
        out.append(json.dumps({"ts": t.isoformat(timespec="milliseconds") + "Z", "level": lvl, "event": ev,
                               "route": pick(["POST /v1/orders", "GET /v1/orders/{id}", "POST /v1/payments/authorise"]),
                               "duration_ms": rng.randint(20, 30000), "request_id": hexs(16),
                               "upstream": pick(["payment_gateway", "pricing", "inventory", "fraud_check"])}))
    return "\n".join(out)


def patch_out(files, n):
    out = []
    for f in files:
        out.append(f"M {f}")
    out += ["", "Applied. Running pre-commit on changed files:", "",
            "trim trailing whitespace.................................................Passed",
            "fix end of files.........................................................Passed",
            "check yaml...........................................(no files to check)Skipped",
            "ruff.....................................................................Passed",
            "ruff-format..............................................................Passed",
            "mypy.....................................................................Passed", "", "$ git diff --stat"]
    for f in files:
        out.append(f" {f} | {rng.randint(2, 30)} {'+' * rng.randint(1, 8)}{'-' * rng.randint(0, 5)}")
    out += [f" {len(files)} files changed, {rng.randint(5, 60)} insertions(+), {rng.randint(0, 20)} deletions(-)", "",
            "$ git diff"]
    for f in files:
        out += [f"diff --git a/{f} b/{f}", f"index {hexs(7)}..{hexs(7)} 100644", f"--- a/{f}", f"+++ b/{f}"]
        for _ in range(max(1, n // len(files))):
            a = rng.randint(10, 300)
            out.append(f"@@ -{a},7 +{a},{rng.randint(7, 12)} @@ {pick(['def evaluate(', 'async def handle(', 'class Repo:', 'def _merge('])}")
            for _ in range(rng.randint(5, 12)):
                op = pick([" ", " ", " ", "+", "-"])
                out.append(op + pick(["    if coupon.ends_at and coupon.ends_at < now:",
                                      "        rejected.append(coupon.code)", "        continue",
                                      "    now = clock.now()", "    result = StackResult(applied=[], rejected=[])",
                                      "    timeout = httpx.Timeout(settings.HTTP_TIMEOUT_S, connect=2.0)",
                                      "    return result", "    log.info(\"stack evaluated\", n=len(coupons))",
                                      "    async with session.begin():", "        await self._release(hold)",
                                      "    holds = await self._expired_holds(now, limit=500)"]))
    return "\n".join(out)


def workflow_yaml():
    return ["name: ci", "", "on:", "  pull_request:", "  push:", "    branches: [main, 'release/**']", "",
            "concurrency:", "  group: ci-${{ github.ref }}", "  cancel-in-progress: true", "", "jobs:",
            "  changes:", "    runs-on: ubuntu-22.04", "    outputs:",
            "      services: ${{ steps.filter.outputs.changes }}", "    steps:", "      - uses: actions/checkout@v4",
            "      - id: filter", "        uses: dorny/paths-filter@v3", "        with:",
            "          filters: .github/service-paths.yaml", "", "  python:", "    needs: changes",
            "    if: ${{ needs.changes.outputs.services != '[]' }}", "    runs-on: ubuntu-22.04",
            f"    timeout-minutes: {pick([20, 25, 30])}", "    strategy:", "      fail-fast: false", "      matrix:",
            "        service: ${{ fromJSON(needs.changes.outputs.services) }}", "    defaults:", "      run:",
            "        working-directory: services/${{ matrix.service }}", "    services:", "      postgres:",
            "        image: postgres:16", "        env: {POSTGRES_PASSWORD: app, POSTGRES_USER: app, POSTGRES_DB: app}",
            "        ports: ['5432:5432']", "      redis:", "        image: redis:7", "        ports: ['6379:6379']",
            "    steps:", "      - uses: actions/checkout@v4", "      - uses: actions/setup-python@v5", "        with:",
            "          python-version: '3.11'", "          cache: pip", "      - run: pip install -r requirements.txt "
            "-r requirements-dev.txt", "      - run: ruff check . && ruff format --check .", "      - run: mypy app",
            "      - run: python -m pytest -q --cov=app --cov-report=xml", "      - uses: codecov/codecov-action@v4",
            "", "  go:", "    needs: changes", "    runs-on: ubuntu-22.04", "    steps:",
            "      - uses: actions/checkout@v4", "      - uses: actions/setup-go@v5",
            "        with: {go-version-file: services/image-resizer/go.mod}",
            "      - run: sudo apt-get install -y libvips-dev", "      - run: go test ./... -race -count=1",
            "        working-directory: services/image-resizer", "", "  web:", "    runs-on: ubuntu-22.04",
            "    defaults: {run: {working-directory: apps/admin}}", "    steps:", "      - uses: actions/checkout@v4",
            "      - uses: actions/setup-node@v4", "        with: {node-version: 20, cache: npm, "
            "cache-dependency-path: apps/admin/package-lock.json}", "      - run: npm ci",
            "      - run: npm run lint && npm run typecheck", "      - run: npm run test:ci"]


def gh_checks(n):
    rows = []
    for name in ["ci / changes", "ci / python (promotions)", "ci / python (checkout)", "ci / python (pricing)",
                 "ci / go", "ci / web", "codecov/patch", "codecov/project", "lint-pr-title", "helm-lint",
                 "docker-build (promotions)", "docker-build (checkout)", "semgrep", "dependency-review"][:n]:
        st = pick(["pass", "pass", "pass", "pass", "pending", "fail"])
        rows.append([name, st, f"{rng.randint(0, 9)}m{rng.randint(0, 59)}s",
                     f"https://github.com/fernhill/storefront/actions/runs/{rng.randint(9100000000, 9199999999)}/job/"
                     f"{rng.randint(25000000000, 25999999999)}"])
    return table(["NAME", "STATUS", "ELAPSED", "URL"], rows, gap="\t")


def code_module(kind):
    if kind == "stacking":
        return ['"""Coupon stack evaluation."""', "", "from __future__ import annotations", "",
                "from dataclasses import dataclass, field", "from datetime import datetime", "",
                "from app.clock import Clock", "from app.models import Basket, Coupon", "",
                "MAX_STACKED_COUPONS = 2", "EXCLUSIVE_TAGS = frozenset({\"clearance\", \"gift-card\"})", "", "",
                "@dataclass", "class StackResult:", "    applied: list[str] = field(default_factory=list)",
                "    rejected: list[str] = field(default_factory=list)", "    reasons: dict[str, str] = "
                "field(default_factory=dict)", "", "", "def evaluate_stack(basket: Basket, coupons: list[Coupon], "
                "clock: Clock | None = None) -> StackResult:", "    clock = clock or Clock()",
                "    now: datetime = clock.now()", "    result = StackResult()",
                "    for coupon in sorted(coupons, key=lambda c: c.priority):",
                "        if len(result.applied) >= MAX_STACKED_COUPONS:",
                "            result.rejected.append(coupon.code)", "            result.reasons[coupon.code] = "
                "\"stack_limit\"", "            continue", "        if coupon.starts_at and coupon.starts_at > now:",
                "            result.rejected.append(coupon.code)",
                "            result.reasons[coupon.code] = \"not_started\"", "            continue",
                "        if EXCLUSIVE_TAGS & basket.tags and not coupon.allows_exclusive:",
                "            result.rejected.append(coupon.code)",
                "            result.reasons[coupon.code] = \"exclusive_items\"", "            continue",
                "        if not coupon.eligible(basket):", "            result.rejected.append(coupon.code)",
                "            result.reasons[coupon.code] = \"ineligible\"", "            continue",
                "        result.applied.append(coupon.code)", "    return result"]
    if kind == "tiered":
        return ['"""Tiered (volume) discounts."""', "", "from decimal import Decimal", "",
                "from app.money import quantize", "from app.models import Line, PriceList, Tier", "", "",
                "def eligible_lines(lines: list[Line], price_list: PriceList) -> list[Line]:",
                "    return [l for l in lines if l.sku in price_list.tiered_skus]", "", "",
                "def _band_for(qty: int, tiers: list[Tier]) -> Tier | None:", "    band = None",
                "    for tier in tiers:  # tiers are unsorted in the price list payload",
                "        if qty >= tier.min_qty and (band is None or tier.min_qty > band.min_qty):",
                "            band = tier", "    return band", "", "",
                "def apply_tiered_discounts(lines: list[Line], price_list: PriceList) -> list[Line]:",
                "    out = []", "    for line in lines:", "        tiers = price_list.tiers_for(line.sku)  # "
                "deep-copies the tier list", "        band = _band_for(line.qty, tiers)", "        if band is None:",
                "            out.append(line)", "            continue",
                "        unit = quantize(line.unit_price * (Decimal(100) - band.percent_off) / 100)",
                "        out.append(line.model_copy(update={\"unit_price\": unit, \"tier\": band.name}))",
                "    return out"]
    return ['"""Stock holds and the expiry sweeper."""', "", "from datetime import datetime, timedelta", "",
            "from sqlalchemy import select, update", "", "from app.db import session_scope",
            "from app.models import Hold, Level", "", "SWEEP_LIMIT = 500", "", "",
            "class Sweeper:", "    def __init__(self, clock, repo):", "        self.clock = clock",
            "        self.repo = repo", "", "    async def run_once(self) -> int:", "        now = self.clock.now()",
            "        async with session_scope() as s:", "            holds = (await s.scalars(",
            "                select(Hold).where(Hold.expires_at < now).limit(SWEEP_LIMIT)",
            "            )).all()", "            for hold in holds:", "                await s.execute(",
            "                    update(Level)", "                    .where(Level.sku == hold.sku, "
            "Level.warehouse == hold.warehouse)", "                    .values(reserved=Level.reserved - hold.qty)",
            "                )", "                hold.released_at = now", "        return len(holds)", "", "",
            "class HoldService:", "    def __init__(self, repo, clock, hold_s: int):", "        self.repo = repo",
            "        self.clock = clock", "        self.hold_s = hold_s", "",
            "    async def place(self, sku: str, warehouse: str, qty: int) -> Hold:",
            "        now = self.clock.now()", "        async with session_scope() as s:",
            "            level = await self.repo.level_for_update(s, sku, warehouse)",
            "            if level.on_hand - level.reserved < qty:",
            "                raise OutOfStock(sku, warehouse, wanted=qty, free=level.on_hand - level.reserved)",
            "            level.reserved += qty",
            "            hold = Hold(sku=sku, warehouse=warehouse, qty=qty,",
            "                        expires_at=now + timedelta(seconds=self.hold_s))", "            s.add(hold)",
            "        await self.repo.refresh_cached_level(sku, warehouse)", "        return hold", "",
            "    async def release(self, hold_id: int) -> None:", "        async with session_scope() as s:",
            "            hold = await s.get(Hold, hold_id, with_for_update=True)",
            "            if hold is None or hold.released_at is not None:", "                return",
            "            await s.execute(", "                update(Level)",
            "                .where(Level.sku == hold.sku, Level.warehouse == hold.warehouse)",
            "                .values(reserved=Level.reserved - hold.qty)", "            )",
            "            hold.released_at = self.clock.now()",
            "        await self.repo.refresh_cached_level(hold.sku, hold.warehouse)"]


# ---------------------------------------------------------------------------
# The conversation.

items, facts = [], []
fact_turns, fact_ids = {}, {}
turn_no = 0
call_no = 0
topic = "kickoff"


def new_turn(t):
    global turn_no, topic
    turn_no += 1
    topic = t


def record(content, source):
    table_ = P if source == "tool" else M
    for label, text in table_.items():
        if label not in fact_turns and text in content:
            fid = f"f{len(facts) + 1:03d}"
            facts.append({"id": fid, "turn": turn_no, "topic": topic, "source": source, "text": text})
            fact_turns[label] = turn_no
            fact_ids[label] = fid
            schedule(label)


def U(text):
    assert not any(i["turn"] == turn_no for i in items), "a turn starts with the user's message"
    items.append({"turn": turn_no, "role": "user", "kind": "message", "content": text})
    record(text, "message")


def A(text):
    items.append({"turn": turn_no, "role": "assistant", "kind": "message", "content": text})
    record(text, "message")


def tool(name, args, output, expect=()):
    global call_no
    held = {l for l, v in P.items() if v in output} | {l for l, v in M.items() if v in output}
    assert held == set(expect), (turn_no, name, args, held, expect)
    assert clean(json.dumps(args, ensure_ascii=False)), (turn_no, args)
    call_no += 1
    cid = f"call_{call_no:03d}"
    items.append({"turn": turn_no, "role": "assistant", "kind": "tool_call",
                  "content": json.dumps(args, ensure_ascii=False), "tool_name": name, "call_id": cid})
    items.append({"turn": turn_no, "role": "tool", "kind": "tool_result",
                  "content": output, "tool_name": name, "call_id": cid})
    record(output, "tool")


def sh(cmd, output, expect=()):
    tool("bash", {"cmd": cmd}, output, expect)


def read(path, lines, expect=()):
    tool("read_file", {"path": path}, numbered(lines), expect)


def exp(label):
    return (label,) if label else ()


def sdir(svc):
    return "apps/admin" if svc == "admin" else f"services/{svc}"


# ---------------------------------------------------------------------------
# Calls. Each takes the service and, for a planted output, the label.

def c_settings(svc, label=None):
    read(f"services/{svc}/app/settings.py", _lines(lambda: settings_py(svc, P[label] if label else None), label),
         exp(label))


def _lines(make, label):
    for _ in range(3000):
        lines = make()
        out = numbered(lines)
        held = {l for l, v in P.items() if v in out} | {l for l, v in M.items() if v in out}
        if held == set(exp(label)) and not (label and re.search(subject_of(label), out, re.I)):
            return lines
    raise RuntimeError(label)


def c_pytest(svc, label=None, fail=None, noise_fails=0, extra=""):
    sumplant = P[label] if label and label not in FAILURE_BODY else None
    fl = label if label in FAILURE_BODY else None
    out = fmake(label, lambda k: pytest_out(svc, k, fl, sumplant, noise_fails), 20, 4500, 8500)
    sh(f"cd services/{svc} && python -m pytest -p no:randomly{extra}", out, exp(label))


def c_blame(svc, path, code_lines, target, label=None):
    def make(k):
        return blame_out(code_lines, target, P[label] if label else None)
    out = fmake(label, make, 1, 1300, 9800)
    sh(f"cd services/{svc} && git blame --date=iso {path}", out, exp(label))


def c_gitlog(svc, label=None, subject=None, n=60):
    out = fmake(label, lambda k: git_log(k, SUBJECTS, P[label] if label else None, subject), n, 3500, 6500)
    sh(f"git log --format='%h %ad %an  %s' --date=short -n 60 -- {sdir(svc)}", out, exp(label))


def c_values(svc, label=None, kind=None):
    read(f"deploy/charts/{svc}/values-prod.yaml", _lines(lambda: values_yaml(P[label] if label else None, kind), label),
         exp(label))


def c_helm_history(svc, label=None):
    out = fmake(label, lambda k: helm_history(k, P[label] if label else None), 20, 1500, 4000)
    sh(f"helm history {svc} -n shop-prod --kube-context fh-prod --max 20", out, exp(label))


def c_health(svc, label=None, env="shop-prod"):
    out = fmake(label, lambda k: health_json(k, P[label] if label else None, svc), 10, 1300, 4000)
    sh(f"kubectl --context fh-prod -n {env} exec deploy/{svc} -- curl -s localhost:8080/healthz?verbose=1 | jq .",
       out, exp(label))


def c_profile(svc, func, label=None, sort="cumulative", after=False):
    out = fmake(label, lambda k: pstats_out(k, func, P[label] if label else None, sort,
                                             rng.uniform(8, 15) if after else None), 16, 1300, 4000)
    sh(f"cd services/{svc} && python -m cProfile -o /tmp/prof.out scripts/replay_traffic.py "
       f"--fixture fixtures/prod_sample_0629.jsonl && python -c \"import pstats; "
       f"pstats.Stats('/tmp/prof.out').sort_stats('{sort}').print_stats(20)\"", out, exp(label))


def c_requirements(svc, label=None):
    read(f"services/{svc}/requirements.txt", _lines(lambda: requirements_txt(26, P[label] if label else None), label),
         exp(label))


def c_dockerfile(svc, label=None, go=False):
    def base():
        if label:
            return P[label]
        if go:
            return f"golang:1.22.{pick([0, 1, 2])}-bookworm"
        return f"python:3.{pick([11, 12])}.{rng.randint(0, 6)}-slim-bookworm"
    read(f"services/{svc}/Dockerfile", _lines(lambda: dockerfile(base(), go), label), exp(label))


def c_gotest(label=None):
    out = fmake(label, lambda k: go_test_out(k, P[label] if label else None), 10, 1300, 6000)
    sh("cd services/image-resizer && go test ./... -v -count=1", out, exp(label))


def c_jest(label=None, only=None):
    tp = P[label] if label == "AD2" else None
    fp = P[label] if label == "AD3" else None
    out = fmake(label, lambda k: jest_out(k, tp, fp, only), 16, 1200, 6000)
    sh(f"cd apps/admin && npx jest --ci{' ' + only if only else ''}", out, exp(label))


def c_alembic(svc, label=None):
    out = fmake(label, lambda k: alembic_out(k, P[label] if label else None), 12, 1200, 3500)
    n = out.count(" -> ")
    sh(f"cd services/{svc} && alembic -x env=prod current -v && alembic -x env=prod history -r -{n}:current", out,
       exp(label))


def c_rg(svc, label=None):
    out = fmake(label, lambda k: rg_out(k, P[label] if label else None), 18, 1300, 3500)
    sh(f"cd services/{svc} && rg -n 'BATCH_(SEND|PAUSE)|batch_size_for'", out, exp(label))


def c_search_stats(label=None):
    def make(k):
        shards = [{"shard": i, "primary": True, "docs": rng.randint(200000, 400000),
                   "size": f"{rng.uniform(300, 900):.1f}mb", "node": f"os-data-{rng.randint(0, 5)}"}
                  for i in range(k)]
        body = ["{", '  "index": "products_v42",', '  "aliases": ["products"],',
                f'  {P[label] if label else chr(34) + "doc_count" + chr(34) + ": " + str(rng.randint(1700000, 1990000))},',
                f'  "deleted_docs": {rng.randint(1000, 90000)},', f'  "store_size": "{rng.uniform(2, 6):.2f}gb",',
                f'  "refresh_interval": "{pick(["1s", "5s", "30s"])}",',
                f'  "last_reindex": "{day(rng.randint(1, 9))}T02:{rng.randint(10, 59)}:00Z",',
                f'  "synonyms_version": "{day(rng.randint(10, 40))}",',
                '  "shards": ' + json.dumps(shards, indent=2).replace("\n", "\n  "), "}"]
        return "\n".join(body)
    out = fmake(label, make, 6, 1300, 4000)
    sh("curl -s -H 'X-Internal-Token: $TOKEN' http://search.shop-staging.svc.cluster.local:8080/internal/index-stats "
       "| jq .", out, exp(label))


def c_noise(kind, svc=None):
    if kind == "pods":
        sh("kubectl --context fh-prod -n shop-prod get pods -o wide", fmake(None, kubectl_pods, 3, 1300, 7000))
    elif kind == "logs":
        sh(f"kubectl --context fh-prod -n shop-prod logs deploy/{svc} --since=30m | tail -n 40",
           fmake(None, kubectl_logs, 30, 4500, 8000))
    elif kind == "workflow":
        read(".github/workflows/ci.yml", _lines(workflow_yaml, None))
    elif kind == "checks":
        sh("gh pr checks", fmake(None, gh_checks, 14, 1200, 4000))
    elif kind == "tree":
        sh("git status -sb && ls services apps deploy/charts && git log --oneline -n 25",
           N(lambda: "## main...origin/main\n\nservices:\ncart  checkout  image-resizer  inventory  notifications  "
                     "pricing  promotions  search  shopcore\n\napps:\nadmin\n\ndeploy/charts:\ncart  checkout  "
                     "fastapi-service  image-resizer  inventory  notifications  pricing  promotions  search\n\n" +
                     "\n".join(f"{hexs(7)} {pick(SUBJECTS)}" for _ in range(25)) + "\n" +
                     "\n".join(f"{hexs(7)} {pick(SUBJECTS)}" for _ in range(12))))


def c_patch(files, what):
    tool("apply_patch", {"files": files, "description": what},
         fmake(None, lambda k: patch_out(files, k), 6, 2800, 7000))


def c_read_code(svc, path, kind):
    read(f"services/{svc}/{path}", _lines(lambda: code_module(kind), None))


def c_git_show(svc):
    def make(k):
        h = hexs(40)
        out = [f"commit {h}", f"Author: {(a := pick(AUTHORS))} <{EMAILS[a]}>",
               f"Date:   {day(rng.randint(3, 40)).strftime('%a %b %d')} {rng.randint(8, 18)}:{rng.randint(10, 59)}:00 "
               "2026 +0100", "", f"    {pick(SUBJECTS)}", "", "    Reviewed-by: " + pick(AUTHORS), ""]
        out.append(patch_out([f"app/{pick(['api', 'repository', 'service', 'models'])}.py"], k).split("$ git diff\n")[1])
        return "\n".join(out)
    sh(f"git log -1 --format=%H -- {sdir(svc)} | xargs git show --stat --patch", fmake(None, make, 4, 1300, 5000))


# ---------------------------------------------------------------------------
# Recall questions (scheduled when their fact is recorded).

QUESTIONS = [
    # (which, label, earliest turn, question, where the answer is)
    ("probe", "CO1", 50, "What was HTTP_TIMEOUT_S set to in the checkout settings.py we read this morning?",
     "the checkout settings read"),
    ("probe", "PR1", 55, "What's RETRY_LIMIT in services/pricing/app/settings.py?", "the pricing settings read"),
    ("probe", "PM2", 45, "Which test failed when we ran the promotions test suite first thing?",
     "the first promotions test run"),
    ("probe", "CO2", 62, "In the checkout git log, what was the hash of the commit that raised the payment gateway "
                         "timeout for the 3DS challenge flow?", "the checkout git log"),
    ("probe", "IN2", 70, "What revision did alembic current report as head for the inventory database?",
     "the inventory alembic output"),
    ("probe", "IR2", 90, "Which govips version does the image-resizer's go.mod require?", "the go.mod read"),
    ("probe", "AD1", 95, "What version of @tanstack/react-query is in the admin package.json?",
     "the admin package.json read"),
    ("probe", "SE2", 80, "What doc_count did the search index-stats endpoint return on staging?",
     "the search index-stats response"),
    ("probe", "NO2", 100, "What base image is the notifications Dockerfile built FROM?",
     "the notifications Dockerfile read"),
    ("probe", "CA3", 75, "In the git blame of the cart constants, which commit last touched the MAX_LINE_ITEMS line?",
     "the cart blame output"),
    ("probe", "release", 110, "Which storefront release did I say this fix has to go out in?",
     "your message early in the session"),
    ("heldout", "CA1", 60, "How long does the cart service cache things for? I mean the TTL in its cfg.",
     "the cart settings read"),
    ("heldout", "IN1", 66, "Remind me, how many DB connections does the inventory svc keep in its pool?",
     "the inventory settings read"),
    ("heldout", "SE1", 76, "Product team asks how many results a client can get back in one page from the search "
                           "API. What's our cap in the search service config?", "the search settings read"),
    ("heldout", "PM1", 48, "How many requests a minute does the promo service let through before it starts "
                           "throttling?", "the promotions settings read"),
    ("heldout", "IR1", 84, "Which Go test was red in the resizer earlier today?", "the go test run"),
    ("heldout", "AD2", 92, "For the FE: how many of the jest specs passed on that first full run, and out of how "
                           "many?", "the first admin jest run"),
    ("heldout", "CO3", 57, "What app version does helm say is live for checkout in the prod k8s cluster right now?",
     "the checkout helm history"),
    ("heldout", "PR2", 68, "Going back to the profiling: how many seconds in total went into the tiered discount "
                           "function in the pricing service, before any change?", "the pricing profile"),
    ("heldout", "NO1", 98, "What's the wait between retries for the notifs service, in milliseconds?",
     "the notifications settings read"),
    ("heldout", "IN4", 104, "Ops are asking about OOM headroom. What's the mem limit on the inventory pods in the prod "
                            "chart?", "the inventory prod values read"),
    ("heldout", "ticket", 114, "What was the Jira key for this work again? Need it for the changelog entry.",
     "your first message"),
]
OFF_TOPIC = [("heldout", 88, "Unrelated, but do you have a good name for our team's fantasy football league? We "
                             "keep losing to the search squad.",
              "Something like 'Ninety Minutes of Latency' or 'Cache Me Offside'; the second one seems right for a "
              "backend crowd.")]

ANSWER = ["That value is in {what}; scroll back to that output and you will find it exactly as it was printed.",
          "I would rather not quote it from memory. It is in {what}; the line is there verbatim.",
          "It was in {what}. Look at that output rather than my recollection; I do not want to misquote it.",
          "Check {what}; the exact figure is in that output and I would only be guessing otherwise."]

probes = {"probe": [], "heldout": []}
pending = []
last_was_question = False
MIN_GAP = 40


def schedule(label):
    for order, (which, l, at_, q, what) in enumerate(QUESTIONS):
        if l == label:
            pending.append([max(45, at_, fact_turns[l] + MIN_GAP), order, (which, l, q, what)])


for _k, (_w, _at, _q, _a) in enumerate(OFF_TOPIC):
    pending.append([_at, 100 + _k, (_w, None, _q, _a)])


def ask(spec):
    global last_was_question
    which, label, q, what = spec
    new_turn("recall" if label else "off-topic")
    U(q)
    if label is None:
        probes[which].append({"kind": "recall", "turn": turn_no, "facts": []})
        A(what)
    else:
        assert turn_no - fact_turns[label] >= MIN_GAP, (q, label)
        probes[which].append({"kind": "recall", "turn": turn_no, "facts": [fact_ids[label]]})
        A(pick(ANSWER).format(what=what))
    last_was_question = True


def maybe_ask():
    global last_was_question
    if last_was_question:
        last_was_question = False
        return
    due = sorted(p for p in pending if p[0] <= turn_no + 1)
    if due:
        pending.remove(due[0])
        ask(due[0][2])


# ---------------------------------------------------------------------------
# Replies (no tool value is ever repeated).

REPLY = {
    "settings": ["That is {svc}'s settings module: the HTTP client block, the database pool, cache, API limits and "
                 "workers, then upstream URLs and flags. Env overrides are applied at the bottom, so the chart can "
                 "still change any of these per environment.",
                 "Read it. {svc} follows the same settings layout as the other services; the overrides hook at the end "
                 "means what we see here is the default, not necessarily what prod runs with.",
                 "Here is {svc}'s settings file. Nothing unusual in its shape; the interesting parts for us are the "
                 "timeout and retry block at the top and the upstream URLs."],
    "pytest": ["The {svc} suite ran; the summary line is at the bottom of the output. I will keep the failures in mind "
               "as we go rather than chase them all now.",
               "That is the {svc} run. The failure section shows the assertion and the line; the rest of the suite "
               "is in the dots above it.",
               "Done for {svc}. The short summary at the end lists what broke, and the counts are on the last line."],
    "blame": ["The blame is above. Most of the file comes from a handful of older commits; the line you asked about "
              "has its own, more recent commit.",
              "Blame output for {svc} is in. I can `git show` any of those commits if you want the context."],
    "gitlog": ["That is the recent history for {svc}. The commit you were thinking of is in the list with its date "
               "and author.",
               "Here is {svc}'s log. Mostly routine changes; one or two look related to what we are chasing."],
    "values": ["Those are {svc}'s prod values. Per your rule I will only read them on this branch; any change goes "
               "via the release branch.",
               "Read {svc}'s prod values: resources, autoscaling, env and probes. Not touching them here."],
    "helm": ["That is the release history for {svc}; the top row is the deployed revision and the rest are "
             "superseded.", "Helm history for {svc} is above. No failed upgrades in that window."],
    "health": ["The health response for {svc} is in: dependency status, latency percentiles and per-route counts.",
               "{svc} reports healthy overall; the latency block and dependency breakers are in the output."],
    "profile": ["The profile for {svc} is above, sorted as asked. The top rows are where the time goes; the "
                "tier lookup stands out.", "Profile done. The hot path in {svc} is visible in the first few rows."],
    "req": ["That is {svc}'s pinned requirements list from pip-compile. Per your rule, no version changes go in with "
            "the fix.", "Read the pins for {svc}. I will leave every version alone in this PR."],
    "docker": ["{svc}'s Dockerfile: a build stage, a slim runtime stage running as a non-root user, and a healthcheck.",
               "That is the Dockerfile for {svc}. The base image line is at the top."],
    "gotest": ["The resizer tests ran; one package fails, the rest pass. The failing assertion is printed just above "
               "its FAIL line.", "Go tests done; the failure is in the encoding package."],
    "jest": ["The admin jest run is done; the failing spec and its assertion are printed under its suite, and the "
             "totals are at the end.", "Jest finished for the admin app. The summary lines are at the bottom."],
    "pkg": ["That is the admin app's package.json. I will not change any version in it as part of a fix."],
    "gomod": ["That is the resizer's go.mod: the direct requirements first, then the indirect ones."],
    "goconf": ["The resizer's config defaults are the const block at the top; Load lets IMGPROC_* variables override "
               "them."],
    "alembic": ["The inventory database is at the head revision the repo expects; the history shows the chain below "
                "it.", "Alembic output is above; current matches head, so no pending migrations in prod."],
    "rg": ["Those are all the places that touch the batching constants in notifications; the definition is in "
           "app/batches.py."],
    "stats": ["That is the staging index stats: alias, counts, size, and the shard layout."],
    "pods": ["Everything is Running in shop-prod; a couple of pods have restarted in the last days, nothing fresh."],
    "logs": ["The recent log lines for {svc}: mostly normal request logs, with a cluster of upstream timeouts."],
    "workflow": ["That is the CI workflow: a paths filter decides which service jobs run, then python, go and web "
                 "jobs."],
    "checks": ["The PR checks: most are green, a couple still pending. I will keep an eye on them."],
    "tree": ["Clean tree on main. The services, the admin app and the charts are where the system prompt says."],
    "patch": ["Patch applied and the pre-commit hooks pass. The diff is above.",
              "Applied. Hooks are green; the change is limited to the files listed."],
    "code": ["That is the module. The logic we care about is in the main loop."],
    "show": ["That is the last commit touching {svc}, with its diff."],
}


def reply(kind, svc):
    return pick(REPLY[kind]).format(svc=svc)


def work(t, msg, calls, kind, svc=None, answer=None):
    global last_was_question
    maybe_ask()
    last_was_question = False
    new_turn(t)
    U(msg)
    for c in calls:
        c()
    A(answer if answer else reply(kind, svc or "the service"))


def chat(t, msg, answer):
    global last_was_question
    maybe_ask()
    last_was_question = False
    new_turn(t)
    U(msg)
    A(answer)


CART_CONST = ['"""Limits and defaults shared by the API and the workers."""', "", "from decimal import Decimal", "",
              "MAX_LINE_ITEMS = 250", "MAX_LINE_QUANTITY = 99", "MIN_LINE_QUANTITY = 1",
              "GUEST_SESSION_TTL_H = 72", "SAVED_FOR_LATER_LIMIT = 100", "", "# Recalculation",
              "RECALC_DEBOUNCE_MS = 300", "PRICE_DRIFT_TOLERANCE = Decimal(\"0.01\")",
              "PROMOTIONS_BATCH_LIMIT = 20", "", "# Events", "EVENT_LINE_ADDED = \"line.added\"",
              "EVENT_LINE_REMOVED = \"line.removed\"", "EVENT_MERGED = \"session.merged\"",
              "EVENT_ABANDONED = \"session.abandoned\"", "", "# Errors (problem+json type suffixes)",
              "ERR_TOO_MANY_LINES = \"too-many-lines\"", "ERR_QTY_OUT_OF_RANGE = \"quantity-out-of-range\"",
              "ERR_SKU_UNKNOWN = \"sku-unknown\"", "ERR_STALE_PRICE = \"stale-price\"",
              "ERR_OUT_OF_STOCK = \"out-of-stock\"", "", "__all__ = [name for name in dir() if name.isupper()]"]



# ---------------------------------------------------------------------------
# The day.

new_turn("kickoff")
U("Morning! I'm Nadia Okonjo-Brandt, backend on the payments-core squad. I'm picking up SHOP-4471 today: coupons "
  "that already expired still stack at checkout, and since Friday checkout also throws 504s on some 3DS payments "
  "(we had INC-20931 for it over the weekend). Let's get our bearings in the monorepo first.")
c_noise("tree")
A("Clean checkout of main. The Python services, the Go resizer, the admin app and the charts are all there. We can "
  "start from promotions for the stacking bug and then look at checkout for the timeouts.")

new_turn("rules")
U("Before we touch anything, some rules for today. First: " + RULES[0][1] + ". Show me the running pods in prod so "
  "I know what's deployed.")
c_noise("pods")
A("Understood: a fix PR carries no dependency bumps; any version change goes in a separate PR. Everything in "
  "shop-prod is running.")

new_turn("rules")
U("Second: " + RULES[1][1] + ". Show me the CI workflow too, I never remember how the service matrix is built.")
c_noise("workflow")
A("Agreed: no edits to values-prod.yaml here; prod values change only through the release branch. The workflow "
  "builds the service matrix from a paths filter, so only touched services run.")

new_turn("promotions")
U("Third: " + RULES[2][1] + ". OK, run the promotions test suite.")
c_pytest("promotions", "PM2")
A("Noted: any skip or xfail gets a ticket id in its reason. The promotions run has a failure in the stacking tests; "
  "that looks like our bug reproduced in a unit test already.")

work("promotions", "Nice, that's the bug then. Read the promotions stacking module, app/rules/stacking.py.",
     [lambda: c_read_code("promotions", "app/rules/stacking.py", "stacking")], "code", "promotions",
     "There it is: the loop checks the stack limit, the start date, exclusive tags and eligibility, but never the "
     "coupon's end date. An expired coupon falls through to applied.")
work("promotions", "And the promotions settings, services/promotions/app/settings.py.",
     [lambda: c_settings("promotions", "PM1")], "settings", "promotions")
work("promotions", "Who wrote the stack limit line? git blame app/rules/stacking.py in promotions.",
     [lambda: c_blame("promotions", "app/rules/stacking.py", code_module("stacking"), "MAX_STACKED_COUPONS = 2",
                      "PM4")], "blame", "promotions")
work("checkout", "Let's look at checkout now. Run the checkout test suite.",
     [lambda: c_pytest("checkout", "CO4")], "pytest", "checkout",
     "The checkout run has a failing integration test: the second request with the same idempotency key gets a "
     "timeout problem response instead of the stored order. That fits the 3DS story.")
work("checkout", "Read the checkout settings, services/checkout/app/settings.py.",
     [lambda: c_settings("checkout", "CO1")], "settings", "checkout")
work("checkout", "Tail the prod logs for checkout, last 30 minutes.", [lambda: c_noise("logs", "checkout")], "logs",
     "checkout")
work("checkout", "Show me the git log for services/checkout, I want to see when the timeout last changed.",
     [lambda: c_gitlog("checkout", "CO2", "raise payment gateway timeout for 3DS challenge flow")], "gitlog",
     "checkout")
work("checkout", "What's actually deployed? helm history for checkout in prod.",
     [lambda: c_helm_history("checkout", "CO3")], "helm", "checkout")
work("checkout", "Hit the checkout healthz in prod with verbose on.", [lambda: c_health("checkout", "CO5")],
     "health", "checkout")
chat("planning", "Context: this has to go out in storefront release 3.41.0, it's the last train before the summer "
     "freeze. Kenji Aldous from promotions will review the stacking part.",
     "Good to know. I will keep the stacking fix and the checkout timeout change as separate commits so the "
     "promotions part is easy to review on its own.")
work("cart", "The cart also calls promotions when it recalculates. Run the cart test suite.",
     [lambda: c_pytest("cart", "CA2")], "pytest", "cart")
work("cart", "Read services/cart/app/settings.py.", [lambda: c_settings("cart", "CA1")], "settings", "cart")
work("cart", "Blame the cart constants file, app/constants.py. There was a change to the line limit recently.",
     [lambda: c_blame("cart", "app/constants.py", CART_CONST, "MAX_LINE_ITEMS = 250", "CA3")], "blame", "cart")
work("cart", "Read the cart's prod values, deploy/charts/cart/values-prod.yaml. Read only, don't change it.",
     [lambda: c_values("cart", "CA4", "hpa")], "values", "cart")
work("promotions", "Back to promotions. Show me the recent git log there.", [lambda: c_gitlog("promotions")],
     "gitlog", "promotions")
work("promotions", "Patch promotions: reject coupons whose ends_at is before now, with reason \"expired\", before "
     "the eligibility check.", [lambda: c_patch(["services/promotions/app/rules/stacking.py"], "reject coupons past ends_at with reason expired")], "patch")
work("promotions", "Read the promotions prod values as well, deploy/charts/promotions/values-prod.yaml.",
     [lambda: c_values("promotions", "PM5", "hpa")], "values", "promotions")
work("pricing", "Pricing is next; stacking feeds into tiered prices. Run the pricing test suite.",
     [lambda: c_pytest("pricing", "PR3")], "pytest", "pricing")
work("pricing", "Read the pricing settings, services/pricing/app/settings.py.",
     [lambda: c_settings("pricing", "PR1")], "settings", "pricing")
work("pricing", "Pricing quotes are slow when a basket has many tiered SKUs. Profile the pricing service with the "
     "replay script, sorted by cumulative time.",
     [lambda: c_profile("pricing", "apply_tiered_discounts", "PR2")], "profile", "pricing")
work("pricing", "Show me the pricing tiered module, app/rules/tiered.py.",
     [lambda: c_read_code("pricing", "app/rules/tiered.py", "tiered")], "code", "pricing",
     "The cost is in tiers_for deep-copying the tier list for every line and _band_for scanning unsorted tiers. "
     "Sorting once per price list and not copying would remove most of it.")
work("pricing", "Read services/pricing/requirements.txt, I want to know which pydantic we're on there.",
     [lambda: c_requirements("pricing", "PR4")], "req", "pricing")
chat("planning", "When could this realistically ship, given the freeze and Kenji's review?",
     "If the PR is up today and reviewed tomorrow, the release branch cut for 3.41 is on Monday and the train "
     "leaves on Wednesday 15 July. I would aim for that and treat it as our date.")
work("inventory", "OK, let's agree on that. Now inventory: support says items show out of stock after abandoned "
     "checkouts. Run the inventory test suite.", [lambda: c_pytest("inventory", "IN3")], "pytest", "inventory",
     "The inventory suite has one failure: the sweeper releases the hold but available stays at zero. That matches "
     "the support report.")
work("inventory", "Read services/inventory/app/settings.py.", [lambda: c_settings("inventory", "IN1")], "settings",
     "inventory")
work("inventory", "Check the inventory DB migrations in prod, alembic current.", [lambda: c_alembic("inventory", "IN2")],
     "alembic", "inventory")
work("inventory", "Read the inventory holds module, app/holds.py.",
     [lambda: c_read_code("inventory", "app/holds.py", "holds")], "code", "inventory",
     "The sweeper decrements reserved but the available figure is computed from a cached level row that is only "
     "refreshed on writes through the repository, not through this bulk update.")
work("inventory", "git log for services/inventory, there was an oversell fix a while back that touched this.",
     [lambda: c_gitlog("inventory", "IN5", "fix oversell when two holds race on the last unit")], "gitlog",
     "inventory")
work("inventory", "Read deploy/charts/inventory/values-prod.yaml.", [lambda: c_values("inventory", "IN4", "mem")],
     "values", "inventory")
work("pods", "Quick look at the pods again, someone said inventory restarted.", [lambda: c_noise("pods")], "pods")
work("search", "Search next, the reindex job timed out last night. Read services/search/app/settings.py.",
     [lambda: c_settings("search", "SE1")], "settings", "search")
work("search", "Hit the search index-stats endpoint on staging.", [lambda: c_search_stats("SE2")], "stats")
work("search", "Profile search with the replay fixture, sorted by tottime.",
     [lambda: c_profile("search", "bm25_score", "SE3", sort="tottime")], "profile", "search")
work("search", "Search git log please, I want the commit that changed the reindex to swap aliases.",
     [lambda: c_gitlog("search", "SE4", "reindex into a fresh index and swap the alias at the end")], "gitlog",
     "search")
work("search", "Read the search Dockerfile, services/search/Dockerfile.", [lambda: c_dockerfile("search", "SE5")],
     "docker", "search")
work("checkout", "Back to checkout for a moment: read the checkout Dockerfile.", [lambda: c_dockerfile("checkout")],
     "docker", "checkout")
work("notifications", "Notifications sends the order confirmation that failed during the incident. Read "
     "services/notifications/app/settings.py.", [lambda: c_settings("notifications", "NO1")], "settings",
     "notifications")
work("notifications", "Read the notifications Dockerfile.", [lambda: c_dockerfile("notifications", "NO2")], "docker",
     "notifications")
work("notifications", "Run the notifications test suite.", [lambda: c_pytest("notifications", "NO3")], "pytest",
     "notifications")
work("notifications", "In notifications, rg for the batch constants.", [lambda: c_rg("notifications", "NO4")], "rg")
work("image-resizer", "Unrelated but on my list: the image-resizer build is red on main. Run its go tests.",
     [lambda: c_gotest("IR1")], "gotest")
work("image-resizer", "Read the image-resizer go.mod.", [lambda: tool("read_file", {"path":
     "services/image-resizer/go.mod"}, numbered(_lines(lambda: go_mod(P["IR2"]), "IR2")), ("IR2",))], "gomod")
work("image-resizer", "And its Dockerfile, services/image-resizer/Dockerfile.",
     [lambda: c_dockerfile("image-resizer", "IR3", go=True)], "docker", "image-resizer")
work("image-resizer", "Read services/image-resizer/internal/config/config.go.",
     [lambda: read("services/image-resizer/internal/config/config.go", _lines(lambda: go_config(P["IR4"]), "IR4"),
                   ("IR4",))], "goconf")
work("admin", "The refund button in the admin app is part of the same ticket. Run the admin jest suite.",
     [lambda: c_jest("AD2")], "jest")
work("admin", "Read apps/admin/package.json.", [lambda: tool("read_file", {"path": "apps/admin/package.json"},
                                                             numbered(_lines(lambda: package_json(P["AD1"]), "AD1")),
                                                             ("AD1",))], "pkg")
work("admin", "git log for apps/admin, who touched the refunds feature last?",
     [lambda: c_gitlog("admin", "AD4", "refunds: hide partial refund for settled orders")], "gitlog", "admin")
work("checkout", "Checkout fix: make the payment client use THREE_DS_CHALLENGE_TIMEOUT_S for the authorise call and "
     "keep HTTP_TIMEOUT_S for everything else. Patch app/payments/client.py in checkout.",
     [lambda: c_patch(["services/checkout/app/payments/client.py", "services/checkout/app/settings.py"],
                       "use the 3DS challenge timeout for authorise calls")], "patch")
work("checkout", "Rerun the checkout tests.", [lambda: c_pytest("checkout")], "pytest", "checkout",
     "Checkout is green apart from the pre-existing noise, if any; the idempotency test passes now.")
work("promotions", "Rerun the promotions suite with the stacking patch.", [lambda: c_pytest("promotions", "PM3")],
     "pytest", "promotions", "Promotions is green with the patch; the expired-coupon test passes.")
chat("pr", "I've opened PR #2318 with the stacking fix and the checkout timeout change, Kenji is on it.",
     "Good. Both changes are in, no version bumps, and no prod values touched.")
work("pr", "Show me the PR checks.", [lambda: c_noise("checks")], "checks")
work("inventory", "Patch the inventory sweeper to refresh the cached level row after the bulk update, in "
     "app/holds.py.", [lambda: c_patch(["services/inventory/app/holds.py", "services/inventory/app/repository.py"],
                                                "refresh cached level after sweeping holds")],
     "patch")
work("inventory", "Rerun the inventory tests.", [lambda: c_pytest("inventory")], "pytest", "inventory",
     "Inventory passes now, including the expiry test.")
work("admin", "Patch the admin RefundDialog so the refund button is disabled for settled orders, in "
     "apps/admin/src/features/refunds/RefundDialog.tsx.",
     [lambda: c_patch(["apps/admin/src/features/refunds/RefundDialog.tsx",
                       "apps/admin/src/features/refunds/useRefund.ts"], "disable refund for settled orders")], "patch")
work("admin", "Run only the admin refunds specs.", [lambda: c_jest("AD3", only="refunds")], "jest",
     answer="The refunds specs still have one failure: the button stays enabled, so the settled check is not "
            "reached in that render path.")
work("admin", "Patch it again: read status from the order query, not from the row props.",
     [lambda: c_patch(["apps/admin/src/features/refunds/RefundDialog.tsx"], "read order status from the query")], "patch")
work("admin", "Rerun the admin refunds specs.", [lambda: c_jest(only="refunds")], "jest",
     answer="Refund specs are green now.")
work("pricing", "Now the pricing perf: patch tiers_for to return the cached sorted tiers without deep-copying, and "
     "_band_for to bisect.", [lambda: c_patch(["services/pricing/app/rules/tiered.py",
                                               "services/pricing/app/models.py"], "cache sorted tiers, bisect bands")], "patch")
work("pricing", "Profile pricing again, same fixture.",
     [lambda: c_profile("pricing", "apply_tiered_discounts", after=True)], "profile", "pricing",
     "Much better: the tier lookup has dropped out of the top rows and the total run is far shorter.")
work("pricing", "Rerun the pricing tests.", [lambda: c_pytest("pricing")], "pytest", "pricing",
     "Pricing is green with the change.")
work("checkout", "Show me the last commit touching checkout with its diff.", [lambda: c_git_show("checkout")], "show",
     "checkout")
work("search", "Search tests too, the ranking change from last week worries me.", [lambda: c_pytest("search")],
     "pytest", "search")
work("image-resizer", "Resizer: rerun the go tests after pulling main, someone pushed an ICC fix.",
     [lambda: c_gotest()], "gotest", answer="All resizer packages pass after the pull.")
work("pods", "Check pods in prod once more before I tell the channel.", [lambda: c_noise("pods")], "pods")
work("checkout", "Tail checkout logs in prod again, are the 504s still there?", [lambda: c_noise("logs", "checkout")],
     "logs", "checkout")
work("promotions", "Health of promotions in prod?", [lambda: c_health("promotions")], "health", "promotions")
work("pricing", "And pricing's healthz.", [lambda: c_health("pricing")], "health", "pricing")
work("cart", "Cart's helm history in prod, did anything roll back recently?", [lambda: c_helm_history("cart")],
     "helm", "cart")
work("notifications", "Show me notifications' recent git log.", [lambda: c_gitlog("notifications")], "gitlog",
     "notifications")
work("cart", "Run the cart suite again with the promotions change, to be sure the cart side still works.",
     [lambda: c_pytest("cart")], "pytest", "cart")
work("pr", "PR checks again.", [lambda: c_noise("checks")], "checks")
work("search", "Read the search prod values, just to see the HPA.", [lambda: c_values("search")], "values", "search")
work("checkout", "Checkout's prod values, read only.", [lambda: c_values("checkout")], "values", "checkout")
work("notifications", "Notifications prod values too.", [lambda: c_values("notifications")], "values",
     "notifications")
work("pricing", "Blame pricing's tiered.py, who added the deep copy?",
     [lambda: c_blame("pricing", "app/rules/tiered.py", code_module("tiered"), None)], "blame", "pricing")
work("promotions", "Show me the last commit touching promotions.", [lambda: c_git_show("promotions")], "show",
     "promotions")
work("inventory", "Inventory healthz in prod, is the sweeper running?", [lambda: c_health("inventory")], "health",
     "inventory")
work("search", "Search helm history in prod.", [lambda: c_helm_history("search")], "helm", "search")
work("cart", "Cart Dockerfile, I want to compare the base image with checkout's.", [lambda: c_dockerfile("cart")],
     "docker", "cart")
work("pr", "Last look at the checks before Kenji approves.", [lambda: c_noise("checks")], "checks")
work("inventory", "Run the inventory sweeper tests on their own, -k sweeper, a few times to check for flakes.",
     [lambda: c_pytest("inventory", extra=" -k sweeper --count=3")], "pytest", "inventory")
work("pricing", "Pricing logs in prod, any errors on quotes?", [lambda: c_noise("logs", "pricing")], "logs",
     "pricing")
work("cart", "Cart healthz in prod?", [lambda: c_health("cart")], "health", "cart")
work("pricing", "Read pricing's prod values, read only as usual.", [lambda: c_values("pricing")], "values", "pricing")
work("cart", "Recent git log for cart, anything about merging guest sessions?", [lambda: c_gitlog("cart")], "gitlog",
     "cart")
work("pricing", "Pricing Dockerfile, is it on the same base as the others?", [lambda: c_dockerfile("pricing")],
     "docker", "pricing")
work("promotions", "Promotions helm history in prod.", [lambda: c_helm_history("promotions")], "helm", "promotions")
work("inventory", "Inventory prod logs, is the sweeper logging releases?", [lambda: c_noise("logs", "inventory")],
     "logs", "inventory")
work("inventory", "Show me the last commit touching inventory.", [lambda: c_git_show("inventory")], "show",
     "inventory")
work("notifications", "Notifications healthz in prod.", [lambda: c_health("notifications")], "health",
     "notifications")
work("checkout", "Run only the payments tests in checkout, -k payments, I want to see them on their own.",
     [lambda: c_pytest("checkout", extra=" -k payments")], "pytest", "checkout")
work("search", "Search healthz in prod, the opensearch breaker was flapping yesterday.",
     [lambda: c_health("search")], "health", "search")
work("pods", "Last pods check for the day.", [lambda: c_noise("pods")], "pods")

FILLER_TURNS = [
    ("Has Kenji left any comments on the PR yet?", "Not yet; the review request is still open."),
    ("Anything new in the incident channel?", "Quiet since the morning; the last message is the weekend summary."),
    ("Is CI still green on main?", "Yes, the last main run passed."),
]


def finish():
    global last_was_question
    k = 0
    while pending:
        if last_was_question or not any(p[0] <= turn_no + 1 for p in pending):
            q, a = FILLER_TURNS[k % len(FILLER_TURNS)]
            k += 1
            new_turn("wrap-up")
            U(q)
            A(a)
            last_was_question = False
            continue
        maybe_ask()
    new_turn("wrap-up")
    U("That's it for today. Anything I should remember for tomorrow?")
    A("The PR is up with the stacking and timeout fixes and no dependency changes, the inventory and admin fixes are "
      "committed, prod values were only read, and no skips were added. Tomorrow is review and the release branch.")


finish()

# ---------------------------------------------------------------------------
# More questions in other words, not asked in the conversation: about facts no
# recall probe above asks about. The turn is the earliest the question may be
# asked, moved to the fact's turn plus the gap when that is later, and to the
# last turn at most.

DEV_QUESTIONS = [
    ("CA2", 60, "How many tests passed in the cart service's first pytest run today?"),
    ("CA4", 70, "What's the HPA replica ceiling for cart in the prod chart?"),
    ("CO4", 55, "Which checkout test was broken before the timeout change went in?"),
    ("CO5", 66, "What was the p99 that checkout's health check showed in prod this morning?"),
    ("PR3", 72, "How many unit tests passed for pricing on the first run?"),
    ("PR4", 80, "Which pydantic version is the pricing svc pinned to?"),
    ("IN3", 78, "Which of the inventory tests was failing before we fixed the sweeper?"),
    ("IN5", 90, "Short sha of the old inventory commit that fixed overselling the last unit?"),
    ("SE3", 96, "In the search profile, how much self time did the BM25 scoring take?"),
    ("SE4", 100, "What's the sha of the search commit that moved reindexing to an alias swap?"),
    ("SE5", 105, "Which Python image is the search service's container built on?"),
    ("PM3", 108, "After the stacking patch, how many promo tests passed?"),
    ("PM4", 62, "Which commit does blame point at for the max stacked coupons constant in promotions?"),
    ("NO3", 112, "How many of the notification service's tests passed?"),
    ("IR3", 115, "Which Go toolchain image does the resizer's build stage use?"),
    ("AD3", 120, "Which admin FE spec was still failing after the first refund patch?"),
    ("team", 50, "Which squad did I say I'm on?"),
    ("pr", 118, "What's the number of the PR I opened for the fixes?"),
    ("date", 100, "What ship date did we settle on for this?"),
    ("reviewer", 85, "Who's reviewing the promotions side of the change?"),
]


def dev_turn(label, at_):
    return min(turn_no, max(at_, fact_turns[label] + MIN_GAP))


# ---------------------------------------------------------------------------

def check():
    everything = [SYSTEM] + [i["content"] for i in items]
    missing = (set(P) | set(M)) - set(fact_turns)
    assert not missing, missing
    ids = [f["id"] for f in facts]
    assert len(set(ids)) == len(ids)
    for f in facts:
        holders = [k for k, c in enumerate(everything) if f["text"] in c]
        assert len(holders) == 1, (f, holders)
        item = items[holders[0] - 1]
        assert item["content"].count(f["text"]) == 1, f
        assert item["turn"] == f["turn"], f
        assert item["kind"] == ("tool_result" if f["source"] == "tool" else "message"), f
    # A tool fact's whole output never names its service; its call or its turn's user message does.
    for label, text in P.items():
        pattern = subject_of(label)
        k = next(k for k, i in enumerate(items) if text in i["content"])
        call, out = items[k - 1], items[k]["content"]
        assert call["kind"] == "tool_call" and call["call_id"] == items[k]["call_id"]
        assert not re.search(pattern, out, re.I), (label, re.search(pattern, out, re.I))
        user = next(i for i in items if i["turn"] == items[k]["turn"] and i["role"] == "user")
        assert re.search(pattern, call["content"] + "\n" + user["content"], re.I), label
    # Neither the assistant nor a user message repeats a tool value.
    for i in items:
        if i["kind"] == "message":
            assert not any(v in i["content"] for v in P.values()), i["content"][:80]
    turns = {}
    for i in items:
        turns.setdefault(i["turn"], []).append(i)
    assert sorted(turns) == list(range(1, turn_no + 1))
    for t, its in turns.items():
        assert its[0]["role"] == "user" and its[0]["kind"] == "message", t
        assert sum(1 for i in its if i["role"] == "user") == 1, t
        calls = [i["call_id"] for i in its if i["kind"] == "tool_call"]
        results = [i["call_id"] for i in its if i["kind"] == "tool_result"]
        assert calls == results and len(set(calls)) == len(calls), t
        for k, i in enumerate(its):
            if i["kind"] == "tool_result":
                assert its[k - 1]["kind"] == "tool_call" and its[k - 1]["call_id"] == i["call_id"], t
        assert its[-1]["role"] == "assistant" and its[-1]["kind"] == "message", t
    for t, rule in RULES:
        assert rule in turns[t][0]["content"], rule
    bad = [(i["turn"], i["call_id"], i["tool_name"], len(i["content"])) for i in items
           if i["kind"] == "tool_result" and not 1200 <= len(i["content"]) <= 10000]
    assert not bad, bad
    by_id = {f["id"]: f for f in facts}
    asked = set()
    for which, ps in probes.items():
        about = [p for p in ps if p["facts"]]
        assert len(about) == 11, (which, len(about))
        assert sum(1 for p in ps if not p["facts"]) == {"probe": 0, "heldout": 1}[which]
        for p in ps:
            assert 45 <= p["turn"] <= 125 and p["turn"] <= turn_no, p
            q = turns[p["turn"]][0]["content"]
            for fid in p["facts"]:
                f = by_id[fid]
                assert p["turn"] - f["turn"] >= MIN_GAP, (fid, p["turn"])
                assert f["text"].lower() not in q.lower(), (fid, q)
                assert fid not in asked, fid
                asked.add(fid)
    assert len(DEV_QUESTIONS) == 20 and len({d[0] for d in DEV_QUESTIONS}) == 20
    assert sum(1 for d in DEV_QUESTIONS if d[0] in M) == 4
    for label, at_, q in DEV_QUESTIONS:
        fid = fact_ids[label]
        assert fid not in asked, label
        asked.add(fid)
        t = dev_turn(label, at_)
        assert t - fact_turns[label] >= MIN_GAP and t <= turn_no, (label, t)
        v = P.get(label) or M[label]
        assert v.lower() not in q.lower(), label
        assert q not in [i["content"] for i in items], label
    assert 40 <= len(facts) <= 55, len(facts)
    assert 110 <= turn_no <= 130, turn_no
    assert 380 <= len(items) <= 460, len(items)
    return turns


def main():
    turns = check()
    tool_turns = sum(1 for its in turns.values() if any(i["kind"] == "tool_call" for i in its))
    fact_points = [45, 90, 115, turn_no]

    def write(name, rows):
        with open(os.path.join(HERE, name), "w") as out:
            for r in rows:
                out.write(json.dumps(r, ensure_ascii=False) + "\n")

    head = ([{"kind": "instruction", "turn": t, "text": rule} for t, rule in RULES] +
            [{"kind": "facts", "turn": t} for t in fact_points])
    write("storefront.jsonl", [{"system_prompt": SYSTEM}] + items)
    write("storefront_facts.jsonl", facts)
    write("storefront_probes.jsonl", head + sorted(probes["probe"], key=lambda p: p["turn"]))
    write("storefront_heldout_probes.jsonl", head + sorted(probes["heldout"], key=lambda p: p["turn"]))
    dev = sorted(({"fact": fact_ids[l], "turn": dev_turn(l, at_), "question": q} for l, at_, q in DEV_QUESTIONS),
                 key=lambda d: (d["fact"], d["turn"]))
    write("storefront_dev_questions.jsonl", dev)
    size = os.path.getsize(os.path.join(HERE, "storefront.jsonl"))
    assert 350_000 <= size <= 500_000, size
    sizes = [len(i["content"]) for i in items if i["kind"] == "tool_result"]
    print(f"{turn_no} turns, {len(items)} items, {call_no} tool calls in {tool_turns} turns, outputs "
          f"{min(sizes)}-{max(sizes)} chars, {len(facts)} facts ({sum(f['source'] == 'tool' for f in facts)} from "
          f"tools), {len(probes['probe'])} probes, {len(probes['heldout'])} held-out probes, {len(dev)} dev "
          f"questions, storefront.jsonl {size} bytes")


main()
