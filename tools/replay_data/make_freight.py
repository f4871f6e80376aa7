#!/usr/bin/env python3
"""Writes the Harrow & Vane Freight estate-migration replay conversation used by tools/replay.

Harrow & Vane Freight, a parcel and pallet carrier with 41 depots, is moving
its estate out of the Bicester data centre (an Oracle RAC cluster, a
self-hosted Kafka cluster, RabbitMQ, two cron boxes, an SFTP EDI gateway for
the partner carriers, the warehouse-management system, the label print
servers, the route optimiser) to managed cloud services, one workstream at a
time: edi-gateway, route-optimiser, depot-scanners, wms-core, label-printing,
event-bus, parcel-queues, batch-jobs, tracking-api, customs-docs,
fleet-telematics and invoicing. A platform engineer spends a long day with an
assistant: config reads, migration dry runs, Oracle and Postgres counts,
terraform plans, cluster listings, log tails, health checks, test runs, and in
the evening the cutover of the label-printing workstream.

How the conversation is built:
  * most turns carry a tool call with a long output that looks like the real
    thing (configs in YAML, TOML, properties and HCL read with line numbers,
    sqlplus and psql results, kubectl listings, terraform plans, log tails,
    JSON health responses, CSV exports, dry-run reports, git logs, pytest
    output);
  * the line holding a planted value never names its workstream, and neither
    does the rest of that output: the workstream is named only in the call's
    arguments (a path, a query, a namespace, a flag) and in the user's message
    of that turn;
  * every workstream's service config has the same keys, every dry run ends
    with the same summary lines, every health response has the same fields,
    so a question can only be answered from the one output its subject's call
    produced;
  * the assistant does not repeat tool values in its replies, and its answers
    to recall questions stay vague;
  * recall questions come 40 or more turns after the fact.

Outputs (beside this file):
  freight.jsonl                  system prompt, then one item per line
  freight_facts.jsonl            id, turn, topic, source, text
  freight_probes.jsonl           instructions, fact counts, recall questions
                                 asked in words close to the stored exchange
  freight_heldout_probes.jsonl   instructions, fact counts, other recall
                                 questions asked in other words
  freight_dev_questions.jsonl    more questions in other words, not asked in
                                 the conversation (fact, turn, question)

freight_dev2_questions.jsonl and freight_dev3_questions.jsonl (24 and 22
questions, 2 unrelated ones each, written by hand after the conversation,
the way the held-out ones are asked; the third reuses the facts of the
development sets in other words again) are not written here. The held-out questions were never used to change the ranking.

Deterministic (seeded, no clock, standard library only). Re-run after editing:
  python3 tools/replay_data/make_freight.py
"""

import datetime
import json
import os
import random
import re

rng = random.Random(20260609)
HERE = os.path.dirname(os.path.abspath(__file__))

SYSTEM = ("You are a platform-engineering assistant for Harrow & Vane's move out of the Bicester data centre to "
          "managed cloud services (AWS eu-west-2). The estate is split into workstreams: edi-gateway (the SFTP EDI "
          "gateway for partner carriers), route-optimiser, depot-scanners, wms-core (the warehouse-management "
          "system on Oracle), label-printing, event-bus (self-hosted Kafka to MSK), parcel-queues (RabbitMQ to "
          "Amazon MQ), batch-jobs (the cron boxes), tracking-api, customs-docs, fleet-telematics and invoicing. "
          "Service configs live under config/<workstream>/, infrastructure under infra/prod/<workstream>/, the "
          "migration tool is hvmig, and each workstream has its own Kubernetes namespace on the hv-prod EKS "
          "cluster. You can read files, run shell commands on the ops host (hvmig, kubectl, terraform, aws, curl, "
          "git, pytest, ssh to the legacy hosts), query Oracle with sqlplus and the target databases with psql, "
          "and apply patches. Quote values exactly as the tools return them, and say so when you are unsure.")

RULES = [
    (2, "never cut over a carrier feed during the 16:00-19:00 dispatch peak, whatever window the runbook suggests"),
    (3, "no legacy Oracle schema gets dropped or truncated until its target has run clean for seven days and the "
        "DBA has signed it off in the change"),
    (4, "every cutover needs a rollback rehearsal recorded in the change ticket before it starts, however small "
        "the workstream"),
]

TODAY = datetime.date(2026, 6, 9)

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


def dots(key, value):
    """One summary line of an hvmig report."""
    return f"{key} {'.' * (24 - len(key))} {value}"


def tfl(key, value, width):
    """One attribute line of a terraform plan block (the key padded as terraform aligns a block)."""
    return f"{key.ljust(width)} = {value}"


# Terraform resource types and their attributes (the widest key sets the padding).
TF_TYPES = {
    "aws_rds_cluster": ["backup_retention_period", "cluster_identifier", "copy_tags_to_snapshot", "database_name",
                        "deletion_protection", "engine", "engine_version", "master_username", "port",
                        "preferred_backup_window", "storage_encrypted"],
    "aws_rds_cluster_instance": ["cluster_identifier", "engine", "identifier", "instance_class",
                                 "performance_insights_enabled", "promotion_tier", "publicly_accessible"],
    "aws_db_instance": ["allocated_storage", "backup_retention_period", "engine", "engine_version", "identifier",
                        "instance_class", "multi_az", "storage_type"],
    "aws_lb_target_group": ["deregistration_delay", "name", "port", "protocol", "slow_start", "target_type",
                            "vpc_id"],
    "aws_kinesis_stream": ["encryption_type", "name", "retention_period", "shard_count", "shard_level_metrics"],
    "aws_msk_cluster": ["cluster_name", "enhanced_monitoring", "number_of_broker_nodes"],
    "aws_sqs_queue": ["max_message_size", "message_retention_seconds", "name", "receive_wait_time_seconds",
                      "visibility_timeout_seconds"],
    "aws_ecs_service": ["cluster", "desired_count", "launch_type", "name", "task_definition"],
    "aws_cloudwatch_log_group": ["kms_key_id", "name", "retention_in_days", "skip_destroy"],
    "aws_security_group_rule": ["cidr_blocks", "from_port", "protocol", "security_group_id", "to_port", "type"],
    "aws_ebs_volume": ["availability_zone", "encrypted", "iops", "size", "throughput", "type"],
}
TFW = {t: max(map(len, ks)) for t, ks in TF_TYPES.items()}

# Config formats by workstream.
FMT = {"edi-gateway": "properties", "wms-core": "properties", "invoicing": "properties",
       "route-optimiser": "yaml", "depot-scanners": "yaml", "tracking-api": "yaml", "fleet-telematics": "yaml",
       "label-printing": "toml", "batch-jobs": "toml", "customs-docs": "toml",
       "event-bus": "hcl", "parcel-queues": "hcl"}
CFG_PATH = {"properties": "application.properties", "yaml": "service.yaml", "toml": "service.toml",
            "hcl": "service.hcl"}

SECTIONS = [
    ("server", ["listen_port", "worker_threads", "max_connections", "read_timeout_ms", "write_timeout_ms",
                "idle_timeout_s"]),
    ("db", ["host", "port", "name", "user", "pool_min", "pool_max", "connect_timeout_ms", "statement_timeout_ms"]),
    ("retry", ["retry_limit", "retry_backoff_ms", "backoff_multiplier", "jitter"]),
    ("batch", ["batch_size", "poll_interval_s", "max_inflight", "drain_timeout_s", "dlq_after"]),
    ("cutover", ["freeze_writes", "dual_write", "heartbeat_interval_s", "verify_sample_pct"]),
    ("observability", ["log_level", "log_format", "metrics_port", "trace_sample_rate"]),
    ("tls", ["enabled", "min_version", "ca_bundle", "verify_peer"]),
    ("limits", ["max_body_kb", "rate_per_s", "burst", "max_queue"]),
    ("shutdown", ["grace_period_s", "preStop_sleep_s"]),
]

NOISE = {
    "listen_port": [8080, 8081, 8443, 9090], "worker_threads": [8, 16, 24, 32, 48],
    "max_connections": [256, 512, 1024, 2048], "read_timeout_ms": [5000, 10000, 15000, 20000, 30000],
    "write_timeout_ms": [5000, 10000, 15000], "idle_timeout_s": [60, 120, 300, 600],
    "port": [5432, 5432, 1521], "pool_min": [2, 4, 5, 8], "pool_max": [20, 30, 40, 50, 64],
    "connect_timeout_ms": [2000, 3000, 5000, 10000], "statement_timeout_ms": [30000, 60000, 120000],
    "retry_limit": [3, 4, 5, 6], "retry_backoff_ms": [250, 500, 1000, 2000], "backoff_multiplier": ["1.5", "2.0"],
    "jitter": ["true", "false"], "batch_size": [100, 250, 500, 1000, 2000], "poll_interval_s": [5, 10, 15, 30, 60],
    "max_inflight": [16, 32, 64, 128], "drain_timeout_s": [30, 60, 90, 120], "dlq_after": [3, 5, 10],
    "freeze_writes": ["false"], "dual_write": ["true", "false"], "heartbeat_interval_s": [10, 15, 30, 60],
    "verify_sample_pct": [1, 2, 5, 10], "log_level": ["INFO", "INFO", "WARN"], "log_format": ["json"],
    "metrics_port": [9100, 9102, 9464], "trace_sample_rate": ["0.05", "0.1", "0.2"],
    "enabled": ["true"], "min_version": ["TLSv1.2", "TLSv1.3"], "ca_bundle": ["/etc/ssl/hv/ca-bundle.pem"],
    "verify_peer": ["true"], "max_body_kb": [512, 1024, 4096], "rate_per_s": [200, 500, 1000, 2500],
    "burst": [50, 100, 400], "max_queue": [1000, 5000, 10000], "grace_period_s": [20, 30, 45],
    "preStop_sleep_s": [5, 10],
}
STRINGY = {"host", "name", "user", "log_level", "log_format", "min_version", "ca_bundle"}


def kv(fmt, section, key, value):
    """A config line in a format: what a planted config value looks like in its file."""
    if fmt == "properties":
        return f"{section}.{key}={value}"
    if fmt == "yaml":
        return f"{key}: {value}"
    if key in STRINGY:
        return f'{key} = "{value}"'
    return f"{key} = {value}"


P = {}  # label -> planted tool text
PLANT_CFG = {}  # label -> (workstream, section, key, value)


def cfg_plant(label, ws, section, key, values):
    P[label] = unique(lambda: kv(FMT[ws], section, key, pick(values)))
    v = P[label].split("=" if FMT[ws] == "properties" else ": " if FMT[ws] == "yaml" else " = ")[-1]
    PLANT_CFG[label] = (ws, section, key, v)


# service configs (one per workstream, the same keys everywhere)
cfg_plant("EDI1", "edi-gateway", "server", "read_timeout_ms", [17500, 22500, 27500])
cfg_plant("RO1", "route-optimiser", "batch", "max_inflight", [72, 88, 96, 112])
cfg_plant("DS1", "depot-scanners", "cutover", "heartbeat_interval_s", [45, 75, 105])
cfg_plant("WMS1", "wms-core", "db", "pool_max", [84, 96, 112, 136])
cfg_plant("LP1", "label-printing", "db", "connect_timeout_ms", [4500, 6500, 7500])
cfg_plant("EB1", "event-bus", "batch", "batch_size", [1750, 3500, 4200])
cfg_plant("PQ1", "parcel-queues", "batch", "drain_timeout_s", [45, 150, 210, 240])
cfg_plant("BJ1", "batch-jobs", "retry", "retry_limit", [7, 8, 9])
cfg_plant("TA1", "tracking-api", "db", "statement_timeout_ms", [45000, 75000, 90000])
cfg_plant("CD1", "customs-docs", "batch", "batch_size", [150, 350, 750])
cfg_plant("FT1", "fleet-telematics", "batch", "poll_interval_s", [7, 20, 45])
cfg_plant("INV1", "invoicing", "retry", "retry_backoff_ms", [1500, 3000, 4500])

# dry runs
P["EDI2"] = unique(lambda: dots("source checksum", hexs(16)))
P["RO2"] = unique(lambda: dots("estimated cutover", f"01:{rng.randint(10, 49):02d}:{rng.randint(0, 59):02d}"))
P["DS2"] = unique(lambda: dots("source checksum", hexs(16)))
P["WMS2"] = unique(lambda: dots("rows rejected", f"{rng.randint(1100, 1900):,}"))
P["EB2"] = unique(lambda: dots("source checksum", hexs(16)))
P["PQ2"] = unique(lambda: dots("rollback point", f"rp-20260609-{rng.randint(10, 11)}{rng.randint(10, 59)}-"
                                                 f"{hexs(6)}"))
P["TA2"] = unique(lambda: dots("source checksum", hexs(16)))
P["CD2"] = unique(lambda: dots("source checksum", hexs(16)))
P["FT2"] = unique(lambda: dots("estimated cutover", f"02:{rng.randint(10, 49):02d}:{rng.randint(0, 59):02d}"))
P["INV2"] = unique(lambda: dots("source checksum", hexs(16)))
# table statistics and counts
P["DS3"] = unique(lambda: str(rng.randint(61000000, 69000000)))
P["WMS3"] = unique(lambda: str(rng.randint(23000000, 29000000)))
P["CD3"] = unique(lambda: str(rng.randint(3100000, 3900000)))
P["BJ3"] = unique(lambda: str(rng.randint(412000, 489000)))
P["INV3"] = unique(lambda: str(rng.randint(7100000, 7900000)))
# cluster listings: image tags
P["RO3"] = unique(lambda: f"solver:7.{rng.randint(3, 6)}.{rng.randint(11, 29)}")
P["PQ3"] = unique(lambda: f"consumer:3.{rng.randint(11, 14)}.{rng.randint(2, 9)}")
P["TA3"] = unique(lambda: f"api:5.{rng.randint(30, 39)}.{rng.randint(2, 9)}")
# terraform plans
P["WMS4"] = unique(lambda: tfl("instance_class", f'"db.r6g.{pick(["8xlarge", "12xlarge"])}"',
                               TFW["aws_rds_cluster_instance"]))
P["EB4"] = unique(lambda: tfl("size", pick([2750, 3250, 3750]), TFW["aws_ebs_volume"]))
P["TA5"] = unique(lambda: tfl("deregistration_delay", f'"{pick([75, 105, 135])}"', TFW["aws_lb_target_group"]))
P["FT4"] = unique(lambda: tfl("shard_count", pick([14, 18, 22]), TFW["aws_kinesis_stream"]))
P["INV4"] = unique(lambda: tfl("backup_retention_period", pick([21, 28, 35]), TFW["aws_db_instance"]))
# log tails
P["EDI3"] = unique(lambda: f"stale_partials={rng.randint(1100, 1900)}")
P["DS4"] = unique(lambda: f"reconnect_storm count={rng.randint(310, 690)}")
P["EB3"] = unique(lambda: f"lag={rng.randint(41000, 89000)}")
P["BJ2"] = unique(lambda: f"runtime_s={rng.randint(5100, 6900)}")
P["FT3"] = unique(lambda: f"dropped={rng.randint(2100, 4800)}")
# health responses
P["RO4"] = unique(lambda: f'"p95LatencyMs": {rng.randint(2100, 3900)}')
P["LP2"] = unique(lambda: f'"queueDepth": {rng.randint(1100, 2900)}')
P["PQ4"] = unique(lambda: f'"inFlight": {rng.randint(610, 990)}')
P["TA4"] = unique(lambda: f'"p95LatencyMs": {rng.randint(410, 790)}')
# tests
P["LP3"] = unique(lambda: f"{rng.randint(1210, 1390)} passed")
P["CD4"] = unique(lambda: f"{rng.randint(2210, 2490)} passed")
# CSV export
P["FT5"] = unique(lambda: f"2026-05-27,{rng.randint(18100000, 18900000)}")

# The messages' facts.
M = {
    "name": unique(lambda: "Ingrid Macaulay-Osei"),
    "company": unique(lambda: "Harrow & Vane Freight"),
    "ticket": unique(lambda: "CHG-40917"),
    "depots": unique(lambda: "41 depots"),
    "dba": unique(lambda: "Oskar Lindqvist"),
    "pm": unique(lambda: "Declan Fairweather"),
    "carrier": unique(lambda: "Priya Ramaswamy-Holt"),
    "sr": unique(lambda: "SR 3-37418290511"),
    "awscase": unique(lambda: "case 174126903910"),
    "printeng": unique(lambda: "Callum Brodie"),
    "freeze": unique(lambda: "change freeze starts on Monday 29 June"),
    "edidate": unique(lambda: "evening of Thursday 18 June"),
}

WS_PATTERN = {
    "EDI": r"edi[ -]?gateway|\bedi\b",
    "RO": r"route[ -]?optimi[sz]er|optimi[sz]er",
    "DS": r"depot[ -]?scanners?|\bscanners?\b",
    "WMS": r"\bwms\b|wms[ -]?core|warehouse",
    "LP": r"label[ -]?print|printers?\b|printing",
    "EB": r"event[ -]?bus|kafka|\bmsk\b",
    "PQ": r"parcel[ -]?queues?|rabbit",
    "BJ": r"batch[ -]?jobs?|\bcron",
    "TA": r"tracking[ -]?api|\btracking\b",
    "CD": r"customs",
    "FT": r"telematics|\bfleet\b",
    "INV": r"invoicing|billing",
}


def subject_of(label):
    return WS_PATTERN[re.match(r"[A-Z]+", label).group(0)]


def clean(s):
    return not any(r in s for r in RESERVED)


def N(make):
    for _ in range(2000):
        s = make()
        if clean(s):
            return s
    raise RuntimeError("noise keeps hitting a planted value")


def fit(make, n, lo=1300, hi=9600):
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


def planted(make, labels):
    for _ in range(2000):
        out = make()
        held = {l for l, v in P.items() if v in out} | {l for l, v in M.items() if v in out}
        if held == set(labels) and not any(re.search(subject_of(l), out, re.I) for l in labels):
            return out
    raise RuntimeError(f"cannot draw an output holding exactly {labels}")


def fitN(make, n, lo=1300, hi=9600):
    return fit(lambda k: N(lambda: make(k)), n, lo, hi)


def fitP(make, n, labels, lo=1300, hi=9600):
    return fit(lambda k: planted(lambda: make(k), labels), n, lo, hi)


# ---------------------------------------------------------------------------
# Formatting helpers.

def numbered(lines, start=1):
    return "\n".join(f"{i:6d}\t{l}" for i, l in enumerate(lines, start))


def table(headers, rows, right=(), gap="   "):
    rows = [[str(c) for c in r] for r in rows]
    w = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    out = [gap.join(h.rjust(w[i]) if i in right else h.ljust(w[i]) for i, h in enumerate(headers)).rstrip()]
    for r in rows:
        out.append(gap.join(c.rjust(w[i]) if i in right else c.ljust(w[i]) for i, c in enumerate(r)).rstrip())
    return "\n".join(out)


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


def sqlplus_table(headers, rows, numeric=()):
    rows = [[str(x) for x in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    widths = [max(w, 10) if i in numeric else w for i, w in enumerate(widths)]
    out = ["", " ".join(h.rjust(w) if i in numeric else h.ljust(w) for i, (h, w) in enumerate(zip(headers, widths))),
           " ".join("-" * w for w in widths)]
    for r in rows:
        out.append(" ".join(c.rjust(w) if i in numeric else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))))
    out += ["", f"{len(rows)} rows selected.", ""]
    return "\n".join(out)


def clock(h, m=0, s=0):
    return datetime.datetime(TODAY.year, TODAY.month, TODAY.day, h, m, s)


NOW = clock(8, 5)


def iso(dt, ms=True):
    return dt.strftime("%Y-%m-%dT%H:%M:%S") + (f".{rng.randint(0, 999):03d}Z" if ms else "Z")


# ---------------------------------------------------------------------------
# The estate (invented).

WSS = ["edi-gateway", "route-optimiser", "depot-scanners", "wms-core", "label-printing", "event-bus",
       "parcel-queues", "batch-jobs", "tracking-api", "customs-docs", "fleet-telematics", "invoicing"]
CODE = {"edi-gateway": "EDI", "route-optimiser": "RO", "depot-scanners": "DS", "wms-core": "WMS",
        "label-printing": "LP", "event-bus": "EB", "parcel-queues": "PQ", "batch-jobs": "BJ",
        "tracking-api": "TA", "customs-docs": "CD", "fleet-telematics": "FT", "invoicing": "INV"}
LEGACY = {"edi-gateway": "bic-sftp01", "route-optimiser": "bic-opt02", "depot-scanners": "bic-app11",
          "wms-core": "bic-wms01", "label-printing": "bic-prt01", "event-bus": "bic-kfk01",
          "parcel-queues": "bic-rmq01", "batch-jobs": "bic-cron02", "tracking-api": "bic-app07",
          "customs-docs": "bic-app14", "fleet-telematics": "bic-app19", "invoicing": "bic-app03"}
COMPONENTS = {"edi-gateway": ["relay", "poller", "translator"], "route-optimiser": ["solver", "api", "matrix-cache"],
              "depot-scanners": ["ingest", "api", "sync"], "wms-core": ["core", "allocator", "replenish"],
              "label-printing": ["render", "spooler", "api"], "event-bus": ["mirror", "connect", "registry"],
              "parcel-queues": ["consumer", "shovel", "api"], "batch-jobs": ["runner", "scheduler"],
              "tracking-api": ["api", "projector", "webhooks"], "customs-docs": ["docgen", "api", "filer"],
              "fleet-telematics": ["ingest", "enricher", "api"], "invoicing": ["rater", "api", "exporter"]}
OBJECTS = {
    "edi-gateway": ["MSG_INBOUND", "MSG_OUTBOUND", "MSG_ACK", "PARTNER", "PARTNER_ENDPOINT", "MAILBOX_ARCHIVE",
                    "TRANSLATION_MAP", "FILE_AUDIT"],
    "route-optimiser": ["ROUTE_PLAN", "ROUTE_STOP", "VEHICLE_PROFILE", "TIME_WINDOW", "DRIVE_MATRIX",
                        "PLAN_RUN", "ZONE_POLYGON"],
    "depot-scanners": ["SCAN_EVENT", "DEVICE", "DEVICE_ASSIGNMENT", "SCAN_EXCEPTION", "SHIFT_LOG", "CAGE_MANIFEST",
                       "FIRMWARE_ROLLOUT"],
    "wms-core": ["STOCK_MOVE", "PICK_TASK", "LOCATION", "SKU_MASTER", "INBOUND_RECEIPT", "CYCLE_COUNT",
                 "REPLEN_ORDER", "PUTAWAY_RULE", "CONTAINER"],
    "label-printing": ["LABEL_JOB", "TEMPLATE", "DEVICE_QUEUE", "RENDER_CACHE", "REPRINT_LOG"],
    "event-bus": ["parcel.scanned.v2", "parcel.loaded.v1", "route.published.v3", "depot.shift.v1",
                  "consignment.created.v4", "consignment.amended.v2", "pod.captured.v1", "vehicle.position.v1"],
    "parcel-queues": ["q.sort.assign", "q.sort.exceptions", "q.pod.upload", "q.notify.sms", "q.notify.email",
                      "q.returns.intake", "q.manifest.close"],
    "batch-jobs": ["job_run", "job_definition", "job_dependency", "job_param", "calendar_exception"],
    "tracking-api": ["TRACKING_EVENT", "CONSIGNMENT", "PARCEL", "SUBSCRIPTION", "WEBHOOK_DELIVERY", "ETA_SNAPSHOT"],
    "customs-docs": ["DECLARATION", "DECLARATION_LINE", "COMMODITY_CODE", "CERT_ORIGIN", "DOC_BLOB",
                     "FILING_RECEIPT", "EORI_CACHE"],
    "fleet-telematics": ["POSITION", "TRIP", "HARSH_EVENT", "DTC_CODE", "GEOFENCE_HIT", "FUEL_READING"],
    "invoicing": ["INVOICE", "INVOICE_LINE", "RATE_CARD", "SURCHARGE", "CREDIT_NOTE", "ACCOUNT_TERMS",
                  "EXPORT_BATCH"],
}
ENGINEERS = ["imacaulay-osei", "dfairweather", "olindqvist", "rkhatri", "tbellamy", "sadeyemi", "mnorquist"]
ECR = "481276550913.dkr.ecr.eu-west-2.amazonaws.com/hv"


def cluster_host():
    return f"hv-prod-db{rng.randint(2, 19):02d}.cluster-c{hexs(11)}.eu-west-2.rds.amazonaws.com"


# ---------------------------------------------------------------------------
# Output shapes.

CFG_COMMENTS = [
    "# Managed by the platform team; changes go through a CHG and a pull request.",
    "# Values tuned against Bicester load figures; revisit after the first week on the target.",
    "# Secrets come from AWS Secrets Manager at start-up, never from this file.",
    "# Keep in step with the staging copy; the diff job flags drift nightly.",
    "# Timeouts are in milliseconds unless the key says otherwise.",
]


def config_lines(ws, plant=None):
    """A service config in the workstream's format: the same keys for every workstream."""
    fmt = FMT[ws]
    vals = {}
    for sec, keys in SECTIONS:
        for k in keys:
            if k == "host":
                v = cluster_host()
            elif k == "name":
                v = pick(["ops", "core", "app", "hv"])
            elif k == "user":
                v = f"svc_{pick(['app', 'rw', 'writer', 'main'])}"
            elif k == "port" and sec == "db":
                v = 5432
            else:
                v = pick(NOISE[k])
            vals[(sec, k)] = v
    if plant:
        _, sec, k, v = plant
        vals[(sec, k)] = v
    out = []
    head = rng.sample(CFG_COMMENTS, 3)
    c = "#" if fmt != "hcl" else "#"
    out += [h.replace("#", c) for h in head]
    out.append(f"{c} last reviewed {pick(['2026-04-14', '2026-05-02', '2026-05-19', '2026-05-28'])} by "
               f"{pick(ENGINEERS)}")
    out.append("")
    if fmt == "hcl":
        out.append('service {')
        out.append(f'  environment = "prod"')
        out.append(f'  region      = "eu-west-2"')
        out.append("")
    for sec, keys in SECTIONS:
        if fmt == "yaml":
            out.append(f"{sec}:")
        elif fmt == "toml":
            out.append(f"[{sec}]")
        elif fmt == "hcl":
            out.append(f"  {sec} {{")
        else:
            out.append(f"# --- {sec} ---")
        for k in keys:
            v = vals[(sec, k)]
            line = kv(fmt, sec, k, v)
            if fmt == "yaml":
                line = "  " + line
            elif fmt == "hcl":
                line = "    " + line
            out.append(line)
            if rng.random() < 0.3:
                out.append(("  " if fmt == "yaml" else "    " if fmt == "hcl" else "") +
                           pick(["# see runbook section 4.2", "# raised after the March incident",
                                 "# matches the legacy value", "# do not lower without load testing",
                                 "# per-pod figure", "# agreed with the owning team in the design review",
                                 "# legacy host used a different unit here; converted",
                                 "# overridden per environment by the deploy pipeline",
                                 "# keep below the load balancer's idle timeout"]))
        if fmt == "hcl":
            out.append("  }")
        out.append("")
    if fmt == "hcl":
        out.append("}")
    else:
        extra = {"yaml": ["features:", "  shadow_reads: true", "  strict_schema: true",
                          f"  legacy_fallback: {pick(['true', 'false'])}"],
                 "toml": ["[features]", "shadow_reads = true", "strict_schema = true",
                          f"legacy_fallback = {pick(['true', 'false'])}"],
                 "properties": ["# --- features ---", "features.shadow_reads=true", "features.strict_schema=true",
                                f"features.legacy_fallback={pick(['true', 'false'])}"]}[fmt]
        out += extra
    return out


def dryrun(ws, plant=None, started=None, warnings=2, progress=20):
    """An hvmig dry-run report; every report ends with the same summary lines."""
    started = started or NOW
    objs = OBJECTS[ws]
    rows, total = [], 0
    for o in objs:
        n = rng.randint(20000, 40000000)
        total += n
        ck = hexs(12)
        diff = 0 if rng.random() < 0.8 else rng.randint(1, 40)
        rows.append([o, f"{n:,}", f"{n - diff:,}", diff, ck, ck if diff == 0 else hexs(12),
                     "ok" if diff == 0 else "drift"])
    out = [f"hvmig 3.8.2  dry-run  plan rev {rng.randint(9, 31)}  started {started:%Y-%m-%d %H:%M:%S} BST",
           "source   " + pick(["oracle://bic-ora-scan.hv.local:1521/HVPROD", "files://mirror/current",
                               "broker://legacy/primary"]),
           "target   " + pick(["postgresql://" + cluster_host() + ":5432/app", "s3://hv-prod-migr-" + hexs(6),
                               "broker://target/primary"]),
           "mode     compare only, no writes to target", ""]
    t = started
    for _ in range(progress):
        t += datetime.timedelta(seconds=rng.randint(5, 90))
        o = pick(objs)
        out.append(f"{t:%H:%M:%S} {pick(['extract', 'extract', 'compare', 'verify'])} {o:<24} chunk "
                   f"{rng.randint(1, 400):>4}/{rng.randint(400, 900)}  rows {rng.randint(10000, 250000):>7}  "
                   f"{rng.randint(2, 90):>3}s  {pick(['ok', 'ok', 'ok', 'retry 1', 'ok'])}")
    out.append("")
    out.append(table(["OBJECT", "ROWS SRC", "ROWS TGT", "DIFF", "CHECKSUM SRC", "CHECKSUM TGT", "STATUS"], rows,
                     right=(1, 2, 3)))
    out.append("")
    out.append(f"phase timings: extract {rng.randint(4, 40)}m{rng.randint(0, 59):02d}s  compare "
               f"{rng.randint(2, 20)}m{rng.randint(0, 59):02d}s  verify {rng.randint(1, 9)}m{rng.randint(0, 59):02d}s")
    out.append("")
    wl = ["sequence high-water mark differs by less than one cache block",
          "2 objects have no primary key; compared by full-row hash",
          "clock skew between source and target hosts is 412 ms (limit 1000 ms)",
          "LOB columns sampled at 5%, not compared in full",
          "target statistics are stale; row estimates may be off until ANALYZE",
          "replica lag on source was 3 s during extract"]
    out.append(f"warnings ({warnings}):")
    for w in rng.sample(wl, warnings):
        out.append(f"  - {w}")
    out.append("")
    ck = hexs(16)
    summary = {"objects compared": len(objs), "rows read": f"{total:,}",
               "rows rejected": f"{rng.randint(0, 400):,}", "source checksum": ck, "target checksum": ck,
               "estimated cutover": f"00:{rng.randint(5, 59):02d}:{rng.randint(0, 59):02d}",
               "rollback point": f"rp-20260609-{started:%H%M}-{hexs(6)}"}
    lines = {k: dots(k, v) for k, v in summary.items()}
    if plant:
        key = plant.split(" .")[0]
        lines[key] = plant
        if key == "source checksum":
            lines["target checksum"] = dots("target checksum", plant.split()[-1])
    out.append("summary")
    out += ["  " + l for l in lines.values()]
    out.append(f"result: PASS with {warnings} warning{'s' if warnings != 1 else ''}")
    return "\n".join(out)


def sqlplus_stats(ws, plant=None, n=None):
    objs = OBJECTS[ws]
    rows = []
    for i, o in enumerate(objs):
        num = plant if (plant and i == 0) else str(rng.randint(12000, 30000000))
        rows.append([o, num, rng.randint(200, 900000), f"2026-06-0{rng.randint(6, 8)} 0{rng.randint(1, 4)}:"
                     f"{rng.randint(10, 59)}", pick(["YES", "YES", "NO"])])
    for k in range(n or 6):
        rows.append([f"{pick(objs)}_{pick(['HIST', 'ARCH', 'TMP', 'BAK', 'OLD'])}{k}",
                     rng.randint(0, 900000), rng.randint(8, 20000), f"2026-05-{rng.randint(10, 31)} 02:{rng.randint(10, 59)}",
                     "NO"])
    rows.sort(key=lambda r: -int(r[1]))
    return ("Connected to:\nOracle Database 19c Enterprise Edition Release 19.0.0.0.0 - Production\n"
            "Version 19.21.0.0.0\n" + sqlplus_table(["TABLE_NAME", "NUM_ROWS", "BLOCKS", "LAST_ANALYZED", "PARTITIONED"],
                                                     rows, numeric=(1, 2)) +
            "\nDisconnected from Oracle Database 19c Enterprise Edition Release 19.0.0.0.0 - Production")


def psql_stats(ws, plant=None, n=6):
    objs = [o.lower() for o in OBJECTS[ws]]
    rows = []
    for i, o in enumerate(objs):
        live = plant if (plant and i == 0) else str(rng.randint(9000, 20000000))
        rows.append([o, live, rng.randint(0, 90000), f"2026-06-09 0{rng.randint(5, 8)}:{rng.randint(10, 59)}:"
                     f"{rng.randint(10, 59)}+01", rng.randint(0, 40)])
    for k in range(n):
        rows.append([f"{pick(objs)}_p2026_0{rng.randint(1, 5)}", rng.randint(0, 900000), rng.randint(0, 9000),
                     "", 0])
    rows.sort(key=lambda r: -int(r[1]))
    return psql_table(["relname", "n_live_tup", "n_dead_tup", "last_autoanalyze", "seq_scan"], rows,
                      numeric=(1, 2, 4))


def kubectl_get(ws, plant=None, pods=3):
    comps = COMPONENTS[ws]
    drows, prows = [], []
    nodes = [f"ip-10-42-{rng.randint(0, 63)}-{rng.randint(2, 250)}.eu-west-2.compute.internal" for _ in range(6)]
    for c in comps:
        tag = plant if (plant and plant.startswith(c + ":")) else f"{c}:{rng.randint(1, 9)}.{rng.randint(0, 40)}.{rng.randint(0, 20)}"
        r = rng.randint(3, 3 + pods)
        drows.append([f"deployment.apps/{c}", f"{r}/{r}", r, r, f"{rng.randint(1, 30)}d", c, f"{ECR}/{tag}",
                      f"app={c}"])
        for _ in range(r if pods else 0):
            prows.append([f"pod/{c}-{hexs(10)}-{hexs(5)}", "1/1", "Running", pick([0, 0, 0, 1, 2, 4]),
                          f"{rng.randint(1, 30)}d", f"10.42.{rng.randint(0, 63)}.{rng.randint(2, 250)}",
                          pick(nodes), "<none>", "<none>"])
    out = table(["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"], drows)
    if prows:
        out = table(["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED NODE",
                     "READINESS GATES"], prows) + "\n\n" + out
    return out


def tf_block(rtype, rname, plant=None, action="create"):
    keys = TF_TYPES[rtype]
    w = TFW[rtype]
    sym = {"create": "+", "update": "~"}[action]
    vals = {
        "backup_retention_period": pick([7, 14]), "cluster_identifier": f'"hv-prod-db{rng.randint(2, 19):02d}"',
        "copy_tags_to_snapshot": "true", "database_name": '"app"', "deletion_protection": "true",
        "engine": '"aurora-postgresql"', "engine_version": f'"15.{pick([5, 6, 7])}"', "master_username": '"hvadmin"',
        "port": "5432", "preferred_backup_window": '"01:00-02:00"', "storage_encrypted": "true",
        "identifier": f'"hv-prod-db{rng.randint(2, 19):02d}-{rng.randint(1, 3)}"',
        "instance_class": f'"db.r6g.{pick(["large", "xlarge", "2xlarge", "4xlarge"])}"',
        "performance_insights_enabled": "true", "promotion_tier": str(rng.randint(0, 2)),
        "publicly_accessible": "false", "allocated_storage": pick([200, 500, 1000]), "multi_az": "true",
        "storage_type": '"gp3"', "deregistration_delay": f'"{pick([30, 60, 300])}"',
        "name": f'"hv-prod-{hexs(6)}"', "protocol": '"HTTP"', "slow_start": pick([0, 30]),
        "target_type": '"ip"', "vpc_id": f'"vpc-0{hexs(16)}"', "encryption_type": '"KMS"',
        "retention_period": pick([24, 48, 168]), "shard_count": pick([4, 6, 8, 12]),
        "shard_level_metrics": '["IncomingBytes", "OutgoingBytes"]', "cluster_name": f'"hv-prod-{hexs(4)}"',
        "enhanced_monitoring": '"PER_TOPIC_PER_BROKER"', "number_of_broker_nodes": pick([3, 6]),
        "max_message_size": 262144, "message_retention_seconds": pick([345600, 1209600]),
        "receive_wait_time_seconds": 20, "visibility_timeout_seconds": pick([30, 60, 300]),
        "cluster": '"arn:aws:ecs:eu-west-2:481276550913:cluster/hv-prod"', "desired_count": pick([2, 3, 4]),
        "launch_type": '"FARGATE"', "task_definition": "(known after apply)", "kms_key_id": "(known after apply)",
        "retention_in_days": pick([30, 90, 365]), "skip_destroy": "false", "cidr_blocks": '["10.42.0.0/16"]',
        "from_port": pick([443, 5432, 5671]), "security_group_id": f'"sg-0{hexs(16)}"', "to_port": "443",
        "type": '"ingress"', "availability_zone": f'"eu-west-2{pick("abc")}"', "encrypted": "true",
        "iops": pick([3000, 6000]), "size": pick([500, 1000, 1500]), "throughput": pick([125, 250, 500]),
    }
    if rtype == "aws_ebs_volume":
        vals["type"] = '"gp3"'
    out = [f"  # {rtype}.{rname} will be {'created' if action == 'create' else 'updated in-place'}",
           f'  {sym} resource "{rtype}" "{rname}" {{']
    if action == "create":
        out.append(f"      + {'arn'.ljust(w)} = (known after apply)")
        out.append(f"      + {'id'.ljust(w)} = (known after apply)")
    for k in keys:
        line = tfl(k, vals[k], w)
        if plant and plant.startswith(k + " ") and plant.split(" =")[0].strip() == k:
            line = plant
        if action == "update" and not (plant and line == plant) and rng.random() < 0.7:
            continue
        out.append(f"      {sym} {line}")
    out.append("      + tags_all = {\n          + \"cost-centre\" = \"plat-0412\"\n          + \"managed-by\"  = \"terraform\"\n        }" if action == "create" else "        # (9 unchanged attributes hidden)")
    out.append("    }")
    return "\n".join(out)


def tf_plan(ws_types, plant=None, plant_type=None):
    """A terraform plan: blocks of the given types, `plant` put into the first block of `plant_type`."""
    out = ["Acquiring state lock. This may take a few moments...",
           "module.network.data.aws_vpc.main: Reading...",
           "module.network.data.aws_vpc.main: Read complete after 0s [id=vpc-0" + hexs(16) + "]",
           "data.aws_caller_identity.current: Reading...",
           "data.aws_caller_identity.current: Read complete after 0s [id=481276550913]", "",
           "Terraform used the selected providers to generate the following execution plan. Resource actions are",
           "indicated with the following symbols:", "  + create", "  ~ update in-place", "",
           "Terraform will perform the following actions:", ""]
    add = change = 0
    done = False
    for rtype, rname, action in ws_types:
        p = plant if (rtype == plant_type and not done) else None
        if p:
            done = True
        out.append(tf_block(rtype, rname, p, action))
        out.append("")
        add += action == "create"
        change += action == "update"
    out.append(f"Plan: {add} to add, {change} to change, 0 to destroy.")
    out += ["", "─" * 77, "",
            "Saved the plan to: tfplan", "", "To perform exactly these actions, run the following command to apply:",
            '    terraform apply "tfplan"', "Releasing state lock. This may take a few moments..."]
    return "\n".join(out)


LOG_EVENTS = [
    ("INFO", "poll", "picked {a} items in {b} ms"),
    ("INFO", "commit", "batch committed rows={a} elapsed_ms={b}"),
    ("INFO", "pool", "connections active={c} idle={d} waiting=0"),
    ("DEBUG", "http", "GET /internal/ready 200 {e}ms"),
    ("INFO", "sched", "next run in {f}s"),
    ("WARN", "pool", "slow acquire {b} ms (threshold 500 ms)"),
    ("INFO", "writer", "flushed {a} records to target, offset {g}"),
    ("WARN", "client", "retrying request attempt={h} after {e}ms: connection reset by peer"),
    ("INFO", "metrics", "exported {c} series"),
    ("INFO", "gc", "pause {e}ms heap_used={c}0MB"),
]


def log_tail(start, n, plant=None, style="java", warn_text="threshold exceeded"):
    t = start
    lines = []
    at = rng.randint(n // 3, 2 * n // 3) if plant else -1
    for i in range(n):
        t += datetime.timedelta(seconds=rng.randint(1, 40), milliseconds=rng.randint(0, 999))
        if i == at:
            lvl, comp, msg = "WARN", "monitor", f"{warn_text}: {plant}"
        else:
            lvl, comp, tmpl = pick(LOG_EVENTS)
            msg = tmpl.format(a=rng.randint(1, 4000), b=rng.randint(3, 2400), c=rng.randint(1, 60),
                              d=rng.randint(0, 30), e=rng.randint(1, 900), f=rng.randint(5, 300),
                              g=rng.randint(10 ** 6, 10 ** 9), h=rng.randint(1, 4))
        th = f"{comp}-{rng.randint(1, 8)}"
        if style == "java":
            lines.append(f"{t:%Y-%m-%d %H:%M:%S}.{rng.randint(0, 999):03d} {lvl:<5} [{th}] c.h.{comp}.Worker - {msg}")
        elif style == "json":
            lines.append(json.dumps({"ts": iso(t), "level": lvl.lower(), "logger": comp, "msg": msg}))
        else:
            lines.append(f"{t:%Y-%m-%d %H:%M:%S},{rng.randint(0, 999):03d} {lvl} {comp}: {msg}")
    return "\n".join(lines)


def health(version, plant=None):
    body = {"status": "UP", "version": version, "uptimeSeconds": rng.randint(3000, 2000000),
            "components": {
                "db": {"status": "UP", "details": {"poolActive": rng.randint(1, 40), "poolIdle": rng.randint(0, 20),
                                                    "validationQuery": "SELECT 1"}},
                "broker": {"status": pick(["UP", "UP", "DEGRADED"]), "details": {"connections": rng.randint(1, 12)}},
                "diskSpace": {"status": "UP", "details": {"total": 107374182400, "free": rng.randint(10 ** 10, 9 * 10 ** 10),
                                                           "threshold": 10485760}},
            },
            "work": {"queueDepth": rng.randint(0, 900), "inFlight": rng.randint(0, 400),
                     "p95LatencyMs": rng.randint(20, 1900), "errorRate5m": round(rng.random() / 50, 4),
                     "lastBatchAt": iso(NOW - datetime.timedelta(seconds=rng.randint(5, 200)))},
            "build": {"commit": hexs(12), "builtAt": f"2026-0{rng.randint(4, 6)}-{rng.randint(10, 28)}T1{rng.randint(0, 9)}:"
                                                      f"{rng.randint(10, 59)}:00Z", "jdk": "21.0.3"}}
    s = json.dumps(body, indent=2)
    if plant:
        key = plant.split(":")[0]
        s = re.sub(key + r": \d+", plant, s)
    return s


def pytest_out(suite, plant=None, n_files=20):
    out = ["============================= test session starts ==============================",
           "platform linux -- Python 3.11.9, pytest-8.2.1, pluggy-1.5.0",
           "rootdir: /srv/app", "configfile: pyproject.toml",
           "plugins: xdist-3.6.1, timeout-2.3.1, cov-5.0.0",
           f"8 workers [{rng.randint(1200, 2600)} items]", ""]
    mods = ["test_contract_api", "test_contract_events", "test_schema_compat", "test_dual_write", "test_retry",
            "test_idempotency", "test_pagination", "test_auth", "test_timeouts", "test_rollback", "test_migrations",
            "test_render", "test_templates", "test_fixtures_prod", "test_config", "test_limits", "test_cutover",
            "test_checksums", "test_replay", "test_backfill", "test_healthchecks", "test_metrics"]
    pct = 0
    for m in rng.sample(mods, min(n_files, len(mods))):
        k = rng.randint(20, 80)
        pct = min(100, pct + rng.randint(3, 7))
        dots_ = "".join(pick(".....s......F") if rng.random() < 0.03 else "." for _ in range(k))
        out.append(f"{dots_:<80} [{pct:3d}%]")
    out += ["", "=================================== FAILURES ===================================",
            "______________________ test_timeouts::test_read_timeout_honoured ______________________",
            "[gw3] linux -- Python 3.11.9 /srv/venv/bin/python", "",
            "    def test_read_timeout_honoured(client, slow_upstream):",
            ">       assert client.get('/v1/ping', timeout=slow_upstream.delay / 2).status_code == 504",
            "E       AssertionError: assert 200 == 504", "",
            "tests/test_timeouts.py:88: AssertionError", "=========================== short test summary info ============================",
            "FAILED tests/test_timeouts.py::test_read_timeout_honoured - AssertionError: assert 200 == 504"]
    passed = plant or f"{rng.randint(1200, 2600)} passed"
    out.append(f"======= 1 failed, {passed}, {rng.randint(3, 30)} skipped, {rng.randint(1, 9)} warnings in "
               f"{rng.randint(100, 400)}.{rng.randint(10, 99)}s =======")
    return "\n".join(out)


def volumes_csv(start_day, days, plant=None):
    out = ["date,messages,units_reporting,dropped,late_arrivals,p95_ingest_ms"]
    d = datetime.date(2026, 5, start_day)
    for _ in range(days):
        ds = d.isoformat()
        msgs = rng.randint(15000000, 22000000)
        row = f"{ds},{msgs},{rng.randint(1900, 2300)},{rng.randint(100, 4000)},{rng.randint(1000, 40000)},{rng.randint(300, 2200)}"
        if plant and plant.startswith(ds + ","):
            row = plant + row[len(ds) + 1 + len(str(msgs)):]
        out.append(row)
        d += datetime.timedelta(days=1)
    return "\n".join(out)


def hvmig_status(now):
    states = ["planning", "dry-run", "dry-run", "ready", "rehearsed", "scheduled", "live", "live"]
    rows = []
    for ws in WSS:
        st = {"label-printing": "rehearsed", "edi-gateway": "dry-run", "wms-core": "dry-run",
              "fleet-telematics": "planning", "tracking-api": "ready"}.get(ws, pick(states[:6]))
        rows.append([ws, st, f"r{rng.randint(3, 30)}", rng.randint(3, 40), rng.randint(0, 9),
                     f"2026-06-0{rng.randint(2, 8)} {rng.randint(7, 22):02d}:{rng.randint(0, 59):02d}", pick(ENGINEERS)])
    return (f"hvmig 3.8.2   control plane hvmig.ops.hv.local   {now:%Y-%m-%d %H:%M:%S} BST\n\n" +
            table(["WORKSTREAM", "STATE", "PLAN", "OBJECTS", "OPEN ISSUES", "LAST DRY RUN", "OWNER"], rows) +
            "\n\n12 workstreams: " + ", ".join(f"{s} {sum(1 for r in rows if r[1] == s)}" for s in
                                              ["planning", "dry-run", "ready", "rehearsed", "scheduled", "live"]))


def git_log(n, subjects):
    out = []
    t = NOW
    for _ in range(n):
        t -= datetime.timedelta(hours=rng.randint(2, 40), minutes=rng.randint(0, 59))
        out.append(f"{hexs(7)} {t:%Y-%m-%d} {pick(ENGINEERS):<16} {pick(subjects)}")
    return "\n".join(out)


COMMITS = ["bump base image to 2026-06 patch level", "raise pool size for target DB", "add dual-write toggle",
           "fix flaky contract test", "move secrets to Secrets Manager", "cutover runbook: add rollback step 7",
           "tune retry backoff after load test", "drop legacy NFS mount", "add readiness probe on /internal/ready",
           "pin client library to 4.2.x", "switch logging to JSON", "terraform: add alarms for queue depth",
           "terraform: tag resources with cost centre", "helm: set PodDisruptionBudget minAvailable=1",
           "read DSN from env, not file", "add checksum verification to backfill", "remove Oracle-specific hints",
           "increase statement timeout for month-end report", "port cron entries to scheduler manifests"]


def runbook(ws_title, steps):
    out = [f"# Cutover runbook: {ws_title}", "", "Owner: platform team. Change: raise a CHG, link the dry run.", "",
           "## Preconditions", "- dry run PASS within the last 24 hours", "- rollback rehearsal recorded in the change",
           "- on-call for the owning team aware and reachable", "- no open Sev1/Sev2 on the estate", "",
           "## Window", "Default window 18:00-21:00 unless the workstream's owner agrees otherwise.", "",
           "## Steps"]
    for i, s in enumerate(steps, 1):
        out.append(f"{i}. {s}")
    out += ["", "## Rollback", "1. Stop writers on the target (scale deployments to 0).",
            "2. Re-point DNS / config to the legacy endpoint.", "3. Replay anything written to the target since the "
            "freeze from the change-capture log.", "4. Confirm with the owning team; record the rollback in the CHG.",
            "", "## Verification", "- checksums match between source and target for every object",
            "- error rate below 0.5% for 30 minutes", "- no growth in the dead-letter queues", "",
            "## Contacts", "- platform on-call: #plat-oncall", "- DBA: #dba-oracle", "- network: #net-core"]
    return out


# ---------------------------------------------------------------------------
# The conversation.

items, facts = [], []
fact_turns, fact_ids = {}, {}
turn_no = 0
call_no = 0
topic = "kickoff"


def new_turn(t):
    global turn_no, topic, NOW
    turn_no += 1
    topic = t
    NOW += datetime.timedelta(minutes=rng.randint(2, 5), seconds=rng.randint(0, 59))


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


FILLER = [
    "I would paste the output into the change ticket as we go; the review tomorrow is easier with it.",
    "The legacy side is unchanged by any of this; we only read from it.",
    "It is worth comparing with the staging copy before anyone edits it.",
    "That matches what the owning team described in the planning notes.",
]


def A(body, pad=True):
    parts = [body]
    if pad and rng.random() < 0.35:
        parts.append(pick(FILLER))
    content = "\n\n".join(parts)
    items.append({"turn": turn_no, "role": "assistant", "kind": "message", "content": content})
    record(content, "message")


def say(text):
    items.append({"turn": turn_no, "role": "assistant", "kind": "message", "content": text})
    record(text, "message")


def tool(name, args, output, expect=()):
    global call_no
    held = {l for l, v in P.items() if v in output} | {l for l, v in M.items() if v in output}
    assert held == set(expect), (turn_no, name, args, held, expect)
    assert clean(json.dumps(args)), (turn_no, args)
    call_no += 1
    cid = f"call_{call_no:03d}"
    items.append({"turn": turn_no, "role": "assistant", "kind": "tool_call",
                  "content": json.dumps(args), "tool_name": name, "call_id": cid})
    items.append({"turn": turn_no, "role": "tool", "kind": "tool_result",
                  "content": output, "tool_name": name, "call_id": cid})
    record(output, "tool")


def sh(cmd, output, expect=()):
    tool("bash", {"cmd": cmd}, output, expect)


def read(path, lines, expect=()):
    tool("read_file", {"path": path}, numbered(lines), expect)


def sqlplus(query, output, expect=()):
    tool("sqlplus", {"connect": "ops_ro@bic-ora-scan.hv.local:1521/HVPROD", "query": query}, output, expect)


def psql(target, query, output, expect=()):
    tool("psql", {"target": target, "query": query}, output, expect)


# ---------------------------------------------------------------------------
# Calls. Each takes the workstream and, for a planted output, the label.

def exp(label):
    return (label,) if label else ()


def fmake(label, make, n, lo=1300, hi=9600):
    if label:
        return fitP(make, n, [label], lo, hi)
    return fitN(make, n, lo, hi)


def c_cfg(ws, label=None, staging=False):
    path = f"config/{ws}/{'staging/' if staging else ''}{CFG_PATH[FMT[ws]]}"
    plant = PLANT_CFG[label] if label else None
    make = lambda: config_lines(ws, plant)
    if label:
        lines = None
        for _ in range(2000):
            lines = make()
            out = "\n".join(lines)
            if {l for l, v in P.items() if v in out} == {label} and not re.search(subject_of(label), out, re.I):
                break
    else:
        lines = N(make)
    read(path, lines, exp(label))


def c_dry(ws, label=None, extra=""):
    out = fmake(label, lambda k: dryrun(ws, P[label] if label else None, warnings=rng.randint(1, 3), progress=k),
                30, 3500, 7000)
    sh(f"hvmig dry-run --workstream {ws} --plan latest{extra}", out, exp(label))


def c_ora(ws, label=None):
    owner = ws.split("-")[0].upper()
    out = fmake(label, lambda k: sqlplus_stats(ws, P[label] if label else None, k), 30, 2800, 6000)
    sqlplus(f"SELECT table_name, num_rows, blocks, TO_CHAR(last_analyzed, 'YYYY-MM-DD HH24:MI') last_analyzed, "
            f"partitioned FROM all_tables WHERE owner = '{owner}' ORDER BY num_rows DESC NULLS LAST", out, exp(label))


def c_pg(ws, label=None):
    schema = ws.replace("-", "_")
    out = fmake(label, lambda k: psql_stats(ws, P[label] if label else None, k), 30, 2800, 6000)
    psql(f"{schema}-prod (writer)", f"SELECT relname, n_live_tup, n_dead_tup, last_autoanalyze, seq_scan FROM "
         f"pg_stat_user_tables WHERE schemaname = '{schema}' ORDER BY n_live_tup DESC;", out, exp(label))


def c_kube(ws, label=None):
    out = fmake(label, lambda k: kubectl_get(ws, P[label] if label else None, k), 4, 3500, 7500)
    sh(f"kubectl --context hv-prod -n {ws} get deploy,pods -o wide", out, exp(label))


TF_SETS = {
    "edi-gateway": [("aws_security_group_rule", "sftp_ingress", "create"), ("aws_cloudwatch_log_group", "relay", "create"),
                    ("aws_sqs_queue", "inbound", "create"), ("aws_ecs_service", "translator", "update")],
    "wms-core": [("aws_rds_cluster", "main", "update"), ("aws_rds_cluster_instance", "writer", "create"),
                 ("aws_rds_cluster_instance", "reader", "create"), ("aws_security_group_rule", "db_ingress", "create"),
                 ("aws_cloudwatch_log_group", "db", "create")],
    "event-bus": [("aws_msk_cluster", "main", "update"), ("aws_ebs_volume", "mirror_spool", "create"),
                  ("aws_security_group_rule", "brokers_tls", "create"), ("aws_cloudwatch_log_group", "brokers", "create")],
    "tracking-api": [("aws_lb_target_group", "api", "create"), ("aws_ecs_service", "webhooks", "update"),
                     ("aws_security_group_rule", "alb_https", "create"), ("aws_cloudwatch_log_group", "api", "create")],
    "fleet-telematics": [("aws_kinesis_stream", "positions", "create"), ("aws_sqs_queue", "enrich_dlq", "create"),
                         ("aws_cloudwatch_log_group", "ingest", "create"), ("aws_security_group_rule", "ingest", "create")],
    "invoicing": [("aws_db_instance", "main", "create"), ("aws_security_group_rule", "db_ingress", "create"),
                  ("aws_sqs_queue", "exports", "create"), ("aws_cloudwatch_log_group", "rater", "create")],
    "label-printing": [("aws_ecs_service", "render", "create"), ("aws_sqs_queue", "jobs", "create"),
                       ("aws_cloudwatch_log_group", "render", "create"), ("aws_security_group_rule", "spool", "create")],
    "batch-jobs": [("aws_ecs_service", "runner", "update"), ("aws_cloudwatch_log_group", "runner", "create"),
                   ("aws_sqs_queue", "runs", "create")],
    "depot-scanners": [("aws_lb_target_group", "ingest", "create"), ("aws_ecs_service", "sync", "update"),
                       ("aws_cloudwatch_log_group", "ingest", "create")],
    "route-optimiser": [("aws_ecs_service", "matrix", "update"), ("aws_ebs_volume", "matrix_cache", "create"),
                        ("aws_cloudwatch_log_group", "solver", "create")],
    "parcel-queues": [("aws_security_group_rule", "amqps", "create"), ("aws_cloudwatch_log_group", "broker", "create"),
                      ("aws_ecs_service", "shovel", "update")],
    "customs-docs": [("aws_sqs_queue", "filings", "create"), ("aws_cloudwatch_log_group", "docgen", "create"),
                     ("aws_security_group_rule", "hmrc_egress", "create")],
}
TF_PLANT_TYPE = {"WMS4": "aws_rds_cluster_instance", "EB4": "aws_ebs_volume", "TA5": "aws_lb_target_group",
                 "FT4": "aws_kinesis_stream", "INV4": "aws_db_instance"}


def c_tf(ws, label=None):
    extra = [("aws_security_group_rule", f"egress_{n}", "create") for n in ("https", "dns", "ntp")] + \
            [("aws_cloudwatch_log_group", f"audit_{n}", "create") for n in ("a", "b")]
    out = fmake(label, lambda k: tf_plan(TF_SETS[ws] + extra[:k], P[label] if label else None,
                                         TF_PLANT_TYPE.get(label)), 5, 3500, 9800)
    sh(f"terraform -chdir=infra/prod/{ws} plan -out=tfplan -no-color", out, exp(label))


LOG_PATHS = {"edi-gateway": "/opt/relay/logs/relay.log", "depot-scanners": "/srv/ingest/logs/ingest.log",
             "event-bus": "/var/log/mirror/mirror.log", "batch-jobs": "/var/log/jobs/nightly.log",
             "fleet-telematics": "/srv/ingest/logs/ingest.log", "tracking-api": "/srv/api/logs/app.log",
             "wms-core": "/u01/app/core/logs/core.log", "invoicing": "/srv/rater/logs/rater.log",
             "label-printing": "/srv/render/logs/render.log"}
LOG_STYLE = {"edi-gateway": "java", "depot-scanners": "py", "event-bus": "json", "batch-jobs": "py",
             "fleet-telematics": "json", "tracking-api": "java", "wms-core": "java", "invoicing": "py",
             "label-printing": "java"}
WARN = {"EDI3": "partial uploads older than 6h in the landing area", "DS4": "client reconnects above baseline",
        "EB3": "consumer group behind the source", "BJ2": "run exceeded its expected duration",
        "FT3": "ingest buffer overflow, messages discarded"}


def c_log(ws, label=None, n=60):
    start = NOW - datetime.timedelta(minutes=40)
    out = fmake(label, lambda k: log_tail(start, k, P[label] if label else None, LOG_STYLE[ws],
                                          WARN.get(label, "")), n, 3000, 9600)
    sh(f"ssh {LEGACY[ws]} tail -n 200 {LOG_PATHS[ws]} | tail -n 70", out, exp(label))


def health_full(plant, k):
    routes = [{"route": r, "count": rng.randint(100, 900000), "p95Ms": rng.randint(5, 1500)} for r in
              rng.sample(["GET /v1/items", "POST /v1/items", "GET /v1/items/{id}", "PUT /v1/items/{id}",
                          "POST /v1/batch", "GET /v1/status", "POST /v1/replay", "GET /v1/export",
                          "DELETE /v1/items/{id}", "GET /internal/ready", "GET /v2/items", "POST /v2/items",
                          "GET /v2/items/{id}", "POST /v2/batch", "GET /v2/search", "POST /internal/reindex"],
                         min(k, 16))]
    h = json.loads(health(f"{rng.randint(1, 9)}.{rng.randint(0, 40)}.{rng.randint(0, 9)}"))
    h["routes"] = routes
    s = json.dumps(h, indent=2)
    if plant:
        key = plant.split(":")[0]
        s = re.sub(key + r": \d+", plant, s)
    return s


def c_health(ws, label=None):
    out = fmake(label, lambda k: health_full(P[label] if label else None, k), 10, 2000, 6000)
    sh(f"curl -s https://{ws}.internal.hv-prod.net/actuator/health | jq .", out, exp(label))


def c_pytest(ws, label=None):
    out = fmake(label, lambda k: pytest_out(ws, P[label] if label else None, k), 22, 2500, 9000)
    sh(f"cd repos/{ws} && pytest -q -n 8 tests/contract tests/cutover", out, exp(label))


def c_csv(ws, label=None):
    out = fmake(label, lambda k: volumes_csv(1, k, P[label] if label else None), 31, 1300, 9000)
    sh(f"cat exports/volumes/{ws}_daily_2026-05.csv", out, exp(label))


def c_status():
    sh("hvmig status --all --issues", N(lambda: hvmig_status(NOW) + "\n\nopen issues:\n" + "\n".join(
        f"  HVM-{rng.randint(300, 999)}  {pick(WSS):<17} {pick(['warn', 'warn', 'block'])}  "
        f"{pick(['dry-run warning not triaged', 'plan awaiting review', 'owner sign-off missing', 'rollback rehearsal not recorded', 'DNS record TTL too long', 'alarm thresholds not set', 'secrets not rotated since copy', 'load test pending'])}"
        for _ in range(30))))


def c_git(ws):
    sh(f"git -C repos/{ws} log --format='%h %ad %an %s' --date=short -30",
       N(lambda: git_log(30, COMMITS)))


def c_runbook(ws, steps):
    read(f"runbooks/{ws}/cutover.md", N(lambda: runbook(ws, steps)))


def c_noise(kind, ws):
    {"cfg": lambda: c_cfg(ws, staging=True), "dry": lambda: c_dry(ws, extra=" --env staging"),
     "kube": lambda: c_kube(ws), "tf": lambda: c_tf(ws), "log": lambda: c_log(ws), "health": lambda: c_health(ws),
     "pytest": lambda: c_pytest(ws), "git": lambda: c_git(ws), "pg": lambda: c_pg(ws), "ora": lambda: c_ora(ws)}[kind]()


REPLY = {
    "cfg": ["That is the whole file as committed. Every key is present and nothing is commented out, so the service "
            "starts with exactly these values; the secrets come from Secrets Manager as the header says.",
            "Read it end to end. The sections follow the shared template, so it lines up with the other "
            "workstreams' configs key for key; the values are this service's own.",
            "There it is. Nothing unusual in the structure; the db block already points at the target cluster, and "
            "the cutover block has dual writes as shown."],
    "dry": ["The dry run passed. The per-object table shows where the rows are, and the summary block at the end has "
            "the checksums and the timing estimate we need for the change.",
            "PASS, with the warnings listed above the summary; none of them blocks a cutover. I would attach the "
            "whole report to the change as it is.",
            "Clean compare apart from the warnings. The summary lines at the bottom are the ones the CAB asks for."],
    "ora": ["Those are the optimiser statistics from last night's gather, so the counts are estimates as of the "
            "LAST_ANALYZED time, not live counts.",
            "Here are the legacy tables by size. The history and backup copies at the bottom will not be migrated."],
    "pg": ["These are the target's live-tuple estimates; autovacuum has analysed most tables this morning, so they "
           "are close to the real counts.",
           "The target side's table statistics. The partitions are small because the backfill only writes the "
           "current month."],
    "kube": ["Everything is Running and every deployment is fully available. The image column is what each "
             "deployment is pinned to right now.",
             "All pods are ready; the restarts are old and spread thinly, nothing in a crash loop."],
    "tf": ["The plan only adds and updates; nothing is destroyed. I would apply it in the window rather than now.",
           "No destroys in there. The in-place updates are the ones we expected from the module bump."],
    "log": ["There is one warning in that tail from the monitor; the rest is routine polling and commits.",
            "Mostly routine. The monitor's warning is the only line that needs a look, and it is not repeating."],
    "health": ["It reports UP overall. The work block gives the queue and latency figures, and the per-route "
               "numbers are underneath.",
               "Healthy. The broker component is the one to watch; the db pool looks comfortable."],
    "pytest": ["One failure, the read-timeout test, which is known to be flaky against the stub upstream; the rest "
               "passed.",
               "The suite is green apart from the timeout test that fails on the shared runners."],
    "csv": ["That is the daily export for May. The dropped column is the one the owning team is worried about."],
    "git": ["Recent history looks ordinary: dependency bumps, the Secrets Manager change and the runbook edits."],
    "status": ["That is where each workstream stands. Nothing has moved since last night's update."],
    "runbook": ["That is the runbook as it stands. The default window in it needs checking against today's rules."],
}


def reply_for(kinds):
    return " ".join(pick(REPLY[k]) for k in kinds[:2])


def work(t, msg, calls, reply=None, kinds=()):
    """One regular turn: the user's message, its calls, the assistant's reply."""
    regular(t)
    U(msg)
    for k, c in enumerate(calls):
        if k and rng.random() < 0.5:
            say("And the second one.")
        c()
    A(reply or reply_for(list(kinds)))


# ---------------------------------------------------------------------------
# Recall questions asked in the conversation. "probe": in words close to the
# exchange; "heldout": in other words, as people ask.

QUESTIONS = [
    ("probe", ["EDI2"], 46, "dryrun",
     "What source checksum did this morning's edi-gateway dry run print in its summary?",
     "the summary block of the edi-gateway dry run"),
    ("probe", ["WMS1"], 52, "config",
     "What is pool_max set to in the db section of the wms-core application.properties?",
     "the db section of the wms-core properties file"),
    ("probe", ["EB3"], 58, "log",
     "What consumer lag did the event-bus mirror log warn about this morning?",
     "the monitor's warning in the mirror log tail"),
    ("probe", ["DS2"], 66, "dryrun",
     "What was the source checksum at the bottom of the depot-scanners dry run?",
     "the summary lines of the depot-scanners dry run"),
    ("probe", ["RO3"], 74, "kube",
     "Which solver image tag is the route-optimiser namespace running, from that kubectl get deploy?",
     "the IMAGES column of the route-optimiser listing"),
    ("probe", ["EDI1"], 80, "config",
     "What read_timeout_ms does the EDI gateway's application.properties set under server?",
     "the server section of the EDI gateway's properties"),
    ("probe", ["TA2"], 88, "dryrun",
     "What source checksum did hvmig report for the tracking-api dry run?",
     "the end of the tracking-api dry-run report"),
    ("probe", ["WMS3"], 96, "sql",
     "How many NUM_ROWS did Oracle's stats show for STOCK_MOVE in the WMS schema?",
     "the sqlplus listing of the WMS tables"),
    ("probe", ["edidate"], 104, "message",
     "Which evening did we agree for the EDI gateway cutover?",
     "my reply after the carrier-relations discussion"),
    ("probe", ["PQ1"], 112, "config",
     "What drain_timeout_s is set in the parcel-queues service.hcl?",
     "the batch block of the parcel-queues service.hcl"),
    ("probe", ["EB2"], 120, "dryrun",
     "Remind me of the source checksum from the event-bus dry run summary.",
     "the event-bus dry run's summary"),
    ("probe", ["FT2"], 130, "dryrun",
     "What estimated cutover time did the fleet-telematics dry run give?",
     "the summary of the fleet-telematics dry run"),
    # held out: other words
    ("heldout", ["CD2"], 48, "dryrun",
     "Declan wants a line for the customs stream in his status deck. What hash did the compare run produce on "
     "the Oracle side for the customs docs? He likes to paste it in.",
     "the customs-docs report"),
    ("heldout", ["RO1"], 55, "config",
     "How many requests is the optimiser's cfg allowed to have outstanding at once?",
     "the optimiser's service.yaml"),
    ("heldout", ["DS1"], 62, "config",
     "For the handheld scanners' service, how often does the cutover heartbeat fire? In secs.",
     "the cutover section of that service's yaml"),
    ("heldout", ["LP1"], 70, "config",
     "Coffee's gone cold again, never mind. What's the label printing DB connect timeout in its config, ms?",
     "the label-printing toml"),
    ("heldout", ["TA1"], 77, "config",
     "How long can a single query run against the tracking DB before the API gives up on it, per the cfg?",
     "the tracking-api yaml"),
    ("heldout", ["WMS4"], 84, "tf",
     "What size of Aurora box is terraform about to give the WMS database in prod?",
     "the WMS plan's instance block"),
    ("heldout", ["EDI3"], 92, "log",
     "How many half-uploaded files was the old SFTP box complaining about this morning?",
     "the warning in the relay log we tailed"),
    ("heldout", ["PQ4"], 100, "health",
     "When we hit the parcel queue consumers' health endpoint, how many msgs were being worked on right then?",
     "the work block of that health response"),
    ("heldout", ["TA4"], 108, "health",
     "Quick one between meetings: what p95 was the tracking API's health check showing? Latency, in ms.",
     "the tracking-api health response"),
    ("heldout", ["INV3"], 116, "sql",
     "How many invoices does the new invoicing Postgres hold already? What the stats said, not a guess.",
     "the pg_stat listing for the invoicing schema"),
    ("heldout", ["FT5"], 124, "csv",
     "The telematics vendor is asking about late May. What did our volumes export say for the 27th, total msgs?",
     "that row of the May volumes export"),
    ("heldout", ["BJ2"], 134, "log",
     "How long did last night's job on the old cron box take, according to its log? Secs is fine.",
     "the monitor's warning in the nightly log"),
    ("heldout", ["dba"], 140, "message",
     "What's our Oracle DBA's full name again? I need it for the sign-off line in the change.",
     "your message this morning"),
    ("heldout", ["sr"], 146, "message",
     "What's the Oracle support request number for the WMS stats problem, the one I gave you earlier?",
     "your message when we looked at the WMS tables"),
]
OFF_TOPIC = [
    ("heldout", 82, "Totally unrelated, my brain needs a break: any tips for a weekend in Porto?",
     "Walk the Ribeira early before the crowds, cross the upper deck of the Dom Luis I bridge to Vila Nova de Gaia "
     "for the port lodges, and book a tasting in advance at the weekend. The Livraria Lello queue is shorter first "
     "thing. For food, a francesinha once is enough; the grilled fish places in Matosinhos are the better meal, and "
     "the tram out to Foz do Douro makes a good slow afternoon."),
    ("heldout", 127, "Neck's stiff from staring at plans all day. Any quick stretch that actually helps?",
     "Chin tucks help most people: sit tall, draw the chin straight back as if making a double chin, hold for five "
     "seconds, ten times. Then slow ear-to-shoulder tilts, holding each side for twenty seconds, and a few shoulder "
     "rolls. Raising the screen to eye height does more than any stretch, though."),
]

ANSWERS = {
    "config": ["It is one of the keys in {what}, as we read it this morning; nothing we changed today touched that "
               "line, so the read is still the live value.",
               "That comes straight from {what}. I would copy it from the read rather than from memory."],
    "dryrun": ["It is in {what}; I would quote it from that output exactly as printed rather than retype it."],
    "log": ["It is on {what}, the only line of that kind in the tail we pulled."],
    "kube": ["It is in {what}; the other deployments in that namespace are on their own tags, so take the solver "
             "row."],
    "sql": ["It is in {what}; bear in mind it is the statistics estimate, not a live count."],
    "tf": ["It is in {what}, on the planned attribute; nothing has been applied yet, so it is only the plan."],
    "health": ["It is in {what}; the per-route figures underneath are different, so take the one in the work "
               "block."],
    "csv": ["It is in {what}; the messages column is the second one."],
    "message": ["It was in {what}; scroll back and you will find it as it was said."],
}

probes = {"probe": [], "heldout": []}
pending = []
last_was_question = False
MIN_GAP = 40


def schedule(label):
    for order, (which, labels, at_, kind, text, what) in enumerate(QUESTIONS):
        if label in labels and all(l in fact_turns for l in labels):
            due = max(45, at_, max(fact_turns[l] for l in labels) + MIN_GAP)
            pending.append([due, order, (which, labels, kind, text, what)])


for _k, (_w, _at, _q, _a) in enumerate(OFF_TOPIC):
    pending.append([_at, 100 + _k, (_w, None, None, _q, _a)])


def ask(spec):
    global last_was_question
    which, labels, kind, text, what = spec
    new_turn("recall" if labels else "off-topic")
    U(text)
    if labels is None:
        probes[which].append({"kind": "recall", "turn": turn_no, "facts": []})
        A(what, pad=False)
    else:
        for l in labels:
            assert turn_no - fact_turns[l] >= MIN_GAP, (text, l, turn_no - fact_turns[l])
        probes[which].append({"kind": "recall", "turn": turn_no, "facts": [fact_ids[l] for l in labels]})
        A(pick(ANSWERS[kind]).format(what=what), pad=False)
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


def regular(t):
    global last_was_question
    maybe_ask()
    last_was_question = False
    new_turn(t)


# ---------------------------------------------------------------------------
# The day.

new_turn("kickoff")
U("Morning. Ingrid Macaulay-Osei, platform engineering at Harrow & Vane Freight. We're working through the "
  "Bicester exit today under CHG-40917: twelve workstreams, 41 depots depending on them, and I want every "
  "workstream's dry run, config and target checked by tonight. Start with hvmig's status so we know where each "
  "one stands.")
c_status()
A("That is the board: a mix of planning, dry-run and ready, with label-printing the furthest along. I will keep "
  "the order you choose and go workstream by workstream.")

new_turn("rules")
U("Ground rules for the day, please keep them in mind: " + RULES[0][1] + ". Read me the cutover runbook template "
  "so we can see what it says about windows.")
c_runbook("template", ["Announce in #plat-cutovers and the owning team's channel.", "Freeze writes on the source.",
                       "Run the final hvmig sync and compare.", "Switch DNS or config to the target.",
                       "Run smoke tests.", "Unfreeze; watch error rates for 30 minutes.", "Close the CHG task."])
A("Understood, no carrier feed cuts over in the dispatch peak. The template's default window overlaps it, so I "
  "will flag that whenever a runbook inherits it.")

new_turn("rules")
U("Second: " + RULES[1][1] + ". Show me the legacy schemas and their sizes so we know what we're holding on to.")
sqlplus("SELECT owner, ROUND(SUM(bytes)/1024/1024/1024, 1) gb, COUNT(*) segments FROM dba_segments GROUP BY owner "
        "ORDER BY gb DESC",
        N(lambda: "Connected to:\nOracle Database 19c Enterprise Edition Release 19.0.0.0.0 - Production\n" +
          sqlplus_table(["OWNER", "GB", "SEGMENTS"],
                        [[o, f"{rng.uniform(0.2, 900):.1f}", rng.randint(20, 3000)] for o in
                         ["WMS", "SCAN", "TRK", "CUST", "INV", "ROUTE", "EDI", "FLEET", "LBL", "JOBS", "SYS",
                          "SYSTEM", "AUDSYS", "XDB", "OPS_RO", "HV_ARCH", "HV_STAGE", "GGADMIN", "DBSNMP",
                          "APEX_230100", "ORDS_METADATA", "MDSYS", "CTXSYS", "OLAPSYS", "LBACSYS", "HV_OLD",
                          "HV_TMP", "HV_REPORTING", "HV_AUDIT", "GSMADMIN_INTERNAL", "DVSYS", "OJVMSYS",
                          "APPQOSSYS", "REMOTE_SCHEDULER_AGENT"]], numeric=(1, 2))))
A("Noted: nothing on the legacy side is dropped or truncated without seven clean days and the DBA's sign-off in the "
  "change. Those are the schemas that rule protects.")

new_turn("rules")
U("And third: " + RULES[2][1] + ". What's gone into the migration repo since yesterday?")
sh("git -C repos/hv-migration log --format='%h %ad %an %s' --date=short -30", N(lambda: git_log(30, COMMITS)))
A("Agreed: no rollback rehearsal in the change, no cutover. The repo history is the usual mix of runbook edits and "
  "module bumps.")

new_turn("planning")
U("People for today: Oskar Lindqvist is our Oracle DBA and is in until three, and Declan Fairweather is the "
  "programme lead, he'll chase me for statuses around lunch. Let's start with the EDI gateway.")
A("Got it. For the EDI gateway I would read its service config, tail the relay log on the legacy SFTP host, then "
  "run the dry run and look at the terraform plan.")

# --- edi-gateway -------------------------------------------------------------------
work("edi", "Read the EDI gateway's application.properties first.", [lambda: c_cfg("edi-gateway", "EDI1")],
     kinds=["cfg"])
work("edi", "Now tail the relay log on the old SFTP box for the EDI gateway, bic-sftp01.",
     [lambda: c_log("edi-gateway", "EDI3")], kinds=["log"])
work("edi", "Run the edi-gateway dry run against the latest plan.", [lambda: c_dry("edi-gateway", "EDI2")],
     kinds=["dry"])
new_turn("edi")
regular_done = None
U("Priya Ramaswamy-Holt in carrier relations says the partner carriers need five working days' notice before the "
  "EDI gateway moves, and none of them wants it on a Monday. What evening would you suggest?")
A("Given the notice period, the dispatch-peak rule and the freeze, I would propose the evening of Thursday 18 June, "
  "after 19:00, with the rollback rehearsal recorded in the change on the Tuesday before. That gives the carriers "
  "their notice and leaves a working Friday to watch the first full day of files.")
work("edi", "Fine, pencil that in. Now the EDI gateway's terraform plan.", [lambda: c_tf("edi-gateway")],
     kinds=["tf"])

# --- wms-core ----------------------------------------------------------------------
work("wms", "On to wms-core. Read its application.properties.", [lambda: c_cfg("wms-core", "WMS1")], kinds=["cfg"])
work("wms", "Pull the Oracle table stats for the WMS schema.", [lambda: c_ora("wms-core", "WMS3")], kinds=["ora"])
work("wms", "Now the wms-core dry run.", [lambda: c_dry("wms-core", "WMS2")], kinds=["dry"])
work("wms", "And the terraform plan for wms-core.", [lambda: c_tf("wms-core", "WMS4")], kinds=["tf"])
work("wms", "Oskar raised SR 3-37418290511 with Oracle about the stale stats on the WMS tables. While that's open, "
     "show me the wms-core deployments on the cluster.", [lambda: c_kube("wms-core")], kinds=["kube"])

# --- event-bus ---------------------------------------------------------------------
work("events", "Event bus next. Read config/event-bus/service.hcl.", [lambda: c_cfg("event-bus", "EB1")],
     kinds=["cfg"])
work("events", "Tail the mirror log on bic-kfk01 for the event bus.", [lambda: c_log("event-bus", "EB3")],
     kinds=["log"])
work("events", "Run the event-bus dry run.", [lambda: c_dry("event-bus", "EB2")], kinds=["dry"])
work("events", "Plan for the event bus infra, please.", [lambda: c_tf("event-bus", "EB4")], kinds=["tf"])
work("events", "Show me the consumer groups on the old Kafka cluster so we know who still reads from it.",
     [lambda: sh("ssh bic-kfk01 /opt/kafka/bin/kafka-consumer-groups.sh --bootstrap-server localhost:9092 "
                 "--describe --all-groups | head -n 80",
                 N(lambda: table(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                                  "CONSUMER-ID"],
                                 [[pick(["tracking-projector", "pod-uploader", "eta-calc", "billing-rater",
                                         "scan-archiver", "mirror-01"]), pick(OBJECTS["event-bus"]),
                                   rng.randint(0, 11), o := rng.randint(10 ** 7, 10 ** 9), o + rng.randint(0, 900),
                                   rng.randint(0, 900), f"consumer-{rng.randint(1, 9)}-{hexs(8)}"]
                                  for _ in range(60)])))], kinds=["git"],
     reply="The old cluster still has six groups reading; all but one are on the migration list.")

# --- route-optimiser ---------------------------------------------------------------
work("route", "Route optimiser now. Its service.yaml please.", [lambda: c_cfg("route-optimiser", "RO1")],
     kinds=["cfg"])
work("route", "What's deployed in the route-optimiser namespace?", [lambda: c_kube("route-optimiser", "RO3")],
     kinds=["kube"])
work("route", "Hit the route-optimiser health endpoint.", [lambda: c_health("route-optimiser", "RO4")],
     kinds=["health"])
work("route", "Run the route-optimiser dry run.", [lambda: c_dry("route-optimiser", "RO2")], kinds=["dry"])
work("route", "What's changed in the route-optimiser repo lately?", [lambda: c_git("route-optimiser")],
     kinds=["git"])

# --- depot-scanners ----------------------------------------------------------------
work("scanners", "Depot scanners. Read its service.yaml.", [lambda: c_cfg("depot-scanners", "DS1")], kinds=["cfg"])
work("scanners", "Oracle stats for the depot scanners' SCAN schema, please.",
     [lambda: c_ora("depot-scanners", "DS3")], kinds=["ora"])
work("scanners", "Tail the ingest log on bic-app11 for the depot scanners.",
     [lambda: c_log("depot-scanners", "DS4")], kinds=["log"])
work("scanners", "Dry run for depot-scanners.", [lambda: c_dry("depot-scanners", "DS2")], kinds=["dry"])
new_turn("planning")
U("Declan just messaged: the change freeze starts on Monday 29 June, so whatever isn't cut over by the Friday before "
  "slips to August. Can you keep that in mind when we plan?")
A("Yes. That leaves three working weeks; I will note against each workstream whether it can realistically make "
  "it, and the EDI gateway's proposed evening sits comfortably inside it.")

# --- tracking-api ------------------------------------------------------------------
work("tracking", "Tracking API: read its service.yaml.", [lambda: c_cfg("tracking-api", "TA1")], kinds=["cfg"])
work("tracking", "What's running in the tracking-api namespace?", [lambda: c_kube("tracking-api", "TA3")],
     kinds=["kube"])
work("tracking", "Dry run for tracking-api.", [lambda: c_dry("tracking-api", "TA2")], kinds=["dry"])
work("tracking", "Health check on the tracking API.", [lambda: c_health("tracking-api", "TA4")], kinds=["health"])
work("tracking", "And the tracking-api terraform plan.", [lambda: c_tf("tracking-api", "TA5")], kinds=["tf"])

# --- parcel-queues -----------------------------------------------------------------
work("queues", "Parcel queues. Read config/parcel-queues/service.hcl.", [lambda: c_cfg("parcel-queues", "PQ1")],
     kinds=["cfg"])
work("queues", "kubectl for the parcel-queues namespace.", [lambda: c_kube("parcel-queues", "PQ3")], kinds=["kube"])
work("queues", "Health endpoint of the parcel-queues consumers.", [lambda: c_health("parcel-queues", "PQ4")],
     kinds=["health"])
work("queues", "Dry run for parcel-queues.", [lambda: c_dry("parcel-queues", "PQ2")], kinds=["dry"])
work("queues", "List the queues on the old RabbitMQ box, bic-rmq01, with depths.",
     [lambda: sh("ssh bic-rmq01 sudo rabbitmqctl list_queues name messages consumers memory --formatter pretty_table",
                 N(lambda: table(["name", "messages", "consumers", "memory"],
                                 [[f"{pick(OBJECTS['parcel-queues'])}.{pick(['d', 'retry', 'dlq', 'p1', 'p2'])}"
                                   f"{rng.randint(1, 41):02d}", rng.randint(0, 4000), rng.randint(0, 6),
                                   rng.randint(10000, 9000000)] for _ in range(70)], right=(1, 2, 3))))],
     reply="Depths are low except the retry queues, which drain on their own schedule; no queue is without consumers "
           "apart from the dead-letter ones.")

# --- customs-docs ------------------------------------------------------------------
work("customs", "Customs docs: read its service.toml.", [lambda: c_cfg("customs-docs", "CD1")], kinds=["cfg"])
work("customs", "Oracle stats for the customs-docs tables, owner CUSTOMS.", [lambda: c_ora("customs-docs", "CD3")],
     kinds=["ora"])
work("customs", "Dry run for customs-docs.", [lambda: c_dry("customs-docs", "CD2")], kinds=["dry"])
work("customs", "Run the customs-docs contract and cutover tests.", [lambda: c_pytest("customs-docs", "CD4")],
     kinds=["pytest"])

# --- invoicing ---------------------------------------------------------------------
work("invoicing", "Invoicing. Read its application.properties.", [lambda: c_cfg("invoicing", "INV1")],
     kinds=["cfg"])
work("invoicing", "Table stats on the new invoicing Postgres.", [lambda: c_pg("invoicing", "INV3")], kinds=["pg"])
work("invoicing", "Dry run for invoicing.", [lambda: c_dry("invoicing", "INV2")], kinds=["dry"])
work("invoicing", "Terraform plan for invoicing.", [lambda: c_tf("invoicing", "INV4")], kinds=["tf"])
work("invoicing", "AWS support opened case 174126903910 about the RDS storage autoscaling quota for invoicing. "
     "Show me the invoicing deployments meanwhile.", [lambda: c_kube("invoicing")], kinds=["kube"])

# --- fleet-telematics --------------------------------------------------------------
work("telematics", "Fleet telematics: read its service.yaml.", [lambda: c_cfg("fleet-telematics", "FT1")],
     kinds=["cfg"])
work("telematics", "Cat the fleet-telematics daily volumes export for May.",
     [lambda: c_csv("fleet-telematics", "FT5")], kinds=["csv"])
work("telematics", "Tail the ingest log on bic-app19 for fleet telematics.",
     [lambda: c_log("fleet-telematics", "FT3")], kinds=["log"])
work("telematics", "Dry run for fleet-telematics.", [lambda: c_dry("fleet-telematics", "FT2")], kinds=["dry"])
work("telematics", "Terraform plan for fleet-telematics.", [lambda: c_tf("fleet-telematics", "FT4")],
     kinds=["tf"])

# --- label-printing ----------------------------------------------------------------
work("labels", "Label printing: read its service.toml.", [lambda: c_cfg("label-printing", "LP1")], kinds=["cfg"])
work("labels", "Health endpoint for label-printing.", [lambda: c_health("label-printing", "LP2")],
     kinds=["health"])
work("labels", "Run the label-printing test suite.", [lambda: c_pytest("label-printing", "LP3")], kinds=["pytest"])
new_turn("labels")
U("The printer vendor's engineer, Callum Brodie, is on site at Daventry on Wednesday to re-point the depot printers "
  "at the new spooler. Anything we need to give him?")
A("The spooler's new address and port, the certificate bundle for the TLS listener, and the list of depots in the "
  "order we want them moved. I would also ask him to leave one printer per depot on the old spooler until the "
  "first shift has printed cleanly.")

# --- batch-jobs --------------------------------------------------------------------
work("jobs", "Batch jobs: read its service.toml.", [lambda: c_cfg("batch-jobs", "BJ1")], kinds=["cfg"])
work("jobs", "Tail the nightly log on bic-cron02 for the batch jobs.", [lambda: c_log("batch-jobs", "BJ2")],
     kinds=["log"])
work("jobs", "Table stats for batch-jobs on the new Postgres.", [lambda: c_pg("batch-jobs", "BJ3")], kinds=["pg"])
work("jobs", "Show me the crontab on bic-cron02 that the batch jobs still run from.",
     [lambda: sh("ssh bic-cron02 crontab -l -u jobs",
                 N(lambda: "\n".join(["# m h dom mon dow command", "MAILTO=plat-oncall@hv.example",
                                      "PATH=/usr/local/bin:/usr/bin:/bin"] +
                                     [f"{rng.randint(0, 59)} {pick(['*', '1', '2', '3', '4', '5', '22', '23'])} * * "
                                      f"{pick(['*', '1-5', '6', '0'])} /opt/jobs/bin/run {pick(['nightly', 'hourly', 'weekly'])}"
                                      f"-{hexs(4)} --profile prod >> /var/log/jobs/run-$(date +\\%F).log 2>&1"
                                      for _ in range(40)])))],
     reply="Forty entries, all through the same wrapper, so porting them to scheduler manifests is mechanical.")

# --- afternoon: staging comparisons, noise checks, the label-printing rehearsal and cutover ------------------
AFTERNOON = [
    ("staging", "Read the staging copy of the EDI gateway's properties so we can compare.", ["cfg"], "edi-gateway"),
    ("staging", "Staging config for the route optimiser too.", ["cfg"], "route-optimiser"),
    ("staging", "And the staging service.hcl for the event bus.", ["cfg"], "event-bus"),
    ("staging", "Staging dry run for label-printing.", ["dry"], "label-printing"),
    ("labels", "kubectl for the label-printing namespace.", ["kube"], "label-printing"),
    ("labels", "Terraform plan for label-printing.", ["tf"], "label-printing"),
    ("labels", "What's changed in the label-printing repo?", ["git"], "label-printing"),
    (None, "Can you summarise what's left on the label-printing runbook before the rehearsal?", [], None),
    ("labels", "Read the label-printing cutover runbook.", ["runbook"], "label-printing"),
    ("labels", "Tail the render log on bic-prt01.", ["log"], "label-printing"),
    ("jobs", "Staging dry run for batch-jobs.", ["dry"], "batch-jobs"),
    ("jobs", "kubectl for the batch-jobs namespace.", ["kube"], "batch-jobs"),
    ("jobs", "Terraform plan for batch-jobs.", ["tf"], "batch-jobs"),
    (None, "Declan wants a one-line status per workstream. Draft it without numbers, just states and blockers.", [],
     None),
    ("edi", "Health endpoint of the EDI gateway's new translator.", ["health"], "edi-gateway"),
    ("edi", "kubectl for edi-gateway.", ["kube"], "edi-gateway"),
    ("scanners", "kubectl for depot-scanners.", ["kube"], "depot-scanners"),
    ("scanners", "Terraform plan for depot-scanners.", ["tf"], "depot-scanners"),
    ("scanners", "Health endpoint for depot-scanners.", ["health"], "depot-scanners"),
    (None, "Is there anything in the depot-scanners picture that blocks the June date?", [], None),
    ("customs", "kubectl for customs-docs.", ["kube"], "customs-docs"),
    ("customs", "Terraform plan for customs-docs.", ["tf"], "customs-docs"),
    ("customs", "Health endpoint for customs-docs.", ["health"], "customs-docs"),
    ("telematics", "kubectl for fleet-telematics.", ["kube"], "fleet-telematics"),
    ("telematics", "Health endpoint for fleet-telematics.", ["health"], "fleet-telematics"),
    (None, "What do we tell the telematics vendor about the dropped messages?", [], None),
    ("wms", "Health endpoint for wms-core.", ["health"], "wms-core"),
    ("wms", "Tail the core log on bic-wms01.", ["log"], "wms-core"),
    ("wms", "Table stats on the new wms-core Postgres.", ["pg"], "wms-core"),
    (None, "Oskar's leaving at three. Anything we need from him before he goes?", [], None),
    ("invoicing", "Tail the rater log on bic-app03.", ["log"], "invoicing"),
    ("invoicing", "Run the invoicing test suite.", ["pytest"], "invoicing"),
    ("tracking", "Tail the app log on bic-app07 for the tracking API.", ["log"], "tracking-api"),
    ("tracking", "Run the tracking-api tests.", ["pytest"], "tracking-api"),
    ("tracking", "What's changed in the tracking-api repo?", ["git"], "tracking-api"),
    (None, "Which of the twelve can realistically make the freeze, in your view?", [], None),
    ("queues", "Terraform plan for parcel-queues.", ["tf"], "parcel-queues"),
    ("queues", "What's changed in the parcel-queues repo?", ["git"], "parcel-queues"),
    ("route", "Terraform plan for the route optimiser.", ["tf"], "route-optimiser"),
    ("staging", "Staging service.toml for customs-docs.", ["cfg"], "customs-docs"),
    ("staging", "Staging yaml for tracking-api.", ["cfg"], "tracking-api"),
    ("labels", "Rehearsal time: staging dry run for label-printing again, then we record the rollback rehearsal.",
     ["dry"], "label-printing"),
    (None, "Write the rollback rehearsal note for the label-printing change, in the change's wording.", [], None),
    ("status", "hvmig status again please.", ["status"], None),
    ("labels", "Run the label-printing suite once more after the rehearsal.", ["pytest"], "label-printing"),
    ("labels", "Health on label-printing after the rehearsal.", ["health"], "label-printing"),
    (None, "Is the label-printing cutover safe to schedule for this evening, given the rules?", [], None),
    ("jobs", "Tail the batch-jobs log on bic-cron02 again, the afternoon run.", ["log"], "batch-jobs"),
    ("jobs", "Run the batch-jobs tests.", ["pytest"], "batch-jobs"),
    (None, "What goes into tomorrow's handover?", [], None),
    ("staging", "Staging properties for wms-core, to compare pool sizes later.", ["cfg"], "wms-core"),
    ("staging", "Staging yaml for depot-scanners.", ["cfg"], "depot-scanners"),
    ("events", "kubectl for event-bus.", ["kube"], "event-bus"),
    ("events", "Health for the event-bus mirror.", ["health"], "event-bus"),
    (None, "Anything from the cutover channel?", [], None),
    ("status", "Final hvmig status for the day.", ["status"], None),
]
CHAT = {
    "Can you summarise": "Three things: the rollback rehearsal has to be recorded in the change, the spooler's TLS "
                         "bundle must be on the new render service, and the depot order for the vendor's visit needs "
                         "agreeing. Everything else in the runbook is done.",
    "Declan wants": "Drafted: each workstream with its state from hvmig and one blocker, no figures, so he can paste "
                    "it straight into the deck. EDI gateway is waiting on carrier notice; wms-core on the Oracle SR; "
                    "the rest on dry-run warnings or plan reviews.",
    "Is there anything": "Nothing blocking. The reconnect warning wants an owner, and the handhelds' firmware rollout "
                         "should finish before the move, but neither stops the date.",
    "What do we tell": "That the drops are in the legacy ingest buffer, not the devices, that the new stream has "
                       "more headroom, and that we will send the daily figures for the first week after the move.",
    "Oskar's leaving": "His sign-off on the WMS stats question and confirmation that nothing on the legacy side "
                       "will be dropped this week; both can go in the change as comments.",
    "Which of the twelve": "Label-printing, batch-jobs, tracking-api and the EDI gateway look realistic. Customs and "
                           "invoicing are possible if their plans are approved this week. The rest are likely to "
                           "slip to August.",
    "Write the rollback": "Written: 'Rollback rehearsed on staging at the time shown in the dry-run header; writers "
                          "stopped, config re-pointed to the legacy spooler, replay confirmed, owning team informed.' "
                          "It is in the change now.",
    "Is the label-printing": "Yes, after 19:00: it is not a carrier feed, but keeping clear of the dispatch peak "
                             "avoids reprint spikes. The rehearsal is recorded, so the rules are met.",
    "What goes into": "The state of each workstream, the open SR and AWS case, the EDI evening, the vendor visit, "
                      "and the two plans still awaiting review.",
    "Anything from the": "Quiet. The last messages are the rehearsal note and the network team's confirmation "
                         "for tonight.",
}

for t, msg, kinds, ws in AFTERNOON:
    if not kinds:
        regular(t or "planning")
        U(msg)
        A(next(v for k, v in CHAT.items() if msg.startswith(k)), pad=False)
        continue
    k = kinds[0]
    if k == "status":
        work("status", msg, [c_status], kinds=["status"])
    elif k == "runbook":
        work(t, msg, [lambda: c_runbook(ws, ["Stop new jobs at the old spooler.", "Drain the spool queue.",
                                             "Switch the depot print profiles to the new render service.",
                                             "Print a test label at each depot.", "Watch reprints for 30 minutes."])],
             kinds=["runbook"])
    else:
        work(t, msg, [lambda: c_noise(k, ws)], kinds=[k if k in REPLY else "git"])

FILLER_TURNS = [
    ("Is the cutover channel still quiet?", "Yes. Nothing new since the rehearsal note."),
    ("Has Declan replied to the status lines?", "Not yet; he read them a few minutes ago."),
    ("Any alerts on the estate?", "None open. The last one cleared before lunch."),
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
    U("That's me done for today. Anything before I log off?")
    A("Nothing urgent. The handover is written, the label-printing change has its rehearsal recorded, no carrier "
      "feed moved during the dispatch peak, and nothing on the legacy Oracle side was dropped or truncated.",
      pad=False)


finish()


# ---------------------------------------------------------------------------
# More questions in other words, not asked in the conversation: about facts no
# recall probe above asks about, each at least MIN_GAP turns after its fact.
# The turn is the earliest the question may be asked, moved to the fact's
# turn plus the gap when that is later, and to the last turn at most.

DEV_QUESTIONS = [
    ("EB1", 70, "How many records does the event bus service pull in one go, going by its HCL cfg?"),
    ("PQ2", 96, "If the RabbitMQ move has to be undone, which restore marker did hvmig hand us in the parcel queues "
                "compare run?"),
    ("PQ3", 90, "What build of the consumer is deployed in k8s for the parcel queues right now?"),
    ("RO2", 78, "How long did the optimiser's compare run reckon the actual switchover would take?"),
    ("RO4", 84, "What was the 95th percentile response time the route optimiser's health endpoint reported?"),
    ("WMS2", 66, "How many rows did the warehouse system's trial migration refuse?"),
    ("DS3", 82, "How big is the scan events table on the legacy DB for the depot handhelds, by last night's stats?"),
    ("DS4", 92, "How many reconnects did the depot scanner ingest log flag in that burst this morning?"),
    ("TA3", 100, "Which api image version is live in the tracking namespace on EKS at the moment?"),
    ("TA5", 106, "What deregistration delay is terraform putting on the tracking API's target group?"),
    ("CD1", 98, "What batch size does the customs docs service work with, per its toml?"),
    ("CD3", 110, "Roughly how many declarations are sitting in legacy Oracle for customs? The stats figure."),
    ("INV1", 104, "What's the wait between retries in the invoicing app's props, in ms?"),
    ("INV2", 114, "Which checksum came out of the invoicing compare on the source side?"),
    ("INV4", 120, "How many days of backups will the new invoicing RDS keep, according to the plan?"),
    ("FT4", 126, "How many shards did the telematics Kinesis stream get in the tf plan?"),
    ("pm", 60, "Who's the programme lead I said would be chasing statuses today?"),
    ("carrier", 75, "Who was my contact in carrier relations for the EDI partners?"),
    ("freeze", 94, "When does the change freeze kick in again?"),
    ("printeng", 118, "What's the name of the printer vendor's engineer coming on site?"),
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
    # A tool fact's whole output never names its workstream; its call or its turn's user message does.
    for label, text in P.items():
        pattern = subject_of(label)
        k = next(k for k, i in enumerate(items) if text in i["content"])
        call, out = items[k - 1], items[k]["content"]
        assert call["kind"] == "tool_call" and call["call_id"] == items[k]["call_id"]
        assert not re.search(pattern, out, re.I), (label, re.search(pattern, out, re.I))
        user = next(i for i in items if i["turn"] == items[k]["turn"] and i["role"] == "user")
        assert re.search(pattern, call["content"] + "\n" + user["content"], re.I), label
    # Neither the assistant nor a later user message repeats a planted value.
    for i in items:
        if i["role"] == "assistant" and i["kind"] == "message":
            assert not any(v in i["content"] for v in P.values()), i["content"][:80]
        if i["role"] == "user":
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
        assert len(about) == {"probe": 12, "heldout": 14}[which], (which, len(about))
        assert sum(1 for p in ps if not p["facts"]) == {"probe": 0, "heldout": 2}[which]
        for p in ps:
            assert 45 <= p["turn"] <= turn_no
            q = turns[p["turn"]][0]["content"]
            for fid in p["facts"]:
                f = by_id[fid]
                assert p["turn"] - f["turn"] >= MIN_GAP, (fid, p["turn"])
                assert f["text"].lower() not in q.lower(), (fid, q)
                assert fid not in asked, fid
                asked.add(fid)
    checksums = [p for p in probes["probe"] if "checksum" in by_id[p["facts"][0]]["text"]]
    assert len(checksums) >= 4
    assert len(DEV_QUESTIONS) == 20 and len({d[0] for d in DEV_QUESTIONS}) == 20
    assert 3 <= sum(1 for d in DEV_QUESTIONS if d[0] in M) <= 4
    for label, at_, q in DEV_QUESTIONS:
        fid = fact_ids[label]
        assert fid not in asked, label
        t = dev_turn(label, at_)
        assert t - fact_turns[label] >= MIN_GAP and t <= turn_no, (label, t)
        v = P.get(label) or M[label]
        assert v.lower() not in q.lower(), label
    # Nothing a question asks about is stated in any question's own words.
    assert 45 <= len(facts) <= 60, len(facts)
    assert 140 <= turn_no <= 160, turn_no
    assert 450 <= len(items) <= 520, len(items)
    return turns


def main():
    turns = check()
    tool_turns = sum(1 for its in turns.values() if any(i["kind"] == "tool_call" for i in its))
    fact_points = [50, 100, 140, turn_no]

    def write(name, rows):
        with open(os.path.join(HERE, name), "w") as out:
            for r in rows:
                out.write(json.dumps(r, ensure_ascii=False) + "\n")

    head = ([{"kind": "instruction", "turn": t, "text": rule} for t, rule in RULES] +
            [{"kind": "facts", "turn": t} for t in fact_points])
    write("freight.jsonl", [{"system_prompt": SYSTEM}] + items)
    write("freight_facts.jsonl", facts)
    write("freight_probes.jsonl", head + sorted(probes["probe"], key=lambda p: p["turn"]))
    write("freight_heldout_probes.jsonl", head + sorted(probes["heldout"], key=lambda p: p["turn"]))
    dev = sorted(({"fact": fact_ids[l], "turn": dev_turn(l, at_), "question": q} for l, at_, q in DEV_QUESTIONS),
                 key=lambda d: (d["fact"], d["turn"]))
    write("freight_dev_questions.jsonl", dev)
    size = os.path.getsize(os.path.join(HERE, "freight.jsonl"))
    assert 430_000 <= size <= 560_000, size
    sizes = [len(i["content"]) for i in items if i["kind"] == "tool_result"]
    print(f"{turn_no} turns, {len(items)} items, {call_no} tool calls in {tool_turns} turns, outputs "
          f"{min(sizes)}-{max(sizes)} chars, {len(facts)} facts ({sum(f['source'] == 'tool' for f in facts)} from "
          f"tools), {len(probes['probe'])} probes, {len(probes['heldout'])} held-out probes, {len(dev)} dev "
          f"questions, freight.jsonl {size} bytes")


main()
