#!/usr/bin/env python3
"""Writes the on-call replay conversation used by tools/replay.

A 56-turn night shift of an SRE with an assistant that has shell, kubectl,
SQL and log tools: ten incidents and chores, tool calls with long outputs of
the kind those tools print, a standing rule given early, and facts planted in
what the user says, what the assistant says and what the tools return.

Outputs (beside this file):
  oncall.jsonl        one item per line: turn, role, kind, content, tool_name, call_id
  oncall_facts.jsonl  one fact per line: id, turn, topic, source, text
  oncall_probes.jsonl the standing instruction, and facts to look for mid-way

Deterministic: the same file every run (seeded). Re-run after editing:
  python3 tools/replay_data/make_oncall.py
"""

import json
import os
import random

rng = random.Random(20261122)
HERE = os.path.dirname(os.path.abspath(__file__))

items = []
facts = []
turn_no = 0
call_no = 0
topic = ""


def fact(text, source):
    """Registers `text` (which must appear verbatim where it was planted)."""
    facts.append({"id": f"f{len(facts) + 1:02d}", "turn": turn_no, "topic": topic,
                  "source": source, "text": text})
    return text


# What an assistant says around the facts: reasoning, caveats, next steps.
# Drawn per topic, so answers read like an on-call assistant's, at the
# length real ones have.
EXPLAIN = {
    "checkout-latency": [
        "Checkout calls the session store on every request, so anything that slows Redis shows up in p99 within a minute.",
        "The ledger fallback path is correct but expensive: it opens a database transaction per request instead of reading a cached session.",
        "I looked at the error budget as well; at this rate the monthly budget for checkout would be gone in about two days.",
        "None of the recent deploys touched the session code, which makes a capacity problem more likely than a regression.",
        "If the latency does not recover after the change, the next suspect is connection churn between pay-api and the ledger.",
        "I would avoid scaling pay-api out right now, because more replicas would put more pressure on the same Redis instance.",
        "For the record, the dashboards lag by about a minute, so the numbers I quote are slightly behind what users see.",
        "It would be worth adding an alert on Redis memory usage at 85 percent, so that we hear about it before writes fail.",
    ],
    "replica-lag": [
        "Replication lag on a streaming replica usually means the replay process cannot keep up, not that the network is slow.",
        "Long-running queries on the replica can hold back replay when hot_standby_feedback is on, so I checked for those too.",
        "The primary itself looks healthy: its write rate is normal for this hour and there are no long transactions.",
        "Frequent checkpoints on a replica make every replayed page more expensive, because full-page writes pile up.",
        "Reads that the application sends to this replica will see stale data until the lag is back under a few seconds.",
        "A reload applies this parameter without a restart, so clients stay connected while it takes effect.",
        "Once it has caught up, I would leave it alone for the night and let the owning team tune it during the day.",
    ],
    "tls-cert": [
        "Let's Encrypt certificates last ninety days and cert-manager normally renews them thirty days before expiry.",
        "A DNS-01 challenge needs the solver to create a TXT record, so any permission problem on the DNS side blocks renewal silently.",
        "The old certificate keeps being served until a new one is issued, so nothing breaks until the expiry date itself.",
        "If the fix takes longer than a few days, we could issue a certificate manually as a stopgap, but I would rather fix the solver.",
        "It is worth checking whether other certificates use the same issuer, since they would be stuck the same way.",
        "I did not change anything in the cluster for this one; it is read-only investigation so far.",
    ],
    "node-disk": [
        "When a node reports DiskPressure the kubelet starts evicting pods, beginning with those that use the most ephemeral storage.",
        "Evicted pods get rescheduled on other nodes, so the service impact is small, but it moves load around the pool.",
        "Container images are the usual culprit on long-lived nodes, because every deploy pulls a new tag and old ones stay behind.",
        "Logs are rotated by the container runtime here, so they are unlikely to be the cause, and the numbers confirm that.",
        "Pruning unused images is safe: images used by running containers are kept, and anything removed is pulled again on demand.",
        "It would be good to check the other nodes built from the same template, because they will have the same setting.",
    ],
    "ci-flaky": [
        "The runners themselves look healthy: CPU, memory and disk are all well within limits on the failing job.",
        "A mirror that answers slowly causes exactly this kind of intermittent failure, because only some requests cross the timeout.",
        "Retrying the job would probably pass, but that hides the problem and makes the next failure look random again.",
        "Floating version ranges in CI mean the build can change without any commit in the repository, which makes bisecting hard.",
        "Pinning the runtime version is cheap, and upgrading becomes a reviewed change instead of a surprise.",
        "The mirror has not been restarted in a while, so its heap may simply have grown with the cache.",
    ],
    "kafka-lag": [
        "Consumer lag on a single partition points at one stuck consumer rather than a throughput problem for the whole group.",
        "Kafka keeps ordering per partition, so one message that cannot be processed blocks everything behind it on that partition.",
        "Skipping an offset is safe here because the message is preserved in the dead-letter topic and can be replayed later.",
        "Invoices for the other partitions were written normally, so only a slice of customers saw delays.",
        "The consumer should be changed to dead-letter messages after a few attempts instead of retrying forever.",
        "Once the backlog is gone, billing can check whether any invoice was written twice, although the writer is idempotent.",
    ],
    "dns": [
        "With a high ndots value, every name with fewer dots than that is first tried against each search domain.",
        "Each of those attempts is a separate query to CoreDNS, and most of them come back as NXDOMAIN.",
        "CoreDNS itself is not overloaded, but the extra round trips add latency to every outbound call of the service.",
        "Setting ndots lower for one deployment is a low-risk change, because internal names can still be written in full.",
        "A canary lets us compare query rates and latency side by side before changing the whole deployment.",
        "The same pattern probably affects other services, but search is the one with the most external calls.",
    ],
    "backups": [
        "A backup only counts once a restore has been tested, which is why this check exists at all.",
        "The restore tool fetches the base backup, then replays WAL up to the chosen point in time.",
        "Restore time is dominated by download speed from the bucket and by WAL replay, not by the size of the indexes.",
        "The row count check compares the restored table with the count recorded when the backup was taken.",
        "I used the scratch cluster, so nothing in production was touched by this test.",
        "The quarterly check form asks for the restore duration, the data checks and the approver's name.",
    ],
    "capacity": [
        "Reservations only pay off for the baseline that runs all month, so I looked at the minimum, not the average.",
        "The pool scales up during the day and shrinks at night, with the weekend as the quietest period.",
        "A one-year term keeps the option to change instance families next year when the new generation is cheaper.",
        "Spot instances would cut the cost further for batch work, but not for the services in this pool.",
        "These figures exclude storage and network, which finance tracks separately.",
    ],
    "search-index": [
        "Query and index analyzers must agree, otherwise a term is normalized one way when stored and another when searched.",
        "The German analyzer keeps umlauts as they are, while the ASCII folding analyzer turns them into plain vowels.",
        "The change went out with a batch of tuning commits, which is why nobody noticed the side effect.",
        "A rolling restart replaces pods one by one, so search stays available while the new configuration loads.",
        "We should add a relevance test with a few umlaut queries to the config repository's CI.",
    ],
    "handoff": [
        "I kept the notes short so that the day shift can read them in a couple of minutes.",
        "Everything I changed tonight is listed with the exact command, so it can be reviewed or rolled back.",
        "Items that need another team are marked with the team and the person we talked to.",
        "I left out the alerts that resolved by themselves without any action.",
    ],
}


used = {}


GENERAL = [
    "I want to be careful not to change two things at once, so that we can tell which one helped.",
    "Nothing in the change calendar overlaps with this, so it is not a planned maintenance side effect.",
    "I'll keep the incident channel updated with each step so that the timeline is easy to reconstruct later.",
    "If anything looks off after this step, reverting is a single command and I have it ready.",
    "The alert thresholds for this service were last reviewed in the summer and may be too tight for night traffic.",
    "I compared with the same hour last week to rule out normal traffic patterns.",
    "There is no sign of a security issue here; it looks like an ordinary operational problem.",
    "The runbook covers most of this, although a few of its commands are out of date.",
    "Customers would mostly notice this as slowness rather than errors, which matches the support tickets so far.",
    "I double-checked the namespace and the context before running anything, to be sure we are on production.",
    "Let me know if you would rather take a different approach; none of this is hard to undo.",
    "For the postmortem it will help to have the exact times, so I am noting them as we go.",
    "The monitoring for this part of the stack is thinner than elsewhere, so some of this is inferred from logs.",
    "I am assuming the traffic pattern stays as it is tonight; a sudden spike would change the picture.",
    "It is a good sign that the problem is contained to one component and has not spread to its neighbours.",
    "I would like a second pair of eyes on anything that changes production data, even if it looks safe.",
    "We have seen something similar a few months ago, and the fix then was along the same lines.",
    "This is the kind of change that should end up in the infrastructure repository, not only be applied by hand.",
    "I have not touched any alert silences, so if this flares up again we will be paged as before.",
    "The dashboards for this are a bit scattered; I'll list the ones I used in the handoff.",
]
HOSTS = {
    "checkout-latency": ["pay-api", "ledger-api", "redis-pay-01", "the payments ingress"],
    "replica-lag": ["db-orders-01", "db-orders-03", "pgbouncer-orders", "the orders primary"],
    "tls-cert": ["cert-manager", "the ingress controller", "the cert monitor", "external-dns"],
    "node-disk": ["the general pool", "containerd", "the kubelet", "node-problem-detector"],
    "ci-flaky": ["runner-ci-4", "runner-ci-7", "the build cache", "the artifact store"],
    "kafka-lag": ["kafka-1", "kafka-3", "invoice-writer", "the billing database"],
    "dns": ["coredns", "node-local-dns", "search-api", "the VPC resolver"],
    "backups": ["pg-scratch-1", "the restore worker", "the backup bucket", "the WAL archiver"],
    "capacity": ["the general pool", "the batch pool", "the cost exporter", "the autoscaler"],
    "search-index": ["search-api", "the search cluster", "the indexer", "the config repository"],
    "handoff": ["the incident channel", "the status page", "the ticket queue", "the pager"],
}
METRICS = [("CPU usage", "%", 5, 80), ("memory usage", "%", 20, 85), ("the error rate", "%", 0, 3),
           ("p50 latency", " ms", 4, 90), ("open connections", "", 40, 900), ("GC pauses", " ms", 1, 60),
           ("queue depth", "", 0, 300), ("disk I/O wait", "%", 0, 12)]


def more(k):
    """Up to k sentences of explanation for the current topic; the topic's
    own are never said twice, general remarks come back once all were used."""
    pool = [x for x in EXPLAIN.get(topic, []) if x not in used.setdefault(topic, set())]
    if len(pool) < k:
        general = [x for x in GENERAL if x not in used.setdefault("", set())]
        if len(general) < k:
            used[""] = set()
            general = list(GENERAL)
        pool += general
    picked = rng.sample(pool, min(k, len(pool)))
    for x in picked:
        used["" if x in GENERAL else topic].add(x)
    return " ".join(picked)


NEXT = [
    "Watch the error rate for the next fifteen minutes.",
    "Update the incident channel with what changed and when.",
    "Add the exact commands to the handoff notes.",
    "Check whether the same problem exists in the staging environment.",
    "Open a follow-up ticket for a permanent fix during working hours.",
    "Compare the dashboards again after the next traffic peak.",
    "Confirm with the owning team that they agree with the change.",
    "Review the alert threshold that fired, so it pages at the right time.",
]


TEMPLATES = [
    "Before touching {a}, I looked at {b} to make sure the problem is not upstream of it.",
    "The {m} graph for {a} has been flat for the last {n} minutes, which suggests the issue started elsewhere.",
    "I also went through the recent deploys of {a}; the last one was {n} hours ago and only changed {thing}.",
    "One thing I can't explain yet is why {b} looked fine while {a} was struggling; I'll keep an eye on it.",
    "If we see this again, a useful first step is to compare {m} on {a} and {b} side by side.",
    "The runbook for {a} suggests restarting it, but that treats the symptom and we would lose the evidence.",
    "I've seen {a} behave like this when {b} is slow to answer, because its client retries without backoff.",
    "The logs of {b} are noisy at this hour because of the batch jobs, so I filtered them by request id.",
    "For context, {a} normally handles about {n}00 requests per second at night and twice that during the day.",
    "It may be worth adding {m} of {a} to the main dashboard; right now it is only on a team board.",
    "I checked the last {n} alerts for {a}: all of them resolved on their own within a few minutes.",
    "The owners of {b} are not on call tonight, so anything that needs their decision waits for the morning.",
    "There is a known issue with {thing} in the version of {a} we run, but it does not match what we see.",
    "Looking at the traces, most of the time is spent waiting on {b}, not in {a} itself.",
]
THINGS = ["the retry policy", "the connection pool size", "the logging format", "a feature flag",
          "the health check path", "the timeout defaults", "the TLS settings", "the metrics labels"]


def remark():
    hosts = HOSTS.get(topic, ["the service", "its dependency"])
    a, b = rng.sample(hosts, 2)
    what = rng.choice(METRICS)[0]
    t = rng.choice(TEMPLATES)
    out = t.format(a=a, b=b, m=what, n=rng.randint(2, 40), thing=rng.choice(THINGS))
    return out[0].upper() + out[1:]


def checked():
    """What the assistant looked at on the way, as a short list."""
    lines = []
    for _ in range(rng.randint(2, 4)):
        what, unit, lo, hi = rng.choice(METRICS)
        host = rng.choice(HOSTS.get(topic, ["the cluster"]))
        verdict = rng.choice(["normal for this hour", "within its usual range", "slightly high but stable",
                              "unchanged since the page", "no different from last week"])
        lines.append(f"- {what} on {host}: {rng.randint(lo, hi)}{unit}, {verdict}")
    return "What I checked on the way:\n" + "\n".join(lines)


def U(text, paste=None):
    if paste:
        text += "\n\nThis is what I see on my side:\n```\n" + paste + "\n```"
    items.append({"turn": turn_no, "role": "user", "kind": "message", "content": text})


def A(text):
    # Real assistants explain themselves: the facts sit inside longer answers.
    k = rng.randint(4, 8)
    head, tail = more(k // 2), more(k - k // 2)
    notes = " ".join(remark() for _ in range(rng.randint(6, 12)))
    body = "\n\n".join(x for x in [head, text, tail, notes] if x)
    if rng.random() < 0.8:
        body += "\n\n" + checked()
    if rng.random() < 0.5:
        body += "\n\nNext steps:\n" + "\n".join(
            f"{i + 1}. {x}" for i, x in enumerate(rng.sample(NEXT, rng.randint(2, 3))))
    items.append({"turn": turn_no, "role": "assistant", "kind": "message", "content": body})


def tool(name, args, output):
    global call_no
    call_no += 1
    cid = f"call_{call_no:03d}"
    items.append({"turn": turn_no, "role": "assistant", "kind": "tool_call",
                  "content": json.dumps(args), "tool_name": name, "call_id": cid})
    items.append({"turn": turn_no, "role": "tool", "kind": "tool_result",
                  "content": output, "tool_name": name, "call_id": cid})


def turn(t):
    global turn_no, topic
    turn_no += 1
    topic = t


# ---------------------------------------------------------------------------
# Tool output generators: the bulk of real tool output, mostly noise.

def ts(h, m, s):
    return f"2026-11-21T{h:02d}:{m:02d}:{s:02d}.{rng.randint(0, 999):03d}Z"


def app_log(service, lines, inserts=(), level_mix=("INFO", "INFO", "INFO", "DEBUG", "WARN")):
    out = []
    # Keep the planted lines, at the same relative place, in a shorter log.
    scale = 0.55
    inserts = [(int(pos * scale), text) for pos, text in inserts]
    lines = int(lines * scale)
    paths = ["/v2/cart", "/v2/checkout", "/v2/payment-intents", "/healthz", "/v2/orders",
             "/v2/customers/me", "/metrics"]
    at = {pos: text for pos, text in inserts}
    for i in range(lines):
        if i in at:
            out.append(at[i])
            continue
        lvl = rng.choice(level_mix)
        if service == "postgres":
            out.append(f"{ts(1, 10 + i // 60, i % 60)} UTC [{rng.randint(1000, 99999)}] {lvl}:  duration: "
                       f"{rng.random() * 40:.3f} ms  statement: SELECT {rng.choice(['id, status', 'count(*)', 'total_cents'])} "
                       f"FROM {rng.choice(['orders', 'order_items', 'shipments'])} WHERE id = {rng.randint(10 ** 6, 10 ** 8)}")
            continue
        if service == "cert-manager":
            out.append(f"I1121 {i // 60:02d}:{i % 60:02d}:{rng.randint(10, 59)}.{rng.randint(0, 999999):06d} 1 "
                       f"controller.go:{rng.randint(100, 220)}] cert-manager/{rng.choice(['certificates-trigger', 'orders', 'certificaterequests-issuer-acme'])} "
                       f"\"msg\"=\"re-queuing item due to optimistic locking on resource\" \"key\"=\"{rng.choice(['web', 'api', 'admin'])}/tls-{rng.randint(1, 40)}\"")
            continue
        p = rng.choice(paths)
        out.append(f"{ts(1, 10 + i // 60, i % 60)} {lvl:5} {service} "
                   f"[req={rng.getrandbits(48):012x}] {rng.choice(['GET', 'POST'])} {p} "
                   f"status={rng.choice([200, 200, 200, 201, 204, 304])} "
                   f"dur_ms={rng.randint(3, 240)} bytes={rng.randint(120, 9000)}")
    return "\n".join(out)


def kubectl_pods(ns, prefix, n, special=()):
    rows = ["NAME                                  READY   STATUS    RESTARTS      AGE"]
    sp = dict(special)
    for i in range(n):
        name = f"{prefix}-{rng.getrandbits(32):08x}-{rng.getrandbits(20):05x}"[:36]
        if i in sp:
            rows.append(sp[i])
            continue
        rows.append(f"{name:<37} 1/1     Running   {rng.randint(0, 2):<13} {rng.randint(2, 19)}d")
    return f"# namespace: {ns}\n" + "\n".join(rows)


def table(header, rows):
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    line = lambda r: " | ".join(str(v).ljust(widths[i]) for i, v in enumerate(r))
    sep = "-+-".join("-" * w for w in widths)
    return "\n".join([line(header), sep] + [line(r) for r in rows] + [f"({len(rows)} rows)"])


def metrics_dump(prefix, n, inserts=()):
    scale = 0.55
    at = {int(pos * scale): text for pos, text in inserts}
    n = int(n * scale)
    out = []
    for i in range(n):
        if i in at:
            out.append(at[i])
            continue
        out.append(f'{prefix}_{rng.choice(["requests_total", "errors_total", "duration_seconds_bucket", "inflight"])}'
                   f'{{pod="{prefix}-{rng.randint(1, 9)}",le="{rng.choice(["0.05", "0.1", "0.25", "0.5", "1", "+Inf"])}"}} '
                   f'{rng.randint(0, 99999)}')
    return "\n".join(out)


def dockerfile_like(n):
    steps = ["RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates",
             "COPY package.json package-lock.json ./", "RUN npm ci --omit=dev",
             "COPY src/ ./src/", "ENV NODE_ENV=production", "USER node", "EXPOSE 8080"]
    return "\n".join(f"{i + 1:4d}  {rng.choice(steps)}" for i in range(n))


# ---------------------------------------------------------------------------
# The conversation.

SYSTEM = ("You are the on-call assistant of Northwind's platform team. You have shell, kubectl, "
          "psql and log-search tools. Be precise and keep the operator informed.")

# --- 1. Checkout latency ----------------------------------------------------
turn("checkout-latency")
U(f"Hi, I'm {fact('Tomasz Wilk', 'message')}, on call tonight. We just got paged for "
  f"{fact('INC-20931', 'message')}: checkout p99 is at {fact('1840 ms', 'message')} since about 01:10 UTC. "
  f"Can you start by looking at the payment API pods?")
tool("kubectl", {"cmd": "kubectl -n payments get pods -l app=pay-api -o wide"},
     kubectl_pods("payments", "pay-api", 24,
                  special=[(7, "pay-api-7c9f6d8b5-x2kqz             1/1     Running   4 (12m ago)   6d")]))
A(f"The pods are up, but {fact('pay-api-7c9f6d8b5-x2kqz', 'message')} restarted 4 times in the last hour. "
  "I'll pull its logs next.")

turn("checkout-latency")
U(f"One rule for the rest of this shift: never restart anything in the payments namespace during "
  f"the EU business-hours freeze (08:00-18:00 CET) without paging me first. Go ahead with the logs.")
log = app_log("pay-api", 260, inserts=[
    (131, f"{ts(1, 12, 4)} ERROR pay-api redis: OOM command not allowed when used memory > 'maxmemory' "
          f"(host={fact('redis-pay-01.payments.svc', 'tool')})"),
    (177, f"{ts(1, 12, 40)} WARN  pay-api circuit breaker 'ledger' half-open after 30s"),
])
tool("logs", {"service": "pay-api", "pod": "pay-api-7c9f6d8b5-x2kqz", "since": "1h"}, log)
A("The restarts line up with Redis refusing writes: \"OOM command not allowed when used memory > "
  "'maxmemory'\" on redis-pay-01.payments.svc. Sessions fall back to the ledger service, which is "
  "what drives the latency.")

turn("checkout-latency")
U("What is Redis configured with right now?")
cfg = "\n".join([f"{k}:{v}" for k, v in [
    ("redis_version", "7.2.4"), ("used_memory_human", fact("3.98G", 'tool')),
    ("maxmemory_human", "4.00G"), ("maxmemory_policy", fact("noeviction", 'tool')),
    ("evicted_keys", "0"), ("connected_clients", "812")]] +
    [f"db0:keys={rng.randint(10 ** 6, 9 * 10 ** 6)},expires={rng.randint(10 ** 5, 10 ** 6)},avg_ttl={rng.randint(10 ** 5, 10 ** 7)}"] +
    [f"cmdstat_{c}:calls={rng.randint(10 ** 5, 10 ** 8)},usec={rng.randint(10 ** 6, 10 ** 9)},usec_per_call={rng.random() * 20:.2f}"
     for c in ["get", "set", "del", "expire", "hgetall", "hset", "mget", "incr", "ttl", "scan"] * 8])
tool("shell", {"cmd": "redis-cli -h redis-pay-01.payments.svc INFO all"}, cfg)
A("Redis is at 3.98G of a 4.00G limit with maxmemory-policy noeviction, so once it is full every "
  "write fails instead of evicting old sessions.")

turn("checkout-latency")
U(f"OK. We decided to raise maxmemory to {fact('6 GB', 'message')} and switch the policy to "
  f"{fact('allkeys-lru', 'message')}. Do it with CONFIG SET, no restart.")
tool("shell", {"cmd": "redis-cli -h redis-pay-01.payments.svc CONFIG SET maxmemory 6gb && "
                      "redis-cli -h redis-pay-01.payments.svc CONFIG SET maxmemory-policy allkeys-lru"},
     "OK\nOK\n" + "\n".join(f"# keyspace check {i}: ok" for i in range(40)))
A("Done: maxmemory is 6 GB and the policy is allkeys-lru, applied live with CONFIG SET. No pod was "
  "restarted. I'll watch p99 for the next minutes.")

turn("checkout-latency")
U("How does p99 look now?")
tool("metrics", {"query": "histogram_quantile(0.99, rate(http_server_duration_seconds_bucket{app='pay-api'}[5m]))"},
     metrics_dump("pay_api", 220, inserts=[(110, "# p99 over last 5m: 0.212 s (was 1.84 s)")]))
A(f"p99 is back to {fact('212 ms', 'message')}. I'd keep INC-20931 open until the morning and add a "
  "follow-up to size Redis properly.")

# --- 2. Replica lag -----------------------------------------------------------
turn("replica-lag")
U(f"Next page: replication lag on {fact('db-orders-02', 'message')}. Who owns that cluster again?")
tool("shell", {"cmd": "cat /srv/runbooks/ownership.yaml"},
     "\n".join([f"- cluster: db-{n}-{i:02d}\n  owner: {o}\n  escalation: {e}" for n, o, e in [
         ("users", "Jonas Berg", "pager:dbre"), ("orders", fact("Priya Raman", 'tool'), "pager:orders-dbre"),
         ("search", "Ana Costa", "pager:search"), ("billing", "Kofi Mensah", "pager:billing")]
         for i in range(1, 7)]))
A("db-orders-02 belongs to Priya Raman (escalation pager:orders-dbre). Let me check the lag.")

turn("replica-lag")
U("Check the lag and what the replica is waiting on.")
rows = [(f"10.4.{rng.randint(1, 40)}.{rng.randint(2, 250)}", rng.choice(["streaming", "streaming", "catchup"]),
         f"{rng.randint(0, 9)}/{rng.getrandbits(28):07X}", f"{rng.randint(0, 3)}s") for _ in range(60)]
rows[17] = ("10.4.22.9", "streaming", "3A/1F00D4C8", fact("412 s", 'tool'))
tool("psql", {"db": "orders", "sql": "SELECT client_addr, state, replay_lsn, replay_lag FROM pg_stat_replication"},
     table(["client_addr", "state", "replay_lsn", "replay_lag"], rows))
A("db-orders-02 (10.4.22.9) is 412 s behind; the others are under 4 s. It is streaming, so it is "
  "replaying slowly rather than disconnected.")

turn("replica-lag")
U("Anything in its log?")
log = app_log("postgres", 240, level_mix=("LOG", "LOG", "DEBUG"), inserts=[
    (96, f"{ts(1, 31, 2)} LOG   checkpoints are occurring too frequently (19 seconds apart)"),
    (97, f"{ts(1, 31, 2)} HINT  Consider increasing the configuration parameter \"max_wal_size\"."),
    (188, f"{ts(1, 33, 51)} ERROR canceling statement due to conflict with recovery (pid 88213)"),
])
tool("logs", {"host": "db-orders-02", "file": "/var/log/postgresql/postgresql-16-main.log", "lines": 240}, log)
A("Checkpoints every 19 seconds and a hint to raise max_wal_size; the replica spends its time "
  "checkpointing. There is also a query cancelled for conflict with recovery.")

turn("replica-lag")
U(f"Priya says set {fact('max_wal_size = 16GB', 'message')} on the replica and reload, and she wants "
  f"the nightly report query moved off it. Please do the first part.")
tool("shell", {"cmd": "psql -h db-orders-02 -c \"ALTER SYSTEM SET max_wal_size = '16GB'\" -c \"SELECT pg_reload_conf()\""},
     "ALTER SYSTEM\n pg_reload_conf \n----------------\n t\n(1 row)\n")
A("max_wal_size = 16GB is set on db-orders-02 and the configuration reloaded (no restart). Moving "
  "the nightly report query is for Priya's team; I noted it.")

turn("replica-lag")
U("Is it catching up?")
tool("psql", {"db": "orders", "sql": "SELECT now(), replay_lag FROM pg_stat_replication WHERE client_addr='10.4.22.9'"},
     table(["now", "replay_lag"], [(f"2026-11-21 01:{40 + i}:00+00", f"{max(0, 412 - i * 37)} s") for i in range(12)]))
A("Yes: the lag fell from 412 s to 5 s within eleven minutes and is now at 0.")

# --- 3. Certificate -----------------------------------------------------------
turn("tls-cert")
U(f"While that settles: the cert monitor says the certificate for {fact('api.northwind.io', 'message')} "
  f"is close to expiry. How long do we have?")
tool("shell", {"cmd": "echo | openssl s_client -connect api.northwind.io:443 -servername api.northwind.io 2>/dev/null | openssl x509 -noout -text"},
     "Certificate:\n    Data:\n        Version: 3 (0x2)\n        Serial Number:\n            04:"
     + ":".join(f"{rng.randint(0, 255):02x}" for _ in range(17)) +
     "\n        Signature Algorithm: ecdsa-with-SHA384\n        Issuer: C = US, O = Let's Encrypt, CN = E6\n"
     f"        Validity\n            Not Before: Sep  1 02:11:09 2026 GMT\n            Not After : {fact('Nov 30 02:11:08 2026 GMT', 'tool')}\n"
     "        Subject: CN = api.northwind.io\n" +
     "\n".join(f"                {':'.join(f'{rng.randint(0, 255):02x}' for _ in range(15))}" for _ in range(60)))
A("It expires on Nov 30 02:11:08 2026 GMT, in about nine days. It should have renewed at 30 days, so "
  "renewal is failing somewhere.")

turn("tls-cert")
U("Check cert-manager.")
tool("kubectl", {"cmd": "kubectl -n cert-manager logs deploy/cert-manager --since=24h"},
     app_log("cert-manager", 200, level_mix=("I", "I", "I"), inserts=[
         (50, f"E1121 00:02:11 controller.go:167] cert-manager/challenges \"msg\"=\"propagation check failed\" "
              f"\"error\"=\"DNS record for \\\"_acme-challenge.api.northwind.io\\\" not yet propagated\" "
              f"\"dnsName\"=\"api.northwind.io\" \"type\"=\"DNS-01\""),
         (51, "I1121 00:02:11 controller.go:175] cert-manager/challenges retrying in 1h0m0s"),
     ]))
A("The DNS-01 challenge keeps failing: the _acme-challenge record for api.northwind.io never "
  "propagates. cert-manager retries every hour.")

turn("tls-cert")
U(f"I bet it's the Route 53 credentials. The issuer is {fact('letsencrypt-prod-dns', 'message')}, "
  f"check its secret.")
tool("kubectl", {"cmd": "kubectl -n cert-manager describe clusterissuer letsencrypt-prod-dns"},
     "Name:         letsencrypt-prod-dns\nAPI Version:  cert-manager.io/v1\nKind:         ClusterIssuer\nSpec:\n  Acme:\n"
     "    Solvers:\n      dns01:\n        route53:\n          Region: eu-central-1\n          Access Key ID Secret Ref:\n"
     "            Name: route53-credentials\nStatus:\n  Conditions:\n    Message: Failed to verify ACME account: "
     "error: AccessDenied: User arn:aws:iam::4411:user/cert-manager is not authorized to perform: "
     "route53:ChangeResourceRecordSets\n" + "\n".join(f"  Event {i}: Normal  Synced" for i in range(80)))
A("You're right: the IAM user arn:aws:iam::4411:user/cert-manager lost route53:ChangeResourceRecordSets. "
  "That needs the IAM policy restored; I can't change IAM from here.")

turn("tls-cert")
U(f"Fine, I'll ask {fact('Marta from security', 'message')} to restore the policy in the morning. "
  "Note it in the handoff.")
A("Noted for the handoff: Marta from security restores route53:ChangeResourceRecordSets for the "
  "cert-manager IAM user; the certificate for api.northwind.io expires Nov 30.")

# --- 4. Node disk pressure -------------------------------------------------------
turn("node-disk")
U(f"New alert: node {fact('ip-10-4-17-22', 'message')} has DiskPressure and is evicting pods.",
  paste="\n".join([f"[FIRING:1] KubeNodeDiskPressure ip-10-4-17-22.eu-central-1.compute.internal",
                   "severity=warning team=platform cluster=prod-eu-1",
                   "summary: Node has disk pressure for more than 5 minutes"] +
                  [f"evicted: pod/{rng.choice(['search', 'web', 'batch'])}-{rng.getrandbits(24):06x} "
                   f"(ephemeral-storage {rng.randint(1, 9)}Gi)" for _ in range(12)]))
tool("kubectl", {"cmd": "kubectl describe node ip-10-4-17-22.eu-central-1.compute.internal"},
     "Name: ip-10-4-17-22.eu-central-1.compute.internal\nConditions:\n  DiskPressure   True   KubeletHasDiskPressure\n"
     + "\n".join(f"  Normal  Evicted  pod/{rng.choice(['search', 'web', 'batch', 'cron'])}-{rng.getrandbits(24):06x} "
                 f"The node was low on resource: ephemeral-storage." for _ in range(70)))
A("ip-10-4-17-22 is evicting pods for low ephemeral storage. I'll look at what fills the disk.")

turn("node-disk")
U("Go.")
du = "\n".join(f"{rng.randint(1, 900)}M\t/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots/{rng.randint(100, 9999)}"
               for _ in range(150))
tool("shell", {"host": "ip-10-4-17-22", "cmd": "df -h / && du -xsh /var/lib/containerd/*/* | sort -h | tail -150"},
     f"Filesystem      Size  Used Avail Use% Mounted on\n/dev/nvme0n1p1  100G   {fact('94G', 'tool')}  6.0G  94% /\n" + du)
A(f"The root disk is at 94G of 100G, almost all in containerd snapshots from old images. "
  f"I propose {fact('crictl rmi --prune', 'message')} on that node; it only removes unused images.")

turn("node-disk")
U("Do it.")
tool("shell", {"host": "ip-10-4-17-22", "cmd": "crictl rmi --prune && df -h /"},
     "\n".join(f"Deleted: sha256:{rng.getrandbits(256):064x}" for _ in range(90)) +
     "\nFilesystem      Size  Used Avail Use% Mounted on\n/dev/nvme0n1p1  100G   41G   59G  41% /")
A("Pruned 90 unused images; the disk is at 41% and the DiskPressure condition should clear within "
  "a minute.")

turn("node-disk")
U(f"Why did it fill up in the first place? The image GC threshold should catch that.")
tool("shell", {"host": "ip-10-4-17-22", "cmd": "cat /etc/kubernetes/kubelet/config.json"},
     json.dumps({"kind": "KubeletConfiguration", "imageGCHighThresholdPercent": 100,
                 "imageGCLowThresholdPercent": 95, "evictionHard": {"nodefs.available": "5%"},
                 "featureGates": {f"Gate{i}": bool(i % 2) for i in range(60)}}, indent=2))
A(f"On this node imageGCHighThresholdPercent is 100, so image GC never runs before eviction does. "
  f"The fleet default is 85. This node came from the old launch template {fact('lt-0b7e4c2d9f1a', 'message')}.")

turn("node-disk")
U("Write a ticket to fix the launch template, I'll file it.")
A(f"Draft ticket: \"Set imageGCHighThresholdPercent=85 in launch template lt-0b7e4c2d9f1a\" - nodes "
  f"built from it never garbage-collect images and hit DiskPressure (seen on ip-10-4-17-22 tonight).")

# --- 5. CI pipeline ---------------------------------------------------------------
turn("ci-flaky")
U(f"Unrelated, but the frontend team left a note: {fact('build-frontend #4471', 'message')} failed again "
  f"and they think the runners are broken. Can you look?",
  paste="From: Jana (frontend)\nbuild-frontend #4471 failed in the install step again, third time today.\n"
        "It passes when we retry, so we think one of the runners is broken. Could someone take the "
        "broken runner out of the pool? We have a release at 10:00 and need green builds.\n"
        + "\n".join(f"#{4471 - i}  {rng.choice(['passed', 'passed', 'failed'])}  {rng.randint(4, 19)}m  runner-ci-{rng.randint(1, 9)}"
                     for i in range(15)))
tool("logs", {"ci": "build-frontend", "run": 4471},
     dockerfile_like(80) + "\n" + app_log("runner", 160, level_mix=("INFO",), inserts=[
         (120, "npm ERR! code ETIMEDOUT"),
         (121, f"npm ERR! network request to http://{fact('nexus.internal:8081', 'tool')}/repository/npm/react-dom failed, reason: connect ETIMEDOUT 10.4.9.31:8081"),
     ]))
A("The build failed fetching react-dom from the mirror: npm ERR! code ETIMEDOUT against "
  "nexus.internal:8081. The runner itself is fine.")

turn("ci-flaky")
U("Is nexus down?")
tool("shell", {"cmd": "curl -sS -m 5 -o /dev/null -w '%{http_code} %{time_total}\\n' http://nexus.internal:8081/service/rest/v1/status; "
                      "kubectl -n tools top pod -l app=nexus"},
     "200 4.912\n" + "\n".join(f"nexus-{i}   {rng.randint(1900, 3900)}m   {rng.randint(7000, 7990)}Mi" for i in range(3)) +
     "\n" + metrics_dump("nexus_jvm", 140, inserts=[(70, "nexus_jvm_gc_pause_seconds_max 3.81")]))
A("Nexus answers, but in 4.9 s, and its JVM has GC pauses of 3.81 s with memory near its limit. "
  "Requests over 5 s time out in npm.")

turn("ci-flaky")
U(f"They also asked to pin Node. What do we run?")
tool("shell", {"cmd": "grep -rn 'node-version' .github/workflows/"},
     "\n".join(f".github/workflows/{w}.yml:{rng.randint(10, 90)}:          node-version: '{v}'" for w, v in
               [("frontend", "20.x"), ("storybook", "20.x"), ("e2e", "20.x"), ("lint", "lts/*")] * 10))
A("Every workflow uses node-version '20.x' or 'lts/*', so the runtime changes whenever a new minor ships.")

turn("ci-flaky")
U(f"Decision: pin {fact('Node 20.11.1', 'message')} in all workflows, and raise the npm fetch timeout "
  f"to {fact('120000 ms', 'message')}. Prepare the change, don't merge.")
A("Prepared a branch ci/pin-node-20.11.1: node-version '20.11.1' in the four workflows and "
  "fetch-timeout=120000 in .npmrc. Not merged; it needs the frontend team's review.")

# --- 6. Kafka consumer lag ---------------------------------------------------------
turn("kafka-lag")
U(f"Billing says invoices are delayed. The consumer group is {fact('invoice-writer', 'message')} on "
  f"topic {fact('orders.v2', 'message')}.",
  paste="Billing ops: invoices for orders placed after 01:30 UTC are not being generated. "
        "Roughly one in twenty customers is affected, all in the EU region. Finance closes the "
        "day at 06:00 UTC, so we need the backlog cleared before then.\n"
        + "\n".join(f"order {rng.randint(10 ** 7, 10 ** 8)}  placed 01:{rng.randint(30, 59)}  invoice: missing"
                     for _ in range(14)))
rows = [(p, rng.randint(10 ** 6, 9 * 10 ** 6), rng.randint(10 ** 6, 9 * 10 ** 6), rng.randint(0, 40),
         f"invoice-writer-{rng.randint(0, 5)}") for p in range(24)]
rows[7] = (7, 8811021, 7609921, fact("1201100", 'tool'), "invoice-writer-3")
tool("shell", {"cmd": "kafka-consumer-groups.sh --bootstrap-server kafka-1:9092 --describe --group invoice-writer"},
     table(["PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID"], rows))
A("Only partition 7 is behind: lag 1201100 messages, consumed by invoice-writer-3. The other 23 "
  "partitions are at a lag under 40.")

turn("kafka-lag")
U("What is invoice-writer-3 doing?")
tool("logs", {"service": "invoice-writer", "pod": "invoice-writer-3", "since": "30m"},
     app_log("invoice-writer", 240, inserts=[
         (40, f"{ts(2, 5, 1)} ERROR invoice-writer poison message at orders.v2/7 offset 7609921: "
              f"json: cannot unmarshal string into Go struct field Order.total_cents of type int64"),
         (41, f"{ts(2, 5, 1)} WARN  invoice-writer retrying offset 7609921 (attempt 4812)"),
     ]))
A("invoice-writer-3 is stuck on a poison message at orders.v2/7 offset 7609921: total_cents is a "
  "string in that record. It retries forever instead of dead-lettering it.")

turn("kafka-lag")
U(f"We decided: skip that one offset and send it to the dead-letter topic "
  f"{fact('orders.v2.dlq', 'message')} by hand. Billing's contact {fact('Kofi Mensah', 'message')} "
  "agreed on the phone.")
tool("shell", {"cmd": "kcat -b kafka-1:9092 -C -t orders.v2 -p 7 -o 7609921 -c 1 | kcat -b kafka-1:9092 -P -t orders.v2.dlq && "
                      "kafka-consumer-groups.sh --bootstrap-server kafka-1:9092 --group invoice-writer --topic orders.v2:7 --reset-offsets --to-offset 7609922 --execute"},
     "\n".join(f"% Reached end of topic orders.v2 [7] at offset {7609922 + i}" for i in range(30)) +
     "\nGROUP                          TOPIC                          PARTITION  NEW-OFFSET\ninvoice-writer                 orders.v2                      7          7609922")
A("Copied offset 7609921 to orders.v2.dlq and moved invoice-writer past it to 7609922, as agreed "
  "with Kofi Mensah. Partition 7 is consuming again.")

turn("kafka-lag")
U("How fast is it draining?")
tool("metrics", {"query": "kafka_consumergroup_lag{group='invoice-writer',partition='7'}"},
     metrics_dump("kafka_consumergroup", 200, inserts=[(100, "# lag(partition 7): 1201100 -> 640233 in 10m")]))
A(f"About 56,000 messages a minute: the backlog should be gone in roughly {fact('12 minutes', 'message')}.")

# --- 7. DNS ---------------------------------------------------------------------------
turn("dns")
U("Search service latency went up a bit, and someone mentioned DNS. Can you check CoreDNS?",
  paste="\n".join(f"search-api p99 {h:02d}:00  {rng.randint(180, 420)} ms" for h in range(0, 8)))
tool("metrics", {"query": "sum by (rcode) (rate(coredns_dns_responses_total[10m]))"},
     metrics_dump("coredns", 240, inserts=[(33, "coredns_dns_responses_rate{rcode=\"NXDOMAIN\"} 0.38 # share of all responses")]))
A(f"{fact('38% of CoreDNS answers are NXDOMAIN', 'message')}. That pattern usually comes from the search "
  "path: short names are tried against every search domain first.")

turn("dns")
U("Look at a search pod's resolv.conf.")
tool("kubectl", {"cmd": "kubectl -n search exec deploy/search-api -- cat /etc/resolv.conf"},
     "search search.svc.cluster.local svc.cluster.local cluster.local eu-central-1.compute.internal\n"
     f"nameserver 172.20.0.10\noptions {fact('ndots:5', 'tool')}\n")
A("options ndots:5 with four search domains: every lookup of an external name like "
  "api.stripe.com makes up to four NXDOMAIN queries first.")

turn("dns")
U(f"Set {fact('ndots to 2', 'message')} for search-api through dnsConfig, canary first on one replica.")
tool("kubectl", {"cmd": "kubectl -n search patch deploy search-api-canary --type merge -p '{\"spec\":{\"template\":{\"spec\":{\"dnsConfig\":{\"options\":[{\"name\":\"ndots\",\"value\":\"2\"}]}}}}}'"},
     "deployment.apps/search-api-canary patched\n" + "\n".join(
         f"Waiting for deployment \"search-api-canary\" rollout to finish: {i} of 1 updated replicas are available..." for i in range(1))
     + "\ndeployment \"search-api-canary\" successfully rolled out")
A("The canary search-api-canary runs with ndots:2. I'll compare its DNS query rate with the rest.")

turn("dns")
U("And?")
tool("metrics", {"query": "rate(coredns_dns_requests_total{client=~'search-api.*'}[10m])"},
     metrics_dump("coredns_client", 160, inserts=[(80, "# canary: 41 qps, others: 186 qps per pod")]))
A("The canary sends 41 queries per second against 186 for the other pods, and its p99 to Stripe "
  "dropped by 30 ms. Worth rolling out to all replicas during the day.")

# --- 8. Backups --------------------------------------------------------------------------
turn("backups")
U(f"Quarterly chore: verify last night's backup restore. The bucket is {fact('s3://nw-backups-eu', 'message')}.")
tool("shell", {"cmd": "aws s3 ls s3://nw-backups-eu/orders/2026-11-20/ --human-readable"},
     "\n".join(f"2026-11-20 23:{rng.randint(10, 59)}:{rng.randint(10, 59)}  {rng.randint(100, 999)}.{rng.randint(0, 9)} MiB "
               f"orders/2026-11-20/base_{rng.getrandbits(40):010x}.tar.zst" for _ in range(120)) +
     f"\n2026-11-21 00:02:11  {fact('17.4 GiB', 'tool')} orders/2026-11-20/base.tar.zst")
A("The orders base backup from 2026-11-20 is there: base.tar.zst, 17.4 GiB, written at 00:02 UTC.")

turn("backups")
U("Restore it into the scratch cluster and time it.")
tool("shell", {"cmd": "/srv/tools/restore-check --source s3://nw-backups-eu/orders/2026-11-20/ --target pg-scratch-1"},
     "\n".join(f"[restore] {ts(2, 30 + i // 60, i % 60)} fetched chunk {i}/180" for i in range(180)) +
     "\n[restore] base restored, replaying WAL to 2026-11-21 00:00:00+00\n[restore] done in 47m12s, "
     "row count check orders=48211934 ok")
A(f"The restore finished in {fact('47 minutes', 'message')} and the row count check passed "
  f"(orders = {fact('48211934', 'message')} rows).")

turn("backups")
U(f"Our target RTO is {fact('60 minutes', 'message')}, so fine. Who signs the quarterly check?")
A(f"The backup policy names {fact('Marcus Okafor', 'message')} as the approver; I'll put the 47-minute "
  "restore and the row count in the check form for him.")

turn("backups")
U("Also check how much WAL we keep, for the RPO.")
tool("shell", {"cmd": "aws s3 ls s3://nw-backups-eu/orders/wal/ | tail -200"},
     "\n".join(f"2026-11-21 0{rng.randint(0, 2)}:{rng.randint(10, 59)}:{rng.randint(10, 59)}   16777216 "
               f"000000010000003A000000{i:02X}" for i in range(200)))
A(f"WAL segments are shipped every few minutes with none missing since midnight, so the RPO of "
  f"{fact('15 minutes', 'message')} holds.")

# --- 9. Capacity ---------------------------------------------------------------------------
turn("capacity")
U("Finance wants tonight's number of general-purpose nodes and the monthly cost, for the reservation plan.")
tool("kubectl", {"cmd": "kubectl get nodes -L node.kubernetes.io/instance-type -l pool=general"},
     "\n".join(f"ip-10-4-{rng.randint(1, 60)}-{rng.randint(2, 250)}   Ready    <none>   {rng.randint(2, 90)}d   "
               f"v1.29.{rng.randint(1, 6)}   {'m6i.2xlarge'}" for _ in range(31)))
A(f"There are {fact('31 nodes', 'message')} in the general pool, all {fact('m6i.2xlarge', 'message')}.")

turn("capacity")
U("And the cost?")
tool("shell", {"cmd": "/srv/tools/cost-report --pool general --month 2026-11"},
     table(["day", "nodes", "on_demand_usd"], [(f"2026-11-{d:02d}", 31 - d % 3, f"{590 + rng.randint(0, 40)}.{rng.randint(0, 99):02d}")
                                               for d in range(1, 22)]) +
     f"\nprojected month: {fact('$18,400', 'tool')}")
A("The general pool is projected at $18,400 for November, all on demand.")

turn("capacity")
U(f"Recommend how many to reserve.")
A(f"The pool never went below 28 nodes this month, so reserving {fact('24 instances', 'message')} "
  "for a year covers the baseline with margin; at the current discount that saves roughly a "
  "third of their cost.")

# --- 10. Search relevance incident (long output, few facts) --------------------------------
turn("search-index")
U(f"Support escalated {fact('CS-7781', 'message')}: product search returns nothing for German umlauts, "
  "e.g. 'Küchenwaage'.",
  paste=f"Ticket CS-7781 - priority high - customer {fact('Gerda Hoffmann', 'message')}\n"
        "Searching for 'Küchenwaage', 'Größe' or 'Bügeleisen' shows no results since Thursday. "
        "Searching 'Kuchenwaage' without the umlaut shows the products. The customer says the "
        "app and the website behave the same way. Several similar complaints came in today.\n"
        "Agent note: reproduced on de.northwind.shop, both logged in and logged out.")
tool("shell", {"cmd": "curl -s 'http://search-api.search.svc:8080/v1/search?q=K%C3%BCchenwaage&debug=1'"},
     json.dumps({"hits": [], "debug": {"analyzer": fact("standard_ascii", 'tool'),
                                       "tokens": ["kuchenwaage"], "index": "products-2026-11-19",
                                       "shards": [{"id": i, "took_ms": rng.randint(1, 40)} for i in range(120)]}}, ensure_ascii=False))
A("The query is analyzed with standard_ascii, which folds ü to u, while the index products-2026-11-19 "
  "was built with the German analyzer, so 'kuchenwaage' matches nothing.")

turn("search-index")
U("When did the analyzer change?")
tool("shell", {"cmd": "git -C /srv/search-config log --oneline -n 60 -- analyzers/"},
     "\n".join(f"{rng.getrandbits(28):07x} {rng.choice(['tune', 'fix', 'bump', 'chore'])}: "
               f"{rng.choice(['synonyms', 'stopwords', 'boosts', 'field mapping', 'replicas'])}" for _ in range(59)) +
     f"\n{fact('9f3c2a1', 'tool')} switch query analyzer to standard_ascii (Nov 19, Ana Costa)")
A("Commit 9f3c2a1 on Nov 19 by Ana Costa switched the query analyzer to standard_ascii; the "
  "index kept the German one.")

turn("search-index")
U("Revert it?")
A(f"Reverting 9f3c2a1 restores matching for umlauts. It only changes the query side, so no reindex "
  f"is needed; but search-api pods must reload config, which is a rolling restart in the search "
  f"namespace, not payments, so the freeze rule does not block it.")

turn("search-index")
U(f"Go ahead with the revert and the rolling restart of search-api.")
tool("shell", {"cmd": "git -C /srv/search-config revert --no-edit 9f3c2a1 && git -C /srv/search-config push && "
                      "kubectl -n search rollout restart deploy/search-api && kubectl -n search rollout status deploy/search-api"},
     "[main 5b1d0e7] Revert \"switch query analyzer to standard_ascii\"\n" +
     "\n".join(f"Waiting for deployment \"search-api\" rollout to finish: {i} of 12 updated replicas are available..." for i in range(12)) +
     "\ndeployment \"search-api\" successfully rolled out")
A("Reverted (commit 5b1d0e7) and rolled search-api; 'Küchenwaage' now returns 37 hits. I'll update "
  "CS-7781.")

# --- 11. A leaking worker -------------------------------------------------------------------
EXPLAIN["memory-leak"] = [
    "A sawtooth that never returns to its baseline is the classic shape of a leak rather than a cache.",
    "The worker is written in Go, so the heap profile from pprof tells us which call sites keep memory alive.",
    "Raising the memory limit would only move the next OOM kill a few hours later.",
    "The leak grows with the number of jobs processed, not with time, which points at per-job state.",
    "Goroutine counts are a good second signal: a leak of goroutines drags their stacks and buffers with it.",
    "The fix itself belongs to the owning team, but we can make tonight quieter without touching the code.",
]
HOSTS["memory-leak"] = ["thumbnailer", "the image queue", "the object store", "the job scheduler"]
turn("memory-leak")
U(f"Another page: the {fact('thumbnailer', 'message')} workers get OOMKilled every couple of hours. "
  "Is it the same Redis thing?")
tool("kubectl", {"cmd": "kubectl -n media get pods -l app=thumbnailer"},
     kubectl_pods("media", "thumbnailer", 18, special=[
         (3, "thumbnailer-5d8c7f9b4-q7wlm          0/1     OOMKilled   9 (4m ago)    3d")]))
A("No, this one is unrelated to Redis: thumbnailer-5d8c7f9b4-q7wlm has been OOMKilled 9 times in three "
  "days. The other replicas restart too, just less often.")

turn("memory-leak")
U("Show me its memory over the last day.")
tool("metrics", {"query": "container_memory_working_set_bytes{pod=~'thumbnailer.*'}"},
     metrics_dump("thumbnailer", 260, inserts=[(130, "# working set: 0.4 GiB after restart, +210 MiB per 1000 jobs, limit 3 GiB")]))
A(f"Memory grows by about {fact('210 MiB per 1000 jobs', 'message')} and never drops back, until the "
  "pod hits its 3 GiB limit and is killed.")

turn("memory-leak")
U("Can you get a heap profile?")
tool("shell", {"cmd": "kubectl -n media port-forward pod/thumbnailer-5d8c7f9b4-q7wlm 6060 & go tool pprof -top http://localhost:6060/debug/pprof/heap"},
     "Showing nodes accounting for 2.41GB, 97.2% of 2.48GB total\n      flat  flat%   sum%        cum   cum%\n" +
     f"    1.87GB 75.40% 75.40%     1.87GB 75.40%  {fact('image/jpeg.(*decoder).makeImg', 'tool')}\n" +
     "\n".join(f"    {rng.randint(1, 90)}MB  {rng.random() * 3:.2f}%  {rng.random() * 99:.2f}%   {rng.randint(1, 90)}MB  "
               f"{rng.random() * 3:.2f}%  {rng.choice(['bytes.growSlice', 'runtime.malg', 'bufio.NewReaderSize', 'net/http.(*conn).serve', 'encoding/json.(*decodeState).object'])}"
               for _ in range(90)))
A("Three quarters of the heap sits in image/jpeg.(*decoder).makeImg: decoded images are kept alive "
  "after the thumbnail is written, most likely by a cache keyed by job id that is never pruned.")

turn("memory-leak")
U(f"Mitigation for tonight: set {fact('GOMEMLIMIT=2500MiB', 'message')} and let the job scheduler "
  f"recycle workers after {fact('5000 jobs', 'message')}. File the leak for the media team, owner "
  f"{fact('Hiroshi Tanaka', 'message')}.")
tool("kubectl", {"cmd": "kubectl -n media set env deploy/thumbnailer GOMEMLIMIT=2500MiB MAX_JOBS_PER_WORKER=5000"},
     "deployment.apps/thumbnailer env updated\n" +
     "\n".join(f"Waiting for deployment \"thumbnailer\" rollout to finish: {i} of 18 updated replicas are available..." for i in range(18)) +
     "\ndeployment \"thumbnailer\" successfully rolled out")
A("Rolled out GOMEMLIMIT=2500MiB and MAX_JOBS_PER_WORKER=5000 to thumbnailer; the media namespace is not "
  "under the freeze. Ticket drafted for Hiroshi Tanaka with the heap profile attached.")

turn("memory-leak")
U("Did it help?")
tool("metrics", {"query": "increase(kube_pod_container_status_restarts_total{pod=~'thumbnailer.*',reason='OOMKilled'}[1h])"},
     metrics_dump("kube_pod", 200, inserts=[(100, "# OOMKilled restarts, last hour: 0 (previous hour: 6)")]))
A("No OOM kills in the last hour, against 6 in the hour before. Workers now recycle before they get "
  "near the limit.")

# --- 12. Access request ------------------------------------------------------------------------
EXPLAIN["access"] = [
    "Production database access goes through the break-glass role, which is logged and expires by itself.",
    "Granting access directly to a personal account would bypass the audit trail, so I would avoid that.",
    "The request should name the ticket it serves, so that the review can match access to work.",
    "Read-only access covers most investigations; write access needs a second approver.",
    "The role's session lasts at most four hours, after which it has to be requested again.",
]
HOSTS["access"] = ["the IAM console", "the access broker", "the audit log", "the orders replica"]
turn("access")
U(f"{fact('Elif Demir', 'message')} from the data team asks for read access to the orders replica to "
  "check the invoice gap. Can we give it to her now?")
A(f"Yes, through the break-glass role {fact('db-orders-readonly', 'message')}, which is read-only and "
  "expires by itself. I would not add her user to the database directly.")

turn("access")
U(f"Do it for {fact('4 hours', 'message')}, tied to the billing incident.")
tool("shell", {"cmd": "access-broker grant --role db-orders-readonly --user elif.demir --ttl 4h --reason 'invoice gap, billing incident'"},
     "\n".join(f"[broker] policy check {i}: ok" for i in range(40)) +
     f"\ngrant {fact('AG-55190', 'tool')} created: elif.demir -> db-orders-readonly, expires 2026-11-21T07:58:00Z")
A("Granted as AG-55190: elif.demir has db-orders-readonly for 4 hours, expiring at 07:58 UTC, with "
  "the billing incident as the reason.")

turn("access")
U("Tell me when she has logged in, the security team likes to know.")
tool("logs", {"service": "access-broker", "since": "30m", "grep": "elif.demir"},
     app_log("access-broker", 120, inserts=[(60, f"{ts(4, 6, 30)} INFO  access-broker session opened: elif.demir role=db-orders-readonly grant=AG-55190 source=10.8.3.44")]))
A("Elif opened her session at 04:06 UTC from 10.8.3.44 under grant AG-55190. I posted that in the "
  "security channel.")

turn("access")
U("Good. Anything else we should clean up from the night's access?")
A("Only the port-forward I opened for the heap profile, which I have closed; the grant for Elif "
  "expires by itself at 07:58 UTC.")

# --- 11. Payments again: the rule is tested ---------------------------------------------
turn("checkout-latency")
U("It's 07:40 CET. pay-api pods are using a lot of memory after the Redis change, should we restart them?",
  paste="\n".join(f"pay-api-{rng.getrandbits(32):08x}   memory {rng.randint(1500, 1990)}Mi / 2048Mi" for _ in range(10)))
tool("kubectl", {"cmd": "kubectl -n payments top pods -l app=pay-api"},
     "\n".join(f"pay-api-{rng.getrandbits(32):08x}   {rng.randint(200, 900)}m   {rng.randint(900, 1900)}Mi" for _ in range(24)))
A("Memory is between 900 and 1900 Mi of a 2 Gi limit, high but stable. A restart would finish "
  "after 08:00 CET, inside the freeze, so per your rule I won't restart anything in payments "
  "without paging you; I'd rather watch it until the freeze ends.")

turn("checkout-latency")
U("Agreed, leave it. What was the Redis memory setting we chose again, and is it holding?")
tool("shell", {"cmd": "redis-cli -h redis-pay-01.payments.svc INFO memory"},
     "used_memory_human:4.61G\nmaxmemory_human:6.00G\nmaxmemory_policy:allkeys-lru\n" +
     "\n".join(f"mem_stat_{i}:{rng.randint(0, 10 ** 6)}" for i in range(120)))
A("We set maxmemory to 6 GB with allkeys-lru; Redis uses 4.61G of 6.00G, with evictions working "
  "as intended.")

# --- 12. Handoff -----------------------------------------------------------------------------
turn("handoff")
U(f"Start the handoff notes. The postmortem for INC-20931 is due {fact('Friday Nov 27', 'message')}, "
  f"owner {fact('Lena Fischer', 'message')}.")
A("Handoff started. INC-20931: postmortem due Friday Nov 27, owner Lena Fischer.")

turn("handoff")
U("What's still open from tonight?")
A("Open items: the IAM policy for cert-manager (Marta from security), the launch template ticket, "
  "the CI branch waiting for review, rolling ndots:2 out to all search-api replicas, and Priya's "
  "team moving the nightly report off the replica.")

turn("handoff")
U(f"Add that the day shift lead is {fact('Sven Lindqvist', 'message')} and the bridge channel is "
  f"{fact('#ops-bridge-eu', 'message')}.")
A("Added: day shift lead Sven Lindqvist, bridge channel #ops-bridge-eu.")

turn("handoff")
U(f"Last thing: grep the pay-api logs for any other errors tonight, so the postmortem has them. "
  f"The postmortem doc lives at {fact('docs/postmortems/2026/INC-20931.md', 'message')}.")
tool("logs", {"service": "pay-api", "since": "8h", "grep": "ERROR"},
     app_log("pay-api", 300, level_mix=("ERROR",), inserts=[
         (12, f"{ts(1, 11, 0)} ERROR pay-api upstream ledger timeout after 2000ms (attempt 3)"),
     ]))
A("Besides the Redis OOM errors, the logs show ledger timeouts after 2000ms between 01:11 and "
  "01:16 UTC, which match the latency spike. I'll add both to the postmortem notes.")

turn("handoff")
U("Thanks. Anything I should double-check before I hand over?")
A("Double-check that p99 stays near 212 ms after the morning peak, that db-orders-02 stays at zero "
  "lag, and that nobody restarts payments pods during the freeze without paging you.")

turn("handoff")
U("Summarize the night in five bullet points for Sven.")
A("1) INC-20931: Redis full, raised to 6 GB with allkeys-lru, p99 back to 212 ms. 2) db-orders-02 "
  "lag fixed with max_wal_size = 16GB. 3) Cert for api.northwind.io expires Nov 30; IAM fix pending. "
  "4) Node disk and CI mirror issues mitigated; tickets drafted. 5) Kafka poison message skipped to "
  "orders.v2.dlq; search umlaut bug reverted.")

# ---------------------------------------------------------------------------
INSTRUCTION = ("never restart anything in the payments namespace during the EU business-hours "
               "freeze (08:00-18:00 CET) without paging me first")


def main():
    text = "\n".join(json.dumps(i["content"]) for i in items)
    for f in facts:
        assert sum(1 for i in items if f["text"] in i["content"]) >= 1, f
    with open(os.path.join(HERE, "oncall.jsonl"), "w") as out:
        out.write(json.dumps({"system_prompt": SYSTEM}) + "\n")
        for i in items:
            out.write(json.dumps(i, ensure_ascii=False) + "\n")
    with open(os.path.join(HERE, "oncall_facts.jsonl"), "w") as out:
        for f in facts:
            out.write(json.dumps(f, ensure_ascii=False) + "\n")
    with open(os.path.join(HERE, "oncall_probes.jsonl"), "w") as out:
        out.write(json.dumps({"kind": "instruction", "turn": 2, "text": INSTRUCTION}) + "\n")
        for t in (20, 40, turn_no):
            out.write(json.dumps({"kind": "facts", "turn": t}) + "\n")
    topics = sorted({f["topic"] for f in facts})
    print(f"{turn_no} turns, {len(items)} items, {call_no} tool calls, {len(facts)} facts "
          f"({sum(f['source'] == 'message' for f in facts)} in messages), {len(topics)} topics, "
          f"{len(text)} bytes")


main()
