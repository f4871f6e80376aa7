#!/usr/bin/env python3
"""Writes the payments-ledger migration replay conversation used by tools/replay.

Harrowgate's payments ledger is leaving its Oracle system (schema LEDGR on an
Oracle RAC behind a SCAN address) for a PostgreSQL cluster. The programme lead
works through ten workstreams with an assistant over about eight weeks: the
ETL rewrite, the reconciliation jobs, the vendor contract feed, the FX rates
service, the settlement batch, the audit export, the archive purge, the
partner API, the chargeback ingest and the GL posting job. Each workstream has
a config review (YAML, TOML or INI files), a dry run recorded in the migctl
control database, and talk around them; then come re-runs, runbook reviews,
connection pooling and cluster settings, two cutover rehearsals, the go/no-go,
the cutover weekend and the first days after it.

The conversation is built to measure recall honestly, and was written without
looking at how the service ranks what it recalls:
  * most turns are talk (planning, status, comms, reviews, questions); about
    two in five carry tool calls, one to three of them, with long outputs that
    look like the real thing (psql tables and expanded records, dry-run logs
    kept as one-column query results, SQL*Plus listings, job logs in three
    styles, configuration files read with line numbers, git diffs, runbook
    excerpts, EXPLAIN ANALYZE plans);
  * the line holding a planted value never names its workstream, and neither
    does the rest of that output: the workstream is named only in the call's
    arguments (a path, a WHERE clause, a log directory) and in the user's
    message of that turn;
  * the same keys recur across workstreams with other values (every dry run
    ends on rows read, rows written, an elapsed time and a dry-run checksum;
    every config has batch_size, timeouts, retries, a pool size, a reject
    guard, a schedule and a retention), so a question can only be answered
    from the one output its subject's call produced;
  * common words (batch, checksum, ledger, rollback, migration) sit on very
    many lines;
  * the assistant does not repeat tool values in its replies, and its answers
    to recall questions stay vague;
  * recall questions come 25 or more turns after their fact, as the user's
    message of that turn.

Two question sets ask about different tool facts: a tuning set in plain
wording, and a held-out set in other words (plurals, possessives,
abbreviations, loose names for the workstream, unit changes, asides). Each
has one question about something the conversation never discusses. Both
carry the same two standing instructions and fact-count points.

Outputs (beside this file):
  ledger.jsonl                  system prompt, then one item per line
  ledger_facts.jsonl            id, turn, topic, source, text
  ledger_probes.jsonl           instructions, fact counts, tuning recall set
  ledger_heldout_probes.jsonl   instructions, fact counts, held-out recall set

Deterministic (seeded, no clock, standard library only). Re-run after editing:
  python3 tools/replay_data/make_ledger.py
"""

import datetime
import difflib
import json
import os
import random
import re

rng = random.Random(20260613)
HERE = os.path.dirname(os.path.abspath(__file__))

SYSTEM = ("You are the migration assistant for Harrowgate's payments-ledger programme, which moves the ledger from "
          "the Oracle system (schema LEDGR, read through the ldn2 SCAN address) to a PostgreSQL cluster (staging "
          "pgl-stg-*, production pgl-prd-*). Each workstream has its job configuration under configs/, its runbook "
          "under docs/runbooks/ and its dry runs recorded in the migctl control database (tables workstream, "
          "dry_run, dry_run_log, dry_run_tables). You can run psql against migctl and the PostgreSQL clusters, "
          "sqlplus read-only against Oracle, shell commands on the job hosts, read files and use git. Quote values "
          "exactly as the tools return them, and say so when you are unsure.")

RULES = [
    (2, "never run a purge against prod without a second approver named in the change ticket"),
    (3, "every cutover step needs a written rollback before it goes into the runbook"),
]

# ---------------------------------------------------------------------------
# Planted values, all drawn before any output exists, so that no noise line
# can hold one of them.

RESERVED = []


def unique(make):
    """A value from `make` that neither holds nor is held by an earlier one."""
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


def hms(sec):
    return f"{sec // 3600:02d}:{sec % 3600 // 60:02d}:{sec % 60:02d}"


P = {}  # label -> planted tool text
# etl rewrite
P["E1"] = unique(lambda: hexs(7))
P["E2"] = unique(lambda: f"batch_size: {pick([750, 1750, 3500])}")
E_ELAPSED = rng.randint(91 * 60 + 5, 118 * 60 + 50)
P["E3"] = unique(lambda: f"elapsed {hms(E_ELAPSED)}")
# reconciliation jobs
P["R1"] = unique(lambda: hexs(7))
P["R2"] = unique(lambda: f"{pick([10, 25, 35, 50])} {pick([3, 4, 5])} * * 1-5")
P["R3"] = unique(lambda: f"{rng.randint(1100, 2400)} breaks")
# vendor contract feed
P["V1"] = unique(lambda: hexs(7))
P["V2"] = unique(lambda: f"reject_guard = {pick(['0.0125', '0.0075', '0.0035'])}")
P["V3"] = unique(lambda: f"timeout_seconds = {pick([420, 660, 780])}")
# FX rates service
P["F1"] = unique(lambda: hexs(7))
P["F2"] = unique(lambda: f"pool_size = {pick([18, 22, 28])}")
P["F3"] = unique(lambda: f"cache_ttl_seconds = {pick([540, 840, 1080])}")
# settlement batch
P["S1"] = unique(lambda: hexs(7))
P["S2"] = unique(lambda: f'lock_timeout = "{pick([45, 75, 95])}s"')
P["S3"] = unique(lambda: f"ldn2-job-{pick([14, 17, 21])}")
P["S4"] = unique(lambda: f"wall time {rng.randint(2, 4)}h{rng.randint(10, 59):02d}m{rng.randint(10, 59):02d}s")
# audit export
P["A1"] = unique(lambda: hexs(7))
P["A2"] = unique(lambda: f"retention_days = {pick([2557, 2922, 3287])}")
P["A3"] = unique(lambda: f"manifest written: {rng.randint(1100, 1900)} files")
# archive purge
P["P1"] = unique(lambda: hexs(7))
P["P3"] = unique(lambda: f"{pick([15, 30, 45])} {pick([1, 2])} * * {pick([0, 6])}")
P["P4"] = unique(lambda: f"ldn2-ora-{pick([11, 12, 15])}")
# partner API
P["PA1"] = unique(lambda: hexs(7))
P["PA2"] = unique(lambda: f"pool_size: {pick([36, 44, 52])}")
P["PA3"] = unique(lambda: f"timeout_ms: {pick([2750, 3250, 4500])}")
# chargeback ingest
P["C1"] = unique(lambda: hexs(7))
P["C2"] = unique(lambda: f"retries = {pick([7, 9, 11])}")
P["C3"] = unique(lambda: f"batch_size = {pick([1250, 1500, 4000])}")
# GL posting
P["G1"] = unique(lambda: hexs(7))
P["G2"] = unique(lambda: f"commit_every = {pick([400, 600, 800])}")
P["G3"] = unique(lambda: f"lines posted {rng.randint(8_000_000, 12_000_000)}")
# the programme as a whole
P["X1"] = unique(lambda: f"pgl-prd-vip{rng.randint(2, 9)}")
P["X2"] = unique(lambda: f"{rng.randint(3800, 4600)}.{rng.randint(10, 99)}")
P["X3"] = unique(lambda: f"default_pool_size = {pick([45, 55, 65])}")
P["X4"] = unique(lambda: f"max_wal_size = {pick([96, 128, 160])}GB")
P["X5"] = unique(lambda: f"wall clock 0{rng.randint(3, 5)}:{rng.randint(10, 59):02d}:{rng.randint(10, 59):02d}")

# Facts stated in the user's messages.
M = {
    "name": unique(lambda: "Niamh Okonkwo-Hale"),
    "company": unique(lambda: "Harrowgate Pay"),
    "epic": unique(lambda: "LEDG-1400"),
    "channel": unique(lambda: "#ledger-cutover"),
    "dba": unique(lambda: "Tobias Wren"),
    "approver": unique(lambda: "Priya Raman"),
    "date": unique(lambda: "Saturday 13 June"),
    "gonogo": unique(lambda: "16:00 on Thursday 11 June"),
    "cab": unique(lambda: "CHG-0048817"),
    "oracle": unique(lambda: "the Oracle support contract ends on 30 September"),
    "budget": unique(lambda: "rollback budget of four hours"),
    "auditor": unique(lambda: "Pemberton Lisle"),
}

# Which workstream (or thing) each planted label belongs to: the pattern that
# names it. The output holding the value must not match it; the call's
# arguments or the user's message of that turn must.
SUBJECT = {
    "E": r"(?<![a-z])etl",
    "R": r"recon",
    "V": r"vendor|contract",
    "F": r"(?<![a-z])fx|exchange rate",
    "S": r"settle",
    "A": r"audit",
    "P": r"purge|archiv",
    "PA": r"partner",
    "C": r"chargeback|dispute",
    "G": r"(?<![a-z])gl(?![a-z])|general ledger",
    "X1": r"cutover",
    "X2": r"oracle|ledgprd",
    "X3": r"(?<![a-z])dr(?![a-z])|disaster|man1",
    "X4": r"prd|prod",
    "X5": r"rehears",
}


def subject_of(label):
    return SUBJECT.get(label) or SUBJECT.get(label.rstrip("0123456789"))


def clean(s):
    return not any(r in s for r in RESERVED)


def N(make):
    """A noise output: drawn again until it holds no planted value."""
    for _ in range(1000):
        s = make()
        if clean(s):
            return s
    raise RuntimeError("noise keeps hitting a planted value")


def planted(make, labels):
    """An output meant to hold exactly `labels`: drawn again until it holds no other planted value."""
    for _ in range(1000):
        out = make()
        held = {l for l, v in P.items() if v in out} | {l for l, v in M.items() if v in out}
        if held == set(labels):
            return out
    raise RuntimeError(f"cannot draw an output holding exactly {labels}")


LO, HI = 1300, 9600  # bytes of one output: about 300 to 2,400 tokens


def fit(make, n, lo=LO, hi=HI):
    """make(n), n shrunk or grown until the output is lo..hi bytes."""
    size = 0
    for _ in range(80):
        out = make(n)
        size = len(out.encode())
        if size > hi:
            n = max(1, int(n * 0.85))
        elif size < lo:
            n = int(n * 1.25) + 1
        else:
            return out
    raise RuntimeError(f"cannot fit output size ({size} bytes at n={n})")


def fitN(make, n, lo=LO, hi=HI):
    return fit(lambda k: N(lambda: make(k)), n, lo, hi)


def fitP(make, n, labels, lo=LO, hi=HI):
    return fit(lambda k: planted(lambda: make(k), labels), n, lo, hi)


# ---------------------------------------------------------------------------
# Names that recur across outputs (all invented).

AREAS = ["etl rewrite", "reconciliation jobs", "vendor contract feed", "fx rates service", "settlement batch",
         "audit export", "archive purge", "partner api", "chargeback ingest", "gl posting"]
OWNERS = {"etl rewrite": "mstaszek", "reconciliation jobs": "fqureshi", "vendor contract feed": "dbrannigan",
          "fx rates service": "ialvarenga", "settlement batch": "rcatterall", "audit export": "shalvorsen",
          "archive purge": "tobrien", "partner api": "kmensah", "chargeback ingest": "hlindqvist",
          "gl posting": "bkowal"}
TABLES = ["POSTINGS", "JOURNAL_ENTRIES", "JOURNAL_LINES", "ACCOUNTS", "ACCOUNT_BALANCES", "BALANCE_SNAPSHOTS",
          "COUNTERPARTIES", "PAYMENT_INSTRUCTIONS", "PAYMENT_EVENTS", "FEES", "FEE_SCHEDULES", "HOLDS", "REVERSALS",
          "BOOKING_PERIODS", "EXTERNAL_REFS", "CURRENCY_CODES", "BUSINESS_CALENDAR", "POSTING_RULES", "SUSPENSE_ITEMS",
          "LEDGER_PARAMS"]
COLUMNS = ["ID", "ACCOUNT_ID", "BOOKING_DATE", "VALUE_DATE", "AMOUNT_MINOR", "CURRENCY", "DIRECTION", "STATUS",
           "EXTERNAL_REF", "CREATED_AT", "UPDATED_AT", "BATCH_REF", "NARRATIVE", "REVERSAL_OF", "PERIOD_ID"]
ORA_NODES = [f"ldn2-ora-{n:02d}" for n in range(1, 7)]
JOB_HOSTS = [f"ldn2-job-{n:02d}" for n in range(1, 10)]
PG_STG = [f"pgl-stg-a0{n}" for n in range(1, 4)]
PG_PRD = [f"pgl-prd-a0{n}" for n in range(1, 4)]
DOMAIN = "ldn2.hpay.internal"
USERS = ["mig_rw", "mig_ro", "app_ledger", "app_partner", "svc_batch", "svc_recon", "dba_twren", "grafana_ro",
         "svc_export", "postgres"]
TICKETS = [f"LEDG-{n}" for n in range(2101, 2399)]


def day(m, d):
    return datetime.datetime(2026, m, d)


def stamp(t, ms=True):
    return t.strftime("%Y-%m-%d %H:%M:%S") + (f".{rng.randint(0, 999):03d}" if ms else "")


def numbered(text, start=1):
    return "\n".join(f"{i:6d}\t{l}" for i, l in enumerate(text.rstrip("\n").split("\n"), start))


def spread(start, total_s, n):
    """n increasing instants from start to start + total_s, the last exactly at the end."""
    cuts = sorted(rng.random() for _ in range(n - 1))
    return [start + datetime.timedelta(seconds=int(c * total_s)) for c in cuts] + \
           [start + datetime.timedelta(seconds=total_s)]


# ---------------------------------------------------------------------------
# Output shapes.

def psql_table(headers, rows, right=()):
    rows = [[str(c) for c in r] for r in rows]
    w = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def line(cells, head=False):
        parts = []
        for i, c in enumerate(cells):
            parts.append(c.center(w[i]) if head else (c.rjust(w[i]) if i in right else c.ljust(w[i])))
        return (" " + " | ".join(parts)).rstrip()

    out = [line(headers, True), "-" + "-+-".join("-" * x for x in w) + "-"] + [line(r) for r in rows]
    out.append(f"({len(rows)} row{'' if len(rows) == 1 else 's'})")
    return "\n".join(out)


def psql_lines(header, lines):
    """A one-column result, as psql prints it."""
    w = max([len(header)] + [len(l) for l in lines])
    out = [" " + header.center(w).rstrip(), "-" * (w + 2)] + [" " + l for l in lines]
    out.append(f"({len(lines)} rows)")
    return "\n".join(out)


def psql_expanded(records):
    out = []
    for k, rec in enumerate(records, 1):
        kw = max(len(key) for key, _ in rec)
        vw = max(len(str(v)) for _, v in rec)
        head = f"-[ RECORD {k} ]"
        out.append(head + "-" * max(0, kw + 1 - len(head)) + "+" + "-" * (vw + 1))
        out += [f"{key.ljust(kw)} | {v}" for key, v in rec]
    return "\n".join(out)


def sqlplus_table(headers, widths, rows, right=(), footer=None):
    out = ["", " ".join((h.rjust(w) if i in right else h.ljust(w)) for i, (h, w) in enumerate(zip(headers, widths))).rstrip(),
           " ".join("-" * w for w in widths)]
    for r in rows:
        out.append(" ".join((str(c).rjust(w) if i in right else str(c).ljust(w))
                            for i, (c, w) in enumerate(zip(r, widths))).rstrip())
    if footer:
        out += footer
    out += ["", f"{len(rows)} rows selected.", ""]
    return "\n".join(out)


def git_diff(path, before, after, context=3):
    a = before.rstrip("\n").split("\n")
    b = after.rstrip("\n").split("\n")
    body = list(difflib.unified_diff(a, b, f"a/{path}", f"b/{path}", n=context, lineterm=""))
    return "\n".join([f"diff --git a/{path} b/{path}", f"index {hexs(7)}..{hexs(7)} 100644"] + body)


# --- configuration files ----------------------------------------------------------

NOISE = {
    "batch_size": [500, 1000, 2000, 2500, 5000],
    "fetch_size": [1000, 5000, 10000, 20000],
    "workers": [2, 4, 6, 8],
    "commit_every": [100, 200, 250, 500, 1000],
    "pool_size": [5, 8, 10, 12, 16, 20, 24, 32],
    "max_overflow": [0, 2, 4, 8],
    "connect_timeout": [5, 10, 15, 20],
    "timeout_seconds": [30, 60, 90, 120, 300, 600, 900],
    "statement_timeout": ["30s", "60s", "120s", "300s", "15min"],
    "lock_timeout": ["5s", "10s", "15s", "30s"],
    "timeout_ms": [1000, 1500, 2000, 2500, 5000],
    "retries": [2, 3, 4, 5],
    "backoff_seconds": [1, 2, 5, 10],
    "reject_guard": ["0.001", "0.005", "0.01", "0.02", "0.05"],
    "retention_days": [30, 90, 180, 365, 400, 730, 1095, 1825],
    "cache_ttl_seconds": [60, 120, 300, 600, 900],
    "max_lag_seconds": [30, 60, 120, 300],
    "heartbeat_seconds": [10, 15, 30],
    "log_level": ["info", "info", "debug", "warn"],
}
CRONS = ["0 2 * * *", "30 2 * * *", "15 0 * * *", "*/15 * * * *", "0 */4 * * *", "5 1 * * 1-5", "45 23 * * *",
         "0 6 * * 1", "20 4 * * *", "0 0 1 * *", "10 22 * * 1-5", "*/5 6-20 * * 1-5"]


def values(over=None):
    v = {k: str(rng.choice(vs)) for k, vs in NOISE.items()}
    v["schedule"] = rng.choice(CRONS)
    v["pg_host"] = f"{rng.choice(PG_STG)}.{DOMAIN}"
    v.update(over or {})
    return v


MAPPINGS = [("NUMBER(19,0)", "bigint"), ("NUMBER(19,4)", "numeric(19,4)"), ("NUMBER(1)", "boolean"),
            ("VARCHAR2(35 CHAR)", "varchar(35)"), ("VARCHAR2(140 CHAR)", "varchar(140)"), ("DATE", "timestamp(0)"),
            ("TIMESTAMP(6)", "timestamptz"), ("CHAR(3)", "char(3)"), ("CLOB", "text"), ("RAW(16)", "uuid")]


def yaml_config(v):
    tables = rng.sample(TABLES, rng.randint(3, 6))
    maps = rng.sample(MAPPINGS, rng.randint(3, 6))
    out = ["# Job settings; anything not set here falls back to lib/migkit/defaults.yaml.",
           "# Changes go through a PR. The DBA on call reviews everything under target:.",
           "version: 3", "", "source:", "  kind: oracle",
           f"  dsn: mig_ro@ldn2-ora-scan.{DOMAIN}:1521/LEDGSVC", "  schema: LEDGR",
           f"  fetch_size: {v['fetch_size']}", "  snapshot: scn          # one SCN for the whole run",
           f"  connect_timeout: {v['connect_timeout']}", "  nls_numeric_characters: '.,'", "",
           "target:", "  kind: postgres", f"  host: {v['pg_host']}", "  port: 5432", "  database: ledger",
           "  schema: ledger_stage", "  sslmode: verify-full", f"  pool_size: {v['pool_size']}",
           f"  max_overflow: {v['max_overflow']}", f"  statement_timeout: {v['statement_timeout']}",
           f"  lock_timeout: {v['lock_timeout']}", "  application_name: migkit", "",
           "tables:"]
    for t in tables:
        out.append(f"  - source: LEDGR.{t}")
        out.append(f"    target: ledger.{t.lower()}")
        out.append(f"    key: [{rng.choice(['id', 'id', 'account_id, booking_date', 'external_ref'])}]")
        if rng.random() < 0.5:
            out.append(f"    where: \"{rng.choice(['BOOKING_DATE', 'CREATED_AT', 'VALUE_DATE'])} >= DATE '20{rng.randint(16, 21)}-01-01'\"")
    out += ["", "types:"] + [f"  \"{a}\": {b}" for a, b in maps]
    out += ["", "job:", f"  batch_size: {v['batch_size']}", f"  workers: {v['workers']}",
            f"  commit_every: {v['commit_every']}", "  order_by: [booking_date, id]",
            f"  timeout_ms: {v['timeout_ms']}         # one batch round trip",
            f"  timeout_seconds: {v['timeout_seconds']}   # whole step",
            f"  retries: {v['retries']}", f"  backoff_seconds: {v['backoff_seconds']}",
            f"  reject_guard: {v['reject_guard']}     # abort when rejected/read goes above this",
            "  on_reject: quarantine", f"  schedule: \"{v['schedule']}\"", "",
            "checks:", "  row_counts: true", "  column_sums: [amount_minor]", "  checksum: md5_ordered",
            f"  max_lag_seconds: {v['max_lag_seconds']}", "",
            "retention:", f"  retention_days: {v['retention_days']}", "  quarantine_days: 30", "",
            "cache:", f"  cache_ttl_seconds: {v['cache_ttl_seconds']}", "",
            "observability:", f"  log_level: {v['log_level']}", "  log_format: text",
            f"  heartbeat_seconds: {v['heartbeat_seconds']}", "  metrics_port: 9187",
            "  metrics_prefix: migkit_job", "",
            "rollback:", "  keep_restore_point: true", "  drop_staging_on_failure: true"]
    return "\n".join(out) + "\n"


def toml_config(v):
    tables = rng.sample(TABLES, rng.randint(3, 6))
    out = ["# Job settings (TOML). Keys not set here come from lib/migkit/defaults.toml.",
           "# Reviewed in a PR; target.* needs the DBA on call.", "", "[source]", 'kind = "oracle"',
           f'dsn = "mig_ro@ldn2-ora-scan.{DOMAIN}:1521/LEDGSVC"', 'schema = "LEDGR"',
           f"fetch_size = {v['fetch_size']}", f"connect_timeout = {v['connect_timeout']}", 'snapshot = "scn"', "",
           "[target]", 'kind = "postgres"', f'host = "{v["pg_host"]}"', "port = 5432", 'database = "ledger"',
           'schema = "ledger_stage"', 'sslmode = "verify-full"', f"pool_size = {v['pool_size']}",
           f"max_overflow = {v['max_overflow']}", f'statement_timeout = "{v["statement_timeout"]}"',
           f'lock_timeout = "{v["lock_timeout"]}"', 'application_name = "migkit"', ""]
    for t in tables:
        out += ["[[tables]]", f'source = "LEDGR.{t}"', f'target = "ledger.{t.lower()}"',
                f'key = ["{rng.choice(["id", "external_ref", "account_id"])}"]', ""]
    out += ["[job]", f"batch_size = {v['batch_size']}", f"workers = {v['workers']}",
            f"commit_every = {v['commit_every']}", f"timeout_ms = {v['timeout_ms']}",
            f"timeout_seconds = {v['timeout_seconds']}", f"retries = {v['retries']}",
            f"backoff_seconds = {v['backoff_seconds']}", f'schedule = "{v["schedule"]}"', 'on_reject = "quarantine"', "",
            "[guards]", f"reject_guard = {v['reject_guard']}", f"max_lag_seconds = {v['max_lag_seconds']}",
            "halt_on_count_mismatch = true", "", "[checks]", "row_counts = true", 'column_sums = ["amount_minor"]',
            'checksum = "md5_ordered"', "", "[retention]", f"retention_days = {v['retention_days']}",
            "quarantine_days = 30", "", "[cache]", f"cache_ttl_seconds = {v['cache_ttl_seconds']}", "",
            "[observability]", f'log_level = "{v["log_level"]}"', f"heartbeat_seconds = {v['heartbeat_seconds']}",
            "metrics_port = 9187", "", "[rollback]", "keep_restore_point = true", "drop_staging_on_failure = true"]
    return "\n".join(out) + "\n"


def ini_config(v):
    tables = rng.sample(TABLES, rng.randint(3, 6))
    out = ["; Job settings (INI). Unset keys fall back to lib/migkit/defaults.ini.",
           "; Edit through a PR; [target] changes need the DBA on call.", "", "[source]", "kind = oracle",
           f"dsn = mig_ro@ldn2-ora-scan.{DOMAIN}:1521/LEDGSVC", "schema = LEDGR", f"fetch_size = {v['fetch_size']}",
           f"connect_timeout = {v['connect_timeout']}", "snapshot = scn", "", "[target]", "kind = postgres",
           f"host = {v['pg_host']}", "port = 5432", "database = ledger", "schema = ledger_stage",
           "sslmode = verify-full", f"pool_size = {v['pool_size']}", f"max_overflow = {v['max_overflow']}",
           f"statement_timeout = {v['statement_timeout']}", f"lock_timeout = {v['lock_timeout']}", "",
           "[tables]"]
    for k, t in enumerate(tables, 1):
        out.append(f"table.{k} = LEDGR.{t} -> ledger.{t.lower()}")
    out += ["", "[job]", f"batch_size = {v['batch_size']}", f"workers = {v['workers']}",
            f"commit_every = {v['commit_every']}", f"timeout_ms = {v['timeout_ms']}",
            f"timeout_seconds = {v['timeout_seconds']}", f"retries = {v['retries']}",
            f"backoff_seconds = {v['backoff_seconds']}", f"schedule = {v['schedule']}", "on_reject = quarantine", "",
            "[guards]", "; abort when rejected/read goes above reject_guard",
            f"reject_guard = {v['reject_guard']}", f"max_lag_seconds = {v['max_lag_seconds']}",
            "halt_on_count_mismatch = yes", "", "[checks]", "row_counts = yes", "column_sums = amount_minor",
            "checksum = md5_ordered", "", "[retention]", f"retention_days = {v['retention_days']}",
            "quarantine_days = 30", "", "[cache]", f"cache_ttl_seconds = {v['cache_ttl_seconds']}", "",
            "[observability]", f"log_level = {v['log_level']}", f"heartbeat_seconds = {v['heartbeat_seconds']}",
            "metrics_port = 9187", "", "[rollback]", "keep_restore_point = yes", "drop_staging_on_failure = yes"]
    return "\n".join(out) + "\n"


CONFIG_WRITERS = {"yaml": yaml_config, "toml": toml_config, "ini": ini_config}


def over_of(text, fmt):
    """A planted 'key: value' / 'key = value' line as an override of values()."""
    sep = ": " if fmt == "yaml" else " = "
    k, val = text.split(sep, 1)
    if fmt == "toml":
        val = val.strip('"')
    return {k: val}


def config(fmt, *planted_texts, **extra):
    over = {}
    for t in planted_texts:
        over.update(over_of(t, fmt))
    over.update({k: str(v) for k, v in extra.items()})
    return CONFIG_WRITERS[fmt](values(over))


# --- dry runs ---------------------------------------------------------------------

LAST_TABLES = []  # the tables of the dry-run log drawn last


def dry_run_log(n, start, run_no, checksum, elapsed, fail=False, guard=False):
    """A dry run's log as `select line from dry_run_log ...` returns it; n: batch lines shown per table."""
    tables = rng.sample(TABLES, rng.randint(3, 5))
    LAST_TABLES[:] = tables
    fail = rng.choice(tables) if fail else None
    rows = {t: rng.randint(200_000, 9_000_000) for t in tables}
    rejected = {t: 0 for t in tables}
    body = []
    scn = rng.randint(88_000_000_000, 89_900_000_000)
    head = [f"[migration.run] run {run_no} start: source snapshot at SCN {scn}, target {rng.choice(PG_STG)}/ledger_stage",
            "[migration.preflight] target schema ledger_stage is empty: ok",
            "[migration.preflight] grants for mig_rw on ledger_stage: ok",
            f"[migration.preflight] staging tablespace free {rng.uniform(1.2, 2.9):.1f} TiB: ok",
            f"[migration.preflight] restore point rp_dry_{run_no} created for rollback",
            f"[migration.preflight] batch plan: {len(tables)} tables, workers {rng.choice([2, 4, 6, 8])}"]
    for t in tables:
        per = rng.choice([500, 1000, 2000, 2500, 5000])
        nb = rows[t] // per + 1
        body.append(f"[migration.copy] LEDGR.{t} -> ledger.{t.lower()}: {rows[t]} rows estimated, {nb} batches")
        shown = sorted(rng.sample(range(1, nb + 1), min(nb, n)))
        for b in shown:
            r = per if b < nb else rows[t] % per
            body.append(f"[migration.copy] batch {b}/{nb} rows={r} ms={rng.randint(180, 2400)} checksum={hexs(8)}")
            if rng.random() < 0.06:
                k = rng.randint(1, 4)
                rejected[t] += k
                body.append(f"[migration.copy] WARN batch {b}/{nb}: {k} row(s) quarantined ("
                            f"{rng.choice(['ORA-01722 invalid number in NARRATIVE', 'value too long for varchar(35)', 'date out of range for timestamp(0)', 'null in NOT NULL column CURRENCY'])})")
            if rng.random() < 0.03:
                body.append(f"[migration.copy] batch {b}/{nb} retried after lock wait ({rng.randint(2, 9)}s), rollback of "
                            f"partial batch ok")
        body.append(f"[migration.copy] LEDGR.{t} done: rows={rows[t]}")
    verify = []
    for t in tables:
        verify.append(f"[migration.verify] ledger.{t.lower()} count src={rows[t]} dst={rows[t] - rejected[t]} ok"
                      + (f" ({rejected[t]} quarantined)" if rejected[t] else ""))
        verify.append(f"[migration.verify] ledger.{t.lower()} md5 src={hexs(12)} dst=" +
                      ("same" if fail != t else f"{hexs(12)} MISMATCH"))
    total = sum(rows.values())
    rejected_total = sum(rejected.values())
    summary = [f"[migration.summary] rows read {total}, rows written {total - rejected_total}, rejected {rejected_total}"]
    if guard:
        summary.append(f"[migration.summary] reject ratio {rejected_total / total:.6f} under guard")
    summary += [f"[migration.summary] elapsed {hms(elapsed)}",
                f"[migration.summary] dry-run checksum {checksum}"]
    if fail:
        tail = [f"[migration.summary] status FAILED: md5 mismatch on ledger.{fail.lower()}",
                f"[migration.rollback] staging schema dropped, restore point rp_dry_{run_no} kept for analysis"]
    else:
        tail = [f"[migration.summary] status PASSED",
                f"[migration.rollback] staging schema dropped, restore point rp_dry_{run_no} released"]
    lines = head + body + verify + summary + tail
    times = spread(start, elapsed, len(lines) - len(tail))
    times += [times[-1] + datetime.timedelta(seconds=k + 1) for k in range(len(tail))]
    return psql_lines("line", [f"{stamp(t)} {l}" for t, l in zip(times, lines)])


def dry_run_tables(n):
    """Per-partition counts of the dry run whose log was drawn last (`select ... from dry_run_tables where ...`)."""
    tables = list(LAST_TABLES)
    rows = []
    for t in tables:
        months = sorted(rng.sample(range(0, 84), min(84, n)))
        for m in months:
            y, mo = 2019 + m // 12, m % 12 + 1
            c = rng.randint(20_000, 900_000)
            rej = rng.choice([0] * 12 + [1, 2, 3])
            rows.append([f"ledger.{t.lower()}", f"p{y}_{mo:02d}", c, c - rej, rej, hexs(10),
                         "t" if not rej else "f"])
    return psql_table(["tbl", "part", "src_rows", "dst_rows", "rejected", "src_md5", "md5_match"], rows,
                      right=(2, 3, 4))


def area_board(n_runs=1):
    rows = []
    for a in AREAS:
        for k in range(n_runs):
            st = rng.choice(["passed", "passed", "passed", "failed", "running"]) if k == n_runs - 1 else "passed"
            rows.append([a, OWNERS[a], rng.randint(2, 9), f"2026-0{rng.randint(4, 5)}-{rng.randint(10, 28)}",
                         st, rng.randint(0, 40), rng.choice(["", "", "awaiting DBA review", "mapping question",
                                                             "waiting on vendor file", "perf: slow batches"])])
    return psql_table(["area", "owner", "dry_runs", "last_run", "last_status", "open_items", "note"], rows, right=(2, 5))


# --- the Oracle side ----------------------------------------------------------------

def ora_segments(n, total_text=None):
    """SQL*Plus: the largest LEDGR segments, with a computed sum."""
    names = []
    for t in TABLES:
        names.append((t, "TABLE PARTITION" if rng.random() < 0.6 else "TABLE"))
        names.append((f"{t[:22]}_PK", "INDEX PARTITION" if rng.random() < 0.5 else "INDEX"))
        if rng.random() < 0.5:
            names.append((f"{t[:20]}_IX{rng.randint(1, 4)}", "INDEX"))
    rng.shuffle(names)
    rows = []
    for name, kind in names[:n]:
        rows.append(["LEDGR", name, kind, rng.randint(1, 220), f"{rng.uniform(0.4, 980):.2f}"])
    rows.sort(key=lambda r: -float(r[4]))
    total = total_text or f"{sum(float(r[4]) for r in rows):.2f}"
    footer = ["".ljust(10 + 1 + 30 + 1 + 18 + 1 + 10 + 1) + "-" * 10, "sum".ljust(10 + 1 + 30 + 1 + 18 + 1 + 10 + 1)
              + total.rjust(10)]
    return sqlplus_table(["OWNER", "SEGMENT_NAME", "SEGMENT_TYPE", "PARTITIONS", "GB"], [10, 30, 18, 10, 10], rows,
                         right=(3, 4), footer=footer)


def ora_counts(n):
    rows = []
    for t in rng.sample(TABLES, min(n, len(TABLES))):
        rows.append([t, rng.randint(10_000, 2_000_000_000), f"2026-0{rng.randint(4, 6)}-{rng.randint(10, 28)}",
                     rng.choice(["YES", "YES", "NO"]), rng.randint(1, 96)])
    return sqlplus_table(["TABLE_NAME", "NUM_ROWS", "LAST_ANALYZED", "LOGGING", "DEGREE"], [30, 14, 13, 7, 6], rows,
                         right=(1, 4))


def crontab_old(n):
    jobs = ["/opt/ledgr/bin/run_job.sh", "/opt/ledgr/bin/refresh_mv.sh", "/opt/ledgr/bin/stats_gather.sh",
            "/opt/ledgr/bin/rman_level1.sh", "/opt/ledgr/bin/export_dump.sh", "/opt/ledgr/bin/check_fra.sh",
            "/opt/ledgr/bin/rotate_listener_log.sh", "/opt/ledgr/bin/batch_window_open.sh",
            "/opt/ledgr/bin/batch_window_close.sh", "/opt/ledgr/bin/balance_snapshot.sh"]
    out = ["# m h  dom mon dow   command", "MAILTO=ledgr-ops@hpay.example", "ORACLE_SID=LEDG1", ""]
    for _ in range(n):
        out.append(f"{rng.choice(CRONS)}  {rng.choice(jobs)} {rng.choice(['', '--quiet', '--batch nightly', '--ledger main', '--window 2h'])}"
                   f" >> /var/log/ledgr/cron.log 2>&1".replace("  >>", " >>"))
    return "\n".join(out)


# --- PostgreSQL side --------------------------------------------------------------

def pg_conf(v):
    lines = ["# -----------------------------", "# PostgreSQL configuration file", "# -----------------------------",
             "listen_addresses = '*'", "port = 5432", f"max_connections = {v.get('max_connections', 400)}",
             "superuser_reserved_connections = 5", "password_encryption = scram-sha-256", "ssl = on",
             "ssl_cert_file = '/etc/pki/pg/server.crt'", "ssl_key_file = '/etc/pki/pg/server.key'", "",
             f"shared_buffers = {v.get('shared_buffers', '64GB')}", f"work_mem = {v.get('work_mem', '64MB')}",
             f"maintenance_work_mem = {v.get('maintenance_work_mem', '4GB')}", "huge_pages = try",
             f"effective_cache_size = {v.get('effective_cache_size', '180GB')}", "effective_io_concurrency = 200",
             "random_page_cost = 1.1", "", "wal_level = logical", "wal_compression = lz4",
             f"max_wal_size = {v.get('max_wal_size', '64GB')}", f"min_wal_size = {v.get('min_wal_size', '8GB')}",
             "checkpoint_timeout = 15min", "checkpoint_completion_target = 0.9", "archive_mode = on",
             "archive_command = 'pgbackrest --stanza=ledger archive-push %p'", "max_wal_senders = 10",
             "max_replication_slots = 10", "hot_standby = on", "synchronous_commit = on",
             f"synchronous_standby_names = '{v.get('sync', 'ANY 1 (a02, a03)')}'", "",
             f"max_worker_processes = {v.get('mwp', 32)}", f"max_parallel_workers = {v.get('mpw', 16)}",
             "max_parallel_workers_per_gather = 4", "max_parallel_maintenance_workers = 4", "",
             "autovacuum_max_workers = 6", "autovacuum_naptime = 30s", "autovacuum_vacuum_scale_factor = 0.02",
             "autovacuum_analyze_scale_factor = 0.01", "autovacuum_vacuum_cost_limit = 2000", "",
             f"statement_timeout = {v.get('statement_timeout', 0)}", "idle_in_transaction_session_timeout = 10min",
             f"lock_timeout = {v.get('lock_timeout', 0)}", "", "log_destination = 'stderr'", "logging_collector = on",
             "log_min_duration_statement = 500ms", "log_checkpoints = on", "log_lock_waits = on",
             "log_temp_files = 0", "log_autovacuum_min_duration = 1s",
             "log_line_prefix = '%m [%p] %q%u@%d/%a '", "", "shared_preload_libraries = 'pg_stat_statements, auto_explain'",
             "pg_stat_statements.max = 10000", "auto_explain.log_min_duration = 5s", "timezone = 'UTC'",
             "datestyle = 'iso, dmy'", "default_text_search_config = 'pg_catalog.english'"]
    return "\n".join(lines) + "\n"


def pgbouncer_ini(default_pool, hosts):
    dbs = ["ledger", "ledger_ro", "migctl", "partner_read", "batch"]
    out = [";; connection pooler in front of the ledger databases", "[databases]"]
    for d in dbs:
        out.append(f"{d} = host={rng.choice(hosts)} port=5432 dbname={'ledger' if d != 'migctl' else 'migctl'}"
                   + (f" pool_size={rng.choice([20, 30, 40, 60])}" if rng.random() < 0.5 else "")
                   + (" pool_mode=session" if d == "migctl" else ""))
    out += ["", "[pgbouncer]", "listen_addr = 0.0.0.0", "listen_port = 6432", "unix_socket_dir = /run/pgbouncer",
            "auth_type = scram-sha-256", "auth_file = /etc/pgbouncer/userlist.txt",
            "auth_query = SELECT usename, passwd FROM pgbouncer.get_auth($1)", "pool_mode = transaction",
            f"max_client_conn = {rng.choice([2000, 3000, 4000, 5000])}", f"default_pool_size = {default_pool}",
            f"min_pool_size = {rng.choice([5, 10])}", f"reserve_pool_size = {rng.choice([5, 10, 15])}",
            "reserve_pool_timeout = 3", f"max_db_connections = {rng.choice([150, 180, 200, 240])}",
            "max_user_connections = 0", "server_round_robin = 1", "server_lifetime = 3600",
            "server_idle_timeout = 600", f"server_connect_timeout = {rng.choice([5, 10, 15])}",
            "server_login_retry = 5", "query_timeout = 0", "query_wait_timeout = 120",
            "client_idle_timeout = 0", "idle_transaction_timeout = 600", "server_reset_query = DISCARD ALL",
            "server_check_query = select 1", "server_check_delay = 30", "ignore_startup_parameters = extra_float_digits,search_path",
            "", "log_connections = 0", "log_disconnections = 0", "log_pooler_errors = 1", "stats_period = 60",
            "logfile = /var/log/pgbouncer/pgbouncer.log", "pidfile = /run/pgbouncer/pgbouncer.pid",
            "admin_users = pgb_admin", "stats_users = pgb_stats, grafana_ro", "", "tcp_keepalive = 1",
            "tcp_keepidle = 60", "tcp_keepintvl = 10", "tcp_keepcnt = 6", "", "[users]",
            f"svc_batch = pool_mode=session max_user_connections={rng.choice([20, 30, 40])}",
            f"app_partner = max_user_connections={rng.choice([60, 80, 100])}"]
    return "\n".join(out) + "\n"


def pg_activity(n):
    states = ["active", "idle", "idle", "idle in transaction", "active"]
    waits = ["", "", "ClientRead", "Lock:transactionid", "IO:DataFileRead", "LWLock:WALWrite", "Lock:relation"]
    queries = ["insert into ledger.postings (id, account_id, booking_date, amount_minor, currency) values ($1,$2,$3,$4,$5)",
               "select balance_minor from ledger.account_balances where account_id = $1 for update",
               "copy ledger_stage.journal_lines from stdin with (format binary)",
               "update ledger.payment_instructions set status = $1 where id = $2",
               "select count(*) from ledger_stage.postings where booking_date >= $1",
               "COMMIT", "BEGIN", "select 1", "vacuum (analyze) ledger.fees",
               "select * from ledger.holds where account_id = any($1) and released_at is null"]
    rows = []
    for _ in range(n):
        st = rng.choice(states)
        rows.append([rng.randint(10000, 99999), rng.choice(USERS), rng.choice(["migkit", "ledger-api", "psql",
                                                                               "batch-runner", "grafana", "pgbouncer"]),
                     f"10.62.{rng.randint(1, 9)}.{rng.randint(10, 250)}", st, rng.choice(waits) if st == "active" else "",
                     f"{rng.randint(0, 59)}:{rng.randint(0, 59):02d}.{rng.randint(0, 999):03d}",
                     rng.choice(queries)[:72]])
    return psql_table(["pid", "usename", "application_name", "client_addr", "state", "wait_event", "age",
                       "query"], rows, right=(0,))


def replication_lag(n, start):
    head = psql_table(["application_name", "client_addr", "state", "sync_state", "write_lag", "flush_lag", "replay_lag"],
                      [[h[-3:], f"10.62.4.{rng.randint(11, 19)}", "streaming", rng.choice(["quorum", "quorum", "async"]),
                        f"00:00:00.00{rng.randint(1000, 9999)}", f"00:00:00.00{rng.randint(1000, 9999)}",
                        f"00:00:00.0{rng.randint(10000, 99999)}"] for h in PG_PRD[1:]])
    rows = []
    t = start
    for _ in range(n):
        t += datetime.timedelta(minutes=1)
        rows.append([t.strftime("%Y-%m-%d %H:%M"), rng.randint(0, 40) * 1024 * rng.randint(1, 64),
                     f"{rng.uniform(0.1, 14.0):.1f}", rng.randint(200, 9000), rng.randint(0, 3)])
    body = psql_table(["minute", "slot_lag_bytes", "apply_lag_s", "changes_applied", "apply_errors"], rows,
                      right=(1, 2, 3, 4))
    return head + "\n\n" + body


def explain_plan(n):
    out = ["                                                          QUERY PLAN",
           "-" * 126,
           f" Finalize GroupAggregate  (cost=1{rng.randint(10000, 99999)}.12..1{rng.randint(10000, 99999)}.77 rows={rng.randint(200, 900)} width=48) "
           f"(actual time={rng.randint(3000, 9000)}.114..{rng.randint(9000, 19000)}.902 rows={rng.randint(200, 900)} loops=1)",
           "   Group Key: p.account_id",
           "   Buffers: shared hit=%d read=%d" % (rng.randint(10000, 900000), rng.randint(10000, 900000)),
           "   ->  Gather Merge  (cost=1.12..1.77 rows=1 width=48) (actual time=1.1..2.9 rows=4 loops=1)",
           "         Workers Planned: 4", "         Workers Launched: 4"]
    for k in range(n):
        ind = " " * (9 + 6 * (k % 4))
        node = rng.choice(["Partial HashAggregate", "Parallel Seq Scan on postings_p2024_%02d p" % rng.randint(1, 12),
                           "Index Scan using postings_p2025_%02d_account_id_booking_date_idx on postings_p2025_%02d p" %
                           (rng.randint(1, 12), rng.randint(1, 12)),
                           "Parallel Bitmap Heap Scan on journal_lines_p2025_%02d jl" % rng.randint(1, 12),
                           "Bitmap Index Scan on journal_lines_entry_id_idx", "Sort", "Hash Join", "Memoize"])
        out.append(f"{ind}->  {node}  (cost={rng.uniform(0, 900):.2f}..{rng.uniform(900, 90000):.2f} "
                   f"rows={rng.randint(1, 900000)} width={rng.choice([8, 16, 24, 48])}) (actual time={rng.uniform(0, 50):.3f}.."
                   f"{rng.uniform(50, 9000):.3f} rows={rng.randint(1, 900000)} loops={rng.choice([1, 5, 5, 1200])})")
        extra = rng.choice(["Filter: (booking_date >= '2025-01-01'::date)", "Rows Removed by Filter: %d" % rng.randint(1, 90000),
                            "Index Cond: (account_id = ANY ($1))", "Sort Key: p.account_id, p.booking_date",
                            "Hash Cond: (jl.entry_id = je.id)", "Recheck Cond: (entry_id = je.id)",
                            "Heap Blocks: exact=%d" % rng.randint(100, 90000), "Cache Key: je.id  Hits: %d  Misses: %d" %
                            (rng.randint(100, 90000), rng.randint(100, 9000))])
        out.append(f"{ind}      {extra}")
    out += [f" Planning Time: {rng.uniform(0.5, 9):.3f} ms", f" Execution Time: {rng.uniform(4000, 19000):.3f} ms",
            f"({len(out) - 2 + 2} rows)"]
    return "\n".join(out)


def describe_table(table, n_parts):
    cols = [("id", "bigint", "not null", "nextval('ledger.%s_id_seq'::regclass)" % table),
            ("account_id", "bigint", "not null", ""), ("booking_date", "date", "not null", ""),
            ("value_date", "date", "not null", ""), ("amount_minor", "numeric(19,4)", "not null", ""),
            ("currency", "character(3)", "not null", ""), ("direction", "character(1)", "not null", ""),
            ("status", "character varying(12)", "not null", "'booked'::character varying"),
            ("external_ref", "character varying(35)", "", ""), ("batch_ref", "character varying(35)", "", ""),
            ("narrative", "character varying(140)", "", ""), ("reversal_of", "bigint", "", ""),
            ("created_at", "timestamp with time zone", "not null", "now()"),
            ("updated_at", "timestamp with time zone", "not null", "now()")]
    out = [f"                                   Partitioned table \"ledger.{table}\"",
           psql_table(["Column", "Type", "Collation", "Nullable", "Default", "Storage", "Stats target", "Description"],
                      [[c, t, "", nn, d, "extended" if "char" in t or "numeric" in t else "plain", "", ""]
                       for c, t, nn, d in cols]).rsplit("\n", 1)[0],
           "Partition key: RANGE (booking_date)", "Indexes:",
           f"    \"{table}_pkey\" PRIMARY KEY, btree (id, booking_date)",
           f"    \"{table}_account_id_booking_date_idx\" btree (account_id, booking_date)",
           f"    \"{table}_external_ref_idx\" btree (external_ref) WHERE external_ref IS NOT NULL",
           "Foreign-key constraints:",
           f"    \"{table}_account_id_fkey\" FOREIGN KEY (account_id) REFERENCES ledger.accounts(id)",
           "Partitions:"]
    for k in range(n_parts):
        y, m = 2019 + k // 12, k % 12 + 1
        y2, m2 = (y, m + 1) if m < 12 else (y + 1, 1)
        out.append(f"    ledger.{table}_p{y}_{m:02d} FOR VALUES FROM ('{y}-{m:02d}-01') TO ('{y2}-{m2:02d}-01')"
                   + ("," if k < n_parts - 1 else ""))
    return "\n".join(out)


def seq_sync(n):
    rows = []
    for t in rng.sample(TABLES, min(n, len(TABLES))):
        last = rng.randint(10_000, 3_000_000_000)
        pg = last + rng.choice([0, 0, 0, 1000, 5000, -rng.randint(1, 90)])
        rows.append([f"ledger.{t.lower()}_id_seq", last, pg, pg - last, "ok" if pg >= last else "BEHIND"])
    return psql_table(["sequence", "ora_last", "pg_last", "gap", "verdict"], rows, right=(1, 2, 3))


def grants_diff(n):
    roles = ["app_ledger", "app_partner", "svc_batch", "svc_recon", "svc_export", "grafana_ro", "mig_ro", "mig_rw"]
    privs = ["SELECT", "SELECT, INSERT", "SELECT, INSERT, UPDATE", "SELECT, UPDATE", "USAGE", "EXECUTE"]
    before, after = [], []
    for _ in range(n):
        line = f"GRANT {rng.choice(privs)} ON ledger.{rng.choice(TABLES).lower()} TO {rng.choice(roles)};"
        before.append(line)
        r = rng.random()
        if r < 0.15:
            continue
        if r < 0.3:
            after.append(line.replace("SELECT, INSERT, UPDATE", "SELECT, INSERT"))
        else:
            after.append(line)
        if rng.random() < 0.1:
            after.append(f"GRANT SELECT ON ledger.{rng.choice(TABLES).lower()} TO {rng.choice(roles)};")
    return git_diff("db/grants/ledger.sql", "\n".join(before), "\n".join(after))


def step_table(n_steps, start, with_area=True):
    rows = []
    t = start
    names = ["freeze writers", "stop old schedulers", "final incremental copy", "sequence sync", "row counts",
             "md5 checks", "grants", "switch connection strings", "smoke tests", "open partner traffic",
             "first batch window", "rebuild indexes", "analyze", "enable triggers", "flip feature flags"]
    for k in range(n_steps):
        d = rng.randint(40, 2400)
        e = t + datetime.timedelta(seconds=d)
        row = [k + 1, rng.choice(names)]
        if with_area:
            row.append(rng.choice(AREAS + ["all", "all"]))
        row += [t.strftime("%H:%M:%S"), e.strftime("%H:%M:%S"), hms(d), rng.choice(["done"] * 9 + ["redone", "skipped"])]
        rows.append(row)
        t = e + datetime.timedelta(seconds=rng.randint(5, 300))
    headers = ["step", "name"] + (["area"] if with_area else []) + ["started", "finished", "took", "status"]
    return psql_table(headers, rows, right=(0,))


def checksum_compare(n):
    rows = []
    for a in AREAS:
        for t in rng.sample(TABLES, n):
            h = hexs(7)
            ok = rng.random() > 0.03
            rows.append([a, f"ledger.{t.lower()}", h, h if ok else hexs(7), "t" if ok else "f"])
    return psql_table(["area", "tbl", "ora_checksum", "pg_checksum", "match"], rows)


def count_compare(n):
    rows = []
    for t in rng.sample(TABLES, min(n, len(TABLES))):
        c = rng.randint(1000, 2_000_000_000)
        d = rng.choice([0] * 8 + [rng.randint(1, 40)])
        rows.append([f"ledger.{t.lower()}", c, c - d, d, "ok" if not d else "in-flight"])
    return psql_table(["tbl", "oracle_rows", "pg_rows", "diff", "verdict"], rows, right=(1, 2, 3))


def break_sample(n):
    reasons = ["amount differs in 4th decimal", "value date shifted by one day", "missing on pg side",
               "missing on oracle side", "currency CHF vs CHW", "duplicate external ref", "reversal not linked"]
    rows = []
    for k in range(n):
        a = rng.randint(100, 99_999_999)
        rows.append([rng.randint(4_000_000, 4_999_999), rng.randint(10_000_000, 99_999_999),
                     f"2026-05-{rng.randint(1, 28):02d}", f"{a / 100:.2f}",
                     f"{(a + rng.choice([0, 0, 1, -1, 100])) / 100:.2f}", rng.choice(["GBP", "EUR", "USD", "CHF", "PLN"]),
                     rng.choice(reasons)])
    return psql_table(["break_id", "account_id", "booking_date", "amount_ora", "amount_pg", "ccy", "reason"], rows,
                      right=(0, 1, 3, 4))


def rates_check(n):
    pairs = ["EURGBP", "USDGBP", "EURUSD", "GBPPLN", "EURCHF", "USDJPY", "GBPSEK", "EURNOK", "USDCAD", "GBPDKK"]
    rows = []
    for _ in range(n):
        p = rng.choice(pairs)
        base = rng.uniform(0.5, 160)
        rows.append([p, f"2026-0{rng.randint(1, 5)}-{rng.randint(1, 28):02d}", rng.randint(20, 96),
                     f"{base:.6f}", f"{base * rng.uniform(1.0, 1.01):.6f}", rng.choice([0, 0, 0, 0, 1])])
    return psql_table(["pair", "rate_day", "fixings", "min_rate", "max_rate", "gaps"], rows, right=(2, 3, 4, 5))


def pg_settings(n):
    names = [("shared_buffers", "8kB"), ("work_mem", "kB"), ("maintenance_work_mem", "kB"),
             ("effective_cache_size", "8kB"), ("max_connections", ""), ("max_wal_senders", ""),
             ("checkpoint_timeout", "s"), ("autovacuum_naptime", "s"), ("random_page_cost", ""),
             ("synchronous_commit", ""), ("wal_level", ""), ("idle_in_transaction_session_timeout", "ms"),
             ("log_min_duration_statement", "ms"), ("max_parallel_workers", ""), ("jit", ""),
             ("default_statistics_target", ""), ("track_io_timing", ""), ("huge_pages", ""),
             ("temp_file_limit", "kB"), ("archive_timeout", "s")]
    rows = []
    for name, unit in rng.sample(names, min(n, len(names))):
        val = rng.choice(["on", "off", str(rng.randint(1, 9000000)), "logical", "try", "1.1"])
        rows.append([name, val, unit, rng.choice(["configuration file", "default", "configuration file"]),
                     rng.choice(["f", "f", "f", "t"])])
    return psql_table(["name", "setting", "unit", "source", "pending_restart"], rows)


def pgbackrest_info(n):
    out = ["stanza: ledger", "    status: ok", "    cipher: aes-256-cbc", "",
           "    db (current)", f"        wal archive min/max (16): 00000001000021{hexs(2).upper()}000000A1/00000001000023{hexs(2).upper()}00000044", ""]
    t = day(5, 20)
    for k in range(n):
        t += datetime.timedelta(hours=rng.choice([6, 12, 24]))
        kind = "full" if k % 7 == 0 else rng.choice(["diff", "incr", "incr"])
        out += [f"        {kind} backup: {t:%Y%m%d-%H%M%S}F" + ("" if kind == "full" else f"_{t:%Y%m%d-%H%M%S}{kind[0].upper()}"),
                f"            timestamp start/stop: {t:%Y-%m-%d %H:%M:%S} / {t + datetime.timedelta(minutes=rng.randint(9, 190)):%Y-%m-%d %H:%M:%S}",
                f"            wal start/stop: 0000000100002{hexs(3).upper()}000000{hexs(2).upper()} / 0000000100002{hexs(3).upper()}000000{hexs(2).upper()}",
                f"            database size: {rng.uniform(3.1, 4.4):.1f}TB, database backup size: {rng.uniform(0.02, 4.4):.1f}TB",
                f"            repo1: backup set size: {rng.uniform(0.01, 1.2):.1f}TB, backup size: {rng.uniform(0.01, 1.2):.1f}TB"]
    return "\n".join(out)


def partitions_due(n):
    rows = []
    for k in range(n):
        y, m = 2012 + k // 12, k % 12 + 1
        rows.append([rng.choice(["POSTINGS", "JOURNAL_LINES", "PAYMENT_EVENTS"]), f"P{y}_{m:02d}",
                     rng.randint(1_000_000, 40_000_000), f"{rng.uniform(2, 90):.1f}", rng.choice(["NONE", "NONE", "LEGAL-HOLD"])])
    return sqlplus_table(["TABLE_NAME", "PARTITION_NAME", "NUM_ROWS", "GB", "HOLD"], [20, 16, 12, 8, 10], rows,
                         right=(2, 3))


def alert_rules(n):
    out = ["groups:", "  - name: migkit", "    rules:"]
    for k in range(n):
        metric = rng.choice(["migkit_job_batch_seconds", "migkit_job_rejected_total", "migkit_job_lag_seconds",
                             "pg_replication_lag_seconds", "pgbouncer_pools_cl_waiting", "pg_stat_activity_count",
                             "migkit_job_checksum_mismatch_total", "ledger_api_request_errors_total"])
        out += [f"      - alert: {metric.split('_', 1)[1].title().replace('_', '')}{k}",
                f"        expr: {rng.choice(['max', 'sum', 'rate'])}({metric}{'[5m]' if 'total' in metric else ''}) > {rng.choice([1, 5, 30, 120, 300])}",
                f"        for: {rng.choice(['2m', '5m', '10m', '15m'])}",
                "        labels:", f"          severity: {rng.choice(['page', 'ticket', 'ticket'])}",
                "        annotations:",
                f"          summary: \"{rng.choice(['batch runtime high', 'rejected rows climbing', 'apply lag over budget', 'replica behind', 'clients waiting on pool', 'checksum mismatch seen', 'ledger API errors'])}\"",
                f"          runbook: docs/runbooks/{rng.choice(['alerts', 'migkit', 'pg'])}.md#{hexs(4)}"]
    return "\n".join(out) + "\n"


def stat_statements(n):
    qs = ["select p.account_id, sum(p.amount_minor) from ledger.postings p join ledger.journal_lines jl on jl.posting_id = p.id where p.account_id = any($1) and p.booking_date >= $2 group by p.account_id",
          "select balance_minor, currency, as_of from ledger.account_balances where account_id = $1",
          "select id, status, updated_at from ledger.payment_instructions where external_ref = $1",
          "select * from ledger.postings where account_id = $1 and booking_date between $2 and $3 order by booking_date, id limit $4",
          "insert into ledger.payment_events (instruction_id, kind, payload, created_at) values ($1, $2, $3, now())",
          "select count(*) from ledger.holds where account_id = $1 and released_at is null",
          "select rate from ledger.rate_fixings where pair = $1 and fixed_at <= $2 order by fixed_at desc limit $3",
          "update ledger.payment_instructions set status = $1, updated_at = now() where id = $2",
          "select statement_id, period_id, status from ledger.statements where account_id = $1 order by period_id desc limit $2"]
    rows = []
    for k in range(n):
        calls = rng.randint(200_000, 900_000) if k == 0 else rng.randint(1000, 9_000_000)
        mean = rng.uniform(2000, 6000) if k == 0 else rng.uniform(0.05, 25)
        rows.append([calls, f"{calls * mean:.1f}", f"{mean:.2f}", f"{mean * rng.uniform(0.2, 3):.2f}",
                     calls * rng.randint(1, 40), f"{rng.uniform(50, 100):.1f}", (qs[0] if k == 0 else rng.choice(qs[1:]))[:80]])
    rows.sort(key=lambda r: -float(r[1]))
    return psql_table(["calls", "total_ms", "mean_ms", "stddev_ms", "rows", "hit_pct", "query"], rows,
                      right=(0, 1, 2, 3, 4, 5))


def apply_log(n, start):
    out = []
    t = start
    for _ in range(n):
        t += datetime.timedelta(seconds=rng.randint(5, 400))
        kind = rng.random()
        pid = rng.randint(10000, 99999)
        if kind < 0.45:
            out.append(f"{stamp(t)} UTC [{pid}] LOG:  logical replication apply worker for subscription \"dr_ledger\" "
                       f"has started")
        elif kind < 0.7:
            tb = rng.choice(TABLES).lower()
            st = stamp(t)
            out.append(f"{st} UTC [{pid}] ERROR:  duplicate key value violates unique constraint \"{tb}_pkey\"")
            out.append(f"{st} UTC [{pid}] DETAIL:  Key (id, booking_date)=({rng.randint(10 ** 8, 10 ** 9)}, "
                       f"2026-05-{rng.randint(1, 10):02d}) already exists.")
            out.append(f"{st} UTC [{pid}] CONTEXT:  processing remote data for replication origin \"pg_{rng.randint(16000, 17000)}\" "
                       f"during message type \"INSERT\" for replication target relation \"ledger.{tb}\" in transaction "
                       f"{rng.randint(10 ** 6, 10 ** 7)}, finished at {hexs(1).upper()}{rng.randint(10, 99)}/{hexs(8).upper()}")
        elif kind < 0.85:
            out.append(f"{stamp(t)} UTC [{pid}] LOG:  background worker \"logical replication worker\" (PID {rng.randint(10000, 99999)}) "
                       f"exited with exit code 1")
        else:
            out.append(f"{stamp(t)} UTC [{pid}] LOG:  checkpoint complete: wrote {rng.randint(1000, 90000)} buffers "
                       f"({rng.uniform(0.1, 9):.1f}%); 0 WAL file(s) added, {rng.randint(0, 40)} removed, "
                       f"{rng.randint(1, 60)} recycled; write={rng.uniform(10, 900):.3f} s, sync={rng.uniform(0, 2):.3f} s, "
                       f"total={rng.uniform(10, 900):.3f} s")
    return "\n".join(out)


def index_build_log(n, start):
    out = []
    t = start
    for _ in range(n):
        tb = rng.choice(TABLES).lower()
        y, m = rng.randint(2019, 2026), rng.randint(1, 12)
        d = rng.randint(3, 900)
        out.append(f"{stamp(t)} UTC [{rng.randint(10000, 99999)}] mig_rw@ledger/psql LOG:  duration: {d * 1000 + rng.randint(0, 999)}.{rng.randint(100, 999)} ms  "
                   f"statement: CREATE INDEX CONCURRENTLY {tb}_p{y}_{m:02d}_account_id_booking_date_idx ON ledger.{tb}_p{y}_{m:02d} (account_id, booking_date)")
        if rng.random() < 0.15:
            out.append(f"{stamp(t)} UTC [{rng.randint(10000, 99999)}] LOG:  checkpoint starting: wal")
        if rng.random() < 0.08:
            out.append(f"{stamp(t)} UTC [{rng.randint(10000, 99999)}] LOG:  temporary file: path \"base/pgsql_tmp/pgsql_tmp{rng.randint(1000, 9999)}.0\", size {rng.randint(100000000, 900000000)}")
        t += datetime.timedelta(seconds=d + rng.randint(1, 30))
    return "\n".join(out)


# --- job logs ---------------------------------------------------------------------

def py_lines(start, total_s, entries, logger_w=14):
    """entries: (level, logger, message); python-logging style lines spread over total_s seconds."""
    times = spread(start, total_s, len(entries))
    return "\n".join(f"{t:%Y-%m-%d %H:%M:%S},{rng.randint(0, 999):03d} {lv:<5} {lg:<{logger_w}} {msg}"
                     for t, (lv, lg, msg) in zip(times, entries))


def matcher_log(n, start, carried):
    """A nightly matching run: ledger side against bank statements."""
    items = rng.randint(1_200_000, 2_400_000)
    e = [("INFO", "matcher", f"load ledger side: {items} postings for {start - datetime.timedelta(days=1):%Y-%m-%d}"),
         ("INFO", "matcher", f"load statement side: {items + rng.randint(-9000, 9000)} lines from 14 bank files"),
         ("INFO", "matcher", "rules: exact(ref, amount) > fuzzy(ref~, amount, +-1d) > many-to-one(batch_ref)")]
    nb = rng.randint(180, 260)
    for b in sorted(rng.sample(range(1, nb + 1), min(n, nb))):
        m = rng.randint(6000, 9000)
        e.append(("INFO", "matcher.pass1", f"batch {b}/{nb} matched={m} open={rng.randint(0, 60)} "
                                           f"checksum={hexs(8)}"))
        if rng.random() < 0.08:
            e.append(("WARN", "matcher.pass1", f"batch {b}/{nb} ambiguous ref {rng.randint(10 ** 9, 10 ** 10 - 1)}: "
                                               f"{rng.randint(2, 4)} candidates, left open"))
    e += [("INFO", "matcher.pass2", f"fuzzy pass: {rng.randint(2000, 9000)} matched, {rng.randint(3000, 9000)} open"),
          ("INFO", "matcher.pass3", f"many-to-one pass: {rng.randint(300, 2000)} matched"),
          ("WARN", "matcher", f"{rng.randint(3, 40)} statement lines reference unknown accounts"),
          ("INFO", "matcher", f"carry-over: {carried} carried to the review queue"),
          ("INFO", "matcher", f"ledger totals by currency written to match_totals ({rng.randint(9, 14)} rows)"),
          ("INFO", "matcher", "run finished: exit 0")]
    return py_lines(start, rng.randint(1800, 5400), e, 14)


def java_batch_log(n, start, wall, fail=False):
    """The nightly batch (Spring Batch style) on a job host."""
    t = start
    out = []

    def line(level, thread, cls, msg):
        nonlocal t
        t += datetime.timedelta(milliseconds=rng.randint(200, 90000))
        out.append(f"{t:%Y-%m-%dT%H:%M:%S}.{rng.randint(0, 999):03d}Z {level:>5} {pid} --- [{thread:>15}] "
                   f"{cls:<36} : {msg}")

    pid = rng.randint(2000, 9000)
    vd = start - datetime.timedelta(days=1)
    line("INFO", "main", "c.h.ledger.batch.JobRunner", f"job started, value date {vd:%Y-%m-%d}, cut-off 23:59:59")
    line("INFO", "main", "c.h.ledger.batch.JobRunner", f"datasource ledger via {rng.choice(PG_STG)}:6432, pool ready")
    line("INFO", "main", "c.h.ledger.batch.StepPlanner", f"steps: net positions, fee accrual, bank files, ledger postings")
    chunks = rng.randint(300, 900)
    for c in sorted(rng.sample(range(1, chunks + 1), min(n, chunks))):
        th = f"batch-worker-{rng.randint(1, 8)}"
        line("INFO", th, "c.h.ledger.batch.ChunkWriter",
             f"batch {c}/{chunks} written ({rng.choice([1000, 2000])} items), ledger checksum {hexs(8)}")
        r = rng.random()
        if r < 0.05:
            line("WARN", th, "c.h.ledger.batch.ChunkWriter",
                 f"batch {c}/{chunks} lock wait {rng.randint(1, 30)}s on ledger.account_balances, retrying")
        elif r < 0.07:
            line("WARN", th, "o.s.b.c.step.item.ChunkMonitor", f"batch {c}/{chunks} rollback after deadlock, retry 1")
    if fail:
        line("ERROR", "main", "c.h.ledger.batch.JobRunner", "net position total differs from control total, halting")
        line("INFO", "main", "c.h.ledger.batch.JobRunner", "rollback of open batches complete")
    line("INFO", "main", "c.h.ledger.batch.JobRunner", f"job finished: {'FAILED' if fail else 'COMPLETED'}, {wall}")
    return "\n".join(out)


def export_log(n, start, manifest):
    """A parquet export to object storage."""
    parts = rng.randint(1100, 1900)
    e = [("INFO", "export", f"window {start - datetime.timedelta(days=1):%Y-%m-%d}, snapshot from ledger_ro"),
         ("INFO", "export", "schema v4: 31 columns, zstd level 6, row group 128 MiB"),
         ("INFO", "export.plan", f"{parts} parts planned over {rng.randint(4, 12)} workers")]
    for p in sorted(rng.sample(range(1, parts + 1), min(n, parts))):
        e.append(("INFO", "export.write", f"part-{p:05d}.parquet rows={rng.randint(80_000, 400_000)} "
                                          f"bytes={rng.randint(40_000_000, 140_000_000)} sha256={hexs(16)}"))
        if rng.random() < 0.05:
            e.append(("WARN", "export.upload", f"part-{p:05d}: upload retry {rng.randint(1, 3)} after 503 SlowDown"))
    e += [("INFO", "export", f"row count check: ledger_ro={rng.randint(10 ** 8, 9 * 10 ** 8)} exported=same"),
          ("INFO", "export", manifest),
          ("INFO", "export", "object lock: compliance mode, legal hold off"),
          ("INFO", "export", "done, exit 0")]
    return py_lines(start, rng.randint(2000, 9000), e, 13)


def poster_log(n, start, posted):
    """The posting job: journal entries into the general ledger tables, plain bracket style."""
    t = start
    out = []
    periods = ["2026-03", "2026-04", "2026-05"]
    nb = rng.randint(400, 1200)
    out.append(f"{stamp(t, False)} [poster] start: periods {', '.join(periods)}, rules version {rng.randint(30, 60)}")
    out.append(f"{stamp(t, False)} [poster] rule cache loaded: {rng.randint(300, 900)} posting rules")
    for b in sorted(rng.sample(range(1, nb + 1), min(n, nb))):
        t += datetime.timedelta(seconds=rng.randint(3, 60))
        out.append(f"{stamp(t, False)} [poster] period {rng.choice(periods)} batch {b}/{nb} journals={rng.randint(50, 400)} "
                   f"lines={rng.randint(400, 4000)} balanced=yes")
        if rng.random() < 0.05:
            out.append(f"{stamp(t, False)} [poster] WARN batch {b}/{nb}: {rng.randint(1, 5)} lines to suspense "
                       f"(no rule for product {rng.choice(['FX-SWP', 'CARD-RFD', 'SEPA-RTN', 'FPS-RTN'])})")
    t += datetime.timedelta(seconds=rng.randint(30, 300))
    out.append(f"{stamp(t, False)} [poster] summary: journals {rng.randint(500_000, 1_500_000)}, {posted}, "
               f"suspense {rng.randint(0, 60)}")
    out.append(f"{stamp(t, False)} [poster] trial balance per period: zero")
    out.append(f"{stamp(t, False)} [poster] exit 0")
    return "\n".join(out)


def api_log(n, start):
    """Partner-facing API pods, JSON lines."""
    routes = ["/v2/ledger/balances", "/v2/ledger/postings", "/v2/payments", "/v2/payments/{id}", "/v2/statements",
              "/healthz"]
    out = []
    t = start
    for _ in range(n):
        t += datetime.timedelta(milliseconds=rng.randint(10, 9000))
        r = rng.random()
        lv, msg = ("info", "request") if r < 0.75 else (("warn", "upstream slow") if r < 0.92 else ("error", "db timeout"))
        out.append(json.dumps({"ts": f"{t:%Y-%m-%dT%H:%M:%S}.{rng.randint(0, 999):03d}Z", "level": lv, "msg": msg,
                               "route": rng.choice(routes), "status": 200 if lv == "info" else (200 if lv == "warn" else 504),
                               "ms": rng.randint(3, 200) if lv == "info" else rng.randint(900, 6000),
                               "pool_wait_ms": rng.randint(0, 5) if lv == "info" else rng.randint(100, 3000),
                               "pod": f"ledger-api-{hexs(9)}-{hexs(5)}", "trace": hexs(16)}))
    return "\n".join(out)


def steps_log(n, start, wall):
    """A scripted run of the switch-over steps (orchestrator log)."""
    steps = ["announce freeze", "stop old schedulers", "drain partner traffic", "final incremental copy",
             "sequence sync", "row counts", "md5 checks", "grants", "switch connection strings", "smoke tests",
             "first batch window", "open partner traffic", "enable alerts"]
    e = [("INFO", "orchestrator", f"plan loaded: {len(steps)} steps, {rng.randint(40, 70)} checks"),
         ("INFO", "orchestrator", "restore point rp_switch created on the target for rollback")]
    for k, s in enumerate(steps, 1):
        e.append(("INFO", "orchestrator", f"step {k:02d}/{len(steps)} {s}: start"))
        for _ in range(rng.randint(max(1, n // 3), n)):
            e.append((rng.choice(["INFO"] * 8 + ["WARN"]), f"step.{k:02d}",
                      rng.choice([f"batch {rng.randint(1, 400)} copied rows={rng.randint(100, 9000)} checksum={hexs(8)}",
                                  f"check ledger.{rng.choice(TABLES).lower()} count ok",
                                  f"check ledger.{rng.choice(TABLES).lower()} md5 ok",
                                  f"waiting for {rng.randint(1, 9)} sessions to finish",
                                  f"lag {rng.uniform(0, 9):.1f}s", "rollback script verified (dry)"])))
        e.append(("INFO", "orchestrator", f"step {k:02d}/{len(steps)} {s}: done in {hms(rng.randint(30, 1900))}"))
    e.append(("INFO", "orchestrator", f"all steps complete, {wall}"))
    return py_lines(start, rng.randint(10000, 18000), e, 12)


# --- runbooks ---------------------------------------------------------------------

def batch_runbook(host):
    return f"""## 5. Bring the nightly batch up on the new side

Preconditions: step 4 signed off in the change ticket; the old scheduler on the
Oracle side is disabled (step 3.2) and its last run shows COMPLETED.

5.1 Check that no batch holds the control lock on the new database:

    psql -h pgl-prd-a01.{DOMAIN} -d ledger -c \\
      "select job, holder, acquired_at from batch_control.lock where released_at is null"

    Expect zero rows. If a row is there, stop and call the DBA on call.

5.2 Log on to {host} as svc_batch and check the build:

    sudo -iu svc_batch
    /opt/ledger-batch/bin/ledger-batch --version        # must match the release in the ticket
    grep -E '^(datasource|pool)' /etc/ledger-batch/application.properties

5.3 Enable and start the scheduler unit:

    sudo systemctl enable --now ledger-batch-scheduler.service
    systemctl status ledger-batch-scheduler.service --no-pager

5.4 Trigger the catch-up run for the value dates missed during the freeze,
    one value date at a time, oldest first:

    /opt/ledger-batch/bin/ledger-batch run --value-date <YYYY-MM-DD> --wait

    Each run prints a ledger checksum per batch; keep the console output in
    the ticket. A run that stops with "net position total differs" must not be
    re-run until the batch owner has looked at it.

5.5 Confirm the control totals against the bank file:

    psql -h pgl-prd-a01.{DOMAIN} -d ledger -f sql/checks/control_totals.sql

Rollback for step 5 (written and tested in rehearsal 2):

    sudo systemctl disable --now ledger-batch-scheduler.service    # same host
    psql ... -c "select batch_control.void_runs(since => '<freeze start>')"
    Re-enable the Oracle scheduler (step 3.2 in reverse) and tell the channel.
    Postings written by the voided runs stay in ledger.postings with status
    'voided'; the next successful run skips them.
"""


def partitions_runbook(host):
    return f"""## 3. Dropping expired partitions on the old side

Who: the workstream owner runs it; a second approver must be named in the
change ticket before step 3.3 (standing rule, no exceptions for "small" runs).

3.1 Work from {host}; it holds the wallet for the LEDGR_MAINT account and
    nothing else runs there overnight.

    ssh oracle@<host above>
    . oraenv <<< LEDG1
    sqlplus -s /@LEDGR_MAINT @sql/maint/partitions_due.sql

    The report lists every partition older than the retention period with its
    row count, size and hold flag. Anything with HOLD = LEGAL-HOLD is skipped
    by the procedure, but check the list against the legal team's register anyway.

3.2 Take the cold copy first:

    expdp /@LEDGR_MAINT parfile=par/cold_copy.par tables=<list from 3.1>
    sha256sum /cold/ledgr/*.dmp > /cold/ledgr/SHA256SUMS

    Upload the dump files and the sums to the cold bucket. Do not continue until
    the upload job reports the same sums.

3.3 Drop, one table at a time, with the approver on the call:

    exec ledgr_maint.drop_expired(p_table => 'POSTINGS', p_dry_run => false);

    The procedure logs every partition it drops to LEDGR_MAINT.DROP_LOG with
    the batch id, the row count and the dump file name.

3.4 Gather stats on the tables touched:

    exec dbms_stats.gather_table_stats('LEDGR', 'POSTINGS', cascade => true);

Rollback for step 3: partitions dropped in 3.3 come back only from the cold
copy (impdp with the dump file named in DROP_LOG); plan on about an hour per
hundred gigabytes. This is why 3.2 is not optional.
"""


def endpoints_runbook(vip):
    return f"""### T+02:10  Switch connection endpoints

Owner: DBA on call. Needs: steps T+01:20 (final incremental copy) and T+01:55
(md5 checks) green in the tracker.

1. Lower the TTL was done at T-24h (300s); confirm nothing cached longer:

       dig +short ledger-db.prod.hpay.internal
       dig +noall +answer ledger-db.prod.hpay.internal | awk '{{print $2}}'

2. Repoint the CNAME:

       nsupdate -k /etc/bind/keys/ledger.key <<'EOF'
       server ns1.hpay.internal
       update delete ledger-db.prod.hpay.internal CNAME
       update add ledger-db.prod.hpay.internal 300 CNAME {vip}.{DOMAIN}.
       send
       EOF

3. Reload the poolers so new server connections resolve the new name:

       for h in ldn2-pgb-01 ldn2-pgb-02; do ssh $h sudo systemctl reload pgbouncer; done

4. Watch the new primary take sessions:

       psql -h pgl-prd-a01.{DOMAIN} -d ledger -c \\
         "select usename, count(*) from pg_stat_activity group by 1 order by 2 desc"

   Application users should appear within two minutes. The old listener should
   see its session count fall to the monitoring user only.

Rollback: the same nsupdate with the old target (ledgprd-scan.hpay.internal),
reload the poolers, then stop writes on the new side with
`alter database ledger set default_transaction_read_only = on` and tell the
channel. Any writes taken on the new side before the rollback are replayed to
Oracle by the reverse apply job (section 9).
"""


def runbook_noise(title, n):
    verbs = ["Confirm", "Check", "Announce", "Stop", "Start", "Verify", "Record", "Pause", "Resume", "Compare"]
    objs = ["the freeze in the channel", "the old schedulers on the Oracle side", "replication lag under 5 seconds",
            "row counts for every table in scope", "the md5 results against the dry run", "the batch control lock",
            "that the rollback script has been run in rehearsal", "partner traffic at the gateway",
            "the sequence gaps", "the pooler statistics", "the checksum report", "the alert silences"]
    out = [f"## {title}", ""]
    for k in range(1, n + 1):
        out.append(f"{k}. {rng.choice(verbs)} {rng.choice(objs)}.")
        if rng.random() < 0.5:
            out += ["", f"       {rng.choice(['psql', 'ssh', 'sqlplus -s', 'curl -fsS', 'migctl'])} "
                        f"{rng.choice(['-h ' + rng.choice(PG_PRD) + '.' + DOMAIN + ' -d ledger -f sql/checks/' + hexs(4) + '.sql', rng.choice(JOB_HOSTS) + ' sudo systemctl status ledger-batch-scheduler', '/@LEDGR_RO @sql/counts.sql', 'https://gateway.hpay.internal/admin/routes', 'status --area all'])}", ""]
        if rng.random() < 0.35:
            out.append(f"   Rollback: {rng.choice(['undo in reverse order and tell the channel', 'restore the previous connection string', 'restart the old scheduler', 're-open the freeze and page the DBA on call', 'none needed, read-only step'])}.")
    return "\n".join(out)


# ---------------------------------------------------------------------------
# The conversation's machinery.

items = []
facts = []
turn_no = 0
call_no = 0
topic = ""
fact_turns = {}  # label -> turn
fact_ids = {}    # label -> id


TAGS = set()


def new_turn(t, *extra):
    global turn_no, topic, TAGS
    turn_no += 1
    topic = t
    TAGS = {t, *extra}


def record(content, source):
    """Each planted value `content` holds becomes a fact of this turn."""
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


# Sentences an answer may close with, by the topics they suit.
ASIDES = [
    ({"any"}, "I would put the outputs in the workstream's ticket now, while it is clear which run they came from."),
    ({"any"}, "Worth writing the decision and its reason into the programme log today; the steering pack is built "
              "from it."),
    ({"any"}, "If anything here changes the cutover plan, the runbook owner should hear it from us first, not from "
              "the channel."),
    ({"dry", "etl rewrite", "gl posting"}, "A dry run only tells us something if the next one starts from the same "
                                           "snapshot rules, so I would not change the SCN handling between runs."),
    ({"dry", "config"}, "Config and dry run belong together in the sign-off: a passing run with a config nobody "
                        "reviewed is only half a result."),
    ({"config"}, "Every key here has a default in the shared defaults file, so removing a line is also a change, "
                 "not a no-op."),
    ({"config", "cluster"}, "The DBA on call has to approve anything under the target section, so it is worth "
                            "batching those changes into one review."),
    ({"dry", "reconciliation jobs", "settlement batch"}, "Count checks catch lost rows; the ordered checksums catch "
                                                         "changed ones. We need both to pass before a sign-off."),
    ({"cutover", "planning"}, "Each step in the plan should say who does it, how long it takes in rehearsal, and "
                              "how it is undone."),
    ({"cutover", "planning", "comms"}, "Partners plan around our announcements, so a date we say once is hard to "
                                       "move; I would only publish what the go/no-go has agreed."),
    ({"cluster"}, "Settings that need a restart are cheaper to change now than during the freeze."),
    ({"comms", "status"}, "Short status notes get read; I would keep the detail in the tracker and link it."),
    ({"archive purge", "audit export"}, "Anything that deletes data is easier to defend when the copy it relies on "
                                        "has been verified by someone other than the person deleting."),
    ({"partner api", "fx rates service"}, "Latency problems under load tend to show up in pool waits before they "
                                          "show up as errors."),
    ({"chargeback ingest", "vendor contract feed"}, "External files change shape without warning, so the reject "
                                                    "guard is the safety net, not an afterthought."),
    ({"hypercare"}, "The first week after a move is when the rare jobs run for the first time, so the calendar of "
                    "monthly and quarterly jobs matters as much as the nightly ones."),
]
NEXTS = [
    ({"any"}, "attach the outputs to the ticket"),
    ({"any"}, "update the programme tracker"),
    ({"dry", "config"}, "ask the owner to sign off in the tracker"),
    ({"dry"}, "schedule the next dry run from the same snapshot rules"),
    ({"config", "cluster"}, "get the DBA's review on the target settings"),
    ({"cutover", "planning"}, "add the step and its rollback to the runbook"),
    ({"cutover", "planning", "comms"}, "tell the steering group"),
    ({"comms"}, "send the partner notice for review"),
    ({"archive purge", "audit export"}, "check the legal hold register"),
    ({"hypercare"}, "add it to the hypercare checklist"),
]


def suiting(pool):
    return [text for tags, text in pool if "any" in tags or tags & TAGS]


def A(body, pad=True):
    parts = [body]
    if pad:
        asides = suiting(ASIDES)
        k = rng.choice([0, 0, 1, 1, 2])
        if k:
            parts.append(" ".join(rng.sample(asides, min(k, len(asides)))))
        nexts = suiting(NEXTS)
        if rng.random() < 0.3 and len(nexts) >= 2:
            parts.append("Next:\n" + "\n".join(f"- {x}" for x in rng.sample(nexts, min(len(nexts), rng.randint(2, 3)))))
    content = "\n\n".join(parts)
    items.append({"turn": turn_no, "role": "assistant", "kind": "message", "content": content})
    record(content, "message")


def say(text):
    """A short assistant message between two calls of one turn."""
    items.append({"turn": turn_no, "role": "assistant", "kind": "message", "content": text})
    record(text, "message")


def tool(name, args, output, expect=()):
    """A call and its result; `expect`: the planted labels the output is meant to hold (and no others)."""
    global call_no
    held = {l for l, v in P.items() if v in output} | {l for l, v in M.items() if v in output}
    assert held == set(expect), (turn_no, name, args, held, expect)
    assert clean(json.dumps(args)), (turn_no, args)
    call_no += 1
    cid = f"call_{call_no:03d}"
    items.append({"turn": turn_no, "role": "assistant", "kind": "tool_call", "content": json.dumps(args),
                  "tool_name": name, "call_id": cid})
    items.append({"turn": turn_no, "role": "tool", "kind": "tool_result", "content": output, "tool_name": name,
                  "call_id": cid})
    record(output, "tool")


def psql(db, query, output, expect=(), host=None):
    args = {"db": db, "query": query}
    if host:
        args = {"host": host, **args}
    tool("psql", args, output, expect)


def sqlplus(query, output, expect=()):
    tool("sqlplus", {"connect": "/@LEDGR_RO", "query": query}, output, expect)


def read(path, text, expect=()):
    tool("read_file", {"path": path}, numbered(text), expect)


def sh(cmd, output, expect=(), host=None):
    args = {"cmd": cmd} if host is None else {"host": host, "cmd": cmd}
    tool("bash", args, output, expect)


def git(cmd, output, expect=()):
    tool("git", {"cmd": cmd}, output, expect)


# ---------------------------------------------------------------------------
# Recall questions: asked at their turn, or as soon after as the programme
# allows (never two questions in a row, never fewer than MIN_GAP turns after
# the fact). The assistant's answer stays vague and points at the output.

MIN_GAP = 25

QUESTIONS = [
    # tuning set: asked the way a user would, mostly in the workstream's own name
    ("tune", "E1", 44, "checksum",
     "Marek asked me to fill in the sign-off sheet before his leave. What did the dry run show for the etl rewrite? "
     "I need the checksum it finished on."),
    ("tune", "R1", 52, "checksum",
     "Which checksum did the reconciliation jobs' dry run end with? Farah wants to tick it off against her notes."),
    ("tune", "E2", 58, "config", "What batch size is the etl rewrite pipeline config set to?"),
    ("tune", "V3", 64, "config", "What timeout is set in the vendor contract feed config, in seconds?"),
    ("tune", "F1", 70, "checksum", "Remind me of the checksum from the fx rates service dry run."),
    ("tune", "P3", 78, "config",
     "When does the archive purge job run? Give me the cron schedule from its config."),
    ("tune", "A1", 86, "checksum",
     "The auditors will ask for it in the pack: what checksum did the audit export dry run produce?"),
    ("tune", "PA2", 94, "config", "What connection pool size is set in the partner api config?"),
    ("tune", "C2", 102, "config",
     "How many retries does the chargeback ingest config allow before a batch gives up?"),
    ("tune", "G1", 110, "checksum", "What was the dry-run checksum for the gl posting workstream?"),
    ("tune", "S3", 118, "runbook",
     "Which host does the settlement batch runbook say to start the scheduler on?"),
    ("tune", "G3", 128, "log", "How many lines did the gl posting job post in the run whose log we read?"),
    # held-out set: other words for the same kinds of things
    ("held", "V2", 48, "config",
     "Quick one on the contract feed: what's the vendor contract's guard set to? The reject threshold, I mean."),
    ("held", "E3", 56, "log",
     "Someone on the steering group asked how long the ETL dry run took end to end. Roughly how many minutes?"),
    ("held", "F2", 62, "config", "How many DB connections does the FX service's pool get, per its config?"),
    ("held", "V1", 68, "checksum",
     "Contract team is chasing me again, sigh. Can you dig up the hash the vendor feed's dry-run ended on?"),
    ("held", "R2", 74, "config",
     "What time do the recon jobs kick off on weekdays? Trying to fit the freeze planning around them."),
    ("held", "S2", 82, "config", "What's the lock wait limit in the settlement config? in secs"),
    ("held", "P1", 90, "checksum", "The purge job's dry run: what hash did it finish with?"),
    ("held", "C3", 96, "config", "How big are the chargeback ingest's batches, going by its config?"),
    ("held", "A2", 104, "config",
     "How long does the audit dump keep stuff before it's allowed to go? Years is fine, roughly."),
    ("held", "S1", 112, "checksum",
     "What did the settlement re-run's checksum come out as? The second dry run, not the one that broke."),
    ("held", "X3", 120, "pooler",
     "On the DR side, how big is the bouncer's default pool per db/user pair? Prod's I know."),
    ("held", "PA1", 126, "checksum",
     "partner gateway: what hash did its second dry run end on? need it for the go/no-go pack"),
    ("held", "P4", 134, "runbook",
     "Which box do the archive purge runbooks say the partition drops are run from?"),
    ("held", "C1", 140, "checksum",
     "chargebacks: which checksum did their dry run land on? Hanne lost her notes, bless her."),
]
OFF_TOPIC = [
    ("tune", 98, "Completely unrelated: what's a good way to keep basil alive on a north-facing windowsill?",
     "Basil wants more light than a north window gives, so the honest answer is to help it: the brightest spot you "
     "have, a cheap LED grow light for ten or twelve hours a day if you can, and a pot that drains well. Water when "
     "the top of the soil is dry rather than on a schedule, keep it away from cold glass at night, and pinch out the "
     "tips above a pair of leaves so it bushes instead of getting leggy. Supermarket pots are several plants crammed "
     "together; splitting them into three or four pots helps a lot."),
    ("held", 116, "Random one while a build runs: how do I stop my sourdough starter smelling like nail varnish?",
     "That acetone smell means the starter is hungry: the yeast and bacteria have run out of food and are making "
     "more acidic by-products. Feed it more often or at a bigger ratio (say one part starter to five of flour and "
     "five of water), keep it a little warmer, and discard most of it before each feed. After two or three regular "
     "feeds the smell should go back to yeasty and slightly sour. If it lives in the fridge, give it a couple of "
     "room-temperature feeds before baking with it."),
]
ANSWERS = {
    "checksum": ["It is the line at the very end of the dry-run log we pulled for that workstream, just before the "
                 "status. I would copy it from that output rather than from me; a hex string is easy to garble.",
                 "That one is in the closing summary of that workstream's dry-run log, the query against "
                 "dry_run_log we ran at the time. Quote it from the output as printed."],
    "config": ["It is a key in that workstream's config file as we read it during its review; nothing merged since "
               "has touched that line, so the read is still the live value.",
               "That comes straight from the config file we read for that workstream. I would take it from that "
               "read rather than from memory."],
    "runbook": ["It is named in the step of that runbook we read together; I would quote the step as written when "
                "it goes into the ticket."],
    "log": ["It is in the closing summary lines of the log we pulled for that run."],
    "pooler": ["It is a line in the pooler config we read for that site, in its main section; the other site's "
               "file has the same key with its own value, so check which one you copy from."],
}

probes = {"tune": [], "held": []}
pending = []  # [due, order, spec]
last_was_question = False


def schedule(label):
    for order, (which, lab, at, kind, text) in enumerate(QUESTIONS):
        if lab == label:
            pending.append([max(at, fact_turns[label] + MIN_GAP), order, (which, label, kind, text)])


for _k, (_which, _at, _text, _answer) in enumerate(OFF_TOPIC):
    pending.append([_at, 100 + _k, (_which, None, _answer, _text)])


def ask(spec):
    global last_was_question
    which, label, kind, text = spec
    if label is None:
        new_turn("off-topic")
        U(text)
        probes[which].append({"kind": "recall", "turn": turn_no, "facts": []})
        A(kind, pad=False)
    else:
        new_turn("recall")
        U(text)
        assert turn_no - fact_turns[label] >= MIN_GAP, (text, turn_no - fact_turns[label])
        probes[which].append({"kind": "recall", "turn": turn_no, "facts": [fact_ids[label]]})
        A(rng.choice(ANSWERS[kind]), pad=False)
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


def regular(t, *extra):
    global last_was_question
    maybe_ask()
    last_was_question = False
    new_turn(t, *extra)


# ---------------------------------------------------------------------------
# The programme.

def kickoff_board():
    rows = []
    status = {"partner api": "failed", "vendor contract feed": "passed", "settlement batch": "passed"}
    notes = {"vendor contract feed": "waiting on vendor file", "partner api": "perf: slow batches",
             "archive purge": "legal hold list pending", "fx rates service": "mapping question"}
    for a in AREAS:
        rows.append([a, OWNERS[a], rng.randint(2, 6), f"2026-04-{rng.randint(1, 10):02d}",
                     status.get(a, "passed"), rng.choice(["yes", "yes", "no"]), f"2026-04-{rng.randint(13, 30):02d}",
                     rng.randint(0, 14), notes.get(a, "")])
    return psql_table(["area", "owner", "dry_runs", "last_run", "last_status", "config_reviewed", "next_dry_run",
                       "open_items", "note"], rows, right=(2, 7))


ITEM_TITLES = ["type mapping for NUMBER without scale", "quarantine list to data owners", "restore point retention",
               "batch window overlap at month end", "vendor SFTP allow-list", "grants for service role",
               "index on external_ref", "sequence gap policy", "legal hold register", "alert thresholds",
               "runbook rollback section", "pool size in connection budget", "DATE columns with time part",
               "bank holiday calendar load", "reverse apply job test", "partner read-only mode",
               "parquet schema v4 sign-off", "suspense products list", "statement file timing", "replica lag alert"]


def open_items(n):
    rows = []
    for _ in range(n):
        a = rng.choice(AREAS)
        rows.append([a, rng.choice(TICKETS), rng.choice(ITEM_TITLES), f"2026-0{rng.randint(3, 4)}-{rng.randint(1, 28):02d}",
                     OWNERS[a], rng.choice(["no", "no", "no", "yes"])])
    rows.sort()
    return psql_table(["area", "ticket", "title", "opened", "owner", "blocks_cutover"], rows)


def board_with_history(n):
    rows = []
    for a in AREAS:
        for k in range(n):
            rows.append([a, rng.randint(1, 9), f"2026-0{rng.randint(4, 5)}-{rng.randint(10, 28):02d} 0{rng.randint(0, 4)}:"
                                               f"{rng.randint(0, 59):02d}", rng.choice(["passed"] * 5 + ["failed"]),
                         rng.randint(100_000, 90_000_000), hms(rng.randint(600, 14000)), hexs(7)])
    return psql_table(["area", "run_no", "started_at", "status", "rows_written", "elapsed", "checksum"], rows,
                      right=(1, 4))


DRY_LOG_Q = "select line from dry_run_log where area = '{area}' and run_no = {run} order by seq;"
DRY_TAB_Q = ("select tbl, part, src_rows, dst_rows, rejected, src_md5, md5_match from dry_run_tables "
             "where area = '{area}' and run_no = {run} order by tbl, part;")


def dry_log(area, run, when, checksum_label=None, elapsed=None, labels=(), fail=False, guard=False):
    ck = P[checksum_label] if checksum_label else None
    el = elapsed
    out = fit(lambda n: planted(lambda: dry_run_log(n, when, run, ck or hexs(7), el or rng.randint(2400, 14000),
                                                    fail=fail, guard=guard), labels), 14)
    psql("migctl", DRY_LOG_Q.format(area=area, run=run), out, expect=labels)


def dry_tables(area, run):
    psql("migctl", DRY_TAB_Q.format(area=area, run=run), fitN(lambda n: dry_run_tables(n), 22))


# --- kickoff ------------------------------------------------------------------------

new_turn("kickoff", "planning")
U(f"Hi. I'm {M['name']}, programme lead for the ledger migration at {M['company']}. We're moving the payments "
  f"ledger off the old Oracle system onto PostgreSQL, ten workstreams, and I've inherited the programme from someone "
  f"who left last month. The epic is {M['epic']}. Can you pull the workstream board from migctl so we start from the "
  f"same picture?")
psql("migctl", "select w.area, w.owner, count(d.*) as dry_runs, max(d.started_at)::date as last_run, "
               "(array_agg(d.status order by d.started_at desc))[1] as last_status, w.config_reviewed, "
               "w.next_dry_run, w.open_items, w.note from workstream w left join dry_run d using (area) "
               "group by w.area, w.owner, w.config_reviewed, w.next_dry_run, w.open_items, w.note "
               "order by w.area;", N(kickoff_board))
say("And the open items behind those counts:")
psql("migctl", "select area, ticket, title, opened::date, owner, blocks_cutover from open_item where closed_at is null "
               "order by area, ticket;", fitN(lambda n: open_items(n), 40))
A("Ten workstreams, each with an owner and a few dry runs behind it already. Most of them passed their last run. "
  "The exceptions are the partner API, whose last run failed and which has a performance note against it, and the "
  "vendor contract feed, which passed but is waiting on a file from the vendor. Two more carry open questions: a "
  "mapping question on the FX rates service and a pending legal hold list for the archive purge. The open items are a "
  "mix of mapping questions, access and grants, alerting and runbook gaps; only a few are flagged as blocking "
  "cutover, and I would ask each owner to confirm that flag rather than trust it.\n\nA sensible way through: one pass over every workstream (config review, then its latest dry "
  "run), then the cross-cutting pieces (cluster settings, pooling, runbooks), then rehearsals.")

new_turn("kickoff", "planning")
U(f"Ground rules before anything else. First, and this one is permanent: {RULES[0][1]}. Last year someone ran a "
  f"purge of old postings through the wrong DB link and we spent a week restoring from tape. Second, cutover chatter "
  f"goes in {M['channel']}, please point people there rather than DMs.")
A("Understood, and I will hold to it for the whole programme: no purge runs against prod unless a second approver "
  "is named in the change ticket first, however small the run looks. That covers the archive purge job itself and "
  "any ad-hoc delete of expired data during cleanup. I will also point anyone asking about cutover timing to the "
  "channel rather than answering in side threads.")

new_turn("kickoff", "planning")
U(f"Second rule, also for the whole programme: {RULES[1][1]}. The last migration here had steps in the runbook "
  f"that nobody knew how to undo at 3am. And {M['dba']} is the DBA on call for the cutover period; he reviews "
  f"anything that touches the target cluster.")
A("Noted, permanently: no step goes into the cutover runbook without its rollback written next to it, and ideally "
  "tested in a rehearsal. Where a step cannot be undone (dropping the old side's data, for instance) the rollback "
  "section should say so plainly and name what we would restore from. And anything touching the target cluster's "
  "settings, roles or pooling goes to Tobias for review before it merges.")

new_turn("planning")
U(f"The date we're working to: cutover is {M['date']}, with a change freeze from the Monday before. What would you "
  f"want in place by then, in order?")
A("Working back from the cutover weekend:\n\n1. Every workstream with a reviewed config and a passing dry run from "
  "the same snapshot rules, signed off by its owner.\n2. The target cluster's settings, pooling and backups agreed "
  "with the DBA and applied before the freeze, because restarts are cheap now and expensive later.\n3. A cutover "
  "runbook with an owner, a duration from rehearsal and a rollback for every step.\n4. At least two full rehearsals, "
  "the second one timed against the real window.\n5. Comms: partners, finance ops and the auditors told what changes "
  "and when.\n6. A go/no-go meeting with explicit criteria, a couple of days before.\n7. A hypercare plan for the "
  "first two weeks, including the monthly jobs that will run for the first time on the new side.")

regular("planning", "cluster")
U("Let's size the source first. How big is LEDGR on the Oracle side these days, segment by segment? And the row "
  "counts the optimizer thinks it has.")
sqlplus("select owner, segment_name, segment_type, count(*) partitions, round(sum(bytes)/power(1024,3), 2) gb "
        "from dba_segments where owner = 'LEDGR' group by owner, segment_name, segment_type order by gb desc "
        "fetch first 40 rows only;",
        fitP(lambda n: ora_segments(n, P["X2"]), 42, ["X2"]), expect=["X2"])
say("And the table statistics:")
sqlplus("select table_name, num_rows, to_char(last_analyzed, 'YYYY-MM-DD') last_analyzed, logging, degree "
        "from dba_tables where owner = 'LEDGR' order by num_rows desc;", fitN(lambda n: ora_counts(n), 20))
A("The schema is dominated by a handful of partitioned tables: postings, journal lines and payment events, with "
  "their primary-key indexes close behind. Everything else is small by comparison. The statistics are recent for "
  "most tables but a few have not been analyzed in a while, so their row counts are estimates at best; for sizing "
  "the copy I would trust the segment sizes more than the row counts. Two practical consequences: the copy time is "
  "driven by three tables, so their batch settings matter far more than anyone else's, and index builds on the "
  "target will be a large share of the cutover window unless we build them ahead of time on the partitions that no "
  "longer change.")

regular("planning", "status")
U("How should I run check-ins with ten workstream owners without it eating my whole week?")
A("One weekly meeting of thirty minutes for everyone, run from the tracker rather than from slides: each owner "
  "gets two minutes for what changed, what is blocked and what they need from someone else in the room; anything "
  "longer becomes a separate conversation with only the people it concerns. Between meetings, owners update the "
  "tracker themselves, and you read it the evening before, so the meeting is about the exceptions. Workstreams in "
  "trouble get a short daily check with you until they are not. And keep one slot a week free for the DBA, "
  "because almost every workstream's blockers end up on his desk.")

regular("planning", "dry")
U("How do the dry-run checksums actually work? The board says every run ends with one, but nobody could explain it "
  "to me properly.")
A("Each dry run copies from one Oracle SCN into an empty staging schema, so both sides are frozen at the same "
  "instant. While it copies, migkit reads every batch in key order on both sides and computes an MD5 over the rows "
  "as text; that is the per-batch checksum you see in the log. At the end it verifies every table (row counts and an "
  "ordered MD5 per table on each side) and then folds all the table digests, in a fixed order, into one short "
  "run checksum, printed near the end of the summary.\n\nSo the run checksum is a fingerprint of exactly what was "
  "copied from that snapshot. Two runs from different snapshots will differ even when both are perfect, which is "
  "why we compare source and target within a run rather than checksums across runs. For the sign-off sheet, the "
  "owner records the run number and its checksum, so anyone can later prove which run was signed off.")

# --- etl rewrite ----------------------------------------------------------------------

regular("etl rewrite", "config")
U("Start with the etl rewrite: Marek's team replaced the old PL/SQL nightly extract with migkit jobs. Show me its "
  "pipeline config.")
read("configs/etl_rewrite/pipeline.yaml", planted(lambda: config("yaml", P["E2"]), ["E2"]), expect=["E2"])
A("It is the standard migkit shape: read from the Oracle SCAN address at one SCN, write into the staging schema "
  "over TLS, a handful of tables each with its key, a short list of type mappings, and the job section with batch "
  "size, workers, commit interval, timeouts, retries and the reject guard. Things I would raise with Marek: the "
  "commit interval and the batch size are set independently, so it is worth checking they divide sensibly; the "
  "reject guard is the only thing between a bad extract and a half-loaded table, so it should be as tight as the "
  "data allows; and the observability block has the metrics port the alert rules expect. Nothing looks wrong, but "
  "the batch size is the setting with the most effect on runtime, so it deserves a sentence of justification in "
  "the PR.")

regular("etl rewrite", "dry")
U("And what did the dry run show for the etl rewrite? Last night's run, number 7.")
dry_log("etl rewrite", 7, day(4, 14) + datetime.timedelta(hours=1, seconds=2), "E1", E_ELAPSED, ["E1", "E3"])
say("And the per-partition counts for the same run:")
dry_tables("etl rewrite", 7)
A("A clean run. Preflight passed (empty target schema, grants, free space, restore point), every table copied with "
  "steady batch times, and the few rows that were quarantined are the known data-quality cases: bad numbers in free "
  "text and over-long references. The verification block shows matching counts and matching MD5s for every table, "
  "the run ended with PASSED and the staging schema was rolled back as designed. The partition table agrees: "
  "source and target counts line up partition by partition apart from the quarantined rows.\n\nFor the sign-off "
  "sheet Marek needs the run number and the checksum from the summary at the end, plus the quarantine list so the "
  "data owners can fix those rows at source.")

regular("etl rewrite")
U("Marek says the NUMBER to numeric mapping is fine but I've heard horror stories about rounding on these "
  "migrations. Anything we should worry about?")
A("The horror stories usually come from one of three places. First, unconstrained NUMBER columns mapped to float "
  "or double; here the mappings are to numeric with explicit precision, which is exact. Second, amounts held in "
  "major units with a fractional part longer than the target scale; the ledger stores minor units with four "
  "decimals, so the question is whether any source value has more than four, and a one-line query per table "
  "answers it. Third, arithmetic done in the extract itself (currency conversion, fee splits) where Oracle and "
  "PostgreSQL round halves differently; the new jobs copy values rather than compute them, so that risk moves to "
  "the FX and posting workstreams, which do compute. I would ask Marek for the precision query results and move on.")

regular("etl rewrite", "planning")
U("What should the sign-off sheet for a workstream look like? Marek wants a template before his leave.")
A("One page per workstream:\n\n- Workstream, owner, reviewer.\n- The config as merged: path and commit.\n- The dry "
  "run being signed off: run number, date, snapshot SCN, status and its closing checksum, copied from the log.\n- "
  "Quarantined rows: how many, why, and who owns fixing them at source.\n- Known differences accepted, each with a "
  "reason (for example, rounding decided at migration).\n- The runbook sections this workstream owns, with their "
  "rollbacks.\n- Signature and date, owner and reviewer.\n\nThe important property is that every value on it is "
  "copied from an output that the sheet links to, so an auditor can check it without asking anyone.")

# --- reconciliation jobs ------------------------------------------------------------

regular("reconciliation jobs", "config")
U("Next, the reconciliation jobs. Farah's team owns them: the nightly match of ledger postings against bank "
  "statements. Show me the jobs config, and what changed in the rules file since the last review.")
read("configs/recon/jobs.yaml", planted(lambda: config("yaml", schedule=P["R2"]), ["R2"]), expect=["R2"])
say("And the rules file's recent history:")


def rules_diff(n):
    a = "\n".join(f"rule {k}: {rng.choice(['exact', 'fuzzy', 'many_to_one'])} on "
                  f"{rng.choice(['ref', 'ref,amount', 'amount,date', 'batch_ref', 'iban,amount', 'end_to_end_id'])} "
                  f"tolerance {rng.choice(['0', '0.01', '1d', '2d'])} priority {k}" for k in range(1, n))
    b = "\n".join(l if rng.random() > 0.15 else l.replace("tolerance 0.01", "tolerance 0").replace("1d", "2d")
                  for l in a.split("\n"))
    return git_diff("configs/recon/rules.txt", a, b)


git("git diff HEAD~6 -- configs/recon/rules.txt", fitN(lambda n: rules_diff(n), 110, lo=2500))
A("The jobs config is the same migkit shape as the ETL one, with the schedule set to weekday mornings after the "
  "statement files land, which is what we want: matching on weekends would only find the gaps of bank holidays. "
  "The rules diff tightens a few amount tolerances to zero and widens a couple of date tolerances by a day. "
  "Tightening amounts is right for a ledger that stores exact minor units; widening dates will match more "
  "value-date shifts automatically, which is convenient but could hide a real timezone bug in the settlement "
  "batch. I would ask Farah to keep the date widening out until the settlement workstream has done its dry run.")

regular("reconciliation jobs", "dry")
U("What did the reconciliation jobs' dry run look like? It's run 4.")
dry_log("reconciliation jobs", 4, day(4, 16) + datetime.timedelta(hours=3, seconds=5), "R1", labels=["R1"])
A("Passed. The copy of the matching tables went through without lock waits worth mentioning, verification shows "
  "equal counts and equal MD5s everywhere, and the status is PASSED with the staging schema rolled back. The few "
  "quarantined rows are again free-text problems. This dry run only proves the data moves; the matching logic "
  "itself gets tested when the jobs run in parallel on both sides, which Farah plans for the week after next.")

regular("reconciliation jobs")
U("Farah wants to know whether the new-side matching should treat a one-cent difference as a break or auto-clear "
  "it like the old system did.")
A("As a break, at least at first. The old system auto-cleared small differences because its float arithmetic "
  "produced them; a new ledger that stores exact minor units should not produce any, so every one-cent difference "
  "after the move is information: either a real error, or a rounding difference between the two systems that we "
  "need to understand before we turn the old side off. Once the parallel run has shown where they come from, we "
  "can add a narrowly scoped auto-clear rule (for a specific product or counterparty) rather than a blanket "
  "tolerance.")

# --- the target cluster -------------------------------------------------------------------

regular("cluster", "config")
U("Tobias sent a PR for the prod cluster's postgresql.conf ahead of the freeze. Can you show me the diff?")
_pg_before = pg_conf({})
_pg_after = pg_conf({"max_wal_size": P["X4"].split(" = ")[1], "shared_buffers": "96GB", "work_mem": "48MB",
                     "effective_cache_size": "270GB", "mwp": 48, "mpw": 24, "lock_timeout": "'30s'"}) \
    .replace("autovacuum_vacuum_cost_limit = 2000", "autovacuum_vacuum_cost_limit = 4000") \
    .replace("log_min_duration_statement = 500ms", "log_min_duration_statement = 250ms") \
    .replace("checkpoint_timeout = 15min", "checkpoint_timeout = 30min")
git("cd infra/postgres/ledger-prod && git diff --relative origin/main...tw/prod-sizing -- postgresql.conf",
    planted(lambda: git_diff("postgresql.conf", _pg_before, _pg_after, context=6), ["X4"]), expect=["X4"])
A("It resizes memory for the production hardware (more shared buffers, a larger cache estimate, slightly less "
  "work memory per sort to protect against many parallel sorts), raises the WAL ceiling so checkpoints during the "
  "bulk load are driven by time rather than volume, raises the worker limits, and sets a server-wide lock timeout. "
  "Three comments for Tobias: shared_buffers and the worker limits need a restart, so this should go in well "
  "before the freeze; the bigger WAL ceiling means longer crash recovery, which is fine but belongs in the "
  "runbook's recovery estimate; and a server-wide lock timeout will also apply to the migkit jobs, whose own "
  "configs set lock timeouts per session, so it is worth checking none of them relies on waiting longer.")

regular("cluster")
U("Is the prod cluster big enough? Finance keep asking whether we over-bought.")
A("From what we have: the Oracle schema's segments are a few terabytes including indexes, PostgreSQL will be "
  "somewhat larger for the same data (wider tuples, separate TOAST, no table compression), and we need room for a "
  "second copy during any rebuild and for WAL during the bulk load. The memory sizing in Tobias's PR leaves the "
  "hot partitions (the current and previous month of postings and journal lines) comfortably in cache. So it is "
  "not oversized for the first year; it would be for a steady state of only current data, but the archive purge "
  "on the new side will not start until the retention rules are settled. I would tell finance it is sized for "
  "the migration peak plus a year of growth, and that the DR site is the lever if they want to save.")

# --- vendor contract feed -------------------------------------------------------------

regular("vendor contract feed", "config")
U("Vendor contract feed next. Declan's team: it loads the card-scheme and acquiring-bank contract files that set "
  "our fee schedules. Config please.")
read("configs/vendor_feed/feed.ini", planted(lambda: config("ini", P["V2"], P["V3"]), ["V2", "V3"]),
     expect=["V2", "V3"])
A("An INI-style migkit config with the same sections as the others. Two things stand out for an external feed. "
  "The reject guard matters more here than anywhere: vendor files change layout without notice, and the guard is "
  "what turns a silently half-loaded fee schedule into a failed run. And the whole-step timeout is generous, which "
  "makes sense because the job waits on the vendor's SFTP drop before it starts reading, but it also means a stuck "
  "run holds its slot in the batch window for a long time before anyone hears about it. I would ask Declan whether "
  "the wait for the file could be a separate step with its own alert.")

regular("vendor contract feed", "dry")
U("And the vendor contract feed's dry run? Run 5 finished this morning once the vendor's file finally arrived.")
dry_log("vendor contract feed", 5, day(4, 20) + datetime.timedelta(hours=5, seconds=11), "V1", labels=["V1"],
        guard=True)
A("It passed, and the reject ratio line confirms the guard was checked and not tripped. The copy itself is small "
  "next to the ledger tables, verification matched everywhere, and the staging schema was rolled back. The "
  "quarantined rows are worth a look with Declan, because in a contract feed a rejected row is a fee rule we would "
  "silently not apply.")

regular("vendor contract feed", "comms")
U("Declan asks whether we need to tell the vendors anything about the move. Do we?")
A("Only if something they can see changes. If the feed keeps pulling from the same SFTP drop, with the same file "
  "names and the same schedule, the vendors do not need to know. Two cases where they would: if the new job pulls "
  "from a different source address that their firewall allow-lists, or if the acknowledgement files we send back "
  "change format or timing. I would ask Declan to check both, and if either applies, send a short notice a month "
  "ahead with the date and a contact, rather than a long explanation of the programme.")

regular("vendor contract feed", "planning")
U("Declan agrees to split the wait for the vendor's file into its own step with an alert. Does that change the "
  "dry-run evidence we've got?")
A("No. The dry run copies data that already exists; the wait for the file happens before any of that, so the copy, "
  "its verification and its checksum are unaffected by where the wait lives. What changes is the runbook and the "
  "alerting: a separate step means a separate line in the cutover plan (with a rollback of its own, even if that "
  "is only to keep waiting), and the alert needs a threshold that the vendor's usual lateness does not trip every "
  "week.")

regular("status", "comms")
U("Steering committee wants a status paragraph by end of day. Draft one, plain English, no jargon.")
A("Ledger migration, status for the steering committee:\n\nWe have reviewed the configuration and the latest "
  "rehearsal copy (\"dry run\") of the first three of ten workstreams. All three copied the full data set from the "
  "old system into a test area of the new one and proved, row by row, that nothing was lost or changed. The "
  "production database has been sized and its final settings are in review. Remaining this month: the other seven "
  "workstreams, the connection set-up between the applications and the new database, and the first draft of the "
  "cutover plan. The cutover date is unchanged. Risks: two workstreams (the partner API and the vendor feed) "
  "depend on parties outside the team and are being watched.")

# --- fx rates service -----------------------------------------------------------------

regular("fx rates service", "config")
U("FX rates service. Ines's team: it serves daily and intraday rates to the posting and partner services, and its "
  "history tables move in the migration too. Show me its service config.")
read("configs/fx_rates/service.toml", planted(lambda: config("toml", P["F2"], P["F3"]), ["F2", "F3"]),
     expect=["F2", "F3"])
A("This one is TOML but the same keys. The interesting settings for a service rather than a batch job are the "
  "connection pool and the cache lifetime: the pool bounds how many queries it can run at once against the new "
  "cluster, and the cache decides how stale a rate can be when a posting asks for it. For intraday rates, a cache "
  "lifetime of minutes is a business decision as much as a technical one, so I would ask finance ops to confirm "
  "it in writing. The pool size should be added to the connection budget we need to agree with Tobias.")

regular("fx rates service", "dry")
U("What did the fx rates service dry run show? Run 3. And check the backfilled rate history while you're at it.")
dry_log("fx rates service", 3, day(4, 22) + datetime.timedelta(hours=2, seconds=40), "F1", labels=["F1"])
say("Now the rate history on staging: fixings per pair and day, with any gaps.")
psql("ledger", "select pair, rate_day, count(*) fixings, min(rate) min_rate, max(rate) max_rate, "
               "sum(case when gap then 1 else 0 end) gaps from ledger_stage.rate_fixings_check group by 1, 2 "
               "order by 1, 2;", fitN(lambda n: rates_check(n), 75), host=f"{PG_STG[1]}.{DOMAIN}")
A("The dry run passed cleanly. The history check looks plausible: every pair has fixings on every day sampled, "
  "intraday ranges are narrow, and the few days flagged with a gap are single missing fixings rather than missing "
  "days. I would ask Ines whether those gaps also exist on the Oracle side; if they do, they are historical and "
  "fine; if not, the backfill dropped them.")

regular("fx rates service")
U("Ines's open mapping question: Oracle stores rates as NUMBER with no scale, and she wants to use numeric(18,10) "
  "on the new side. OK?")
A("Probably, but check the data first. An unconstrained NUMBER can hold up to 38 significant digits; numeric(18,10) "
  "leaves eight digits before the decimal point and ten after. For rates between major currencies that is plenty, "
  "but inverted rates of weak currencies and cross rates computed by the old system can carry long tails. A query "
  "for the maximum scale and the maximum integer digits actually present answers it. If anything has more than ten "
  "decimals, the choice is between rounding at migration (and recording that as a known difference) or using an "
  "unconstrained numeric. For a ledger that has to reconcile against the old one, I lean to unconstrained numeric "
  "for history and a fixed scale for new rates.")

regular("fx rates service", "planning")
U("Ines asks whether the FX rates service could move a week early, on its own, to take it off the cutover weekend.")
A("Tempting, but it creates a week in which the posting job on the old side reads rates from the new side, or the "
  "FX service writes to both. Either is a cross-system dependency we have not rehearsed, and rates feed postings, "
  "so an error there spreads into the ledger itself. A smaller version is safe: move the rate history early (it "
  "does not change), keep the live rate tables on the cutover weekend. That saves most of the FX copy time in "
  "the window without any dual running.")

# --- connection pooling -------------------------------------------------------------------

regular("cluster", "config")
U("While we're on connections: what does the pooler config on the primary site look like? And who is connected to "
  "staging right now?")
read("infra/pgbouncer/ldn2/pgbouncer.ini", N(lambda: pgbouncer_ini(pick([20, 25, 30, 40]),
                                                                  [f"{h}.{DOMAIN}" for h in PG_PRD])))
say("And current sessions on staging:")
psql("postgres", "select pid, usename, application_name, client_addr, state, wait_event, "
                 "to_char(now() - query_start, 'MI:SS.MS') age, left(query, 72) query from pg_stat_activity "
                 "where datname = 'ledger' order by state, age desc;", fitN(lambda n: pg_activity(n), 42),
     host=f"{PG_STG[0]}.{DOMAIN}")
A("The pooler runs in transaction mode with a per-database default pool, a reserve pool for bursts, and session "
  "mode for the control database, which migkit needs because it holds advisory locks. The batch user gets session "
  "mode too, for the same reason. Staging right now has migkit sessions copying, a few application test sessions "
  "and some idle-in-transaction sessions that have been open far too long; those are the ones that make vacuum "
  "fall behind, and the server-side idle timeout in Tobias's config would end them.")

regular("cluster", "config")
U("And the DR site's pooler config? Tobias says it's meant to mirror the primary one.")
read("infra/pgbouncer/dr/pgbouncer.ini",
     planted(lambda: pgbouncer_ini(P["X3"].split(" = ")[1], [f"10.71.8.{rng.randint(11, 19)}" for _ in range(3)]),
             ["X3"]), expect=["X3"])
A("It mirrors it in structure but not in every value: the pool sizes and a few limits differ, and the DR file "
  "points at addresses rather than names. Some of that is deliberate (the DR cluster is smaller), but it should be "
  "written down as deliberate, because after a failover the DR pooler is what every application talks to. I would "
  "ask Tobias to either align the values or add a comment per difference.")

regular("cluster", "planning")
U("Can we do a connection budget? I want to know we won't run out on the new cluster on a busy evening.")
A("Yes. The budget is the sum, over every service, of its pool size times its replica count, plus the batch jobs "
  "that run at the same time, plus a reserve for administrators and monitoring; and it has to fit under the "
  "pooler's per-database limits, which in turn have to fit under the server's max_connections. The inputs are "
  "spread across the workstream configs (each has a pool size), the deployment replica counts, and the two pooler "
  "files. I would build it as a small table in the tracker: service, pool size, replicas, peak concurrent, and a "
  "total per pooler. The busy evening to plan for is month end, when the posting job, the settlement batch and "
  "the partner API peak together.")

regular("cluster", "planning")
U("Tobias asks whether we need the pooler at all, or whether the applications could connect straight to the "
  "cluster.")
A("We need it. The applications between them keep far more connections open than PostgreSQL handles well, and "
  "most of those connections are idle most of the time; each one is a server process with its own memory. The "
  "pooler multiplexes them onto a small number of server connections, absorbs reconnect storms after a failover, "
  "and gives us one place to drain traffic during the cutover. The cost is the transaction-mode restrictions "
  "(no session state across transactions), which is why migkit and the batch user get session mode.")

# --- settlement batch -------------------------------------------------------------------

regular("settlement batch", "config")
U("Settlement batch. Rupert's team: the nightly job that nets positions, accrues fees and writes the bank files. "
  "Show me its batch config.")
read("configs/settlement/batch.toml", planted(lambda: config("toml", P["S2"]), ["S2"]), expect=["S2"])
A("The TOML variant again. What matters for this job is contention: it updates balances that the partner API reads "
  "and the posting job writes, so its lock timeout decides whether it waits politely or fails fast when another "
  "job holds a row. A short lock timeout with several retries is usually better for a nightly batch than a long "
  "wait, because a failure gets noticed and retried while a long wait just eats the window. I would also check "
  "that its statement timeout is longer than its slowest batch in the last dry run.")

regular("settlement batch", "dry")
U("And the settlement batch's dry run? Run 6, from last night. Rupert said something went wrong. Pull the job log "
  "from the batch host too.")
dry_log("settlement batch", 6, day(4, 23) + datetime.timedelta(hours=1, seconds=3), fail=True)
say("And the batch job's own log from the run against staging:")
sh("tail -n 60 /var/log/ledger-batch/run-2026-04-23.log",
   fitN(lambda n: java_batch_log(n, day(4, 23) + datetime.timedelta(hours=3), N(lambda: f"wall time {rng.randint(1, 2)}h"
                                                                                    f"{rng.randint(10, 59):02d}m{rng.randint(10, 59):02d}s"),
                                 fail=True), 40), host=JOB_HOSTS[2])
A("Two separate failures. The copy itself failed verification: counts match everywhere but one table's MD5 differs "
  "between source and target, so the same rows arrived with different content. And the batch job, run against "
  "the copied data, halted because its net positions did not add up to the control total, then rolled back its "
  "open batches as designed. They are probably the same problem seen twice: if a date or an amount changed in "
  "flight, the batch would compute different positions. The next step is to find which column differs in that "
  "table.")

regular("settlement batch")
U("Rupert found it: value dates stored as DATE in Oracle got converted through the session timezone and some "
  "landed a day early. What's the fix and do we need to re-run everything?")
A("The fix is to map those columns to date rather than a timestamp type, and to set the migkit session timezone to "
  "UTC explicitly so no conversion happens anywhere else either. Oracle DATE has a time part, so the mapping needs "
  "a check that every value is at midnight; anything that is not is a separate data question. Re-running: only the "
  "workstreams that copy tables with DATE columns through a timestamp mapping. That is the settlement batch for "
  "certain, and worth a quick grep of the other configs' type sections. Workstreams whose last run passed with "
  "matching MD5s did not hit it, so their sign-off stands.")

regular("settlement batch", "planning")
U("How do we stop this class of bug across the other nine workstreams? I don't want to find the next one on "
  "cutover night.")
A("Three layers. First, one shared type-mapping file that every workstream's config includes, reviewed once by "
  "the DBA, instead of ten type sections that drift apart; a workstream that needs an exception states it in its "
  "own file with a comment. Second, a check in CI that fails any config mapping an Oracle DATE to a timestamp "
  "type, or leaving the session time zone unset. Third, in every dry run, a verification of column-level sums for "
  "date columns as well as amounts (the MD5 catches changes, but a per-column check says which column changed, "
  "which would have saved Rupert half a day).")

# --- audit export -----------------------------------------------------------------------

regular("audit export", "config")
U("Audit export next. Sunniva's team: the daily export of ledger movements for the external auditors and the "
  "regulator. Show me the export config.")
read("configs/audit_export/export.ini", planted(lambda: config("ini", P["A2"]), ["A2"]), expect=["A2"])
A("INI again. For this workstream the retention setting is the one that carries legal weight: it decides how long "
  "exported files stay in the object store before the lifecycle rule may remove them. It should match the "
  "regulator's record-keeping period with a margin, and the bucket's object lock should be at least as long, "
  "otherwise the lock and the lifecycle rule will argue. Everything else is the usual shape.")

regular("audit export", "dry")
U("What did the audit export dry run produce? Run 3, finished yesterday.")
dry_log("audit export", 3, day(4, 27) + datetime.timedelta(hours=4, seconds=20), "A1", labels=["A1"])
say("The per-partition counts as well:")
dry_tables("audit export", 3)
A("Passed: counts and MD5s match, nothing notable in quarantine, and the staging schema was rolled back. The "
  "partition counts match as well. For the auditors this is the piece of evidence they care about most, so I "
  "would put the run number, the checksum and the partition table into the evidence folder as they are, without "
  "retyping anything.")

regular("audit export", "comms")
U(f"The external auditors are {M['auditor']}. They want to see the evidence from the dry runs before cutover. What "
  f"do we give them?")
A("A short pack per workstream: the reviewed config (as merged), the dry-run log with its final checksum and "
  "PASSED status, the per-table verification lines, and the owner's sign-off with a date. Plus one page that "
  "explains how the checksums are computed and why a run's source and target match proves completeness. They will "
  "also ask how we know the dry runs resemble the real cutover, so the rehearsal logs belong in the pack once we "
  "have them. I would not give them access to migctl; exports of the relevant rows are enough and easier to keep "
  "as evidence.")

regular("audit export", "config")
U("Sunniva asks whether the export's retention setting and the bucket's object lock have to be the same number.")
A("Not the same, but ordered: the object lock period must be at least as long as the retention, otherwise there "
  "is a stretch where the lifecycle rule would try to delete an object that is still locked (the delete fails, "
  "which is noisy but harmless) or, worse, if the lock is shorter, a stretch where an object can be deleted by "
  "hand before the regulator's period is over. The cleanest arrangement is a lock equal to the regulatory period "
  "and a retention a little longer, so lifecycle deletions only ever hit unlocked objects.")

# --- archive purge ----------------------------------------------------------------------

regular("archive purge", "config")
U("Archive purge. Tom's team: the job that drops expired partitions after taking a cold copy. Config please.")
read("configs/archive_purge/purge.yaml", planted(lambda: config("yaml", schedule=P["P3"]), ["P3"]), expect=["P3"])
A("Same YAML shape. For a job that deletes, the schedule and the retention are the two lines that matter. It runs "
  "weekly at night, which keeps it away from the nightly batch window, and the retention decides which partitions "
  "qualify. Both the retention here and the audit export's retention need to agree with the legal hold register, "
  "which the board says is still pending. Until that list is final, I would keep this job in dry-run mode on both "
  "sides.")

regular("archive purge", "dry")
U("And the archive purge dry run? Run 2. Also list which partitions on the old side are due for dropping.")
dry_log("archive purge", 2, day(4, 29) + datetime.timedelta(hours=1, seconds=15), "P1", labels=["P1"])
say("And the partitions past retention on the Oracle side:")
sqlplus("select table_name, partition_name, num_rows, round(bytes/power(1024,3),1) gb, hold from "
        "ledgr_maint.partitions_due order by partition_position;", fitN(lambda n: partitions_due(n), 60))
A("The dry run passed: the copy of the tables it needs for its cold copy verified cleanly. The list of partitions "
  "past retention is long, mostly postings and journal lines from the early years, and several carry a legal hold "
  "flag, which the procedure skips. Nothing was dropped: this is a report, and the job is in dry-run mode.")

regular("archive purge")
U("Legal says the hold register will be final in two weeks. Does that block anything?")
A("It blocks turning the job on, not the migration. The migration copies everything, held or not, so cutover does "
  "not depend on the register. What waits is the first real run of the job on either side. I would put that "
  "explicitly into the hypercare plan as a post-cutover item, with the second-approver rule attached to it, so "
  "nobody is tempted to run it during the cutover weekend to save space.")

# --- partner api ------------------------------------------------------------------------

regular("partner api", "config")
U("Partner API. Kofi's team: the REST API our partners use for balances, postings and payment status. It's the one "
  "with the failed run on the board. Config first.")
read("configs/partner_api/app.yaml", planted(lambda: config("yaml", P["PA2"], P["PA3"]), ["PA2", "PA3"]),
     expect=["PA2", "PA3"])
A("For a request-serving API the job section matters less and the target section more: its pool size, its "
  "per-request timeout and its statement timeout decide how it behaves when the database is slow. The per-request "
  "timeout is short, which is right for partners who retry, but it has to be longer than the statement timeout "
  "plus the time spent waiting for a pooled connection, or requests will time out while their query is still "
  "running and leave work behind. That is worth checking against the failed run.")

regular("partner api", "dry")
U("Show me the partner api's failed dry run, run 4, and the API pods' logs from the load replay that ran against "
  "staging at the same time.")
dry_log("partner api", 4, day(4, 30) + datetime.timedelta(hours=2, seconds=9), fail=True)
say("And the API logs from the replay:")
sh("kubectl -n ledger-api logs deploy/ledger-api --since-time=2026-04-30T02:00:00Z --tail=60",
   fitN(lambda n: api_log(n, day(4, 30) + datetime.timedelta(hours=2, minutes=14)), 40))
A("The run failed verification on one table: its MD5 differs while the counts agree, which is what you get when "
  "rows change during the copy. The API logs explain why: the load replay was writing to staging while the copy "
  "ran, so the snapshot and the target drifted apart. The logs also show the real problem Kofi's note refers to: "
  "under replay load, requests wait for a pooled connection for seconds before they even start, and some end in "
  "gateway timeouts. So two fixes: run the replay after the copy rather than during it, and look at the pool "
  "waits.")

regular("partner api")
U("Kofi thinks the timeouts are just the staging cluster being small. Is he right?")
A("Partly. Staging is smaller, so absolute latencies are not comparable with production. But the log shows the "
  "time going into waiting for a pooled connection, not into query execution; that is a ratio problem (too many "
  "concurrent requests for the pool) rather than a capacity problem, and it will happen on production too if the "
  "replica count times the pool size is below peak concurrency. I would ask for the same replay with pool wait "
  "metrics against production-sized settings before anyone concludes it is only staging.")

regular("partner api", "planning")
U("What metrics should Kofi's team add before the next load replay, so we're not guessing again?")
A("Per pod: time waiting for a pooled connection, time in the query, and time in the rest of the request, as "
  "three histograms, so the next replay says where the seconds go. The pool's size, in-use and waiting counts as "
  "gauges. On the pooler side, clients waiting and the longest wait per pool, which it already reports. And "
  "requests rejected by the rate limiter, because a limiter that kicks in early will make the API look faster "
  "than it is. With those, the question of whether staging is just small answers itself.")

# --- chargeback ingest ------------------------------------------------------------------

regular("chargeback ingest", "config")
U("Chargeback ingest. Hanne's team: pulls chargeback cases from the card schemes and posts the reversals. Config?")
read("configs/chargebacks/ingest.toml", planted(lambda: config("toml", P["C2"], P["C3"]), ["C2", "C3"]),
     expect=["C2", "C3"])
A("TOML, same keys. Scheme files arrive several times a day, so this job runs often with small inputs. Its retry "
  "count is generous and its batch size is moderate, which is reasonable for an external source that fails "
  "transiently; the thing to confirm is that a retried batch cannot post the same reversal twice. The config says "
  "on_reject is quarantine, but idempotency lives in the code, so that is a question for Hanne rather than a "
  "setting.")

regular("chargeback ingest", "dry")
U("And the chargeback ingest dry run? Run 6.")
dry_log("chargeback ingest", 6, day(5, 4) + datetime.timedelta(hours=0, minutes=30, seconds=4), "C1", labels=["C1"])
A("Passed, with counts and MD5s matching and a small quarantine. Nothing held any locks for long. The only oddity is "
  "a retried batch after a lock wait, which rolled back its partial work and succeeded on the retry, which is the "
  "behaviour we want.")

regular("chargeback ingest")
U("Hanne asked: cases that are open at cutover, do they move, or do we finish them on the old side?")
A("Move them. A chargeback case can stay open for months, so finishing them on the old side means running the old "
  "system in parallel for that long, which nobody wants. They move as data like everything else; what needs care is "
  "the case that changes state during the cutover window. The freeze covers that: the ingest is paused at the "
  "start, the scheme files queue up, and the first run on the new side picks them up in order. The runbook needs "
  "that pause and its rollback as a step of their own.")

regular("chargeback ingest")
U("Hanne confirmed the ingest is idempotent on the scheme's case reference. Is that enough?")
A("Nearly. Idempotent on the case reference protects against the same case arriving twice, but chargebacks have "
  "a life cycle: the same case comes back as a representment, a pre-arbitration, an arbitration. If each stage "
  "posts a reversal or a re-credit, the key has to be the case reference plus the stage, or a legitimate second "
  "stage will be dropped as a duplicate. It is worth asking Hanne for a test with a case that goes through two "
  "stages during a dry run.")

# --- gl posting -------------------------------------------------------------------------

regular("gl posting", "config")
U("Last workstream for the first pass: gl posting. Bartek's team: turns journal entries into general ledger "
  "postings and closes periods. Config please.")
read("configs/gl_posting/poster.ini", planted(lambda: config("ini", P["G2"]), ["G2"]), expect=["G2"])
A("INI, same keys. The commit interval is the one that matters most here, because a posting job that commits in "
  "the middle of a balanced journal can leave the ledger out of balance if it dies. Bartek's team should confirm "
  "that the interval is counted in whole journals rather than lines. Otherwise nothing unusual.")

regular("gl posting", "dry")
U("What did the gl posting dry run show? Run 5.")
dry_log("gl posting", 5, day(5, 6) + datetime.timedelta(hours=1, seconds=44), "G1", labels=["G1"])
say("And its per-partition counts:")
dry_tables("gl posting", 5)
A("Clean: every table verified, status PASSED, staging rolled back. The partition counts match. That finishes the "
  "first pass: nine of ten workstreams have a passing dry run, and the settlement batch has a known cause and a fix "
  "in progress. The partner API's failure was an artefact of the replay running during the copy, but it needs a "
  "passing run before sign-off.")

regular("gl posting")
U("Bartek wants to run the first period close on the new side rather than the old one. Sensible?")
A("Only if the period that closes after cutover is entirely on the new side. If cutover is mid-month, the period "
  "contains postings made on both systems, and closing it on the new side means trusting that the migrated half "
  "is identical, which the dry runs suggest but a close makes permanent. The safer sequence is to close the last "
  "pre-cutover period on the old side, migrate the closed state, and run the first close on the new side for the "
  "first full period after cutover. If the calendar makes that awkward, a parallel close on both sides for one "
  "period is the fallback.")

regular("status", "comms")
U(f"Weekly status time. One more thing for it: {M['oracle']}, so slipping past the summer is not an option "
  f"financially.")
A("Weekly status, ledger migration:\n\n- All ten workstreams have had a config review and at least one dry run "
  "this cycle; nine passed.\n- Settlement batch: a date conversion issue found and understood; fix under review, "
  "re-run this week.\n- Partner API: the failed run was caused by the test set-up; re-run pending, plus a "
  "connection pool investigation.\n- Target cluster: production settings in review with the DBA.\n- Next: "
  "runbooks, rehearsal 1, connection budget.\n- Constraint: the old system's support ends in the autumn, so the "
  "cutover date has no slack beyond the summer.")

# --- follow-ups ---------------------------------------------------------------------------

regular("reconciliation jobs")
U("Farah says the reconciliation jobs' parallel run on the new side left a pile of breaks last night. Can you pull "
  "the matcher log from the job host?")
sh("tail -n 80 /var/log/migkit/recon/match-2026-05-05.log",
   fitP(lambda n: matcher_log(n, day(5, 5) + datetime.timedelta(hours=4, minutes=10), P["R3"]), 55, ["R3"]),
   expect=["R3"], host=JOB_HOSTS[4])
A("The run completed normally. The exact pass matched most statement lines batch by batch, the fuzzy and "
  "many-to-one passes picked up more, and what was left went to the review queue. A handful of ambiguous "
  "references were left open rather than guessed, which is right. The carried-over count is high for one night, "
  "but the parallel run is new, and the first night usually carries everything the old system had auto-cleared.")

regular("reconciliation jobs")
U("Show me a sample of those breaks so I can see what kind they are.")
psql("ledger", "select break_id, account_id, booking_date, amount_ora, amount_pg, ccy, reason from "
               "recon.breaks where run_date = '2026-05-05' order by random() limit 60;",
     fitN(lambda n: break_sample(n), 60), host=f"{PG_STG[2]}.{DOMAIN}")
A("A mix, and mostly the expected kinds. Amounts that differ in the fourth decimal are the old system's rounding, "
  "now visible because we no longer auto-clear them. Value dates shifted by a day are the settlement date issue, "
  "still present in this copy. Rows missing on one side come from the timing of the copy versus the statement "
  "files. A few are genuine data problems (duplicate references, unlinked reversals) that exist in the old ledger "
  "too. I would ask Farah to classify a day's worth and see how many remain once the date fix is in.")

regular("settlement batch", "dry")
U("Rupert merged the date fix. Show me what changed, and the settlement batch re-run from last night, run 7.")
_map_a = "\n".join(f"{t.lower()}:\n" + "\n".join(
    f"  {c.lower()}: {'timestamptz' if c in ('VALUE_DATE', 'BOOKING_DATE') else rng.choice(['timestamp(0)', 'numeric(19,4)', 'varchar(35)', 'bigint', 'char(3)'])}"
    for c in COLUMNS) for t in rng.sample(TABLES, 5))
_map_b = _map_a.replace("value_date: timestamptz", "value_date: date") + "\nsession_time_zone: UTC"
git("git show --stat --patch HEAD -- configs/settlement/",
    N(lambda: f"commit {hexs(40)}\nAuthor: Rupert Catterall <rcatterall@hpay.example>\nDate:   Mon May 4 16:12:09 "
              f"2026 +0100\n\n    Map DATE value dates to date, pin session time zone to UTC\n\n    Refs "
              f"{rng.choice(TICKETS)}\n---\n configs/settlement/mapping.yaml | 11 ++++++-----\n 1 file changed, 6 "
              f"insertions(+), 5 deletions(-)\n\n" + git_diff("configs/settlement/mapping.yaml", _map_a, _map_b)))
say("And the re-run:")
dry_log("settlement batch", 7, day(5, 5) + datetime.timedelta(hours=1, seconds=2), "S1", labels=["S1"])
A("The change maps the value date columns to date and pins the session time zone, as discussed. The re-run passed: "
  "every table verified with matching MD5s this time, including the one that failed before, and the run ended "
  "PASSED with the staging schema rolled back. This is the run Rupert should sign off, not run 6.")

regular("settlement batch")
U("How long did the settlement batch itself take on the new side after the re-run? Show me the job log from the "
  "batch host.")
sh("tail -n 60 /var/log/ledger-batch/run-2026-05-05.log",
   fitP(lambda n: java_batch_log(n, day(5, 5) + datetime.timedelta(hours=3, minutes=5), P["S4"]), 55, ["S4"]),
   expect=["S4"], host=JOB_HOSTS[2])
A("It completed this time: every chunk written, a couple of lock waits on the balances table that retried and "
  "went through, no deadlock rollbacks worth mentioning, and no control total error. The wall time is in the last "
  "line. It fits in the nightly window on staging hardware, so on production it should have room to spare.")

regular("settlement batch", "cutover")
U("Rupert's written the settlement batch runbook section for bringing the job up on the new side. Can you read it "
  "and tell me if it's fit for purpose?")
sh("sed -n '88,150p' docs/runbooks/settlement-batch.md", planted(lambda: batch_runbook(P["S3"]), ["S3"]),
   expect=["S3"])
A("It is good: preconditions stated, a check for a stale lock, the host and user to work as, a version check "
  "against the ticket, the unit to enable, the catch-up runs one value date at a time in order, and a control "
  "total check. It also satisfies the rule: the rollback is written out, says what happens to postings from voided "
  "runs, and says it was tested in a rehearsal. Two suggestions: say who decides when a catch-up run fails (it says "
  "the batch owner, but not how to reach them at night), and put an expected duration on 5.4 from the rehearsal so "
  "the cutover lead knows when to worry.")

regular("cutover", "planning")
U("More generally, what makes a rollback section good enough for the runbook? I want to give the owners a checklist.")
A("A checklist for every step's rollback:\n\n1. The trigger: what observation means we roll this step back, and "
  "who decides.\n2. The commands, as runnable as the forward step's, not prose.\n3. The state it restores, and what "
  "is lost (for example, writes taken on the new side in the meantime) and how that is handled.\n4. How long it "
  "takes, measured in a rehearsal.\n5. Whether it was actually run in a rehearsal, and when.\n6. Dependencies: "
  "which later steps must be rolled back first.\n7. For steps that cannot be undone, a plain statement that they "
  "cannot, and what we would restore from instead.\n\nA step missing any of these does not go into the runbook.")

regular("audit export")
U("Sunniva says the audit export's first full export on the new side finished. Can you check its log?")
sh("tail -n 70 /var/log/migkit/export/export-2026-05-07.log",
   fitP(lambda n: export_log(n, day(5, 7) + datetime.timedelta(hours=2), P["A3"]), 55, ["A3"]),
   expect=["A3"], host=JOB_HOSTS[5])
A("A complete run: the parts were planned and written with checksums, a few uploads retried after the object "
  "store asked it to slow down, the row count check against the read replica matched, the manifest was written "
  "and the objects are under compliance-mode lock. That is what the auditors need to see.")

regular("audit export", "comms")
U("Will the auditors accept files written by the new system if the format is identical? Or do they need a "
  "parallel period?")
A("They usually accept it if we can show equivalence, and a parallel period is the cheapest way to show it: run "
  "both exports for the same days for a week or two and compare the files' contents (not their bytes, since "
  "parquet metadata differs). If every day's contents match, the auditors get one page saying so, with the "
  "comparison output attached. I would ask Sunniva to start that parallel week now, so it is finished before the "
  "go/no-go.")

regular("partner api", "dry")
U("Kofi moved the load replay after the copy and bumped the API's replica count. Show me the helm values change, "
  "and the partner api's second dry run, run 5.")
_env = [f"  {k}: \"{v}\"" for k, v in [("DB_POOL_MAX", 40), ("DB_POOL_MIN", 4), ("DB_ACQUIRE_TIMEOUT_MS", 1500),
                                          ("HTTP_READ_TIMEOUT_MS", 5000), ("RATE_LIMIT_RPS", 200),
                                          ("RATE_LIMIT_BURST", 400), ("CACHE_BALANCES_S", 2), ("TRACE_SAMPLE", "0.05"),
                                          ("READ_ONLY", "false"), ("FEATURE_STATEMENTS_V3", "true"),
                                          ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://otel-collector.observability:4317"),
                                          ("JAVA_OPTS", "-XX:MaxRAMPercentage=75 -XX:+UseG1GC")]]
_vals_a = "\n".join(["replicaCount: 4", "image:", "  repository: registry.hpay.internal/ledger/ledger-api",
                     f"  tag: 2026.04.{rng.randint(10, 28)}", "resources:", "  requests:", "    cpu: 500m",
                     "    memory: 768Mi", "  limits:", "    memory: 1536Mi", "env:", "  DB_HOST: ldn2-pgb-01",
                     "  DB_PORT: \"6432\"", "  DB_NAME: ledger", "  LOG_LEVEL: info"] + _env + ["autoscaling:", "  enabled: true",
                     "  minReplicas: 4", "  maxReplicas: 10", "  targetCPUUtilizationPercentage: 70",
                     "podDisruptionBudget:", "  minAvailable: 2", "service:", "  port: 8080", "ingress:",
                     "  host: partners.hpay.example", "  tls: true", "livenessProbe:", "  httpGet:", "    path: /healthz",
                     "    port: 8080", "  periodSeconds: 10", "readinessProbe:", "  httpGet:", "    path: /readyz",
                     "    port: 8080", "  periodSeconds: 5", "  failureThreshold: 3", "topologySpreadConstraints:",
                     "  - maxSkew: 1", "    topologyKey: topology.kubernetes.io/zone",
                     "    whenUnsatisfiable: ScheduleAnyway", "podAnnotations:",
                     "  prometheus.io/scrape: \"true\"", "  prometheus.io/port: \"9187\""])
_vals_b = _vals_a.replace("replicaCount: 4", "replicaCount: 6").replace("minReplicas: 4", "minReplicas: 6") \
    .replace("tag: 2026.04", "tag: 2026.05").replace("DB_ACQUIRE_TIMEOUT_MS: \"1500\"", "DB_ACQUIRE_TIMEOUT_MS: \"2500\"") \
    .replace("READ_ONLY: \"false\"", "READ_ONLY: \"false\"  # flipped by the runbook during the freeze") \
    .replace("failureThreshold: 3", "failureThreshold: 6").replace("maxReplicas: 10", "maxReplicas: 14")
git("git diff origin/main -- deploy/ledger-api/values-prod.yaml",
    N(lambda: git_diff("deploy/ledger-api/values-prod.yaml", _vals_a, _vals_b)))
say("Now run 5:")
dry_log("partner api", 5, day(5, 8) + datetime.timedelta(hours=1, seconds=30), "PA1", labels=["PA1"])
A("The values change raises the replica count and the autoscaler's floor together and moves to the new image. The "
  "re-run passed: all tables verified, nothing drifted, PASSED and rolled back. Kofi can sign off run 5. The pool "
  "wait question is still open, though: more replicas with the same pool size each means more connections in "
  "total, which goes into the connection budget.")

regular("partner api", "cluster")
U("Where are we on the connection budget then? Rough answer is fine.")
A("Roughly: we have the pool sizes of every workstream from the configs and the two pooler files, and the replica "
  "counts from the deployments. The partner API is now the largest consumer after its replica increase, followed "
  "by the FX service and the batch jobs that overlap at month end. Against the pooler's per-database limit there "
  "is headroom on the primary site; on the DR site the limits are smaller, so a failover at month end would queue "
  "requests. That is acceptable if we write it down, or Tobias can raise the DR limits. I would put the table in "
  "the tracker and let him choose.")

regular("gl posting")
U("Bartek ran the gl posting job end to end on staging after the dry run. Pull its log; I want to see it balanced.")
sh("tail -n 80 /var/log/migkit/poster/poster-2026-05-07.log",
   fitP(lambda n: poster_log(n, day(5, 7) + datetime.timedelta(hours=0, minutes=40), P["G3"]), 55, ["G3"]),
   expect=["G3"], host=JOB_HOSTS[6])
A("It balanced: every batch reports balanced journals, the trial balance per period is zero, and it exited "
  "cleanly. A few lines went to suspense for products without a posting rule; those are products the old system "
  "also routes to suspense, so Bartek should confirm the list matches rather than treat them as new failures.")

regular("gl posting")
U("Bartek asks whether the suspense lines should block sign-off.")
A("Not if they match the old system's suspense for the same period. Suspense is a designed outcome for products "
  "with no rule; what would block is a product that posts normally on the old side and lands in suspense on the "
  "new side, because that means a posting rule did not migrate. A comparison by product and period answers it in "
  "one query. If the lists match, the sign-off stands with a note.")

regular("archive purge", "cutover")
U("Tom sent the archive purge runbook section for dropping expired partitions. Read it, especially who runs it "
  "and from where.")
sh("sed -n '40,96p' docs/runbooks/archive-purge.md", planted(lambda: partitions_runbook(P["P4"]), ["P4"]),
   expect=["P4"])
A("It is solid. It names who runs it, requires the second approver in the change ticket before the drop step, "
  "fixes the host the work is done from and why, takes a verified cold copy before anything is dropped, drops one "
  "table at a time with the approver present, logs every dropped partition, and gathers statistics afterwards. The "
  "rollback is honest: it says dropped partitions only come back from the cold copy and estimates how long that "
  "takes. That meets both of our standing rules.")

regular("archive purge")
U(f"For the approver rule: {M['approver']} from risk has agreed to be the standing second approver for anything "
  f"destructive. Anything else to set up?")
A("Three small things. Put her name into the change ticket template for the purge job, so a ticket cannot be "
  "raised without it. Ask for a deputy, because a rule that depends on one person's holiday calendar gets bent. "
  "And agree how she approves: a comment in the ticket with the exact partition list she is approving, not a "
  "thumbs-up in chat, so the evidence survives.")

regular("archive purge", "planning")
U("Tom asks: why migrate partitions that are already past retention at all? Couldn't we drop them on the old side "
  "first and move less?")
A("We could, but not as part of the migration, and not quickly. Dropping them first is a purge against the "
  "production ledger, so it needs the second approver in the ticket, the legal hold register (still not final) "
  "and a verified cold copy; doing all of that before the freeze puts a destructive change on the critical path "
  "of the cutover. Moving them costs some copy time, most of which we can take out of the window by copying "
  "closed partitions early. I would migrate everything and run the first real purge on the new side in hypercare.")

regular("cluster")
U("Tobias set up logical replication from staging to the DR cluster as a test. Can you check the lag?")
psql("postgres", "select application_name, client_addr, state, sync_state, write_lag, flush_lag, replay_lag from "
                 "pg_stat_replication; select minute, slot_lag_bytes, apply_lag_s, changes_applied, apply_errors "
                 "from dba.apply_lag_history where minute > now() - interval '1 hour' order by minute;",
     fitN(lambda n: replication_lag(n, day(5, 11) + datetime.timedelta(hours=14)), 50), host=f"{PG_STG[0]}.{DOMAIN}")
say("And what the DR side logged about the apply worker over the same hour:")
sh("grep -h 'logical replication\\|ERROR\\|DETAIL\\|CONTEXT\\|checkpoint complete' "
   "/var/log/postgresql/postgresql-2026-05-11.log | tail -n 40",
   fitN(lambda n: apply_log(n, day(5, 11) + datetime.timedelta(hours=14)), 30), host="10.71.8.14")
A("Streaming replication to the local standbys is healthy, with lags in milliseconds. The logical apply to DR is "
  "fine most of the time but has minutes with lag of several seconds, which coincide with large changes applied; "
  "there were a few apply errors in the hour as well, and the DR log shows what they are: duplicate keys on insert, "
  "after which the apply worker exits and restarts. That usually means rows were written on the DR side directly, "
  "or the initial copy overlapped with the subscription's start. Logical replication stops at the first error it "
  "cannot apply, so this needs fixing before we rely on it.")

regular("partner api", "cluster")
U("Kofi's slowest partner endpoint is the balance history one. Run the explain for its query on staging.")
psql("ledger", "explain (analyze, buffers) select p.account_id, sum(p.amount_minor) from ledger.postings p join "
               "ledger.journal_lines jl on jl.posting_id = p.id where p.account_id = any($1) and p.booking_date >= "
               "'2025-01-01' group by p.account_id;", fitN(lambda n: explain_plan(n), 30), host=f"{PG_STG[1]}.{DOMAIN}")
say("And where the API's database time goes overall, from pg_stat_statements:")
psql("ledger", "select calls, round(total_exec_time::numeric, 1) total_ms, round(mean_exec_time::numeric, 2) mean_ms, "
               "round(stddev_exec_time::numeric, 2) stddev_ms, rows, round(100.0 * shared_blks_hit / "
               "nullif(shared_blks_hit + shared_blks_read, 0), 1) hit_pct, left(query, 80) query from "
               "pg_stat_statements where userid = 'app_partner'::regrole order by total_exec_time desc limit 30;",
     fitN(lambda n: stat_statements(n), 30), host=f"{PG_STG[1]}.{DOMAIN}")
A("The plan scans far more partitions than it needs: some are read with the account and date index, but older "
  "ones fall back to parallel sequential scans, and the join to journal lines uses a bitmap scan with a lot of "
  "rechecks. Two fixes: make sure every partition has the composite index (the index build step will handle it "
  "for new partitions, but the older ones were created before it existed) and have the endpoint pass a date range "
  "that lets the planner prune partitions. The execution time should drop by an order of magnitude. The statement "
  "statistics agree that this query dominates the API's database time, well ahead of the balance and status "
  "lookups, which are fast and cached.")

regular("cluster")
U("Do we build all those indexes before cutover or after?")
A("Before, for every partition that is closed (anything older than the current month); after, only for the "
  "current partition, which keeps receiving rows until the freeze. Building concurrently on closed partitions "
  "costs nothing in the window, whereas building them during the window would take hours. The runbook step is "
  "then just the current partition, with its duration from rehearsal.")

regular("status", "dry")
U("Give me the full dry-run history across every workstream, so I can see the trend for the steering pack.")
psql("migctl", "select area, run_no, to_char(started_at, 'YYYY-MM-DD HH24:MI') started_at, status, rows_written, "
               "elapsed, checksum from dry_run_summary where started_at > '2026-03-01' order by area, run_no;",
     N(lambda: board_with_history(rng.randint(3, 4))))
A("The trend is good: early runs failed more often, and the most recent run of every workstream has passed, apart "
  "from the ones we already know about and re-ran. Rows written per workstream are stable across its runs, which "
  "says the scope is not drifting. Elapsed times came down for the big workstreams as batch settings were tuned. "
  "For the steering pack I would show one line per workstream: first run, latest run, and the status of each.")

regular("status", "comms")
U("Steering asked whether we're confident enough to start rehearsals. What do I tell them?")
A("Yes, with two conditions. Every workstream now has a passing dry run, and the two that failed earlier failed for "
  "understood reasons that have been fixed and re-tested. What a dry run does not test is the sequence: ten "
  "workstreams moving in one window, with the freeze, the switch of connection strings and the first batch window "
  "on the new side. That is what rehearsals are for. The conditions: the runbook must have a rollback for every "
  "step before rehearsal 1, and the DBA signs off the production settings before rehearsal 2, so the second "
  "rehearsal runs on the real configuration.")

# --- cutover planning -------------------------------------------------------------------

regular("cutover", "planning")
U("Tobias wrote the cutover runbook's section on switching the connection endpoints. Read it for me.")
sh("sed -n '212,262p' docs/runbooks/cutover.md", planted(lambda: endpoints_runbook(P["X1"]), ["X1"]),
   expect=["X1"])
A("Clear and runnable: preconditions, the TTL check, the record change with the exact command, reloading the "
  "poolers so new server connections resolve the new name, and how to watch sessions move. The rollback is "
  "written out and addresses the hard part, writes taken on the new side before a rollback, by pointing at the "
  "reverse apply job. One gap: it assumes the TTL was lowered a day earlier, which is a step in its own right and "
  "should appear in the T-24h section with its own rollback (raising it again).")

regular("cutover", "planning")
U("What if the DNS change doesn't reach some clients, say a partner or an internal job that pins IP addresses?")
A("Then they keep talking to the old side, which is the dangerous case, because during the freeze the old side is "
  "still up. Two protections: make the old side refuse writes at the database level once the switch is done (read "
  "only, plus revoking the application roles' write grants), so a pinned client fails loudly instead of writing "
  "to the wrong ledger; and watch the old listener's session list after the switch, where any application user "
  "still connecting is a client to chase. For partners, we do not expose the database at all, so only our own "
  "gateway matters, and it resolves through the poolers we reload.")

regular("cutover", "planning")
U("Where are the points of no return in the cutover? I want them on one slide.")
A("Three, in order:\n\n1. Opening partner traffic on the new side. Before that, rolling back is a DNS change and a "
  "restart of the old schedulers; after it, partners have seen responses from the new system, and a rollback "
  "needs the reverse apply job to carry their writes back.\n2. The first batch window on the new side. Once bank "
  "files generated by the new system have gone out, a rollback means reconciling those files on the old side by "
  "hand.\n3. Dropping the old side's data, which is not part of the cutover at all and should not be for months. "
  "Until then a full rollback is possible, just more expensive the later it happens.")

regular("cutover", "planning")
U("Read me the freeze section of the cutover runbook too.")
sh("sed -n '20,88p' docs/runbooks/cutover.md", N(lambda: runbook_noise("T-00:30 to T+00:45  Freeze and drain", 22)))
A("The freeze section has the right steps in a sensible order: announce, stop the old schedulers, drain partner "
  "traffic at the gateway, confirm replication has caught up, and record the counts and checksums to compare "
  "after the copy. But not every step has its rollback next to it yet, and a few only say what to check without "
  "saying what to do when the check fails. Under our rule those steps are not ready; I would send the owner the "
  "checklist and mark them as drafts until they are filled in.")

regular("comms", "planning")
U(f"Comms plan: the go/no-go is at {M['gonogo']}, then partners get a notice if it's a go. Who needs to hear what "
  f"and when?")
A("In order:\n\n- Four weeks before: partners get a heads-up of the planned weekend and the expected API "
  "unavailability, with a contact.\n- Two weeks before: internal teams (finance ops, treasury, support) get the "
  "freeze dates and what they cannot do during them.\n- After the go/no-go: partners get a confirmation or a "
  "postponement within the hour, internal teams the same.\n- During the weekend: status updates in the cutover "
  "channel at each milestone, and a single message to partners when traffic reopens.\n- Monday: a short note to "
  "everyone saying it is done and where to report problems.")

regular("cutover", "planning")
U("Who needs to be on the call rota for the cutover weekend, and in what shifts?")
A("Core for the whole window: the cutover lead, the DBA on call, and one person who can run the orchestrator. On "
  "call for their steps, reachable within ten minutes: every workstream owner, plus the network person for the "
  "DNS and pooler steps. Standing by from the first batch window on: the settlement and posting owners and someone "
  "from finance ops to read the control totals. For a window that runs through the night, two shifts with an hour "
  "of overlap, so nobody makes a go/no-go decision at the end of a twelve-hour stretch. The approver does not need "
  "to be on the rota, because nothing destructive happens that weekend.")

regular("cutover", "cluster")
U("Sequences. Tobias wants proof the sequence sync step works. Check what last night's test of it left on staging.")
psql("migctl", "select sequence, ora_last, pg_last, pg_last - ora_last gap, verdict from seq_sync_check where "
               "run_at = (select max(run_at) from seq_sync_check) order by sequence;",
     fitN(lambda n: seq_sync(n), 20))
A("Most sequences are ahead of their Oracle counterparts by a safety gap, which is what the step intends: the new "
  "side must never hand out an id the old side has used. But some are behind, and any sequence behind the old "
  "side will produce duplicate keys as soon as writes start. The step needs to set every sequence to the Oracle "
  "value plus the gap, not only the ones that were found behind at some earlier point.")

regular("cutover")
U("And are the grants right on the new side? Show me the diff between what we planned and what's applied.")
git("git diff origin/main -- db/grants/ledger.sql", N(lambda: grants_diff(rng.randint(40, 70))))
A("The planned grants remove some write privileges from service roles that only need to read or insert, and add "
  "a few read grants. That is a tightening, which is good, but each removal has to be checked against what the "
  "service actually does: a role that loses UPDATE on a table it updates will fail on the first night, not in "
  "testing, if the test data never exercises that path. I would ask each owner to confirm their role's lines.")

# --- rehearsals ---------------------------------------------------------------------------

regular("cutover", "planning")
U("Rehearsal 1 ran overnight against a copy of prod. Pull the orchestrator log from the job host and the step "
  "timings from migctl.")
sh("tail -n 90 /var/log/migkit/orchestrator/rehearsal-1.log",
   fitP(lambda n: steps_log(n, day(5, 16) + datetime.timedelta(hours=22), P["X5"]), 8, ["X5"]),
   expect=["X5"], host=JOB_HOSTS[0])
say("And the step table:")
psql("migctl", "select step, name, area, to_char(started, 'HH24:MI:SS') started, to_char(finished, 'HH24:MI:SS') "
               "finished, took, status from rehearsal_steps where rehearsal = 1 order by step;",
     fitN(lambda n: step_table(n, day(5, 16) + datetime.timedelta(hours=22)), 40))
A("It ran to the end. Every step finished, a couple were redone after a check failed the first time, and one was "
  "skipped by hand. The long poles are the final incremental copy and the checks after it; the switch of "
  "connection strings and the smoke tests are quick. The total fits the window, but not with the margin I would "
  "want once the rollback budget is taken out, so rehearsal 2 should focus on the copy and the checks.")

regular("cutover", "planning")
U("Which steps would you cut or move out of the window?")
A("Out of the window entirely: index builds on closed partitions (before), statistics on closed partitions "
  "(before), and the full md5 check of history that cannot change during the freeze (do it the day before and "
  "only check the current partitions in the window). Shortened: the final incremental copy, by running an "
  "incremental pass the evening before so the one in the window only covers the last hours. Kept as they are: "
  "sequence sync, grants, the connection switch and the smoke tests, because they are short and because they are "
  "where mistakes show.")

regular("cutover", "planning")
U("Do we need a separate rollback rehearsal, or is it enough that each rollback is written down?")
A("Written down is the minimum our rule asks for; rehearsed is what makes it usable at night. Not every rollback "
  "needs its own rehearsal, but the ones after the points of no return do: the connection switch back to Oracle "
  "with the reverse apply job, and voiding a batch run on the new side. I would fold them into rehearsal 2: run "
  "forward to just after the first batch window, roll back to Oracle, time it, then run forward again. That "
  "tells us the real cost of the rollback budget instead of an estimate.")

regular("cutover", "cluster")
U("Tobias ran the index builds for closed partitions last night. Show me the tail of the server log for them.")
sh("grep -h 'CREATE INDEX CONCURRENTLY\\|checkpoint starting\\|temporary file' /var/log/postgresql/postgresql-2026-05-19.log "
   "| tail -n 50", fitN(lambda n: index_build_log(n, day(5, 19) + datetime.timedelta(hours=20)), 40),
   host=f"{PG_PRD[0]}.{DOMAIN}")
A("The builds ran one partition at a time, concurrently, with durations from seconds for small partitions to many "
  "minutes for the big months; a few spilled to temporary files, which is expected with the reduced work memory. "
  "Checkpoints were triggered by WAL during the builds, which is the bigger WAL ceiling doing its job. Nothing "
  "failed; an invalid index would show up in the catalogue, and that check belongs in the runbook step.")

regular("cutover", "cluster")
U("Show me how the postings table looks on prod now, so I can check the partitions and indexes are all there.")
psql("ledger", "\\d+ ledger.postings", fitN(lambda n: describe_table("postings", n), 88), host=f"{PG_PRD[0]}.{DOMAIN}")
A("The table is range-partitioned by booking date, with the primary key on id and booking date, the composite "
  "account and date index, and a partial index on external references. The partitions run monthly from the "
  "start of the history to the current month. The foreign key to accounts is there, which matters for load "
  "order: accounts must be loaded before postings in the cutover copy.")

regular("cutover", "comms")
U(f"The CAB approved the change as {M['cab']}. What goes into the change record beyond the runbook link?")
A("The change record should stand on its own for someone who never saw the programme: the scope (which systems "
  "and data move), the window, the go/no-go criteria and who decides, the points of no return, the rollback plan "
  "and its budget, the contacts for each workstream during the weekend, the evidence from rehearsals, and the "
  "post-change verification. Link the runbook, but copy the rollback summary into the record itself, since that "
  "is what people look for under stress.")

regular("cutover", "planning")
U("What does the old scheduler host run? I want to make sure we stop everything during the freeze, not just our "
  "jobs.")
sh("crontab -l -u oracle", fitN(lambda n: crontab_old(n), 44), host=ORA_NODES[0])
A("Besides the migration-relevant jobs it runs database housekeeping: statistics gathering, backups, checks on the "
  "recovery area, log rotation, materialized view refreshes and the batch window open and close scripts. During "
  "the freeze, the batch and refresh jobs must stop; backups and housekeeping should keep running, because the old "
  "side is our rollback. The runbook's freeze step should list each line and say keep or stop.")

regular("cutover", "planning")
U("Kofi asks if the API can stay up read-only during the freeze instead of going fully dark. Possible?")
A("Possible, and better for partners, if two things hold. The read path must serve from one side consistently "
  "during the whole freeze (the old side until the switch, then the new one), so partners never see a balance go "
  "backwards. And writes must fail with a clear, documented error rather than time out, so partner systems queue "
  "them. That means a read-only flag in the API and a test of it in rehearsal 2. If that cannot be ready, going "
  "dark with a good notice is the safer option.")

regular("cutover", "config")
U("Show me the alert rules that will be live on the new side from the first night.")
read("deploy/monitoring/rules/migkit.yaml", N(lambda: alert_rules(rng.randint(20, 26))))
A("A reasonable first set: batch runtime, rejected rows, apply lag, replica lag, clients waiting on the pooler, "
  "checksum mismatches and API errors, with severities split between paging and tickets. Two gaps: nothing alerts "
  "on a job that did not run at all (a missing heartbeat), which is the failure mode of a scheduler nobody "
  "started; and the thresholds are guesses until we have a week of data, so they should be reviewed in hypercare.")

regular("fx rates service")
U("Ines re-ran the FX history backfill against prod after fixing the precision mapping. Check it the same way as "
  "before.")
psql("ledger", "select pair, rate_day, count(*) fixings, min(rate) min_rate, max(rate) max_rate, "
               "sum(case when gap then 1 else 0 end) gaps from ledger.rate_fixings_check group by 1, 2 order by 1, 2;",
     fitN(lambda n: rates_check(n), 75), host=f"{PG_PRD[0]}.{DOMAIN}")
A("Same shape as on staging: fixings on every sampled day, narrow intraday ranges, and only isolated gaps. With the "
  "mapping now unconstrained for history, the long-tailed cross rates should have come through unrounded; a "
  "comparison of a sample of those against Oracle would close the question for good.")

regular("cluster", "config")
U("Check the settings on prod that still differ from their defaults, and whether anything needs a restart.")
psql("postgres", "select name, setting, unit, source, pending_restart from pg_settings where source <> 'default' "
                 "or pending_restart order by pending_restart desc, name;", fitN(lambda n: pg_settings(n), 20),
     host=f"{PG_PRD[0]}.{DOMAIN}")
A("Most settings come from the configuration file as intended, but a few show a pending restart, which means the "
  "values in the file are not the ones in effect. That must be resolved before rehearsal 2, otherwise we rehearse "
  "on settings that differ from the ones in review. A planned restart this week, with Tobias, fixes it.")

regular("cutover", "planning")
U(f"Steering set a {M['budget']} for the cutover weekend: if we can't finish and verify inside that after the point "
  f"we start, we roll back. How does that change the plan?")
A("It turns the window into two parts: the forward plan, and the time reserved for rollback. Working back from the "
  "end of the window, the rollback needs its full budget available at every decision point, so the last point at "
  "which we can decide to go forward is the window's end minus that budget. Every step before it needs a rehearsal "
  "duration with a margin. Practically: a decision checkpoint after the copy and checks, one after the connection "
  "switch, and a hard stop time written into the runbook, with the cutover lead empowered to call it.")

regular("cutover", "planning")
U("Rehearsal 2 finished. Same as before: the orchestrator log and the step timings.")
sh("tail -n 90 /var/log/migkit/orchestrator/rehearsal-2.log",
   fitN(lambda n: steps_log(n, day(5, 30) + datetime.timedelta(hours=22),
                            N(lambda: f"wall clock 0{rng.randint(2, 3)}:{rng.randint(10, 59):02d}:{rng.randint(10, 59):02d}")), 8),
   host=JOB_HOSTS[0])
say("And the step table:")
psql("migctl", "select step, name, area, to_char(started, 'HH24:MI:SS') started, to_char(finished, 'HH24:MI:SS') "
               "finished, took, status from rehearsal_steps where rehearsal = 2 order by step;",
     fitN(lambda n: step_table(n, day(5, 30) + datetime.timedelta(hours=22)), 40))
A("Faster than the first one, mainly because the index builds and the history checks moved out of the window and "
  "the evening incremental copy shortened the final one. All steps finished; a couple were redone after checks "
  "and none were skipped this time. The forward plan now leaves the rollback budget intact with a margin, which "
  "is what steering asked for.")

regular("cutover", "comms")
U("Draft the partner notice now that rehearsal 2 is done. Short.")
A("Subject: Planned maintenance of the Partner API\n\nWe are moving our ledger platform to new infrastructure. "
  "During the maintenance window the Partner API will be read-only: balance and status requests will be answered, "
  "and requests that create or change payments will receive an HTTP 503 with a Retry-After header. No action is "
  "needed from you unless your integration does not retry on 503. We will confirm the date after our final "
  "readiness review and notify you when the window closes.\n\nContact: partner support, as usual.")

regular("cutover", "planning")
U("What's our plan if the first batch window on the new side fails outright?")
A("It depends on how it fails. If the job stops with a control total error, the runbook already says: do not "
  "re-run, the batch owner investigates, and we hold the bank files. If the owner finds a data problem from the "
  "migration, that is a rollback decision, taken within the budget. If the job fails for an operational reason "
  "(a lock, a timeout, a missing grant), fix it and re-run the value date, since nothing has left the building "
  "yet. The one thing we must not do is send bank files from a run we do not trust; the file transmission step "
  "needs an explicit go from the batch owner during the cutover weekend.")

regular("cluster")
U("Are the backups on prod in place? I want to see the backup set before we rely on it.")
sh("sudo -u postgres pgbackrest --stanza=ledger info", fitN(lambda n: pgbackrest_info(n), 22),
   host=f"{PG_PRD[0]}.{DOMAIN}")
A("Yes: the stanza is healthy, encrypted, with WAL archived continuously, a full backup at the start of the "
  "series and differential and incremental backups since. For the cutover, the runbook should take one more full "
  "backup after the load and before partner traffic opens, so the first restore point on the new side is the "
  "migrated state itself.")

regular("cutover", "dry")
U("After rehearsal 2, compare row counts between Oracle and the rehearsal copy for the big tables.")
psql("migctl", "select tbl, oracle_rows, pg_rows, oracle_rows - pg_rows diff, verdict from count_check where "
               "rehearsal = 2 order by oracle_rows desc;", fitN(lambda n: count_compare(n), 20))
A("Every table matches except a few marked in-flight, with small differences. Those are tables written by jobs that "
  "were still running on the Oracle side when the count was taken; in the real cutover the freeze stops them "
  "first. To be sure, I would re-count those tables on both sides at the same SCN.")

regular("archive purge")
U("Tom wants to run the expired-partition report on the old side again before the freeze, to check nothing new "
  "crossed the retention line. Show it.")
sqlplus("select table_name, partition_name, num_rows, round(bytes/power(1024,3),1) gb, hold from "
        "ledgr_maint.partitions_due order by partition_position;", fitN(lambda n: partitions_due(n), 60))
A("A few more partitions have crossed the line since the last report, as expected with a month passing, and the "
  "held ones are still flagged. It is a report only. Whatever Tom plans with it after cutover goes through the "
  "purge runbook, with the approver named in the ticket before anything is dropped.")

regular("cutover", "planning")
U("Read the go/no-go checklist section of the runbook and tell me what's missing.")
sh("sed -n '300,360p' docs/runbooks/cutover.md", N(lambda: runbook_noise("Go/no-go checklist", 20)))
A("It covers the technical state well: counts, checksums, lag, the batch lock, the pooler. Missing: the people "
  "(is every workstream owner reachable for the weekend, is the DBA on call confirmed, is the approver available), "
  "the external dependencies (vendor files due that weekend, scheme files, bank holidays in partner countries), and "
  "the explicit criteria for a no-go. A checklist that only has checks to pass invites a go by default; it should "
  "also list the conditions that mean no.")

regular("cutover", "planning")
U("Draft the go/no-go criteria then. Short list.")
A("Go only if all of these are true:\n\n1. Every workstream's latest dry run passed and is signed off.\n2. Rehearsal "
  "2 finished inside the window with the rollback budget intact.\n3. Every runbook step has a written rollback, and "
  "the rollbacks for the connection switch and the first batch window were exercised in rehearsal.\n4. Production "
  "settings have no pending restart; backups are current.\n5. The DBA on call, every workstream owner and the "
  "second approver are confirmed for the weekend.\n6. No external dependency is in an unknown state (vendor and "
  "scheme files, bank holidays).\n\nNo-go if any one is false, or if the cutover lead is not comfortable; that "
  "last one needs no justification.")

regular("cluster")
U("Freeze starts Monday. Who's holding locks or long transactions on prod right now?")
psql("postgres", "select pid, usename, application_name, client_addr, state, wait_event, "
                 "to_char(now() - xact_start, 'MI:SS.MS') age, left(query, 72) query from pg_stat_activity "
                 "where datname = 'ledger' and xact_start is not null order by age desc;",
     fitN(lambda n: pg_activity(n), 42), host=f"{PG_PRD[0]}.{DOMAIN}")
A("Mostly short transactions from the load tests and the monitoring user, but there are sessions idle in a "
  "transaction for minutes, from the batch user and a psql session. Those hold back vacuum and, if they hold row "
  "locks, would block the freeze's final steps. The psql one should be found and closed; the batch one suggests a "
  "code path that does not commit on an error, which belongs on the settlement team's list.")

regular("status", "dry")
U("Last look at the dry-run history before the go/no-go. Same query as before.")
psql("migctl", "select area, run_no, to_char(started_at, 'YYYY-MM-DD HH24:MI') started_at, status, rows_written, "
               "elapsed, checksum from dry_run_summary where started_at > '2026-03-01' order by area, run_no;",
     N(lambda: board_with_history(rng.randint(4, 5))))
A("Every workstream's latest run is there with its status, and the failures in the history are the ones we "
  "investigated. This is the table for the go/no-go pack: I would export it as it stands rather than summarize it, "
  "so nobody can argue later about which run was current.")

regular("cutover", "comms")
U("Go/no-go went through: it's a go. Anything you'd say to the team before the weekend?")
A("Three things. Stick to the runbook: if a step does not behave as it did in rehearsal, stop and say so in the "
  "channel rather than improvise. Every decision to continue past a checkpoint is the cutover lead's, written in "
  "the channel with the time. And rest before it: the people who make the mistakes on cutover weekends are the ones "
  "who worked all of Friday as well.")

regular("cutover", "planning")
U("Saturday evening, the freeze is in and the orchestrator starts in an hour. Anything to check before it does?")
A("Five quick things. The old schedulers are disabled, not just idle (the crontab lines we marked to stop are "
  "commented out). Nobody holds a long transaction on either side. The evening incremental copy finished and its "
  "checks are green. The backups on the new side are current, so the first restore point exists before we write "
  "anything. And everyone on the rota has answered in the channel, including the second shift. If all five hold, "
  "start on time; a late start eats the rollback budget, not the forward plan.")

# --- the cutover weekend ----------------------------------------------------------------

regular("cutover")
U("We're live in the window. The orchestrator is through the copy. Show me its log so far.")
sh("tail -n 90 /var/log/migkit/orchestrator/cutover.log",
   fitN(lambda n: steps_log(n, day(6, 13) + datetime.timedelta(hours=1),
                            N(lambda: f"wall clock 0{rng.randint(2, 3)}:{rng.randint(10, 59):02d}:{rng.randint(10, 59):02d}")), 8),
   host=JOB_HOSTS[0])
A("Every step so far finished in roughly its rehearsal time, nothing has been skipped, and the checks after the "
  "copy passed. We are ahead of the first decision checkpoint. Next is the sequence sync and the grants, then the "
  "connection switch.")

regular("cutover")
U("Row counts, Oracle against the new side, for everything.")
psql("migctl", "select tbl, oracle_rows, pg_rows, oracle_rows - pg_rows diff, verdict from count_check where "
               "run = 'cutover' order by oracle_rows desc;", fitN(lambda n: count_compare(n), 20))
A("All tables match except a couple marked in-flight with tiny differences, which are rows written by the "
  "monitoring jobs that keep running during the freeze on purpose. Worth a re-count of those two at the same SCN "
  "before we pass the checkpoint, to have it written down.")

regular("cutover", "dry")
U("And the checksums per workstream and table, old side against new.")
psql("migctl", "select area, tbl, ora_checksum, pg_checksum, ora_checksum = pg_checksum as match from "
               "checksum_check where run = 'cutover' order by area, tbl;", fitN(lambda n: checksum_compare(n), 3))
A("Almost everything matches. A few rows show a mismatch; those need to be understood before the checkpoint, not "
  "after. The first question is whether they are the in-flight monitoring tables again; if so, a recheck at the "
  "same SCN will clear them. If a mismatch is on a table nothing writes during the freeze, we stop.")

regular("cutover")
U("Recheck cleared them, it was the monitoring tables. Connection switch done, partner traffic open. The first batch "
  "window on the new side just ran; show me its log.")
sh("tail -n 60 /var/log/ledger-batch/run-2026-06-14.log",
   fitN(lambda n: java_batch_log(n, day(6, 14) + datetime.timedelta(hours=1),
                                 N(lambda: f"wall time {rng.randint(1, 2)}h{rng.randint(10, 59):02d}m{rng.randint(10, 59):02d}s")), 55),
   host=JOB_HOSTS[1])
A("It completed: every chunk written, a couple of lock waits that retried, no control total error. The wall time is "
  "within the rehearsal range. That was the second point of no return, and it went through cleanly.")

regular("cutover", "partner api")
U("Partners are back. Kofi says errors look normal but let's see the API logs from the first hour.")
sh("kubectl -n ledger-api logs deploy/ledger-api --since=1h --tail=60",
   fitN(lambda n: api_log(n, day(6, 14) + datetime.timedelta(hours=2)), 40))
A("Mostly normal requests with low latencies. There are some slow upstream warnings and a few database timeouts, "
  "with pool waits in the seconds on those; that is the partner backlog arriving at once after the window. If it "
  "does not calm down within the hour, the autoscaler's floor is the first lever, not the pool size.")

regular("reconciliation jobs", "hypercare")
U("First matching run on the new side finished this morning. Pull its log.")
sh("tail -n 80 /var/log/migkit/recon/match-2026-06-15.log",
   fitN(lambda n: matcher_log(n, day(6, 15) + datetime.timedelta(hours=4, minutes=10),
                              N(lambda: f"{rng.randint(200, 900)} breaks")), 55), host=JOB_HOSTS[4])
A("A normal run: the passes matched as they did in the parallel runs, and the carry-over is far smaller than on "
  "the first parallel night, because the date fix is in and the old rounding differences are gone from new "
  "postings. Farah should still look at the carried items today; the first real night is when surprises show.")

regular("hypercare", "planning")
U("We're through the weekend. What does hypercare look like for the next two weeks?")
A("Hypercare, two weeks:\n\n- Daily at 09:00: a fifteen-minute check of overnight jobs (batch, matching, posting, "
  "export, ingest), the alerts that fired, and the pooler statistics.\n- Each workstream owner watches their own "
  "job's first runs and confirms in the tracker.\n- The old side stays read-only and backed up, with the reverse "
  "apply job stopped but ready.\n- First-time events get named owners: the first month-end posting, the first "
  "period close, the first weekly archive report, the first vendor contract file after the move.\n- The alert "
  "thresholds get reviewed at the end of week one with real data.\n- Exit criteria: ten clean nights and a month "
  "end, then the old side can be scheduled for decommissioning.")

regular("audit export", "hypercare")
U("Sunniva's first production export on the new side ran. Check it.")
sh("tail -n 70 /var/log/migkit/export/export-2026-06-15.log",
   fitN(lambda n: export_log(n, day(6, 15) + datetime.timedelta(hours=2),
                             N(lambda: f"manifest written: {rng.randint(1100, 1900)} files")), 55), host=JOB_HOSTS[5])
A("Complete and clean: all parts written and uploaded, a couple of retries on upload, the row count check matched, "
  "the manifest is written and the objects are locked. The parallel week comparison against the old export can "
  "include this day as well.")

regular("gl posting", "hypercare")
U("And Bartek's posting job on the new side? First production run.")
sh("tail -n 80 /var/log/migkit/poster/poster-2026-06-15.log",
   fitN(lambda n: poster_log(n, day(6, 15) + datetime.timedelta(hours=0, minutes=40),
                             N(lambda: f"lines posted {rng.randint(200_000, 900_000)}")), 55), host=JOB_HOSTS[6])
A("Balanced: every batch balanced, zero trial balance per period, exit 0. The suspense lines are the known products "
  "again. That is the job most people were nervous about, so it is worth telling the channel.")

regular("hypercare", "partner api")
U("One partner says a balance looked different on Sunday morning compared with Saturday night. How do we "
  "investigate without scaring them?")
A("Start with what they saw: the account, the two times and the two values, from their logs if they have them. "
  "Then compare with our side at the same two times: the postings between those instants on the new ledger, and "
  "the last balance the old side served before the freeze. Most likely it is legitimate movement (postings that "
  "were queued during the freeze and applied afterwards), which we can show them as a list. If the postings do "
  "not explain the difference, it becomes an incident. Reply to them today with what we are checking and when "
  "they will hear back, without speculating about causes.")

regular("hypercare")
U("Finance ops are asking when they can stop double-checking everything against the old system.")
A("After the first month end on the new side, if it closes cleanly. Until then their checks are the cheapest "
  "safety net we have: they know what the numbers should look like better than any automated comparison. I would "
  "give them an end date (the working day after month end) and ask them to log anything odd in the hypercare "
  "tracker rather than email, so it gets counted.")

regular("hypercare")
U("Month end went through on the new side last night. Anything to look at beyond the usual checks?")
A("Yes, the things that only happen at month end: the period close (Bartek's team should confirm the trial "
  "balance and that the close locked the period), the monthly fee accruals in the settlement batch, the monthly "
  "statements the partner API serves, and the audit export's monthly manifest. I would also compare the month's "
  "totals by product with the same month last year as a sanity check; a migration error large enough to matter "
  "usually shows up as a product whose volume changed for no business reason.")

regular("retro", "planning")
U("Let's start the retro notes while it's fresh. What went well?")
A("- Dry runs from a fixed snapshot with ordered checksums gave every workstream a clear pass or fail, and made "
  "sign-offs easy to evidence.\n- Failures were caught early and had understood causes: the date conversion in the "
  "settlement batch and the replay running during the copy for the partner API.\n- Two rehearsals, with the second "
  "one on production settings, made the real window uneventful.\n- The rollback rule forced every step to be "
  "thought through; none was needed, but the connection switch rollback was exercised in rehearsal.\n- The "
  "approver rule kept destructive work out of the weekend entirely.")

regular("retro", "planning")
U("And what should we do differently next time? Be honest.")
A("- Start the connection budget at the beginning, not halfway through; pool sizes were scattered across ten "
  "configs and two poolers, and the DR site's limits were found late.\n- Make type mappings a shared, reviewed file "
  "rather than per-workstream sections; the date conversion bug was a mapping that one team got wrong and others "
  "might have copied.\n- Put the go/no-go criteria in writing from the start, including the no-go conditions.\n- "
  "Keep load replays and copies apart in the test plan from day one.\n- Agree the legal hold register before "
  "anything that deletes is even configured.")

regular("retro", "comms")
U("What do we tell the auditors now that we're live?")
A("A short letter with attachments rather than a meeting: that the cutover happened on the planned weekend; the "
  "evidence that the data moved completely (the count and checksum comparisons from the window, with the one "
  "mismatch and its recheck explained); the signed-off dry runs for each workstream; the parallel export "
  "comparison once it has covered a full period; and the plan for the old system, including how long it stays "
  "readable for their sampling. Then offer them a walkthrough of any of it. They will mostly want to sample "
  "transactions across the cutover date, so make sure someone can query both systems for them.")

regular("retro", "comms")
U("Draft a thank-you note to the workstream owners. Warm but not gushing.")
A("Subject: Thank you\n\nThe ledger moved on the planned weekend, and it was quiet, which is the best thing a "
  "cutover can be. That was not luck: it came from weeks of dry runs, configs reviewed line by line, runbook "
  "steps with their rollbacks written out, and two rehearsals that found the problems before the real night did. "
  "Each of you owned a piece of that and saw it through, including the parts nobody will notice now because they "
  "work. Thank you. Hypercare carries on for another week; after that, the old system's retirement is the last "
  "chapter, and I will keep you posted.")

regular("planning", "hypercare")
U("When can we switch the old Oracle system off for good?")
A("Not before three conditions hold: hypercare has exited (ten clean nights and a month end), the auditors have "
  "accepted the parallel export comparison, and the archive of the old side is taken and verified, since it is "
  "the only copy of how the ledger looked before the move. After that, a read-only period of a few weeks for "
  "anyone who needs to look something up, then decommissioning, which itself is a destructive change and needs "
  "the second approver. That fits before the support contract ends if nothing slips.")


FILLER_TURNS = [
    ("hypercare", "Anything from the overnight jobs I should know about before the daily check?",
     "Nothing that needs you: every scheduled job ran and finished, and the alerts that fired were the known noisy "
     "ones we agreed to retune at the end of the week."),
    ("hypercare", "Did the vendor's contract file arrive on time this morning?",
     "It did, and the feed loaded it without tripping its guard. Declan has confirmed the fee schedules in the "
     "tracker."),
    ("hypercare", "How's the pooler holding up at the evening peak?",
     "Comfortably: clients waited on the pool only briefly at the busiest minute, and no request timed out for lack "
     "of a connection."),
    ("hypercare", "Any new breaks from matching worth escalating?",
     "No: the carry-over is in line with the old system's usual nights, and Farah's team cleared yesterday's queue."),
]


def finish():
    global last_was_question
    k = 0
    while pending:
        if last_was_question or not any(p[0] <= turn_no + 1 for p in pending):
            t, q, a = FILLER_TURNS[k % len(FILLER_TURNS)]
            k += 1
            new_turn(t)
            U(q)
            A(a, pad=False)
            last_was_question = False
            continue
        maybe_ask()
    new_turn("retro", "planning")
    U("That's the programme done as far as I'm concerned. Anything you'd add to the handover note?")
    A("Only a reminder of the two rules that carry on after us: nothing is purged on the production side until a "
      "second approver is named in the change ticket, and any further change to the runbooks keeps a written "
      "rollback next to every step. The rest is in the tracker: the open hypercare items, the decommissioning "
      "conditions, and the evidence packs for the auditors.", pad=False)


finish()


# ---------------------------------------------------------------------------

TURNS = 150
FACT_POINTS = [40, 80, 120, TURNS]
CHECKSUMS = {l for l in P if re.fullmatch(r"[0-9a-f]{7}", P[l])}


def check():
    everything = [SYSTEM] + [i["content"] for i in items]
    missing = (set(P) | set(M)) - set(fact_turns)
    assert not missing, missing
    for f in facts:
        holders = [k for k, c in enumerate(everything) if f["text"] in c]
        assert len(holders) == 1, (f, holders)
        item = items[holders[0] - 1]
        assert item["content"].count(f["text"]) == 1, f
        assert item["turn"] == f["turn"], f
        assert item["kind"] == ("tool_result" if f["source"] == "tool" else "message"), f
        if f["source"] == "message":
            assert item["role"] == "user", f
    # A tool fact's whole output never names its subject; its call or its turn's user message does.
    for label, text in P.items():
        pattern = subject_of(label)
        k = next(k for k, i in enumerate(items) if text in i["content"])
        call, out = items[k - 1], items[k]["content"]
        assert call["kind"] == "tool_call" and call["call_id"] == items[k]["call_id"]
        assert not re.search(pattern, out, re.I), (label, re.search(pattern, out, re.I))
        user = next(i for i in items if i["turn"] == items[k]["turn"] and i["role"] == "user")
        assert re.search(pattern, call["content"] + "\n" + user["content"], re.I), label
    # The assistant never repeats a planted value.
    for i in items:
        if i["role"] == "assistant" and i["kind"] == "message":
            assert not any(v in i["content"] for v in list(P.values()) + list(M.values())), i["content"][:80]
    # Turns: each starts with the user's message; every call has its result right after it; each ends with the
    # assistant's message.
    turns = {}
    for i in items:
        turns.setdefault(i["turn"], []).append(i)
    assert sorted(turns) == list(range(1, TURNS + 1)), (len(turns), turn_no)
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
    for _, rule in RULES:
        assert sum(rule in i["content"] for i in items if i["role"] == "user") == 1, rule
    for t, rule in RULES:
        assert rule in turns[t][0]["content"], rule
    for c in everything:
        c.encode("ascii")
    bad = [(i["turn"], i["call_id"], len(i["content"].encode())) for i in items
           if i["kind"] == "tool_result" and not LO <= len(i["content"].encode()) <= HI]
    assert not bad, bad
    # The question sets.
    for which, n_asked in (("tune", 12), ("held", 14)):
        asked = [p for p in probes[which] if p["facts"]]
        assert len(asked) == n_asked, (which, len(asked))
        assert sum(1 for p in probes[which] if not p["facts"]) == 1, which
        assert len({p["turn"] for p in probes[which]}) == len(probes[which]), which
        labels = [next(l for l, fid in fact_ids.items() if fid == p["facts"][0]) for p in asked]
        assert all(l in P for l in labels), labels
        assert sum(l in CHECKSUMS for l in labels) >= 5, (which, labels)
        for p in probes[which]:
            q = turns[p["turn"]][0]["content"]
            assert len(turns[p["turn"]]) == 2, p  # the question and a reply, no calls
            for fid in p["facts"]:
                f = next(f for f in facts if f["id"] == fid)
                assert p["turn"] - f["turn"] >= MIN_GAP, (p, f)
                assert f["text"].lower() not in q.lower(), (fid, q)
    tuned = {fid for p in probes["tune"] for fid in p["facts"]}
    held = {fid for p in probes["held"] for fid in p["facts"]}
    assert not tuned & held, tuned & held
    assert not pending
    return turns


def main():
    turns = check()
    tool_turns = sum(1 for its in turns.values() if any(i["kind"] == "tool_call" for i in its))
    sizes = [len(i["content"].encode()) for i in items if i["kind"] == "tool_result"]
    blob = sum(len(i["content"].encode()) for i in items)
    tool_lines = [l for i in items if i["kind"] == "tool_result" for l in i["content"].split("\n")]
    all_lines = [l for i in items for l in i["content"].split("\n")]
    common = {w: sum(1 for l in all_lines if w in l.lower()) for w in
              ["batch", "checksum", "ledger", "rollback", "migration"]}
    assert max(common.values()) > 1000, common
    assert 0.35 <= tool_turns / TURNS <= 0.45, tool_turns
    assert 440 <= len(items) <= 520, len(items)
    assert 450_000 <= blob <= 530_000, blob

    def write(name, rows):
        with open(os.path.join(HERE, name), "w") as out:
            for r in rows:
                out.write(json.dumps(r, ensure_ascii=False) + "\n")

    write("ledger.jsonl", [{"system_prompt": SYSTEM}] + items)
    write("ledger_facts.jsonl", facts)
    common_probes = ([{"kind": "instruction", "turn": t, "text": rule} for t, rule in RULES]
                     + [{"kind": "facts", "turn": t} for t in FACT_POINTS])
    write("ledger_probes.jsonl", common_probes + sorted(probes["tune"], key=lambda p: p["turn"]))
    write("ledger_heldout_probes.jsonl", common_probes + sorted(probes["held"], key=lambda p: p["turn"]))
    print(f"{TURNS} turns, {len(items)} items, {call_no} tool calls in {tool_turns} turns "
          f"({100 * tool_turns / TURNS:.0f}%), outputs {min(sizes)}-{max(sizes)} bytes "
          f"(~{min(sizes) // 4}-{max(sizes) // 4} tokens, mean ~{sum(sizes) // len(sizes) // 4}), {len(facts)} facts "
          f"({sum(f['source'] == 'tool' for f in facts)} from tools), "
          f"{sum(1 for p in probes['tune'] if p['facts'])}+1 tuning and "
          f"{sum(1 for p in probes['held'] if p['facts'])}+1 held-out recall questions, {blob} bytes of content "
          f"({len(tool_lines)} output lines); lines with: " + ", ".join(f"{w} {n}" for w, n in common.items()))


main()
