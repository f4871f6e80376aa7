#!/usr/bin/env python3
"""Writes the platform-migration replay conversation used by tools/replay.

A 150-turn migration of fifteen workstreams from an old data centre to a
new cluster, run by a platform engineer with an assistant that has shell,
SQL and migration tools. Each workstream brings its facts once (an owner,
a change ticket, hosts, dates, sizes, decisions), a config read and a dry
run whose long outputs hide a guard value and a checksum, and talk around
them. Three standing rules are given inside longer messages, never as a
sentence of their own. At six turns the user asks about an old
workstream's guard value and checksum: facts that live only in tool
output compacted long before.

Outputs (beside this file):
  migration.jsonl         one item per line: turn, role, kind, content, tool_name, call_id
  migration_facts.jsonl   one fact per line: id, turn, topic, source, text
  migration_probes.jsonl  the rules, the turns to count facts at, and the
                          recall questions with the facts they ask for

Deterministic (seeded). Re-run after editing:
  python3 tools/replay_data/make_migration.py
"""

import json
import os
import random

rng = random.Random(20261125)
HERE = os.path.dirname(os.path.abspath(__file__))

SYSTEM = ("You are the migration assistant of Halvorsen Logistics' platform team. You have shell, "
          "psql and migrate tools. Be exact about values and say what you are unsure of.")

items = []
facts = []
probes = []
turn_no = 0
call_no = 0
topic = ""


def fact(text, source):
    facts.append({"id": f"m{len(facts) + 1:03d}", "turn": turn_no, "topic": topic,
                  "source": source, "text": text})
    return text


used = set()


def unique(make):
    """A value from `make` that no earlier call returned: each fact is stated once."""
    while True:
        v = make()
        if not any(v in u or u in v for u in used):
            used.add(v)
            return v


def turn(t):
    global turn_no, topic
    turn_no += 1
    topic = t


def U(text):
    items.append({"turn": turn_no, "role": "user", "kind": "message", "content": text})


FILLER = [
    "Copying the data is the easy part; the risk sits in the minutes when both sides accept writes.",
    "I would rather run one more dry run than discover a schema drift during the cutover itself.",
    "The new cluster's storage class has different fsync behaviour, so I watch commit latency closely.",
    "Nothing here needs a decision tonight; it is worth writing down while the context is fresh.",
    "The runbook template covers the steps, but each service has its own quirks in how it reconnects.",
    "Connection pools on the application side tend to hold stale addresses for longer than people expect.",
    "If the replication slot falls behind, disk usage on the old primary grows until someone notices.",
    "Network policies on the new cluster are deny-by-default, which catches forgotten dependencies early.",
    "I checked the dashboards for the last week; the traffic pattern has no surprises at this hour.",
    "A smaller first batch tells us more about throughput than any estimate I could make from the docs.",
    "The monitoring for the new cluster is in place, although some panels still point at the old hosts.",
    "Most incidents in migrations like this come from DNS caching and hard-coded hosts, not from the copy.",
    "We should keep the old side read-only for a few days after cutover, in case we need to compare rows.",
    "The backlog of small fixes is growing; none of them blocks this step, but they add up.",
    "I would keep the change window short and rehearse the rollback at least once before the real thing.",
    "The team that owns this service has been responsive, which makes the sequencing much easier.",
    "Throughput numbers from the dry run are conservative, because the dry run also validates every row.",
    "When the copy finishes, the verification pass compares row counts and a sample of checksums per table.",
]

NEXT = [
    "schedule the cutover with the owning team",
    "re-run the dry run with production-sized batches",
    "update the runbook with tonight's numbers",
    "check the replication slot after the first hour",
    "confirm the new DNS records with the network team",
    "verify the dashboards point at the new hosts",
    "ask the owners to sign off on the rollback step",
    "collect the last week's error rates for comparison",
]


def A(text, long=True):
    parts = []
    if long:
        parts.append(" ".join(rng.sample(FILLER, rng.randint(2, 4))))
    parts.append(text)
    if long:
        parts.append(" ".join(rng.sample(FILLER, rng.randint(3, 6))))
        if rng.random() < 0.6:
            parts.append("Next steps:\n" + "\n".join(
                f"{i + 1}. {x}" for i, x in enumerate(rng.sample(NEXT, rng.randint(2, 3)))))
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
# Tool outputs: long, mostly noise, with one planted line.

KEYS = ["batch_size", "max_connections", "statement_timeout_ms", "lock_timeout_ms", "retry_limit",
        "copy_workers", "verify_sample_rate", "slot_lag_alert_mb", "pool_size", "read_replicas",
        "wal_keep_mb", "checkpoint_seconds", "vacuum_threshold", "fetch_size", "compression_level"]


def config_yaml(ws, guard, size):
    lines = [f"# {ws}: migration settings (generated by platform-config 4.2)", f"service: {ws}",
             "source:", f"  cluster: dc1-{ws}", "  port: 5432", "target:",
             f"  cluster: k8s-west-{ws}", "  port: 5432", "tables:"]
    planted = False
    for i in range(size):
        if not planted and i == size * 2 // 3:
            lines.append(f"  # cutover guard for {ws}")
            lines.append(f"  guard_value: {guard}")
            planted = True
            continue
        table = f"{rng.choice(['orders', 'events', 'users', 'items', 'jobs', 'ledger', 'audit', 'parts'])}_{i:03d}"
        lines.append(f"  - name: {table}")
        lines.append(f"    rows_estimate: {rng.randint(1000, 9000000)}")
        lines.append(f"    {rng.choice(KEYS)}: {rng.randint(1, 5000)}")
    return "\n".join(lines)


def dry_run_log(ws, checksum, n):
    out = []
    for i in range(n):
        h, m = divmod(600 + i, 60)
        table = f"{rng.choice(['orders', 'events', 'users', 'items', 'jobs', 'ledger'])}_{rng.randint(0, 200):03d}"
        out.append(f"2026-11-2{rng.randint(0, 4)}T{h % 24:02d}:{m:02d}:{rng.randint(0, 59):02d}Z INFO "
                   f"copy {table}: {rng.randint(1000, 900000)} rows in {rng.randint(1, 900)} ms "
                   f"(batch {rng.randint(1, 80)}, worker {rng.randint(1, 8)})")
    out.insert(n - 2, f"dry-run summary for {ws}: verification checksum {checksum}")
    out.append(f"dry run for {ws} finished: 0 errors, {rng.randint(3, 40)} warnings")
    return "\n".join(out)


# ---------------------------------------------------------------------------
# The workstreams.

FIRST = ["Priya", "Jonas", "Mei", "Tomas", "Aisha", "Lars", "Ines", "Dmitri", "Keiko", "Rafael",
         "Sofia", "Bjorn", "Amara", "Felix", "Noor"]
LAST = ["Raman", "Eklund", "Takeda", "Novak", "Okafor", "Lindqvist", "Duarte", "Volkov",
        "Hayashi", "Moreno", "Castell", "Aune", "Mensah", "Brandt", "Haddad"]
WORKSTREAMS = ["billing-ledger", "search-index", "session-store", "media-cdn", "orders-db",
               "notifications", "auth-tokens", "analytics-pipeline", "inventory-sync",
               "payments-gateway", "feature-flags", "audit-log", "email-relay", "geo-routing",
               "ml-features"]
MONTHS = ["Dec", "Jan", "Feb"]

RULES = [
    ("payments-freeze", 2,
     "never restart, drain or evict anything in payments-core between 08:00 and 20:00 CET"),
    ("rollback-step", 3,
     "every change to a production database needs a written rollback step before it is approved"),
    ("throttle", 0,
     "until further notice, run every dry run with --throttle=50"),
]

info = {}


def workstream(k, ws):
    """Ten turns: intro, config, details, dry run, decisions, talk."""
    global topic
    owner = f"{FIRST[k]} {LAST[k]}"
    ticket = f"CHG-{4100 + 37 * k}"
    host = f"dc1-db{k + 11:02d}.halvorsen.internal"
    size = unique(lambda: f"{rng.randint(120, 990)} GB")
    date = unique(lambda: f"{rng.randint(2, 27)} {MONTHS[k % 3]}")
    guard = str(1000 + rng.randint(0, 8999) * 1 + k)
    checksum = "sha256:" + "".join(rng.choice("0123456789abcdef") for _ in range(16))
    info[ws] = {"owner": owner, "guard": guard, "checksum": checksum}

    turn(ws)
    fact(owner, "message")
    fact(ticket, "message")
    fact(host, "message")
    fact(size, "message")
    U(f"Next up is {ws}. It's owned by {owner}, and the change is tracked as {ticket}. The data "
      f"lives on {host} today and the last estimate was {size} including indexes; the team would "
      f"like it moved before {fact(date, 'message')}, but they said that date is soft. Can you read "
      f"its migration config first?")
    tool("shell", {"cmd": f"cat /srv/migrate/{ws}/config.yaml"},
         config_yaml(ws, fact(f"guard_value: {guard}", "tool"), rng.randint(40, 160)))
    A(f"I read the migration config for {ws}. It lists the source and target clusters, the tables "
      f"with their row estimates and per-table tuning, and a cutover guard. The settings look "
      f"consistent with the other workstreams, and nothing in it points at the old hosts after "
      f"cutover.")

    turn(ws)
    lag = unique(lambda: f"{rng.randint(2, 90)} seconds")
    U(f"Some background from {owner.split()[0]}: their replica usually runs about "
      f"{fact(lag, 'message')} behind at peak, and the nightly batch job "
      f"{fact(f'{ws}-nightly-{rng.randint(10, 99)}', 'message')} must not overlap with the copy. "
      f"Does the plan account for that?")
    A(f"It does once we schedule around the nightly batch. The copy itself reads from the "
      f"replica, so the lag you mention only matters for the final catch-up before cutover.")

    turn(ws)
    tool("migrate", {"args": ["--dry-run", ws]},
         dry_run_log(ws, fact(checksum, "tool"), rng.randint(30, 110)))
    rows = rng.randint(2, 40)
    A(f"The dry run for {ws} finished without errors. It copied every table in the config and "
      f"verified a sample of rows on the target; the warnings are the usual ones about sequences "
      f"that will be reset at cutover. Throughput was in line with the estimate for a "
      f"{rows}-worker copy.")

    turn(ws)
    decision = rng.choice(["logical replication", "a snapshot restore followed by WAL replay",
                           "pg_dump in parallel with per-table verification"])
    U(f"We discussed it in the team channel and we decided to "
      f"{fact(f'move {ws} with {decision}', 'message')}. "
      f"{owner.split()[0]} also wants the cutover announced in "
      f"{fact('#' + ws + '-cutover', 'message')} an hour ahead.")
    A(f"Noted. With that approach, the cutover for {ws} needs a short write freeze, and the "
      f"announcement gives the consumers time to pause their jobs.")

    for j in range(rng.randint(5, 6)):
        turn(ws)
        q = rng.choice([
            f"What would make the {ws} cutover slip?",
            f"How do we know the {ws} copy is complete?",
            f"Anything in {ws} that depends on the old DNS names?",
            f"How long will the write freeze for {ws} be?",
            f"What does the rollback for {ws} look like?",
        ])
        if j == 0:
            quota = unique(lambda: f"{rng.randint(8, 64)} vCPU")
            extra = f" Also, the target namespace quota is {fact(quota, 'message')}."
        elif j == 1:
            extra = (f" For the record, the load balancer pool for it is "
                     f"{fact(f'lb-{ws}-{rng.randint(100, 999)}', 'message')}.")
        else:
            extra = ""
        U(q + extra)
        A(f"For {ws}, the main risks are the ones we saw elsewhere: clients that cache addresses, "
          f"jobs that start during the freeze, and sequences that need resetting. The verification "
          f"pass compares row counts and sampled checksums table by table, and the rollback is to "
          f"point the service back at the source, which stays read-only but intact.")


# ---------------------------------------------------------------------------
# The conversation.

turn("kickoff")
U("Hi, I'm Elin Sandvik, I run the data-centre exit for platform. We have fifteen services to "
  "move to the k8s-west cluster before the lease on the old hall ends. I'd like to go through "
  "them one at a time with you.")
fact("Elin Sandvik", "message")
A("Happy to. For each service I will read its migration config, run a dry run, and keep track of "
  "owners, tickets and decisions as we go.")

turn("kickoff")
U("Good. Before we start, the payments people asked me to pass something on, and it matters for "
  "the whole project, so please keep it in mind every time: " + RULES[0][2] + ", even if a "
  "dashboard looks bad - they will handle it themselves. The rest of the week is flexible.")
A("Understood, I will treat that as a standing rule for everything we touch.")

turn("kickoff")
U("One more process point from the change board, since we'll be filing a lot of changes: "
  + RULES[1][2] + ". I'll reject anything without one, so draft it with the change. Also the "
  "board meets on Thursdays at 14:00.")
fact("Thursdays at 14:00", "message")
A("Then every change I draft will carry its rollback step from the start.")

k = 0
for ws in WORKSTREAMS:
    workstream(k, ws)
    k += 1
    if turn_no >= 58 and "throttle" not in info:
        turn("storage")
        U("Quick note after last night's incident on the storage array: the storage team asked "
          "that, " + RULES[2][2] + ", because the unthrottled copies saturated the array twice. "
          "They'll tell us when it's lifted.")
        info["throttle"] = turn_no
        A("Noted; every dry run from here on uses the throttle until they lift it.")
    # The recall questions, about a workstream finished long ago, near
    # turns 45, 70, 90, 115 and 135.
    for at, about in ((45, 0), (70, 2), (90, 4), (115, 6), (135, 8)):
        key = ("done", at)
        if key in info or turn_no < at - 1:
            continue
        old = WORKSTREAMS[about]
        turn(old)
        ids = [f["id"] for f in facts if f["topic"] == old and f["source"] == "tool"]
        U(f"Going back to {old} for a second: what guard value did its config show, and what was "
          f"the dry-run checksum? {info[old]['owner'].split()[0]} is asking.")
        probes.append({"kind": "recall", "turn": turn_no, "facts": ids})
        A(f"Let me look at what we recorded for {old}.", long=False)
        info[key] = True

# The closing turns.
turn("wrap-up")
old = WORKSTREAMS[10]
ids = [f["id"] for f in facts if f["topic"] == old and f["source"] == "tool"]
U(f"Before we wrap up: for {old}, what guard value did the config show, and what was the dry-run "
  f"checksum? I need them for the audit.")
probes.append({"kind": "recall", "turn": turn_no, "facts": ids})
A(f"Let me look at what we recorded for {old}.", long=False)

turn("wrap-up")
U("Thanks. Write me a short status of the whole migration for the steering group.")
A("All fifteen services have a config review and a clean dry run; cutovers are scheduled with "
  "their owners, each change carries its rollback step, and payments-core is untouched during "
  "business hours.")


def main():
    blob = "\n".join(i["content"] for i in items)
    for f in facts:
        n = blob.count(f["text"])
        assert n >= 1, f
    for _, _, rule in RULES:
        assert rule in blob, rule
    with open(os.path.join(HERE, "migration.jsonl"), "w") as out:
        out.write(json.dumps({"system_prompt": SYSTEM}) + "\n")
        for i in items:
            out.write(json.dumps(i, ensure_ascii=False) + "\n")
    with open(os.path.join(HERE, "migration_facts.jsonl"), "w") as out:
        for f in facts:
            out.write(json.dumps(f, ensure_ascii=False) + "\n")
    with open(os.path.join(HERE, "migration_probes.jsonl"), "w") as out:
        rule_turns = {"payments-freeze": 2, "rollback-step": 3, "throttle": info["throttle"]}
        for name, _, rule in RULES:
            out.write(json.dumps({"kind": "instruction", "turn": rule_turns[name], "text": rule}) + "\n")
        for t in (45, 90, 135, turn_no):
            out.write(json.dumps({"kind": "facts", "turn": t}) + "\n")
        for p in probes:
            out.write(json.dumps(p) + "\n")
    print(f"{turn_no} turns, {len(items)} items, {call_no} tool calls, {len(facts)} facts "
          f"({sum(f['source'] == 'message' for f in facts)} in messages), "
          f"{len(probes)} recall probes, {len(blob)} bytes")


main()
