#!/usr/bin/env python3
"""Writes the plat2 programme replay conversation used by tools/replay.

Tarnow Mutual, an insurer, moves fifteen workstreams off its legacy hall-B
estate onto the plat2 Kubernetes platform. The platform lead works through
them with an assistant that can read files, query the migration database,
run migctl, kubectl and git, and search logs.

The point of this conversation is recall measured honestly:
  * tool outputs are long and look like the real thing (rendered configs in
    YAML, INI, TOML and env form, migctl dry-run logs, psql tables, kubectl
    tables, git logs, log excerpts);
  * the line holding a planted value never names its workstream: only the
    tool call's arguments and the user's question of that turn do;
  * the words a question would lean on ("checksum", "dry run", "rollback",
    "config", "migration") occur on many lines of many outputs;
  * the assistant does not repeat tool values in its replies;
  * recall questions arrive 40-120 turns later in the user's own words
    (abbreviations, possessives, plurals, hyphen/space variants).

Two question sets ask about different facts at different turns: a tuning
set (platform_probes.jsonl) and a held-out set
(platform_heldout_probes.jsonl). Both files carry the same standing
instructions and fact-count points, and one unrelated question each.

Outputs (beside this file):
  platform.jsonl                  system prompt, then one item per line
  platform_facts.jsonl            id, turn, topic, source, text
  platform_probes.jsonl           instructions, fact counts, tuning recall set
  platform_heldout_probes.jsonl   instructions, fact counts, held-out recall set

Deterministic (seeded, no clock). Re-run after editing:
  python3 tools/replay_data/make_platform.py
"""

import datetime
import json
import os
import random
import re

rng = random.Random(5150227)
HERE = os.path.dirname(os.path.abspath(__file__))

SYSTEM = ("You are the platform assistant for Tarnow Mutual's plat2 programme, which moves the "
          "insurer's services off the legacy hall-B estate onto the plat2 Kubernetes platform. "
          "You can read files, query the migration database with psql, run migctl, kubectl and "
          "git, and search logs. Quote values exactly as the tools return them, and say so when "
          "you are unsure.")

RULES = [
    (2, "before any cutover, post the latest dry-run result in #plat2-cutovers and wait for a "
        "thumbs-up from the owning team"),
    (3, "never schedule a cutover on a Friday or on the day before a public holiday"),
]

# ---------------------------------------------------------------------------
# The workstreams. Each is named in the user's words (name), by its slug in
# paths, namespaces and commands, and sometimes by area in SQL.

WS = [
    dict(name="invoice archive", slug="invoice-archive",
         blurb="It holds eleven years of scanned invoices and their index rows; finance reads it "
               "all day, but writes only come from the nightly import.",
         owner="Henrike Salo", host="hallb-pg-14.corp.tarnow.net",
         cfg=("yaml", "deploy/invoice-archive/values.yaml", ["guard_threshold", "retention_days"]),
         runs=2, log=None,
         extra=("assistant", "decision")),
    dict(name="pricing database", slug="pricing-database",
         blurb="It is the Postgres database behind every quote, so the pricing engine and the "
               "broker portal both reach it through pgbouncer.",
         owner="Tobiah Mwangi", host="hallb-pg-03.corp.tarnow.net",
         cfg=("ini", "config/pricing-database/pgbouncer.ini", ["max_connections", "default_pool_size"]),
         runs=2, log="lag",
         extra=("user", "pgversion")),
    dict(name="route planning engine", slug="route-planning-engine",
         blurb="It plans the claims adjusters' site visits every morning and keeps its state in a "
               "small Postgres schema with a Redis cache in front.",
         owner="Carys Lindgren", host="hallb-app-22.corp.tarnow.net",
         cfg=("yaml", "deploy/route-planning-engine/values.yaml", ["batch_size"]),
         runs=1, log=None,
         extra=("assistant", "budget")),
    dict(name="document search cluster", slug="document-search-cluster",
         blurb="The call centre uses it to find policy documents: about forty indices, rebuilt "
               "every weekend from the document store.",
         owner="Anouk Verhaege", host="hallb-es-05.corp.tarnow.net",
         cfg=("yaml", "deploy/document-search-cluster/opensearch.yml", ["number_of_shards", "refresh_interval"]),
         runs=2, log=None,
         extra=("assistant", "osversion")),
    dict(name="kubernetes ingress gateway", slug="kubernetes-ingress-gateway",
         blurb="It fronts every public endpoint we have, so the move is mostly certificates, rate "
               "limits and DNS.",
         owner="Dariusz Wolak", host="hallb-lb-02.corp.tarnow.net",
         cfg=("yaml", "deploy/kubernetes-ingress-gateway/values.yaml", ["rate_limit_rps", "proxy_read_timeout"]),
         runs=1, log="rehearsal",
         extra=("user", "incident")),
    dict(name="message queue bridge", slug="message-queue-bridge",
         blurb="It shovels events between the old RabbitMQ and the new Kafka topics, and a lot of "
               "downstream consumers rely on its ordering.",
         owner="Yusra Qadri", host="hallb-mq-09.corp.tarnow.net",
         cfg=("ini", "config/message-queue-bridge/bridge.conf", ["prefetch_count", "max_inflight"]),
         runs=2, log=None,
         extra=("assistant", "channel")),
    dict(name="identity provider sync", slug="identity-provider-sync",
         blurb="It pushes joiners and leavers from HR into the identity provider every few minutes; "
               "if it stalls, new starters cannot log in on their first day.",
         owner="Emeric Fontaine", host="hallb-app-31.corp.tarnow.net",
         cfg=("env", "deploy/identity-provider-sync/sync.env", ["sync_interval_seconds", "guard_threshold"]),
         runs=1, log="freeze",
         extra=("user", "case")),
    dict(name="test environment provisioning", slug="test-environment-provisioning",
         blurb="It spins up short-lived test environments for the product teams, and developers "
               "notice within the hour when it breaks.",
         owner="Sunniva Rask", host="hallb-app-17.corp.tarnow.net",
         cfg=("toml", "infra/test-environment-provisioning/provisioner.toml", ["max_parallel_envs", "ttl_hours"]),
         runs=1, log=None,
         extra=("assistant", "envcap")),
    dict(name="warehouse loader", slug="warehouse-loader",
         blurb="It loads the nightly extracts into the data warehouse, and the actuaries' morning "
               "reports depend on it.",
         owner="Kwabena Asante", host="hallb-etl-04.corp.tarnow.net",
         cfg=("yaml", "deploy/warehouse-loader/values.yaml", ["guard_threshold", "batch_size"]),
         runs=2, log="lag",
         extra=("user", "loadwindow")),
    dict(name="shipment tracking api", slug="shipment-tracking-api",
         blurb="It tracks courier shipments of policy documents and replacement cards, with a "
               "public callback API the couriers post to.",
         owner="Leocadia Ferro", host="hallb-app-08.corp.tarnow.net",
         cfg=("yaml", "deploy/shipment-tracking-api/values.yaml", ["max_connections", "statement_timeout"]),
         runs=1, log=None,
         extra=("assistant", "p99")),
    dict(name="partner webhook relay", slug="partner-webhook-relay",
         blurb="It relays webhooks from brokers and partner insurers, checks their signatures and "
               "retries failed deliveries.",
         owner="Ottilie Brann", host="hallb-app-26.corp.tarnow.net",
         cfg=("ini", "config/partner-webhook-relay/relay.ini", ["retry_limit", "rollback_window_minutes"]),
         runs=2, log="freeze",
         extra=("user", "partners")),
    dict(name="metrics pipeline", slug="metrics-pipeline",
         blurb="It is the metrics pipeline for the whole estate: scrapers, remote-write and the "
               "long-term store.",
         owner="Ravindra Iyer", host="hallb-mon-01.corp.tarnow.net",
         cfg=("yaml", "deploy/metrics-pipeline/values.yaml", ["retention_days", "number_of_shards"]),
         runs=1, log=None,
         extra=("assistant", "thanos")),
    dict(name="backup vault", slug="backup-vault",
         blurb="It holds the backup catalogue and the immutable copies the regulator expects us "
               "to keep.",
         owner="Maelle Kerbrat", host="hallb-bk-06.corp.tarnow.net",
         cfg=("toml", "infra/backup-vault/vault.toml", ["rollback_window_minutes", "lock_retention_days"]),
         runs=2, log="rehearsal",
         extra=("user", "objectlock")),
    dict(name="feature store", slug="feature-store",
         blurb="It serves the fraud model's features online and keeps the offline copies for "
               "training.",
         owner="Jurgen Oksanen", host="hallb-app-35.corp.tarnow.net",
         cfg=("yaml", "deploy/feature-store/values.yaml", ["guard_threshold", "max_connections"]),
         runs=1, log=None,
         extra=("assistant", "redis")),
    dict(name="customer notification service", slug="customer-notification-service",
         blurb="It sends renewal notices, payment reminders and claim updates by e-mail and SMS.",
         owner="Thandiwe Nkosi", host="hallb-app-12.corp.tarnow.net",
         cfg=("env", "deploy/customer-notification-service/notifier.env", ["rate_limit_rps", "retry_limit"]),
         runs=2, log=None,
         extra=("user", "sender")),
]

USER_NAME = "Odile Brandsma"

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


# Config keys: the values noise lines use, and the values a planted fact uses
# (kept apart, so the fact's line is the only one of its kind).
KEYS = {
    "guard_threshold": (lambda: f"0.{rng.choice([80, 85, 90, 95, 98])}",
                        lambda: f"0.{rng.randint(801, 989)}"),
    "retention_days": (lambda: str(rng.choice([30, 90, 180, 365, 730])),
                       lambda: str(rng.randint(101, 690))),
    "max_connections": (lambda: str(rng.choice([100, 150, 200, 250, 300, 500])),
                        lambda: str(rng.choice([x for x in range(120, 490, 10) if x % 50]))),
    "default_pool_size": (lambda: str(rng.choice([10, 20, 25, 40, 50])),
                          lambda: str(rng.choice([x for x in range(12, 80) if x % 5]))),
    "batch_size": (lambda: str(rng.choice([500, 1000, 2000, 2500, 5000, 10000])),
                   lambda: str(rng.choice([x for x in range(1100, 9900, 50) if x % 500]))),
    "number_of_shards": (lambda: str(rng.choice([1, 2, 3, 5, 6, 8])),
                         lambda: str(rng.randint(11, 47))),
    "refresh_interval": (lambda: rng.choice(["1s", "5s", "30s", "60s"]),
                         lambda: f"{rng.randint(11, 29)}s"),
    "rate_limit_rps": (lambda: str(rng.choice([100, 250, 500, 1000, 2000])),
                       lambda: str(rng.choice([x for x in range(1100, 4800, 10) if x % 100]))),
    "proxy_read_timeout": (lambda: rng.choice(["30s", "60s", "120s"]),
                           lambda: f"{rng.randint(31, 59)}s"),
    "prefetch_count": (lambda: str(rng.choice([10, 50, 100, 250])),
                       lambda: str(rng.randint(101, 240))),
    "max_inflight": (lambda: str(rng.choice([64, 128, 256, 512, 1024])),
                     lambda: str(rng.choice([x for x in range(300, 2000, 4) if x not in (512, 1024)]))),
    "sync_interval_seconds": (lambda: str(rng.choice([30, 60, 300, 900])),
                              lambda: str(rng.choice([x for x in range(61, 299) if x % 30]))),
    "max_parallel_envs": (lambda: str(rng.choice([4, 8, 16])),
                          lambda: str(rng.randint(17, 63))),
    "ttl_hours": (lambda: str(rng.choice([24, 48, 72, 168])),
                  lambda: str(rng.choice([x for x in range(26, 160) if x not in (48, 72)]))),
    "statement_timeout": (lambda: rng.choice(["15000ms", "30000ms", "60000ms"]),
                          lambda: f"{rng.randint(16, 58)}{rng.choice('1234678')}00ms"),
    "retry_limit": (lambda: str(rng.choice([3, 5, 10])),
                    lambda: str(rng.randint(11, 29))),
    "rollback_window_minutes": (lambda: str(rng.choice([15, 30, 45, 60, 90, 120])),
                                lambda: str(rng.choice([x for x in range(16, 179) if x % 15]))),
    "lock_retention_days": (lambda: str(rng.choice([30, 90, 365])),
                            lambda: str(rng.randint(400, 2600))),
}


def kv(fmt, key, val):
    if fmt == "yaml":
        return f"{key}: {val}"
    if fmt == "env":
        return f"{key.upper()}={val}"
    return f"{key} = {val}"  # ini, toml


MONTHS = ["January", "February", "March", "April", "May"]
V = []  # per workstream: label -> planted text
CUTOVER = datetime.date(2027, 3, 2)
for k, w in enumerate(WS):
    v = {}
    v["owner"] = unique(lambda: w["owner"])
    v["host"] = unique(lambda: w["host"])
    v["ticket"] = unique(lambda: f"PLAT-{rng.randint(2000, 4999)}")
    while CUTOVER.weekday() >= 4:  # never Friday (the standing rule), nor a weekend
        CUTOVER += datetime.timedelta(days=1)
    v["date"] = unique(lambda: f"{CUTOVER.strftime('%A')} {CUTOVER.day} {MONTHS[CUTOVER.month - 1]}")
    CUTOVER += datetime.timedelta(days=rng.randint(2, 4))
    fmt, _, keys = w["cfg"]
    for i, key in enumerate(keys):
        v[f"cfg{i}"] = unique(lambda: kv(fmt, key, KEYS[key][1]()))
    for r in range(w["runs"]):
        v[f"cs{r + 1}"] = unique(lambda: f"dry-run checksum {hexs(7)}")
    if w["log"] == "lag":
        v["log"] = unique(lambda: f"peak slot lag {rng.randint(1, 9)}.{rng.randint(10, 99)} GiB")
    elif w["log"] == "freeze":
        v["log"] = unique(lambda: f"write freeze lasted {rng.randint(41, 290)}s")
    elif w["log"] == "rehearsal":
        v["log"] = unique(lambda: f"rollback rehearsal completed in {rng.randint(3, 14)}m{rng.randint(10, 59)}s")
    x = w["extra"][1]
    v["extra"] = unique({
        "decision": lambda: f"keep the legacy archive read-only for {rng.randint(15, 40)} days",
        "pgversion": lambda: f"PostgreSQL 16.{rng.randint(2, 6)}",
        "budget": lambda: f"EUR {rng.randint(2, 7)},{rng.randint(10, 99)}0 a month",
        "osversion": lambda: f"OpenSearch 2.{rng.randint(11, 17)}.{rng.randint(0, 3)}",
        "incident": lambda: f"INC-{rng.randint(30000, 79999)}",
        "channel": lambda: f"#plat2-mqbridge-{rng.choice(['war-room', 'cutover', 'bridge-call'])}",
        "case": lambda: f"support case {rng.randint(10000000, 99999999)}",
        "envcap": lambda: f"cap test environments at {rng.randint(5, 14)} per team",
        "loadwindow": lambda: f"load window starts at 0{rng.randint(1, 3)}:{rng.choice(['05', '20', '35', '50'])} UTC",
        "p99": lambda: f"p99 budget of {rng.randint(120, 480)} ms",
        "partners": lambda: f"{rng.randint(31, 77)} partner endpoints",
        "thanos": lambda: f"Thanos 0.{rng.randint(32, 36)}.{rng.randint(0, 2)}",
        "objectlock": lambda: "object lock in compliance mode",
        "redis": lambda: f"Redis 7.2.{rng.randint(4, 7)}",
        "sender": lambda: f"notify-{rng.randint(10, 99)}.tarnow-mutual.eu",
    }[x])
    V.append(v)

KICKOFF = {
    "user": unique(lambda: USER_NAME),
    "deadline": unique(lambda: "hall-B lease ends on 30 June 2027"),
    "steerco": unique(lambda: "steering group meets every second Monday at 09:30"),
    "budget": unique(lambda: "programme contingency of EUR 180,000"),
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


# ---------------------------------------------------------------------------
# Phase 2: the conversation.

items = []
facts = []
turn_no = 0
call_no = 0
topic = ""
fact_turns = {}  # (k, label) -> turn
fact_ids = {}    # (k, label) -> id


def new_turn(t):
    global turn_no, topic
    turn_no += 1
    topic = t


def plant(k, label, source):
    """The planted text for workstream k (or "kickoff"), recorded as a fact of this turn."""
    text = KICKOFF[label] if k == "kickoff" else V[k][label]
    fid = f"p{len(facts) + 1:03d}"
    facts.append({"id": fid, "turn": turn_no, "topic": topic, "source": source, "text": text})
    fact_turns[(k, label)] = turn_no
    fact_ids[(k, label)] = fid
    return text


def U(text):
    items.append({"turn": turn_no, "role": "user", "kind": "message", "content": text})


FILLER = [
    "Most of the risk in a move like this sits in the clients rather than in the copy: connection strings, cached DNS answers and cron jobs nobody remembers.",
    "A dry run that passes on a quiet evening tells us less than one during the morning peak, so I would repeat it closer to the date.",
    "The checksum comparison only covers rows the migrator copies; anything written outside it, such as files on local disk, needs its own check.",
    "I would keep the rollback as boring as possible: repoint, verify, and only then work out what went wrong.",
    "The plat2 nodes have faster disks but less memory per pod, so caches sized for hall B may need a second look.",
    "Drift between the rendered config and what actually runs on hall B is common, and the migrator only ever sees the rendered side.",
    "Keeping the legacy side read-only for a while costs little and gives us something to diff against if numbers look odd later.",
    "If the owning team can stay on the call for the first fifteen minutes after cutover, most surprises get handled on the spot.",
    "The migration database keeps every run, so we can compare throughput between runs without repeating anything.",
    "Network policies on plat2 start closed, which is annoying for a day and useful for the rest of the year.",
    "I have not seen anything in the alerts that argues for moving faster or slower than planned.",
    "It is worth writing the rollback step into the ticket now, while the details are fresh, rather than on the night.",
    "Throughput in a dry run is lower than in the real copy, because every batch is also verified.",
    "The old hosts in hall B share storage, so a heavy copy on one service slows its neighbours; the throttle is there to protect them.",
    "None of this blocks the next step; the open points are small and each has an owner.",
    "The plat2 dashboards are mostly in place, though a few panels still read from the hall B Prometheus.",
    "I would rather do one more rehearsal than take a clever shortcut on the night.",
    "The runbook template carries the generic steps; the notes we collect here are the service-specific part.",
    "Certificates and secrets are copied by the platform pipeline, so they should not need manual work.",
    "After the copy, the verification pass compares counts per table and a sample of row checksums.",
    "A migration config that renders cleanly can still be wrong for production load, which is why the dry run matters more than the lint.",
    "Consumers that pin an IP address instead of a hostname are the usual reason a rollback is needed at all.",
]

NEXT = [
    "post the dry-run result in #plat2-cutovers for the owners",
    "draft the rollback step in the change record",
    "check the replication slot again tomorrow morning",
    "ask the network team to lower the DNS TTL a day ahead",
    "confirm the on-call rota for the cutover night",
    "re-run the dry run closer to the date",
    "compare the verify_log rows with last week's run",
    "walk the owners through the runbook",
    "point the remaining dashboards at plat2",
]


def A(body, pad=True):
    parts = []
    pre = rng.randint(1, 2) if pad and rng.random() < 0.7 else 0
    post = rng.randint(1, 3) if pad else 0
    drawn = rng.sample(FILLER, pre + post)
    if pre:
        parts.append(" ".join(drawn[:pre]))
    parts.append(body)
    if pad:
        parts.append(" ".join(drawn[pre:]))
        if rng.random() < 0.45:
            parts.append("Next steps:\n" + "\n".join(
                f"- {x}" for x in rng.sample(NEXT, rng.randint(2, 3))))
    items.append({"turn": turn_no, "role": "assistant", "kind": "message",
                  "content": "\n\n".join(parts)})


def tool(name, args, output):
    global call_no
    call_no += 1
    cid = f"call_{call_no:03d}"
    items.append({"turn": turn_no, "role": "assistant", "kind": "tool_call",
                  "content": json.dumps(args), "tool_name": name, "call_id": cid})
    items.append({"turn": turn_no, "role": "tool", "kind": "tool_result",
                  "content": output, "tool_name": name, "call_id": cid})


# ---------------------------------------------------------------------------
# Tool outputs.

TABLE_BASES = ["events", "accounts", "policies", "claims", "payments", "audit_trail", "documents",
               "jobs", "sessions", "quotes", "agents", "premiums", "notes", "attachments",
               "ledger_lines", "customers", "addresses", "contracts", "endorsements", "tasks"]


def fit(make, n, lo=1300, hi=8600):
    """make(n), with n shrunk or grown until the output is 1.3-9.6 kB."""
    for _ in range(40):
        out = make(n)
        size = len(out.encode())
        if size > hi:
            n = max(1, int(n * 0.85))
        elif size < lo:
            n = int(n * 1.3) + 1
        else:
            return out
    raise RuntimeError("cannot fit output size")


def tables(n):
    out = []
    while len(out) < n:
        t = f"{rng.choice(TABLE_BASES)}_p{rng.randint(1, 64):02d}"
        if t not in out:
            out.append(t)
    return out


def ts(day, sec):
    t = datetime.datetime(day.year, day.month, day.day, 20, 0, 0) + datetime.timedelta(seconds=sec)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def psql(headers, rows, numeric=()):
    cols = list(zip(*([headers] + rows))) if rows else [[h] for h in headers]
    widths = [max(len(str(x)) for x in c) for c in cols]
    out = [" " + " | ".join(h.center(w) for h, w in zip(headers, widths)).rstrip()]
    out.append("+".join("-" * (w + 2) for w in widths))
    for r in rows:
        cells = [str(x).rjust(w) if i in numeric else str(x).ljust(w)
                 for i, (x, w) in enumerate(zip(r, widths))]
        out.append(" " + " | ".join(cells).rstrip())
    out.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(out)


def kube(headers, rows):
    widths = [max(len(str(x)) for x in c) for c in zip(*([headers] + rows))]
    return "\n".join("   ".join(str(x).ljust(w) for x, w in zip(r, widths)).rstrip()
                     for r in [headers] + rows)


EXTRA_KEYS = ["retention_days", "number_of_shards", "refresh_interval", "rate_limit_rps",
              "proxy_read_timeout", "prefetch_count", "max_inflight", "sync_interval_seconds",
              "max_parallel_envs", "ttl_hours", "retry_limit", "lock_retention_days"]


def config_file(fmt, planted, n_tables):
    """A rendered migration config in `fmt`; `planted` maps key -> planted line."""
    sections = [
        ("migration", [("source_cluster", "hallb-prod"), ("target_cluster", "plat2-prod"),
                       ("mode", rng.choice(["logical", "snapshot", "dual-write"])),
                       ("cutover_strategy", rng.choice(["repoint", "blue-green", "dns-swap"])),
                       ("config_version", f"2027.0{rng.randint(1, 3)}.{rng.randint(1, 9)}")]),
        ("dry_run", [("enabled", "true"), ("sample_rate", f"0.0{rng.randint(1, 9)}"),
                     ("checksum_algorithm", rng.choice(["xxh3-128", "sha256", "crc32c"])),
                     ("compare_row_counts", "true"),
                     ("throttle_percent", str(rng.choice([25, 40, 50])))]),
        ("rollback", [("strategy", rng.choice(["repoint", "restore-snapshot"])),
                      ("keep_source_readonly_days", str(rng.randint(7, 30))),
                      ("rollback_window_minutes", None),
                      ("rollback_requires_approval", "true")]),
        ("guards", [("guard_threshold", None), ("max_error_rate", f"0.00{rng.randint(1, 9)}"),
                    ("halt_on_checksum_mismatch", "true"),
                    ("max_replication_lag_seconds", str(rng.choice([30, 60, 120])))]),
        ("pool", [("max_connections", None), ("default_pool_size", None),
                  ("statement_timeout", None), ("idle_timeout", f"{rng.choice([60, 300, 600])}s"),
                  ("batch_size", None)]),
        ("tuning", [(key, None) for key in rng.sample(EXTRA_KEYS, rng.randint(4, 7))]),
    ]
    for key in planted:
        if not any(key == k2 for _, kvs in sections for k2, _ in kvs):
            sections[-1][1].append((key, None))
    tbls = tables(n_tables)
    sep = {"yaml": ": ", "env": "=", "ini": " = ", "toml": " = "}[fmt]
    out = []
    head = {"yaml": "#", "env": "#", "ini": ";", "toml": "#"}[fmt]
    out.append(f"{head} rendered by cfgtool 2.9.{rng.randint(0, 6)} from platform-config@{hexs(7)}")
    out.append(f"{head} migration config for plat2: do not edit by hand; change the source and re-render")
    out.append(f"{head} dry run and rollback settings are validated by migctl before every run")

    def q(val):
        """TOML quotes strings; the other formats write them bare."""
        if fmt == "toml" and val not in ("true", "false") and not re.fullmatch(r"\d+(\.\d+)?", val):
            return f'"{val}"'
        return val

    def line(key, val, indent=""):
        if key in planted:
            return indent + planted[key]
        mk = KEYS[key][0] if val is None else (lambda: val)
        return N(lambda: indent + (f"{key.upper()}={mk()}" if fmt == "env" else f"{key}{sep}{q(mk())}"))

    for sec, kvs in sections:
        if fmt == "yaml":
            out.append(f"{sec}:")
            out.extend(line(k2, v2, "  ") for k2, v2 in kvs)
        elif fmt == "env":
            out.append(f"# --- {sec} ---")
            out.extend(line(k2, v2) for k2, v2 in kvs)
        else:
            out.append("")
            out.append(f"[{sec}]")
            out.extend(line(k2, v2) for k2, v2 in kvs)
    if fmt == "yaml":
        out.append("tables:")
    for t in tbls:
        per = [("batch_size", None), ("checksum", rng.choice(["per-batch", "per-table", "sampled"])),
               ("rollback", rng.choice(["truncate-target", "keep-target", "drop-target"]))]
        if rng.random() < 0.4:
            per.append(("max_connections", None))
        if rng.random() < 0.3:
            per.append(("statement_timeout", None))
        if rng.random() < 0.25:
            per.append(("dry_run_sample_rate", f"0.{rng.randint(1, 5)}"))
        if fmt == "yaml":
            out.append(f"  - name: {t}")
            out.append(f"    rows_estimate: {rng.randint(2000, 9000000)}")
            for k2, v2 in per:
                mk = KEYS[k2][0] if v2 is None else (lambda v2=v2: v2)
                out.append(N(lambda: f"    {k2}: {mk()}"))
        elif fmt == "env":
            p = "TABLE_" + t.upper()
            for k2, v2 in per:
                mk = KEYS[k2][0] if v2 is None else (lambda v2=v2: v2)
                out.append(N(lambda: f"{p}_{k2.upper()}={mk()}"))
        else:
            out.append("")
            out.append(f"[table.{t}]" if fmt == "ini" else f"[tables.{t}]")
            out.append(f"rows_estimate = {rng.randint(2000, 9000000)}")
            for k2, v2 in per:
                mk = KEYS[k2][0] if v2 is None else (lambda v2=v2: v2)
                out.append(N(lambda: f"{k2} = {q(mk())}"))
    return "\n".join(out)


def dry_run(day, n, summary_line, aborted=False, throttle=40):
    """migctl dry-run output; `summary_line` is the checksum line (planted or not)."""
    out = [f"migctl 3.8.2 (build {hexs(7)}) dry run: source hallb-prod -> target plat2-prod",
           f"reading rendered config ... ok (config version 2027.0{rng.randint(1, 3)}.{rng.randint(1, 9)})",
           f"throttle: {throttle}% of the source IOPS budget",
           f"checksum algorithm: xxh3-128, sample rate {rng.randint(1, 9)}%, row counts on every table",
           "rollback plan: repoint, source kept read-only ... validated",
           "dry-run checksum covers every copied row in table order; per-table checksums follow"]
    tbls = tables(n)
    sec = rng.randint(0, 300)
    rows_total = 0
    warns = 0
    stop = rng.randint(n // 3, n // 2) if aborted else n
    for i, t in enumerate(tbls[:stop]):
        sec += rng.randint(3, 40)
        rows = rng.randint(500, 2400000)
        rows_total += rows
        out.append(N(lambda: f"{ts(day, sec)} [dry-run] {t:<22} copy {rows:>8} rows {rng.randint(1, 900) / 10:>6.1f}s  "
                             f"checksum {hexs(8)}  ok"))
        r = rng.random()
        if r < 0.07:
            warns += 1
            out.append(f"{ts(day, sec)} [dry-run] WARN {t}: sequence {t}_id_seq will be reset at cutover")
        elif r < 0.12:
            warns += 1
            out.append(f"{ts(day, sec)} [dry-run] WARN {t}: {rng.randint(2, 90)} rows changed during copy, "
                       f"re-read for checksum")
        elif r < 0.15:
            out.append(f"{ts(day, sec)} [dry-run] rollback marker written for {t}")
    if aborted:
        sec += rng.randint(5, 60)
        out.append(f"{ts(day, sec)} [dry-run] ERROR {tbls[stop]}: source connection reset by peer (attempt 5/5)")
        out.append(f"{ts(day, sec)} [dry-run] aborting: retry budget exhausted; rollback of the dry-run "
                   f"schema on plat2-prod done")
        out.append("summary")
        out.append(f"  tables            {stop}/{n}")
        out.append(f"  rows              {rows_total}")
        out.append("  dry-run checksum not computed (run aborted)")
        out.append("dry run FAILED; nothing was written to plat2-prod")
        return "\n".join(out)
    sec += rng.randint(5, 30)
    out.append(f"{ts(day, sec)} [dry-run] verify: {n}/{n} tables, row counts match, 0 checksum mismatches")
    out.append(f"{ts(day, sec)} [dry-run] rollback rehearsal skipped (dry run); plan validated earlier")
    out.append("summary")
    out.append(f"  tables            {n}")
    out.append(f"  rows              {rows_total}")
    out.append(f"  warnings          {warns}")
    out.append("  mismatches        0")
    out.append(f"  {summary_line}")
    out.append(f"  elapsed           {sec // 60}m{sec % 60:02d}s")
    out.append("dry run complete; nothing was written to plat2-prod")
    return "\n".join(out)


PODS = [f"migrator-{hexs(4)}-{hexs(5)}" for _ in range(6)]
STEPS = ["announce in #plat2-cutovers", "stop writers", "final catch-up", "compare checksums",
         "repoint service", "smoke tests", "release writers", "watch error rates", "close change"]


def log_excerpt(day, n, planted=None, kind=None):
    """Log lines from the migrator and the rehearsal runner, with one planted line if given."""
    pods = rng.sample(PODS, 3)
    step = rng.randint(0, 8)
    out = []
    sec = rng.randint(0, 600)
    where = rng.randint(n // 3, 2 * n // 3)
    for i in range(n):
        sec += rng.randint(1, 50)
        p = rng.choice(pods)
        t = f"{ts(day, sec)[:-1]}.{rng.randint(0, 999):03d}Z"
        if planted and i == where:
            out.append(f"{t} INFO  {p if 'slot lag' in planted else 'rehearsal'} {planted}")
            continue
        if rng.random() < 0.08:
            step = (step + 1) % 9
            out.append(f"{t} INFO  rehearsal step {step + 1}/9: {STEPS[step]}")
            continue
        tb = rng.choice(TABLE_BASES) + f"_p{rng.randint(1, 64):02d}"
        out.append(N(lambda: rng.choice([
            f"{t} INFO  {p} replication: applied batch {rng.randint(100, 9000)} ({rng.randint(100, 50000)} rows), slot lag {rng.randint(1, 900)} MiB",
            f"{t} INFO  {p} checksum verify batch {rng.randint(100, 9000)}: ok ({rng.randint(3, 900)} ms)",
            f"{t} INFO  {p} migration: table {tb} caught up",
            f"{t} WARN  {p} config reload: {rng.choice(list(KEYS))} unchanged",
            f"{t} INFO  {p} dry run: {tb} scheduled (worker {rng.randint(1, 8)})",
            f"{t} INFO  {p} rollback plan: repoint ready, source read-only={rng.choice(['true', 'false'])}",
            f"{t} DEBUG {p} pool: {rng.randint(1, 60)}/{rng.randint(60, 200)} connections in use",
            f"{t} ERROR {p} copy {tb}: timeout, retrying (attempt {rng.randint(1, 4)}/5)",
            f"{t} INFO  {p} checksum mismatch re-check {tb}: resolved after re-read",
            f"{t} INFO  {p} migration heartbeat: {rng.randint(1, 99)}% of rows verified",
            f"{t} WARN  {p} replication: slot lag above {rng.choice([256, 512, 1024])} MiB for {rng.randint(10, 300)}s",
        ])))
    if kind == "rehearsal-noise":
        out.insert(rng.randint(1, n - 1), N(lambda: f"{ts(day, sec)[:-1]}.000Z INFO  rehearsal rollback rehearsal completed in {rng.randint(3, 14)}m{rng.randint(10, 59)}s"))
    if kind == "freeze-noise":
        out.insert(rng.randint(1, n - 1), N(lambda: f"{ts(day, sec)[:-1]}.000Z INFO  rehearsal write freeze lasted {rng.randint(41, 290)}s"))
    if kind == "lag-noise":
        out.insert(rng.randint(1, n - 1), N(lambda: f"{ts(day, sec)[:-1]}.000Z INFO  {pods[0]} peak slot lag {rng.randint(1, 9)}.{rng.randint(10, 99)} GiB"))
    return "\n".join(out)


def verify_log(day, n):
    rows = []
    for t in sorted(tables(n)):
        rows.append([t, rng.randint(500, 2400000), hexs(8),
                     f"{day.isoformat()} {rng.randint(20, 23)}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}",
                     rng.choice(["ok", "ok", "ok", "ok", "re-read ok"])])
    return psql(["table_name", "rows", "checksum", "verified_at", "status"], rows, numeric=(1,))


def runs_table(day, n):
    rows = []
    for i in range(n):
        d = day - datetime.timedelta(days=n - i)
        rows.append([rng.randint(10000, 99999), f"{d.isoformat()} {rng.randint(18, 23)}:{rng.randint(0, 59):02d}",
                     rng.choice(["dry-run", "dry-run", "verify", "rollback-rehearsal"]),
                     rng.randint(8, 90), rng.choice([0, 0, 0, 0, 1, 3]),
                     f"{rng.randint(2, 40)}m{rng.randint(0, 59):02d}s",
                     rng.choice(["passed", "passed", "passed", "failed", "aborted"])])
    return psql(["run_id", "started_at", "kind", "tables", "mismatches", "elapsed", "result"], rows,
                numeric=(0, 3, 4))


def slots_table():
    rows = []
    for w in rng.sample(WS, rng.randint(6, 10)):
        rows.append([f"plat2_{w['slug'].replace('-', '_')}", rng.choice(["t", "t", "f"]),
                     f"{rng.randint(10, 90):X}/{hexs(8).upper()}", f"{rng.randint(1, 900)} MB",
                     rng.choice(["logical", "logical", "physical"])])
    return psql(["slot_name", "active", "restart_lsn", "lag", "slot_type"], rows)


def area_table(states=("config reviewed", "dry run passed", "not started", "rehearsal planned",
                       "waiting on owner")):
    rows = []
    for w in WS:
        rows.append([w["name"], rng.choice(states),
                     rng.randint(0, 3), f"2027-02-{rng.randint(1, 28):02d}"])
    return psql(["area", "state", "open_blockers", "updated"], rows, numeric=(2,))


def pods_table(ns, n):
    rows = []
    for _ in range(n):
        comp = rng.choice(["api", "worker", "migrator", "cron", "exporter", "web"])
        want = rng.choice([1, 1, 2])
        rows.append([f"{ns}-{comp}-{hexs(9)}-{hexs(5)}", f"{rng.choice([want, want, want - 1 or 1])}/{want}",
                     rng.choice(["Running"] * 8 + ["CrashLoopBackOff", "Completed"]),
                     rng.choice([0, 0, 0, 1, 3, 14]), f"{rng.randint(1, 90)}d",
                     f"10.{rng.randint(20, 60)}.{rng.randint(0, 255)}.{rng.randint(2, 254)}",
                     f"hb-node-{rng.randint(1, 40):02d}"])
    return kube(["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE"], rows)


def pvc_table(ns, n):
    rows = []
    for i in range(n):
        rows.append([f"data-{ns}-{i}", "Bound", f"pvc-{hexs(8)}-{hexs(4)}-{hexs(4)}",
                     f"{rng.choice([20, 50, 100, 200, 500])}Gi", "RWO",
                     rng.choice(["fast-ssd", "standard", "plat2-nvme"]), f"{rng.randint(1, 90)}d"])
    return kube(["NAME", "STATUS", "VOLUME", "CAPACITY", "ACCESS MODES", "STORAGECLASS", "AGE"], rows)


def events_table(ns, n):
    rows = []
    for _ in range(n):
        rows.append([f"{rng.randint(1, 59)}m", rng.choice(["Normal", "Normal", "Warning"]),
                     rng.choice(["Scheduled", "Pulled", "Created", "Started", "BackOff", "Killing",
                                 "FailedMount", "ScalingReplicaSet"]),
                     f"pod/{ns}-{rng.choice(['api', 'worker', 'migrator'])}-{hexs(5)}",
                     rng.choice(["Successfully assigned to plat2-node-" + str(rng.randint(1, 30)),
                                 "Container image already present on machine",
                                 "Back-off restarting failed container",
                                 "Stopping container migrator",
                                 "MountVolume.SetUp failed: timed out waiting for the condition",
                                 "Scaled up replica set to 3"])])
    return kube(["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"], rows)


AUTHORS = ["Pia Lundgren", "Marco Esposito", "Lena Vogt", "Samir Haddad", "Grace Obi",
           "Tomasz Zielinski", "Ayako Mori", "Ben Carver", "Ines Cabral", "Olu Adeyemi"]
SUBJECTS = [
    "migration: raise batch size for the dry run", "config: render plat2 values",
    "rollback: document repoint step", "dry run: exclude archived partitions",
    "checksum: switch verify to xxh3", "config: lower pool size on plat2",
    "migration: add guard for replication lag", "ci: pin migctl 3.8", "rollback: keep source read-only",
    "dry run: sample 5% of rows", "config: move secrets to vault paths",
    "migration: split copy into two phases", "checksum: re-read rows changed during copy",
    "chore: bump base image", "fix: retry on connection reset", "docs: runbook for cutover night",
    "config: new statement timeout for batch jobs", "migration: drop legacy DNS alias",
]


def git_log(n, day):
    out = []
    d = day
    for _ in range(n):
        d -= datetime.timedelta(days=rng.randint(0, 3))
        out.append(N(lambda: f"{hexs(7)} {d.isoformat()} {rng.choice(AUTHORS):<17} {rng.choice(SUBJECTS)}"
                             + (f" ({rng.choice(['OPS', 'CFG'])}-{rng.randint(100, 999)})" if rng.random() < 0.4 else "")))
    full = []
    for line in out[:3]:
        h, dt, rest = line.split(" ", 2)
        full.append(f"commit {h}{hexs(33)}\nAuthor: {rest[:17].strip()} <{rest[:17].strip().split()[0].lower()}@tarnow.net>\n"
                    f"Date:   {dt} 1{rng.randint(0, 8)}:{rng.randint(0, 59):02d}\n\n    {rest[17:].strip()}\n\n"
                    f"    Reviewed in the migration channel; dry run and rollback step noted in the ticket.\n")
    return "\n".join(full) + "\n" + "\n".join(out[3:])


# ---------------------------------------------------------------------------
# Recall questions. Each asks about facts of one workstream in the user's own
# words, `delay` turns after the last of them was planted (pushed later if
# another question is due). Tuning and held-out sets ask about different
# facts.

QUESTIONS = [
    # tuning
    ("tune", 0, ["cs1", "cs2"], 46,
     "Quick one on the invoice-archive: what checksums did its two dry runs come back with? "
     "Henrike wants them for the audit pack."),
    ("tune", 1, ["cfg0"], 62,
     "For the pricing DB, what did we have max connections set to in the pgbouncer "
     "configuration? The DBAs are asking before they size the plat2 instance."),
    ("tune", 2, ["cs1"], 55,
     "Remind me what the route planner's dry-run checksum was? Carys wants to quote it in her "
     "sign-off."),
    ("tune", 3, ["cfg0"], 66,
     "How many shards was the doc search cluster configured with? I'm comparing it with what "
     "the vendor recommends."),
    ("tune", 4, ["cs1"], 50,
     "For the k8s ingress gateway, what checksum did the dry run give us?"),
    ("tune", 5, ["owner", "ticket"], 58,
     "Who owns the MQ bridge again, and which change ticket is it tracked under?"),
    ("tune", 6, ["cfg1"], 52,
     "What guard threshold did the IdP sync's env file set?"),
    ("tune", 8, ["cs2"], 47,
     "What checksum did the warehouse-loader rerun produce? I only need the later run."),
    ("tune", 10, ["cfg0"], 44,
     "How many retries does the partner-webhook relay's configuration allow before it gives up "
     "on a delivery?"),
    ("tune", 9, ["cs1"], 48,
     "What was the shipment-tracking API's dry-run checksum, for the change record?"),
    ("tune", 7, ["date"], 70,
     "When did we pencil in the test env provisioning cutover? I need the day for the comms plan."),
    ("tune", 1, ["cs2"], 100,
     "The pricing-db's second dry run: which checksum did it end with?"),
    # held-out
    ("held", 1, ["cs1"], 80,
     "Which checksum did the first pricing DB dry run finish with?"),
    ("held", 0, ["cfg1"], 90,
     "How many days of retention did the invoice archive's values file keep? Legal asked."),
    ("held", 3, ["cs1", "cs2"], 44,
     "document-search-cluster: which checksums came out of its dry runs? Both of them, please."),
    ("held", 4, ["cfg0"], 72,
     "What requests-per-second cap was in the k8s ingress config?"),
    ("held", 5, ["cs2"], 53,
     "The message-queue bridge reran its dry run at some point; what checksum did the later "
     "run report?"),
    ("held", 6, ["cs1"], 60,
     "identity-provider sync: what did its dry run report as the checksum?"),
    ("held", 7, ["cfg1"], 45,
     "What TTL in hours did we configure for test env provisioning?"),
    ("held", 8, ["owner"], 65,
     "Who did we say owns the warehouse loaders?"),
    ("held", 9, ["cfg1"], 56,
     "What statement timeout is set in the shipment-tracking API's config?"),
    ("held", 10, ["cs1", "cs2"], 51,
     "Partner webhook relay: what were the checksums from both of its dry runs?"),
    ("held", 6, ["log"], 88,
     "How long did writes stay frozen during the IdP sync rehearsal, according to the logs?"),
    ("held", 2, ["cfg0"], 92,
     "Which batch size did the route-planning config use?"),
    ("held", 8, ["cs1"], 75,
     "What checksum did the first warehouse loader dry run produce?"),
    ("held", 7, ["cs1"], 82,
     "And the test environment provisioner's dry-run checksum?"),
]
OFF_TOPIC = [
    ("tune", 97, "Unrelated, but any tips for keeping a sourdough starter alive over a long weekend "
                 "away?",
     "Feed it, let it rise for an hour or two, then put it in the fridge: the cold slows the "
     "yeast enough that it will be fine for four or five days. A slightly stiffer starter, with a "
     "bit less water than usual, copes better. When you are back, discard most of it and give "
     "it two feeds at room temperature before you bake with it."),
    ("held", 128, "Completely off topic: how do I stop the basil on my kitchen windowsill from "
                  "going leggy?",
     "Basil gets leggy when it reaches for light and when it is allowed to flower. Pinch out the "
     "top pair of leaves just above a leaf node every week or so, which makes it branch, and "
     "take off any flower buds as soon as they appear. A south-facing window helps, and "
     "watering from below keeps the stems from going soft."),
]

probes = {"tune": [], "held": []}
pending = []  # [due, order, spec]
last_was_question = False


def schedule(k):
    for order, (which, qk, labels, delay, text) in enumerate(QUESTIONS):
        if qk == k:
            due = max(fact_turns[(k, l)] for l in labels) + delay
            pending.append([due, order, (which, k, labels, text)])


for order, (which, at, text, answer) in enumerate(OFF_TOPIC):
    pending.append([at, 100 + order, (which, None, [], text, answer)])


def ask(spec):
    global last_was_question
    which, k = spec[0], spec[1]
    if k is None:
        new_turn("off-topic")
        U(spec[3])
        probes[which].append({"kind": "recall", "turn": turn_no, "facts": []})
        A(spec[4], pad=False)
        last_was_question = True
        return
    labels, text = spec[2], spec[3]
    w = WS[k]
    new_turn(w["name"])
    U(text)
    ids = [fact_ids[(k, l)] for l in labels]
    for l in labels:
        gap = turn_no - fact_turns[(k, l)]
        assert 40 <= gap <= 120, (text, l, gap)
    probes[which].append({"kind": "recall", "turn": turn_no, "facts": ids})
    kinds = {l.rstrip("0123456789") for l in labels}
    if kinds == {"cs"}:
        many = len(labels) > 1
        A(f"{'Both' if many else 'That'} {w['name']} dry run{'s' if many else ''} passed with zero "
          f"mismatches, and the checksum{'s are' if many else ' is'} on the summary "
          f"line{'s' if many else ''} of the migctl output{'s' if many else ''}. I will paste "
          f"{'those lines' if many else 'that line'} into the record as printed rather than retype "
          f"{'them' if many else 'it'}.")
    elif kinds == {"cfg"} or kinds == {"log"}:
        A(f"That value is in the {w['name']} {'config file' if kinds == {'cfg'} else 'log excerpt'} we read "
          f"when we started on it. As far as I know nobody has re-rendered the config since; if "
          f"they have, platform-config's history will show the change.")
    else:
        A(f"We settled that when we started on the {w['name']}. I would still check the change record "
          f"before quoting it outside the team, in case something moved since.")
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
# Kickoff.

new_turn("kickoff")
U(f"Morning. I'm {plant('kickoff', 'user', 'message')}, and I lead the plat2 programme here at "
  f"Tarnow Mutual. Fifteen workstreams have to leave the hall-B estate before the "
  f"{plant('kickoff', 'deadline', 'message')}, and I'd like to work through them with you one by "
  f"one: configs, dry runs, logs, owners, cutover dates.")
A("Glad to. For each workstream I will read its rendered config, run migctl dry runs against "
  "plat2-prod, look at the logs where that helps, and keep track of owners, tickets and dates "
  "as we go.")

new_turn("kickoff")
U("Some ground rules before we start, because the owning teams were burnt by the last platform "
  "move and they made me promise a few things. The important one, and please treat it as "
  f"standing for the whole programme: {RULES[0][1]}. No exceptions for small services; the "
  f"small ones were exactly where it went wrong last time. Also, the "
  f"{plant('kickoff', 'steerco', 'message')}, so I'll ask you for a status before each meeting.")
A("Understood. I will treat that as a standing rule for every cutover we plan, and I will have a "
  "short status ready before each steering group.")

new_turn("kickoff")
U("One more from the change board, and this one is also permanent: "
  f"{RULES[1][1]}. They have long memories about a Friday-evening outage. While we're at it, can "
  "you do a dry run of the canary area so we know migctl works against plat2-prod at all?")
tool("migctl", {"cmd": "migctl dry-run --area canary --target plat2-prod --throttle 40"},
     dry_run(datetime.date(2027, 1, 29), 24, N(lambda: f"dry-run checksum {hexs(7)}")))
A("The canary dry run went through cleanly: every table copied and verified, no mismatches, and "
  "the checksum line is in the summary at the bottom. I will keep cutovers off Fridays and off "
  "the day before a public holiday.")

new_turn("kickoff")
U("Where do we stand on money? Finance approved a "
  f"{plant('kickoff', 'budget', 'message')} on top of the run budget, in case a workstream needs "
  "extra capacity for a parallel run. And give me the overview from the migration database.")
tool("psql", {"query": "select area, state, open_blockers, updated from migration_area order by area"},
     area_table(("not started", "not started", "config reviewed")) + "\n\n"
     + runs_table(datetime.date(2027, 1, 29), 26))
A("The overview is above: nothing has started beyond config reviews, and the run history so far "
  "is the canary and a few rehearsals from the platform team. The contingency gives us room "
  "for one or two parallel runs if a workstream needs a longer dual-write period.")


# ---------------------------------------------------------------------------
# The workstreams.

def cfg_word():
    return rng.choice(["config", "configuration", "rendered config", "settings file"])


def workstream(k):
    w, v = WS[k], V[k]
    name, slug, first = w["name"], w["slug"], w["owner"].split()[0]
    day = datetime.date(2027, 2, 1) + datetime.timedelta(days=2 * k)
    fmt, path, keys = w["cfg"]

    # 1. Introduction: owner, host, ticket.
    regular(name)
    owner, host = plant(k, "owner", "message"), plant(k, "host", "message")
    if k % 2 == 0:
        ticket = plant(k, "ticket", "message")
        U(rng.choice([
            f"Next on the list is the {name}. {w['blurb']} {owner} owns it, the change is {ticket}, "
            f"and today it runs on {host}.",
            f"Let's start on the {name}. {w['blurb']} It belongs to {owner}'s team; the legacy box "
            f"is {host} and the change record is {ticket}.",
        ]))
    else:
        U(rng.choice([
            f"Moving on to the {name}. {w['blurb']} The owner is {owner}, and it still lives on "
            f"{host}. Could you open a change for it?",
            f"Now the {name}. {w['blurb']} {owner} is the owner; current host {host}. We need a "
            f"change record for this one too.",
        ]))
    if k % 3 == 0:
        tool("kubectl", {"cmd": f"kubectl --context hallb -n {slug} get pods -o wide"},
             fit(lambda n: pods_table(slug, n), rng.randint(14, 30)))
    if k % 2 == 1:
        A(f"I have opened {plant(k, 'ticket', 'message')} for the move, with the rollback step "
          f"drafted from the start as the change board wants. I will read the {name} config next "
          f"and then do a first dry run.")
    else:
        A(f"Thanks. I will read its rendered config next and then do a first dry run; with the "
          f"legacy host known I can also check how busy it is at the hours we would copy.")

    # 2. Config read.
    regular(name)
    U(rng.choice([
        f"Can you pull up the {name}'s {cfg_word()}? {first} says some guards were tuned last year "
        f"and I want to see what we carry over.",
        f"Let's look at the {name} {cfg_word()} before we touch anything.",
        f"Open the {name} {cfg_word()} please. I'd like to know which guards and pool settings "
        f"it carries into plat2.",
    ]))
    planted = {key: plant(k, f"cfg{i}", "tool") for i, key in enumerate(keys)}
    tool("read_file", {"path": path}, fit(lambda n: config_file(fmt, planted, n), rng.randint(14, 56)))
    if k % 4 == 2:
        tool("git", {"cmd": f"git -C platform-config log --date=short --format='%h %ad %an  %s' -n 30 -- {os.path.dirname(path)}"},
             fit(lambda n: git_log(n, day), rng.randint(20, 34)))
    A(rng.choice([
        f"The file renders cleanly. It has the usual migration, dry-run and rollback sections, the "
        f"guards, the pool settings and per-table overrides; the values you asked about are in "
        f"the guards, pool and tuning sections above. Nothing in it still points at hall B "
        f"after cutover.",
        f"This is the {name} config as plat2 will see it. The per-table overrides are mostly batch "
        f"sizes and checksum modes; the guard and pool values are near the top. I don't see "
        f"anything that conflicts with the other workstreams.",
    ]))

    # 3. First dry run.
    regular(name)
    U(rng.choice([
        f"Kick off a dry run of the {name} against plat2 and let's see what it says.",
        f"What does a dry run of the {name} look like right now?",
        f"Run the {name} dry run, please, with the usual throttle.",
    ]))
    tool("migctl", {"cmd": f"migctl dry-run --area {slug} --target plat2-prod --throttle 40"},
         fit(lambda n: dry_run(day, n, V[k]["cs1"]), rng.randint(22, 56)) if plant(k, "cs1", "tool") else None)
    A(rng.choice([
        "The dry run passed: every table copied and verified with zero mismatches, and the "
        "checksum is on the summary line of the output above. The warnings are the usual sequence "
        "resets and rows that changed during the copy.",
        "Clean run. Row counts match on every table, the per-table checksums all verified, and "
        "the overall checksum is in the summary block. I will use this run as the baseline.",
    ]))

    # 4. Cutover planning: date and maybe the extra fact.
    regular(name)
    who, _ = w["extra"]
    if who == "user":
        extra_sentence = {
            "pgversion": f"The DBAs want the target on {v['extra']} from day one, so no in-place upgrade later.",
            "incident": f"Remember {v['extra']}: the last certificate rotation on it took the broker portal down for twenty minutes.",
            "case": f"The identity vendor opened {v['extra']} for the API rate limits during the move.",
            "loadwindow": f"{first} also says the new {v['extra']}, after the upstream extract moved.",
            "partners": f"It has {v['extra']} registered, and every one of them needs the new IP range allow-listed.",
            "objectlock": f"The regulator insists the copies keep {v['extra']}, so the target bucket must be set up that way.",
            "sender": f"Mail goes out from {v['extra']}, and the SPF record needs the plat2 egress range.",
        }[w["extra"][1]]
        plant(k, "extra", "message")
        U(f"What would a cutover slot for the {name} look like? {first} would prefer a weeknight. "
          f"{extra_sentence}")
    else:
        U(rng.choice([
            f"What would a cutover slot for the {name} look like? {first} would prefer a weeknight.",
            f"When could we realistically cut the {name} over? {first}'s team is free most evenings.",
        ]))
    date = plant(k, "date", "message")
    A(f"Given the rule about Fridays and the team's preference, I would propose {date}, starting at "
      f"21:00 UTC, with a write freeze of about half an hour for the final catch-up. That leaves "
      f"room for a second dry run and a rollback rehearsal beforehand, and the dry-run result "
      f"goes to #plat2-cutovers for {first}'s thumbs-up before we start.")

    # 5. Logs and verification rows.
    regular(name)
    U(rng.choice([
        f"What do the {name} migrator logs from last night's rehearsal say?",
        f"Can you check the {name} logs since the rehearsal, and the verification rows?",
        f"Anything odd in the {name} logs from the rehearsal run?",
    ]))
    log_kind = w["log"]
    planted_line = plant(k, "log", "tool") if log_kind else None
    noise_kind = rng.choice(["rehearsal-noise", "freeze-noise", "lag-noise", None]) if not log_kind else None
    tool("logs", {"source": "loki", "query": f'{{namespace="{slug}", app="migrator"}}',
                  "since": f"{day.isoformat()}T20:00:00Z", "limit": 150},
         fit(lambda n: log_excerpt(day, n, planted_line, noise_kind), rng.randint(25, 70)))
    if k % 3 == 2:
        tool("psql", {"query": f"select table_name, rows, checksum, verified_at, status from verify_log "
                               f"where area = '{name}' order by table_name"},
             fit(lambda n: verify_log(day, n), rng.randint(25, 60)))
    A(rng.choice([
        "The logs look healthy overall: replication kept up apart from a couple of short lag "
        "spikes, the checksum re-checks all resolved after a re-read, and the retries on "
        "timeouts succeeded. The rehearsal lines are in the excerpt above.",
        "Nothing alarming. A few timeouts with successful retries, config reloads that changed "
        "nothing, and the rehearsal steps in order. The numbers from the rehearsal are in the "
        "excerpt above if you need them for the runbook.",
    ]))

    # 6. Second dry run, or a look at storage and runs.
    regular(name)
    if w["runs"] == 2:
        U(rng.choice([
            f"{first} changed the batch settings for the {name}; rerun the dry run so we have a "
            f"fresh baseline.",
            f"Let's do a second {name} dry run now that the rendered config has the new batch "
            f"profile.",
        ]))
        tool("migctl", {"cmd": f"migctl dry-run --area {slug} --target plat2-prod --throttle 40 "
                               f"--batch-profile tuned"},
             fit(lambda n: dry_run(day + datetime.timedelta(days=1), n, V[k]["cs2"]), rng.randint(22, 60)) if plant(k, "cs2", "tool") else None)
        A("The second run passed as well, with zero mismatches, and it was a little faster with the "
          "new batch profile. Its checksum is in the summary block above; that run is now the "
          "baseline for the cutover verification.")
    else:
        U(rng.choice([
            f"How much storage does the {name} claim on hall B, and what does the run history say?",
            f"Show me the {name} volumes and its past runs in the migration database.",
        ]))
        if k % 2 == 0:
            tool("kubectl", {"cmd": f"kubectl --context hallb -n {slug} get pvc"},
                 fit(lambda n: pvc_table(slug, n), rng.randint(14, 30)))
        else:
            tool("psql", {"query": f"select run_id, started_at, kind, tables, mismatches, elapsed, result "
                                   f"from migctl_runs where area = '{name}' order by started_at"},
                 fit(lambda n: runs_table(day, n), rng.randint(12, 30)))
        A("The volumes are modest and all bound; the run history shows a couple of older failures "
          "from before the retry fix and clean runs since. One dry run is enough here unless the "
          "config changes before the cutover.")

    # 7. Rollback and decisions.
    regular(name)
    U(rng.choice([
        f"What does the rollback for the {name} look like if the cutover goes wrong?",
        f"Talk me through the {name} rollback. {first} will ask.",
        f"If we have to back out of the {name} cutover, how bad is it?",
    ]))
    if who == "assistant":
        extra_sentence = {
            "decision": f"I suggest we {v['extra']}, which also covers the auditors' month-end reads.",
            "budget": f"The Redis cache on plat2 comes out at {v['extra']}, which fits the run budget.",
            "osversion": f"The target cluster runs {v['extra']}, so the snapshot restore is supported directly.",
            "channel": f"I have set up {v['extra']} for the night, so consumers can follow along.",
            "envcap": f"Until the new quotas are proven we should {v['extra']}, and lift it a week after.",
            "p99": f"The couriers' contract sets a {v['extra']} on the callback endpoint, so we watch that first.",
            "thanos": f"The long-term store on plat2 runs {v['extra']}, which reads the old blocks as they are.",
            "redis": f"The online store on plat2 is {v['extra']}, the same major version as on hall B.",
        }[w["extra"][1]]
        plant(k, "extra", "message")
    else:
        extra_sentence = ""
    A(f"The rollback is to repoint the {name} at hall B, which stays read-only but intact for the "
      f"agreed period; the per-table rollback modes in the config decide what happens to the "
      f"partial copy on plat2. {extra_sentence} The rollback step is written into the change "
      f"record, and the rehearsal showed the repoint works.")

    # 8. Communication, no tools.
    regular(name)
    U(rng.choice([
        f"Draft the announcement for the {name} cutover, short, for the consumers' channels.",
        f"Who needs to hear about the {name} cutover, and what should we tell them?",
        f"Which consumers of the {name} are most likely to break at cutover?",
    ]))
    A(rng.choice([
        f"Here is a draft:\n\n\"The {name} moves from hall B to plat2 on the agreed night. Writes "
        f"pause for about half an hour during the final catch-up; reads keep working throughout. "
        f"Clients that use the service hostname need no change. If you connect by IP address or "
        f"cache DNS for longer than five minutes, tell us this week. Questions go to the owning "
        f"team's channel.\"\n\nI kept the date out of the draft until the owners confirm it in "
        f"#plat2-cutovers.",
        f"The consumers that matter are the batch jobs that connect directly and anything with a "
        f"pinned address. The interactive clients go through the service hostname and will follow "
        f"the repoint. I would send the list of direct connections from the hall-B logs to "
        f"{first} so the team can check them off.",
        f"Mostly the ones that hold long-lived connections: they keep talking to hall B until "
        f"they reconnect, and during the write freeze they will see errors. A restart of those "
        f"clients right after the repoint is the simplest fix; the runbook has the list.",
    ]))

    # 9. Sometimes a look at the repository or events.
    if k % 3 == 0:
        regular(name)
        U(rng.choice([
            f"What's changed in the {name} repo in the last few weeks?",
            f"Any recent warnings in the {name} namespace on plat2?",
        ]))
        if "repo" in items[-1]["content"]:
            tool("git", {"cmd": f"git -C repos/{slug} log --date=short --format='%h %ad %an  %s' -n 40"},
                 fit(lambda n: git_log(n, day), rng.randint(25, 45)))
        else:
            tool("kubectl", {"cmd": f"kubectl --context plat2 -n {slug} get events --sort-by=.lastTimestamp"},
                 fit(lambda n: events_table(slug, n), rng.randint(18, 40)))
        A("Mostly migration and config housekeeping; nothing that changes the plan. The recent "
          "rollback and checksum commits line up with what we saw in the dry runs.")

    schedule(k)


for k in range(len(WS)):
    workstream(k)
    if k == 9:
        regular("status")
        U("Steering group on Monday. Can you give me a status from the migration database, plus "
          "the state of the replication slots?")
        tool("psql", {"query": "select area, state, open_blockers, updated from migration_area order by area"},
             area_table())
        tool("psql", {"query": "select slot_name, active, restart_lsn, pg_size_pretty(lag) as lag, slot_type "
                               "from plat2_slots order by slot_name"},
             slots_table() + "\n\n" + runs_table(datetime.date(2027, 2, 20), 40))
        A("Ten workstreams have a reviewed config and at least one clean dry run; the rest are "
          "in progress. All active replication slots are within their lag guards. For the "
          "steering group: no workstream is blocked, and every planned cutover has a rollback step "
          "and a dry-run result posted for its owners.")
    if k == 5:
        regular("aborted run")
        U("The platform team tried a dry run of the shared reference data last night and it "
          "failed. What happened?")
        tool("migctl", {"cmd": "migctl dry-run --area reference-data --target plat2-prod --throttle 40"},
             dry_run(datetime.date(2027, 2, 12), 60, "", aborted=True))
        A("It ran out of retries when the source connection kept resetting partway through, so no "
          "checksum was computed, and migctl cleaned up the dry-run schema on plat2. Probably the "
          "hall-B storage maintenance that night; I would rerun it tomorrow.")

# Remaining questions, with ordinary turns between them.
FILLER_TURNS = [
    ("Which workstreams still need a rollback rehearsal?",
     "From the run history, most have had one; the later ones still need theirs, and I would do "
     "those in the week before each cutover so the numbers are fresh."),
    ("Anything we should tell the service desk before the next cutovers?",
     "Mainly the dates and the short write freezes, plus a note that the old hostnames will keep "
     "answering for a while after each cutover."),
    ("Is the hall-B Prometheus still needed once the metrics move?",
     "For a few weeks, yes: some dashboards still read from it, and the old data is handy for "
     "comparisons. After that it can go with the rest of hall B."),
    ("How are we doing against the plan overall?",
     "On track. The dry runs have been clean, the owners have signed off where needed, and the "
     "remaining risks are the usual client-side ones we have been handling all along."),
]
fi = 0
while pending:
    if last_was_question or not any(p[0] <= turn_no + 1 for p in pending):
        q, a = FILLER_TURNS[fi % len(FILLER_TURNS)]
        fi += 1
        new_turn("wrap-up")
        U(q)
        A(a)
        last_was_question = False
        continue
    maybe_ask()

new_turn("wrap-up")
U("Thanks. Write me a short status of the whole programme for the steering group.")
A("All fifteen workstreams have a reviewed config and at least one clean dry run; every planned "
  "cutover avoids Fridays and pre-holiday days, carries a written rollback step, and will have "
  "its dry-run result posted in #plat2-cutovers for the owning team before it starts. The "
  "open items are small and owned.", pad=False)


# ---------------------------------------------------------------------------

def main():
    blob = "\n".join(i["content"] for i in items)
    for f in facts:
        holders = [i for i in items if f["text"] in i["content"]]
        assert len(holders) == 1 and holders[0]["content"].count(f["text"]) == 1, f
        if f["source"] == "tool":
            assert holders[0]["kind"] == "tool_result", f
    for _, rule in RULES:
        assert rule in blob, rule
    bad = [(i["turn"], i["tool_name"], len(i["content"].encode())) for i in items
           if i["kind"] == "tool_result" and not 1200 <= len(i["content"].encode()) <= 10000]
    assert not bad, bad
    assert turn_no > 150
    fact_points = [50, 100, 150, turn_no]

    def write(name, rows):
        with open(os.path.join(HERE, name), "w") as out:
            for r in rows:
                out.write(json.dumps(r, ensure_ascii=False) + "\n")

    write("platform.jsonl", [{"system_prompt": SYSTEM}] + items)
    write("platform_facts.jsonl", facts)
    common = ([{"kind": "instruction", "turn": t, "text": rule} for t, rule in RULES]
              + [{"kind": "facts", "turn": t} for t in fact_points])
    write("platform_probes.jsonl", common + probes["tune"])
    write("platform_heldout_probes.jsonl", common + probes["held"])
    print(f"{turn_no} turns, {len(items)} items, {call_no} tool calls, {len(facts)} facts "
          f"({sum(f['source'] == 'tool' for f in facts)} from tools), "
          f"{len(probes['tune'])} tuning and {len(probes['held'])} held-out recall probes, "
          f"{len(blob.encode())} bytes")


main()
