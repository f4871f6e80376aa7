#!/usr/bin/env python3
"""Writes the Fernhollow analytics-engineering replay conversation used by tools/replay.

Fernhollow Provisions, an online grocer, runs a nightly analytics pipeline:
Airflow on Kubernetes (DAG code and one YAML config per DAG under dags/),
dbt models on the Redshift warehouse (dbt/, plus a second dbt project for the
finance marts), Spark steps on EMR (emr/, spark/), a data lake on S3 fed from
Kafka through Kafka Connect (connect/), Great Expectations suites (gx/) and
Terraform stacks (infra/). A data engineer spends a working day with an
assistant after a bad night: the order facts are short, the web
sessionization step crawled, the stock snapshot failed its expectations, the
point-of-sale sink lags, the revenue marts need a rebuild, attribution looks
off, refunds are doubled, a supplier file does not parse, and then the
backfill, the infrastructure plans and the write-up.

This conversation is built to measure recall honestly, and differently from
the platform, coding, oncall and migration replays:
  * most turns are talk (planning, comms, reviews, recall questions); about
    two in five carry tool calls, usually two or three of them, with long outputs that look
    like the real thing (psql tables and expanded records, dbt run and test
    logs, Airflow metadata, pod logs, Spark application summaries, EMR step
    lists, YARN logs, S3 listings, Great Expectations result JSON, Kafka
    consumer-group tables, connector configs, Terraform plans, YAML configs,
    DAG sources with line numbers, git log and diffs);
  * the line holding a planted value never names what it belongs to, and
    neither does the rest of that output: the DAG, model, job, topic, stack
    or feed is named only in the call's arguments (a path, a pod, an app id,
    a selector, a query) and in the user's message of that turn;
  * the same keys, aliases and summary lines recur for other components with
    other values (every DAG config has the same keys, every listing ends with
    Total Objects, every Spark summary reports spill, every expectation
    result has unexpected_count), so a question can only be answered from the
    one output its subject's call produced;
  * the words a question leans on (table, job, run, error, rows, partition)
    occur on hundreds of output lines;
  * the assistant does not repeat tool values in its replies, and its
    answers to recall questions stay vague;
  * recall questions come 25 or more turns after the fact, in the user's own
    words: abbreviations (DB, env, prod, TF, GX, k8s, secs), possessives,
    plurals, loose names for the DAG or job, chatty asides.

Two question sets ask about different facts (a tuning set and a held-out
set, one unrelated question each); both carry the same two standing
instructions and fact-count points.

Outputs (beside this file):
  analytics.jsonl                  system prompt, then one item per line
  analytics_facts.jsonl            id, turn, topic, source, text
  analytics_probes.jsonl           instructions, fact counts, tuning recall set
  analytics_heldout_probes.jsonl   instructions, fact counts, held-out recall set

Deterministic (seeded, no clock, standard library only). Re-run after editing:
  python3 tools/replay_data/make_analytics.py
"""

import datetime
import difflib
import json
import os
import random
import re

rng = random.Random(20261202)
HERE = os.path.dirname(os.path.abspath(__file__))

SYSTEM = ("You are a data engineering assistant for Fernhollow's analytics platform. Airflow on "
          "Kubernetes runs the nightly pipeline (DAG code and one YAML config per DAG under dags/), dbt builds the "
          "models in the Redshift warehouse (dbt/ and the finance project under dbt_books/), Spark steps run on "
          "EMR (emr/, spark/), raw data lands in S3 from Kafka through Kafka Connect (connect/), data quality "
          "suites live in gx/ and infrastructure is Terraform under infra/. You can read files, run shell "
          "commands (airflow, dbt, aws, kubectl, kafka tools, terraform), query the warehouse and the Airflow "
          "metadata database with psql, use git and apply patches. Quote values exactly as the tools return "
          "them, and say so when you are unsure.")

RULES = [
    (2, "never run a write against the prod warehouse by hand: write queries go to the analytics_scratch schema "
        "first and get a second pair of eyes"),
    (3, "every backfill gets a dry run first, and its row counts go into the ticket before the real run starts"),
]

TODAY = datetime.date(2026, 12, 2)
DS = "2026-12-01"

# ---------------------------------------------------------------------------
# Phase 1: every planted value is drawn before any output is written, so
# that no noise line anywhere can hold one of them.

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


def pick(values, avoid=()):
    return rng.choice([v for v in values if v not in avoid])


# Values that noise lines use for the keys that planted lines also use.
NOISE = {
    "execution_timeout_minutes": [30, 45, 60, 90, 120, 180, 240],
    "retry_delay_minutes": [2, 5, 10, 15, 20, 30],
    "sla_minutes": [120, 180, 240, 300, 360],
    "retries": [1, 2, 3, 5],
    "poke_interval": [60, 120, 300, 600],
    "schedule": ["0 2 * * *", "30 2 * * *", "15 4 * * *", "0 5 * * *", "*/30 * * * *", "0 */4 * * *",
                 "45 1 * * *", "0 6 * * 1", "30 3 * * *", "0 1 * * *"],
    "shuffle": ["200", "400", "800", "1000", "2000", "4000"],
    "rotate": ["60000", "300000", "600000", "900000"],
    "flush": ["1000", "5000", "10000", "50000"],
    "threads": [4, 8, 12, 16],
    "delta_hours": [1, 2, 3, 4, 6],
    "window_hours": [6, 12, 24, 48, 72],
}


def nz(key):
    return rng.choice(NOISE[key])


def xrow(key, value, width):
    """One line of psql's expanded display."""
    return f"{key.ljust(width)} | {value}"


# Keys of the expanded records that hold a planted line (the widest key sets
# the padding, as psql does).
KEYS_GAP = ["ds", "source_rows", "loaded_rows", "missing_rows", "late_rows", "checked_at"]
KEYS_DUPES = ["window_start", "window_end", "row_total", "distinct_ids", "dupe_ids", "dupe_amount_cents",
              "first_seen", "last_seen"]
KEYS_PCTL = ["population", "p50_value", "p90_value", "p99_value", "max_value", "null_values", "computed_at"]

P = {}  # label -> planted tool text
P["O1"] = unique(lambda: f"execution_timeout_minutes: {pick([75, 85, 95, 105, 110, 135, 150, 165])}")


def _manifest():
    b = rng.randint(180, 320)
    return f"partition incomplete: found {b - rng.randint(b // 3, b // 2)} of {b} manifest files"


P["O2"] = unique(_manifest)
P["O3"] = unique(lambda: xrow("missing_rows", rng.randint(31000, 68000), max(map(len, KEYS_GAP))))
P["O4"] = unique(lambda: hexs(7))
P["O5"] = unique(lambda: f"poke_interval={pick([240, 420, 450, 540, 720, 840])}")
P["S1"] = unique(lambda: f"Total shuffle spill (disk): {rng.randint(380, 950) / 10:.1f} GiB")
P["S2"] = unique(lambda: f'"spark.sql.shuffle.partitions": "{pick([2400, 3000, 3200, 3600, 4800, 6000])}"')
P["S3"] = unique(lambda: f"Total Objects: {rng.randint(3100, 5900)}")
P["A1"] = unique(lambda: f"VIEW_THROUGH_WINDOW = timedelta(hours={pick([18, 20, 30, 36, 42])})")
# The attribution table is drawn here, so that its planted row is known.
CHANNELS = ["paid_search", "paid_social", "organic_search", "email", "affiliate", "direct", "referral",
            "push", "display", "app_store"]


def _shares():
    w = [rng.uniform(0.3, 3.0) for _ in CHANNELS]
    total_credit = rng.randint(96000, 131000)
    rows = []
    for c, x in zip(CHANNELS, w):
        share = x / sum(w)
        rows.append([c, rng.randint(4000, 60000), f"{total_credit * share:.2f}", f"{100 * share:.2f}",
                     f"{rng.uniform(0.4, 2.2):.2f}"])
    return rows


ATTR_ROWS = _shares()
P["I1"] = unique(lambda: f'schedule: "{pick([10, 20, 25, 35, 40, 50])} {rng.choice([3, 4])} * * *"')
P["I2"] = unique(lambda: f'"unexpected_count": {rng.randint(1100, 2900)},')
P["P1"] = unique(lambda: f"est_drain_minutes {rng.randint(140, 260)}")
P["P2"] = unique(lambda: f'"rotate.interval.ms": "{pick([420000, 480000, 720000, 840000, 1080000])}"')
P["R1"] = unique(lambda: hexs(32))
P["R2"] = unique(lambda: f"threads: {pick([5, 6, 7, 10, 11])}")
P["R3"] = unique(lambda: f"sla_minutes: {pick([195, 225, 265, 285, 315])}")
P["L1"] = unique(lambda: f"retry_delay_minutes: {pick([7, 12, 25, 35, 40])}")
P["L2"] = unique(lambda: xrow("p99_value", f"{rng.randint(1800, 3400)}.{rng.randint(10, 99)}", max(map(len, KEYS_PCTL))))
P["F1"] = unique(lambda: xrow("dupe_ids", rng.randint(300, 990), max(map(len, KEYS_DUPES))))
P["F2"] = unique(lambda: hexs(7))
P["H1"] = unique(lambda: f"execution_delta=timedelta(hours={rng.choice([2, 3, 5])}, minutes={rng.choice([15, 20, 40, 45])})")
P["H2"] = unique(lambda: f'"unexpected_percent": {rng.uniform(1.5, 6.5):.4f},')
P["V1"] = unique(lambda: f"line {rng.randint(20000, 90000)}: invalid byte 0x{rng.choice([0xe9, 0xe8, 0xfc, 0xf6, 0xa3, 0xe4]):02x}")
P["V2"] = unique(lambda: hexs(64))
P["T1"] = unique(lambda: f"~ days = {rng.choice([365, 400, 540, 730])} -> {rng.choice([30, 45, 60, 120, 180])}")
P["T2"] = unique(lambda: (lambda a: f"~ number_of_nodes{' ' * 21} = {a} -> {a + rng.choice([2, 3, 4])}")(rng.choice([3, 4, 5])))
P["D1"] = unique(lambda: f"0 hours {rng.randint(24, 48)} minutes and {rng.randint(100, 5999) / 100:.2f} seconds")


def _tally():
    p, w, e = rng.randint(1150, 1240), rng.randint(3, 9), rng.randint(1, 4)
    return f"Done. PASS={p} WARN={w} ERROR={e} SKIP=0 TOTAL={p + w + e}"


P["D2"] = unique(_tally)

# The messages' facts.
M = {
    "name": unique(lambda: "Ottilie Brandvold"),
    "company": unique(lambda: "Fernhollow Provisions"),
    "ticket": unique(lambda: "DATA-2317"),
    "pack": unique(lambda: "Weekly Trading Pack"),
    "oncall": unique(lambda: "Brannagh Oduya is on the platform rota this week"),
    "fpa": unique(lambda: "Cormac Lindqvist"),
    "deadline": unique(lambda: "the trading pack goes to the exec team at 16:30"),
    "window": unique(lambda: "backfill window is 2026-11-24 through 2026-12-01"),
    "pr": unique(lambda: "PR #3462"),
    "budget": unique(lambda: "EMR budget of USD 2,400 a month"),
    "channel": unique(lambda: "#data-incident-1202"),
    "vendor": unique(lambda: "Marrowgate Dairy"),
}

# What each planted label belongs to, and the pattern that names it. The
# output holding the value must not match; the call or the user's turn must.
SUBJECT = {
    "O": ("orders", r"orders"),
    "S": ("sessions", r"session|clickstream|web_events"),
    "A": ("attribution", r"attribution|touchpoint"),
    "I": ("inventory", r"inventory|stock"),
    "P": ("pos", r"(?<![a-z])pos(?![a-z])|point[ -]of[ -]sale"),
    "R": ("revenue", r"revenue|financ"),
    "L": ("ltv", r"ltv|lifetime"),
    "F": ("refunds", r"refund"),
    "H": ("shipments", r"shipment"),
    "V": ("supplier", r"supplier|vendor"),
    "T1": ("retention", r"retention"),
    "T2": ("warehouse", r"warehouse"),
    "D": ("nightly_core", r"nightly_core"),
}


def subject_of(label):
    return SUBJECT.get(label) or SUBJECT[label[0]]


def clean(s):
    return not any(r in s for r in RESERVED)


def N(make):
    """A noise line: drawn again until it holds no planted value."""
    for _ in range(1000):
        s = make()
        if clean(s):
            return s
    raise RuntimeError("noise keeps hitting a planted value")


def fit(make, n, lo=1400, hi=6900):
    """make(n), n shrunk or grown until the output is lo..hi bytes."""
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


# ---------------------------------------------------------------------------
# Names that recur across outputs (invented).

DAGS = ["orders_nightly", "web_sessionize", "marketing_attribution", "inventory_snapshot", "finance_revenue",
        "customer_ltv", "pos_sink_watch", "refunds_daily", "shipments_daily", "supplier_feeds",
        "promo_performance", "search_terms_daily", "email_engagement", "store_traffic", "catalog_sync",
        "dw_maintenance", "gx_nightly", "crm_reverse_etl", "forecast_features", "ops_kpis", "basket_affinity",
        "courier_slots", "loyalty_points", "product_reviews"]
AUTHORS = ["Jonah Pryce", "Ilka Marwood", "Teodora Fenn", "Rasmus Achterberg", "Noemi Vasquez-Hale", "Kit Odhiambo",
           "Saoirse Delacroix", "Bram Kuipers", "Wren Halvorsen", "Anouk Brightwell"]
SCHEMAS = ["analytics", "staging", "marts", "snapshots", "analytics_scratch"]
# Neutral table names: what a noise output may mention without naming a subject.
TABLES = ["dim_customer", "dim_product", "dim_store", "dim_date", "dim_channel", "fct_basket_lines",
          "fct_page_views", "fct_email_sends", "fct_search_terms", "fct_courier_slots", "fct_loyalty_points",
          "fct_product_reviews", "int_catalog_prices", "int_customer_segments", "stg_crm__contacts",
          "stg_catalog__items", "stg_courier__slots", "stg_loyalty__ledger", "stg_reviews__raw",
          "int_basket_affinity", "fct_store_traffic", "fct_forecast_features", "stg_search__queries"]
COLUMNS = ["customer_id", "sku_id", "store_id", "event_ts", "ds", "amount_cents", "quantity", "channel",
           "currency", "status", "updated_at", "source_file", "line_no", "batch_id", "tenant", "region",
           "gross_cents", "net_cents", "discount_cents", "tax_cents", "basket_id", "device", "campaign_id"]
HOSTS = [f"ip-10-41-{a}-{b}.eu-west-1.compute.internal" for a, b in
         [(3, 17), (3, 88), (7, 22), (7, 141), (12, 9), (12, 230), (19, 64), (19, 201), (22, 35), (22, 112)]]


def clock(h, m=0, s=0.0):
    return datetime.datetime(TODAY.year, TODAY.month, TODAY.day, h, m) + datetime.timedelta(seconds=s)


def iso(dt, ms=True):
    return dt.strftime("%Y-%m-%dT%H:%M:%S") + (f".{dt.microsecond // 1000:03d}Z" if ms else "Z")


def human_size(b):
    for unit in ["Bytes", "KiB", "MiB", "GiB", "TiB"]:
        if b < 1024 or unit == "TiB":
            return f"{b:.1f} {unit}" if unit != "Bytes" else f"{int(b)} Bytes"
        b /= 1024


def numbered(lines, start=1):
    return "\n".join(f"{i:6d}\t{l}" for i, l in enumerate(lines, start))


def psql_table(headers, rows, numeric=()):
    rows = [[str(x) for x in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    out = [" " + " | ".join(h.center(w) for h, w in zip(headers, widths)).rstrip()]
    out.append("+".join("-" * (w + 2) for w in widths))
    for r in rows:
        out.append(" " + " | ".join(c.rjust(w) if i in numeric else c.ljust(w)
                                    for i, (c, w) in enumerate(zip(r, widths))).rstrip())
    out.append(f"({len(rows)} row{'' if len(rows) == 1 else 's'})")
    return "\n".join(out)


ATTR_HEAD = ["channel", "orders_touched", "credit_value", "share_pct", "avg_contacts"]
ATTR_TABLE = psql_table(ATTR_HEAD, ATTR_ROWS, numeric=(1, 2, 3, 4))
P["A2"] = unique(lambda: next(l.strip() for l in ATTR_TABLE.split("\n") if l.strip().startswith("paid_social ")))


def psql_expanded(records, keys):
    """records: list of dicts over `keys`; psql \\x output."""
    kw = max(map(len, keys))
    out = []
    for n, rec in enumerate(records, 1):
        vw = max(len(str(rec[k])) for k in keys)
        head = f"-[ RECORD {n} ]"
        out.append(head + "-" * max(0, kw + 1 - len(head)) + "+" + "-" * (vw + 1))
        out += [xrow(k, rec[k], kw) for k in keys]
    return "\n".join(out)


# ---------------------------------------------------------------------------
# Airflow.

# When each DAG of the story is scheduled (the others run at two).
_i1 = P["I1"].split('"')[1].split()
SCHED_HM = {"orders_nightly": "02:00", "inventory_snapshot": f"{int(_i1[1]):02d}:{int(_i1[0]):02d}",
            "finance_revenue": "03:30", "customer_ltv": "01:00", "shipments_daily": "02:00"}


def hm(dag):
    return SCHED_HM.get(dag, "02:00")


def run_id(ds, kind="scheduled", dag=None):
    return f"{kind}__{ds}T{hm(dag)}:00+00:00"


LAST_NIGHT = [("orders_nightly", "success", 2, 0, 198), ("web_sessionize", "success", 1, 5, 291),
              ("inventory_snapshot", "failed", None, None, 120), ("refunds_daily", "failed", 2, 0, 64),
              ("pos_sink_watch", "failed", 2, 30, 12), ("finance_revenue", "failed", 3, 30, 71),
              ("shipments_daily", "failed", 2, 0, 340), ("supplier_feeds", "failed", 2, 0, 9),
              ("customer_ltv", "running", 1, 0, 0)]


def dag_runs_query(n, last_night=False):
    """psql over the Airflow metadata DB: recent dag_run rows (last_night: the story's runs first)."""
    rows = []
    if last_night:
        for dag, st, h, m, minutes in LAST_NIGHT:
            if h is None:
                h, m = map(int, hm(dag).split(":"))
            start = clock(h, m, rng.randint(1, 50))
            dur = datetime.timedelta(minutes=minutes, seconds=rng.randint(0, 59))
            rows.append([dag, run_id(DS, dag=dag), st, start.strftime("%Y-%m-%d %H:%M:%S"),
                         "" if st == "running" else (start + dur).strftime("%Y-%m-%d %H:%M:%S"),
                         "" if st == "running" else str(dur)])
        n -= len(rows)
    for _ in range(n):
        d = TODAY - datetime.timedelta(days=rng.randint(0, 6))
        ds = (d - datetime.timedelta(days=1)).isoformat()
        st = rng.choices(["success", "failed", "running", "success"], [8, 2, 1, 8])[0]
        start = datetime.datetime(d.year, d.month, d.day, rng.randint(0, 4), rng.randint(0, 59), rng.randint(0, 59))
        dur = datetime.timedelta(minutes=rng.randint(3, 290), seconds=rng.randint(0, 59))
        end = "" if st == "running" else (start + dur).strftime("%Y-%m-%d %H:%M:%S")
        dag = rng.choice(DAGS)
        rows.append([dag, run_id(ds, rng.choice(["scheduled", "scheduled", "scheduled", "manual"]), dag), st,
                     start.strftime("%Y-%m-%d %H:%M:%S"), end, "" if st == "running" else str(dur)])
        if last_night and ds == DS and dag in [x[0] for x in LAST_NIGHT]:
            rows.pop()
    rows.sort(key=lambda r: r[3], reverse=True)
    return N(lambda: psql_table(["dag_id", "run_id", "state", "start_date", "end_date", "duration"], rows))


TASKS = ["wait_for_upstream_export", "land.wait_for_{s}_manifest", "land.load_{s}", "dbt_build", "quality_gate",
         "publish", "notify_failure"]


def task_states(dag, srcs, state_of=None, starts=None):
    """`airflow tasks states-for-dag-run` as a table."""
    rows = []
    h, m = map(int, hm(dag).split(":"))
    t = clock(h, m, rng.randint(1, 50))
    for task in TASKS:
        for s in (srcs if "{s}" in task else [None]):
            tid = task.format(s=s) if s else task
            st = (state_of or {}).get(tid, "success")
            if st in ("upstream_failed", "skipped", "None", "scheduled"):
                rows.append([dag, DS + f"T{hm(dag)}:00+00:00", tid, st, "", ""])
                continue
            a = max(t, (starts or {}).get(tid, t))
            t = a + datetime.timedelta(seconds=rng.randint(20, 2400))
            rows.append([dag, DS + f"T{hm(dag)}:00+00:00", tid, st, a.isoformat() + ".%06d+00:00" % rng.randint(0, 999999),
                         t.isoformat() + ".%06d+00:00" % rng.randint(0, 999999)])
    w = [max(len(h), *(len(r[i]) for r in rows)) for i, h in
         enumerate(["dag_id", "execution_date", "task_id", "state", "start_date", "end_date"])]
    head = ["dag_id", "execution_date", "task_id", "state", "start_date", "end_date"]
    out = [" | ".join(h.ljust(x) for h, x in zip(head, w)), "=+=".join("=" * x for x in w)]
    out += [" | ".join(c.ljust(x) for c, x in zip(r, w)) for r in rows]
    return "\n".join(out)


def airflow_runs(dag, n, fail_first=True, first_states=None, backfill=None):
    """`airflow dags list-runs -d dag -o table`; first_states: the newest runs' states; backfill: the states
    of the backfill runs of the agreed window, oldest first."""
    rows = []
    if backfill:
        for k, st in reversed(list(enumerate(backfill))):
            ds = (datetime.date(2026, 11, 24) + datetime.timedelta(days=k)).isoformat()
            a = clock(10, 52) + datetime.timedelta(minutes=31 * k + rng.randint(0, 4))
            started = st in ("success", "running")
            rows.append([dag, run_id(ds, "backfill", dag), st, ds + f"T{hm(dag)}:00+00:00",
                         a.isoformat() + "+00:00" if started else "",
                         (a + datetime.timedelta(minutes=rng.randint(24, 33))).isoformat() + "+00:00"
                         if st == "success" else ""])
    first = first_states or (["failed"] if fail_first else [])
    for i in range(n):
        d = TODAY - datetime.timedelta(days=i)
        ds = (d - datetime.timedelta(days=1)).isoformat()
        st = first[i] if i < len(first) else rng.choices(["success", "failed"], [12, 1])[0]
        h, m = map(int, hm(dag).split(":"))
        a = datetime.datetime(d.year, d.month, d.day, h, m, rng.randint(1, 50))
        b = a + datetime.timedelta(minutes=rng.randint(40, 260), seconds=rng.randint(0, 59))
        rows.append([dag, run_id(ds, dag=dag), st, ds + f"T{hm(dag)}:00+00:00", a.isoformat() + "+00:00",
                     "" if st == "running" else b.isoformat() + "+00:00"])
    head = ["dag_id", "run_id", "state", "execution_date", "start_date", "end_date"]
    w = [max(len(h), *(len(r[k]) for r in rows)) for k, h in enumerate(head)]
    out = [" | ".join(h.ljust(x) for h, x in zip(head, w)), "=+=".join("=" * x for x in w)]
    out += [" | ".join(c.ljust(x) for c, x in zip(r, w)) for r in rows]
    return "\n".join(out)


def airflow_task_log(dag, task, attempt, tries, n, body="loader", fail=True, override=False, start=None):
    """A task attempt's log as remote logging stores it."""
    t = start or clock(rng.randint(2, 5), rng.randint(0, 59), rng.uniform(0, 59))
    job = rng.randint(480000, 520000)
    out = []

    def line(src, level, msg):
        nonlocal t
        t += datetime.timedelta(seconds=rng.uniform(0.01, 12))
        out.append(N(lambda: f"[{t:%Y-%m-%d, %H:%M:%S} UTC] {{{src}}} {level} - {msg}"))

    ti = f"<TaskInstance: {dag}.{task} {run_id(DS, dag=dag)} [running]>"
    line("local_task_job_runner.py:123", "INFO", f"::group::Pre task execution logs")
    line("taskinstance.py:2076", "INFO", f"Dependencies all met for dep_context=non-requeueable deps ti={ti}")
    line("taskinstance.py:2306", "INFO", f"Starting attempt {attempt} of {tries}")
    line("taskinstance.py:2330", "INFO", f"Executing <Task(KubernetesPodOperator): {task}> on {DS} {hm(dag)}:00+00:00")
    line("standard_task_runner.py:63", "INFO", f"Started process {rng.randint(1000, 99999)} to run task")
    line("standard_task_runner.py:90", "INFO", f"Running: ['airflow', 'tasks', 'run', '{dag}', '{task}', "
                                               f"'{run_id(DS, dag=dag)}', '--job-id', '{job}', '--raw', '--subdir', "
                                               f"'DAGS_FOLDER/{dag}.py', '--cfg-path', '/tmp/tmp{hexs(8)}']")
    line("standard_task_runner.py:91", "INFO", f"Job {job}: Subtask {task}")
    line("task_command.py:426", "INFO", f"Running {ti} on host {rng.choice(HOSTS)}")
    if override:
        line("factory.py:52", "WARNING", f"{dag}: applying 1 override(s) from Airflow Variables")
    line("pod_manager.py:389", "INFO", f"Pod {dag.replace('_', '-')}-{task.split('.')[-1].replace('_', '-')}-{hexs(6)} "
                                       f"has phase Running")
    for _ in range(n):
        k = rng.random()
        if body == "dbt":
            m = rng.choice([f"{rng.randint(1, 40)} of 38 OK created sql incremental model books.{rng.choice(TABLES)}",
                            f"{rng.randint(1, 40)} of 38 OK created sql table model books.{rng.choice(TABLES)}",
                            f"{rng.randint(1, 40)} of 38 START sql table model books.{rng.choice(TABLES)}",
                            "Database Error in model: could not complete the run, relation does not exist",
                            f"Concurrency: {nz('threads')} threads (target='prod')"])
        elif k < 0.3:
            m = (f"partition dt={DS} part={rng.randint(0, 299):05d} rows={rng.randint(2000, 90000)} "
                 f"copied into staging table in {rng.uniform(0.4, 9):.1f}s, 0 errors")
        elif k < 0.45:
            m = (f"MERGE partition dt={DS} into analytics table: rows inserted={rng.randint(0, 90000)} "
                 f"updated={rng.randint(0, 9000)} errors=0")
        elif k < 0.55:
            m = f"error rows for this partition: {rng.randint(0, 30)} (written to the error table staging.load_errors)"
        elif k < 0.7:
            m = (f"job heartbeat: step={rng.choice(['copy', 'merge', 'verify'])} tables done {rng.randint(0, 3)}/3, "
                 f"rows so far {rng.randint(10 ** 4, 10 ** 6)}")
        elif k < 0.85:
            m = f"row count check on table staging.{rng.choice(TABLES)}: {rng.randint(1000, 90000)} rows, 0 errors, ok"
        else:
            m = f"retrying statement after error: SSL SYSCALL error: EOF detected (attempt {rng.randint(2, 4)}/5)"
        line("pod_manager.py:472", "INFO", f"[base] {m}  job=ld-{job}")
    if fail:
        line("pod_manager.py:624", "INFO", "Pod has phase Failed")
        line("taskinstance.py:2731", "ERROR", "Task failed with exception")
        out.append("Traceback (most recent call last):")
        out.append('  File "/home/airflow/.local/lib/python3.11/site-packages/airflow/providers/cncf/kubernetes/'
                   'operators/pod.py", line 593, in execute_sync')
        out.append("    self.cleanup(pod=self.pod, remote_pod=self.remote_pod)")
        out.append("airflow.exceptions.AirflowException: Pod returned a failure: exit code 3; the job's error is above")
        line("taskinstance.py:1206", "INFO", f"Marking task as {'UP_FOR_RETRY' if attempt < tries else 'FAILED'}. "
                                             f"dag_id={dag}, task_id={task}, run_id={run_id(DS, dag=dag)}, "
                                             f"execution_date={DS.replace('-', '')}T{hm(dag).replace(':', '')}00")
        line("local_task_job_runner.py:240", "INFO", "Task exited with return code 1")
    else:
        line("pod_manager.py:624", "INFO", "Pod has phase Succeeded")
        line("taskinstance.py:1206", "INFO", f"Marking task as SUCCESS. dag_id={dag}, task_id={task}, "
                                             f"run_id={run_id(DS, dag=dag)}, execution_date={DS.replace('-', '')}T{hm(dag).replace(':', '')}00")
        line("local_task_job_runner.py:240", "INFO", "Task exited with return code 0")
    line("taskinstance.py:3498", "INFO", f"{rng.randint(0, 3)} downstream tasks scheduled from follow-on schedule check")
    return "\n".join(out)


def task_durations(n):
    """psql over task_instance: slowest tasks of the last nights."""
    rows = []
    for _ in range(n):
        dag = rng.choice(DAGS)
        tid = rng.choice(["dbt_build", "quality_gate", "publish", "land.load_raw", "land.load_events", "spark_step",
                          "wait_for_upstream_export", "export_to_crm", "refresh_extracts"])
        rows.append([dag, tid, rng.randint(1, 7), f"{rng.randint(1, 240)}.{rng.randint(0, 99):02d}",
                     f"{rng.randint(1, 300)}.{rng.randint(0, 99):02d}", rng.randint(0, 3),
                     rng.choice(["success", "success", "failed", "up_for_retry"])])
    rows.sort(key=lambda r: -float(r[4]))
    return N(lambda: psql_table(["dag_id", "task_id", "runs", "avg_minutes", "max_minutes", "retries_used",
                                 "last_state"], rows, numeric=(2, 3, 4, 5)))


def pools_list():
    pools = [("default_pool", 128), ("etl_default", 24), ("spark_emr", 6), ("dbt_prod", 4), ("gx_checks", 8),
             ("reverse_etl", 2), ("api_exports", 3), ("backfill", 4), ("sftp_pull", 2)]
    head = ["pool", "slots", "description", "include_deferred"]
    rows = [[p, str(s), rng.choice(["nightly loaders and merges", "EMR step submission, one per cluster core group",
                                   "dbt builds against the prod target", "expectation checkpoints",
                                   "pushes to the CRM and the ad platforms", "manual backfill runs only",
                                   "file pulls from partner SFTP", "default pool"]), "False"] for p, s in pools]
    w = [max(len(h), *(len(r[k]) for r in rows)) for k, h in enumerate(head)]
    out = [" | ".join(h.ljust(x) for h, x in zip(head, w)), "=+=".join("=" * x for x in w)]
    out += [" | ".join(c.ljust(x) for c, x in zip(r, w)) for r in rows]
    return "\n".join(out)


def dag_config(c, planted=()):
    """A DAG's YAML config; c: codes (src, tables, tag, upstream, pool, owner, checkpoint, view)."""
    pl = {p.split(":")[0].strip(): p for p in planted}

    def key(k, default):
        return pl.get(k) or N(lambda: f"{k}: {default()}")

    sched = pl.get("schedule") or (f'schedule: "{c["schedule"]}"' if "schedule" in c else
                                   N(lambda: f'schedule: "{nz("schedule")}"'))
    lines = [
        "# Read by dags/lib/factory.py; the DAG id is this file's name.",
        "# Keys left out fall back to dags/config/_defaults.yaml. Change one key per PR.",
        f"owner: {c['owner']}",
        sched,
        f"start_date: 2025-{rng.randint(1, 9):02d}-01",
        "catchup: false",
        "max_active_runs: 1",
        f"max_active_tasks: {rng.choice([4, 6, 8, 12])}",
        f"tier: {c.get('tier', 'tier-1')}",
        "default_args:",
        "  " + key("retries", lambda: nz("retries")),
        "  " + key("retry_delay_minutes", lambda: nz("retry_delay_minutes")),
        f"  retry_exponential_backoff: {rng.choice(['true', 'false'])}",
        f"  max_retry_delay_minutes: {rng.choice([30, 60, 90])}",
        "  " + key("execution_timeout_minutes", lambda: nz("execution_timeout_minutes")),
        "  depends_on_past: false",
        "  email_on_failure: false",
        "  email_on_retry: false",
        key("sla_minutes", lambda: nz("sla_minutes")),
        f"pool: {c['pool']}",
        f"pool_slots: {rng.choice([1, 1, 2, 3])}",
        f"tags: [nightly, {c.get('tier', 'tier-1')}, {c['tag']}, dbt]",
        "",
        "alerts:",
        '  slack_channel: "#data-alerts"',
        f"  pagerduty_service: data-pipeline-{rng.choice(['p1', 'p2', 'p3'])}",
        "  notify_on_retry: false",
        "  notify_on_sla_miss: true",
        "  # the on-call rota gets paged only when the run misses its SLA, not on a task failure",
        "",
        "upstream:",
        f"  dag_id: {c['upstream']}",
        "  task_id: publish",
        f"  # the export job runs on the source system's clock; the delta is set in the DAG code",
        "",
        "sensor:",
        "  kind: s3_manifest",
        "  mode: reschedule",
        f"  poke_interval_seconds: {nz('poke_interval')}",
        f"  timeout_minutes: {rng.choice([60, 120, 180, 240, 360])}",
        "  soft_fail: false",
        "",
        "sources:",
    ]
    for t in c["tables"]:
        lines += [
            f"  - name: {t}",
            f"    s3_prefix: s3://fhp-lake-raw/{c['src']}/{t}/",
            "    format: parquet",
            "    partition_by: dt",
            f"    expected_files_min: {rng.randint(8, 240)}",
            "    load:",
            "      method: copy_then_merge",
            "      staging_schema: staging",
            "      target_schema: analytics",
            f"      merge_keys: [{', '.join(rng.sample(['id', 'line_no', 'source_file', 'batch_id', 'event_id'], 2))}]",
            "      error_table: staging.load_errors",
            f"      max_error_rows: {rng.choice([100, 500, 1000, 5000])}",
            "      # rows over the error budget fail the load task; the rest go to the error table",
        ]
    lines += [
        "",
        "dbt:",
        "  project: dbt",
        f'  selector: "tag:{c["tag"]}"',
        "  target: prod",
        "  full_refresh: false",
        "  vars:",
        f"    lookback_days: {rng.choice([1, 2, 3, 7])}",
        "    late_partition_policy: fail",
        "",
        "quality:",
        f"  gx_checkpoint: {c['checkpoint']}",
        "  block_on_failure: true",
        "  # a failed expectation stops publish; the tables stay on yesterday's partition",
        "",
        "publish:",
        f"  view: reporting.{c['view']}",
        "  tables:",
    ]
    lines += [f"    - analytics.{t}" for t in c.get("publish", [f"fct_{c['src']}_daily"])]
    lines += [
        "",
        "k8s:",
        "  namespace: airflow",
        f"  image: 381942077115.dkr.ecr.eu-west-1.amazonaws.com/etl-runner:2026.11.{rng.randint(1, 9)}",
        "  resources:",
        f'    requests: {{cpu: "{rng.choice([1, 2])}", memory: {rng.choice(["2Gi", "4Gi"])}}}',
        f"    limits: {{memory: {rng.choice(['4Gi', '8Gi', '12Gi'])}}}",
        "  node_selector:",
        "    workload: batch",
        "  tolerations:",
        "    - {key: dedicated, operator: Equal, value: batch, effect: NoSchedule}",
    ]
    return "\n".join(lines)


DAG_SRC = '''"""Nightly build: waits for the upstream export, lands the raw partition, runs dbt and the checks.

Built from the YAML file beside this module (see dags/lib/factory.py); the DAG id is the file name, so
nothing in here is specific to one feed. Sensor timing is set in code because it has to match the
upstream job's clock, not ours.
"""
from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pendulum
from airflow.decorators import dag, task
from airflow.models.baseoperator import chain
from airflow.providers.amazon.aws.sensors.s3 import S3KeySensor
from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator
from airflow.sensors.external_task import ExternalTaskSensor
from airflow.utils.task_group import TaskGroup
from airflow.utils.trigger_rule import TriggerRule

from lib.dbt import dbt_build
from lib.factory import default_args_from, load_config, on_failure_callback, sla_miss_callback
from lib.k8s import pod_resources, runner_image
from lib.quality import gx_checkpoint_task

HERE = Path(__file__)
CONFIG = load_config(HERE.with_suffix(".yaml"))
DAG_ID = HERE.stem
SOURCES = CONFIG["sources"]
RAW_BUCKET = "fhp-lake-raw"


@dag(
    dag_id=DAG_ID,
    schedule=CONFIG["schedule"],
    start_date=pendulum.parse(str(CONFIG["start_date"]), tz="UTC"),
    catchup=CONFIG.get("catchup", False),
    max_active_runs=CONFIG.get("max_active_runs", 1),
    max_active_tasks=CONFIG.get("max_active_tasks", 8),
    default_args=default_args_from(CONFIG),
    sla_miss_callback=sla_miss_callback,
    on_failure_callback=on_failure_callback,
    tags=CONFIG.get("tags", []),
    doc_md=__doc__,
)
def build():
    wait_upstream = ExternalTaskSensor(
        task_id="wait_for_upstream_export",
        external_dag_id=CONFIG["upstream"]["dag_id"],
        external_task_id=CONFIG["upstream"].get("task_id", "publish"),
        @DELTA@,
        mode="reschedule",
        poke_interval=@POKE1@,
        timeout=60 * @TO1@,
        allowed_states=["success"],
        failed_states=["failed", "upstream_failed"],
    )

    with TaskGroup(group_id="land") as land:
        for source in SOURCES:
            manifest = S3KeySensor(
                task_id=f"wait_for_{source['name']}_manifest",
                bucket_name=RAW_BUCKET,
                bucket_key=source["s3_prefix"].removeprefix(f"s3://{RAW_BUCKET}/") + "dt={{ ds }}/_manifest.json",
                mode="reschedule",
                @POKE2@,
                timeout=60 * @TO2@,
                soft_fail=False,
            )
            load = KubernetesPodOperator(
                task_id=f"load_{source['name']}",
                name=f"{DAG_ID}-load-{source['name']}".replace("_", "-"),
                namespace=CONFIG["k8s"]["namespace"],
                image=runner_image(CONFIG),
                cmds=["python", "-m", "loader"],
                arguments=[
                    "--source", source["name"],
                    "--prefix", source["s3_prefix"],
                    "--ds", "{{ ds }}",
                    "--method", source["load"]["method"],
                    "--max-error-rows", str(source["load"].get("max_error_rows", 1000)),
                    "--expected-files-min", str(source.get("expected_files_min", 1)),
                ],
                container_resources=pod_resources(CONFIG),
                get_logs=True,
                on_finish_action="delete_succeeded_pod",
                retries=CONFIG["default_args"].get("retries", 2),
            )
            manifest >> load

    transform = dbt_build(
        task_id="dbt_build",
        selector=CONFIG["dbt"]["selector"],
        target=CONFIG["dbt"].get("target", "prod"),
        vars={"run_date": "{{ ds }}", **CONFIG["dbt"].get("vars", {})},
        full_refresh=CONFIG["dbt"].get("full_refresh", False),
        pool="dbt_prod",
    )

    checks = gx_checkpoint_task(
        task_id="quality_gate",
        checkpoint=CONFIG["quality"]["gx_checkpoint"],
        block_on_failure=CONFIG["quality"].get("block_on_failure", True),
    )

    @task(trigger_rule=TriggerRule.ALL_SUCCESS)
    def publish(ds: str | None = None) -> dict:
        """Points the reporting view at the new partition and records the row counts of the run."""
        from lib.publish import flip_view, record_counts

        counts = record_counts(CONFIG["publish"]["tables"], ds)
        flip_view(CONFIG["publish"]["view"], ds)
        return counts

    @task(trigger_rule=TriggerRule.ONE_FAILED)
    def notify_failure(ds: str | None = None) -> None:
        """One message per failed run, with the failing task and a link to its log."""
        from lib.alerts import post_failure

        post_failure(DAG_ID, ds, channel=CONFIG["alerts"]["slack_channel"])

    chain(wait_upstream, land, transform, checks, publish())
    [land, transform, checks] >> notify_failure()


build()
'''


def dag_source(planted=()):
    pl = {p.split("=")[0]: p for p in planted}
    text = DAG_SRC
    text = text.replace("@DELTA@", pl.get("execution_delta") or
                        f"execution_delta=timedelta(hours={nz('delta_hours')})")
    text = text.replace("@POKE1@", str(nz("poke_interval")))
    text = text.replace("@POKE2@", pl.get("poke_interval") or f"poke_interval={nz('poke_interval')}")
    text = text.replace("@TO1@", str(rng.choice([60, 120, 180, 240])))
    text = text.replace("@TO2@", str(rng.choice([90, 120, 240, 360])))
    return numbered(text.rstrip("\n").split("\n"))


FACTORY_SRC = '''"""Builds DAG arguments from the per-DAG YAML files under dags/config/."""
from __future__ import annotations

import functools
import logging
from datetime import timedelta
from pathlib import Path
from typing import Any

import yaml
from airflow.models import Variable

log = logging.getLogger(__name__)

CONFIG_DIR = Path(__file__).resolve().parents[1] / "config"
DEFAULTS = CONFIG_DIR / "_defaults.yaml"
REQUIRED = ("owner", "schedule", "start_date", "default_args", "sources", "dbt", "quality", "publish", "k8s")


class ConfigError(ValueError):
    """A DAG config is missing a key or has a value of the wrong type."""


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


@functools.lru_cache(maxsize=None)
def _defaults() -> dict[str, Any]:
    with DEFAULTS.open() as fh:
        return yaml.safe_load(fh) or {}


def load_config(path: Path) -> dict[str, Any]:
    """The DAG's YAML merged over the defaults; raises ConfigError on a missing key."""
    with path.open() as fh:
        own = yaml.safe_load(fh) or {}
    cfg = _merge(_defaults(), own)
    missing = [k for k in REQUIRED if k not in cfg]
    if missing:
        raise ConfigError(f"{path.name}: missing {', '.join(missing)}")
    overrides = Variable.get(f"cfg_override__{path.stem}", default_var=None, deserialize_json=True)
    if overrides:
        log.warning("%s: applying %d override(s) from Airflow Variables", path.stem, len(overrides))
        cfg = _merge(cfg, overrides)
    return cfg


def default_args_from(cfg: dict[str, Any]) -> dict[str, Any]:
    da = cfg["default_args"]
    return {
        "owner": cfg["owner"],
        "retries": int(da.get("retries", 2)),
        "retry_delay": timedelta(minutes=int(da.get("retry_delay_minutes", 10))),
        "retry_exponential_backoff": bool(da.get("retry_exponential_backoff", False)),
        "max_retry_delay": timedelta(minutes=int(da.get("max_retry_delay_minutes", 60))),
        "execution_timeout": timedelta(minutes=int(da.get("execution_timeout_minutes", 60))),
        "depends_on_past": bool(da.get("depends_on_past", False)),
        "email_on_failure": bool(da.get("email_on_failure", False)),
        "email_on_retry": bool(da.get("email_on_retry", False)),
        "sla": timedelta(minutes=int(cfg["sla_minutes"])) if "sla_minutes" in cfg else None,
        "pool": cfg.get("pool", "default_pool"),
        "pool_slots": int(cfg.get("pool_slots", 1)),
    }


def on_failure_callback(context: dict[str, Any]) -> None:
    ti = context["task_instance"]
    log.error("task %s of run %s failed after %s tries", ti.task_id, ti.run_id, ti.try_number)
    from lib.alerts import post_failure

    post_failure(ti.dag_id, context.get("ds"), task_id=ti.task_id, log_url=ti.log_url)


def sla_miss_callback(dag, task_list, blocking_task_list, slas, blocking_tis) -> None:
    from lib.alerts import page_sla_miss

    log.warning("SLA miss on %s: %s", dag.dag_id, task_list)
    page_sla_miss(dag.dag_id, [t.task_id for t in blocking_tis])
'''


def tree_output():
    lines = [".", "|-- dags"]
    for d in sorted(DAGS):
        lines.append(f"|   |-- {d}.py")
    lines += ["|   |-- config", "|   |   |-- _defaults.yaml"]
    for d in sorted(DAGS):
        lines.append(f"|   |   |-- {d}.yaml")
    lines += ["|   `-- lib", "|       |-- alerts.py", "|       |-- dbt.py", "|       |-- factory.py", "|       |-- k8s.py",
              "|       |-- publish.py", "|       |-- quality.py", "|       |-- attribution", "|       |-- email",
              "|       `-- loaders",
              "|-- dbt", "|   |-- dbt_project.yml", "|   |-- selectors.yml", "|   |-- macros",
              "|   |-- models", "|   |   |-- staging", "|   |   |-- intermediate", "|   |   `-- marts",
              "|   |-- snapshots", "|   `-- tests", "|-- dbt_books", "|   |-- dbt_project.yml", "|   |-- profiles.yml",
              "|   `-- models", "|-- emr", "|   |-- clusters", "|   `-- steps", "|-- spark", "|   |-- jobs",
              "|   `-- tests", "|-- connect", "|   |-- sinks", "|   `-- sources", "|-- gx", "|   |-- checkpoints",
              "|   |-- expectations", "|   `-- uncommitted", "|-- infra", "|   |-- modules", "|   `-- stacks",
              "|       |-- airflow", "|       |-- dw-cluster", "|       |-- emr", "|       |-- kafka-connect",
              "|       |-- lake-retention", "|       `-- networking", "|-- tests", "|   |-- dags", "|   `-- loaders",
              "|-- tools", "|   |-- backfill.py", "|   |-- csvcheck", "|   |-- lagctl", "|   `-- spark_summary.py",
              "|-- Makefile", "|-- pyproject.toml", "`-- README.md", "",
              f"{len(DAGS) + 28} directories, {2 * len(DAGS) + 31} files"]
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# Loader pods, S3, git.

def pod_log(n, src, tables, planted=None, abort=False):
    t = clock(2, rng.randint(5, 50), rng.uniform(0, 59))
    out = []
    job = f"ld-{hexs(10)}"

    def line(level, logger, msg):
        nonlocal t
        t += datetime.timedelta(seconds=rng.uniform(0.05, 9))
        text = f"{iso(t)} {level:<5} {logger:<16} {msg}  job={job}"
        out.append(text if planted and planted in msg else N(lambda: text))

    line("INFO", "loader.main", f"loader 3.14.2 starting: source={tables[0]} ds={DS} method=copy_then_merge")
    line("INFO", "loader.main", f"running on pod node {rng.choice(HOSTS)}; partition dt={DS}")
    line("INFO", "loader.manifest", f"reading manifest s3://fhp-lake-raw/{src}/{tables[0]}/dt={DS}/_manifest.json")
    if abort:
        # The partition check runs before anything is copied: it walks the manifest's entries.
        for _ in range(n):
            k = rng.random()
            part = rng.randint(0, 299)
            if k < 0.4:
                line("DEBUG", "loader.s3", f"HEAD s3://fhp-lake-raw/{src}/{tables[0]}/dt={DS}/part-{part:05d}-{hexs(8)}"
                                           f".snappy.parquet 200 {rng.randint(8, 300)}ms, no error")
            elif k < 0.6:
                line("WARN", "loader.manifest", f"manifest entry part-{part:05d} listed but not in the partition yet "
                                                f"(HEAD 404); table staging.{tables[0]} not touched")
            elif k < 0.75:
                line("INFO", "loader.schema", f"part-{part:05d}: schema matches table staging.{tables[0]} "
                                              f"({rng.randint(18, 30)} columns), rows={rng.randint(2000, 90000)}, errors=0")
            elif k < 0.88:
                line("INFO", "loader.progress", f"heartbeat: run {DS} step=check partition files checked="
                                                f"{rng.randint(1, 240)}, errors 0")
            else:
                line("WARN", "db.conn", f"retrying catalog lookup after error: SSL SYSCALL error: EOF detected "
                                        f"(attempt {rng.randint(2, 4)}/5)")
        line("ERROR", "loader.manifest", planted + f" (manifest written {rng.randint(2, 40)} min before the run)")
        line("ERROR", "loader.main", "refusing to load a partial partition: late_partition_policy=fail")
        line("INFO", "loader.cleanup", f"dropping table staging.{tables[0]}_{hexs(6)} (nothing copied, 0 rows)")
    for i in range(0 if abort else n):
        k = rng.random()
        if k < 0.35:
            line("INFO", "loader.copy", f"partition dt={DS} part={rng.randint(0, 299):05d} rows={rng.randint(2000, 90000)} "
                                        f"bytes={rng.randint(2, 180)}.{rng.randint(0, 9)}MiB elapsed={rng.uniform(0.4, 9):.1f}s")
        elif k < 0.45:
            line("INFO", "loader.copy", f"COPY into table staging.{rng.choice(tables)}_{hexs(6)} from manifest: rows_loaded="
                                        f"{rng.randint(20000, 900000)} error rows={rng.randint(0, 40)}")
        elif k < 0.55:
            line("WARN", "loader.schema", f"column {rng.choice(COLUMNS)}: {rng.randint(1, 400)} rows null, default applied "
                                          f"(table staging.{rng.choice(tables)})")
        elif k < 0.63:
            line("INFO", "loader.merge", f"MERGE partition dt={DS} into analytics table: inserted={rng.randint(0, 90000)} "
                                         f"updated={rng.randint(0, 9000)} deleted=0 errors=0 in {rng.uniform(1, 60):.1f}s")
        elif k < 0.70:
            line("WARN", "db.conn", f"retrying statement after error: {rng.choice(['SSL SYSCALL error: EOF detected', 'could not receive data from server: Connection reset by peer', 'canceling statement due to statement timeout'])} "
                                    f"(attempt {rng.randint(2, 4)}/5)")
        elif k < 0.78:
            line("INFO", "loader.progress", f"heartbeat: run {DS} step={rng.choice(['copy', 'merge', 'verify'])} "
                                            f"progress={rng.randint(1, 99)}% partition files done={rng.randint(1, 240)}, "
                                            f"table staging.{rng.choice(tables)}, rows so far {rng.randint(10 ** 4, 10 ** 6)}, "
                                            f"errors 0")
        elif k < 0.85:
            line("INFO", "loader.verify", f"row count check part={rng.randint(0, 299):05d}: manifest rows="
                                          f"{rng.randint(2000, 90000)}, staging table rows match, errors=0")
        elif k < 0.92:
            line("DEBUG", "loader.s3", f"GET s3://fhp-lake-raw/{src}/{rng.choice(tables)}/dt={DS}/part-{rng.randint(0, 299):05d}-"
                                       f"{hexs(8)}.snappy.parquet 200 {rng.randint(40, 900)}ms")
        else:
            line("ERROR", "loader.rows", f"error rows written to s3://fhp-lake-raw/_errors/{src}/dt={DS}/"
                                         f"part-{rng.randint(0, 299):05d}.jsonl: {rng.randint(1, 30)} rows (type mismatch)")
    if abort:
        line("ERROR", "loader.main", "run failed: partition check raised PartialPartitionError; exit code 3")
        line("INFO", "loader.main", "job summary: tables touched 0, rows merged 0, error rows 0, duration "
                                    f"{rng.randint(100, 900)}s")
    else:
        line("INFO", "loader.main", f"job summary: tables touched {len(tables)}, rows merged {rng.randint(10 ** 5, 10 ** 7)}, "
                                    f"error rows {rng.randint(0, 90)}, duration {rng.randint(100, 2900)}s")
    return "\n".join(out)


def s3_ls(n, prefix_dirs=(), total=None, written=None):
    """`aws s3 ls ... --human-readable --summarize | tail`: object lines, then the summary."""
    out = [f"                           PRE {d}/" for d in prefix_dirs]
    t = written or clock(rng.randint(1, 4), rng.randint(0, 59))
    size = 0.0
    for _ in range(n):
        t += datetime.timedelta(seconds=rng.randint(0, 40))
        b = rng.choice([rng.uniform(0.2, 4) * 1024 ** 2, rng.uniform(4, 200) * 1024 ** 2, rng.uniform(1, 90) * 1024])
        size += b
        out.append(N(lambda: f"{t:%Y-%m-%d %H:%M:%S} {human_size(b):>10} part-{rng.randint(0, 9999):05d}-{hexs(8)}-"
                             f"{hexs(4)}-{hexs(4)}-{hexs(4)}-{hexs(12)}.c000.snappy.parquet"))
    count = int(total.split(": ")[1]) if total else n + rng.randint(0, 2)
    out += ["", total or N(lambda: f"Total Objects: {count}"),
            N(lambda: f"   Total Size: {human_size(size * count / max(n, 1))}")]
    return "\n".join(out)


SUBJECTS_GIT = [
    "dbt: incremental predicate on ds for the big facts", "factory: read overrides from Variables",
    "sensor: reschedule mode everywhere", "config: move alerts to #data-alerts", "loader: bump runner image",
    "ci: run dag integrity tests on every push", "dbt: add not_null tests on keys", "k8s: batch node selector",
    "publish: record row counts per table", "quality: block publish on failed checkpoint",
    "loader: error table for rejected rows", "dbt: split staging per source system", "config: pool slots for merges",
    "alerts: link the task log in the failure message", "dbt: late_partition_policy var", "chore: ruff 0.8",
    "loader: retry statement on SSL EOF", "docs: runbook for partial partitions", "config: tier tags",
    "dbt: snapshot strategy check -> timestamp", "k8s: raise memory limit for merges", "ci: sqlfluff on changed models",
    "fix: publish should not flip the view on an empty run", "refactor: one TaskGroup per source",
]


def git_log(n, planted=None, planted_subject=None, planted_at=None, day=None):
    day = day or TODAY
    rows = []
    d = day
    for i in range(n):
        d -= datetime.timedelta(days=rng.randint(0, 4))
        if planted and i == planted_at:
            rows.append(f"{planted} {d.isoformat()} {rng.choice(AUTHORS)}  {planted_subject}")
            continue
        rows.append(N(lambda: f"{hexs(7)} {d.isoformat()} {rng.choice(AUTHORS)}  {rng.choice(SUBJECTS_GIT)}"
                              + (f" (#{rng.randint(2400, 3400)})" if rng.random() < 0.4 else "")))
    return "\n".join(rows)


def dag_integrity(n_dags=None):
    names = sorted(DAGS)
    out = ["============================= test session starts ==============================",
           "platform linux -- Python 3.11.10, pytest-8.3.3, pluggy-1.5.0 -- /opt/airflow/.venv/bin/python",
           "rootdir: /src", "configfile: pyproject.toml", "plugins: anyio-4.6.2, mock-3.14.0",
           f"collected {len(names) * 2} items", ""]
    k = 0
    for test in ["test_dag_imports", "test_config_has_required_keys"]:
        for d in names:
            k += 1
            out.append(f"tests/dags/test_integrity.py::{test}[{d}] PASSED".ljust(74) + f"[{100 * k // (len(names) * 2):3d}%]")
    out += ["", f"============================= {len(names) * 2} passed in {rng.uniform(6, 19):.2f}s =============================="]
    return "\n".join(out)


def patch_result(path, diff, checks="dags"):
    plus = sum(1 for l in diff.split("\n") if l.startswith("+") and not l.startswith("+++"))
    minus = sum(1 for l in diff.split("\n") if l.startswith("-") and not l.startswith("---"))
    out = [f"Applied patch to {path}: {diff.count(chr(10) + '@@')} hunk(s), +{plus} -{minus}", "", diff, ""]
    out.append("pre-commit run --files " + path)
    for h in ["trim trailing whitespace", "fix end of files", "check yaml", "check for added large files", "ruff",
              "ruff-format", "sqlfluff-lint", "yamllint"]:
        out.append(h.ljust(72, ".") + rng.choice(["Passed", "Passed", "(no files to check)Skipped"]))
    out.append("")
    if checks == "dags":
        out.append(dag_integrity())
    else:
        out.append(dbt_parse())
    return "\n".join(out)


def dbt_parse():
    t = clock(rng.randint(9, 17), rng.randint(0, 59))
    out = [f"{t:%H:%M:%S}  Running with dbt=1.8.7", f"{t:%H:%M:%S}  Registered adapter: redshift=1.8.1",
           f"{t:%H:%M:%S}  Performance info: /src/dbt/target/perf_info.json",
           f"{t:%H:%M:%S}  Found 412 models, 1604 data tests, 96 sources, 3 exposures, 1021 macros, 14 snapshots",
           "", "sqlfluff lint (dialect redshift, templater dbt):"]
    for _ in range(rng.randint(8, 14)):
        out.append(N(lambda: f"== [models/{rng.choice(['staging', 'intermediate', 'marts'])}/{rng.choice(TABLES)}.sql] PASS"))
    out.append("All Finished!")
    return "\n".join(out)


# ---------------------------------------------------------------------------
# Spark on EMR.

CALL_SITES = ["parquet at writer.py:41", "count at job.py:88", "sortWithinPartitions at steps.py:133",
              "groupBy at steps.py:97", "join at steps.py:152", "repartition at writer.py:29",
              "collect at checks.py:54", "save at writer.py:63", "mapPartitions at udfs.py:210",
              "showString at NativeMethodAccessorImpl.java:0", "withColumn at steps.py:118",
              "dropDuplicates at steps.py:76", "window at steps.py:171", "insertInto at writer.py:87"]


def failed_line(slow):
    lost, fetch, killed = (rng.randint(100, 1200), rng.randint(10, 200), rng.randint(0, 30)) if slow else (0, 0, 0)
    return f"  Failed tasks: {lost + fetch + killed} (ExecutorLostFailure {lost}, FetchFailed {fetch}, TaskKilled {killed})"


def spark_summary(app, planted=None, slow=True):
    start = clock(1, rng.randint(0, 40), rng.uniform(0, 59))
    dur = datetime.timedelta(hours=rng.randint(3, 5) if slow else 0, minutes=rng.randint(5, 59), seconds=rng.randint(0, 59))
    out = [f"Application: {app}   attempt 1   state: {'FINISHED' if slow else 'FINISHED'}",
           f"Submitted:   {start:%Y-%m-%d %H:%M:%S} UTC   Finished: {start + dur:%Y-%m-%d %H:%M:%S} UTC   Duration: {dur}",
           f"Spark:       3.5.1-amzn-{rng.randint(0, 2)}   EMR release: emr-7.2.0   Deploy mode: cluster   Queue: {rng.choice(['default', 'batch'])}",
           f"Executors:   peak {rng.randint(40, 120)} active, {rng.randint(100, 500)} added, {rng.randint(60, 400)} removed "
           f"(dynamic allocation), {rng.randint(0, 45) if slow else 0} lost",
           f"Config:      spark.executor.memory={rng.choice(['12g', '18g', '24g'])} spark.executor.cores={rng.choice([4, 5])} "
           f"spark.sql.adaptive.enabled={'false' if slow else 'true'}",
           "", "Stage  Att  Description                              Tasks  Failed  Duration   Input      Shuffle read  Shuffle write  Spill (disk)"]
    stages = sorted(rng.sample(range(0, 40), rng.randint(14, 22)))
    skewed = stages[-3]
    for k, s in enumerate(stages):
        tasks = rng.choice([1, 200, 400, 800, 2000, 3600, 4000])
        long = slow and s == skewed
        minutes = rng.randint(70, 170) if long else rng.randint(0, 25)
        read_in = rng.uniform(20, 400) * 1024 ** 3 if k < 4 else 0
        spill_s = (rng.uniform(10, 30) if long else rng.uniform(0, 3) if slow and rng.random() < 0.3 else 0) * 1024 ** 3
        out.append(N(lambda: f"{s:>5}  {rng.choice([0, 0, 0, 1]) if slow else 0:>3}  {rng.choice(CALL_SITES):<40} {tasks:>5}  "
                             f"{rng.randint(1, 90) if slow and (long or rng.random() < 0.2) else 0:>6}  "
                             f"{minutes // 60}h {minutes % 60:02d}m   {human_size(read_in):>9}  "
                             f"{human_size(rng.uniform(0, 120) * 1024 ** 3):>12}  {human_size(rng.uniform(0, 120) * 1024 ** 3):>13}  "
                             f"{human_size(spill_s):>12}"))
    spill = planted or N(lambda: f"Total shuffle spill (disk): {rng.uniform(0.1, 30) if slow else 0.0:.1f} GiB")
    out += ["", "Totals",
            f"  Input read: {human_size(rng.uniform(0.3, 2.5) * 1024 ** 4)}",
            f"  Shuffle read: {human_size(rng.uniform(0.2, 3) * 1024 ** 4)}",
            f"  Shuffle write: {human_size(rng.uniform(0.2, 3) * 1024 ** 4)}",
            N(lambda: f"  Total shuffle spill (memory): {rng.uniform(10, 600) if slow else rng.uniform(0, 5):.1f} GiB"),
            "  " + spill,
            failed_line(slow),
            f"  GC time: {rng.uniform(3, 25):.1f}% of executor time",
            N(lambda: f"  Peak executor memory (on-heap): {rng.uniform(6, 24):.1f} GiB"),
            f"  Output: {rng.randint(2000, 9000) if slow else rng.randint(24, 60)} files written by the final stage",
            "", "Jobs"]
    for j in range(rng.randint(6, 10)):
        out.append(N(lambda: f"  job {j}: {rng.choice(CALL_SITES)}, {rng.randint(1, 4)} stages, {rng.randint(1, 4000)} tasks, "
                             f"{rng.randint(0, 2)}h {rng.randint(0, 59):02d}m, "
                             f"{'failed stages ' + str(rng.randint(1, 3)) if slow and rng.random() < 0.3 else 'no failed stages'}"))
    out += ["", f"Top skewed tasks (stage {skewed})"]
    for _ in range(rng.randint(5, 9)):
        out.append(N(lambda: f"  partition {rng.randint(0, 3599)}: {human_size(rng.uniform(1, 40) * 1024 ** 3)} shuffle read, "
                             f"{rng.randint(0, 1)}h {rng.randint(0, 59)}m, executor {rng.randint(1, 400)}"
                             f"{' (lost)' if slow and rng.random() < 0.4 else ''}"))
    out += ["", "Warnings"]
    if slow:
        out += [f"  - stage {skewed}: median task {rng.randint(20, 90)}s, max {rng.randint(1, 2)}h {rng.randint(0, 59)}m: "
                f"a skewed key lands most rows in one partition",
                f"  - executors lost: Container killed by YARN for exceeding physical memory limits",
                f"  - adaptive query execution is off: skew join and partition coalescing are not applied",
                f"  - the final stage wrote one file per shuffle partition per output partition"]
    else:
        out += ["  - none"]
    return "\n".join(out)


def emr_config(planted=None):
    props = {
        "spark.dynamicAllocation.enabled": "true",
        "spark.dynamicAllocation.minExecutors": str(rng.choice([2, 4, 8])),
        "spark.dynamicAllocation.maxExecutors": str(rng.choice([60, 96, 120])),
        "spark.dynamicAllocation.executorIdleTimeout": "120s",
        "spark.sql.shuffle.partitions": "@SHUFFLE@",
        "spark.shuffle.service.enabled": "true",
        "spark.executor.memory": rng.choice(["12g", "18g", "24g"]),
        "spark.executor.cores": str(rng.choice([4, 5])),
        "spark.executor.memoryOverhead": rng.choice(["2g", "3g", "4g"]),
        "spark.driver.memory": rng.choice(["8g", "12g"]),
        "spark.driver.maxResultSize": "4g",
        "spark.sql.adaptive.enabled": "false",
        "spark.sql.adaptive.coalescePartitions.enabled": "false",
        "spark.sql.adaptive.skewJoin.enabled": "false",
        "spark.sql.autoBroadcastJoinThreshold": str(rng.choice([10485760, 52428800, -1])),
        "spark.sql.files.maxPartitionBytes": "268435456",
        "spark.sql.files.maxRecordsPerFile": "0",
        "spark.sql.sources.partitionOverwriteMode": "dynamic",
        "spark.sql.parquet.compression.codec": "snappy",
        "spark.sql.parquet.mergeSchema": "false",
        "spark.sql.hive.convertMetastoreParquet": "true",
        "spark.serializer": "org.apache.spark.serializer.KryoSerializer",
        "spark.kryoserializer.buffer.max": "512m",
        "spark.network.timeout": "600s",
        "spark.executor.heartbeatInterval": "30s",
        "spark.task.maxFailures": str(rng.choice([4, 8])),
        "spark.stage.maxConsecutiveAttempts": "8",
        "spark.speculation": "false",
        "spark.hadoop.fs.s3.maxRetries": "20",
        "spark.hadoop.mapreduce.fileoutputcommitter.algorithm.version": "2",
        "spark.sql.catalog.glue_catalog": "org.apache.iceberg.spark.SparkCatalog",
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": "s3://fhp-emr-logs/spark-events/",
        "spark.yarn.maxAppAttempts": "1",
    }
    out = json.dumps([
        {"Classification": "spark-defaults", "Properties": props},
        {"Classification": "spark-env", "Configurations": [
            {"Classification": "export", "Properties": {"PYSPARK_PYTHON": "/usr/bin/python3.11",
                                                       "SPARK_JOB_VENV": "/opt/venvs/jobs-2026.11"}}]},
        {"Classification": "yarn-site", "Properties": {
            "yarn.nodemanager.vmem-check-enabled": "false",
            "yarn.nodemanager.pmem-check-enabled": "true",
            "yarn.scheduler.maximum-allocation-mb": str(rng.choice([122880, 245760])),
            "yarn.log-aggregation.retain-seconds": "604800"}},
        {"Classification": "capacity-scheduler", "Properties": {
            "yarn.scheduler.capacity.resource-calculator":
                "org.apache.hadoop.yarn.util.resource.DominantResourceCalculator"}},
    ], indent=2)
    shuffle = planted or N(lambda: f'"spark.sql.shuffle.partitions": "{nz("shuffle")}"')
    return out.replace('"spark.sql.shuffle.partitions": "@SHUFFLE@"', shuffle)


def yarn_log(n):
    t = clock(3, rng.randint(0, 59), rng.uniform(0, 59))
    out = []
    for _ in range(n):
        t += datetime.timedelta(seconds=rng.uniform(0.1, 30))
        ts = t.strftime("%y/%m/%d %H:%M:%S")
        ex, host, stage, tid = rng.randint(1, 400), rng.choice(HOSTS), rng.randint(10, 22), rng.randint(10000, 99999)
        k = rng.random()
        if k < 0.22:
            used = rng.uniform(20.1, 24)
            out.append(N(lambda: f"{ts} WARN TaskSetManager: Lost task {rng.randint(0, 3599)}.{rng.randint(0, 3)} in stage "
                                 f"{stage}.0 (TID {tid}) ({host} executor {ex}): ExecutorLostFailure (executor {ex} exited "
                                 f"caused by one of the running tasks) Reason: Container killed by YARN for exceeding "
                                 f"physical memory limits. {used:.1f} GB of 20 GB physical memory used. Consider boosting "
                                 f"spark.executor.memoryOverhead."))
        elif k < 0.40:
            out.append(N(lambda: f"{ts} ERROR YarnScheduler: Lost executor {ex} on {host}: Container from a bad node: "
                                 f"container_1764561203411_0417_01_{rng.randint(100, 999):06d} on host: {host}. Exit status: 137."))
        elif k < 0.48:
            out.append(N(lambda: f"{ts} INFO DAGScheduler: Resubmitting ShuffleMapStage {stage} ({rng.choice(CALL_SITES)}) "
                                 f"and ResultStage {stage + 1} due to fetch failure"))
        elif k < 0.58:
            out.append(N(lambda: f"{ts} WARN TaskSetManager: Lost task {rng.randint(0, 3599)}.0 in stage {stage}.1 (TID {tid}) "
                                 f"({host} executor {ex}): FetchFailed(BlockManagerId({rng.randint(1, 400)}, {host}, 7337, None), "
                                 f"shuffleId={rng.randint(1, 9)}, mapIndex={rng.randint(0, 3599)}, mapId={tid}, "
                                 f"reduceId={rng.randint(0, 3599)}, message=org.apache.spark.shuffle.FetchFailedException: "
                                 f"Connection reset by peer"))
        elif k < 0.70:
            out.append(N(lambda: f"{ts} INFO TaskSetManager: Finished task {rng.randint(0, 3599)}.0 in stage {stage}.0 (TID {tid}) "
                                 f"in {rng.randint(900, 900000)} ms on {host} (executor {ex}) ({rng.randint(1, 3599)}/3600)"))
        elif k < 0.80:
            out.append(N(lambda: f"{ts} INFO ExecutorAllocationManager: Requesting {rng.randint(1, 16)} new executors because "
                                 f"tasks are backlogged (new desired total will be {rng.randint(40, 120)} for resource profile id: 0)"))
        elif k < 0.88:
            out.append(N(lambda: f"{ts} WARN BlockManagerMasterEndpoint: No more replicas available for rdd_{rng.randint(10, 99)}_"
                                 f"{rng.randint(0, 3599)} !"))
        elif k < 0.9:
            j = rng.randint(3, 30)
            out.append(N(lambda: rng.choice([
                f"{ts} INFO DAGScheduler: Got job {j} ({rng.choice(CALL_SITES)}) with {rng.choice([200, 3600, 4000])} "
                f"output partitions",
                f"{ts} INFO DAGScheduler: Job {j} finished: {rng.choice(CALL_SITES)}, took {rng.uniform(1, 4000):.6f} s",
                f"{ts} ERROR FileFormatWriter: Aborting job {hexs(8)}-{hexs(4)}-{hexs(4)}-{hexs(4)}-{hexs(12)}.",
                f"{ts} INFO DAGScheduler: Job {j} failed: {rng.choice(CALL_SITES)}, took {rng.uniform(1, 4000):.6f} s; "
                f"error: stage {stage} has failed the maximum allowable number of times",
                f"{ts} WARN TaskSetManager: Stage {stage} contains a task of very large size; partition {rng.randint(0, 3599)} "
                f"holds {rng.randint(2, 40)} GB of shuffle data"])))
        elif k < 0.92:
            out.append(N(lambda: f"{ts} ERROR Executor: Exception in task {rng.randint(0, 3599)}.0 in stage {stage}.0 "
                                 f"(TID {tid}): error writing partition {rng.randint(0, 3599)} of table curated output: "
                                 f"java.lang.OutOfMemoryError: Java heap space"))
        elif k < 0.95:
            out.append(N(lambda: f"{ts} ERROR TransportRequestHandler: Error sending result ChunkFetchSuccess[streamChunkId="
                                 f"StreamChunkId[streamId={rng.randint(10 ** 11, 10 ** 12)},chunkIndex={rng.randint(0, 40)}]] to "
                                 f"/{host.split('.')[0][3:].replace('-', '.')}:{rng.randint(30000, 60000)}; closing connection"))
        else:
            out.append(N(lambda: f"{ts} INFO MemoryStore: Block broadcast_{rng.randint(10, 99)} stored as values in memory "
                                 f"(estimated size {rng.uniform(1, 400):.1f} MiB, free {rng.uniform(1, 9):.1f} GiB)"))
    return "\n".join(out)


def emr_steps(n, cluster):
    steps = []
    names = ["web-sessionize", "attribution-paths", "ltv-features", "basket-affinity", "search-terms-rollup",
             "forecast-features", "review-sentiment", "store-traffic-rollup"]
    t = clock(0, 30)
    for _ in range(n):
        t += datetime.timedelta(minutes=rng.randint(2, 40))
        name = rng.choice(names)
        state = rng.choices(["COMPLETED", "FAILED", "CANCELLED", "RUNNING", "PENDING"], [10, 2, 1, 1, 1])[0]
        st = {"State": state, "StateChangeReason": {},
              "Timeline": {"CreationDateTime": t.isoformat() + "+00:00", "StartDateTime": t.isoformat() + "+00:00"}}
        if state in ("COMPLETED", "FAILED", "CANCELLED"):
            st["Timeline"]["EndDateTime"] = (t + datetime.timedelta(minutes=rng.randint(4, 280))).isoformat() + "+00:00"
        if state == "FAILED":
            st["FailureDetails"] = {"Reason": "Unknown Error.", "Message": "Exception in thread \"main\" org.apache.spark."
                                    "SparkException: Job aborted due to stage failure",
                                    "LogFile": f"s3://fhp-emr-logs/{cluster}/steps/s-{hexs(12).upper()}/stderr.gz"}
        steps.append({"Id": f"s-{hexs(13).upper()}", "Name": name, "Config": {
            "Jar": "command-runner.jar", "Properties": {},
            "Args": ["spark-submit", "--deploy-mode", "cluster", "--conf", "spark.yarn.submit.waitAppCompletion=true",
                     f"s3://fhp-emr-artifacts/jobs/2026.11.{rng.randint(1, 9)}/run_job.py", "--job", name, "--ds", DS]},
            "ActionOnFailure": "CONTINUE", "Status": st})
    return json.dumps({"Steps": steps[::-1]}, indent=2)


# ---------------------------------------------------------------------------
# Great Expectations.

EXPECTATIONS = [
    ("expect_column_values_to_not_be_null", lambda c: {"column": c}),
    ("expect_column_values_to_be_unique", lambda c: {"column": c}),
    ("expect_column_values_to_be_between", lambda c: {"column": c, "min_value": 0, "max_value": rng.choice([10000, 500000, None]),
                                                       "strict_min": False}),
    ("expect_column_values_to_be_in_set", lambda c: {"column": c, "value_set": ["A", "B", "C", "X"]}),
    ("expect_table_row_count_to_be_between", lambda c: {"min_value": rng.randint(1000, 100000), "max_value": None}),
    ("expect_column_values_to_match_regex", lambda c: {"column": c, "regex": "^[A-Z0-9]{6,14}$"}),
    ("expect_column_pair_values_a_to_be_greater_than_b", lambda c: {"column_A": "updated_at", "column_B": "created_at",
                                                                     "or_equal": True}),
]


def ge_result(suite, cols, planted_count=None, planted_pct=None, n=7, bad_kind="min", bad_col=None):
    """A validation result file, as the checkpoint stores it. The failing expectation is a lower bound on
    `bad_col` (bad_kind "min") or the ordering of two timestamp columns (bad_kind "pair")."""
    elements = rng.randint(120000, 900000)
    results = []
    fail_at = rng.randint(1, n - 2)
    for i in range(n):
        et, kw = rng.choice(EXPECTATIONS)
        col = rng.choice(cols)
        bad = i == fail_at
        cnt = 0 if not bad else rng.randint(50, 900)
        if bad and planted_count:
            cnt = int(re.search(r"\d+", planted_count).group())
        if bad and planted_pct:
            cnt = round(float(re.search(r"[\d.]+,$", planted_pct).group()[:-1]) * elements / 100)
        if bad and bad_kind == "pair":
            sample = []
            for _ in range(min(cnt, 6)):
                a = clock(rng.randint(0, 23), rng.randint(0, 59), rng.uniform(0, 59)) - datetime.timedelta(days=1)
                sample.append([a.strftime("%Y-%m-%d %H:%M:%S"),
                               (a + datetime.timedelta(minutes=rng.randint(5, 600))).strftime("%Y-%m-%d %H:%M:%S")])
        else:
            sample = [rng.randint(-90, -1) for _ in range(min(cnt, 8))]
        res = {"element_count": elements, "unexpected_count": cnt, "unexpected_percent": round(100 * cnt / elements, 6),
               "partial_unexpected_list": sample,
               "missing_count": rng.randint(0, 40), "missing_percent": round(rng.uniform(0, 0.01), 6),
               "unexpected_percent_total": round(100 * cnt / elements, 6),
               "unexpected_percent_nonmissing": round(100 * cnt / elements, 6)}
        if bad and bad_kind == "pair":
            et, kw = "expect_column_pair_values_a_to_be_greater_than_b", (
                lambda c: {"column_A": "received_at", "column_B": "scan_ts", "or_equal": True})
        elif bad:
            col = bad_col or col
            et, kw = "expect_column_values_to_be_between", (lambda c: {"column": c, "min_value": 0, "max_value": None,
                                                                       "strict_min": False})
        elif et == "expect_table_row_count_to_be_between":
            res = {"observed_value": elements}
        if bad and planted_pct:
            res["unexpected_percent"] = float(re.search(r"[\d.]+,$", planted_pct).group()[:-1])
        results.append({"success": not bad, "expectation_config": {"expectation_type": et, "kwargs": dict(
            kw(col), batch_id=f"{suite.split('.')[0]}-{hexs(12)}"), "meta": {}}, "result": res,
            "exception_info": {"raised_exception": False, "exception_traceback": None, "exception_message": None}})
    doc = {"success": not any(not r["success"] for r in results),
           "statistics": {"evaluated_expectations": n, "successful_expectations": sum(r["success"] for r in results),
                          "unsuccessful_expectations": sum(not r["success"] for r in results),
                          "success_percent": round(100 * sum(r["success"] for r in results) / n, 2)},
           "results": results,
           "meta": {"great_expectations_version": "0.18.19", "expectation_suite_name": suite,
                    "run_id": {"run_name": f"nightly-{DS}", "run_time": iso(clock(4, rng.randint(0, 59)))},
                    "batch_spec": {"data_asset_name": suite.split(".")[0], "batch_data": "SqlAlchemyBatchData",
                                   "query": "SELECT * FROM <reporting view> WHERE ds = '" + DS + "'"},
                    "validation_time": iso(clock(4, rng.randint(0, 59))), "checkpoint_name": "nightly_gate"}}
    text = json.dumps(doc, indent=2)
    for planted in (planted_count, planted_pct):
        assert not planted or text.count(planted) == 1, planted
    return text


def ge_checkpoint_cli(suites, failing):
    out = ["Using v3 (Batch Request) API", ""]
    for s in suites:
        n = rng.randint(20, 60)
        out.append(f"Calculating Metrics: 100%|##########| {n}/{n} [00:{rng.randint(2, 59):02d}<00:00, "
                   f"{rng.uniform(1, 20):.2f}it/s]")
    out += ["Validation failed!" if failing else "Validation succeeded!", "",
            "Suite Name                                   Status     Expectations met"]
    for s in suites:
        n = rng.randint(8, 50)
        bad = s in failing
        m = n - rng.randint(1, 3) if bad else n
        out.append(f"- {s:<42} {'x Failed' if bad else 'v Passed':<10} {m} of {n} ({100 * m / n:.2f} %)")
    out += ["", f"Data docs: s3://fhp-gx-docs/index.html#validations/{DS}", ""]
    for _ in range(rng.randint(10, 20)):
        out.append(N(lambda: f"INFO great_expectations.data_context: stored validation result for batch "
                             f"{hexs(12)} of run nightly-{DS}, table {rng.choice(SCHEMAS)}.{rng.choice(TABLES)} "
                             f"({rng.randint(1, 90)} rows sampled for the docs)"))
    return "\n".join(out)


# ---------------------------------------------------------------------------
# Kafka and Kafka Connect.

def kafka_groups(group, topic, parts, stuck=()):
    head = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
    rows = []
    for p in range(parts):
        end = rng.randint(4 * 10 ** 8, 9 * 10 ** 8)
        lag = rng.randint(800000, 3 * 10 ** 6) if p in stuck else rng.randint(0, 60000)
        cid = f"connector-consumer-{group.removeprefix('connect-')}-{p % 6}-{hexs(8)}-{hexs(4)}-{hexs(4)}"
        rows.append([group, topic, str(p), str(end - lag), str(end), str(lag), cid, f"/10.41.{rng.randint(1, 30)}.{rng.randint(2, 250)}",
                     f"connector-consumer-{group.removeprefix('connect-')}-{p % 6}"])
    w = [max(len(h), *(len(r[k]) for r in rows)) for k, h in enumerate(head)]
    out = ["", " ".join(h.ljust(x) for h, x in zip(head, w)).rstrip()]
    out += [N(lambda: " ".join(c.ljust(x) for c, x in zip(r, w)).rstrip()) for r in rows]
    return "\n".join(out)


def lagctl(parts, planted=None, stuck=(), window="6h"):
    out = [f"lagctl 0.9.4  cluster=msk-prod-euw1  window={window}  step=60s",
           f"group state: Stable   members: {rng.choice([3, 6, 8])}   assignor: cooperative-sticky",
           f"topic partitions: {parts}", "",
           "partition  committed     log_end       lag        lag_6h_ago  commit_age  owner"]
    total = 0
    lags = []
    for p in range(parts):
        end = rng.randint(4 * 10 ** 8, 9 * 10 ** 8)
        lag = rng.randint(800000, 3 * 10 ** 6) if p in stuck else rng.randint(0, 60000)
        total += lag
        lags.append(lag)
        age = f"{rng.randint(31, 240)}m" if p in stuck else f"{rng.randint(2, 59)}s"
        out.append(N(lambda: f"{p:<10} {end - lag:<13} {end:<13} {lag:<10} {rng.randint(0, lag + 1):<11} {age:<11} "
                             f"task-{p % 6}@10.41.{rng.randint(1, 30)}.{rng.randint(2, 250)}"))
    prod, cons = rng.uniform(2000, 9000), rng.uniform(1000, 9000)
    drain = planted or N(lambda: f"est_drain_minutes {rng.randint(2, 90)}")
    out += ["", "summary",
            N(lambda: f"  total_lag {total}"),
            N(lambda: f"  max_lag {max(lags)} (partition {lags.index(max(lags))})"),
            f"  produce_rate_per_s {prod:.1f}",
            f"  consume_rate_per_s {cons:.1f}",
            f"  net_drain_per_s {cons - prod:.1f}   (negative means the lag grows)",
            "  " + drain + "      (at the best consume rate of the window, if the stalled partitions recover)",
            f"  stalled_partitions {len(stuck)}" + (f" ({', '.join(map(str, stuck))}): no commit for more than 30 min"
                                                    if stuck else ""),
            f"  rebalances_in_window {rng.randint(0, 9)}"]
    return "\n".join(out)


def connect_config(planted=None):
    cfg = {
        "connector.class": "io.confluent.connect.s3.S3SinkConnector",
        "tasks.max": str(rng.choice([4, 6, 8])),
        "topics": "store.txn.v2",
        "s3.region": "eu-west-1",
        "s3.bucket.name": "fhp-lake-raw",
        "topics.dir": "kafka",
        "s3.part.size": "26214400",
        "flush.size": str(nz("flush")),
        "rotate.interval.ms": "@ROTATE@",
        "rotate.schedule.interval.ms": "3600000",
        "timezone": "UTC",
        "locale": "en-GB",
        "storage.class": "io.confluent.connect.s3.storage.S3Storage",
        "format.class": "io.confluent.connect.s3.format.parquet.ParquetFormat",
        "parquet.codec": "snappy",
        "partitioner.class": "io.confluent.connect.storage.partitioner.TimeBasedPartitioner",
        "path.format": "'dt'=YYYY-MM-dd/'hr'=HH",
        "partition.duration.ms": "3600000",
        "timestamp.extractor": "RecordField",
        "timestamp.field": "event_ts",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "io.confluent.connect.avro.AvroConverter",
        "value.converter.schema.registry.url": "http://schema-registry.kafka.svc:8081",
        "schema.compatibility": "BACKWARD",
        "errors.tolerance": "all",
        "errors.deadletterqueue.topic.name": "dlq.store.txn.v2",
        "errors.deadletterqueue.context.headers.enable": "true",
        "errors.log.enable": "true",
        "consumer.override.max.poll.records": str(rng.choice([500, 1000, 2000])),
        "consumer.override.max.poll.interval.ms": "600000",
        "consumer.override.session.timeout.ms": "45000",
        "behavior.on.null.values": "ignore",
        "s3.retry.backoff.ms": "200",
        "s3.http.send.expect.continue": "false",
        "store.url": "https://s3.eu-west-1.amazonaws.com",
    }
    text = json.dumps(cfg, indent=2)
    return text.replace('"rotate.interval.ms": "@ROTATE@"', planted or N(lambda: f'"rotate.interval.ms": "{nz("rotate")}"'))


def connect_status(name, tasks, failed=()):
    doc = {"name": name, "connector": {"state": "RUNNING", "worker_id": "10.41.7.22:8083"}, "tasks": [], "type": "sink"}
    for i in range(tasks):
        t = {"id": i, "state": "FAILED" if i in failed else "RUNNING",
             "worker_id": f"10.41.{rng.randint(1, 30)}.{rng.randint(2, 250)}:8083"}
        if i in failed:
            t["trace"] = "\n".join([
                "org.apache.kafka.connect.errors.ConnectException: Exiting WorkerSinkTask due to unrecoverable exception.",
                "\tat org.apache.kafka.connect.runtime.WorkerSinkTask.deliverMessages(WorkerSinkTask.java:632)",
                "\tat org.apache.kafka.connect.runtime.WorkerSinkTask.poll(WorkerSinkTask.java:350)",
                "\tat org.apache.kafka.connect.runtime.WorkerSinkTask.iteration(WorkerSinkTask.java:250)",
                "\tat org.apache.kafka.connect.runtime.WorkerSinkTask.execute(WorkerSinkTask.java:219)",
                "\tat org.apache.kafka.connect.runtime.WorkerTask.doRun(WorkerTask.java:204)",
                "\tat org.apache.kafka.connect.runtime.WorkerTask.run(WorkerTask.java:259)",
                "\tat java.base/java.util.concurrent.ThreadPoolExecutor.runWorker(ThreadPoolExecutor.java:1136)",
                "Caused by: org.apache.kafka.connect.errors.RetriableException: org.apache.kafka.connect.errors."
                "ConnectException: Unable to write a part of the output file: Status Code: 503; Error Code: SlowDown",
                "\tat io.confluent.connect.s3.TopicPartitionWriter.write(TopicPartitionWriter.java:412)",
                "\tat io.confluent.connect.s3.S3SinkTask.put(S3SinkTask.java:247)",
                "\tat org.apache.kafka.connect.runtime.WorkerSinkTask.deliverMessages(WorkerSinkTask.java:601)",
                "\t... 10 more"])
        doc["tasks"].append(t)
    return json.dumps(doc, indent=2)


def connect_worker_log(n, name):
    t = clock(rng.randint(2, 8), rng.randint(0, 59), rng.uniform(0, 59))
    out = []
    for _ in range(n):
        t += datetime.timedelta(seconds=rng.uniform(0.2, 40))
        task = rng.randint(0, 5)
        k = rng.random()
        if k < 0.3:
            msg = (f"INFO [{name}|task-{task}] Files committed to S3 for partition store.txn.v2-{rng.randint(0, 23)}. "
                   f"Target commit offset is {rng.randint(4 * 10 ** 8, 9 * 10 ** 8)}, errors so far 0 "
                   f"(io.confluent.connect.s3.TopicPartitionWriter:{rng.randint(600, 700)})")
        elif k < 0.5:
            msg = (f"WARN [{name}|task-{task}] Error writing part to S3, will retry: Status Code: 503; Error Code: SlowDown; "
                   f"Request ID: {hexs(16).upper()} (io.confluent.connect.s3.storage.S3OutputStream:{rng.randint(200, 300)})")
        elif k < 0.62:
            msg = (f"INFO [{name}|task-{task}] [Consumer clientId=connector-consumer-{name}-{task}, groupId=connect-{name}] "
                   f"Revoke previously assigned partitions store.txn.v2-{rng.randint(0, 23)} "
                   f"(org.apache.kafka.clients.consumer.internals.ConsumerCoordinator:{rng.randint(300, 400)})")
        elif k < 0.75:
            msg = (f"ERROR [{name}|task-{task}] WorkerSinkTask{{id={name}-{task}}} Commit of offsets threw an unexpected "
                   f"exception for sequence number {rng.randint(100, 9999)}: null (org.apache.kafka.connect.runtime.WorkerSinkTask:{rng.randint(260, 290)})")
        elif k < 0.88:
            msg = (f"INFO [{name}|task-{task}] Opening record writer for partition dt={DS} hr={rng.randint(0, 23):02d}: "
                   f"kafka/store.txn.v2/dt={DS}/hr={rng.randint(0, 23):02d}/"
                   f"store.txn.v2+{rng.randint(0, 23)}+{rng.randint(4 * 10 ** 8, 9 * 10 ** 8):010d}.snappy.parquet")
        elif k < 0.94:
            msg = (f"ERROR [{name}|task-{task}] Error encountered in task {name}-{task}: part upload for partition "
                   f"store.txn.v2-{rng.randint(0, 23)} failed after {rng.randint(3, 10)} retries; error rows sent to "
                   f"the dead letter queue: 0 (org.apache.kafka.connect.runtime.errors.LogReporter:{rng.randint(60, 80)})")
        else:
            msg = (f"INFO [{name}|task-{task}] Assignment of {rng.randint(1, 8)} partition(s) for the group; "
                   f"job generation {rng.randint(100, 999)} (org.apache.kafka.connect.runtime.WorkerSinkTask:{rng.randint(700, 760)})")
        out.append(N(lambda: f"[{t:%Y-%m-%d %H:%M:%S},{rng.randint(0, 999):03d}] {msg}"))
    return "\n".join(out)


# ---------------------------------------------------------------------------
# dbt.

def dbt_header(t, target="prod", threads=8, project_counts="Found 412 models, 1604 data tests, 96 sources, 3 exposures, "
                                                            "1021 macros, 14 snapshots"):
    f = f"{t:%H:%M:%S}"
    return [f"{f}  Running with dbt=1.8.7", f"{f}  Registered adapter: redshift=1.8.1", f"{f}  {project_counts}", f"{f}",
            f"{f}  Concurrency: {threads} threads (target='{target}')", f"{f}"]


def dbt_run(models, elapsed=None, failures=(), hour=None, full_refresh=False, target="prod", threads=8,
            project_counts=None):
    t = clock(hour or rng.randint(9, 16), rng.randint(0, 59), rng.uniform(0, 59))
    out = dbt_header(t, target, threads, **({"project_counts": project_counts} if project_counts else {}))
    n = len(models)
    kinds = {}
    errs = []
    running = []

    def kind_of(m):
        return "table" if m.startswith(("dim_", "rpt_")) else ("view" if m.startswith("stg_") else "incremental")

    def finish_one():
        nonlocal t
        i, schema, m = running.pop(0)
        kind = kind_of(m)
        t += datetime.timedelta(seconds=rng.uniform(1, 120 if full_refresh else 40))
        secs = rng.uniform(0.5, 900 if full_refresh else 200)
        if m in failures:
            label = f"{i} of {n} ERROR creating sql {kind} model {schema}.{m} "
            out.append(f"{t:%H:%M:%S}  " + label.ljust(78, ".") + f" [ERROR in {secs:.2f}s]")
            errs.append((schema, m))
        elif kind == "view":
            label = f"{i} of {n} OK created sql view model {schema}.{m} "
            out.append(f"{t:%H:%M:%S}  " + label.ljust(78, ".") + f" [CREATE VIEW in {secs / 40:.2f}s]")
        else:
            label = f"{i} of {n} OK created sql {kind} model {schema}.{m} "
            verb = "SELECT" if kind == "table" or full_refresh else "INSERT 0"
            out.append(N(lambda: f"{t:%H:%M:%S}  " + label.ljust(78, ".") + f" [{verb} {rng.randint(0, 4 * 10 ** 6)} in {secs:.2f}s]"))

    for i, (schema, m) in enumerate(models, 1):
        kind = kind_of(m)
        kinds[kind] = kinds.get(kind, 0) + 1
        while len(running) >= threads or (running and rng.random() < 0.3):
            finish_one()
        t += datetime.timedelta(seconds=rng.uniform(0.1, 3))
        label = f"{i} of {n} START sql {kind} model {schema}.{m} "
        out.append(f"{t:%H:%M:%S}  " + label.ljust(78, ".") + " [RUN]")
        running.append((i, schema, m))
    while running:
        finish_one()
    t += datetime.timedelta(seconds=2)
    f = f"{t:%H:%M:%S}"
    total = elapsed or N(lambda: f"0 hours {rng.randint(2, 20)} minutes and {rng.uniform(0, 59.99):.2f} seconds")
    kind_text = ", ".join(f"{v} {k} model{'s' if v != 1 else ''}" for k, v in sorted(kinds.items()))
    out += [f"{f}", f"{f}  Finished running {kind_text} in {total}.", f"{f}"]
    if errs:
        out += [f"{f}  Completed with {len(errs)} error{'s' if len(errs) > 1 else ''} and 0 warnings:", f"{f}"]
        for schema, m in errs:
            out += [f"{f}  Database Error in model {m} (models/marts/{m}.sql)",
                    f"{f}    could not complete the run: relation \"staging.{m.split('_', 1)[1]}__dedup\" does not exist",
                    f"{f}    compiled code at target/run/dbt/models/marts/{m}.sql", f"{f}"]
    else:
        out += [f"{f}  Completed successfully", f"{f}"]
    passed = n - len(errs)
    out.append(f"{f}  Done. PASS={passed} WARN=0 ERROR={len(errs)} SKIP=0 TOTAL={n}")
    return "\n".join(out)


TEST_KINDS = ["not_null_{m}_{c}", "unique_{m}_{c}", "relationships_{m}_{c}__{c}__ref_dim_customer_",
              "accepted_values_{m}_{c}__A__B__C", "dbt_utils_expression_is_true_{m}_{c}_0",
              "dbt_utils_recency_{m}_day_{c}__1", "dbt_expectations_expect_column_values_to_be_between_{m}_{c}__0"]


def dbt_test(models, n, tally=None, fail=(), warn=(), hour=None):
    """models: names to build test names from; fail/warn: (test name, rows). With `tally` (a planted
    "Done. PASS=.. WARN=.. ERROR=.." line) the output is the tail of a long run that ends with it."""
    t = clock(hour or rng.randint(9, 16), rng.randint(0, 59), rng.uniform(0, 59))
    out = [] if tally else dbt_header(t)
    first = 1
    if tally:
        counts = dict(kv.split("=") for kv in tally.split()[1:])
        grand = int(counts["TOTAL"])
        fail = [(N(lambda: rng.choice(TEST_KINDS[:2]).format(m=rng.choice(["fct_oms_lines_daily", "fct_oms_headers_daily"]),
                                                            c=rng.choice(["basket_id", "customer_id", "line_no"]))),
                 rng.randint(1, 400)) for _ in range(int(counts["ERROR"]))]
        warn = [(N(lambda: rng.choice(TEST_KINDS[5:]).format(m=rng.choice(models), c=rng.choice(COLUMNS))),
                 rng.randint(1, 4000)) for _ in range(int(counts["WARN"]))]
        first = grand - n - len(fail) - len(warn) + 1
    tests = []
    for _ in range(n):
        tests.append(N(lambda: rng.choice(TEST_KINDS).format(m=rng.choice(models), c=rng.choice(COLUMNS))))
    specials = {name: ("FAIL", rows) for name, rows in fail}
    specials.update({name: ("WARN", rows) for name, rows in warn})
    for name in specials:
        tests.insert(rng.randint(0, len(tests)), name)
    total = len(tests) + first - 1
    for i, name in enumerate(tests, first):
        t += datetime.timedelta(seconds=rng.uniform(0.1, 4))
        st, rows = specials.get(name, ("PASS", 0))
        label = f"{i} of {total} {st if st != 'PASS' else 'PASS'} {rows if st != 'PASS' else ''} {name} ".replace("  ", " ")
        res = {"PASS": "[PASS", "FAIL": "[FAIL", "WARN": "[WARN"}[st]
        out.append(f"{t:%H:%M:%S}  " + label.ljust(78, ".") + f" {res} in {rng.uniform(0.2, 30):.2f}s]")
    f = f"{t:%H:%M:%S}"
    out += [f"{f}", f"{f}  Finished running {total} data tests in 0 hours {rng.randint(1, 9)} minutes and "
                    f"{rng.uniform(0, 59.99):.2f} seconds.", f"{f}"]
    if fail or warn:
        out += [f"{f}  Completed with {len(fail)} error{'s' if len(fail) != 1 else ''} and {len(warn)} "
                f"warning{'s' if len(warn) != 1 else ''}:", f"{f}"]
        for name, rows in list(fail) + list(warn):
            word = "Failure" if (name, rows) in fail else "Warning"
            out += [f"{f}  {word} in test {name} (models/schema.yml)",
                    f"{f}    Got {rows} result{'s' if rows != 1 else ''}, configured to "
                    f"{'fail' if word == 'Failure' else 'warn'} if != 0", f"{f}",
                    f"{f}    compiled code at target/compiled/dbt/models/schema.yml/{name[:60]}.sql", f"{f}"]
    else:
        out += [f"{f}  Completed successfully", f"{f}"]
    nf, nw = len(fail), len(warn)
    out.append(f"{f}  {tally}" if tally else
               N(lambda: f"{f}  Done. PASS={total - nf - nw} WARN={nw} ERROR={nf} SKIP=0 TOTAL={total}"))
    return "\n".join(out)


def dbt_freshness(sources):
    t = clock(rng.randint(9, 12), rng.randint(0, 59))
    out = dbt_header(t)
    for i, s in enumerate(sources, 1):
        t += datetime.timedelta(seconds=rng.uniform(0.2, 3))
        st = "WARN" if i == len(sources) - 2 else "PASS"
        label = f"{i} of {len(sources)} {'START' if False else ''}freshness of {s} "
        out.append(f"{t:%H:%M:%S}  " + label.replace("  ", " ").ljust(78, ".") + f" [{st} in {rng.uniform(0.2, 4):.2f}s]")
    out += [f"{t:%H:%M:%S}", f"{t:%H:%M:%S}  Finished running {len(sources)} source freshness checks in 0 hours 0 minutes "
            f"and {rng.uniform(5, 59):.2f} seconds.", f"{t:%H:%M:%S}  Done."]
    return "\n".join(out)


def profiles_yml(planted):
    def target(name, db, schema, threads_line, qg):
        return [f"    {name}:", "      type: redshift", "      host: \"{{ env_var('DBT_HOST') }}\"", "      port: 5439",
                "      user: \"{{ env_var('DBT_USER') }}\"", "      password: \"{{ env_var('DBT_PASSWORD') }}\"",
                f"      dbname: {db}", f"      schema: {schema}", f"      {threads_line}",
                f"      keepalives_idle: {rng.choice([0, 240])}", f"      connect_timeout: {rng.choice([10, 30])}",
                "      ra3_node: true", "      sslmode: require", f"      query_group: {qg}",
                f"      retries: {rng.choice([1, 3])}", ""]
    lines = ["# Profiles for the books project. Secrets come from the runner's environment (AWS Secrets Manager",
             "# via the external-secrets operator); nothing here is secret. One target per environment.", "",
             "books:", "  target: \"{{ env_var('DBT_TARGET', 'dev') }}\"", "  outputs:"]
    lines += target("dev", "analytics_dev", "\"dbt_{{ env_var('USER', 'ci') }}\"", f"threads: {nz('threads')}", "dbt_dev")
    lines += target("ci", "analytics_ci", "\"ci_{{ env_var('CI_PIPELINE_ID', 'local') }}\"", f"threads: {nz('threads')}",
                    "dbt_ci")
    lines += target("prod", "analytics", "books", planted, "dbt_books_prod")
    lines += ["# Query groups map to WLM queues: dbt_books_prod gets the etl queue's slots, the others get adhoc.",
              "config:", "  send_anonymous_usage_stats: false", "  use_colors: false", "  partial_parse: true",
              "  printer_width: 100"]
    return "\n".join(lines)


DBT_PROJECT_BOOKS = """name: books
version: "2.7.0"
config-version: 2
profile: books

model-paths: ["models"]
macro-paths: ["macros"]
test-paths: ["tests"]
snapshot-paths: ["snapshots"]
target-path: "target"
clean-targets: ["target", "dbt_packages"]

vars:
  fiscal_year_start_month: 2
  close_calendar: "s3://fhp-books-config/close_calendar.csv"
  fx_source: ecb_daily
  late_adjustment_days: 5

models:
  books:
    +persist_docs: {relation: true, columns: true}
    staging:
      +materialized: view
      +schema: books_staging
    intermediate:
      +materialized: ephemeral
    marts:
      +materialized: incremental
      +incremental_strategy: delete+insert
      +unique_key: [ds, entity_id, account_code]
      +on_schema_change: append_new_columns
      +dist: entity_id
      +sort: [ds]
      +post-hook:
        - "grant select on {{ this }} to group bi_readers"
        - "analyze {{ this }}"

tests:
  books:
    +severity: error
    +store_failures: true
    +schema: books_test_failures

seeds:
  books:
    +schema: books_seeds
    +quote_columns: false
    account_map:
      +column_types: {account_code: varchar(16), reporting_line: varchar(64), sign: smallint}
    entity_calendar:
      +column_types: {entity_id: varchar(8), close_day: smallint, currency: char(3)}

snapshots:
  books:
    +target_schema: books_snapshots
    +strategy: timestamp
    +updated_at: updated_at
    +invalidate_hard_deletes: true

on-run-start:
  - "set query_group to 'dbt_books_prod'"
  - "{{ check_close_calendar(var('run_date', none)) }}"

on-run-end:
  - "{{ record_run_results(results) }}"
  - "{% if target.name == 'prod' %}{{ notify_freshness('books') }}{% endif %}"

# Exposures used by the trading pack and the month-end close live in models/exposures.yml;
# a change to a mart's grain needs a note in #analytics-help before it merges.
dispatch:
  - macro_namespace: dbt_utils
    search_order: ["books", "dbt_utils"]

quoting:
  database: false
  schema: false
  identifier: false

require-dbt-version: [">=1.8.0", "<1.9.0"]
"""


# ---------------------------------------------------------------------------
# Terraform.

def tf_refresh(resources):
    return [f"{r}: Refreshing state... [id={i}]" for r, i in resources]


def terraform_plan(kind, planted):
    if kind == "lake":
        res = [("aws_s3_bucket.raw", "fhp-lake-raw"), ("aws_s3_bucket.curated", "fhp-lake-curated"),
               ("aws_s3_bucket.errors", "fhp-lake-errors"), ("aws_s3_bucket_versioning.raw", "fhp-lake-raw"),
               ("aws_s3_bucket_versioning.curated", "fhp-lake-curated"),
               ("aws_s3_bucket_lifecycle_configuration.raw", "fhp-lake-raw"),
               ("aws_s3_bucket_lifecycle_configuration.curated", "fhp-lake-curated"),
               ("aws_s3_bucket_public_access_block.raw", "fhp-lake-raw"),
               ("aws_s3_bucket_server_side_encryption_configuration.raw", "fhp-lake-raw"),
               ("aws_s3_bucket_policy.raw", "fhp-lake-raw"), ("aws_iam_policy.lake_reader", f"arn:aws:iam::381942077115:policy/lake-reader"),
               ("aws_s3_bucket_intelligent_tiering_configuration.curated", "fhp-lake-curated:archive-after-90d")]
        body = [
            "  # aws_s3_bucket_lifecycle_configuration.raw will be updated in-place",
            '  ~ resource "aws_s3_bucket_lifecycle_configuration" "raw" {',
            '        id                                     = "fhp-lake-raw"',
            "        # (2 unchanged attributes hidden)",
            "",
            "      ~ rule {",
            '            id     = "expire-raw-partitions"',
            '            status = "Enabled"',
            "",
            "          ~ expiration {",
            "              " + planted,
            "                # (1 unchanged attribute hidden)",
            "            }",
            "",
            "          ~ filter {",
            '              ~ prefix = "kafka/" -> null',
            "",
            "              + and {",
            '                  + prefix = "kafka/"',
            "                  + tags   = {",
            '                      + "keep" = "false"',
            "                    }",
            "                }",
            "            }",
            "",
            "            # (1 unchanged block hidden)",
            "        }",
            "      ~ rule {",
            '            id     = "abort-incomplete-uploads"',
            '            status = "Enabled"',
            "",
            "          ~ abort_incomplete_multipart_upload {",
            f"              ~ days_after_initiation = 7 -> {rng.choice([1, 2, 3])}",
            "            }",
            "",
            "            # (1 unchanged block hidden)",
            "        }",
            "",
            "        # (3 unchanged blocks hidden)",
            "    }",
            "",
            "  # aws_s3_bucket_versioning.raw will be updated in-place",
            '  ~ resource "aws_s3_bucket_versioning" "raw" {',
            '        id                    = "fhp-lake-raw"',
            "        # (2 unchanged attributes hidden)",
            "",
            "      ~ versioning_configuration {",
            '          ~ status     = "Enabled" -> "Suspended"',
            "            # (1 unchanged attribute hidden)",
            "        }",
            "    }",
            "",
            "  # aws_s3_object.lifecycle_readme will be created",
            '  + resource "aws_s3_object" "lifecycle_readme" {',
            "      + acl                    = (known after apply)",
            '      + bucket                 = "fhp-lake-raw"',
            '      + content                = "Objects under kafka/ and exports/ expire; tag keep=true to exempt an object."',
            "      + content_type           = (known after apply)",
            "      + etag                   = (known after apply)",
            "      + force_destroy          = false",
            "      + id                     = (known after apply)",
            '      + key                    = "README.lifecycle.txt"',
            "      + kms_key_id             = (known after apply)",
            '      + server_side_encryption = "aws:kms"',
            '      + storage_class          = "STANDARD"',
            "      + tags_all               = {",
            '          + "CostCenter" = "data-platform"',
            '          + "ManagedBy"  = "terraform"',
            "        }",
            "      + version_id             = (known after apply)",
            "    }",
        ]
        summary = "Plan: 1 to add, 2 to change, 0 to destroy."
    else:
        res = [("aws_redshift_subnet_group.main", "fhp-rs-subnets"), ("aws_redshift_parameter_group.main", "fhp-rs-params-v3"),
               ("aws_redshift_cluster.main", "fhp-rs-prod"), ("aws_security_group.rs", "sg-0" + hexs(16)),
               ("aws_iam_role.rs_copy", "fhp-rs-copy"), ("aws_iam_role_policy.rs_copy_s3", "fhp-rs-copy:s3-read"),
               ("aws_redshift_snapshot_schedule.daily", "fhp-rs-daily"),
               ("aws_redshift_snapshot_schedule_association.main", "fhp-rs-prod/fhp-rs-daily"),
               ("aws_cloudwatch_metric_alarm.rs_disk", "fhp-rs-prod-disk-used"),
               ("aws_cloudwatch_metric_alarm.rs_queue", "fhp-rs-prod-wlm-queue-length")]
        body = [
            "  # aws_redshift_cluster.main will be updated in-place",
            '  ~ resource "aws_redshift_cluster" "main" {',
            '        id                                   = "fhp-rs-prod"',
            '      ~ node_type                            = "ra3.xlplus" -> "ra3.4xlarge"',
            "      " + planted,
            "      ~ maintenance_track_name               = \"current\" -> \"trailing\"",
            "        tags                                 = {",
            '            "CostCenter" = "data-platform"',
            '            "ManagedBy"  = "terraform"',
            '            "Tier"       = "tier-1"',
            "        }",
            "        # (41 unchanged attributes hidden)",
            "",
            "        # (2 unchanged blocks hidden)",
            "    }",
            "",
            "  # aws_redshift_parameter_group.main will be updated in-place",
            '  ~ resource "aws_redshift_parameter_group" "main" {',
            '        id          = "fhp-rs-params-v3"',
            '        name        = "fhp-rs-params-v3"',
            "        tags        = {}",
            "        # (4 unchanged attributes hidden)",
            "",
            "      - parameter {",
            '          - name  = "wlm_json_configuration" -> null',
            "          - value = jsonencode([{query_group = [\"dbt_books_prod\", \"etl\"], query_concurrency = 5, "
            "memory_percent_to_use = 50}, {query_group = [\"adhoc\"], query_concurrency = 3}, {short_query_queue = true}]) -> null",
            "        }",
            "      + parameter {",
            '          + name  = "wlm_json_configuration"',
            "          + value = jsonencode([{auto_wlm = true, query_group = [\"dbt_books_prod\", \"etl\"], priority = "
            "\"high\", queue_type = \"auto\"}, {auto_wlm = true, query_group = [\"adhoc\"], priority = \"normal\"}, "
            "{short_query_queue = true}])",
            "        }",
            "",
            "        # (6 unchanged blocks hidden)",
            "    }",
            "",
            "  # aws_cloudwatch_metric_alarm.rs_disk will be updated in-place",
            '  ~ resource "aws_cloudwatch_metric_alarm" "rs_disk" {',
            '        id                                    = "fhp-rs-prod-disk-used"',
            f"      ~ threshold                             = {rng.choice([80, 85])} -> {rng.choice([70, 75])}",
            "        # (17 unchanged attributes hidden)",
            "    }",
        ]
        summary = "Plan: 0 to add, 3 to change, 0 to destroy."
    out = tf_refresh(res) + ["", "Terraform used the selected providers to generate the following execution plan. "
                                 "Resource actions are indicated with the following symbols:",
                             "  + create", "  ~ update in-place", "", "Terraform will perform the following actions:", ""]
    out += body + ["", summary, "",
                   "─" * 77, "",
                   "Saved the plan to: tfplan", "", "To perform exactly these actions, run the following command to apply:",
                   '    terraform apply "tfplan"']
    return "\n".join(out).replace("─", "-")


# ---------------------------------------------------------------------------
# Files from partners, and the rest.

def csvcheck(fname, planted):
    total = rng.randint(150000, 260000)
    out = [f"csvcheck 2.3.0  file={fname}  (gzip, {rng.uniform(20, 60):.1f} MiB compressed)",
           "dialect: delimiter=';' quotechar='\"' header=yes encoding=utf-8 (declared in the feed spec)",
           "columns (14): item_code;gtin;description;pack_size;unit;list_price;promo_price;currency;valid_from;"
           "valid_to;region;brand;category;updated_at", "", "scanning..."]
    issues = []
    for _ in range(rng.randint(28, 44)):
        ln = rng.randint(2, total)
        kind = rng.random()
        if kind < 0.45:
            issues.append((ln, N(lambda: f"line {ln}: 15 fields, expected 14 (unquoted ';' in description?)")))
        elif kind < 0.7:
            issues.append((ln, N(lambda: f"line {ln}: column 9 valid_from '{rng.randint(1, 31):02d}.{rng.randint(1, 12):02d}.2026' "
                                         f"does not match %Y-%m-%d")))
        elif kind < 0.85:
            issues.append((ln, N(lambda: f"line {ln}: column 6 list_price '{rng.randint(1, 99)},{rng.randint(0, 99):02d}' "
                                         f"uses a decimal comma")))
        else:
            issues.append((ln, N(lambda: f"line {ln}: column 2 gtin '{rng.randint(10 ** 11, 10 ** 12)}' fails the check digit")))
    pl = int(planted.split()[1].rstrip(":"))
    issues.append((pl, planted + " in column 3 (expected UTF-8; latin-1 would decode it as an accented letter)"))
    issues.sort()
    step = total // 5
    k = 0
    for i in range(1, 6):
        while k < len(issues) and issues[k][0] <= i * step:
            out.append(issues[k][1])
            k += 1
        out.append(f"  ... {i * step} lines read")
    out += [l for _, l in issues[k:]]
    bad = len(issues)
    out += ["", f"summary: {total} lines, {total - 1 - bad} rows parsed, {bad} rows rejected",
            f"  rejected by reason: field_count {sum('fields' in l for _, l in issues)}, "
            f"encoding 1, date_format {sum('valid_from' in l for _, l in issues)}, other {sum('price' in l or 'gtin' in l for _, l in issues)}",
            "  first error at line " + str(issues[0][0]), "exit status 2 (errors above the feed's tolerance of 0 encoding errors)"]
    return "\n".join(out)


def sha_listing(planted, today_file):
    out = []
    d = TODAY
    for i in range(rng.randint(12, 16)):
        day = d - datetime.timedelta(days=i)
        for kind in (["full"] if i % 7 else ["full", "delta"]):
            f = f"PRC_{day:%Y%m%d}_{kind}.csv.gz"
            h = planted if f == today_file else hexs(64)
            out.append(N(lambda: f"{h}  {f}") if h != planted else f"{h}  {f}")
    out += ["", f"$ cat {today_file.replace('.csv.gz', '.manifest.json')}",
            json.dumps({"file": today_file, "rows": rng.randint(150000, 260000), "sha256": hexs(64),
                        "generated_at": iso(clock(0, rng.randint(5, 50))), "encoding": "UTF-8", "delimiter": ";",
                        "schema_version": "3.2", "sender": "edi-gw-02"}, indent=2)]
    return "\n".join(out)


def explain_analyze():
    lines = [
        "                                                     QUERY PLAN",
        "-" * 110,
        f" XN Merge  (cost=1000{rng.randint(100, 999)}.{rng.randint(10, 99)}..1000{rng.randint(100, 999)}.{rng.randint(10, 99)} rows={rng.randint(100, 9000)} width={rng.randint(40, 200)})",
        "   Merge Key: ds",
        "   ->  XN Network  (cost=...)",
        "         Send to leader",
        f"         ->  XN Sort  (cost=1000{rng.randint(100, 999)}.00..1000{rng.randint(100, 999)}.00 rows={rng.randint(100, 9000)} width={rng.randint(40, 200)})",
        "               Sort Key: ds",
        f"               ->  XN HashAggregate  (cost={rng.randint(10 ** 5, 10 ** 6)}.00..{rng.randint(10 ** 6, 10 ** 7)}.00 rows={rng.randint(100, 9000)} width={rng.randint(40, 200)})",
        f"                     ->  XN Hash Join DS_DIST_INNER  (cost=... rows={rng.randint(10 ** 6, 10 ** 8)} width={rng.randint(40, 200)})",
        "                           Hash Cond: ((\"outer\".customer_id)::text = (\"inner\".customer_id)::text)",
        f"                           ->  XN Seq Scan on fct_basket_lines b  (cost=0.00..{rng.randint(10 ** 5, 10 ** 6)}.00 rows={rng.randint(10 ** 7, 10 ** 9)} width={rng.randint(40, 200)})",
        "                                 Filter: ((ds >= '2026-11-01'::date) AND (ds <= '2026-12-01'::date))",
        "                           ->  XN Hash  (cost=... rows=... width=...)",
        f"                                 ->  XN Seq Scan on dim_customer c  (cost=0.00..{rng.randint(10 ** 4, 10 ** 5)}.00 rows={rng.randint(10 ** 6, 10 ** 7)} width={rng.randint(40, 200)})",
        " ----- Tables missing statistics: analytics.dim_customer -----",
        " ----- Update statistics by running the ANALYZE command on these tables -----",
    ]
    return "\n".join(lines)


def table_info(n):
    rows = []
    for t in rng.sample(TABLES, min(n, len(TABLES))):
        rows.append([rng.choice(["analytics", "marts", "staging"]), t, rng.choice(["KEY(customer_id)", "EVEN", "AUTO(ALL)", "KEY(sku_id)"]),
                     rng.choice(["ds", "event_ts", "AUTO(SORTKEY)", ""]), rng.randint(100, 900000), f"{rng.uniform(0, 60):.2f}",
                     rng.randint(10 ** 4, 10 ** 9), f"{rng.uniform(1, 40):.2f}", f"{rng.uniform(0, 20):.2f}"])
    return N(lambda: psql_table(["schema", "table", "diststyle", "sortkey1", "size_mb", "pct_used", "tbl_rows", "skew_rows",
                                 "unsorted"], rows, numeric=(4, 5, 6, 7, 8)))


def kubectl_pods(n, ns="airflow", dag=None, kinds=None):
    head = ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE"]
    rows = []
    for _ in range(n):
        d = (dag or rng.choice(DAGS)).replace("_", "-")
        kind = rng.choice(kinds or ["load", "dbt-build", "quality-gate", "export", "spark-submit"])
        st = rng.choices(["Running", "Completed", "Error", "OOMKilled", "Pending"], [5, 8, 2, 1, 1])[0]
        rows.append([f"{d}-{kind}-{hexs(5)}", "1/1" if st == "Running" else "0/1", st, str(rng.choice([0, 0, 0, 1, 2])),
                     f"{rng.randint(1, 59)}m", f"10.41.{rng.randint(1, 30)}.{rng.randint(2, 250)}", rng.choice(HOSTS)])
    for name in [] if dag else ["airflow-scheduler-0", "airflow-scheduler-1", "airflow-webserver-6d8f9c7b4-x2k9q",
                                "airflow-triggerer-0", "airflow-statsd-5b7c8d9f6-pq2lm"]:
        rows.append([name, "1/1", "Running", "0", f"{rng.randint(2, 40)}d", f"10.41.{rng.randint(1, 30)}.{rng.randint(2, 250)}",
                     rng.choice(HOSTS)])
    w = [max(len(h), *(len(r[k]) for r in rows)) for k, h in enumerate(head)]
    return "\n".join(["   ".join(h.ljust(x) for h, x in zip(head, w)).rstrip()]
                     + [N(lambda: "   ".join(c.ljust(x) for c, x in zip(r, w)).rstrip()) for r in rows])


def windows_module(planted=None, doc="Credit windows"):
    vt = planted or N(lambda: f"VIEW_THROUGH_WINDOW = timedelta(hours={nz('window_hours')})")
    src = f'''"""{doc}: how long after a contact an order still earns it credit.

Windows are measured from the contact's event time to the order's placed_at, both in UTC. A contact outside
every window earns nothing; the remaining credit goes to the direct channel.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Iterable, Sequence

CLICK_WINDOW = timedelta(days={rng.choice([7, 14, 28, 30])})
{vt}
DEDUP_WINDOW = timedelta(minutes={rng.choice([5, 10, 30])})
FIRST_LAST_WEIGHT = {rng.choice(["0.4", "0.3", "0.45"])}  # each of the first and the last contact
MIN_CREDIT = 0.0001  # below this a share is rounded away
EXCLUDED_CHANNELS = frozenset({{"internal", "test", "employee"}})


@dataclass(frozen=True, slots=True)
class Contact:
    customer_id: str
    channel: str
    campaign_id: str | None
    event_ts: datetime
    kind: str  # "click" or "view"


def in_window(contact: Contact, placed_at: datetime) -> bool:
    """True if the contact happened before the order and within its kind's window."""
    if contact.event_ts > placed_at or contact.channel in EXCLUDED_CHANNELS:
        return False
    window = CLICK_WINDOW if contact.kind == "click" else VIEW_THROUGH_WINDOW
    return placed_at - contact.event_ts <= window


def dedupe(contacts: Sequence[Contact]) -> list[Contact]:
    """Drops repeats of the same channel and campaign within DEDUP_WINDOW, keeping the first."""
    out: list[Contact] = []
    last: dict[tuple[str, str | None], datetime] = {{}}
    for c in sorted(contacts, key=lambda c: c.event_ts):
        key = (c.channel, c.campaign_id)
        if key in last and c.event_ts - last[key] < DEDUP_WINDOW:
            continue
        last[key] = c.event_ts
        out.append(c)
    return out


def shares(contacts: Sequence[Contact], placed_at: datetime) -> dict[str, float]:
    """Position-based credit: FIRST_LAST_WEIGHT to the first and the last, the rest spread evenly."""
    eligible = dedupe([c for c in contacts if in_window(c, placed_at)])
    if not eligible:
        return {{"direct": 1.0}}
    if len(eligible) == 1:
        return {{eligible[0].channel: 1.0}}
    weights = [0.0] * len(eligible)
    weights[0] += FIRST_LAST_WEIGHT
    weights[-1] += FIRST_LAST_WEIGHT
    middle = len(eligible) - 2
    rest = 1.0 - 2 * FIRST_LAST_WEIGHT
    if middle:
        for i in range(1, len(eligible) - 1):
            weights[i] += rest / middle
    else:
        weights[0] += rest / 2
        weights[-1] += rest / 2
    out: dict[str, float] = {{}}
    for c, w in zip(eligible, weights):
        out[c.channel] = out.get(c.channel, 0.0) + w
    return {{k: v for k, v in out.items() if v >= MIN_CREDIT}}


def credit_rows(order_id: str, placed_at: datetime, net_cents: int, contacts: Iterable[Contact]) -> list[dict]:
    """One row per channel with its share of the order's net value, for the daily credit table."""
    return [
        {{"order_ref": order_id, "channel": ch, "share": round(s, 6), "credit_cents": round(net_cents * s)}}
        for ch, s in sorted(shares(list(contacts), placed_at).items())
    ]
'''
    return numbered(src.rstrip("\n").split("\n"))


def cost_table(n):
    rows = []
    for i in range(n):
        d = TODAY - datetime.timedelta(days=n - i)
        for job in rng.sample(["web-sessionize", "attribution-paths", "ltv-features", "basket-affinity",
                               "search-terms-rollup", "forecast-features"], 3):
            rows.append([d.isoformat(), job, f"{rng.uniform(2, 40):.2f}", f"{rng.uniform(1, 9):.1f}",
                         rng.randint(4, 60), f"{rng.uniform(0.5, 12):.1f}"])
    return N(lambda: psql_table(["usage_date", "job_tag", "cost_usd", "instance_hours_k", "peak_nodes", "spot_share_pct"],
                                rows, numeric=(2, 3, 4, 5)))


def backfill_plan(dag, days, tasks, dry=True):
    out = [f"backfill {'(dry run: nothing is cleared, nothing is triggered)' if dry else ''}".rstrip(),
           f"dag: {dag}   days: {len(days)}   order: oldest first   max_active_runs: 1   pool: backfill", ""]
    for d in days:
        out.append(f"ds={d}")
        for t in tasks:
            out.append(N(lambda: f"  {'would clear' if dry else 'cleared'} {t:<34} state {rng.choice(['success', 'success', 'failed', 'upstream_failed'])}"))
        out.append(N(lambda: f"  source partition rows (manifest): {rng.randint(200000, 900000)}   files: {rng.randint(150, 320)}"))
        out.append(N(lambda: f"  target table rows now: {rng.randint(150000, 900000)}   rows to replace: {rng.randint(150000, 900000)}"))
        out.append(N(lambda: f"  estimated job run time: {rng.randint(12, 95)} min"))
    out += ["", f"{'would trigger' if dry else 'triggered'} {len(days)} runs with run_id prefix backfill__; "
                f"the scheduler picks them up in order", ""]
    if dry:
        out.append("re-run without --dry-run to clear and trigger")
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
FILES = {}       # path -> lines as last read or written


def new_turn(t):
    global turn_no, topic
    turn_no += 1
    topic = t


def record(content, source):
    """Records each planted value `content` holds as a fact of this turn."""
    table = P if source == "tool" else M
    for label, text in table.items():
        if label not in fact_turns and text in content:
            fid = f"p{len(facts) + 1:03d}"
            facts.append({"id": fid, "turn": turn_no, "topic": topic, "source": source, "text": text})
            fact_turns[label] = turn_no
            fact_ids[label] = fid
            schedule(label)


def U(text):
    assert not any(i["turn"] == turn_no for i in items), "a turn starts with the user's message"
    items.append({"turn": turn_no, "role": "user", "kind": "message", "content": text})
    record(text, "message")


FILLER = [
    "I would keep the fix and the backfill in separate PRs, so the backfill can be re-run without dragging a code "
    "change along.",
    "The dev target points at a weekly snapshot of prod, which is fine for reproducing this but not for sizing it.",
    "Nothing in this change touches a published view, so the dashboards keep reading yesterday's partition until "
    "the run finishes.",
    "It is worth writing the row counts into the ticket as we go; the postmortem is much easier with them.",
    "A quiet night is not proof of a fix for a late-data bug; I would watch at least two more runs.",
    "The scheduler only re-parses the DAG file on its next loop, so the change shows up in the UI a minute or so "
    "after the deploy.",
    "Most of the nightly DAGs share the factory, so a pattern we fix in one is worth checking in the others.",
    "I would rather fail a run loudly than publish a partial partition that someone then quotes in a meeting.",
    "The dbt docs site picks up the new descriptions on the next build, so the analysts will see the caveat there.",
    "Every one of these changes goes through CI's DAG integrity tests, which catch import errors before the "
    "scheduler does.",
    "If we change a model's grain, the exposures that depend on it need a heads-up in the analytics channel.",
    "The retry settings are per task, so a slow sensor and a flaky merge can be tuned separately.",
    "The curated layer is rebuilt from raw, so nothing we do here is lost as long as raw keeps its partitions.",
    "It helps to keep the dry-run output next to the real run's output in the ticket, so the two can be compared.",
    "Spark settings on EMR are per step, so tuning this job does not change the others on the cluster.",
    "Expectation suites are versioned with the code, so a threshold change shows up in review like any other diff.",
]
NEXT = [
    "add the row counts to the ticket", "ask for a review in #data-eng", "watch tonight's run", "update the runbook",
    "tell the analysts in #analytics-help", "add a regression test for the DAG", "check the dashboard after publish",
    "note the change in the changelog", "re-run the expectations after the backfill",
]


def A(body, pad=True):
    parts = []
    pre = rng.randint(1, 2) if pad and rng.random() < 0.4 else 0
    post = rng.randint(0, 2) if pad else 0
    drawn = rng.sample(FILLER, pre + post)
    if pre:
        parts.append(" ".join(drawn[:pre]))
    parts.append(body)
    if pad and post:
        parts.append(" ".join(drawn[pre:]))
    if pad and rng.random() < 0.35:
        parts.append("Next:\n" + "\n".join(f"- {x}" for x in rng.sample(NEXT, rng.randint(2, 3))))
    content = "\n\n".join(parts)
    items.append({"turn": turn_no, "role": "assistant", "kind": "message", "content": content})
    record(content, "message")


def say(text):
    """A short assistant message between two calls of the same turn."""
    items.append({"turn": turn_no, "role": "assistant", "kind": "message", "content": text})
    record(text, "message")


def tool(name, args, output, expect=()):
    """A call and its result. `expect`: the planted labels the output is meant to hold (and no others)."""
    global call_no
    held = {l for l, v in P.items() if v in output} | {l for l, v in M.items() if v in output}
    assert held == set(expect), (turn_no, name, args, held, expect)
    call_no += 1
    cid = f"call_{call_no:03d}"
    items.append({"turn": turn_no, "role": "assistant", "kind": "tool_call",
                  "content": json.dumps(args), "tool_name": name, "call_id": cid})
    items.append({"turn": turn_no, "role": "tool", "kind": "tool_result",
                  "content": output, "tool_name": name, "call_id": cid})
    record(output, "tool")


def read(path, text, expect=()):
    FILES[path] = text.split("\n")
    tool("read_file", {"path": path}, text, expect)


def sh(cmd, output, expect=()):
    tool("bash", {"cmd": cmd}, output, expect)


def sql(query, output, expect=(), db="dw_prod_ro"):
    tool("psql", {"target": db, "query": query}, output, expect)


def git(cmd, output, expect=()):
    tool("git", {"cmd": cmd}, output, expect)


def make_diff(path, lines, edits, ctx=3):
    """A unified diff of `edits` against `lines`; edits: (anchor text, lines removed, lines added)."""
    new = list(lines)
    for anchor, n, add in sorted(edits, key=lambda e: -next(k for k, l in enumerate(lines) if e[0] in l)):
        i = next(k for k, l in enumerate(lines) if anchor in l)
        new[i:i + n] = add
    diff = difflib.unified_diff(lines, new, f"a/{path}", f"b/{path}", n=ctx, lineterm="")
    return "\n".join(diff)


def patch(path, diff, checks="dags"):
    tool("apply_patch", {"path": path, "patch": diff}, patch_result(path, diff, checks))


# ---------------------------------------------------------------------------
# Recall questions: each asks about planted values in the user's own words,
# at its turn or as soon after as the day allows (never two questions in a
# row, never fewer than MIN_GAP turns after the fact). `what` is how the assistant's vague answer refers to the
# output; `kind` picks its wording.

QUESTIONS = [
    # tuning
    ("tune", ["O1"], 52, "config",
     "Brannagh wants to know if Airflow's timeout could have killed one of the orders loader's attempts last night. "
     "What's the exec timeout on that DAG's tasks again, in mins?", "the orders DAG's YAML config"),
    ("tune", ["O2"], 58, "log",
     "For the ticket: when the orders load pod bailed last night, how many of the OMS export's files had actually "
     "turned up, vs how many it wanted?", "the orders loader pod's log"),
    ("tune", ["S2"], 64, "config",
     "What was the sessionize job's shuffle parallelism set to in its EMR config, before we flipped AQE on?",
     "the sessionize step's EMR configurations file"),
    ("tune", ["A1"], 94, "code",
     "how long does an ad impression get to earn credit in our attribution lib? the view-thru window, in hrs", "the attribution lib's windows module"),
    ("tune", ["I1"], 74, "config",
     "What time does the inventory snapshot DAG kick off? The cron from its config, not the UI.",
     "the inventory snapshot DAG's config"),
    ("tune", ["P1"], 79, "tool",
     "What was lagctl's ETA for the POS sink to work off its backlog? In minutes.", "the lagctl run on the POS sink's group"),
    ("tune", ["R1"], 89, "query",
     "Can you dig up the checksum we took off the revenue daily table before the rebuild? I need to diff it against "
     "tonight's.", "the checksum query on the revenue table"),
    ("tune", ["R3"], 84, "config",
     "How long does the finance revenue DAG get before it counts as late and pages someone? In mins, per its config.", "the revenue DAG's config"),
    ("tune", ["L1"], 118, "config",
     "How long does the LTV DAG wait between retries?", "the LTV DAG's config"),
    ("tune", ["F1"], 104, "query",
     "How many refund IDs came out duplicated in that dedupe query of ours?", "the duplicate check on the refunds"),
    ("tune", ["H1"], 108, "code",
     "The shipments DAG's upstream sensor has a time offset baked into the code. What's the delta?",
     "the shipments DAG's source"),
    ("tune", ["V1"], 112, "tool",
     "Which line in the dairy supplier's price file had the dodgy byte, and which byte was it?",
     "the csvcheck run on the supplier's file"),
    ("tune", ["T1"], 122, "plan",
     "In the TF plan for the lake retention stack, what was the expiry on raw going to change to? days",
     "the plan for the lake-retention stack"),
    ("tune", ["D1"], 98, "dbt",
     "how long did that full refresh of nightly_core take, end to end?", "the full-refresh run of nightly_core"),
    ("tune", ["window"], 69, "message",
     "Remind me what backfill window we agreed with FP&A? Start and end dates.", "what FP&A agreed this morning"),
    # held-out
    ("held", ["O3"], 55, "query",
     "How big was the hole in the orders facts for the 1st? The missing count from our recon query.",
     "the orders gap query"),
    ("held", ["O4"], 61, "commit",
     "what's the sha of the commit that cut the orders sensor's timeout? short form is fine",
     "the git log of the orders DAG"),
    ("held", ["O5"], 126, "code",
     "how often does the orders DAG's manifest sensor re-check S3? in secs", "the orders DAG's source"),
    ("held", ["S1"], 66, "spark",
     "how many GiB did the slow sessionization run dump to disk when it ran out of memory? exact if you have it",
     "the Spark summary of the slow sessionize run"),
    ("held", ["S3"], 71, "listing",
     "How many parquet files landed in the web sessions partition for Dec 1st? The small-files listing.",
     "the S3 listing of the sessions output"),
    ("held", ["A2"], 96, "query",
     "What % of the credit went to paid social in the attribution numbers we pulled?",
     "the attribution channel query"),
    ("held", ["I2"], 81, "ge",
     "how many rows tripped the GX check on inventory snapshots last night?", "the inventory expectation results"),
    ("held", ["P2"], 86, "config",
     "How often does the POS S3 sink roll over to a new file, in ms? The connector setting.", "the POS sink connector's config"),
    ("held", ["R2"], 91, "config",
     "How much parallelism does the books (finance) dbt project get in prod? Thread count.", "the finance project's profiles.yml"),
    ("held", ["L2"], 120, "query",
     "Remind me where the p99 landed in the customer LTV percentiles?", "the LTV percentile query"),
    ("held", ["F2"], 106, "commit",
     "Which commit last touched the refunds staging model? Just the short hash.", "the git log of the refunds model"),
    ("held", ["H2"], 110, "ge",
     "What share of the shipment scans failed the GE ordering check, percent-wise?", "the shipments expectation results"),
    ("held", ["V2"], 116, "tool",
     "What SHA-256 did we get for the supplier's price file as received?", "the checksum listing of the inbox"),
    ("held", ["T2"], 124, "plan",
     "How many nodes would the TF plan take the warehouse cluster to?", "the plan for the warehouse cluster"),
    ("held", ["D2"], 102, "dbt",
     "what was the pass/warn/error tally from the nightly_core dbt tests?", "the nightly_core test run"),
    ("held", ["deadline"], 76, "message",
     "What time did Cormac say the trading pack has to be with the execs?", "what Cormac told us this morning"),
]
OFF_TOPIC = [
    ("tune", 100, "Totally unrelated: my sourdough starter smells like nail polish remover. Is it dead or just hungry?",
     "Just hungry. That acetone smell comes from the yeast and bacteria running out of food; feed it more often or "
     "at a higher ratio (one part starter to five of flour and water) for a few days and keep it somewhere warm. "
     "It is only dead if it shows no rise at all after a couple of feeds, or grows fuzzy mould on top."),
    ("held", 114, "Random one: my bike chain keeps skipping on the smallest cog. Chain or cassette?",
     "Usually both wear together. Measure the chain with a checker: past 0.75 percent stretch it has probably "
     "worn the small cogs too, and a new chain on a worn cassette skips exactly like that. If the chain is fine, "
     "check the limit screw and the cable tension on the rear derailleur first; a quarter turn on the barrel "
     "adjuster often fixes a skip on one cog."),
]

ANSWERS = {
    "config": ["It is a key in {what}, as we read it this morning; nothing we merged today changed that line, so "
               "the value in that read is still the live one.",
               "That one comes straight from {what}. I would copy it from the read we did rather than from memory."],
    "log": ["It is the error line in {what}, near the middle of the output, just before the loader refused the "
            "partition. I would paste that line into the ticket as printed."],
    "code": ["It is hard-coded in {what}, not in the YAML; the read from earlier has the exact line. The config "
             "file does not override it."],
    "tool": ["It is in the summary of {what}; I would quote that output as printed rather than re-derive it."],
    "query": ["It is in the result of {what}; the row we looked at has the figure, and I would rather you copy it "
              "from that output than from my memory."],
    "commit": ["The short hash is on its line in {what}; I would link the commit from there, short hashes are easy to "
               "mistype."],
    "plan": ["It is the in-place change in {what}; the line with the arrow shows the old and the new value."],
    "dbt": ["It is the last lines of {what}; dbt prints it as the closing summary."],
    "spark": ["It is in the totals block of {what}, next to the memory spill line."],
    "listing": ["It is the summary at the bottom of {what}, above the total size."],
    "ge": ["It is in the result of the failing expectation in {what}, the one with success false."],
    "message": ["It was in {what}; scroll back to the start of the day and you will find it as it was said."],
}

probes = {"tune": [], "held": []}
pending = []  # [due, order, spec]
last_was_question = False
MIN_GAP = 25


def schedule(label):
    for order, (which, labels, at, kind, text, what) in enumerate(QUESTIONS):
        if label in labels and all(l in fact_turns for l in labels):
            due = max(50, at, max(fact_turns[l] for l in labels) + MIN_GAP)
            pending.append([due, order, (which, labels, kind, text, what)])


for order, (which, at, text, answer) in enumerate(OFF_TOPIC):
    pending.append([at, 100 + order, (which, None, None, text, answer)])


def ask(spec):
    global last_was_question
    which, labels, kind, text, what = spec
    if labels is None:
        new_turn("off-topic")
        U(text)
        probes[which].append({"kind": "recall", "turn": turn_no, "facts": []})
        A(what, pad=False)
        last_was_question = True
        return
    new_turn("recall")
    U(text)
    for l in labels:
        assert turn_no - fact_turns[l] >= MIN_GAP, (text, l, turn_no - fact_turns[l])
    probes[which].append({"kind": "recall", "turn": turn_no, "facts": [fact_ids[l] for l in labels]})
    A(rng.choice(ANSWERS[kind]).format(what=what), pad=False)
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
# The day.

CODES = {
    "orders": dict(schedule="0 2 * * *", src="oms_v2", tables=["order_lines", "order_headers", "order_adjustments"], tag="oms",
                   upstream="oms_export_watch", pool="etl_default", owner="data-eng-commerce",
                   checkpoint="oms_core.critical", view="oms_daily",
                   publish=["fct_oms_lines_daily", "fct_oms_headers_daily"]),
    "inventory": dict(src="wms_levels", tables=["bin_levels", "adjustments", "transfers"], tag="wms",
                      upstream="wms_export_watch", pool="etl_default", owner="data-eng-ops",
                      checkpoint="wms_levels.critical", view="wms_levels_daily", publish=["fct_wms_levels_daily"]),
    "revenue": dict(schedule="30 3 * * *", src="gl_extract", tables=["journal_lines", "cost_centres"], tag="books", upstream="gl_close_watch",
                    pool="dbt_prod", owner="data-eng-books", checkpoint="books_core.critical", view="books_daily",
                    publish=["fct_books_daily", "fct_books_by_entity"], tier="tier-1"),
    "ltv": dict(schedule="0 1 * * *", src="crm_profiles", tables=["profiles", "consents"], tag="crm_scores", upstream="crm_export_watch",
                pool="spark_emr", owner="data-science-platform", checkpoint="crm_scores.critical",
                view="crm_scores_daily", publish=["fct_crm_scores"], tier="tier-2"),
    "shipments": dict(schedule="0 2 * * *", src="carrier_events", tables=["scans", "handovers"], tag="carrier", upstream="carrier_scans_watch",
                      pool="etl_default", owner="data-eng-ops", checkpoint="carrier_scans.critical",
                      view="carrier_daily", publish=["fct_carrier_scans_daily"]),
    "promo": dict(src="promo_engine", tables=["redemptions", "campaigns"], tag="promo", upstream="promo_export_watch",
                  pool="etl_default", owner="data-eng-commerce", checkpoint="promo_core.critical", view="promo_daily",
                  publish=["fct_promo_redemptions"], tier="tier-2"),
}

MODELS_CORE = [("staging", "stg_oms__order_lines"), ("staging", "stg_oms__order_headers"), ("staging", "stg_wms__bin_levels"),
               ("staging", "stg_crm__contacts"), ("staging", "stg_catalog__items"), ("staging", "stg_payments__captures"),
               ("staging", "stg_carrier__scans"), ("staging", "stg_web__page_views"), ("analytics", "int_basket_lines"),
               ("analytics", "int_customer_segments"), ("analytics", "int_catalog_prices"), ("analytics", "int_stock_moves"),
               ("analytics", "dim_customer"), ("analytics", "dim_product"), ("analytics", "dim_store"),
               ("analytics", "fct_basket_lines"), ("analytics", "fct_oms_lines_daily"), ("analytics", "fct_oms_headers_daily"),
               ("analytics", "fct_wms_levels_daily"), ("analytics", "fct_page_views"), ("analytics", "fct_carrier_scans_daily"),
               ("marts", "rpt_trading_daily"), ("marts", "rpt_trading_weekly"), ("marts", "rpt_store_performance")]
MODELS_BOOKS = [("books_staging", "stg_gl__journal_lines"), ("books_staging", "stg_gl__cost_centres"),
                ("books", "int_books_fx_rates"), ("books", "fct_books_daily"), ("books", "fct_books_by_entity"),
                ("books", "fct_revenue_daily"), ("books", "fct_revenue_by_channel"), ("books", "rpt_month_close"),
                ("books", "rpt_margin_bridge")]

ORDERS_CFG = "dags/config/orders_nightly.yaml"
ORDERS_SRC = "dags/orders_nightly.py"
APP = "application_1764561203411_0417"
CLUSTER = "j-3KX0Q7VZ2M1PD"

# --- kickoff -------------------------------------------------------------------

new_turn("kickoff")
U(f"Morning! {M['name']} here, data engineering at {M['company']}. Rough night: the {M['pack']} dashboard shows "
  f"yesterday's orders at maybe three quarters of a normal Tuesday, and half of finance's tiles didn't refresh. I've "
  f"opened {M['ticket']} for it. Can you pull what failed or ran long in Airflow overnight?")
sql("select dag_id, run_id, state, start_date, end_date, end_date - start_date as duration from dag_run "
    "where start_date > now() - interval '7 days' order by start_date desc limit 60",
    fit(lambda n: dag_runs_query(n, last_night=True), 60), db="airflow_meta")
say("A few reds and some very long runs. Let me look at the orders DAG's run from last night first, since the "
    "dashboard symptom points there.")
sh(f"airflow tasks states-for-dag-run orders_nightly {run_id(DS)}",
   task_states("orders_nightly", ["order_lines", "order_headers", "order_adjustments"],
               starts={"land.load_order_lines": clock(5, 9, 12)}))
A("Overnight the failures cluster in the commerce and ops DAGs: refunds, inventory and the point-of-sale watch "
  "went red, and the web sessionization step ran for hours. The orders DAG itself shows every task green for "
  "last night's run, which is odd given the dashboard: green tasks with short numbers usually mean something "
  "was forced through rather than loaded cleanly. I would start there.")

new_turn("kickoff")
U(f"Before we touch anything, a ground rule, standing for the whole day: {RULES[0][1]}. Last month someone "
  f"'fixed' a fact table by hand in prod and we spent a week finding out. Incident chatter goes in "
  f"{M['channel']}. Give me the repo layout so we're on the same page.")
sh("tree -L 3 --dirsfirst -I '__pycache__|target|dbt_packages' .", tree_output())
say("And the factory, since every DAG is built through it.")
read("dags/lib/factory.py", numbered(FACTORY_SRC.rstrip("\n").split("\n")))
A("Understood: no hand-written writes against prod. Anything that changes data goes to analytics_scratch first "
  "and gets reviewed, and prod only changes through the pipeline. The layout is one Python DAG file per pipeline "
  "plus a YAML config of the same name, all built through the factory; dbt and the finance dbt project beside it; "
  "Spark jobs and EMR step configs; the Kafka Connect sinks; expectation suites; and Terraform stacks per area. "
  "One thing in the factory worth remembering: it merges per-DAG overrides from Airflow Variables on top of the "
  "YAML, and logs a warning when it does.")

new_turn("kickoff")
U(f"Second rule, also permanent: {RULES[1][1]}. Finance audits those numbers. And FYI, {M['oncall']}, so she's "
  f"who we ping before anything that restarts shared infra. What does a normal night look like for the pipeline, "
  f"order-wise?")
A("Noted for the whole day: every backfill starts as a dry run, the dry run's row counts go into the ticket, and "
  "only then does the real run start. A normal night goes roughly like this: the source exports land in the raw "
  "bucket between midnight and two, the per-feed DAGs start at two and wait on their export sensors, load the raw "
  "partitions through copy-then-merge, build their dbt selection, run the expectation checkpoint and flip the "
  "reporting views. The Spark steps on EMR (sessionization, attribution paths, the LTV features) run in parallel "
  "from one o'clock, and the finance marts build last because they read the order facts. The trading pack reads "
  "the reporting views, so anything that publishes late or short shows up there first.")

new_turn("kickoff")
U("Which tasks have been the slowest this week, and how are the pools set up? I suspect we're starving something.")
sql("select dag_id, task_id, count(*) as runs, round(avg(duration)/60, 2) as avg_minutes, round(max(duration)/60, 2) "
    "as max_minutes, sum(try_number - 1) as retries_used, (array_agg(state order by start_date desc))[1] as last_state "
    "from task_instance where start_date > now() - interval '7 days' group by 1, 2 order by 5 desc limit 45",
    fit(lambda n: task_durations(n), 45), db="airflow_meta")
say("Now the pools, and what is running in the namespace right now.")
sh("airflow pools list -o table && kubectl -n airflow get pods -o wide", pools_list() + "\n\n" + kubectl_pods(18))
A("The slowest tasks this week are the dbt builds and the Spark submissions, with a handful of loaders that "
  "retried several times. The pools look reasonable on paper, but the EMR pool is small and the Spark "
  "submissions sit in it for hours when a step runs long, so one slow job delays the others. That fits last "
  "night: the sessionization step held its slot most of the night.")

new_turn("kickoff")
U(f"OK. Priorities: {M['fpa']} runs FP&A and he's already pinged me. He says {M['deadline']} today, with or "
  f"without finance's tiles, so orders first, then revenue, then the rest. Sound right?")
A("Yes. The pack needs the order facts first, and the revenue marts read them, so fixing orders and then "
  "rebuilding revenue is the critical path. The Spark, inventory and point-of-sale problems do not feed the "
  "pack's front page, so they can follow. I would also keep a short running log in the ticket as we go, so the "
  "afternoon update to FP&A writes itself.")

# --- orders --------------------------------------------------------------------

regular("orders")
U("Let's start with the orders DAG. Show me its config and the DAG file.")
cfg = dag_config(CODES["orders"], planted=[P["O1"]])
read(ORDERS_CFG, cfg, expect=["O1"])
say("The YAML only tells half of it; the DAG file decides what the sensors actually do.")
read(ORDERS_SRC, dag_source(planted=[P["O5"]]), expect=["O5"])
A("The config is the standard shape: three raw sources, copy-then-merge into analytics, the dbt selection by "
  "tag, a blocking checkpoint and a publish step. The sensor settings in the YAML are not what the DAG uses, "
  "though: the DAG file hard-codes the poke interval and the timeouts of both sensors, and only the policy for "
  "late partitions goes through the dbt vars. So a change to the YAML's sensor block would do nothing.")

regular("orders")
U("What did the orders loader pods actually log? Start with the order lines one, and check whether the raw "
  "partition for the 1st is complete by now.")
sh("kubectl -n airflow get pods -l dag_id=orders_nightly --sort-by=.metadata.creationTimestamp -o wide",
   kubectl_pods(22, dag="orders_nightly", kinds=["load-order-lines", "load-order-headers", "load-order-adjustments",
                                                "dbt-build", "quality-gate", "publish"]))
say("The first attempt's pod is gone but its log is kept by the log shipper; fetching it from there.")
sh("kubectl -n airflow logs orders-nightly-load-order-lines-7c9d4f-xk2lp --previous --timestamps=false",
   fit(lambda n: pod_log(n, "oms_v2", ["order_lines", "order_headers"], planted=P["O2"], abort=True), 55),
   expect=["O2"])
say("It refused a partial partition. Checking whether the files are all there now, against a normal day.")
sh(f"aws s3 ls s3://fhp-lake-raw/oms_v2/order_lines/dt={DS}/ --human-readable --summarize | tail -n 70",
   fit(lambda n: s3_ls(n, written=clock(2, 31)), 68))
sh("aws s3 ls s3://fhp-lake-raw/oms_v2/order_lines/dt=2026-11-30/ --human-readable --summarize | tail -n 40",
   fit(lambda n: s3_ls(n, written=clock(1, 12) - datetime.timedelta(days=1)), 38))
A("The first attempt refused the partition: the manifest was already there, but it listed files that had not "
  "landed yet, and the loader's partial-partition check stopped the load as designed. So the exporter is "
  "writing its manifest before it finishes the export, which the sensor cannot tell apart from a finished one. "
  "Both raw partitions are complete now; the timestamps on the 1st's files run well past three in the morning, "
  "an hour and a half later than the 30th's. The export did finish, just late. The question is how a later "
  "attempt ended green.")

regular("orders")
U("Who changed the orders DAG's sensor timing recently? I have a feeling someone tightened it.")
git("git log --date=short --format='%h %ad %an  %s' -n 30 -- dags/orders_nightly.py dags/config/orders_nightly.yaml",
    fit(lambda n: git_log(n, P["O4"], "sensor: poke timeout 6h -> 2h, fail fast when the export is missing",
                          rng.randint(2, 5)), 30), expect=["O4"])
A("There it is: a commit from a couple of weeks ago cut the manifest sensor's timeout so that a missing export "
  "fails fast instead of holding a worker slot. Reasonable on its own, but with the exporter now writing its "
  "manifest early, the sensor succeeds early anyway, and the loader's retries then run out inside the shorter "
  "window. The rest of the history is routine: image bumps, tags, the error table.")

regular("orders")
U("How short are we, exactly? Count what the OMS export has for the 1st against what landed in the orders facts.")
missing = int(P["O3"].split("| ")[1])
loaded = rng.randint(150000, 175000)
gap = {"ds": DS, "source_rows": loaded + missing, "loaded_rows": loaded, "missing_rows": missing,
       "late_rows": rng.randint(0, 900), "checked_at": "2026-12-02 08:14:51"}
sql("select '2026-12-01'::date as ds, s.n as source_rows, f.n as loaded_rows, s.n - f.n as missing_rows, "
    "l.n as late_rows, now()::timestamp(0) as checked_at from (select count(*) n from spectrum_raw.oms_order_lines "
    "where dt = '2026-12-01') s, (select count(*) n from analytics.fct_oms_lines_daily where ds = '2026-12-01') f, "
    "(select count(*) n from staging.load_errors where ds = '2026-12-01') l",
    psql_expanded([gap], KEYS_GAP) + "\n\n" + N(lambda: psql_table(
        ["ds", "source_rows", "loaded_rows", "diff", "load_attempts"],
        [[(TODAY - datetime.timedelta(days=k)).isoformat(), rng.randint(180000, 240000), rng.randint(180000, 240000),
          rng.randint(-3, 3), rng.randint(1, 2)] for k in range(2, 30)], numeric=(1, 2, 3, 4))), expect=["O3"])
A("The gap for the 1st is large, a sizeable share of the day, and every other day of the month matches "
  "the export within a handful of rows. So this is a one-day hole from a partial load, not a slow leak. The "
  "daily comparison is worth keeping as a check in its own right.")

regular("orders")
U("Is the rest of the month OK, or are there other short days hiding in there?")
A("The rest of the month is fine: in the day-by-day comparison every other day matches the export within a "
  "handful of rows, which is normal noise from late corrections. The 1st is the only day with a real gap. "
  "That also argues against a slow leak in the loader itself; the problem is specific to how last night's "
  "partition arrived.")

regular("orders")
U("Then how did the load end up green? Check whether someone overrode the config through Variables.")
sh("airflow variables list -o table | grep -i cfg_override; airflow variables get cfg_override__orders_nightly",
   "\n".join([N(lambda: f"cfg_override__{d}".ljust(40) + "| " + rng.choice(["{}", "{\"sensor\": {}}", "(set)"]))
              for d in rng.sample(DAGS, 12)]) + "\n\n" + json.dumps(
       {"dbt": {"vars": {"late_partition_policy": "allow"}}, "_set_by": "oncall", "_reason": "get the trading pack "
        "out, see incident channel", "_set_at": "2026-12-02T05:07:41Z"}, indent=2) + "\n\n" + "\n".join(
       N(lambda: f"[{iso(clock(5, 0) + datetime.timedelta(seconds=30 * k + rng.randint(0, 29)))}] {{factory.py:52}} "
                 f"WARNING - {rng.choice(DAGS)}: applying {rng.randint(1, 3)} override(s) from Airflow Variables")
       for k in range(24)))
say("There is an override. The log of the attempt that went green should show it being applied.")
sh("aws s3 cp s3://fhp-airflow-logs/dag_id=orders_nightly/run_id=" + run_id(DS) + "/task_id=land.load_order_lines/"
   "attempt=3.log - | tail -n 60",
   fit(lambda n: airflow_task_log("orders_nightly", "land.load_order_lines", 3, 3, n, fail=False, override=True,
                                  start=clock(5, 9, 12)), 46))
A("Found it. The on-call set a Variable override at five in the morning that switched the late-partition "
  "policy to allow, and cleared the load task; the factory merged it over the YAML, the retry loaded whatever "
  "files were there and the rest of the DAG went green on a partial day. That was a judgement call to get "
  "something in front of the execs, and nobody wrote down that the day was partial. The override is still set, "
  "so tonight's run would do the same.")

regular("orders")
U("Right. Plan: remove the override, make the sensor wait for a manifest that's actually complete, and backfill "
  "the 1st. What's the smallest safe change to the DAG?")
A("The smallest change has three parts. First, delete the Variable so tonight runs with the YAML's fail policy. "
  "Second, teach the config a wait policy: the loader already knows how to compare the manifest with the files "
  "that exist, so under wait it sleeps and re-checks instead of refusing, up to the sensor's timeout; that is a "
  "config key and a few lines in the loader, not a DAG rewrite. Third, give that wait a longer ceiling than the "
  "fail-fast timeout from the recent commit, because the exporter's lateness is real. The DAG file's hard-coded "
  "sensor timing stays as it is for now; moving it into the YAML is a good clean-up but not today's fix.")

regular("orders")
U("Do it: patch the orders config and drop the override. Run the DAG integrity tests after.")
diff = make_diff(ORDERS_CFG, FILES[ORDERS_CFG], [
    ("  timeout_minutes:", 1, ["  timeout_minutes: 480",
                               "  # wait policy re-checks the manifest against the files until this runs out"]),
    ("    late_partition_policy: fail", 1, ["    late_partition_policy: wait"]),
])
patch(ORDERS_CFG, diff)
say("Config patched and the hooks pass. Now removing the override Variable.")
sh("airflow variables delete cfg_override__orders_nightly && airflow variables list -o table | grep -c cfg_override",
   "Successfully deleted variable cfg_override__orders_nightly\n11\n\n" + dag_integrity())
A("Patched and checked: the sensor block now allows a longer wait and the dbt var switches to the wait policy; "
  "the integrity tests pass for every DAG, and the override Variable is gone. The other override Variables are "
  "older and unrelated, but worth a sweep another day; several of them have no reason recorded.")

regular("orders")
U(f"Backfill time. We agreed with FP&A this morning: the {M['window']}, because the exporter change shipped on the "
  f"24th and the earlier days might be short too. Dry run first, per the rule.")
days = [(datetime.date(2026, 11, 24) + datetime.timedelta(days=k)).isoformat() for k in range(8)]
sh("python tools/backfill.py --dag orders_nightly --start 2026-11-24 --end 2026-12-01 --dry-run",
   fit(lambda n: backfill_plan("orders_nightly", days[:n], ["land.load_order_lines", "land.load_order_headers",
                                                             "dbt_build", "quality_gate", "publish"]), 8, hi=7800))
A("The dry run clears the land, dbt, quality and publish tasks for each of the eight days, oldest first, one "
  "run at a time in the backfill pool. It also prints the manifest row counts and the current fact counts per "
  "day, which is what the ticket needs. Only the 1st shows a large difference; the other days are within "
  "normal noise, so the earlier days were not hit after all, but reloading them is cheap and makes the window "
  "match what FP&A was told.")

regular("orders")
U("Counts are in the ticket. Kick off the real backfill and show me the run list once it's going.")
sh("python tools/backfill.py --dag orders_nightly --start 2026-11-24 --end 2026-12-01",
   backfill_plan("orders_nightly", days[:3], ["land.load_order_lines", "land.load_order_headers", "dbt_build",
                                              "quality_gate", "publish"], dry=False))
say("Triggered. Listing the runs to see them queue up.")
sh("airflow dags list-runs -d orders_nightly -o table",
   airflow_runs("orders_nightly", 16, first_states=["success"], backfill=["running"] + ["queued"] * 7))
A("The backfill is triggered: eight runs queued in the backfill pool, the first one already loading. Each day "
  "takes roughly half an hour, so the window should be done in about four hours, comfortably before the pack "
  "goes out if nothing else blocks the pool.")

regular("orders")
U("Draft the update for the incident channel: what happened to orders, what we did, what's next. Short, the "
  "execs' assistants read that channel too.")
A("Draft:\n\n*Orders, ds 2026-12-01: partial load published.* The OMS exporter now writes its manifest before "
  "the export finishes. Last night's first load attempt refused the partial partition as designed; an on-call "
  "override to unblock the trading pack then let a retry load the files present at the time, and the DAG "
  "published a partial day.\n*Done:* override removed; orders config switched to a wait policy with a longer "
  "sensor ceiling; integrity tests green; dry-run counts in the ticket; backfill of the agreed window running.\n"
  "*Next:* confirm counts per day after the backfill, rebuild the revenue marts on top, and ask the OMS team "
  "to write the manifest last.", pad=False)

# --- sessions (Spark on EMR) ---------------------------------------------------------

regular("sessions")
U(f"Next: the web_sessionize Spark step ran for nearly five hours last night instead of the usual hour and a bit. "
  f"It's on cluster {CLUSTER}, app id {APP}. What does the app summary say?")
sh(f"aws emr list-steps --cluster-id {CLUSTER} --max-items 14",
   fit(lambda n: emr_steps(n, CLUSTER), 12, hi=7800))
say("The step completed, just slowly. Pulling the application summary from the event log.")
sh(f"python tools/spark_summary.py --app {APP} --event-log s3://fhp-emr-logs/spark-events/",
   spark_summary(APP, planted=P["S1"]), expect=["S1"])
A("Classic skew plus memory pressure. One late stage has a median task of under a minute and a maximum of well "
  "over an hour, so most rows of some key land in a single partition; the executors running those tasks hit "
  "YARN's memory limit and were killed, which forced fetch failures and stage retries, and the spill to disk "
  "is large. Adaptive query execution is off, so Spark neither splits the skewed partition nor coalesces the "
  "tiny ones afterwards.")

regular("sessions")
U("Show me the step's Spark config for web_sessionize, and the YARN log around the lost executors.")
read("emr/steps/web_sessionize/configurations.json", emr_config(planted=P["S2"]), expect=["S2"])
say("Adaptive execution is off in the step config. Now the YARN side of the lost executors.")
sh(f"yarn logs -applicationId {APP} -log_files stderr | grep -E 'Lost|killed|FetchFailed|Resubmitting|Requesting' | tail -n 60",
   fit(lambda n: yarn_log(n), 60))
A("The config confirms it: adaptive execution, skew join and partition coalescing are all disabled, the "
  "shuffle partition count is fixed and high, and there is no cap on records per file. The YARN log shows the "
  "same story from the other side: containers killed for exceeding physical memory on the skewed tasks, then "
  "fetch failures and resubmitted stages. Raising memory alone would just make the skewed tasks slower to die.")

regular("sessions")
U("And the output side. I bet the sessions partition for the 1st is a pile of tiny files. List it.")
sh(f"aws s3 ls s3://fhp-lake-curated/web_sessions/dt={DS}/ --human-readable --summarize | tail -n 60",
   fit(lambda n: s3_ls(n, total=P["S3"], written=clock(4, 21)), 58), expect=["S3"])
say("For comparison, the same prefix for a day last week.")
sh("aws s3 ls s3://fhp-lake-curated/web_sessions/dt=2026-11-24/ --human-readable --summarize | tail -n 40",
   fit(lambda n: s3_ls(n, written=clock(2, 14) - datetime.timedelta(days=7)), 40))
A("Yes: last night's partition has thousands of small objects, most of them a few hundred kilobytes, against "
  "a few dozen large files a week ago. Every downstream reader pays for that in request overhead, and the "
  "attribution step reads this partition next. Coalescing at write time fixes it at the source.")

regular("sessions")
U(f"Before we tune anything: remember we're on an {M['budget']} and we were over in October. Whatever we do "
  f"can't just be 'more nodes'. What did the Spark steps cost per day over the last two weeks?")
sql("select usage_date, job_tag, round(sum(cost), 2) as cost_usd, round(sum(instance_hours)/1000, 1) as "
    "instance_hours_k, max(nodes) as peak_nodes, round(100.0 * sum(spot_hours) / sum(instance_hours), 1) as "
    "spot_share_pct from finops.emr_daily_cost where usage_date > current_date - 14 group by 1, 2 order by 1, 2",
    fit(lambda n: cost_table(n), 14))
A("The sessionization step is the most expensive of the Spark jobs on most days, and last night it cost several "
  "times its usual amount, almost all of it the long tail; the other steps are flat. That is the before number. "
  "And agreed, and the fix here should make the step cheaper, not dearer. Turning on adaptive execution lets Spark "
  "split the skewed partitions and merge the tiny ones at run time, which removes the long tail that kept a "
  "whole cluster busy for hours. Capping records per output file and repartitioning by the output partition "
  "before the write gets rid of the small files. Neither needs more memory or more nodes; if anything the "
  "executors can stay as they are and the step should finish in about its old time.")

regular("sessions")
U("Patch the step config: AQE on with skew join and coalescing, cap the records per file. Don't touch memory.")
cfg_lines = FILES["emr/steps/web_sessionize/configurations.json"]
diff = make_diff("emr/steps/web_sessionize/configurations.json", cfg_lines, [
    ('"spark.sql.adaptive.enabled"', 3, [
        '      "spark.sql.adaptive.enabled": "true",',
        '      "spark.sql.adaptive.coalescePartitions.enabled": "true",',
        '      "spark.sql.adaptive.skewJoin.enabled": "true",',
        '      "spark.sql.adaptive.advisoryPartitionSizeInBytes": "134217728",',
        '      "spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes": "536870912",']),
    ('"spark.sql.files.maxRecordsPerFile"', 1, ['      "spark.sql.files.maxRecordsPerFile": "2000000",']),
])
patch("emr/steps/web_sessionize/configurations.json", diff, checks="dbt")
say("Config done. The writer also needs to repartition by the output partition before writing, or the file cap "
    "alone just splits the same small files further.")
patch("spark/jobs/web_sessionize/writer.py", "\n".join([
    "--- a/spark/jobs/web_sessionize/writer.py", "+++ b/spark/jobs/web_sessionize/writer.py",
    "@@ -24,9 +24,11 @@ def write_partition(df: DataFrame, ds: str, target: str) -> int:",
    "     \"\"\"Writes one day's rows to the curated table and returns the row count.\"\"\"",
    "     out = df.withColumn(\"dt\", F.lit(ds))",
    "     count = out.count()",
    "-    (out.write",
    "+    # One shuffle into a handful of files per day instead of one file per task.",
    "+    (out.repartition(\"dt\")",
    "+        .write",
    "         .mode(\"overwrite\")",
    "         .partitionBy(\"dt\")",
    "         .format(\"parquet\")",
    "-        .save(target))",
    "+        .option(\"maxRecordsPerFile\", 2_000_000).save(target))",
    "     return count"]))
A("Both changes are in: adaptive execution with skew handling and coalescing, a per-file record cap, and a "
  "repartition by day before the write. Memory settings are untouched, as asked.")

regular("sessions")
U("Re-run the step for the 1st on the same cluster and show me the new summary.")
sh(f"aws emr add-steps --cluster-id {CLUSTER} --steps file://emr/steps/web_sessionize/step.json && "
   f"aws emr list-steps --cluster-id {CLUSTER} --max-items 8",
   '{\n    "StepIds": [\n        "s-' + hexs(13).upper() + '"\n    ]\n}\n' + fit(lambda n: emr_steps(n, CLUSTER), 7, lo=1000))
say("The step is submitted and has finished. The summary of the new application:")
sh("python tools/spark_summary.py --app application_1764561203411_0433 --event-log s3://fhp-emr-logs/spark-events/",
   spark_summary("application_1764561203411_0433", slow=False))
A("Much better: the rerun finished in roughly its old time, no executors lost, no failed tasks, and the spill "
  "is negligible. Adaptive execution split the skewed partition into several tasks, and the final stage wrote "
  "a few dozen files instead of thousands. I would leave tonight's scheduled run as the real test.")

regular("sessions")
U("For the PR description: explain the skew-join part of AQE in two sentences, for people who don't live in Spark.")
A("When one key has far more rows than the others, the task that gets that key does most of the work while "
  "the rest of the cluster waits. With skew handling on, Spark notices an oversized partition at run time and "
  "splits it into several smaller tasks, so the work is shared out instead of landing on one executor.",
  pad=False)

regular("sessions")
U("Nice. Anything downstream of sessions that needs a rerun now?")
A("The attribution step reads the sessions partition, and it ran last night on the small-file version, so its "
  "numbers for the 1st are built on complete data but were slow to produce; they do not need a rerun for "
  "correctness. The web dashboards read the sessions table directly and will simply be faster. I would not "
  "rerun anything else today.")

# --- inventory (GX) ---------------------------------------------------------------

regular("inventory")
U("Inventory next. The inventory_snapshot DAG failed its quality gate. Show me its config and its recent runs.")
read("dags/config/inventory_snapshot.yaml", dag_config(CODES["inventory"], planted=[P["I1"]]), expect=["I1"])
say("And its recent runs.")
sh("airflow dags list-runs -d inventory_snapshot -o table", airflow_runs("inventory_snapshot", 20, first_states=["failed", "failed", "success", "success"]))
A("The config is the usual shape with a blocking checkpoint, and the runs show the gate failing for the last "
  "two nights in a row, after weeks of green. Because the gate blocks publish, the reporting view is still on "
  "the last good partition, so the stock tiles are stale rather than wrong.")

regular("inventory")
U("Run the inventory checkpoint again and open the validation result for the failing suite.")
sh("great_expectations checkpoint run nightly_gate --batch-request '{\"data_asset_name\": \"wms_levels\"}'",
   ge_checkpoint_cli(["wms_levels.critical", "wms_levels.warning", "wms_transfers.critical"], ["wms_levels.critical"]))
say("The critical suite fails. Opening its stored result for the details.")
read(f"gx/uncommitted/validations/wms_levels/critical/{DS.replace('-', '')}T0412Z/result.json",
     ge_result("wms_levels.critical", ["on_hand_qty", "bin_id", "sku_id", "site_code", "reserved_qty", "snapshot_ts"],
               planted_count=P["I2"], bad_col="on_hand_qty"), expect=["I2"])
A("One expectation fails: the on-hand quantity must be at least zero, and a block of rows now has negative "
  "values. Everything else in the suite passes. The sample of unexpected values is small negative numbers, "
  "which looks like stock movements being netted rather than garbage data.")

regular("inventory")
U("Which sites and SKUs have the negative quantities? Top ones are enough.")
sql("select site_code, sku_id, on_hand_qty, reserved_qty, last_adjustment_type, last_adjustment_at from "
    "analytics.fct_wms_levels_daily where ds = '2026-12-01' and on_hand_qty < 0 order by on_hand_qty limit 50",
    fit(lambda n: N(lambda: psql_table(["site_code", "sku_id", "on_hand_qty", "reserved_qty", "last_adjustment_type",
                                         "last_adjustment_at"],
                                        [[rng.choice(["DC-NORTH", "DC-WEST", "HUB-07", "HUB-11", "HUB-14"]),
                                          f"SKU{rng.randint(100000, 999999)}", -rng.randint(1, 40), rng.randint(0, 9),
                                          rng.choice(["customer_return", "customer_return", "cycle_count", "damage"]),
                                          f"2026-12-0{rng.randint(1, 2)} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}"]
                                         for _ in range(n)], numeric=(2, 3))), 50))
A("Nearly all of them have a customer return as their last adjustment. So the warehouse system has started "
  "sending returns as negative adjustments against the bin, where it used to send them as a separate movement "
  "type; our staging model sums adjustments into on-hand and goes below zero whenever a return is booked "
  "before the goods arrive back.")

regular("inventory")
U("Makes sense, the WMS team did a release last week. What's the right fix on our side?")
A("Treat returns as their own bucket in the staging model: sum them into a returns-pending quantity instead of "
  "into on-hand, and let on-hand change only when the return is received. The expectation stays as it is, "
  "because a negative on-hand quantity is genuinely wrong; it just stops firing once returns are no longer "
  "netted. I would also add a test that the returns bucket is never negative either, and ask the WMS team to "
  "confirm the new movement semantics in writing.")

regular("inventory")
U("The ops team will ask why their stock tiles say Monday. What do I tell them?")
A("That the stock numbers for the last two nights failed a quality check, so the dashboard deliberately kept "
  "showing the last figures that passed. The cause is a change in how the warehouse system books customer "
  "returns, which made some stock levels negative; we have adapted to it, and tomorrow morning's tiles will be "
  "current again. Nothing they saw was wrong, just older than usual.")

regular("inventory")
U("Patch the WMS staging model that way and run its tests.")
patch("dbt/models/staging/wms/stg_wms__bin_levels.sql", "\n".join([
    "--- a/dbt/models/staging/wms/stg_wms__bin_levels.sql", "+++ b/dbt/models/staging/wms/stg_wms__bin_levels.sql",
    "@@ -18,12 +18,16 @@ adjustments as (",
    "     select",
    "         bin_id,",
    "         sku_id,",
    "-        sum(quantity) as adjusted_qty",
    "+        sum(case when adjustment_type <> 'customer_return' then quantity else 0 end) as adjusted_qty,",
    "+        -- returns are booked before the goods arrive; they wait in their own bucket",
    "+        sum(case when adjustment_type = 'customer_return' then -quantity else 0 end) as returns_pending_qty",
    "     from {{ source('wms_levels', 'adjustments') }}",
    "     where ds = '{{ var(\"run_date\") }}'",
    "     group by 1, 2",
    " ),",
    "@@ -41,6 +45,7 @@ final as (",
    "         b.site_code,",
    "         b.on_hand_qty + coalesce(a.adjusted_qty, 0) as on_hand_qty,",
    "+        coalesce(a.returns_pending_qty, 0) as returns_pending_qty,",
    "         b.reserved_qty,",
    "         b.snapshot_ts",
    "     from bins b"]), checks="dbt")
say("Patched. Running the tests on the model and everything downstream of it.")
sh("cd dbt && dbt test --select stg_wms__bin_levels+ --target prod",
   dbt_test(["stg_wms__bin_levels", "fct_wms_levels_daily", "int_stock_moves", "rpt_store_performance"], 38))
A("Patched and tested: the staging model keeps returns in their own column and the downstream tests all pass "
  "against last night's data. The expectation will pass on the next checkpoint run once the model is rebuilt "
  "by tonight's DAG.")

# --- point-of-sale sink (Kafka Connect) ------------------------------------------------

POS_GROUP = "connect-pos-s3-sink"
regular("pos")
U("The pos_sink_watch DAG went red too: it checks that the POS sink into the lake keeps up. How far behind is "
  "the consumer group?")
sh(f"kafka-consumer-groups.sh --bootstrap-server $MSK_BOOTSTRAP --describe --group {POS_GROUP}",
   kafka_groups(POS_GROUP, "store.txn.v2", 24, stuck=(9, 14, 17)))
say("A few partitions stand out. lagctl shows the trend over the last hours.")
sh(f"lagctl describe --group {POS_GROUP} --window 6h", lagctl(24, planted=P["P1"], stuck=(9, 14, 17)), expect=["P1"])
A("Three partitions are stuck: no commits for hours and their lag growing, while the rest keep up. The total "
  "lag is large but concentrated, so this is not the sink being slow overall; three of its tasks stopped "
  "making progress. lagctl's drain estimate assumes those partitions recover, so it is optimistic until they "
  "do.")

regular("pos")
U("Show me the POS sink's connector config and its status.")
read("connect/sinks/pos-s3-sink.json", connect_config(planted=P["P2"]), expect=["P2"])
sh("curl -s http://kafka-connect.kafka.svc:8083/connectors/pos-s3-sink/status | jq .",
   connect_status("pos-s3-sink", 6, failed=(3,)))
say("Task 3 is failed. Its worker log should say what it was doing when it gave up.")
sh("kubectl -n kafka logs deploy/kafka-connect --since=8h | grep -E 'pos-s3-sink' | tail -n 80",
   fit(lambda n: connect_worker_log(n, "pos-s3-sink"), 80))
A("One of the six tasks is failed with an S3 SlowDown error wrapped as unrecoverable, and the stuck partitions "
  "are the ones assigned to it. The connector tolerates record errors but not a failed part upload once its "
  "retries are exhausted, so the task stopped and nobody restarted it. The config itself is unremarkable: "
  "time-based partitioning by hour, parquet, a dead-letter topic.")

regular("pos")
U("Why would S3 throttle us? It's not that much data.")
A("It is request rate per prefix, not volume. The sink writes every partition's files under the same hourly "
  "prefix, and last night the rotation produced many small parts at once across all tasks while the backfill "
  "of an unrelated export was hammering the same bucket. S3 throttles a hot prefix until it repartitions "
  "internally, and the SlowDown retries ran out. Restarting the failed task will drain the backlog; "
  "longer-term, spreading the writes or lowering the part count per rotation would keep it from recurring.")

regular("pos")
U("Restart the failed task. Brannagh's fine with it, I asked in the incident channel.")
sh("curl -s -X POST http://kafka-connect.kafka.svc:8083/connectors/pos-s3-sink/tasks/3/restart && sleep 120 && "
   "curl -s http://kafka-connect.kafka.svc:8083/connectors/pos-s3-sink/status | jq .",
   connect_status("pos-s3-sink", 6) + "\n" + connect_worker_log(24, "pos-s3-sink"))
say("Restarted and running. Checking the clickstream sink on the same bucket too.")
sh("lagctl describe --group connect-clickstream-s3-sink --window 6h", lagctl(12))
A("The task is running again and has started committing for the stuck partitions. I also checked the "
  "clickstream sink, which shares the bucket: it is healthy and caught up, so the throttling only bit the one "
  "task. The point-of-sale backlog should be gone within a few hours at the current consume rate.")

regular("pos")
U("Could the POS lag have skewed anything in the trading pack?")
A("Not the pack's order figures: those come from the online order system, not the store tills. The store "
  "performance page does read the point-of-sale data, and with three partitions behind it undercounts some "
  "stores for the last hours of the day. Once the backlog drains, the next rebuild of that report corrects "
  "it, so I would mention it in the update rather than rebuild anything now.")

regular("pos")
U("Should we alert on a failed connector task directly instead of waiting for the lag check?")
A("Yes. The lag check is a symptom alarm and fires hours late for a stuck task, because a few partitions can "
  "be far behind while the total stays under its threshold. Kafka Connect exposes task state in its metrics, "
  "so an alert on any task in the failed state for more than five minutes would have paged last night within "
  "minutes. I would keep the lag check as a backstop and add an auto-restart with a cap of a few attempts, "
  "since most of these failures are transient throttling.")

# --- revenue (the books project) ------------------------------------------------------

regular("revenue")
U("Revenue. The finance_revenue DAG has to rebuild on top of the fixed orders. Show me its config and last "
  "night's task states.")
read("dags/config/finance_revenue.yaml", dag_config(CODES["revenue"], planted=[P["R3"]]), expect=["R3"])
sh(f"airflow tasks states-for-dag-run finance_revenue {run_id(DS, dag='finance_revenue')}",
   task_states("finance_revenue", ["journal_lines", "cost_centres"],
               {"dbt_build": "failed", "quality_gate": "upstream_failed", "publish": "upstream_failed"}))
say("dbt_build failed on its last attempt; reading that attempt's log.")
sh("aws s3 cp s3://fhp-airflow-logs/dag_id=finance_revenue/run_id=" + run_id(DS, dag="finance_revenue") + "/task_id=dbt_build/attempt=2.log - "
   "| tail -n 50", fit(lambda n: airflow_task_log("finance_revenue", "dbt_build", 2, 2, n, body="dbt"), 36))
A("The config is the standard shape with the dbt selection pointing at the finance project's tag and a tier-1 "
  "SLA; last night the loads succeeded but the dbt build failed, so nothing was published and the finance "
  "tiles stayed on Monday's data. That is actually the better failure: stale and obviously stale.")

regular("revenue")
U("Before we rebuild anything in revenue, snapshot a checksum of fct_revenue_daily for November so we can "
  "prove what changed. Read-only, obviously.")
rec = {"month": "2026-11", "row_total": rng.randint(40000, 60000), "checksum": P["R1"],
       "net_cents_total": rng.randint(10 ** 10, 9 * 10 ** 10), "entities": rng.randint(6, 14),
       "first_ds": "2026-11-01", "last_ds": "2026-11-30", "taken_at": "2026-12-02 09:41:07"}
sql("select to_char(ds, 'YYYY-MM') as month, count(*) as row_total, md5(listagg(ds || entity_id || channel || "
    "net_cents, ',') within group (order by ds, entity_id, channel)) as checksum, sum(net_cents) as net_cents_total, "
    "count(distinct entity_id) as entities, min(ds) as first_ds, max(ds) as last_ds, getdate()::timestamp(0) as "
    "taken_at from books.fct_revenue_daily where ds between '2026-11-01' and '2026-11-30' group by 1",
    psql_expanded([rec], list(rec)) + "\n\n" + N(lambda: psql_table(
        ["ds", "row_total", "net_cents"],
        [[(datetime.date(2026, 11, 1) + datetime.timedelta(days=k)).isoformat(), rng.randint(1300, 2100),
          rng.randint(10 ** 8, 9 * 10 ** 8)] for k in range(30)], numeric=(1, 2))), expect=["R1"])
A("Snapshot taken: one checksum over the whole month in a stable order, the row count and the net total, plus "
  "the per-day counts below it. I would paste the whole output into the ticket; after the rebuild we run the "
  "same query and compare day by day.")

regular("revenue")
U("Show me the finance dbt project's profiles and project file. I want to know what it runs with in prod.")
read("dbt_books/profiles.yml", profiles_yml(P["R2"]), expect=["R2"])
say("And the project file.")
read("dbt_books/dbt_project.yml", DBT_PROJECT_BOOKS)
A("The profiles file has dev, CI and prod targets against the same cluster, with the prod target on its own "
  "query group so its queries land in the ETL queue. The project builds its marts as delete-plus-insert "
  "incrementals keyed on day, entity and account, with a post-hook that grants and analyzes. Nothing unusual, "
  "and the concurrency is modest, which matters for the rebuild's run time.")

regular("revenue")
U("Run the finance marts build against prod for the 1st and let's see the failure.")
sh("cd dbt_books && dbt run --select marts --vars '{run_date: 2026-12-01}' --target prod",
   dbt_run(MODELS_BOOKS, failures=("fct_revenue_by_channel",), project_counts="Found 38 models, 212 data tests, "
           "9 sources, 0 exposures, 744 macros"))
A("Same failure as last night: the revenue-by-channel model references a dedup relation in staging that no "
  "longer exists. That relation was dropped in a clean-up of the staging schema last week; the model should "
  "read the deduplicated staging view that replaced it.")

regular("revenue")
U("Ugh, that clean-up. Fix the ref and rerun the marts, then the tests.")
patch("dbt_books/models/marts/fct_revenue_by_channel.sql", "\n".join([
    "--- a/dbt_books/models/marts/fct_revenue_by_channel.sql", "+++ b/dbt_books/models/marts/fct_revenue_by_channel.sql",
    "@@ -9,7 +9,7 @@ with lines as (",
    "     select ds, entity_id, channel, net_cents, gross_cents, tax_cents",
    "-    from staging.revenue_by_channel__dedup",
    "+    from {{ ref('stg_gl__journal_lines') }}",
    "     where ds = '{{ var(\"run_date\") }}'",
    "       and line_status = 'posted'",
    " ),"]), checks="dbt")
say("Reference fixed; rebuilding the marts and running their tests.")
sh("cd dbt_books && dbt run --select marts --vars '{run_date: 2026-12-01}' --target prod && dbt test --select marts",
   dbt_run(MODELS_BOOKS, project_counts="Found 38 models, 212 data tests, 9 sources, 0 exposures, 744 macros") + "\n" +
   dbt_test([m for _, m in MODELS_BOOKS], 26))
A("The marts build cleanly now and their tests pass. This run used the orders facts as they stand, which for "
  "the 1st are still partial until the backfill reaches that day, so I would rebuild once more after the "
  "orders backfill finishes and only then compare checksums.")

regular("revenue")
U("Why are those marts delete+insert rather than merge? Genuinely curious.")
A("Because the finance marts are rebuilt a whole day at a time: every row of a day is recomputed from the "
  "journal lines, so deleting the day and inserting it again is simpler and cheaper on Redshift than a merge "
  "that compares every row. It also makes reruns idempotent for a day, which is what we rely on when we "
  "rebuild after a backfill. A merge only pays off when a day is updated piecemeal.")

regular("revenue")
U(f"Draft a two-line note to {M['fpa'].split()[0]} on where revenue stands.")
A("Draft:\n\nRevenue for the 1st failed to build last night on a broken reference and is fixed; it will be "
  "rebuilt once the orders backfill completes, so the finance tiles refresh with complete data before the "
  "pack goes out. November's figures are snapshotted, and we will confirm which days change, if any.",
  pad=False)

# --- attribution -------------------------------------------------------------------

def by_device():
    rows = [[c, d, f"{rng.uniform(200, 20000):.2f}", rng.randint(1000, 90000)] for c in CHANNELS
            for d in ["app_ios", "app_android", "web_desktop", "web_mobile"]]
    return N(lambda: psql_table(["channel", "device", "credit_value", "credit_rows"], rows, numeric=(2, 3)))


regular("attribution")
U("Marketing says paid social's share jumped in the attribution numbers this week. Show me the windows module "
  "in our attribution lib, and the email engagement one for comparison.")
read("dags/lib/attribution/windows.py", windows_module(P["A1"]), expect=["A1"])
say("Now the email engagement module for comparison.")
read("dags/lib/email/windows.py", windows_module(doc="Engagement windows"))
A("Both modules share the same shape: a click window, a view-through window, a dedup window and a "
  "position-based split with equal weight on the first and the last contact. The difference that matters is "
  "the view-through window, which is much wider in the marketing one than in the email one. Social is mostly "
  "impressions, so a wider view-through window is exactly what would inflate its share.")

regular("attribution")
U("Pull the channel shares from the attribution mart for last week and the week before.")
attr = ATTR_TABLE
sql("select channel, count(distinct order_ref) as orders_touched, round(sum(credit_cents) / 100.0, 2) as credit_value, "
    "round(100.0 * sum(credit_cents) / sum(sum(credit_cents)) over (), 2) as share_pct, round(avg(contacts), 2) as "
    "avg_contacts from marts.marketing_attribution_daily where ds between '2026-11-25' and '2026-12-01' group by 1 "
    "order by 3 desc; select channel, device, round(sum(credit_cents) / 100.0, 2) as credit_value, count(*) as "
    "credit_rows from marts.marketing_attribution_daily where ds between '2026-11-25' and '2026-12-01' group by 1, 2 "
    "order by 1, 2", attr + f"\n\nTime: {rng.uniform(900, 4000):.3f} ms\n\n" + by_device(), expect=["A2"])
_w = [float(r[3]) * (0.5 if r[0] in ("paid_social", "display") else 1.08) for r in ATTR_ROWS]
_total = rng.randint(96000, 131000)
prev = [[r[0], rng.randint(4000, 60000), f"{_total * x / sum(_w):.2f}", f"{100 * x / sum(_w):.2f}",
         f"{rng.uniform(0.4, 2.2):.2f}"] for r, x in zip(ATTR_ROWS, _w)]
say("And the week before.")
sql("-- the same two statements, ds between '2026-11-18' and '2026-11-24'", N(lambda: psql_table(
    ["channel", "orders_touched", "credit_value", "share_pct", "avg_contacts"], prev, numeric=(1, 2, 3, 4))) +
    f"\n\nTime: {rng.uniform(900, 4000):.3f} ms\n\n" + by_device())
A("Paid social's share is clearly up week on week, and the other impression-heavy channels moved the same way "
  "while click-driven ones lost share. That pattern is what a wider view-through window produces, not a real "
  "change in behaviour.")

regular("attribution")
U("When did the window change, and was it on purpose?")
git("git log --date=short --format='%h %ad %an  %s' -n 12 -- dags/lib/attribution/windows.py",
    "\n".join([f"{hexs(7)} 2026-11-24 {AUTHORS[6]}  attribution: widen view-through window per marketing request (#3371)"]
              + [N(lambda: f"{hexs(7)} 2026-{rng.randint(3, 10):02d}-{rng.randint(1, 28):02d} {rng.choice(AUTHORS)}  "
                           f"{rng.choice(SUBJECTS_GIT)}") for _ in range(11)]) + "\n\n" +
    git_log(26, day=TODAY - datetime.timedelta(days=2)))
A("On purpose: it was widened on the 24th at marketing's request, in a reviewed PR. So the numbers are what "
  "marketing asked for; the surprise is on their side. I would send them the before and after shares and let "
  "them decide whether the wider window stays, rather than revert it ourselves.")

regular("attribution")
U("Agreed, I'll forward it. Is the attribution Spark step itself healthy? It reads the sessions output.")
sh("python tools/spark_summary.py --app application_1764561203411_0421 --event-log s3://fhp-emr-logs/spark-events/",
   spark_summary("application_1764561203411_0421", slow=True))
A("It ran slower than usual and spilled, largely because it had to open thousands of small session files; the "
  "failures are a handful of executors lost to memory pressure on the same skewed key. With the sessions "
  "output coalesced from tonight, this should recover on its own. If it does not, it gets the same adaptive "
  "settings.")

regular("attribution")
U("Lunch in ten. Quick status across everything so far?")
A("Orders: cause found, config fixed, override removed, backfill running. Sessions: step tuned and re-run, "
  "small files fixed at the writer. Inventory: staging model fixed for returns, the gate should pass tonight. "
  "Point-of-sale sink: failed task restarted, backlog draining. Revenue: broken reference fixed, rebuild waits "
  "for the orders backfill. Attribution: the change was intentional, numbers sent to marketing. Still open: "
  "refunds, shipments, the supplier feed and the LTV DAG.")

# --- the nightly_core selection ------------------------------------------------------

regular("dbt")
U("Back. While we wait on the backfill, the nightly_core dbt selection needs a full refresh after last week's "
  "column changes; Ilka asked for it yesterday. Check source freshness, then run it.")
sh("cd dbt && dbt source freshness --select source:oms_v2 source:wms_levels source:crm_profiles source:carrier_events",
   dbt_freshness([f"{s}.{t}" for s in ["oms_v2", "wms_levels", "crm_profiles", "carrier_events"]
                  for t in ["order_lines", "headers", "bin_levels", "profiles", "scans", "handovers"]][:18]))
say("Sources are fresh enough. Starting the full refresh; this takes a while.")
sh("cd dbt && dbt run --selector nightly_core --full-refresh --target prod",
   dbt_run(MODELS_CORE, elapsed=P["D1"], full_refresh=True, hour=13), expect=["D1"])
A("Sources are fresh apart from one warning on a slow feed. The full refresh went through without errors; it "
  "rebuilt every staging view, the dimensions and the incremental facts from scratch, which is why it took "
  "much longer than a nightly incremental run. The trading reports at the end of the selection were rebuilt "
  "too, on the orders facts as they stand right now.")

regular("dbt")
U("Run the tests for nightly_core and give me the tail.")
sh("cd dbt && dbt test --selector nightly_core --target prod 2>&1 | tail -n 60",
   dbt_test([m for _, m in MODELS_CORE], 40, tally=P["D2"], hour=14), expect=["D2"])
A("Mostly green. The failures are uniqueness and not-null tests on the order facts for the 1st, which is the "
  "partial day the backfill has not reached yet, and the warnings are recency and range checks that tend to "
  "wobble after a full refresh. I would rerun these tests after the backfill before calling it done.")

# --- refunds -------------------------------------------------------------------------

regular("refunds")
U("Refunds. refunds_daily went red on a uniqueness test. How many duplicated refund IDs are we talking about? "
  "Last 14 days.")
_dupes = int(P["F1"].split("| ")[1])
_rows = rng.randint(40000, 60000)
drec = {"window_start": "2026-11-18", "window_end": DS, "row_total": _rows,
        "distinct_ids": _rows - _dupes, "dupe_ids": _dupes,
        "dupe_amount_cents": rng.randint(10 ** 6, 9 * 10 ** 6), "first_seen": "2026-11-21 03:12:44",
        "last_seen": "2026-12-01 23:58:02"}
sql("select min(ds) as window_start, max(ds) as window_end, count(*) as row_total, count(distinct refund_id) as "
    "distinct_ids, count(*) - count(distinct refund_id) as dupe_ids, sum(case when rn > 1 then amount_cents end) as "
    "dupe_amount_cents, min(case when rn > 1 then received_at end) as first_seen, max(case when rn > 1 then "
    "received_at end) as last_seen from (select *, row_number() over (partition by refund_id order by received_at) "
    "as rn from staging.stg_payments__refunds where ds > current_date - 14); -- and the same per day",
    psql_expanded([drec], KEYS_DUPES) + "\n\n" + N(lambda: psql_table(
        ["ds", "rows", "distinct_keys", "extra_rows", "extra_amount_cents"],
        [[(datetime.date(2026, 11, 18) + datetime.timedelta(days=k)).isoformat(), r, r - x, x,
          0 if k < 3 else rng.randint(10 ** 4, 10 ** 6)]
         for k in range(14) for r, x in [(rng.randint(2800, 4500), 0 if k < 3 else rng.randint(10, 120))]],
        numeric=(1, 2, 3, 4))), expect=["F1"])
say("A sample of the duplicated rows, to see what differs between the copies.")
sql("select refund_id, gateway_event_id, received_at, amount_cents, status from staging.stg_payments__refunds where "
    "refund_id in (select refund_id from staging.stg_payments__refunds group by 1 having count(*) > 1) order by 1, 3 "
    "limit 60", fit(lambda n: N(lambda: psql_table(
        ["refund_id", "gateway_event_id", "received_at", "amount_cents", "status"],
        [[f"rf_{hexs(10)}", f"evt_{hexs(12)}", f"2026-11-{rng.randint(21, 30)} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:"
          f"{rng.randint(0, 59):02d}", rng.randint(100, 90000), rng.choice(["succeeded", "succeeded", "pending"])]
         for _ in range(n)], numeric=(3,))), 60))
A("The duplicates start on the 21st and each pair has the same refund id but two different gateway event ids "
  "a few minutes apart: the payment gateway re-sends the refund event when our webhook acknowledgement is "
  "slow, and the new event gets a new event id. The staging model deduplicates on the event id, so both copies "
  "survive.")

regular("refunds")
U("Who last touched the refunds staging model? And show me what that change was.")
git("git log --date=short --format='%h %ad %an  %s' -n 20 -- dbt/models/staging/payments/stg_payments__refunds.sql",
    fit(lambda n: git_log(n, P["F2"], "staging: dedupe on the gateway's event id instead of our row id", 0), 20,
        ), expect=["F2"])
say("And the change itself.")
git("git diff HEAD~6 -- dbt/models/staging/payments/stg_payments__refunds.sql", "\n".join([
    "diff --git a/dbt/models/staging/payments/stg_payments__refunds.sql b/dbt/models/staging/payments/stg_payments__refunds.sql",
    f"index {hexs(7)}..{hexs(7)} 100644",
    "--- a/dbt/models/staging/payments/stg_payments__refunds.sql",
    "+++ b/dbt/models/staging/payments/stg_payments__refunds.sql",
    "@@ -1,38 +1,38 @@",
    " {{ config(materialized='incremental', unique_key='refund_row_id', on_schema_change='append_new_columns') }}",
    " ",
    " with source as (",
    "     select * from {{ source('payments', 'refund_events') }}",
    "     {% if is_incremental() %}",
    "     where received_at > (select max(received_at) from {{ this }}) - interval '3 days'",
    "     {% endif %}",
    " ),",
    " ",
    " ranked as (",
    "     select",
    "         *,",
    "-        row_number() over (partition by refund_row_id order by received_at) as rn",
    "+        row_number() over (partition by gateway_event_id order by received_at) as rn",
    "     from source",
    " ),",
    " ",
    " final as (",
    "     select",
    "         refund_row_id,",
    "         refund_id,",
    "         gateway_event_id,",
    "         order_ref,",
    "         amount_cents,",
    "         currency,",
    "         reason_code,",
    "         status,",
    "         received_at,",
    "         received_at::date as ds",
    "     from ranked",
    "     where rn = 1",
    " )",
    " ",
    " select * from final",
    "diff --git a/dbt/models/staging/payments/_payments__models.yml b/dbt/models/staging/payments/_payments__models.yml",
    f"index {hexs(7)}..{hexs(7)} 100644",
    "--- a/dbt/models/staging/payments/_payments__models.yml",
    "+++ b/dbt/models/staging/payments/_payments__models.yml",
    "@@ -41,14 +41,16 @@ models:",
    "     columns:",
    "       - name: refund_row_id",
    "         tests:",
    "           - not_null",
    "-          - unique",
    "+      - name: gateway_event_id",
    "+        tests:",
    "+          - not_null",
    "+          - unique",
    "       - name: refund_id",
    "         tests:",
    "           - not_null",
    "-          - unique",
    "+          - unique:",
    "+              config: {severity: warn}",
    "       - name: amount_cents",
    "         tests:",
    "           - dbt_utils.expression_is_true:",
    "               expression: \">= 0\""]))
A("The last change swapped the dedup key from our row id to the gateway's event id. That fixed the old problem "
  "of our own replays, but it assumes the gateway reuses the event id on a re-send, and it does not. The key "
  "that is stable across both kinds of repeat is the refund id with its status.")

regular("refunds")
U("Fix it: dedupe on refund id plus status, keep the earliest. Then the tests for the refunds models.")
patch("dbt/models/staging/payments/stg_payments__refunds.sql", "\n".join([
    "--- a/dbt/models/staging/payments/stg_payments__refunds.sql",
    "+++ b/dbt/models/staging/payments/stg_payments__refunds.sql",
    "@@ -12,7 +12,8 @@ ranked as (",
    "     select",
    "         *,",
    "-        row_number() over (partition by gateway_event_id order by received_at) as rn",
    "+        -- the gateway re-sends a refund with a new event id when our ack is slow",
    "+        row_number() over (partition by refund_id, status order by received_at) as rn",
    "     from source",
    " ),"]), checks="dbt")
say("Patched. Rebuilding from scratch so the existing copies go away.")
sh("cd dbt && dbt build --select stg_payments__refunds+ --target prod --full-refresh",
   dbt_run([("staging", "stg_payments__refunds"), ("analytics", "int_refunds_by_order"), ("analytics", "fct_refunds_daily"),
            ("marts", "rpt_refunds_weekly")], full_refresh=True) + "\n" +
   dbt_test(["stg_payments__refunds", "int_refunds_by_order", "fct_refunds_daily"], 22))
A("Rebuilt with a full refresh so the existing duplicates disappear, and the uniqueness test passes. The "
  "refund totals for late November drop accordingly; finance should hear about that before they notice it "
  "in the pack.")

# --- shipments -------------------------------------------------------------------------

regular("refunds")
U("Does the refunds fix change anything finance already reported for November?")
A("It changes the refund totals for the days since the duplicates started, so net figures for those days go "
  "up slightly once the marts are rebuilt. Whether that touches anything already reported depends on "
  "finance's close: if November is not closed yet, it lands before the close; if it is, it is a post-close "
  "adjustment they need to hear about. Worth asking before the rebuild rather than after.")

regular("shipments")
U("shipments_daily: its quality gate failed and its sensor waited most of the night. Show me the shipments DAG "
  "file and its config.")
read("dags/shipments_daily.py", dag_source(planted=[P["H1"]]), expect=["H1"])
say("The sensor offset is in code. The config, for completeness:")
read("dags/config/shipments_daily.yaml", dag_config(CODES["shipments"]))
A("The upstream sensor waits for the carrier export DAG's publish task at a fixed offset from our own "
  "schedule, set in the DAG file. If the carrier DAG moved its schedule, that offset now points at a run that "
  "never exists, and the sensor waits until its timeout; the config's sensor block does not affect it.")

regular("shipments")
U("Open the shipments expectation result from last night, and check how late the carrier scans arrived.")
read(f"gx/uncommitted/validations/carrier_scans/critical/{DS.replace('-', '')}T0455Z/result.json",
     ge_result("carrier_scans.critical", ["scan_ts", "parcel_id", "hub_code", "scan_type", "received_at"],
               planted_pct=P["H2"], bad_kind="pair"), expect=["H2"])
say("One expectation fails. Checking how late the scans came in, by hub.")
sql("select hub_code, count(*) as scans, percentile_cont(0.5) within group (order by received_at - scan_ts) as "
    "p50_delay, max(received_at - scan_ts) as max_delay, sum(case when received_at - scan_ts > interval '6 hours' "
    "then 1 else 0 end) as late_rows from staging.stg_carrier__scans where ds = '2026-12-01' group by 1 order by 5 desc",
    N(lambda: psql_table(["hub_code", "scans", "p50_delay", "max_delay", "late_rows"],
                         [[f"HUB-{k:02d}", rng.randint(2000, 40000), f"00:{rng.randint(1, 59):02d}:{rng.randint(0, 59):02d}",
                           f"{rng.randint(1, 14):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}", rng.randint(0, 3000)]
                          for k in range(1, 29)], numeric=(1, 4))))
A("The failing expectation is the ordering check on scan and receipt times, a few percent of rows; the query "
  "shows why: a handful of hubs delivered their scans many hours late, so receipt times of the next day are "
  "mixed into the partition. That is the carrier's lateness showing up in our checks, and the sensor offset "
  "bug made it worse by starting us late anyway.")

regular("shipments")
U("The carrier team did move their DAG an hour earlier last week. Fix the delta?")
A("Yes, but better to stop hard-coding it. The sensor can compute the delta from the two schedules, since both "
  "DAGs are ours and their schedules are in their configs; then a schedule change on either side cannot break "
  "the pairing again. For tonight, the quick fix is to set the delta to the new difference, and the computed "
  "version can follow in its own PR with a test that pairs every ExternalTaskSensor with a real upstream run.")

# --- supplier feed ------------------------------------------------------------------------

regular("supplier")
U(f"supplier_feeds failed on {M['vendor']}'s price file from the SFTP inbox. Run csvcheck on today's supplier file.")
sh("ls -la /mnt/sftp/inbox/marrowgate/ && csvcheck --spec feeds/prices_v3.yaml "
   "/mnt/sftp/inbox/marrowgate/PRC_20261202_full.csv.gz",
   "\n".join(["total " + str(rng.randint(400000, 900000))] +
             [N(lambda: f"-rw-r----- 1 sftp-partner data-ingest "
                        f"{(rng.randint(20, 60) * 1024 ** 2 if ext == 'csv.gz' else rng.randint(0, 300)) + rng.randint(180, 900):>9} "
                        f"{d + datetime.timedelta(days=1):%b %e} 0{rng.randint(0, 4)}:{rng.randint(10, 59)} "
                        f"PRC_{d:%Y%m%d}_{kind}.{ext}")
              for d in [TODAY - datetime.timedelta(days=k) for k in range(13, -1, -1)]
              for kind in (["full"] if d.weekday() else ["delta", "full"])
              for ext in ["csv.gz", "manifest.json"]]) + "\n\n" +
   csvcheck("PRC_20261202_full.csv.gz", P["V1"]), expect=["V1"])
A("The file declares UTF-8 but has at least one byte that is not valid UTF-8, in the description column, "
  "which is what a Latin-1 encoded accented letter looks like. The feed's tolerance for encoding errors is zero, "
  "so the whole file is rejected; the field-count and date-format problems are within tolerance and were there "
  "before.")

regular("supplier")
U("Did they re-encode it after generating the manifest? Compare the supplier file's hash with the manifest.")
sh("cd /mnt/sftp/inbox/marrowgate && sha256sum PRC_*.csv.gz && cat PRC_20261202_full.manifest.json",
   sha_listing(P["V2"], "PRC_20261202_full.csv.gz"), expect=["V2"])
A("The file's hash does not match the one in its manifest, while earlier days match theirs. So the file was "
  "changed after the manifest was written, most likely by the EDI gateway re-encoding it on the way out, which "
  "would also explain a Latin-1 byte in a file generated as UTF-8.")

regular("supplier")
U("Should we just read it as latin-1 when UTF-8 fails?")
A("Not silently. A fallback that guesses the encoding would have hidden this, and the next re-encoding might be "
  "something a fallback decodes wrongly without an error. I would reject the file as we do, add the hash "
  "mismatch to the rejection message so the supplier sees it is their gateway, and ask them to resend. If they "
  "cannot fix the gateway quickly, a per-feed declared encoding in the spec is the honest option.")

regular("supplier")
U("Fine. Add the hash check to the feed reader's rejection message and draft the note to the dairy.")
patch("dags/lib/loaders/sftp_feed.py", "\n".join([
    "--- a/dags/lib/loaders/sftp_feed.py", "+++ b/dags/lib/loaders/sftp_feed.py",
    "@@ -88,10 +88,17 @@ def validate(path: Path, spec: FeedSpec) -> list[str]:",
    "     problems: list[str] = []",
    "     manifest = read_manifest(path)",
    "+    actual = sha256_of(path)",
    "+    if manifest.sha256 != actual:",
    "+        problems.append(",
    "+            f\"{path.name}: sha256 differs from its manifest; the file was changed after the manifest was \"",
    "+            \"written (re-encoding by a gateway?). Please resend the file as generated.\"",
    "+        )",
    "     result = run_csvcheck(path, spec)",
    "     if result.encoding_errors > spec.max_encoding_errors:",
    "         problems.append(f\"{path.name}: {result.encoding_errors} encoding error(s), first at line {result.first_encoding_error}\")",
    "     if result.rejected_rows > spec.max_rejected_rows:",
    "         problems.append(f\"{path.name}: {result.rejected_rows} rows rejected\")",
    "     return problems"]))
A("Patched, and the integrity tests pass. Draft for the supplier:\n\nToday's full price file failed validation: it "
  "is declared UTF-8 but contains Latin-1 bytes, and its checksum no longer matches the manifest generated with "
  "it, which suggests it was re-encoded after generation, possibly by your EDI gateway. Could you resend the "
  "file as generated? Yesterday's prices stay in use until then.")

# --- customer LTV -----------------------------------------------------------------------

regular("supplier")
U("Do other suppliers send files through that same EDI gateway?")
A("I cannot tell from our side; the inbox only shows who sent each file, not which gateway handled it. The "
  "manifests carry a sender field, so a quick look across the other suppliers' manifests would show which "
  "ones share it. I would ask the EDI team directly as well, since a re-encoding step would affect every file "
  "that passes through it.")

regular("ltv")
U("The customer_ltv DAG has been retrying all morning. Show me the LTV DAG's config and its runs.")
read("dags/config/customer_ltv.yaml", dag_config(CODES["ltv"], planted=[P["L1"]]), expect=["L1"])
sh("airflow dags list-runs -d customer_ltv -o table", airflow_runs("customer_ltv", 22, first_states=["running", "success", "success"]))
say("The current run is on its fourth attempt of the features task; here is the previous attempt's log.")
sh("aws s3 cp s3://fhp-airflow-logs/dag_id=customer_ltv/run_id=" + run_id(DS, dag="customer_ltv") + "/task_id=spark_step/attempt=3.log - "
   "| tail -n 60", fit(lambda n: airflow_task_log("customer_ltv", "spark_step", 3, 6, n), 44))
A("It retries on a slow schedule with many attempts, which is why it has been going all morning: the Spark "
  "features step fails on the same refunds data we just fixed, then waits and tries again. With refunds "
  "rebuilt, the next attempt should go through.")

regular("ltv")
U("Once it's through, sanity-check the LTV distribution. Percentiles, and explain the query so I know it won't "
  "hammer the cluster.")
prec = {"population": rng.randint(900000, 1400000), "p50_value": f"{rng.randint(100, 300)}.{rng.randint(10, 99)}",
        "p90_value": f"{rng.randint(700, 1300)}.{rng.randint(10, 99)}", "p99_value": P["L2"].split("| ")[1],
        "max_value": f"{rng.randint(20000, 90000)}.{rng.randint(10, 99)}", "null_values": rng.randint(0, 400),
        "computed_at": "2026-12-02 14:52:10"}
sql("select count(*) as population, percentile_cont(0.5) within group (order by ltv_12m) as p50_value, "
    "percentile_cont(0.9) within group (order by ltv_12m) as p90_value, percentile_cont(0.99) within group (order by "
    "ltv_12m) as p99_value, max(ltv_12m) as max_value, sum(case when ltv_12m is null then 1 else 0 end) as "
    "null_values, getdate()::timestamp(0) as computed_at from marts.customer_ltv where ds = '2026-12-01'; -- then the "
    "same by first-order cohort",
    psql_expanded([prec], KEYS_PCTL) + "\n\n" + N(lambda: psql_table(
        ["cohort_month", "customers", "p50", "p90", "mean_value", "null_rows"],
        [[f"{2024 + (k + 11) // 12}-{(k + 11) % 12 + 1:02d}", rng.randint(20000, 90000), f"{rng.uniform(60, 320):.2f}",
          f"{rng.uniform(500, 1400):.2f}", f"{rng.uniform(150, 500):.2f}", rng.randint(0, 40)] for k in range(24)],
        numeric=(1, 2, 3, 4, 5))), expect=["L2"])
say("The percentiles look reasonable. Now the plan for the heavier feature query.")
sql("explain select ... from analytics.fct_basket_lines b join analytics.dim_customer c using (customer_id) where "
    "ds between '2026-11-01' and '2026-12-01'", explain_analyze() + "\n\n" + table_info(16))
A("The distribution looks sane: the median and the upper percentiles are in line with last month's, and the "
  "nulls are the new customers without a full year. The plan for the heavier feature query is a hash join "
  "with redistribution of the inner side, which is fine at night, and the customer dimension is missing "
  "statistics, which deserves an ANALYZE after today's rebuilds.")

# --- infrastructure plans --------------------------------------------------------------

regular("ltv")
U("Should the LTV features read refunds from the fixed staging model, or from the raw events?")
A("From the fixed staging model. The raw events are exactly what had the duplicates, and the features would "
  "need their own de-duplication that could drift from the staging one. Reading the model keeps one definition "
  "of a refund for finance and the models alike.")

regular("infra")
U("Two Terraform PRs are waiting on me. First the lake retention stack; plan it.")
sh("cd infra/stacks/lake-retention && terraform init -input=false >/dev/null && terraform plan -input=false -out=tfplan",
   terraform_plan("lake", P["T1"]), expect=["T1"])
A("Careful with this one. The plan shortens the expiry of the raw partitions by a lot and suspends versioning on "
  "the raw bucket. Today is exactly the case it would break: we rebuilt the curated layer and backfilled from "
  "raw partitions a week old. With the new expiry, a backfill of a window like today's might find nothing to "
  "reload. I would ask for the expiry to stay at least as long as the longest backfill we would ever run.")

regular("infra")
U("Good catch, I'll push back on that. Now the warehouse cluster stack, the month-end resize.")
sh("cd infra/stacks/dw-cluster && terraform plan -input=false -out=tfplan", terraform_plan("dw", P["T2"]),
   expect=["T2"])
say("And the biggest tables on the cluster, since the resize is about them.")
sql("select \"schema\", \"table\", diststyle, sortkey1, size as size_mb, pct_used, tbl_rows, skew_rows, unsorted from "
    "svv_table_info order by size desc limit 20", table_info(20))
A("The resize changes the node type and count in place, moves the maintenance track and switches the workload "
  "manager to automatic mode. An in-place resize keeps the cluster read-only for a while, so it must not run "
  "during the nightly window or month-end close. The largest tables are the order and basket facts, and two "
  "of them are badly unsorted, so a vacuum after the resize would help as much as the extra nodes.")

regular("infra")
U("Schedule-wise, when would you apply the resize?")
A("On a weekend morning after the nightly pipeline has published and before anyone runs month-end queries, "
  "with the on-call told in advance. Not before the first working day's close, since finance reads the books "
  "marts heavily then. I would also apply the workload manager change separately first: it is the riskier part "
  "for query behaviour and it is easy to roll back on its own.")

# --- backfill, rebuild and the write-up ------------------------------------------------

regular("backfill")
U("How's the orders backfill doing? Show me the runs, and whether anything's stuck in the pools.")
sh("airflow dags list-runs -d orders_nightly --state running,queued,success -o table | head -n 30",
   airflow_runs("orders_nightly", 18, first_states=["success"], backfill=["success"] * 5 + ["running", "queued", "queued"]))
sql("select pool, count(*) filter (where state = 'running') as running, count(*) filter (where state = 'queued') as "
    "queued, max(now() - queued_dttm) as longest_wait from task_instance where state in ('running', 'queued') group "
    "by 1 order by 3 desc", N(lambda: psql_table(["pool", "running", "queued", "longest_wait"],
                                                   [[p, rng.randint(0, 6), rng.randint(0, 12),
                                                     f"00:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"]
                                                    for p in ["backfill", "etl_default", "dbt_prod", "spark_emr",
                                                              "gx_checks", "default_pool"]], numeric=(1, 2))) + "\n\n" +
    dag_runs_query(30), db="airflow_meta")
say("Five of the eight days are done; the pods for the current day are below.")
sh("kubectl -n airflow get pods -l run_type=backfill -o wide",
   kubectl_pods(24, dag="orders_nightly", kinds=["load-order-lines", "load-order-headers", "dbt-build", "quality-gate"]))
sh("kubectl -n airflow logs orders-nightly-load-order-lines-b4k2m9-7sd2q --tail=60",
   fit(lambda n: pod_log(n, "oms_v2", ["order_lines", "order_headers"]), 56))
A("Five days are through, the sixth is loading and nothing is queued behind it in the backfill pool. At this "
  "pace the 1st, the day that matters, finishes in a little over an hour, which still leaves time to rebuild "
  "revenue before the pack goes out.")

regular("write-up")
U("While it runs, start the postmortem timeline for the orders part.")
A("Timeline (all times UTC):\n\n- Mid-November: a commit shortens the manifest sensor's timeout so a missing "
  "export fails fast.\n- The 24th: the OMS team ships an exporter change that writes the manifest before the "
  "export finishes.\n- The night of the 1st: the export finishes late; the manifest sensor succeeds early; the "
  "first load attempt refuses the partial partition; retries run into the same state.\n- About five in the "
  "morning: the on-call sets an override that allows partial partitions and clears the task; the DAG loads the "
  "files present and publishes.\n- Morning: the trading pack shows short orders; ticket opened.\n- Today: "
  "override removed, wait policy added, backfill of the agreed window, revenue rebuilt on top.")

regular("write-up")
U(f"I've opened {M['pr']} for the orders config and the wait policy in the loader. Write me the PR description.")
A("**What**: the orders DAG waits for a complete partition instead of failing fast, and the loader gains a wait "
  "policy that re-checks the manifest against the files in the bucket until the sensor's ceiling runs out.\n\n"
  "**Why**: the OMS exporter now writes its manifest before the export finishes, so a present manifest no "
  "longer means a complete partition. Last night that led to a partial day being published (see the ticket).\n\n"
  "**How tested**: DAG integrity tests; loader unit tests for the wait and fail policies; a backfill of the "
  "agreed window with dry-run counts in the ticket.\n\n**Not in this PR**: moving the hard-coded sensor timing "
  "from the DAG file into the YAML, and an alert for Variable overrides.", pad=False)

regular("write-up")
U("Jonah left a review comment: 'why not just lengthen the poke timeout back instead of a new policy?'. What do I "
  "tell him?")
A("That a longer timeout only helps when the manifest is missing; last night it was present but premature, so "
  "the sensor succeeded and the timeout never came into play. The wait policy checks what the manifest claims "
  "against what is actually in the bucket, which is the condition we care about. His fail-fast change stays "
  "useful for a missing export, and the two work together: the sensor fails fast when nothing arrives, the "
  "loader waits when something arrives incomplete.")

regular("write-up")
U("Jonah approved. Merge now, or wait until after tonight's run?")
A("Merge now, through the PR once CI is green on the final commit, so tonight's run uses the wait policy; the "
  "whole point is to find out whether it holds against a late export. Merging after tonight would mean one "
  "more night on the old behaviour with no override to save it. If tonight goes wrong, the revert is one PR.")

regular("write-up")
U("Should on-call overrides be allowed to publish a partial day at all?")
A("Allowed, yes, because sometimes a partial number on time is worth more than a complete one late. Silently, "
  "no. I would make the publish step record whether the partition was complete, show that flag on the "
  "dashboards as a banner, and have the factory post to the incident channel whenever it applies an override. "
  "Then the judgement call stays available but everyone downstream can see it was made.")

regular("backfill")
U("Backfill's done. Recount the window against the export, rebuild revenue, and rerun the checksum query.")
sql("select f.ds, s.n as source_rows, f.n as loaded_rows, s.n - f.n as diff from (select ds, count(*) n from "
    "analytics.fct_oms_lines_daily where ds between '2026-11-24' and '2026-12-01' group by 1) f join (select dt as ds, "
    "count(*) n from spectrum_raw.oms_order_lines where dt between '2026-11-24' and '2026-12-01' group by 1) s using (ds) "
    "order by 1", N(lambda: psql_table(["ds", "source_rows", "loaded_rows", "diff"],
                                       [[d, x, x - rng.randint(0, 2), 0] for d in days
                                        for x in [rng.randint(180000, 240000)]], numeric=(1, 2, 3))) + "\n\n" +
    N(lambda: psql_table(["ds", "source", "manifest_files", "files_loaded", "rows_merged"],
                         [[d, src, n, n, rng.randint(20000, 240000)] for d in days
                          for src in ["order_lines", "order_headers", "order_adjustments"]
                          for n in [rng.randint(150, 320)]], numeric=(2, 3, 4))) + "\n\n" +
    N(lambda: psql_table(["ds", "late_rows", "error_rows", "load_attempts", "completed_at"],
                         [[d, rng.randint(0, 300), rng.randint(0, 20), 1, f"2026-12-02 {rng.randint(10, 15)}:"
                           f"{rng.randint(10, 59)}:{rng.randint(10, 59)}"] for d in days], numeric=(1, 2, 3))))
say("The counts line up. The last backfill day's loader log, to be sure it loaded everything in one attempt:")
sh("kubectl -n airflow logs orders-nightly-load-order-lines-q8w3n1-k2p7d --tail=60",
   fit(lambda n: pod_log(n, "oms_v2", ["order_lines", "order_headers", "order_adjustments"]), 58))
say("One attempt, no error rows over budget. Rebuilding the finance marts on top.")
sh("cd dbt_books && dbt run --select marts --vars '{run_date: 2026-12-01}' --target prod",
   dbt_run(MODELS_BOOKS, project_counts="Found 38 models, 212 data tests, 9 sources, 0 exposures, 744 macros", hour=15))
rec2 = dict(rec, checksum=hexs(32), row_total=rec["row_total"] + rng.randint(1, 40), taken_at="2026-12-02 15:38:22",
            net_cents_total=rec["net_cents_total"] + rng.randint(10 ** 6, 10 ** 8))
sql("-- the same checksum query as this morning, on books.fct_revenue_daily for November",
    psql_expanded([rec2], list(rec2)) + "\n\n" + N(lambda: psql_table(
        ["ds", "row_total_before", "row_total_after", "changed"],
        [[(datetime.date(2026, 11, 1) + datetime.timedelta(days=k)).isoformat(), rng.randint(1300, 2100),
          rng.randint(1300, 2100), "yes" if k >= 23 and rng.random() < 0.4 else "no"] for k in range(30)],
        numeric=(1, 2))))
A("Every day of the window now matches the export to within a couple of rows, and the 1st is whole. The "
  "revenue marts rebuilt cleanly; November's checksum changed, as expected, and the per-day comparison shows "
  "the changes limited to the last week of the month, from the refunds de-duplication, with nothing before the "
  "21st moving. That is the story for finance: a few days corrected for duplicated refunds, nothing else.")

regular("write-up")
U("Draft the note to FP&A with that. No numbers in the message itself, they'll read them off the tiles.")
A("Draft:\n\nThe order facts for the 1st are complete again and the finance marts are rebuilt on top; your tiles "
  "in the trading pack are current. November's revenue changed only for the last days of the month, where "
  "duplicated refund events had been counted twice since the 21st; earlier days are unchanged. The before "
  "and after figures are in the ticket if you want to check them.", pad=False)

regular("write-up")
U("Cormac replied: 'can we trust the pack going forward?' Give me an honest answer I can send.")
A("Draft:\n\nYes, with one caveat we are closing. Last night's problem was a partial day published without any "
  "visible mark; the orders pipeline now waits for complete data instead, and we are adding a completeness "
  "flag so that if a partial day is ever published on purpose, the pack says so. Until that flag ships, we "
  "will confirm in the incident channel whenever a day is published late or incomplete.", pad=False)

regular("write-up")
U("Did the reporting views actually flip? I don't want to tell the execs it's fixed and have the pack read the "
  "old partition.")
A("They flip in the publish task of each backfill run, and the last run's publish succeeded, so the orders view "
  "points at the rebuilt partition. The revenue view flipped when the finance DAG's publish ran after the "
  "rebuild. The one that has not moved is the stock view, which waits for tonight's run with the returns fix, "
  "and that is deliberate.")

regular("supplier")
U("The dairy resent their price file just now. Anything we need to kick off?")
A("The file sensor picks it up on its next poke and the feed task reruns on its own; the new hash check and "
  "the encoding check both run before the load. If they pass, today's prices load and the catalog sync picks "
  "them up in its next run. I would just watch that task go green rather than trigger anything by hand.")

regular("checks")
U("Rerun the expectation checkpoint across the board and the nightly_core tests, so we know where we stand "
  "before I send anything.")
sh("great_expectations checkpoint run nightly_gate",
   ge_checkpoint_cli(["oms_core.critical", "oms_core.warning", "wms_levels.critical", "carrier_scans.critical",
                      "books_core.critical", "crm_scores.critical", "promo_core.critical", "web_sessions.warning"],
                     ["wms_levels.critical", "carrier_scans.critical"]))
say("Checkpoint done. Now the nightly_core tests.")
sh("cd dbt && dbt test --selector nightly_core --target prod 2>&1 | tail -n 40",
   dbt_test([m for _, m in MODELS_CORE], 30, hour=15,
            warn=[("dbt_utils_recency_fct_carrier_scans_daily_day_event_ts__1", 1)]))
A("Two suites still fail, both expected: the stock one until tonight's rebuild with the returns fix, and the "
  "carrier one until the sensor delta is corrected and the late scans settle. The order and finance suites "
  "pass now, and the nightly_core tests are clean apart from a recency warning.")

regular("write-up")
U("Contributing factors for the postmortem, beyond the timeline?")
A("Four, I think. The manifest stopped meaning 'complete' after an upstream change nobody told us about. The "
  "sensor timing is hard-coded in the DAG file, so the YAML gave a false picture of how long we wait. The "
  "override mechanism lets a partial day publish without any visible mark. And the reconciliation between the "
  "export and the facts exists only as a query we ran by hand today, not as a check in the pipeline.")

regular("write-up")
U("And the action items, with owners as placeholders.")
A("Action items:\n\n1. OMS team: write the manifest last, after every file (owner: OMS lead).\n2. Us: wait policy "
  "in the loader (done, in review).\n3. Us: move sensor timing from the DAG files into the YAML configs, with a "
  "test that the YAML is what the DAG uses (owner: data eng).\n4. Us: publish records a completeness flag and "
  "the dashboards show it (owner: data eng with BI).\n5. Us: the factory posts to the incident channel whenever "
  "it applies an override (owner: data eng).\n6. Us: export-versus-facts reconciliation as an expectation on "
  "every feed (owner: data eng).\n7. Platform: alert on failed connector tasks (owner: platform on-call).",
  pad=False)

regular("write-up")
U("Help me word the ask to the OMS team. I don't want it to sound like blame.")
A("Draft:\n\nSince last week's exporter release the manifest appears before the export finishes, and last "
  "night that let a partial day through to our reports. We have made our side wait for complete files, but "
  "the most robust fix is on yours: could the manifest be written last, once every file is in place? Happy to "
  "pair on it, and to test it against a staging export.", pad=False)

regular("write-up")
U("Who should hear about the exporter change, apart from the OMS team?")
A("Anyone else who consumes that export: the search team reads the same order lines for their ranking "
  "features, and the fraud models read the headers. If their jobs also key on the manifest, they loaded the "
  "same partial day last night. A short message to both with the ticket link is enough; they can check their "
  "own counts.")

regular("sessions")
U("On the Spark side, do the other EMR steps need the same AQE settings?")
A("The ones that join on customer or session keys do, because those keys are skewed the same way: the "
  "attribution paths and the LTV features. The smaller rollups are fine without it. I would make adaptive "
  "execution the default in the shared step template and let a step opt out, rather than copy the settings "
  "into each step's configuration and have them drift.")

regular("attribution")
U("Marketing replied: they want to keep the wider view-through window. Anything we need to do?")
A("Only make it visible. The change moves credit between channels, so week-on-week comparisons across the 24th "
  "are not like for like; a note on the attribution dashboard and in the model's description would stop "
  "someone from presenting the jump as a real shift. Nothing to change in the code.")

regular("shipments")
U("Let's do the shipments delta properly tomorrow. What should the PR contain?")
A("A helper in the factory that derives the execution delta from the two DAGs' schedules, the shipments DAG "
  "using it instead of its literal, and a test that walks every ExternalTaskSensor in the repo, resolves its "
  "upstream schedule and asserts the pairing lands on a real run. That test would have caught the carrier "
  "team's schedule move before it broke anything.")

regular("infra")
U("How do I phrase the pushback on the lake retention PR without starting a fight about storage costs?")
A("Suggested review comment:\n\nThe saving is real, but today's incident needed raw partitions a week old to "
  "backfill from, and the proposed expiry would make a similar backfill impossible after a few more weeks. "
  "Could we keep raw at least as long as our longest supported backfill window, and find the saving in the "
  "curated layer or with intelligent tiering instead? Happy to look at the numbers together.", pad=False)

regular("write-up")
U("What's the runbook entry for 'dashboard shows a short day'? Draft it.")
A("Runbook: a dashboard shows a short day\n\n1. Find the feed: which reporting view backs the tile, and which "
  "DAG publishes it.\n2. Compare the export with the facts for that day (the reconciliation query in the "
  "runbook's appendix).\n3. Check the DAG run: green tasks with a short count usually mean an override; check "
  "the Airflow Variables for a config override on that DAG.\n4. Check the raw partition in S3: file count and "
  "timestamps against a normal day.\n5. Fix forward: remove any override, fix the cause, then backfill with a "
  "dry run first and the counts in the ticket.\n6. Rebuild the dependants (finance marts read the order "
  "facts) and confirm the reporting views flipped.", pad=False)

regular("write-up")
U("What should the on-call watch tonight?")
A("Four things: the orders DAG should wait rather than fail or publish early if the export is late again; the "
  "stock DAG's checkpoint should pass with the returns fix; the sessionization step should finish in about "
  "an hour with few output files; and the point-of-sale sink should show no stalled partitions. If any of "
  "those go wrong, the runbook entry covers the first, and the others can wait for the morning unless the "
  "pack is affected.")

regular("checks")
U("Last check: is the POS sink fully caught up now, and did any DAG fail since lunch?")
sh(f"lagctl describe --group {POS_GROUP} --window 2h", lagctl(24, window="2h"))
say("Caught up. Now the DAG runs since lunch.")
sql("select dag_id, run_id, state, start_date, end_date, end_date - start_date as duration from dag_run where "
    "start_date > now() - interval '4 hours' order by start_date desc", fit(lambda n: dag_runs_query(n), 40),
    db="airflow_meta")
A("The sink is caught up: no stalled partitions and the lag is back to seconds. Since lunch the only failures "
  "are the two we know about; everything else, including the backfill runs, succeeded.")

regular("write-up")
U("Write the message to the exec team's channel. Plain language, three sentences.")
A("Draft:\n\nLast night's order figures in the trading pack were incomplete because an upstream export "
  "finished late; they have been reloaded and checked, and the pack is now correct. Finance figures were "
  "rebuilt on the corrected orders, with a small correction for duplicated refunds in late November. Stock "
  "figures stay on Monday's data until tonight's run and will be current tomorrow morning.", pad=False)

regular("write-up")
U("Anything from today that should go into the team's tech-debt list rather than an action item?")
A("Three things. The factory's Variable overrides have no expiry, so old ones linger; several have been set "
  "for months with no reason recorded. The EMR step configurations are copied per step instead of sharing a "
  "template. And the expectation suites test each table on its own; there is no suite that compares a "
  "feed's totals across layers, from raw through staging to the marts, which is what would have caught "
  "today's problem automatically.")

regular("write-up")
U("How long would the cross-layer suite take to build?")
A("A first version is a couple of days: one expectation per feed that compares the raw row count from the "
  "manifest, the staging count and the fact count for the run's day, with a tolerance per feed for known "
  "filtering. The harder part is agreeing the tolerances with each feed's owner. I would start with orders and "
  "refunds, where today showed it matters, and add the others as their owners sign off.")

regular("write-up")
U("Could we just turn today's reconciliation query into a dbt test tonight?")
A("Not tonight. As a test it would run inside the same DAG that loads the data, and without agreed "
  "tolerances it would either fail every night on normal late corrections or be loose enough to miss a "
  "quarter-day gap. I would write it tomorrow with the orders owner, start it at warn severity for a week to "
  "see its noise, and only then make it blocking.")

regular("write-up")
U("Alright. What's left open at the end of today, in one list?")
A("Open:\n- orders PR in review (wait policy and config);\n- shipments sensor delta, computed version tomorrow;\n"
  "- stock checkpoint, confirm tonight;\n- supplier resend of the price file;\n- lake retention plan, pushed back;"
  "\n- warehouse resize, to schedule for a weekend;\n- marketing to decide on the view-through window;\n- "
  "postmortem review on Friday.", pad=False)

FILLER_TURNS = [
    ("Any review comments on the open PRs yet?",
     "One on the orders PR asking for a test of the wait policy's timeout path, and an approval on the refunds fix. "
     "The test is quick to add; I would push it before the end of the day."),
    ("Is CI green on the orders branch after the last push?",
     "Yes: lint, the DAG integrity tests and the loader unit tests all passed on the last push."),
    ("Anything else you'd double-check before tonight's run?",
     "Only that no new override Variables were set during the day; everything else is in the on-call notes."),
    ("Give me the day in three lines for tomorrow's standup.",
     "Orders: partial day found, fixed forward and backfilled; revenue rebuilt and refunds de-duplicated. Spark "
     "sessionization tuned, point-of-sale sink restarted, stock and carrier checks waiting on tonight. Open: "
     "shipments sensor delta, supplier resend, two Terraform plans."),
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
            A(a, pad=False)
            last_was_question = False
            continue
        maybe_ask()
    new_turn("wrap-up")
    U("That's it for me today. Thanks, that was a lot. Anything you'd flag before I log off?")
    A("Only the on-call handover: tonight's run is the real test of the orders and stock fixes, and the notes "
      "are in the ticket. Nothing was written to prod by hand today, and the one backfill ran only after its "
      "dry run's counts were in the ticket.", pad=False)


finish()


# ---------------------------------------------------------------------------

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
        _, pattern = subject_of(label)
        k = next(k for k, i in enumerate(items) if text in i["content"])
        call, out = items[k - 1], items[k]["content"]
        assert call["kind"] == "tool_call" and call["call_id"] == items[k]["call_id"]
        assert not re.search(pattern, out, re.I), (label, re.search(pattern, out, re.I))
        user = next(i for i in items if i["turn"] == items[k]["turn"] and i["role"] == "user")
        assert re.search(pattern, call["content"] + "\n" + user["content"], re.I), label
    # Turns: each starts with the user's message; every call has its result, in the same turn.
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
    for _, rule in RULES:
        assert any(rule in i["content"] for i in items if i["role"] == "user"), rule
    for c in everything:
        c.encode("ascii")
    sizes = [len(i["content"].encode()) for i in items if i["kind"] == "tool_result"]
    bad = [(i["turn"], i["tool_name"], len(i["content"].encode())) for i in items
           if i["kind"] == "tool_result" and not 1300 <= len(i["content"].encode()) <= 7200]
    assert not bad, bad
    for which in ("tune", "held"):
        asked = [p for p in probes[which] if p["facts"]]
        assert len(asked) >= 12, which
        for p in asked:
            assert 50 <= p["turn"] <= turn_no
            for fid in p["facts"]:
                f = next(f for f in facts if f["id"] == fid)
                assert p["turn"] - f["turn"] >= MIN_GAP
    tuned = {fid for p in probes["tune"] for fid in p["facts"]}
    held = {fid for p in probes["held"] for fid in p["facts"]}
    assert not tuned & held, tuned & held
    assert turn_no == 130, turn_no
    return sizes, turns


def main():
    sizes, turns = check()
    tool_lines = [l for i in items if i["kind"] == "tool_result" for l in i["content"].split("\n")]
    common = {w: sum(1 for l in tool_lines if re.search(r"\b" + w, l, re.I)) for w in
              ["table", "job", "run", "error", "rows", "partition"]}
    assert min(common.values()) >= 200, common
    tool_turns = sum(1 for its in turns.values() if any(i["kind"] == "tool_call" for i in its))
    assert 0.25 <= tool_turns / turn_no <= 0.40, tool_turns
    assert 480 <= len(items) <= 550, len(items)
    fact_points = [40, 80, 120, turn_no]

    def write(name, rows):
        with open(os.path.join(HERE, name), "w") as out:
            for r in rows:
                out.write(json.dumps(r, ensure_ascii=False) + "\n")

    write("analytics.jsonl", [{"system_prompt": SYSTEM}] + items)
    write("analytics_facts.jsonl", facts)
    common_probes = ([{"kind": "instruction", "turn": t, "text": rule} for t, rule in RULES]
                     + [{"kind": "facts", "turn": t} for t in fact_points])
    write("analytics_probes.jsonl", common_probes + sorted(probes["tune"], key=lambda p: p["turn"]))
    write("analytics_heldout_probes.jsonl", common_probes + sorted(probes["held"], key=lambda p: p["turn"]))
    blob = sum(len(i["content"].encode()) for i in items)
    print(f"{turn_no} turns, {len(items)} items, {call_no} tool calls in {tool_turns} turns "
          f"({100 * tool_turns / turn_no:.0f}%), outputs {min(sizes)}-{max(sizes)} bytes "
          f"(~{min(sizes) // 4}-{max(sizes) // 3} tokens), {len(facts)} facts "
          f"({sum(f['source'] == 'tool' for f in facts)} from tools), {len(probes['tune'])} tuning and "
          f"{len(probes['held'])} held-out recall probes, {blob} bytes of content; output lines with: "
          + ", ".join(f"{w} {n}" for w, n in common.items()))


main()
