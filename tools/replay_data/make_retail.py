#!/usr/bin/env python3
"""Writes the Pennock & Hale store-systems replay conversation used by tools/replay.

Pennock & Hale, a home-and-garden chain, is moving its stores from the
on-premises StoreLink 6 platform (a SQL Server cluster in the Leeds data
centre, a Windows back-office server in every store) to Tillwise, a hosted
point-of-sale and inventory platform. Around the move sit the price-file
distributor (pricecast, one config per store group), the inventory sync
workers that carry StoreLink stock deltas to Tillwise (invsync, one worker
per region), the loyalty and payments gateways, the distribution centres'
replenishment jobs in the scheduler (schedctl), the nightly sales
reconciliation between the two platforms (recon), the store network (IPsec
tunnels from the store routers to the hub firewall, store switches) and a
cutover controller that moves stores in waves. A store-systems engineer
spends a long day with an assistant: the pilot wave's data and agent
problems, the price feeds of the coming waves, sync backlogs, gateway
settings, a failed replenishment run, Monday's reconciliations, flaky store
links, the cutover rehearsals, and then the evening's cutover of wave 2.

How the conversation is built:
  * most turns carry one or two tool calls with long outputs that look
    like the real thing (PowerShell and cmd output from store servers,
    Windows event logs, CSV exports, sqlcmd and psql results, INI, YAML and
    JSON configs read with line numbers, scheduler listings and run
    histories, tunnel and interface tables, log tails, diffs, reconciliation
    reports, curl responses);
  * the line holding a planted value never names what it belongs to, and
    neither does the rest of that output: the wave, region, store, gateway
    or distribution centre is named only in the call's arguments (a path, a
    host, a query, a flag) and in the user's message of that turn;
  * the same keys and summary lines recur for the other waves, regions,
    stores and services with other values (every store group's distributor
    config has the same keys, every reconciliation ends with the same
    totals, every dry run ends with the same summary), so a question can
    only be answered from the one output its subject's call produced;
  * the assistant does not repeat tool values in its replies, and its
    answers to recall questions stay vague;
  * recall questions come 40 or more turns after the fact.

Outputs (beside this file):
  retail.jsonl                 system prompt, then one item per line
  retail_facts.jsonl           id, turn, topic, source, text
  retail_probes.jsonl          instructions, fact counts, recall questions
  retail_dev_questions.jsonl   more questions in other words, not asked in
                               the conversation (fact, turn, question)

Deterministic (seeded, no clock, standard library only). Re-run after editing:
  python3 tools/replay_data/make_retail.py
"""

import datetime
import difflib
import json
import os
import random
import re

rng = random.Random(20260512)
HERE = os.path.dirname(os.path.abspath(__file__))

SYSTEM = ("You are a store-systems assistant for Pennock's retail estate during its move from StoreLink 6 "
          "(on-premises SQL Server in the Leeds data centre, a Windows back-office server in every store) to the "
          "hosted Tillwise point-of-sale and inventory platform. Around it: the pricecast price-file distributor "
          "(configs under pricecast/conf/), the invsync stock-sync workers (invsync/workers/), the loyalty and "
          "payments gateways (gateways/), the replenishment and batch jobs in the scheduler (scheduler/jobs/, "
          "schedctl), the nightly sales reconciliation (recon), the store network (store routers and switches, the "
          "hub firewall fw-hub-lds01, netcfg/) and the cutover controller that moves stores in waves (cutover/). You "
          "can read files, run shell commands on the tools host (schedctl, pricecast, invsyncctl, recon, cutover, "
          "netexec, curl), run PowerShell against store servers, query StoreLink with sqlcmd and Tillwise's "
          "reporting replica with psql, and apply patches. Quote values exactly as the tools return them, and say "
          "so when you are unsure.")

RULES = [
    (2, "never push a price file to any store between 07:00 and 22:00 store local time, whatever the schedule in "
        "the tool says"),
    (3, "nobody restarts a store's back-office server or its till agents while that store is trading; it waits for "
        "the overnight window and the store manager hears about it first"),
    (4, "no wave cuts over until finance has signed off the previous night's sales reconciliation for every store "
        "in it"),
]

TODAY = datetime.date(2026, 5, 12)

# ---------------------------------------------------------------------------
# Planted values: every one is drawn before any output is written, so that
# no noise line anywhere can hold one of them.

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


def fl(key, value, width):
    """One line of PowerShell's Format-List."""
    return f"{key.ljust(width)} : {value}"


def xrow(key, value, width):
    """One line of psql's expanded display."""
    return f"{key.ljust(width)} | {value}"


def dots(key, value):
    """One totals line of a reconciliation report."""
    return f"{key} {'.' * (22 - len(key))} {value}"


# Values noise lines use for keys that planted lines also use.
NOISE = {
    "stagger_seconds": [10, 15, 20, 30, 40, 60, 90],
    "max_parallel_stores": [4, 6, 8, 10, 12, 16],
    "chunk_kb": [256, 512, 1024, 2048],
    "retry_backoff_s": [10, 15, 20, 30, 60],
    "retry_limit": [3, 4, 5, 6],
    "delta_cutoff": ["02:00", "02:15", "02:30", "03:00", "03:30"],
    "poll_interval_s": [30, 60, 90, 120, 180, 300],
    "max_batch_rows": [500, 1000, 2000, 2500, 5000],
    "RequestTimeoutMs": [2000, 2500, 3000, 5000, 8000],
    "CircuitBreakerThreshold": [5, 10, 20, 25],
    "order_cutoff": ["19:30", "20:00", "20:30", "21:00", "22:30"],
    "tunnel_mtu": [1400, 1420, 1438],
}


def nz(key):
    return rng.choice(NOISE[key])


# psql \x key sets (the widest key sets the padding, as psql does).
KEYS_DELTA = ["unapplied_deltas", "oldest_pending", "newest_pending", "stores_affected", "skus_affected",
              "dead_lettered", "checked_at"]
KEYS_POINTS = ["accounts_compared", "mismatched_accounts", "points_diff_total", "max_abs_diff", "stores_involved",
               "checked_at"]
# PowerShell Format-List widths: the longest property name of the object.
REG_KEYS = ["AgentVersion", "Channel", "UpdateRing", "InstallDate", "InstallPath", "ConfigEndpoint", "TenantId",
            "LastPolicySync", "LastHeartbeatUtc", "LanesManaged", "PendingReboot"]
TASK_KEYS = ["TaskName", "TaskPath", "LastRunTime", "LastTaskResult", "NextRunTime", "NumberOfMissedRuns"]
TEST_KEYS = ["ComputerName", "RemoteAddress", "RemotePort", "NameResolutionResults", "MatchingIPsecRules",
             "NetworkIsolationContext", "IsAdmin", "InterfaceAlias", "SourceAddress", "NetRoute (NextHop)",
             "PingSucceeded", "PingReplyDetails (RTT)", "TcpTestSucceeded"]
W_REG = max(map(len, REG_KEYS))
W_TASK = max(map(len, TASK_KEYS))
W_TEST = max(map(len, TEST_KEYS))

P = {}  # label -> planted tool text
# price distribution, one config per store group (w2 .. w6)
P["W2a"] = unique(lambda: f"retry_backoff_s = {pick([25, 35, 45, 50])}")
P["W3a"] = unique(lambda: f"max_parallel_stores = {pick([5, 7, 9, 14])}")
P["W4a"] = unique(lambda: f"chunk_kb = {pick([384, 640, 768, 896])}")
P["W5a"] = unique(lambda: f"stagger_seconds = {pick([45, 75, 105, 135])}")
P["W6a"] = unique(lambda: f"delta_cutoff = {pick(['01:45', '02:35', '02:50', '03:10'])}")
P["W2b"] = unique(lambda: f"rejected_lines={rng.randint(121, 389)}")
P["W4b"] = unique(lambda: hexs(12))
P["W6b"] = unique(lambda: f"skipped_stores: {rng.randint(2, 4)}")
# cutover rehearsals
P["W2c"] = unique(lambda: f"rbk-{hexs(8)}")
P["W3b"] = unique(lambda: f"estimated offline window: 00:{rng.randint(41, 58)}")
P["W5b"] = unique(lambda: f"blocking checks: {rng.randint(3, 6)}")
# the pilot wave's migrated data
P["G1"] = unique(lambda: str(rng.randint(1150000, 1290000)))
# inventory sync workers
P["IM"] = unique(lambda: f"poll_interval_s: {pick([150, 210, 240, 270])}")
P["IS"] = unique(lambda: f"max_batch_rows: {pick([750, 1250, 1750, 1850])}")
P["IW"] = unique(lambda: f"backlog={rng.randint(41000, 79000)}")
P["IN"] = unique(lambda: xrow("unapplied_deltas", rng.randint(3100, 9800), max(map(len, KEYS_DELTA))))
# gateways
P["L1"] = unique(lambda: f'"RequestTimeoutMs": {pick([3500, 3800, 4200, 6500])}')
P["L2"] = unique(lambda: f'"queue_depth": {rng.randint(3100, 7900)}')
P["L3"] = unique(lambda: xrow("mismatched_accounts", rng.randint(210, 690), max(map(len, KEYS_POINTS))))
P["B1"] = unique(lambda: f'"CircuitBreakerThreshold": {pick([8, 12, 15, 18])}')
P["B2"] = unique(lambda: f'"p95_upstream_ms": {rng.randint(540, 980)}')
# replenishment
P["R1"] = unique(lambda: f'order_cutoff: "{pick(["20:40", "21:10", "21:40", "22:05"])}"')
P["R2"] = unique(lambda: str(rng.randint(7700000, 7799999)))
P["R3"] = unique(lambda: f"order lines written: {rng.randint(41000, 68000)}")
# reconciliation
P["C1"] = unique(lambda: dots("Net variance", f"{-rng.randint(15000, 48000) / 100:.2f}"))
P["C2"] = unique(lambda: dots("Unmatched tenders", rng.randint(23, 61)))
P["C3"] = unique(lambda: dots("Missing in target", rng.randint(90, 180)))
P["C4"] = unique(lambda: f"{rng.randint(2600, 4900)}.{rng.randint(10, 99)}")
# store network
P["N1"] = unique(lambda: f"ip mtu {pick([1360, 1376, 1380, 1392])}")
P["N2"] = unique(lambda: f"{rng.randint(3100, 6900)} CRC")
P["N3"] = unique(lambda: fl("PingReplyDetails (RTT)", f"{rng.randint(48, 97)} ms", W_TEST))
P["N4"] = unique(lambda: f"Number of failures: {rng.randint(150, 420)}")
# store servers and tills
P["T1"] = unique(lambda: fl("AgentVersion", f"4.{pick([10, 11])}.{rng.randint(2, 8)}", W_REG))
AGENT_CRASHES = rng.randint(5, 9)
P["T2"] = unique(lambda: f"It has done this {AGENT_CRASHES} time(s)")
P["T3"] = unique(lambda: fl("NumberOfMissedRuns", rng.randint(6, 14), W_TASK))

# The messages' facts.
M = {
    "name": unique(lambda: "Fenella Strachan"),
    "company": unique(lambda: "Pennock & Hale"),
    "ticket": unique(lambda: "CHG-58213"),
    "count": unique(lambda: "142 stores"),
    "pm": unique(lambda: "Ravi Castellanos"),
    "netlead": unique(lambda: "Bronagh Keely"),
    "finance": unique(lambda: "Idris Pemberton-Shaw"),
    "case": unique(lambda: "TW-771942"),
    "acquirer": unique(lambda: "Northbank Merchant Services"),
    "w3date": unique(lambda: "wave 3 goes live on the night of Tuesday 26 May"),
    "freeze": unique(lambda: "change freeze starts at 18:00 on Friday 12 June"),
}

# What each planted label belongs to, and the pattern that names it. The
# output holding the value must not match; the call or the user's turn must.
SUBJECT = {
    "W2": r"wave ?2\b|\bw2\b",
    "W3": r"wave ?3\b|\bw3\b",
    "W4": r"wave ?4\b|\bw4\b",
    "W5": r"wave ?5\b|\bw5\b",
    "W6": r"wave ?6\b|\bw6\b",
    "G": r"pilot|wave ?1\b",
    "IM": r"midlands",
    "IS": r"scotland|scottish",
    "IW": r"south[ -]?west",
    "IN": r"north[ -]?east",
    "L": r"loyalty|rewards",
    "B": r"paybridge|payments? gateway",
    "R1": r"avonmouth",
    "R2": r"livingston",
    "R3": r"doncaster",
    "C1": r"yorkshire",
    "C2": r"wales|welsh",
    "C3": r"scotland|scottish",
    "C4": r"south[ -]?east",
    "N1": r"0733|whitby",
    "N2": r"1052|perth",
    "N3": r"0418|cheltenham",
    "N4": r"0286|lichfield",
    "T1": r"0912|truro",
    "T2": r"0561|kendal",
    "T3": r"0340|ripon",
}


def subject_of(label):
    if label in SUBJECT:
        return SUBJECT[label]
    if label[:2] in SUBJECT:
        return SUBJECT[label[:2]]
    return SUBJECT[label[0]]


def clean(s):
    return not any(r in s for r in RESERVED)


def N(make):
    """A noise output or line: drawn again until it holds no planted value."""
    for _ in range(1000):
        s = make()
        if clean(s):
            return s
    raise RuntimeError("noise keeps hitting a planted value")


def fit(make, n, lo=1300, hi=8600):
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


def planted(make, labels):
    """An output meant to hold exactly `labels` and not to name their subjects: drawn again until it does."""
    for _ in range(1000):
        out = make()
        held = {l for l, v in P.items() if v in out} | {l for l, v in M.items() if v in out}
        if held == set(labels) and not any(re.search(subject_of(l), out, re.I) for l in labels):
            return out
    raise RuntimeError(f"cannot draw an output holding exactly {labels}")


def fitN(make, n, lo=1300, hi=8600):
    return fit(lambda k: N(lambda: make(k)), n, lo, hi)


def fitP(make, n, labels, lo=1300, hi=8600):
    return fit(lambda k: planted(lambda: make(k), labels), n, lo, hi)


# ---------------------------------------------------------------------------
# The estate (invented): 142 stores in ten regions, six cutover waves.

REGIONS = [
    ("North East", "northeast", ["Hexham", "Durham", "Morpeth", "Darlington", "Stockton", "Hartlepool", "Gateshead",
                                 "Sunderland", "Consett", "Alnwick", "Washington", "Bishop Auckland", "Cramlington"]),
    ("Yorkshire", "yorkshire", ["Whitby", "Ripon", "Harrogate", "Skipton", "Wakefield", "Halifax", "Huddersfield",
                                "Barnsley", "Rotherham", "Selby", "Beverley", "Scarborough", "Pontefract", "Keighley",
                                "Otley", "Thirsk"]),
    ("Scotland", "scotland", ["Stirling", "Edinburgh", "Glasgow", "Perth", "Dundee", "Aberdeen", "Inverness",
                              "Dunfermline", "Kirkcaldy", "Ayr", "Paisley", "Falkirk", "Dumfries", "Elgin",
                              "Musselburgh"]),
    ("North West", "northwest", ["Kendal", "Lancaster", "Preston", "Chorley", "Wigan", "Bolton", "Bury", "Stockport",
                                 "Macclesfield", "Warrington", "Southport", "Ormskirk", "Penrith", "Carlisle", "Crewe"]),
    ("Midlands", "midlands", ["Lichfield", "Tamworth", "Nuneaton", "Rugby", "Leamington", "Stratford", "Redditch",
                              "Kidderminster", "Worcester", "Hereford", "Ludlow", "Shrewsbury", "Telford", "Stafford",
                              "Burton", "Loughborough", "Melton Mowbray", "Market Harborough"]),
    ("Wales", "wales", ["Cardiff", "Newport", "Bridgend", "Swansea", "Carmarthen", "Aberystwyth", "Wrexham", "Mold",
                        "Llandudno", "Bangor", "Brecon", "Monmouth"]),
    ("South West", "southwest", ["Truro", "Cheltenham", "Exeter", "Taunton", "Yeovil", "Barnstaple", "Newton Abbot",
                                 "Plymouth", "Bath", "Chippenham", "Salisbury", "Dorchester", "Weymouth", "Stroud",
                                 "Gloucester"]),
    ("East Anglia", "eastanglia", ["Ipswich", "Norwich", "Bury St Edmunds", "Sudbury", "Colchester", "Chelmsford",
                                   "Kings Lynn", "Cambridge", "Ely", "Huntingdon", "Thetford", "Diss", "Lowestoft"]),
    ("London", "london", ["Croydon", "Bromley", "Kingston", "Richmond", "Enfield", "Harrow", "Ealing", "Romford",
                          "Sutton", "Wimbledon"]),
    ("South East", "southeast", ["Reigate", "Guildford", "Horsham", "Crawley", "Tunbridge Wells", "Maidstone",
                                 "Canterbury", "Ashford", "Chichester", "Basingstoke", "Winchester", "Newbury",
                                 "Reading", "High Wycombe", "Aylesbury"]),
]
PINNED = {"Whitby": "0733", "Ripon": "0340", "Perth": "1052", "Kendal": "0561", "Lichfield": "0286",
          "Truro": "0912", "Cheltenham": "0418"}
PILOT_TOWNS = ["Kendal", "Truro", "Hexham", "Stirling", "Ipswich", "Reigate"]
WAVE_SIZES = [22, 28, 30, 29, 27]


class Store:
    def __init__(self, no, town, region, key):
        self.no, self.town, self.region, self.key = no, town, region, key
        self.wave = 0
        self.lanes = rng.choice([4, 5, 6, 6, 8, 8, 10, 12])
        self.net = f"10.{rng.randint(40, 47)}.{rng.randint(0, 255)}"

    def host(self, role="bos01"):
        return f"s{self.no}-{role}.stores.phl.local"


_numbers = [f"{n:04d}" for n in rng.sample(range(101, 1300), 200) if f"{n:04d}" not in PINNED.values()]
STORES = []
for _name, _key, _towns in REGIONS:
    for _town in _towns:
        STORES.append(Store(PINNED.get(_town) or _numbers.pop(), _town, _name, _key))
assert len(STORES) == 142 and len({s.no for s in STORES}) == 142
BY_TOWN = {s.town: s for s in STORES}
BY_NO = {s.no: s for s in STORES}
for _t in PILOT_TOWNS:
    BY_TOWN[_t].wave = 1
_rest = [s for s in STORES if s.wave == 0]
_k = 0
for _w, _n in enumerate(WAVE_SIZES, 2):
    for s in _rest[_k:_k + _n]:
        s.wave = _w
    _k += _n
WAVES = {w: [s for s in STORES if s.wave == w] for w in range(1, 7)}
assert [len(WAVES[w]) for w in range(1, 7)] == [6] + WAVE_SIZES
assert BY_TOWN["Whitby"].wave == 2 and BY_TOWN["Ripon"].wave == 2 and BY_TOWN["Perth"].wave == 3
assert BY_TOWN["Lichfield"].wave == 4 and BY_TOWN["Cheltenham"].wave == 5


def region_stores(key):
    return [s for s in STORES if s.key == key]


DCS = ["doncaster", "avonmouth", "livingston", "daventry"]
DC_REGIONS = {"doncaster": ["northeast", "yorkshire", "northwest"], "livingston": ["scotland"],
              "avonmouth": ["southwest", "wales"], "daventry": ["midlands", "eastanglia", "london", "southeast"]}
USERS = ["fstrachan", "jmwangi", "okarlsson", "ptreharne", "svaughan-lee", "dbhattacharya", "rcastellanos",
         "tmcallister", "hnwosu", "lgrimshaw"]


def clock(h, m=0, s=0.0, day=0):
    return datetime.datetime(TODAY.year, TODAY.month, TODAY.day, h, m) + datetime.timedelta(days=day, seconds=s)


def ts(dt, ms=True, sep=" "):
    return dt.strftime(f"%Y-%m-%d{sep}%H:%M:%S") + (f".{rng.randint(0, 999):03d}" if ms else "")


def uk(dt):
    """PowerShell's en-GB date format."""
    return dt.strftime("%d/%m/%Y %H:%M:%S")


def numbered(lines, start=1):
    return "\n".join(f"{i:6d}\t{l}" for i, l in enumerate(lines, start))


def table(headers, rows, right=(), gap="  "):
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


def psql_expanded(records, keys):
    kw = max(map(len, keys))
    out = []
    for n, rec in enumerate(records, 1):
        vw = max(len(str(rec[k])) for k in keys)
        head = f"-[ RECORD {n} ]"
        out.append(head + "-" * max(0, kw + 1 - len(head)) + "+" + "-" * (vw + 1))
        out += [xrow(k, rec[k], kw) for k in keys]
    return "\n".join(out)


def sqlcmd_table(headers, rows, numeric=()):
    rows = [[str(x) for x in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    out = [" ".join(h.ljust(w) for h, w in zip(headers, widths)), " ".join("-" * w for w in widths)]
    for r in rows:
        out.append(" ".join(c.rjust(w) if i in numeric else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))))
    out += ["", f"({len(rows)} rows affected)"]
    return "\n".join(out)


def money(x):
    return f"{x:,.2f}"


def make_diff(path, lines, edits, ctx=3):
    """A unified diff of `edits` against `lines`; edits: (anchor text, lines removed, lines added)."""
    new = list(lines)
    for anchor, n, add in sorted(edits, key=lambda e: -next(k for k, l in enumerate(lines) if e[0] in l)):
        i = next(k for k, l in enumerate(lines) if anchor in l)
        new[i:i + n] = add
    return "\n".join(difflib.unified_diff(lines, new, f"a/{path}", f"b/{path}", n=ctx, lineterm="")), new


# ---------------------------------------------------------------------------
# Cutover controller and wave plan.

def cutover_status(now):
    states = {1: ("live", "2026-05-05", "r14"), 2: ("scheduled", "2026-05-12", "r9"), 3: ("draft", "-", "r4"),
              4: ("draft", "-", "r3"), 5: ("draft", "-", "r2"), 6: ("draft", "-", "r1")}
    rows = []
    for w in range(1, 7):
        state, date, rev = states[w]
        n = len(WAVES[w])
        live = n if w == 1 else 0
        rows.append([w, state, n, live, n - live, "22:30-05:30", date, rev])
    rows.append(["", "total", len(STORES), len(WAVES[1]), len(STORES) - len(WAVES[1]), "", "", ""])
    out = [f"Tillwise cutover controller 2.3.1   tenant pennock-hale-prod   {now:%Y-%m-%d %H:%M:%S} BST", "",
           table(["WAVE", "STATE", "STORES", "LIVE", "LEGACY", "WINDOW (local)", "DATE", "PLAN"], rows,
                 right=(2, 3, 4)), "", "stores in waves 1-2:"]
    srows = []
    for s in WAVES[1] + WAVES[2]:
        hb = now - datetime.timedelta(seconds=rng.randint(5, 110))
        if s.wave == 1:
            state, sync = "live", rng.choice(["in sync", "in sync", "in sync", "catching up"])
        else:
            state, sync = rng.choice(["ready", "ready", "ready", "agent staged"]), "legacy"
        note = ""
        if s.town == "Ripon":
            note = "eod upload overdue"
        elif s.town == "Whitby":
            note = "vpn: fragmentation alarms"
        elif s.town == "Kendal":
            note = "agent restarts this week"
        srows.append([s.no, s.town, s.region, s.wave, state, f"{s.lanes}/{s.lanes}", f"{hb:%H:%M:%S}", sync, note])
    out.append(table(["STORE", "NAME", "REGION", "WAVE", "STATE", "LANES", "HEARTBEAT", "DATA", "NOTE"], srows))
    out += ["", f"waves 3-6: {sum(len(WAVES[w]) for w in range(3, 7))} stores on StoreLink, agents not staged "
                "(use --wave N for detail)"]
    return "\n".join(out)


def waves_yaml():
    out = ["# Cutover waves: which stores move from StoreLink to Tillwise, and on which night.",
           "# A store belongs to exactly one wave. Dates are the night the wave cuts over (store local time).",
           "# Membership changes go through a CHG; the controller re-reads this file on every plan.",
           "version: 7", "defaults:", '  window_local: "22:30-05:30"', '  rollback_deadline_local: "04:30"',
           "  recon_signoff_required: true", "  price_bundle: pre-staged", "  agent_min_version: 4.12.9",
           "  freeze_legacy_changes_hours: 24", "waves:"]
    labels = {1: "pilot", 2: "north-east and north yorkshire", 3: "yorkshire, scotland, north-west",
              4: "north-west, midlands, north wales", 5: "south wales, south-west, east anglia",
              6: "east anglia, london, south-east"}
    dates = {1: "2026-05-05", 2: "2026-05-12"}
    for w in range(1, 7):
        out += [f"  - id: {w}", f'    label: "{labels[w]}"']
        out.append(f"    date: {dates[w]}" if w in dates else "    date: null        # TBC with retail ops")
        out.append("    stores:")
        for s in WAVES[w]:
            out.append(f'      - "{s.no}"   # {s.town}')
    return out


def vpn_summary(stores, down=()):
    out = []
    for s in stores:
        for link in ["P1", "P2"] if rng.random() < 0.3 else ["P1"]:
            ip = f"{rng.choice([81, 86, 92, 109, 151, 212])}.{rng.randint(1, 254)}.{rng.randint(1, 254)}.{rng.randint(2, 250)}"
            up = "2/1" if s.no in down and link == "P1" else "2/2"
            rx, tx = rng.randint(2_000_000, 60_000_000), rng.randint(2_000_000, 60_000_000)
            out.append(f"'ST{s.no}-{link}' {ip}:4500  selectors(total,up): {up}  rx(pkt,err): {rx}/"
                       f"{rng.choice([0, 0, 0, rng.randint(1, 40)])}  tx(pkt,err): {tx}/{rng.choice([0, 0, rng.randint(1, 20)])}")
    out += ["'DC-AZURE-UKS' 51.104.18.22:4500  selectors(total,up): 6/6  rx(pkt,err): 912004411/0  tx(pkt,err): "
            "880122014/0", "'DC-LIV-DR' 185.44.72.9:500  selectors(total,up): 4/4  rx(pkt,err): 41200119/0  "
            "tx(pkt,err): 40877120/0"]
    return "\n".join(out)


SCHED_JOBS = (
    [(f"eod_collect_{k}", "30 23 * * *", "storesys") for _, k, _ in REGIONS] +
    [(f"recon_nightly_{k}", "40 5 * * *", "finance-sys") for _, k, _ in REGIONS] +
    [(f"repl_{dc}", c, "dc-planning") for dc, c in zip(DCS, ["45 0 * * *", "15 1 * * *", "15 1 * * *",
                                                              "50 0 * * *"])] +
    [("price_master_export", "0 6 * * *", "pricing"), ("promo_export", "15 6 * * 1-6", "pricing"),
     ("pricecast_digest", "0 8 * * *", "storesys"), ("invsync_compact", "0 4 * * *", "storesys"),
     ("points_batch_post", "10 2 * * *", "crm-sys"), ("settlement_file_pickup", "30 3 * * *", "fin-ops"),
     ("ped_key_audit", "0 7 * * 1", "storesys"), ("storelink_db_backup_full", "0 1 * * 0", "dba"),
     ("storelink_db_backup_diff", "0 1 * * 1-6", "dba"), ("storelink_log_backup", "*/15 * * * *", "dba"),
     ("label_batch_print", "0 5 * * *", "storesys"), ("tillwise_sales_export", "20 0 * * *", "storesys"),
     ("legacy_purge_journals", "30 4 * * 0", "storesys"), ("gift_card_liability", "0 5 * * *", "fin-ops"),
     ("stock_count_import", "0 7 * * 3", "inventory"), ("supplier_cost_feed", "45 5 * * 1-5", "pricing")])


def schedctl_list(now):
    rows = []
    for name, cron, owner in SCHED_JOBS:
        h = int(cron.split()[1]) if cron.split()[1].isdigit() else 0
        m = int(cron.split()[0]) if cron.split()[0].isdigit() else 0
        last = clock(h, m, rng.randint(0, 9))
        if last > now:
            last -= datetime.timedelta(days=1)
        nxt = last + datetime.timedelta(days=1)
        status = "ok"
        if name == "repl_livingston":
            status = "FAILED"
        elif name == "eod_collect_yorkshire":
            status = "partial"
        elif rng.random() < 0.05:
            status = "late"
        if cron.startswith("*/15"):
            last = now - datetime.timedelta(minutes=rng.randint(1, 14))
            nxt = last + datetime.timedelta(minutes=15)
        rows.append([name, cron, f"{nxt:%Y-%m-%d %H:%M}", f"{last:%Y-%m-%d %H:%M}", status, owner])
    return ("schedctl 5.2.0 -- 46 jobs, tz Europe/London\n\n" +
            table(["NAME", "SCHEDULE", "NEXT RUN", "LAST RUN", "LAST", "OWNER"], rows) +
            f"\n\n{sum(1 for r in rows if r[4] != 'ok')} job(s) not ok on last run; `schedctl runs NAME` for history")


# ---------------------------------------------------------------------------
# The pilot wave's data: StoreLink vs Tillwise.

TABLES_SL = ["SalesHeader", "SalesLine", "TenderLine", "DiscountLine", "ReturnHeader", "ReturnLine", "VoidLog",
             "CashupHeader", "CashupLine", "StockDelta", "StockCount", "LoyaltyTxn", "GiftCardTxn", "PettyCash"]
TABLES_TW = ["sales_header", "sales_line", "tender_line", "discount_line", "return_header", "return_line",
             "void_log", "cashup_header", "cashup_line", "stock_delta", "stock_count", "points_txn",
             "giftcard_txn", "petty_cash"]
PILOT_COUNTS = {}


def pilot_counts():
    hdr = int(P["G1"])
    ratios = [1, 4.1, 1.16, 0.62, 0.031, 0.052, 0.012, 0.0021, 0.019, 2.7, 0.35, 0.44, 0.021, 0.0008]
    for t, r in zip(TABLES_SL, ratios):
        PILOT_COUNTS[t] = hdr if r == 1 else int(hdr * r * rng.uniform(0.95, 1.05))


pilot_counts()


QUARTERS = ["2025-Q2", "2025-Q3", "2025-Q4", "2026-Q1", "2026-Q2"]
PILOT_SPLIT = {}


def pilot_split():
    """Each pilot store's and quarter's share of the three sales tables (the same on both platforms)."""
    if not PILOT_SPLIT:
        keys = [(s.no, q) for s in PILOT for q in QUARTERS]
        weights = [rng.uniform(0.8, 1.2) * (0.4 if q == QUARTERS[-1] else 1.0) for _, q in keys]
        for t in ("SalesHeader", "SalesLine", "TenderLine"):
            parts = [int(PILOT_COUNTS[t] * w / sum(weights)) for w in weights]
            parts[0] += PILOT_COUNTS[t] - sum(parts)
            PILOT_SPLIT[t] = dict(zip(keys, parts))
    return PILOT_SPLIT


def pilot_breakdown(missing=None):
    split = pilot_split()
    rows = []
    for s in PILOT:
        for q in QUARTERS:
            vals = [split[t][(s.no, q)] for t in ("SalesHeader", "SalesLine", "TenderLine")]
            if missing and s is KENDAL and q == QUARTERS[-1]:
                vals = [v - m for v, m in zip(vals, missing)]
            rows.append([s.no, q] + vals)
    return rows


def sqlcmd_counts():
    rows = [[t, PILOT_COUNTS[t], f"2025-05-0{rng.randint(1, 9)}", "2026-05-05"] for t in TABLES_SL]
    return ("Changed database context to 'StoreLink'.\n" +
            sqlcmd_table(["TableName", "RowsForStores", "FirstBusinessDate", "LastBusinessDate"], rows, numeric=(1,)) +
            "\n" + sqlcmd_table(["StoreNo", "Quarter", "SalesHeader", "SalesLine", "TenderLine"], pilot_breakdown(),
                                numeric=(2, 3, 4)) +
            "\n\nCompletion time: 2026-05-12T08:41:22.5517461+01:00")


def psql_counts():
    rows = []
    for a, b in zip(TABLES_SL, TABLES_TW):
        n = PILOT_COUNTS[a]
        if a in ("SalesHeader", "TenderLine", "SalesLine"):
            n -= {"SalesHeader": 23, "TenderLine": 27, "SalesLine": 96}[a]
        rows.append([b, n, "2025-05-0" + str(rng.randint(1, 9)), "2026-05-05", rng.choice(["migrated", "migrated",
                                                                                             "migrated+live"])])
    return (psql_table(["table_name", "rows_for_stores", "first_business_date", "last_legacy_date", "origin"], rows,
                       numeric=(1,)) + f"\n\nTime: {rng.randint(900, 4000)}.{rng.randint(100, 999)} ms\n\n" +
            psql_table(["store", "quarter", "sales_header", "sales_line", "tender_line"],
                       pilot_breakdown(missing=(23, 96, 27)), numeric=(2, 3, 4)) +
            f"\n\nTime: {rng.randint(300, 900)}.{rng.randint(100, 999)} ms")


def missing_txns(store):
    rows = []
    t = clock(10, 2, 0, day=-6)
    for k in range(23):
        t += datetime.timedelta(seconds=rng.randint(60, 700))
        rows.append([store.no, 3, f"{rng.randint(20000, 29999)}", f"{t:%Y-%m-%d %H:%M:%S}",
                     money(rng.uniform(3, 190)), rng.choice(["CARD", "CARD", "CARD", "CASH", "GIFTCARD"]),
                     "journal", "not in tillwise"])
    return psql_table(["store", "lane", "txn_no", "txn_time", "net", "tender", "legacy_source", "state"], rows,
                      numeric=(4,))


# ---------------------------------------------------------------------------
# Store servers (PowerShell, cmd, event logs).

def ev(t, eid, level, provider, message):
    return [fl("TimeCreated", uk(t), 16), fl("Id", eid, 16), fl("LevelDisplayName", level, 16),
            fl("ProviderName", provider, 16), fl("Message", message.replace("\n", "\n" + " " * 19), 16), ""]


def winevents(n, crashes, start):
    """System and Application errors and warnings of a store server, newest first."""
    evs = []
    t = start
    crash_times = sorted([clock(12, 14, rng.randint(0, 59), day=-6)] +
                         [start + datetime.timedelta(seconds=rng.randint(2 * 86400, 6 * 86400))
                          for _ in range(crashes - 1)])
    for k, ct in enumerate(crash_times, 1):
        evs.append((ct, ev(ct, 7031, "Error", "Service Control Manager",
                           f"The Tillwise Store Agent service terminated unexpectedly.  It has done this {k} time(s).  "
                           "The following corrective action will be taken in 60000 milliseconds: Restart the service.")))
        evs.append((ct - datetime.timedelta(seconds=1), ev(
            ct - datetime.timedelta(seconds=1), 1026, "Error", ".NET Runtime",
            "Application: Tw.StoreAgent.exe\nFramework Version: v4.0.30319\nDescription: The process was terminated "
            "due to an unhandled exception.\nException Info: System.IO.IOException\n   at System.IO.__Error.WinIOError"
            "(Int32, System.String)\n   at Tw.Agent.Journal.JournalShipper.OpenLane(Int32)")))
        evs.append((ct, ev(ct, 1000, "Error", "Application Error",
                           "Faulting application name: Tw.StoreAgent.exe, version: 4.12.9.0, time stamp: 0x662f1a3c\n"
                           "Faulting module name: KERNELBASE.dll, version: 10.0.14393.6897\nException code: 0xe0434352\n"
                           f"Faulting process id: 0x{rng.randint(0x400, 0x3fff):x}")))
    for _ in range(n):
        t = start + datetime.timedelta(seconds=rng.randint(0, 6 * 86400))
        kind = rng.randrange(6)
        if kind == 0:
            e = ev(t, 10016, "Warning", "Microsoft-Windows-DistributedCOM",
                   "The application-specific permission settings do not grant Local Activation permission for the COM "
                   "Server application with CLSID {D63B10C5-BB46-4990-A94F-E40B9D520160} to the user NT AUTHORITY\\"
                   "SYSTEM SID (S-1-5-18). This security permission can be modified using the Component Services tool.")
        elif kind == 1:
            e = ev(t, 1014, "Warning", "Microsoft-Windows-DNS-Client",
                   f"Name resolution for the name {rng.choice(['ctldl.windowsupdate.com', 'wpad.stores.phl.local', 'time.windows.com'])} "
                   "timed out after none of the configured DNS servers responded.")
        elif kind == 2:
            e = ev(t, 36887, "Error", "Schannel", "A fatal alert was received from the remote endpoint. The TLS "
                   f"protocol defined fatal alert code is {rng.choice([46, 48, 40])}.")
        elif kind == 3:
            e = ev(t, 7031, "Error", "Service Control Manager",
                   "The StoreLink Comms Service service terminated unexpectedly.  It has done this 1 time(s).  The "
                   "following corrective action will be taken in 120000 milliseconds: Restart the service.")
        elif kind == 4:
            e = ev(t, 129, "Warning", "storahci", "Reset to device, \\Device\\RaidPort0, was issued.")
        else:
            e = ev(t, 50, "Warning", "Microsoft-Windows-Time-Service",
                   "The time service detected a time difference of greater than 5000 milliseconds for 900 seconds. "
                   "The time difference might be caused by synchronization with low-accuracy time sources.")
        evs.append((t, e))
    evs.sort(key=lambda x: x[0], reverse=True)
    return "\n".join(l for _, e in evs for l in e).rstrip()


def get_service(extra=()):
    rows = [("Running", "TwStoreAgent", "Tillwise Store Agent"), ("Running", "TwLaneBroker", "Tillwise Lane Broker"),
            ("Running", "TwJournalShipper", "Tillwise Journal Shipper"),
            ("Running", "SLComms", "StoreLink Comms Service"), ("Running", "SLPriceLoader", "StoreLink Price Loader"),
            ("Stopped", "SLEodUpload", "StoreLink End of Day Upload"), ("Running", "SLLabelSpool", "StoreLink Label Spooler"),
            ("Running", "MSSQL$STORELINK", "SQL Server (STORELINK)"), ("Running", "SQLAgent$STORELINK", "SQL Server Agent (STORELINK)"),
            ("Running", "Spooler", "Print Spooler"), ("Running", "W32Time", "Windows Time"),
            ("Running", "WinDefend", "Windows Defender Antivirus Service"),
            ("Running", "CcmExec", "SMS Agent Host"), ("Running", "ZabbixAgent2", "Zabbix Agent 2")] + list(extra)
    procs = []
    for name in ["Tw.StoreAgent", "Tw.LaneBroker", "Tw.JournalShipper", "SLComms", "SLPriceLoader", "SLLabelSpool",
                 "sqlservr", "SQLAGENT", "spoolsv", "CcmExec", "zabbix_agent2", "MsMpEng"]:
        procs.append(f"{rng.randint(300, 2400):>7} {rng.randint(20, 90):>6} {rng.randint(20000, 400000):>10} "
                     f"{rng.randint(30000, 900000):>10} {rng.uniform(1, 4000):>9.2f} {rng.randint(400, 9000):>6} "
                     f"{rng.choice([0, 0, 1]):>3} {name}")
    return "\n".join(["", "Status   Name               DisplayName", "------   ----               -----------"] +
                     [f"{a:<8} {b:<18} {c}" for a, b, c in rows] +
                     ["", "", "Handles  NPM(K)    PM(K)      WS(K)     CPU(s)     Id  SI ProcessName",
                      "-------  ------    -----      -----     ------     --  -- -----------"] + procs)


def agent_log(n, start, lanes):
    out = []
    t = start
    for k in range(n):
        t += datetime.timedelta(seconds=rng.uniform(2, 40))
        lane = rng.randint(1, lanes)
        kind = rng.random()
        stamp = f"{t:%Y-%m-%d %H:%M:%S}.{rng.randint(0, 999):03d} +01:00"
        if kind < 0.35:
            out.append(f"{stamp} [INF] LaneSupervisor: lane {lane:02d} heartbeat ok (rtt {rng.randint(1, 9)} ms)")
        elif kind < 0.55:
            out.append(f"{stamp} [INF] JournalShipper: lane {lane:02d} shipped {rng.randint(1, 40)} records "
                       f"(seq {rng.randint(100000, 999999)})")
        elif kind < 0.7:
            out.append(f"{stamp} [INF] PolicySync: no change (etag {hexs(8)})")
        elif kind < 0.8:
            out.append(f"{stamp} [WRN] JournalShipper: lane {lane:02d} journal locked by SLComms, retry in 5s")
        elif kind < 0.9:
            out.append(f"{stamp} [INF] PriceWatcher: inbox empty")
        else:
            out.append(f"{stamp} [DBG] Uplink: keepalive sent ({rng.randint(80, 400)} bytes)")
    t += datetime.timedelta(seconds=3)
    stamp = f"{t:%Y-%m-%d %H:%M:%S}"
    out += [f"{stamp}.902 +01:00 [ERR] JournalShipper: failed to open D:\\Tillwise\\spool\\lane03.journal: The process "
            "cannot access the file because it is being used by another process.",
            f"{stamp}.918 +01:00 [FTL] Unhandled exception; terminating",
            "System.IO.IOException: The process cannot access the file 'D:\\Tillwise\\spool\\lane03.journal' because it "
            "is being used by another process.",
            "   at System.IO.__Error.WinIOError(Int32 errorCode, String maybeFullPath)",
            "   at System.IO.FileStream.Init(String path, FileMode mode, FileAccess access, Int32 rights, Boolean "
            "useRights, FileShare share, Int32 bufferSize, FileOptions options)",
            "   at Tw.Agent.Journal.JournalShipper.OpenLane(Int32 lane) in C:\\b\\agent\\src\\Journal\\JournalShipper.cs:line 212",
            "   at Tw.Agent.Journal.JournalShipper.<ShipAsync>d__14.MoveNext()",
            f"{(t + datetime.timedelta(seconds=61)):%Y-%m-%d %H:%M:%S}.204 +01:00 [INF] Tillwise Store Agent 4.12.9 "
            "starting (ring: stable)",
            f"{(t + datetime.timedelta(seconds=63)):%Y-%m-%d %H:%M:%S}.877 +01:00 [INF] JournalShipper: resuming lanes "
            "from last acknowledged sequence"]
    return "\n".join(out)


def registry(version_line, store, now):
    props = {"AgentVersion": version_line.split(" : ")[1] if version_line else "4.12.9", "Channel": "stable",
             "UpdateRing": rng.choice(["ring-1", "ring-2"]), "InstallDate": "28/04/2026 23:12:40",
             "InstallPath": "C:\\Program Files\\Tillwise\\StoreAgent",
             "ConfigEndpoint": "https://config.tillwise.cloud/v2/tenants/pennock-hale-prod",
             "TenantId": "7f3e9a1c-55d2-4b8e-a0c9-2e1d4f6b8a90",
             "LastPolicySync": uk(now - datetime.timedelta(minutes=rng.randint(2, 50))),
             "LastHeartbeatUtc": uk(now - datetime.timedelta(hours=1, seconds=rng.randint(3, 40))),
             "LanesManaged": store.lanes, "PendingReboot": "True" if version_line else "False"}
    out = [""] + [fl(k, props[k], W_REG) for k in REG_KEYS] + ["", get_service(), ""]
    rows = []
    for lane in range(1, store.lanes + 1):
        rows.append([f"LANE{lane:02d}", "4.12.9" if rng.random() < 0.8 else "4.12.8",
                     uk(now - datetime.timedelta(seconds=rng.randint(2, 90))), rng.randint(0, 12),
                     rng.choice(["ok", "ok", "ok", "printer paper low"])])
    out.append(table(["Lane", "LaneAgent", "LastHeartbeat", "JournalBacklog", "Status"], rows))
    out += ["", "    Directory: C:\\ProgramData\\Tillwise\\updates", "",
            "Mode                 LastWriteTime         Length Name",
            "----                 -------------         ------ ----",
            f"-a----        04/05/2026     02:11       48211904 TwStoreAgent-4.12.9.msi",
            f"-a----        04/05/2026     02:14           1893 TwStoreAgent-4.12.9.msi.sig",
            f"-a----        05/05/2026     02:16           4120 install-4.12.9.log"]
    return "\n".join(out)


def agent_rings_json(stores, now):
    rows = []
    for s in stores:
        rows.append("    {\n" + ",\n".join([f'      "store": "{s.no}"', f'      "ring": "{rng.choice(["ring-1", "ring-2"])}"',
                                             f'      "target": "4.12.9"',
                                             f'      "state": "{"pending-reboot" if s is BY_TOWN["Truro"] else "current"}"',
                                             f'      "last_check_utc": "{(now - datetime.timedelta(hours=1, minutes=rng.randint(1, 40))):%Y-%m-%dT%H:%M:%SZ}"',
                                             f'      "lanes_current": {s.lanes - (2 if s is BY_TOWN["Truro"] else 0)}',
                                             f'      "lanes_total": {s.lanes}']) + "\n    }")
    return ("HTTP/2 200\ncontent-type: application/json\nx-request-id: " + hexs(16) + "\ndate: " +
            now.strftime("%a, %d %b %Y %H:%M:%S GMT") + "\n\n{\n  \"tenant\": \"pennock-hale-prod\",\n  \"rollout\": "
            "\"agent-4.12.9\",\n  \"started_utc\": \"2026-05-04T01:00:00Z\",\n  \"policy\": {\"window_local\": "
            "\"01:00-04:00\", \"requires_reboot\": true, \"max_parallel\": 10},\n  \"stores\": [\n" + ",\n".join(rows) +
            "\n  ],\n  \"summary\": {\"current\": " + str(len(stores) - 1) + ", \"pending_reboot\": 1, \"failed\": 0}\n}")


def scheduled_tasks(missed_line, now):
    tasks = [("EodUpload", "\\StoreLink\\", "EOD"), ("PriceLoad", "\\StoreLink\\", "PL"),
             ("LabelSpoolPurge", "\\StoreLink\\", "LS"), ("JournalArchive", "\\StoreLink\\", "JA"),
             ("AgentUpdateCheck", "\\Tillwise\\", "AU"), ("JournalCompact", "\\Tillwise\\", "JC"),
             ("PolicySync", "\\Tillwise\\", "PS"), ("DbBackupDiff", "\\StoreLink\\", "DB"),
             ("DefragSpool", "\\Maintenance\\", "DS"), ("ZabbixSelfCheck", "\\Maintenance\\", "ZC")]
    out = [""]
    for name, path, _ in tasks:
        last = now - datetime.timedelta(hours=rng.randint(1, 20), minutes=rng.randint(0, 59))
        nxt = last + datetime.timedelta(days=1)
        if name == "EodUpload":
            res, last, nxt = 2147942405, clock(23, 15, 2, day=-10), clock(23, 15)
            missed = missed_line
        else:
            res = rng.choice([0, 0, 0, 0, 0, 1])
            missed = fl("NumberOfMissedRuns", rng.choice([0, 0, 0, 1]), W_TASK)
        out += [fl("LastRunTime", uk(last), W_TASK), fl("LastTaskResult", res, W_TASK),
                fl("NextRunTime", uk(nxt), W_TASK), missed, fl("TaskName", name, W_TASK),
                fl("TaskPath", path, W_TASK), ""]
    return "\n".join(out).rstrip()


def test_netconnection(rtt_line, store, target="api.tillwise.cloud"):
    src = f"{store.net}.10"
    out = ["", fl("ComputerName", target, W_TEST), fl("RemoteAddress", "52.56.201.14", W_TEST),
           fl("RemotePort", 443, W_TEST), fl("NameResolutionResults", "52.56.201.14", W_TEST),
           " " * (W_TEST + 3) + "52.56.201.77", fl("MatchingIPsecRules", "", W_TEST).rstrip(),
           fl("NetworkIsolationContext", "Private Network", W_TEST), fl("IsAdmin", "True", W_TEST),
           fl("InterfaceAlias", "Ethernet0", W_TEST), fl("SourceAddress", src, W_TEST),
           fl("NetRoute (NextHop)", f"{store.net}.1", W_TEST), fl("PingSucceeded", "True", W_TEST), rtt_line,
           fl("TcpTestSucceeded", "True", W_TEST), "", "", f"Tracing route to {target} [52.56.201.14]",
           "over a maximum of 30 hops:", ""]
    hops = [f"{store.net}.1", "10.250.0.1", "10.0.0.9", "195.12.44.1", "62.252.192.77", "195.66.224.21",
            "52.95.61.118", "52.95.61.73", "*", "52.56.201.14"]
    acc = 1
    for k, h in enumerate(hops, 1):
        if h == "*":
            out.append(f" {k:2d}     *        *        *     Request timed out.")
            continue
        acc += rng.randint(0, 14)
        a, b, c = (acc + rng.randint(0, 6) for _ in range(3))
        out.append(f" {k:2d}  {a:4d} ms {b:4d} ms {c:4d} ms  {h}")
    out += ["", "Trace complete.", ""]
    for k in range(10):
        c = rng.uniform(0.04, 0.11)
        tls_ = c + rng.uniform(0.05, 0.12)
        ttfb = tls_ + rng.uniform(0.1, 0.5)
        out.append(f"connect={c:.3f} tls={tls_:.3f} ttfb={ttfb:.3f} total={ttfb + rng.uniform(0.001, 0.05):.3f} http=200")
    out += ["", "Name                      InterfaceDescription                    ifIndex "
            "Status       MacAddress         LinkSpeed", "----                      --------------------          "
            "          ------- ------       ----------         ---------",
            f"Ethernet0                 Intel(R) Ethernet Connection I219-LM         4 Up           "
            f"{'-'.join(hexs(2).upper() for _ in range(6))}         1 Gbps"]
    return "\n".join(out)


def ipconfig_all(store):
    mac = "-".join(hexs(2).upper() for _ in range(6))
    return "\n".join([
        "", "Windows IP Configuration", "",
        f"   Host Name . . . . . . . . . . . . : BOS01", "   Primary Dns Suffix  . . . . . . . : stores.phl.local",
        "   Node Type . . . . . . . . . . . . : Hybrid", "   IP Routing Enabled. . . . . . . . : No",
        "   WINS Proxy Enabled. . . . . . . . : No", "   DNS Suffix Search List. . . . . . : stores.phl.local",
        "                                       phl.local", "", "Ethernet adapter Ethernet0:", "",
        "   Connection-specific DNS Suffix  . : stores.phl.local",
        "   Description . . . . . . . . . . . : Intel(R) Ethernet Connection I219-LM",
        f"   Physical Address. . . . . . . . . : {mac}", "   DHCP Enabled. . . . . . . . . . . : No",
        "   Autoconfiguration Enabled . . . . : Yes",
        f"   IPv4 Address. . . . . . . . . . . : {store.net}.10(Preferred)",
        "   Subnet Mask . . . . . . . . . . . : 255.255.255.0",
        f"   Default Gateway . . . . . . . . . : {store.net}.1",
        "   DNS Servers . . . . . . . . . . . : 10.0.10.21", "                                       10.0.10.22",
        "   NetBIOS over Tcpip. . . . . . . . : Enabled", "", "Tunnel adapter isatap.stores.phl.local:", "",
        "   Media State . . . . . . . . . . . : Media disconnected",
        "   Connection-specific DNS Suffix  . : stores.phl.local",
        "   Description . . . . . . . . . . . : Microsoft ISATAP Adapter #2", "",
        "=" * 75, "IPv4 Route Table", "=" * 75, "Active Routes:",
        "Network Destination        Netmask          Gateway       Interface  Metric",
        f"          0.0.0.0          0.0.0.0      {store.net}.1     {store.net}.10    281",
        "        127.0.0.0        255.0.0.0         On-link         127.0.0.1    331",
        f"       {store.net}.0    255.255.255.0         On-link      {store.net}.10    281",
        f"      {store.net}.10  255.255.255.255         On-link      {store.net}.10    281",
        f"     {store.net}.255  255.255.255.255         On-link      {store.net}.10    281",
        "        224.0.0.0        240.0.0.0         On-link         127.0.0.1    331", "=" * 75,
        "Persistent Routes:", "  None"])


def robocopy_log(files, start, failed_at=None):
    out = ["", "-" * 79, "   ROBOCOPY     ::     Robust File Copy for Windows", "-" * 79, "",
           f"  Started : {start:%A, %d %B %Y %H:%M:%S}", "   Source : D:\\StoreLink\\EOD\\outbox\\",
           "     Dest : \\\\sl-eod-lds01\\eod$\\inbound\\", "", "    Files : *.eod", "",
           "  Options : *.eod /S /DCOPY:DA /COPY:DAT /MOV /R:3 /W:30 /NP /LOG+:D:\\StoreLink\\logs\\eodupload.log", "",
           "-" * 79, ""]
    for k, f in enumerate(files):
        out.append(f"\t    New File  \t\t{rng.randint(120000, 900000)}\t{f}")
        if failed_at is not None and k == failed_at:
            t = start + datetime.timedelta(seconds=rng.randint(4, 30))
            out += [f"{t:%Y/%m/%d %H:%M:%S} ERROR 5 (0x00000005) Copying File D:\\StoreLink\\EOD\\outbox\\{f}",
                    "Access is denied.", "", "Waiting 30 seconds... Retrying...",
                    f"{(t + datetime.timedelta(seconds=30)):%Y/%m/%d %H:%M:%S} ERROR 5 (0x00000005) Copying File "
                    f"D:\\StoreLink\\EOD\\outbox\\{f}", "Access is denied.", "",
                    "ERROR: RETRY LIMIT EXCEEDED.", ""]
            break
    n = len(files) if failed_at is None else failed_at
    out += ["", "-" * 79, "", "               Total    Copied   Skipped  Mismatch    FAILED    Extras",
            f"    Dirs :         1         0         1         0         0         0",
            f"   Files :  {len(files):8d}  {n:8d}         0         0  {len(files) - n:8d}         0",
            f"   Bytes :  {rng.randint(2, 9)}.{rng.randint(100, 999)} m  {rng.randint(1, 2)}.{rng.randint(100, 999)} m"
            "         0         0   1.204 m         0", "",
            f"   Ended : {(start + datetime.timedelta(seconds=95)):%A, %d %B %Y %H:%M:%S}"]
    return "\n".join(out)


# ---------------------------------------------------------------------------
# Price distribution (pricecast).

def distributor_ini(v):
    return [
        "; pricecast distributor: one store group's overrides of conf/defaults.ini",
        "; keys not set here fall back to the defaults; all times are store local time",
        "",
        "[group]",
        "stores_file = stores.txt",
        "timezone = Europe/London",
        "tenant = pennock-hale-prod",
        f"owner = {v.get('owner', 'storesys')}",
        "",
        "[window]",
        f"open_local = {v.get('open_local', '22:30')}",
        f"close_local = {v.get('close_local', '06:00')}",
        f"sunday_open_local = {v.get('sunday_open_local', '17:30')}",
        "sunday_close_local = 08:30",
        "; a push that has not finished by close_local is parked, never forced",
        "on_overrun = park",
        "holiday_calendar = uk-england-wales",
        "",
        "[pacing]",
        v.get("stagger") or f"stagger_seconds = {nz('stagger_seconds')}",
        v.get("parallel") or f"max_parallel_stores = {nz('max_parallel_stores')}",
        f"bandwidth_cap_kbps = {v.get('bw', rng.choice([2048, 4096, 6144, 8192]))}",
        "prefer_secondary_link = false",
        "",
        "[transfer]",
        "protocol = sftp",
        f"endpoint = pc-dist-0{rng.randint(1, 3)}.phl.internal:2222",
        "remote_dir = /inbox/prices",
        v.get("chunk") or f"chunk_kb = {nz('chunk_kb')}",
        f"retry_limit = {nz('retry_limit')}",
        v.get("backoff") or f"retry_backoff_s = {nz('retry_backoff_s')}",
        "verify = sha256",
        "resume_partial = true",
        "",
        "[delta]",
        f"full_refresh_day = {rng.choice(['Sun', 'Sat', 'Sun'])}",
        v.get("cutoff") or f"delta_cutoff = {nz('delta_cutoff')}",
        "include_promotions = true",
        "include_multibuys = true",
        f"shelf_edge_labels = {v.get('sel', 'true')}",
        f"label_template = {rng.choice(['SEL-A6-2024', 'SEL-A7-2025', 'SEL-A6-2025'])}",
        "label_printer_queue = SEL01",
        "",
        "[activation]",
        "; the store agent activates a received file at its next price point",
        f"activate_at_local = {rng.choice(['06:30', '06:45', '06:15'])}",
        "require_ack = true",
        f"ack_timeout_min = {rng.choice([20, 30, 45])}",
        "",
        "[notify]",
        "on_failure = storesys-alerts@phl.co.uk",
        "on_park = storesys-alerts@phl.co.uk, retail-ops-duty@phl.co.uk",
        f"digest_hour_local = {rng.choice([7, 8])}",
    ]


DEFAULTS_INI = """; pricecast defaults: every store group's distributor.ini overrides these
; times are store local time; durations in seconds unless the key says otherwise
[window]
open_local = 22:00
close_local = 06:30
sunday_open_local = 17:00
sunday_close_local = 09:00
on_overrun = park
holiday_calendar = uk-england-wales

[pacing]
stagger_seconds = 30
max_parallel_stores = 8
bandwidth_cap_kbps = 4096
prefer_secondary_link = false

[transfer]
protocol = sftp
remote_dir = /inbox/prices
chunk_kb = 512
retry_limit = 5
retry_backoff_s = 30
verify = sha256
resume_partial = true
connect_timeout_s = 20
idle_timeout_s = 120

[delta]
full_refresh_day = Sun
delta_cutoff = 02:00
include_promotions = true
include_multibuys = true
shelf_edge_labels = true
label_template = SEL-A6-2024
label_printer_queue = SEL01

[activation]
activate_at_local = 06:30
require_ack = true
ack_timeout_min = 30

[notify]
on_failure = storesys-alerts@phl.co.uk
digest_hour_local = 8

[audit]
keep_manifests_days = 400
keep_payloads_days = 35
sign_manifests = true
signing_key = kms://phl-pricecast/manifest-signing"""


def pricecast_ls():
    out = ["pricecast/conf/:", "total 44", "drwxr-xr-x 2 pricecast pricecast 4096 May  5 14:22 archive",
           "-rw-r--r-- 1 pricecast pricecast 1311 Mar 30 10:04 defaults.ini",
           "-rw-r--r-- 1 pricecast pricecast  612 Apr 14 16:51 endpoints.ini"]
    for g in ["legacy", "w1", "w2", "w3", "w4", "w5", "w6"]:
        out.append(f"drwxr-xr-x 2 pricecast pricecast 4096 May {rng.randint(4, 11):2d} {rng.randint(9, 17):02d}:"
                   f"{rng.randint(0, 59):02d} {g}")
    for g, n in [("legacy", 136), ("w1", 6), ("w2", 22), ("w3", 28), ("w4", 30), ("w5", 29), ("w6", 27)]:
        out += ["", f"pricecast/conf/{g}:", "total 12",
                f"-rw-r--r-- 1 pricecast pricecast {rng.randint(1350, 1700)} May {rng.randint(4, 11):2d} "
                f"{rng.randint(9, 17):02d}:{rng.randint(0, 59):02d} distributor.ini",
                f"-rw-r--r-- 1 pricecast pricecast {n * 5} May  4 11:02 stores.txt"]
        if g == "legacy":
            out.append("-rw-r--r-- 1 pricecast pricecast  388 Mar 30 10:04 storelink-bridge.ini")
    return "\n".join(out)


def int_split(total, n):
    """n non-negative integers adding up to `total`."""
    w = [rng.random() ** 2 for _ in range(n)]
    parts = [int(total * x / sum(w)) for x in w]
    for k in range(total - sum(parts)):
        parts[k % n] += 1
    return parts


def push_log(stores, start, rejected_total, parked=(), mode="shadow"):
    out = []
    t = start
    delivered = [s for s in stores if s.no not in parked]
    rej = dict(zip([s.no for s in delivered], int_split(rejected_total, len(delivered))))
    for s in stores:
        t += datetime.timedelta(seconds=rng.uniform(20, 60))
        size = rng.randint(5_800_000, 8_900_000)
        out.append(f"{t:%Y-%m-%dT%H:%M:%S}.{rng.randint(0, 999):03d}Z INFO  push.start store={s.no} "
                   f"file=PF_{t:%Y%m%d}_{'F' if mode == 'live' else 'D'}.dat bytes={size} chunks={size // 524288 + 1}")
        if rng.random() < 0.15:
            out.append(f"{t:%Y-%m-%dT%H:%M:%S}.{rng.randint(0, 999):03d}Z WARN  push.retry store={s.no} attempt=2 "
                       "reason=\"connection reset by peer\"")
        if s.no in parked:
            out.append(f"{(t + datetime.timedelta(minutes=30)):%Y-%m-%dT%H:%M:%S}.{rng.randint(0, 999):03d}Z WARN  "
                       f"push.park store={s.no} reason=\"ack timeout\" delivered=true")
            continue
        t2 = t + datetime.timedelta(seconds=rng.uniform(25, 90))
        out.append(f"{t2:%Y-%m-%dT%H:%M:%S}.{rng.randint(0, 999):03d}Z INFO  push.done store={s.no} "
                   f"elapsed={(t2 - t).total_seconds():.1f}s sha256=ok")
        out.append(f"{(t2 + datetime.timedelta(seconds=rng.randint(40, 300))):%Y-%m-%dT%H:%M:%S}."
                   f"{rng.randint(0, 999):03d}Z INFO  agent.ack store={s.no} accepted={rng.randint(47000, 61000)} "
                   f"rejected={rej[s.no]} mode={mode}")
    out.sort(key=lambda l: l[:23])
    t += datetime.timedelta(minutes=40)
    el = int((t - start).total_seconds())
    out.append(f"{t:%Y-%m-%dT%H:%M:%S}.{rng.randint(0, 999):03d}Z INFO  run.complete delivered={len(delivered)} "
               f"pending={len(parked)} rejected_lines={rejected_total} elapsed={el // 3600:02d}:{el % 3600 // 60:02d}:"
               f"{el % 60:02d}")
    return "\n".join(out)


REJECT_REASONS = [("E104", "barcode not in item master"), ("E131", "sell price below cost floor"),
                  ("E117", "promotion references unknown item"), ("E140", "multibuy group incomplete"),
                  ("E152", "unit of measure mismatch (EA vs PK)"), ("E109", "VAT code not mapped"),
                  ("E160", "label template field overflow")]


def rejected_reasons(stores, total):
    rows = []
    for (code, text), n in zip(REJECT_REASONS, int_split(total - len(REJECT_REASONS), len(REJECT_REASONS))):
        rows.append([code, text, n + 1, rng.randint(1, len(stores)), max(1, (n + 1) // rng.randint(1, 4))])
    sample = []
    for _ in range(14):
        code, text = rng.choice(REJECT_REASONS)
        sample.append([rng.choice(stores).no, f"{rng.randint(100000, 999999)}", f"50{rng.randint(10**10, 10**11 - 1)}",
                       code, money(rng.uniform(0.5, 80))])
    return (psql_table(["code", "reason", "lines", "stores", "distinct_items"], rows, numeric=(2, 3, 4)) + "\n\n" +
            psql_table(["store", "item", "barcode", "code", "sell_price"], sample, numeric=(4,)))


def bundle_dryrun(stores, eff, digest=None, skipped=(), skipped_line=None, parallel=8):
    out = ["pricecast 3.8.2 (build 2026.04.29-1f0c3e)",
           f"effective date {eff}, price master snapshot pm-20260512-0600",
           "reading price master ........ 61,204 items, 2,118 promotions, 412 multibuys",
           f"resolving store overrides ... {len(stores)} stores, {rng.randint(40, 400)} overrides", "",
           " store  zone  items    promos  labels  bytes       digest    result"]
    labels = 0
    for s in stores:
        if s.no in skipped:
            out.append(f" {s.no}  --         -       -       -            -  --------  SKIPPED (agent not enrolled)")
            continue
        n_lab = rng.randint(2000, 5200)
        labels += n_lab
        out.append(f" {s.no}  Z{rng.randint(1, 4)}   {rng.randint(46000, 61000):>7,}  {rng.randint(1400, 2118):>6,}  "
                   f"{n_lab:>6,}  {rng.randint(5_800_000, 8_900_000):>10,}  {hexs(8)}  ok")
    out += ["", "summary", f"  stores: {len(stores)}", "  " + (skipped_line or f"skipped_stores: {len(skipped)}"),
            f"  items changed: {rng.randint(2100, 4800):,}", f"  labels queued: {labels:,}",
            f"  bundle digest: {digest or hexs(12)}",
            f"  est. transfer: 00:{rng.randint(25, 59):02d}:{rng.randint(0, 59):02d} at {parallel} parallel",
            "dry run: nothing written, nothing scheduled"]
    return "\n".join(out)


def schedule_list(now, hotfix=True, cancelled=False):
    rows = [["q-20931", "w2", "full", "pb-0512-w2", "2026-05-12 22:45", 22, "queued"],
            ["q-20927", "legacy", "delta", "pb-0512-lg", "2026-05-12 23:30", len(STORES) - 28, "queued"],
            ["q-20928", "w1", "delta", "pb-0512-w1", "2026-05-12 23:30", 6, "queued"],
            ["q-20914", "legacy", "delta", "pb-0511-lg", "2026-05-11 23:30", len(STORES) - 6, "done"],
            ["q-20915", "w1", "delta", "pb-0511-w1", "2026-05-11 23:30", 6, "done"],
            ["q-20916", "w2", "shadow", "pb-0511-w2", "2026-05-12 01:00", 22, "done (2 parked)"]]
    if hotfix:
        rows.insert(0, ["q-20934", "legacy", "hotfix", "pb-0512-hf1", "2026-05-12 14:00", 38,
                        "cancelled" if cancelled else "queued"])
    qid = 20913
    for d in range(10, 3, -1):
        for grp, n in ([("w1", 6)] if d >= 5 else []) + [("legacy", len(STORES) - 6 if d >= 5 else len(STORES))]:
            rows.append([f"q-{qid}", grp, "delta", f"pb-05{d:02d}-{'lg' if grp == 'legacy' else grp}",
                         f"2026-05-{d:02d} 23:30", n, "done"])
            qid -= rng.randint(1, 3)
    return (f"queue as of {now:%Y-%m-%d %H:%M} (store local times)\n\n" +
            table(["ID", "GROUP", "KIND", "BUNDLE", "NOT BEFORE", "STORES", "STATE"], rows, right=(5,)) +
            "\n\npolicy: groups' [window] sections apply to kind=full|delta|shadow; kind=hotfix uses the request's "
            "own not-before time\n" + ("q-20934: cancelled by fstrachan" if cancelled else ""))


# ---------------------------------------------------------------------------
# Inventory sync (invsync).

def invsync_status(now, hot=None):
    rows = []
    for name, key, _ in REGIONS:
        lag = rng.randint(30, 400)
        pend = rng.randint(100, 6000)
        state = "running"
        if key == hot:
            lag, pend, state = rng.randint(2400, 5000), rng.randint(30000, 60000), "degraded"
        rows.append([key, state, len(region_stores(key)), f"{lag // 60:02d}:{lag % 60:02d}", f"{pend:,}",
                     f"{(now - datetime.timedelta(seconds=rng.randint(3, 200))):%H:%M:%S}", rng.randint(0, 3),
                     "1.7.3"])
    out = [f"invsyncctl 1.7.3 -- workers on invsync-01, invsync-02 ({now:%Y-%m-%d %H:%M:%S})", "",
           table(["WORKER", "STATE", "STORES", "LAG", "PENDING", "LAST BATCH", "ERR/1h", "VERSION"], rows,
                 right=(2, 4, 6)), "", "recent alerts:"]
    alerts = []
    for _ in range(rng.randint(4, 7)):
        k = rng.choice(REGIONS)[1]
        alerts.append(f"  {(now - datetime.timedelta(minutes=rng.randint(5, 600))):%H:%M}  {k:<11} "
                      f"{rng.choice(['lag above 900s for 10m', 'dead letter: 3 deltas (unknown sku)', 'api 429 from inventory, backing off', 'batch retried (timeout)'])}")
    out += sorted(alerts)
    out += ["", "throughput, deltas applied per 10 minutes (newest last):"]
    for name, key, _ in REGIONS:
        out.append(f"  {key:<11} " + " ".join(f"{rng.randint(200, 4000):>5}" for _ in range(9)))
    out += ["", "dead letter: " + f"{rng.randint(40, 300)} deltas in invsync.dead_letter (oldest "
            f"{(now - datetime.timedelta(hours=rng.randint(5, 40))):%Y-%m-%d %H:%M})"]
    return "\n".join(out)


def invsync_yaml(v):
    return [
        "# invsync worker: stock deltas from StoreLink to the Tillwise inventory API",
        "# for the stores listed in stores_file; one worker process per file.",
        "worker:",
        "  stores_file: stores.txt",
        "  log_level: info",
        f"  shard: {rng.randint(1, 2)}",
        "source:",
        "  kind: storelink-sql",
        "  server: SQLSL-LDS01\\STORELINK",
        "  database: StoreLink",
        "  table: dbo.StockDelta",
        "  " + (v.get("poll") or f"poll_interval_s: {nz('poll_interval_s')}"),
        "  " + (v.get("batch") or f"max_batch_rows: {nz('max_batch_rows')}"),
        "  order_by: DeltaId",
        "  read_committed_snapshot: true",
        "target:",
        "  api: https://inventory.api.tillwise.cloud/v3",
        "  tenant: pennock-hale-prod",
        "  auth: client_credentials",
        "  client_id_env: INVSYNC_CLIENT_ID",
        "  secret_env: INVSYNC_CLIENT_SECRET",
        f"  request_timeout_s: {rng.choice([15, 20, 30])}",
        f"  max_inflight: {v.get('inflight', rng.choice([2, 4]))}",
        "apply:",
        f"  conflict_policy: {rng.choice(['newest_wins', 'newest_wins', 'store_wins'])}",
        "  negative_onhand: clamp_zero",
        "  dedupe_window_s: 900",
        "  dead_letter: invsync.dead_letter",
        "alerts:",
        "  backlog_warn: 20000",
        "  lag_warn_s: 900",
        "  page_after_s: 3600",
        "metrics:",
        "  statsd: 127.0.0.1:8125",
        "  prefix: invsync.worker",
        "mapping:",
        "  sku: ItemCode -> sku",
        "  location: StoreNo -> store_id (via stores_file)",
        "  quantity: QtyDelta -> delta_units",
        "  reason: ReasonCode -> reason (map: reasons.yaml)",
        "  skip_reasons: [PRICE_ONLY, LABEL_REPRINT]",
        "retries:",
        f"  max_attempts: {rng.choice([3, 5])}",
        "  backoff: exponential",
        f"  backoff_cap_s: {rng.choice([60, 120])}",
        "logging:",
        "  file: /var/log/invsync/${worker}.log",
        "  rotate_mb: 200",
        "  keep: 14",
    ]


def invsync_log(n, start, warn_line):
    out = []
    t = start
    batch = rng.randint(800000, 900000)
    pending = rng.randint(30000, 50000)
    warn_at = n - rng.randint(5, 12)
    for k in range(n):
        t += datetime.timedelta(seconds=rng.uniform(20, 70))
        stamp = f"{t:%Y-%m-%d %H:%M:%S},{rng.randint(0, 999):03d}"
        if k == warn_at:
            out.append(f"{stamp} WARN  [monitor] {warn_line} above backlog_warn=20000, lag_s={rng.randint(2400, 4800)}")
            continue
        r = rng.random()
        if r < 0.6:
            batch += 1
            rows = rng.randint(300, 2000)
            pending += rng.randint(-900, 1400)
            out.append(f"{stamp} INFO  [applier] batch={batch} rows={rows} applied={rows - rng.choice([0, 0, 1, 2])} "
                       f"conflicts={rng.choice([0, 0, 1, 3])} pending={pending} took={rng.uniform(2, 19):.1f}s")
        elif r < 0.75:
            out.append(f"{stamp} WARN  [target] HTTP 429 from /v3/stock/deltas:batch, retry after {rng.choice([2, 5, 10])}s")
        elif r < 0.85:
            out.append(f"{stamp} INFO  [source] polled dbo.StockDelta: {rng.randint(200, 4000)} new rows "
                       f"(DeltaId > {rng.randint(90_000_000, 99_000_000)})")
        elif r < 0.93:
            out.append(f"{stamp} WARN  [applier] batch={batch} timeout after 30.0s, retrying (1/3)")
        else:
            out.append(f"{stamp} INFO  [auth] token refreshed, expires in 3599s")
    return "\n".join(out)


def delta_summary(unapplied, stores, now):
    rec = {"unapplied_deltas": unapplied if unapplied is not None else rng.randint(300, 2900),
           "oldest_pending": ts(now - datetime.timedelta(hours=rng.randint(3, 7))) + "+01",
           "newest_pending": ts(now - datetime.timedelta(seconds=rng.randint(5, 60))) + "+01",
           "stores_affected": len(stores), "skus_affected": rng.randint(2000, 9000),
           "dead_lettered": rng.randint(0, 40), "checked_at": ts(now) + "+01"}
    rows = [[s.no, rng.randint(40, 900), ts(now - datetime.timedelta(minutes=rng.randint(20, 400)), ms=False),
             rng.randint(20, 700), rng.choice(["", "", "", "api 429"])] for s in stores]
    hours = [[f"{h:02d}:00", rng.randint(50, 900), rng.randint(0, 40)] for h in range(4, now.hour + 1)]
    return (psql_expanded([rec], KEYS_DELTA) + "\n\n" + psql_table(["store", "unapplied", "oldest", "skus",
                                                                      "last_error"], rows, numeric=(1, 3)) +
            "\n\n" + psql_table(["created_hour", "unapplied", "retried"], hours, numeric=(1, 2)))


def dead_letters(n, now):
    rows = []
    for _ in range(n):
        s = rng.choice(STORES)
        rows.append([rng.randint(90_000_000, 99_000_000), s.no, f"{rng.randint(100000, 999999)}",
                     rng.choice(["-", "+"]) + str(rng.randint(1, 48)),
                     rng.choice(["unknown sku", "unknown sku", "store not enrolled", "negative onhand after clamp",
                                 "stale delta (superseded)"]),
                     ts(now - datetime.timedelta(minutes=rng.randint(30, 2400)), ms=False)])
    rows.sort(key=lambda r: r[5], reverse=True)
    return psql_table(["delta_id", "store", "sku", "qty", "reason", "dead_lettered_at"], rows, numeric=(0,))


# ---------------------------------------------------------------------------
# Gateways.

def gateway_settings(v):
    return [
        "{",
        '  "Logging": {',
        '    "LogLevel": {',
        '      "Default": "Information",',
        '      "Microsoft.AspNetCore": "Warning",',
        '      "Polly": "Warning"',
        "    }",
        "  },",
        '  "Kestrel": {',
        '    "Endpoints": {',
        '      "Https": {',
        '        "Url": "https://0.0.0.0:8443",',
        '        "Certificate": { "Path": "/etc/gw/tls/tls.crt", "KeyPath": "/etc/gw/tls/tls.key" }',
        "      }",
        "    }",
        "  },",
        '  "Upstream": {',
        f'    "BaseUrl": "{v["base"]}",',
        "    " + (v.get("timeout") or f'"RequestTimeoutMs": {nz("RequestTimeoutMs")}') + ",",
        f'    "MaxRetries": {v.get("retries", rng.choice([1, 2, 3]))},',
        f'    "RetryBaseDelayMs": {rng.choice([100, 200, 250])},',
        "    " + (v.get("breaker") or f'"CircuitBreakerThreshold": {nz("CircuitBreakerThreshold")}') + ",",
        f'    "CircuitBreakerBreakSeconds": {rng.choice([15, 30, 60])},',
        f'    "MaxConnectionsPerServer": {rng.choice([32, 64, 128])},',
        '    "UseHttp2": true,',
        f'    "ClientCertificateThumbprint": "{hexs(40).upper()}"',
        "  },",
        '  "Secondary": {',
        f'    "BaseUrl": "{v["secondary"]}",',
        f'    "RequestTimeoutMs": {nz("RequestTimeoutMs")},',
        '    "Enabled": ' + v.get("secondary_on", "true"),
        "  },",
        '  "Queue": {',
        '    "Kind": "Redis",',
        f'    "ConnectionString": "{v["redis"]}:6380,ssl=true,abortConnect=false",',
        f'    "MaxDepth": {rng.choice([20000, 50000, 100000])},',
        f'    "DrainWorkers": {rng.choice([4, 8, 12])},',
        '    "StoreAndForwardWhenUpstreamDown": ' + v.get("saf", "true"),
        "  },",
        '  "Stores": {',
        '    "AllowedCidrs": [ "10.40.0.0/13", "10.250.0.0/16" ],',
        '    "RequireClientCert": true,',
        '    "PerStoreRateLimitPerMinute": ' + str(rng.choice([600, 1200, 2400])),
        "  },",
        '  "HealthChecks": {',
        '    "DetailPath": "/health/detail",',
        f'    "UpstreamProbeSeconds": {rng.choice([10, 15, 30])}',
        "  },",
        '  "Telemetry": {',
        '    "OtlpEndpoint": "http://otel-collector.observability:4317",',
        '    "ServiceNamespace": "store-gateways"',
        "  }",
        "}",
    ]


def health_json(now, version, routes, p95_line=None, queue_line=None):
    def check(name, status, fields):
        return ("    {\n" + f'      "name": "{name}",\n      "status": "{status}",\n' +
                ",\n".join(f"      {f}" for f in fields) + "\n    }")

    p95 = p95_line or f'"p95_upstream_ms": {rng.randint(90, 380)}'
    checks = [check("upstream-primary", "Degraded" if p95_line else "Healthy",
                    [p95, f'"p99_upstream_ms": {rng.randint(900, 2400)}', f'"error_rate_5m": {rng.uniform(0, 0.03):.4f}',
                     '"breaker": "closed"', f'"last_probe_utc": "{now - datetime.timedelta(hours=1, seconds=rng.randint(2, 14)):%Y-%m-%dT%H:%M:%SZ}"']),
              check("upstream-secondary", "Healthy",
                    [f'"p95_upstream_ms": {rng.randint(90, 380)}', f'"p99_upstream_ms": {rng.randint(400, 900)}',
                     f'"error_rate_5m": {rng.uniform(0, 0.01):.4f}', '"breaker": "closed"']),
              check("queue", "Degraded" if queue_line else "Healthy",
                    [queue_line or f'"queue_depth": {rng.randint(0, 40)}', f'"oldest_item_s": {rng.randint(1, 900)}',
                     f'"drain_rate_per_min": {rng.randint(200, 2400)}']),
              check("redis", "Healthy", [f'"ping_ms": {rng.uniform(0.3, 2.5):.2f}', '"role": "master"']),
              check("tls-client-certs", "Healthy", [f'"stores_presenting": {rng.randint(120, 142)}',
                                                     f'"expiring_30d": {rng.randint(0, 5)}'])]
    rts = []
    for r in routes:
        rts.append("    { " + f'"route": "{r}", "rpm": {rng.randint(5, 900)}, "p50_ms": {rng.randint(20, 140)}, '
                   f'"p95_ms": {rng.randint(150, 900)}, "errors_5m": {rng.randint(0, 30)}' + " }")
    body = ("{\n" + f'  "status": "{"Degraded" if p95_line or queue_line else "Healthy"}",\n  "version": "{version}",\n'
            f'  "uptime_s": {rng.randint(200000, 2000000)},\n  "instance": "gw-{hexs(9)}-{hexs(5)}",\n'
            '  "checks": [\n' + ",\n".join(checks) + "\n  ],\n  \"routes\": [\n" + ",\n".join(rts) + "\n  ],\n"
            f'  "stores_connected": {rng.randint(118, 140)}\n' + "}")
    return ("HTTP/1.1 200 OK\n" + f"Date: {now:%a, %d %b %Y %H:%M:%S} GMT\nContent-Type: application/json; charset=utf-8\n"
            f"Cache-Control: no-store\nServer: Kestrel\nX-Request-Id: 0HN{hexs(9).upper()}:00000002\n"
            f"Content-Length: {len(body)}\n\n" + body)


def points_mismatch(mismatched, stores, now):
    rec = {"accounts_compared": rng.randint(380000, 460000), "mismatched_accounts": mismatched,
           "points_diff_total": -rng.randint(8000, 40000), "max_abs_diff": rng.choice([1200, 2400, 3000, 4500]),
           "stores_involved": len(stores), "checked_at": ts(now) + "+01"}
    lines = psql_expanded([rec], KEYS_POINTS).split("\n")
    rows = []
    for _ in range(18):
        lp = rng.randint(100, 9000)
        d = rng.choice([-1, -1, 1]) * rng.choice([50, 100, 150, 200, 250, 400, 1200])
        rows.append([f"M*****{rng.randint(1000, 9999)}", lp, lp + d, d, rng.choice(stores).no,
                     ts(now - datetime.timedelta(days=rng.randint(1, 7), minutes=rng.randint(0, 900)), ms=False),
                     rng.choice(["earn_offline", "earn_offline", "redeem_reversal", "manual_adjust"])])
    return "\n".join(lines) + "\n\n" + psql_table(
        ["member", "legacy_points", "tillwise_points", "diff", "last_store", "last_txn_at", "last_kind"], rows,
        numeric=(1, 2, 3))


def gateway_log(n, start, routes):
    out = []
    t = start
    for _ in range(n):
        t += datetime.timedelta(seconds=rng.uniform(0.2, 6))
        r = rng.random()
        s = rng.choice(STORES)
        stamp = f"{t:%Y-%m-%dT%H:%M:%S}.{rng.randint(0, 999):03d}Z"
        if r < 0.62:
            out.append(f'{stamp} info  req {rng.choice(routes)} store={s.no} lane={rng.randint(1, s.lanes)} '
                       f'status=200 upstream_ms={rng.randint(80, 700)} total_ms={rng.randint(90, 760)}')
        elif r < 0.75:
            out.append(f'{stamp} warn  req {rng.choice(routes)} store={s.no} status=504 upstream_ms='
                       f'{rng.choice([3000, 3100, 5000])} reason="upstream timeout" retry=1')
        elif r < 0.85:
            out.append(f'{stamp} info  breaker upstream-primary state=closed failures_window={rng.randint(0, 6)}')
        elif r < 0.93:
            out.append(f'{stamp} warn  tls store={s.no} client cert expires in {rng.randint(3, 29)}d')
        else:
            out.append(f'{stamp} info  queue drained {rng.randint(1, 60)} items depth={rng.randint(0, 30)}')
    return "\n".join(out)


def ped_csv(stores, n):
    out = ['"store","lane","ped_serial","model","firmware","key_slot","p2pe_state","last_txn_utc"']
    for _ in range(n):
        s = rng.choice(stores)
        state = rng.choice(["injected", "injected", "injected", "injected", "pending_injection", "legacy_key"])
        fields = [s.no, rng.randint(1, s.lanes), f"PX4-{rng.randint(1000, 9999)}-{rng.randint(10000, 99999)}",
                  rng.choice(['Lane/3000', 'Lane/3000', 'Move/5000']), rng.choice(['11.42.3', '11.42.3', '11.40.1']),
                  'K2' if state == 'injected' else 'K1', state,
                  f"2026-05-12T0{rng.randint(7, 9)}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}Z"]
        out.append(",".join(f'"{x}"' for x in fields))
    return "\n".join(out)


# ---------------------------------------------------------------------------
# Scheduler: replenishment jobs.

def repl_yaml(v, stores=STORES):
    return [
        "# Nightly replenishment orders for one distribution centre's stores.",
        "# The job id is this file's name; schedctl loads every file in this folder.",
        "schedule:",
        f'  cron: "{v["cron"]}"',
        "  timezone: Europe/London",
        "  catchup: false",
        f"  timeout_minutes: {rng.choice([60, 90, 120])}",
        "  retries: 1",
        "inputs:",
        "  sales:",
        "    migrated_stores: tillwise-export     # tillwise_sales_export, 00:20",
        "    legacy_stores: storelink-eod         # eod_collect_*, 23:30",
        "    wait_for_complete: true",
        f"    wait_max_minutes: {rng.choice([30, 45, 60])}",
        "  stock: invsync-snapshot",
        "  forecasts: s3://phl-forecast/weekly/latest/",
        "ordering:",
        "  " + (v.get("cutoff") or f'order_cutoff: "{nz("order_cutoff")}"'),
        f"  lead_time_days: {rng.choice([1, 2, 2, 3])}",
        "  review_period_days: 1",
        "  safety_stock: service_level_95",
        "  pack_rounding: case",
        f"  min_order_lines_per_store: {rng.choice([10, 20, 25])}",
        f"  max_order_value_gbp: {rng.choice([12000, 18000, 25000])}",
        "output:",
        "  format: EDIFACT ORDERS D96A",
        "  sftp: wms-gw01.phl.internal:/inbound/orders",
        "  archive: s3://phl-repl-archive/orders/",
        "calendar:",
        "  no_delivery: [2026-05-25, 2026-08-31, 2026-12-25, 2026-12-26]",
        "  double_delivery_before_bank_holiday: true",
        "overrides:",
        "  # per-store exceptions agreed with the DC; stores not listed use the values above",
        f"  - {{store: \"{rng.choice(stores).no}\", lead_time_days: 3, note: {v.get('far', 'long haul')}}}",
        f"  - {{store: \"{rng.choice(stores).no}\", max_order_value_gbp: 30000, note: garden centre extension}}",
        f"  - {{store: \"{rng.choice(stores).no}\", min_order_lines_per_store: 5, note: small format}}",
        "notify:",
        "  on_failure: [storesys-alerts, dc-planning]",
        "  on_late: [dc-planning]",
    ]


def schedctl_runs(failed_id, n=20):
    rows = []
    d = clock(1, 15, 2)
    rid = int(failed_id) if failed_id else rng.randint(7600000, 7699999)
    for k in range(n):
        start = d - datetime.timedelta(days=k, seconds=-rng.randint(0, 3))
        if k == 0 and failed_id:
            dur = rng.randint(2600, 2800)
            rows.append([failed_id, f"{start:%Y-%m-%d %H:%M:%S}",
                         f"{start + datetime.timedelta(seconds=dur):%Y-%m-%d %H:%M:%S}",
                         f"{dur // 3600:02d}:{dur % 3600 // 60:02d}:{dur % 60:02d}", "FAILED", 3, 0, "schedule"])
            continue
        dur = rng.randint(1100, 1900)
        rid_k = str(rid - k * rng.randint(1990, 2040))
        rows.append([rid_k, f"{start:%Y-%m-%d %H:%M:%S}", f"{start + datetime.timedelta(seconds=dur):%Y-%m-%d %H:%M:%S}",
                     f"{dur // 3600:02d}:{dur % 3600 // 60:02d}:{dur % 60:02d}", "SUCCEEDED", 0,
                     f"{rng.randint(31000, 44000):,}", "schedule"])
    return (table(["RUN ID", "STARTED", "ENDED", "DURATION", "STATUS", "EXIT", "ORDER LINES", "TRIGGER"], rows,
                  right=(5, 6)) + f"\n\n{n} runs, {sum(1 for r in rows if r[4] == 'SUCCEEDED')} succeeded; median "
            f"duration 00:{rng.randint(19, 29)}:{rng.randint(0, 59):02d}")


def repl_log(n, start, stores, written_line=None, fail=False):
    out = []
    clock_ = [start]

    def log(level, msg, after=None):
        clock_[0] += after or datetime.timedelta(milliseconds=rng.randint(5, 900))
        t = clock_[0]
        out.append(f"{t:%Y-%m-%d %H:%M:%S},{t.microsecond // 1000:03d} {level:<5} {msg}")

    migrated = [s for s in stores if s.wave == 1]
    log("INFO", f"run start (attempt 1 of 2), business date {start - datetime.timedelta(days=1):%Y-%m-%d}")
    log("INFO", f"stores: {len(stores)} ({len(migrated)} on tillwise, {len(stores) - len(migrated)} on storelink)")
    log("INFO", f"stock snapshot: invsync-snapshot {start:%Y%m%d}T0030 ({rng.randint(1_200_000, 2_400_000)} rows)")
    log("INFO", f"forecasts: s3://phl-forecast/weekly/latest/ (week {start:%G-W%V}, {rng.randint(40, 90)} MB)")
    for s in stores[:n]:
        log("INFO", f"store {s.no}: sales {rng.randint(600, 3400)} lines ("
                    f"{'tillwise-export' if s.wave == 1 else 'storelink-eod'}), stock snapshot "
                    f"{rng.randint(28000, 61000)} skus, forecast ok", datetime.timedelta(seconds=rng.uniform(3, 40)))
    if fail:
        for k in range(rng.randint(6, 9)):
            log("WARN", "sales input tillwise-export: export manifest not complete (0 of "
                        f"{len(migrated)} stores), waiting (wait_max_minutes=45)", datetime.timedelta(minutes=5))
        log("ERROR", "sales input tillwise-export: not complete after 45 minutes; refusing to order on partial sales",
            datetime.timedelta(minutes=2))
        log("ERROR", "run failed: exit 3 (inputs incomplete)")
        log("INFO", "notified storesys-alerts, dc-planning")
        return "\n".join(out)
    log("INFO", f"sales input tillwise-export: complete ({len(migrated)} stores)")
    for _ in range(rng.randint(6, 10)):
        log("INFO", f"ordering: {rng.randint(1200, 6000)} lines proposed for store {rng.choice(stores).no}, "
                    f"{rng.randint(0, 40)} capped at max_order_value_gbp", datetime.timedelta(seconds=rng.uniform(20, 90)))
    log("INFO", written_line or f"order lines written: {rng.randint(30000, 60000)}", datetime.timedelta(seconds=40))
    log("INFO", f"EDI interchange ORD{start:%m%d}{rng.randint(100, 999)} sent to wms-gw01 ({rng.randint(900, 3000)} KB)")
    log("INFO", "archived to s3://phl-repl-archive/orders/")
    log("INFO", "run succeeded")
    return "\n".join(out)


# ---------------------------------------------------------------------------
# Sales reconciliation.

def split_total(total, parts, lo):
    """`parts` values of at least `lo` (in magnitude) that add up to `total` exactly (in cents)."""
    cents = round(abs(total) * 100)
    cuts = sorted(rng.sample(range(int(lo * 100), cents - int(lo * 100)), parts - 1)) if parts > 1 else []
    vals, prev = [], 0
    for c in cuts + [cents]:
        vals.append(c - prev)
        prev = c
    sign = -1 if total < 0 else 1
    return [sign * v / 100 for v in vals]


def recon_report(stores, bdate, now, missing=None, variance=None, unmatched=None, must=(), stale=()):
    """Legacy vs Tillwise for one business date over `stores`; totals follow the per-store rows."""
    if missing is None:
        missing = rng.choice([0, rng.randint(1, 30)])
    if variance is None:
        variance = -rng.randint(0, 9000) / 100
    if unmatched is None:
        unmatched = rng.randint(0, 14)
    n_var = min(len(stores), rng.randint(3, 6)) if variance else 0
    forced = [k for k, s in enumerate(stores) if s.no in must][:n_var]
    var_stores = set(forced) | set(rng.sample([k for k in range(len(stores)) if k not in forced], n_var - len(forced)))
    parts = sorted(split_total(variance, n_var, 0.5), key=abs, reverse=True) if n_var else []
    order = forced + [k for k in sorted(var_stores) if k not in forced]
    part_of = dict(zip(order, parts))
    n_miss = min(len(stores), max(1, missing // 12)) if missing else 0
    cuts = sorted(rng.sample(range(1, missing), n_miss - 1)) if n_miss > 1 else []
    miss_parts = [b - a for a, b in zip([0] + cuts, cuts + [missing])] if n_miss else []
    miss_stores = dict(zip(rng.sample(range(len(stores)), n_miss), miss_parts))
    rows = []
    tl = tn = 0
    nl = nn = 0.0
    for k, s in enumerate(stores):
        tx = rng.randint(600, 2100)
        miss = miss_stores.get(k, 0)
        net = rng.uniform(9000, 38000)
        diff = part_of.get(k, 0.0)
        rows.append([s.no, f"{tx:,}", f"{tx - miss:,}", money(net), money(net + diff), f"{diff:.2f}",
                     "ok" if abs(diff) < 0.005 and not miss else "VAR"])
        tl, tn, nl, nn = tl + tx, tn + tx - miss, nl + net, nn + net + diff
    gross = nl * rng.uniform(1.03, 1.06)
    out = [f"recon 1.9.4 -- sales reconciliation, business date {bdate}",
           f"source A: StoreLink (SQLSL-LDS01)   source B: Tillwise reporting replica   run {now:%Y-%m-%d %H:%M:%S}",
           f"stores in scope: {len(stores)} ({sum(1 for s in stores if s.wave == 1)} on Tillwise, "
           f"{sum(1 for s in stores if s.wave != 1)} dual-running)", "",
           table(["store", "txns_A", "txns_B", "net_A", "net_B", "diff", ""], rows, right=(1, 2, 3, 4, 5)), "",
           "totals (A / B)",
           "  " + dots("Transactions", f"{tl:,} / {tn:,}"),
           "  " + dots("Missing in target", missing),
           "  " + dots("Extra in target", rng.choice([0, 0, 1, 2])),
           "  " + dots("Gross sales", f"{money(gross)} / {money(gross + variance)}"),
           "  " + dots("Discounts", f"-{money(gross - nl)} / -{money(gross - nl)}"),
           "  " + dots("Net sales", f"{money(nl)} / {money(nn)}"),
           "  " + dots("Tender card", f"{money(nl * 0.81)} / {money(nl * 0.81 + variance * 0.7)}"),
           "  " + dots("Tender cash", f"{money(nl * 0.12)} / {money(nl * 0.12 + variance * 0.3)}"),
           "  " + dots("Tender gift card", f"{money(nl * 0.04)} / {money(nl * 0.04)}"),
           "  " + dots("Tender points", f"{money(nl * 0.03)} / {money(nl * 0.03)}"),
           "  " + dots("Unmatched tenders", unmatched),
           "  " + dots("Net variance", f"{variance:.2f}"), "", "source freshness (last file / last event received)"] + [
               f"  {s.no}  storelink {clock(23, rng.randint(30, 59), day=-10 if s.no in stale else -1):%m-%d %H:%M}"
               f"   tillwise "
               f"{clock(rng.randint(0, 1), rng.randint(0, 59)):%m-%d %H:%M}" for s in stores] + ["",
           f"status: {'VARIANCE' if abs(variance) > 50 or missing else 'WITHIN TOLERANCE'} "
           "(tolerance 50.00 per region and day)",
           "report: /srv/recon/out/" + f"{bdate}/{hexs(6)}.html"]
    return "\n".join(out)


def tender_rows(stores, gift_amount=None):
    per_store, by_tender = [], []
    totals = {"CARD": [0, 0.0], "CASH": [0, 0.0], "POINTS": [0, 0.0]}
    for s in stores:
        txns, net = rng.randint(600, 2100), rng.uniform(9000, 38000)
        per_store.append([s.no, txns, f"{net:.2f}"])
        for t, share, tx_share in [("CARD", rng.uniform(0.76, 0.84), 0.78), ("CASH", rng.uniform(0.1, 0.14), 0.2),
                                   ("POINTS", rng.uniform(0.02, 0.04), 0.05)]:
            n_tx, amt = int(txns * tx_share * rng.uniform(0.9, 1.1)), net * share
            by_tender.append([s.no, t, n_tx, f"{amt:.2f}"])
            totals[t][0] += n_tx
            totals[t][1] += amt
    tenders = [["CARD", totals["CARD"][0], f"{totals['CARD'][1]:.2f}"],
               ["CASH", totals["CASH"][0], f"{totals['CASH'][1]:.2f}"],
               ["POINTS", totals["POINTS"][0], f"{totals['POINTS'][1]:.2f}"],
               ["GIFTCARD", rng.randint(120, 260), gift_amount or f"{rng.uniform(2000, 5200):.2f}"],
               ["VOUCHER", rng.randint(40, 120), f"{rng.uniform(600, 1800):.2f}"],
               ["ACCOUNT", rng.randint(5, 40), f"{rng.uniform(900, 6000):.2f}"],
               ["CHANGE", rng.randint(1800, 2600), f"-{rng.uniform(3000, 6000):.2f}"]]
    return per_store, tenders, by_tender


def sqlcmd_tenders(stores, gift_amount=None):
    per_store, tenders, by_tender = tender_rows(stores, gift_amount)
    return ("Changed database context to 'StoreLink'.\n" +
            sqlcmd_table(["StoreNo", "Txns", "NetSales"], per_store, numeric=(1, 2)) + "\n" +
            sqlcmd_table(["TenderType", "Txns", "Amount"], tenders, numeric=(1, 2)) + "\n" +
            sqlcmd_table(["StoreNo", "TenderType", "Txns", "Amount"], by_tender, numeric=(2, 3)))


def psql_tenders(stores):
    per_store, tenders, by_tender = tender_rows(stores)
    return (psql_table(["store", "txns", "net_sales"], per_store, numeric=(1, 2)) + "\n\n" +
            psql_table(["tender", "txns", "amount"], [[t[0].lower(), t[1], t[2]] for t in tenders], numeric=(1, 2)) +
            "\n\n" + psql_table(["store", "tender", "txns", "amount"],
                                 [[a_, b_.lower(), c_, d_] for a_, b_, c_, d_ in by_tender], numeric=(2, 3)))


def signoff_list(now, signed=()):
    rows = []
    for d in range(8, 11):
        for name, key, _ in REGIONS:
            rows.append([key, f"2026-05-{d:02d}", "signed", rng.choice(["ipemberton", "ipemberton", "aokafor"]),
                         f"2026-05-{d + 1:02d} {rng.randint(9, 15):02d}:{rng.randint(0, 59):02d}", ""])
    for name, key, _ in REGIONS:
        st = rng.choice(["signed", "signed", "pending"])
        if key in ("northeast", "yorkshire"):
            st = "signed" if key in signed else "pending"
        rows.append([key, "2026-05-11", st, "ipemberton" if st == "signed" else "-",
                     f"{now - datetime.timedelta(minutes=rng.randint(30, 300)):%Y-%m-%d %H:%M}" if st == "signed" else "-",
                     rng.choice(["", "", "variance explained: offline lane"])])
    return (table(["REGION", "BUSINESS DATE", "STATE", "BY", "AT", "NOTE"], rows) +
            "\n\nsign-off applies to every store of the region for that business date")


# ---------------------------------------------------------------------------
# Store network.

def tunnel_config(mtu_line, peer="195.12.44.10"):
    ip = f"10.250.{rng.randint(1, 60)}.{rng.choice([2, 6, 10, 14])}"
    cfg = ["=== show running-config interface Tunnel100 ===", "Building configuration...", "",
           f"Current configuration : {rng.randint(420, 520)} bytes", "!", "interface Tunnel100",
           " description IPsec to fw-hub-lds01 (primary)", " bandwidth 100000", f" ip address {ip} 255.255.255.252",
           f" {mtu_line}", f" ip tcp adjust-mss {int(mtu_line.split()[-1]) - 40}", " ip ospf network point-to-point",
           " ip ospf cost 100", " tunnel source GigabitEthernet0/0/0", " tunnel mode ipsec ipv4",
           f" tunnel destination {peer}", " tunnel protection ipsec profile PHL-HUB-IPSEC", "end", ""]
    pk = rng.randint(10_000_000, 90_000_000)
    sa = ["=== show crypto ipsec sa interface Tunnel100 ===", "", "interface: Tunnel100",
          f"    Crypto map tag: Tunnel100-head-0, local addr {rng.randint(80, 92)}.{rng.randint(1, 254)}."
          f"{rng.randint(1, 254)}.{rng.randint(2, 250)}", "",
          "   protected vrf: (none)", "   local  ident (addr/mask/prot/port): (0.0.0.0/0.0.0.0/0/0)",
          "   remote ident (addr/mask/prot/port): (0.0.0.0/0.0.0.0/0/0)",
          f"   current_peer {peer} port 4500", "     PERMIT, flags={origin_is_acl,}",
          f"    #pkts encaps: {pk}, #pkts encrypt: {pk}, #pkts digest: {pk}",
          f"    #pkts decaps: {pk + rng.randint(-90000, 90000)}, #pkts decrypt: {pk - 5}, #pkts verify: {pk - 5}",
          "    #pkts compressed: 0, #pkts decompressed: 0",
          "    #pkts not compressed: 0, #pkts compr. failed: 0",
          "    #pkts not decompressed: 0, #pkts decompress failed: 0",
          f"    #send errors 0, #recv errors {rng.randint(0, 40)}", "",
          f"     local crypto endpt.: {rng.randint(80, 92)}.{rng.randint(1, 254)}.{rng.randint(1, 254)}.{rng.randint(2, 250)},"
          f" remote crypto endpt.: {peer}",
          "     plaintext mtu 1438, path mtu 1500, ip mtu 1500, ip mtu idb GigabitEthernet0/0/0",
          f"     current outbound spi: 0x{hexs(8).upper()}(", "     PFS (Y/N): N, DH group: none", "",
          "     inbound esp sas:", f"      spi: 0x{hexs(8).upper()}", "        transform: esp-256-aes esp-sha256-hmac ,",
          "        in use settings ={Tunnel UDP-Encaps, }",
          f"        conn id: {rng.randint(2000, 2999)}, flow_id: ESG:{rng.randint(100, 999)}, sibling_flags FFFFFFFF80000048, crypto map: Tunnel100-head-0",
          f"        sa timing: remaining key lifetime (k/sec): (4607{rng.randint(100, 999)}/{rng.randint(200, 3500)})",
          "        IV size: 16 bytes", "        replay detection support: Y", "        Status: ACTIVE(ACTIVE)", "",
          "     outbound esp sas:", f"      spi: 0x{hexs(8).upper()}", "        transform: esp-256-aes esp-sha256-hmac ,",
          "        in use settings ={Tunnel UDP-Encaps, }",
          f"        sa timing: remaining key lifetime (k/sec): (4607{rng.randint(100, 999)}/{rng.randint(200, 3500)})",
          "        Status: ACTIVE(ACTIVE)", ""]
    drops = ["=== show interfaces Tunnel100 | include MTU|drops|rate ===",
             "  MTU 9976 bytes, BW 100000 Kbit/sec, DLY 50000 usec,",
             f"  Input queue: 0/375/0/0 (size/max/drops/flushes); Total output drops: {rng.randint(0, 9000)}",
             f"  5 minute input rate {rng.randint(200000, 9000000)} bits/sec, {rng.randint(40, 900)} packets/sec",
             f"  5 minute output rate {rng.randint(200000, 3000000)} bits/sec, {rng.randint(40, 700)} packets/sec"]
    return "\n".join(cfg + sa + drops)


ROUTER_TEMPLATE = """{# Store router (ISR 1100): WAN, tunnel to the hub, LAN VLANs. Rendered per store by netcfg. #}
hostname rtr-s{{ store.number }}
!
interface GigabitEthernet0/0/0
 description WAN - {{ store.wan.provider }} {{ store.wan.kind }}
 ip address {{ store.wan.address }} {{ store.wan.mask }}
 negotiation auto
 no cdp enable
!
interface Tunnel100
 description IPsec to fw-hub-lds01 (primary)
 bandwidth {{ store.wan.bandwidth_kbps }}
 ip address {{ store.tunnel.address }} 255.255.255.252
 ip mtu {{ store.tunnel.mtu | default(1400) }}
 ip tcp adjust-mss {{ (store.tunnel.mtu | default(1400)) - 40 }}
 ip ospf network point-to-point
 ip ospf cost 100
 tunnel source GigabitEthernet0/0/0
 tunnel mode ipsec ipv4
 tunnel destination {{ hub.primary }}
 tunnel protection ipsec profile PHL-HUB-IPSEC
!
interface Tunnel101
 description IPsec to fw-hub-lds02 (secondary)
 bandwidth {{ store.wan.bandwidth_kbps }}
 ip address {{ store.tunnel.secondary_address }} 255.255.255.252
 ip mtu {{ store.tunnel.mtu | default(1400) }}
 ip tcp adjust-mss {{ (store.tunnel.mtu | default(1400)) - 40 }}
 ip ospf network point-to-point
 ip ospf cost 200
 tunnel source GigabitEthernet0/0/0
 tunnel mode ipsec ipv4
 tunnel destination {{ hub.secondary }}
 tunnel protection ipsec profile PHL-HUB-IPSEC
!
{% for vlan in store.vlans %}
interface Vlan{{ vlan.id }}
 description {{ vlan.name }}
 ip address {{ vlan.gateway }} {{ vlan.mask }}
 ip helper-address 10.0.10.31
!
{% endfor %}
ip sla 10
 icmp-echo {{ hub.primary_inside }} source-interface Tunnel100
 frequency 10
ip sla schedule 10 life forever start-time now
track 10 ip sla 10 reachability
 delay down 30 up 60
!
router ospf 10
 router-id {{ store.tunnel.address }}
 passive-interface default
 no passive-interface Tunnel100
 no passive-interface Tunnel101
!
ntp server 10.0.10.5
logging host 10.0.12.40
snmp-server location Store {{ store.number }} {{ store.town }}"""


def show_interface(name, crc_text=None, desc="WAN - FTTP"):
    inp = rng.randint(100_000_000, 900_000_000)
    mac = f"{hexs(4)}.{hexs(4)}.{hexs(4)}"
    crc = crc_text or f"{0} CRC"
    errs = int(crc.split()[0]) + (rng.randint(40, 300) if crc_text else 0)
    return "\n".join([
        f"{name} is up, line protocol is up", f"  Hardware is ISR1100-4G, address is {mac} (bia {mac})",
        f"  Description: {desc}",
        f"  Internet address is {rng.randint(80, 92)}.{rng.randint(1, 254)}.{rng.randint(1, 254)}.{rng.randint(2, 250)}/29",
        "  MTU 1500 bytes, BW 100000 Kbit/sec, DLY 10 usec,",
        f"     reliability {255 - (rng.randint(3, 9) if crc_text else 0)}/255, txload {rng.randint(1, 9)}/255, "
        f"rxload {rng.randint(1, 20)}/255", "  Encapsulation ARPA, loopback not set", "  Keepalive not supported",
        "  Full Duplex, 100Mbps, link type is auto, media type is RJ45" if crc_text else
        "  Full Duplex, 1000Mbps, link type is auto, media type is RJ45",
        "  output flow-control is off, input flow-control is off", "  ARP type: ARPA, ARP Timeout 04:00:00",
        "  Last input 00:00:00, output 00:00:00, output hang never",
        f"  Last clearing of \"show interface\" counters {rng.randint(3, 9)}d{rng.randint(0, 23):02d}h",
        "  Input queue: 0/375/0/0 (size/max/drops/flushes); Total output drops: 0", "  Queueing strategy: fifo",
        "  Output queue: 0/40 (size/max)",
        f"  5 minute input rate {rng.randint(1_000_000, 9_000_000)} bits/sec, {rng.randint(100, 900)} packets/sec",
        f"  5 minute output rate {rng.randint(300_000, 3_000_000)} bits/sec, {rng.randint(80, 600)} packets/sec",
        f"     {inp} packets input, {inp * rng.randint(400, 800)} bytes, 0 no buffer",
        f"     Received {rng.randint(100, 5000)} broadcasts (0 IP multicasts)", "     0 runts, 0 giants, 0 throttles",
        f"     {errs} input errors, {crc}, 0 frame, 0 overrun, 0 ignored", "     0 watchdog, 0 multicast, 0 pause input",
        f"     {rng.randint(100_000_000, 700_000_000)} packets output, {rng.randint(10**10, 10**11)} bytes, 0 underruns",
        "     Output 0 broadcasts (0 IP multicasts)", "     0 output errors, 0 collisions, 1 interface resets",
        "     0 unknown protocol drops", "     0 babbles, 0 late collision, 0 deferred",
        "     0 lost carrier, 0 no carrier, 0 pause output", "     0 output buffer failures, 0 output buffers swapped out"])


def link_log(now, flaps):
    out = ["=== show logging | include LINK|LINEPROTO|TRACK ==="]
    t = now - datetime.timedelta(days=2)
    for _ in range(flaps):
        t += datetime.timedelta(minutes=rng.randint(20, 300))
        stamp = f"{t:%b %d %H:%M:%S}.{rng.randint(0, 999):03d} BST"
        out += [f"*{stamp}: %LINK-3-UPDOWN: Interface GigabitEthernet0/0/0, changed state to down",
                f"*{stamp}: %LINEPROTO-5-UPDOWN: Line protocol on Interface GigabitEthernet0/0/0, changed state to down",
                f"*{stamp}: %TRACK-6-STATE: 10 ip sla 10 reachability Up -> Down",
                f"*{stamp}: %LINK-3-UPDOWN: Interface GigabitEthernet0/0/0, changed state to up",
                f"*{stamp}: %TRACK-6-STATE: 10 ip sla 10 reachability Down -> Up"]
    return "\n".join(out)


def ip_sla(now, failures_line):
    out = ["=== show ip sla statistics ===", "IPSLAs Latest Operation Statistics", ""]
    for op, target, fails in [(10, "10.250.0.1", failures_line), (20, "52.56.201.14", None), (30, "10.0.10.5", None)]:
        succ = rng.randint(8000, 8640)
        out += [f"IPSLA operation id: {op}", f"        Latest RTT: {rng.randint(9, 70)} milliseconds",
                f"Latest operation start time: {now - datetime.timedelta(seconds=rng.randint(1, 9)):%H:%M:%S} BST "
                f"{now:%a %b %d %Y}", "Latest operation return code: OK", f"Number of successes: {succ}",
                fails or f"Number of failures: {rng.choice([0, 0, 1, 2, 3])}", "Operation time to live: Forever", ""]
    out += ["=== show ip route track-table ===",
            " ip route 0.0.0.0 0.0.0.0 Tunnel100 track 10 state is [up]",
            " ip route 0.0.0.0 0.0.0.0 Tunnel101 250 (floating, used when track 10 is down)", ""]
    t = now - datetime.timedelta(hours=30)
    out.append("=== show logging | include TRACK ===")
    for _ in range(rng.randint(8, 12)):
        t += datetime.timedelta(minutes=rng.randint(40, 200))
        out += [f"*{t:%b %d %H:%M:%S}.{rng.randint(0, 999):03d} BST: %TRACK-6-STATE: 10 ip sla 10 reachability Up -> Down",
                f"*{(t + datetime.timedelta(seconds=rng.randint(61, 300))):%b %d %H:%M:%S}.{rng.randint(0, 999):03d} BST: "
                "%TRACK-6-STATE: 10 ip sla 10 reachability Down -> Up"]
    out += ["", "=== show track ==="]
    for tr in [10, 20]:
        out += [f"Track {tr}", f"  IP SLA {tr} reachability", "  Reachability is Up",
                f"    {rng.randint(30, 200)} changes, last change {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:"
                f"{rng.randint(0, 59):02d}", "  Delay up 60 secs, down 30 secs",
                f"  Latest operation return code: OK", f"  Latest RTT (millisecs) {rng.randint(9, 70)}",
                "  Tracked by:", f"    Static IP Routing 0", ""]
    return "\n".join(out).rstrip()


def switch_status(n_ports=24):
    rows = []
    for p in range(1, n_ports + 1):
        if p <= 12:
            name, vlan = f"LANE{p:02d}" if p <= 10 else "BOS01", 20 if p <= 10 else 10
        elif p <= 16:
            name, vlan = rng.choice(["AP-SHOPFLOOR", "AP-YARD", "AP-WAREHOUSE"]), "trunk"
        elif p <= 20:
            name, vlan = rng.choice(["SEL-PRN", "KIOSK", "CCTV-NVR", "DOOR-CTRL"]), 30
        else:
            name, vlan = "", 1
        status = "err-disabled" if p in (14, 17) else "connected" if name else "notconnect"
        rows.append([f"Gi1/0/{p}", name, status, vlan, "a-full" if status == "connected" else "auto",
                     rng.choice(["a-1000", "a-100"]) if status == "connected" else "auto", "10/100/1000BaseTX"])
    rows += [["Te1/1/1", "UPLINK-RTR", "connected", "trunk", "full", "10G", "SFP-10GBase-SR"],
             ["Te1/1/2", "", "notconnect", 1, "full", "10G", "unknown"]]
    return ("=== show interfaces status ===\n" + table(["Port", "Name", "Status", "Vlan", "Duplex", "Speed", "Type"],
                                                      rows, gap=" ") +
            "\n\n=== show errdisable recovery | include Enabled|psecure|bpdu ===\n"
            "ErrDisable Reason            Timer Status\n-----------------            --------------\n"
            "bpduguard                    Enabled\npsecure-violation            Disabled\n"
            "\nTimer interval: 300 seconds")


# ---------------------------------------------------------------------------
# Cutover rehearsals and the night.

CUT_STEPS = [("freeze legacy price and promotion changes", "stores", 1),
             ("final StoreLink end-of-day export", "stores", 9),
             ("drain lane journals to Tillwise", "lanes", 7),
             ("switch lanes to Tillwise (agent policy)", "lanes", 6),
             ("repoint PEDs to the new payments route", "peds", 5),
             ("activate pre-staged price bundle", "stores", 4),
             ("invsync: stop legacy worker for stores", "central", 1),
             ("stock snapshot handover", "stores", 8),
             ("loyalty: switch earn/burn to Tillwise", "central", 2),
             ("smoke test: sale, refund, gift card, points", "lanes", 6),
             ("mark stores live; keep StoreLink read-only 30 days", "central", 1)]


def cutover_dryrun(stores, offline_line=None, blocking_line=None, rollback=None, warn_stores=(), block_stores=()):
    out = ["cutover 2.3.1 -- DRY RUN, nothing will be changed", f"plan: {len(CUT_STEPS)} steps, {len(stores)} stores", "",
           table(["step", "action", "scope", "est."],
                 [[k, a, sc, f"00:{m:02d}"] for k, (a, sc, m) in enumerate(CUT_STEPS, 1)], right=(0,)), "",
           "preflight"]
    rows = []
    for s in stores:
        res = "pass"
        note = ""
        if s.no in block_stores:
            res, note = "BLOCK", rng.choice(["agent not enrolled", "PED keys not injected (3 lanes)",
                                             "vpn secondary down", "stock snapshot stale > 24h"])
        elif s.no in warn_stores:
            res = "warn"
            note = warn_stores[s.no] if isinstance(warn_stores, dict) else rng.choice(
                ["journal backlog 40+", "label printer offline", "PED keys pending (2 lanes)"])
        rows.append([s.no, rng.choice(["2016", "2016", "2019"]), "4.12.9" if res != "BLOCK" else "-",
                     f"{s.lanes}/{s.lanes}", f"{s.lanes}/{s.lanes}", "up", f"{rng.uniform(0, 40):.1f}s", res, note])
    out.append(table(["store", "bos", "agent", "lanes", "peds", "vpn", "db_sync", "result", "note"], rows))
    n_block = len(block_stores)
    out += ["", "summary", f"  stores ready: {len(stores) - n_block}/{len(stores)}",
            "  " + (blocking_line or f"blocking checks: {n_block}"), f"  warnings: {len(warn_stores)}",
            "  " + (offline_line or f"estimated offline window: 00:{rng.randint(30, 40)}"),
            f"  rollback snapshot: {rollback or 'rbk-' + hexs(8)}",
            f"  rollback deadline: 04:30 local", "dry run complete; run without --dry-run inside the window to execute"]
    return "\n".join(out)


def cutover_exec_log(stores, start, upto_step):
    out = [f"cutover 2.3.1 -- EXECUTE wave 2 ({len(stores)} stores), operator fstrachan",
           f"{start:%H:%M:%S} plan r9 loaded, rollback snapshot taken"]
    t = start
    for k, (a, sc, m) in enumerate(CUT_STEPS[:upto_step], 1):
        t += datetime.timedelta(seconds=rng.randint(20, 60))
        out.append(f"{t:%H:%M:%S} step {k}/{len(CUT_STEPS)} start: {a}")
        if sc in ("stores", "lanes", "peds"):
            for s in stores:
                t += datetime.timedelta(seconds=rng.uniform(1, 9))
                extra = f" ({s.lanes} lanes)" if sc != "stores" else ""
                out.append(f"{t:%H:%M:%S}   {s.no} ok{extra}")
        t += datetime.timedelta(seconds=rng.randint(5, 30))
        out.append(f"{t:%H:%M:%S} step {k}/{len(CUT_STEPS)} done")
    out.append(f"{t:%H:%M:%S} step {upto_step + 1}/{len(CUT_STEPS)} start: {CUT_STEPS[upto_step][0]}")
    return "\n".join(out)


COMMIT_SUBJECTS = {
    "pricecast": ["w3: stores.txt from waves.yaml r7", "defaults: keep payloads 35 days", "w4: bandwidth cap per store",
                  "legacy: label template SEL-A6-2024", "w2: notify retail-ops on park", "w6: stores.txt refresh",
                  "validate: trading-hours guard", "w1: activation 06:45"],
    "invsync": ["northeast: alerts to storesys", "scotland: stores.txt for wave 3", "all: dead_letter table rename",
                "midlands: conflict policy newest_wins", "metrics: statsd prefix per worker", "london: poll interval"],
    "netcfg": ["rtr-s0417: wan provider change", "template: ip sla frequency 10", "sw: errdisable recovery bpdu",
               "rtr-s1180: second tunnel", "hub: phase2 lifetime", "rtr-s0228: vlan 40 guest"],
}


def patch_result(path, diff, checks):
    plus = sum(1 for l in diff.split("\n") if l.startswith("+") and not l.startswith("+++"))
    minus = sum(1 for l in diff.split("\n") if l.startswith("-") and not l.startswith("---"))
    repo = path.split("/")[0]
    out = [f"Applied patch to {path}: 1 hunk(s), +{plus} -{minus}", "", diff, ""] + checks
    if repo in COMMIT_SUBJECTS:
        out += ["", f"git -C {repo} log --oneline -6"] + [
            f"{hexs(7)} {subj}" for subj in rng.sample(COMMIT_SUBJECTS[repo], 6)]
    return "\n".join(out)


# ---------------------------------------------------------------------------
# A few more output shapes used once or twice.

def kube_pods(app, n, now):
    nodes = [f"aks-stores-{hexs(8)}-vmss0000{k:02d}" for k in range(4)]
    rows, tops = [], []
    for _ in range(n):
        name = f"{app}-{hexs(9)}-{hexs(5)}"
        rows.append([name, "1/1", "Running", rng.choice([0, 0, 0, 1, 2]), f"{rng.randint(2, 13)}d",
                     f"10.244.{rng.randint(0, 7)}.{rng.randint(2, 250)}", rng.choice(nodes), "<none>", "<none>"])
        tops.append([name, f"{rng.randint(40, 900)}m", f"{rng.randint(180, 700)}Mi"])
    return (table(["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED NODE", "READINESS GATES"],
                  rows, gap="   ") + "\n\n" + table(["NAME", "CPU(cores)", "MEMORY(bytes)"], tops, gap="   ") +
            f"\n\nhorizontalpodautoscaler.autoscaling/{app}   Deployment/{app}   cpu: {rng.randint(20, 80)}%/70%   "
            f"{n}   12   {n}   {rng.randint(20, 90)}d")


def outbox_listing(store, days):
    out = ["", "    Directory: D:\\StoreLink\\EOD\\outbox", "",
           "Mode                 LastWriteTime         Length Name", "----                 -------------         ------ ----"]
    for d in days:
        out.append(f"-a----        {d:02d}/05/2026     23:1{rng.randint(0, 4)}       {rng.randint(120000, 900000):>8} "
                   f"EOD_{store.no}_202605{d:02d}.eod")
    out += ["", "    Directory: D:\\StoreLink\\EOD\\sent", "",
            "Mode                 LastWriteTime         Length Name", "----                 -------------         ------ ----"]
    for d in range(22, 31):
        out.append(f"-a----        {d:02d}/04/2026     23:1{rng.randint(0, 4)}       {rng.randint(120000, 900000):>8} "
                   f"EOD_{store.no}_202604{d:02d}.eod")
    out.append(f"-a----        01/05/2026     23:1{rng.randint(0, 4)}       {rng.randint(120000, 900000):>8} "
               f"EOD_{store.no}_20260501.eod")
    return "\n".join(out)


def ip_int_brief():
    rows = [["GigabitEthernet0/0/0", f"81.{rng.randint(1, 254)}.{rng.randint(1, 254)}.{rng.randint(2, 250)}", "YES",
             "NVRAM", "up", "up"], ["GigabitEthernet0/1/0", "unassigned", "YES", "unset", "up", "up"],
            ["GigabitEthernet0/1/1", "unassigned", "YES", "unset", "down", "down"],
            ["Tunnel100", f"10.250.{rng.randint(1, 60)}.{rng.choice([2, 6, 10])}", "YES", "NVRAM", "up", "up"],
            ["Tunnel101", f"10.251.{rng.randint(1, 60)}.{rng.choice([2, 6, 10])}", "YES", "NVRAM", "up", "up"]]
    for v in (10, 20, 30, 40):
        rows.append([f"Vlan{v}", f"10.{rng.randint(40, 60)}.{rng.randint(0, 255)}.1", "YES", "NVRAM", "up", "up"])
    rows.append(["Loopback0", f"10.249.{rng.randint(0, 255)}.{rng.randint(1, 254)}", "YES", "NVRAM", "up", "up"])
    return ("=== show ip interface brief ===\n" +
            table(["Interface", "IP-Address", "OK?", "Method", "Status", "Protocol"], rows, gap="  ") +
            "\n\n=== show version | include uptime|image|IOS ===\n"
            "Cisco IOS XE Software, Version 17.09.04a\n"
            "Cisco IOS Software [Cupertino], ISR Software (ARMV8EL_LINUX_IOSD-UNIVERSALK9_IAS-M), Version 17.9.4a, "
            "RELEASE SOFTWARE (fc3)\n"
            f"router uptime is {rng.randint(20, 200)} days, {rng.randint(0, 23)} hours, {rng.randint(0, 59)} minutes\n"
            "System image file is \"bootflash:c1100-universalk9_ias.17.09.04a.SPA.bin\"\n\n"
            "=== show ip ospf neighbor ===\n"
            "Neighbor ID     Pri   State           Dead Time   Address         Interface\n"
            f"10.0.0.{rng.randint(1, 9)}          0   FULL/  -        00:00:3{rng.randint(0, 9)}    10.250.0.1      Tunnel100\n"
            f"10.0.0.{rng.randint(11, 19)}         0   FULL/  -        00:00:3{rng.randint(0, 9)}    10.251.0.1      Tunnel101")


def bundle_diff(stores):
    rows = []
    for s in stores:
        rows.append([s.no, rng.randint(200, 1900), rng.randint(0, 120), rng.randint(0, 60), rng.randint(0, 40),
                     rng.randint(300, 2600)])
    return ("pricecast bundle diff: effective 2026-05-18 against effective 2026-05-11 (built 2026-05-11 02:10)\n\n" +
            table(["store", "price_changes", "promo_starts", "promo_ends", "new_items", "labels"], rows,
                  right=(1, 2, 3, 4, 5)) +
            "\n\nchange reasons: cost price updates 61%, promotions 27%, new lines 8%, corrections 4%")


def invsync_alerts(now, n):
    out = []
    t = clock(6, 0)
    for _ in range(n):
        t += datetime.timedelta(seconds=rng.randint(60, 900))
        if t > now:
            break
        k = rng.choice(REGIONS)[1]
        out.append(f"{t:%H:%M:%S}  {rng.choice(['WARN', 'WARN', 'INFO'])}  {k:<11} " + rng.choice(
            ["lag above 900s for 10m", "api 429 from inventory, backing off 5s", "batch retried (timeout 30s)",
             "dead letter: 2 deltas (unknown sku)", "lag back below 900s", "poll returned 0 rows for 3 cycles"]))
    return f"alerts since 06:00 ({len(out)})\n" + "\n".join(out)


# ---------------------------------------------------------------------------
# The conversation's machinery.

items = []
facts = []
turn_no = 0
call_no = 0
topic = ""
fact_turns = {}  # label -> turn
fact_ids = {}    # label -> id
FILES = {}       # path -> lines as last read
NOW = clock(7, 52)


def at(h, m):
    """Moves the day's clock forward to h:m (never back)."""
    global NOW
    NOW = max(NOW, clock(h, m, rng.randint(0, 59)))


def new_turn(t):
    global turn_no, topic, NOW
    turn_no += 1
    topic = t
    NOW += datetime.timedelta(minutes=rng.randint(3, 7), seconds=rng.randint(0, 59))


def record(content, source):
    """Records each planted value `content` holds as a fact of this turn."""
    table_ = P if source == "tool" else M
    for label, text in table_.items():
        if label not in fact_turns and text in content:
            fid = f"r{len(facts) + 1:03d}"
            facts.append({"id": fid, "turn": turn_no, "topic": topic, "source": source, "text": text})
            fact_turns[label] = turn_no
            fact_ids[label] = fid
            schedule(label)


def U(text):
    assert not any(i["turn"] == turn_no for i in items), "a turn starts with the user's message"
    items.append({"turn": turn_no, "role": "user", "kind": "message", "content": text})
    record(text, "message")


# Sentences an answer may close with, by the topics they fit.
FILLER = [
    ({"any"}, "I would put the outputs we looked at into the change ticket as we go; tomorrow's review is much "
              "easier with them."),
    ({"pricing"}, "pricecast only reads a group's config when it builds or schedules, so an edit has no effect on a "
                  "push that is already running."),
    ({"pricing", "evening"}, "A parked push is safe: the agent keeps the previous price file active until a new one "
                             "is acknowledged."),
    ({"invsync"}, "The workers are independent, so a change to one region's worker cannot slow the others."),
    ({"invsync"}, "Tillwise applies deltas idempotently by delta id, so a replayed batch does no harm."),
    ({"gateways"}, "Both gateways keep a store-and-forward queue, so a slow upstream shows up as queue depth before it "
                   "shows up at the tills."),
    ({"replen"}, "A replenishment run that refuses partial sales is doing its job; ordering on half a day's sales is "
                 "worse than ordering late."),
    ({"recon"}, "The recon compares whole business days, so a late file shows up as a variance until it lands and "
                "the report is re-run."),
    ({"network"}, "A tunnel change at a store is a few seconds of re-keying; the tills hold transactions locally "
                  "while it happens."),
    ({"stores", "pilot"}, "The agent spools every lane's journal to disk before shipping it, so nothing a lane rang up "
                          "is lost while the service is down."),
    ({"cutover", "evening"}, "The rollback snapshot is taken at the start of the real run, so the rehearsal's snapshot "
                             "is only there to prove the step works."),
    ({"cutover"}, "The controller re-reads the wave file on every plan, so a membership change shows up in the next "
                  "dry run without anything else to do."),
]
NEXT = [
    ({"any"}, "add the outputs to the change ticket"),
    ({"pricing"}, "tell pricing about the item-master fixes"),
    ({"invsync"}, "watch the worker's backlog for half an hour"),
    ({"gateways"}, "ask CRM to check the replayed points"),
    ({"replen"}, "let dc-planning know about the rerun"),
    ({"recon"}, "send Idris the re-run report"),
    ({"network"}, "confirm the change slot with Bronagh"),
    ({"stores", "pilot"}, "tell the store manager what happens tonight"),
    ({"cutover", "evening"}, "post the step timings in the cutover channel"),
]


def fitting(pool):
    return [text for tags, text in pool if "any" in tags or topic in tags]


def A(body, pad=True):
    parts = [body]
    fillers = fitting(FILLER)
    if pad and fillers and rng.random() < 0.45:
        parts.append(rng.choice(fillers))
    nexts = fitting(NEXT)
    if pad and rng.random() < 0.3 and len(nexts) >= 2:
        parts.append("Next:\n" + "\n".join(f"- {x}" for x in rng.sample(nexts, 2)))
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
    assert clean(json.dumps(args)), (turn_no, args)
    call_no += 1
    cid = f"call_{call_no:03d}"
    items.append({"turn": turn_no, "role": "assistant", "kind": "tool_call",
                  "content": json.dumps(args), "tool_name": name, "call_id": cid})
    items.append({"turn": turn_no, "role": "tool", "kind": "tool_result",
                  "content": output, "tool_name": name, "call_id": cid})
    record(output, "tool")


def read(path, lines, expect=()):
    FILES[path] = list(lines)
    tool("read_file", {"path": path}, numbered(lines), expect)


def sh(cmd, output, expect=()):
    tool("bash", {"cmd": cmd}, output, expect)


def ps(script, output, expect=()):
    tool("powershell", {"script": script}, output, expect)


def sqlcmd(query, output, expect=()):
    tool("sqlcmd", {"server": "SQLSL-LDS01\\STORELINK", "database": "StoreLink", "query": query}, output, expect)


def psql(query, output, expect=(), target="tillwise_reporting_ro"):
    tool("psql", {"target": target, "query": query}, output, expect)


def patch(path, diff, checks):
    tool("apply_patch", {"path": path, "patch": diff}, patch_result(path, diff, checks))


# ---------------------------------------------------------------------------
# Recall questions: each asks about a planted value in plain words close to
# the stored line, at its turn or as soon after as the day allows (never two
# questions in a row, never fewer than MIN_GAP turns after the fact). `what`
# is how the assistant's vague answer refers to the output.

QUESTIONS = [
    (["T2"], 54, "events",
     "Going back to Kendal for a second: according to that event log, how many times had the Tillwise Store Agent "
     "service on Kendal's back-office server terminated unexpectedly? The Service Control Manager's count.",
     "the last service-crash entry in Kendal's event log"),
    (["W3a"], 60, "config",
     "Bronagh is asking how many stores will pull prices over the tunnels at the same time in wave 3. What did "
     "wave 3's distributor.ini set max_parallel_stores to?", "the [pacing] section of wave 3's distributor.ini"),
    (["W4b"], 64, "dryrun",
     "What bundle digest did the wave 4 price bundle dry run print? I want to compare it with next week's real "
     "build.", "the summary at the end of the wave 4 dry run"),
    (["IM"], 70, "config",
     "What poll interval is the Midlands invsync worker configured with, in seconds?",
     "the source block of the Midlands worker's YAML"),
    (["IW"], 76, "log",
     "What backlog did the south-west invsync worker warn about in its log this morning?",
     "the monitor's warning line in the south-west worker's log"),
    (["L1"], 82, "config",
     "What request timeout does the loyalty gateway's appsettings give its upstream calls, in milliseconds?",
     "the Upstream block of the loyalty gateway's production appsettings"),
    (["B2"], 88, "health",
     "When we hit PayBridge's health endpoint, what p95 upstream latency did its primary upstream report?",
     "the upstream-primary check in PayBridge's health response"),
    (["R1"], 94, "config",
     "What's the order cutoff in the Avonmouth replenishment job's yaml?",
     "the ordering block of the Avonmouth job definition"),
    (["C1"], 100, "recon",
     "What net variance did Monday's Yorkshire recon come out at, before the re-run?",
     "the first Yorkshire report"),
    (["N1"], 106, "router",
     "What ip mtu was set on the tunnel interface of Whitby's router when we first looked at it?",
     "the running config we pulled from Whitby's router this afternoon"),
    (["W3b"], 114, "dryrun",
     "Ravi wants it for the store comms: what estimated offline window did the wave 3 cutover dry run give?",
     "the summary of the wave 3 rehearsal"),
    (["w3date"], 120, "message",
     "Remind me, which night did Ravi say wave 3 goes live?", "what you told me after the go/no-go"),
]
OFF_TOPIC = (110, "Completely unrelated, my brain needs a break: what's a good way to keep slugs off hostas without "
                  "using pellets?",
             "Copper tape round the pots works well for containers, and a ring of grit or crushed eggshell helps a "
             "little in beds. The most reliable thing is a torch patrol on a damp evening for a week or two, and "
             "beer traps sunk level with the soil. Encouraging frogs and birds helps over a season, and thick-leaved "
             "varieties such as Sum and Substance are far less appealing to them than the thin blue-green ones.")

ANSWERS = {
    "config": ["It is a key in {what}, as we read it earlier; nothing we changed today touched that line, so the "
               "value in that read is still the live one.",
               "That one comes straight from {what}. I would copy it from the read we did rather than from memory."],
    "events": ["It is in the message of {what}; the count in the newest of those entries is the total for the week "
               "we exported."],
    "dryrun": ["It is in {what}; I would quote it from that output as printed rather than retype it."],
    "log": ["It is on {what}, the only line of that kind in the tail we pulled."],
    "health": ["It is in {what}; the secondary upstream reports its own figure just below, so take care to copy the "
               "primary's."],
    "recon": ["It is the last of the totals lines in {what}; the re-run later in the day replaced it with a "
              "different figure."],
    "router": ["It is in {what}, on the Tunnel100 interface; the template's default is different, which is why we "
               "changed it."],
    "message": ["It was in {what}; scroll back to the go/no-go and you will find it as you said it."],
}

probes = []
pending = []  # [due, order, spec]
last_was_question = False
MIN_GAP = 40


def schedule(label):
    for order, (labels, at_, kind, text, what) in enumerate(QUESTIONS):
        if label in labels and all(l in fact_turns for l in labels):
            due = max(50, at_, max(fact_turns[l] for l in labels) + MIN_GAP)
            pending.append([due, order, (labels, kind, text, what)])


pending.append([OFF_TOPIC[0], 100, (None, None, OFF_TOPIC[1], OFF_TOPIC[2])])


def ask(spec):
    global last_was_question
    labels, kind, text, what = spec
    if labels is None:
        new_turn("off-topic")
        U(text)
        probes.append({"kind": "recall", "turn": turn_no, "facts": []})
        A(what, pad=False)
        last_was_question = True
        return
    new_turn("recall")
    U(text)
    for l in labels:
        assert turn_no - fact_turns[l] >= MIN_GAP, (text, l, turn_no - fact_turns[l])
    probes.append({"kind": "recall", "turn": turn_no, "facts": [fact_ids[l] for l in labels]})
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

PILOT = WAVES[1]
W2 = WAVES[2]
KENDAL, TRURO, WHITBY, RIPON = BY_TOWN["Kendal"], BY_TOWN["Truro"], BY_TOWN["Whitby"], BY_TOWN["Ripon"]
PERTH, CHELT, LICH = BY_TOWN["Perth"], BY_TOWN["Cheltenham"], BY_TOWN["Lichfield"]
NORTH_HUB = [s for s in STORES if s.key in ("northeast", "yorkshire", "scotland", "northwest")]
PAY_ROUTES = ["POST /v2/auth", "POST /v2/capture", "POST /v2/refund", "POST /v2/void", "GET /v2/txn/{id}",
              "POST /v2/ped/heartbeat"]
LOY_ROUTES = ["GET /v1/members/lookup", "POST /v1/earn", "POST /v1/burn", "POST /v1/earn/offline-batch",
              "GET /v1/balance/{member}"]


def store_list(stores):
    return ", ".join(f"'{s.no}'" for s in stores)


# --- kickoff -------------------------------------------------------------------

new_turn("kickoff")
U(f"Morning. {M['name']}, store systems at {M['company']}. Big one today: wave 2 of the Tillwise migration cuts "
  f"over tonight, 22 stores across the north-east and north Yorkshire, under {M['ticket']}. We're {M['count']} in "
  f"all and the six pilot stores have been live on Tillwise for a week. Before anything else, pull the cutover "
  f"controller's status so we know where every wave stands.")
sh("cutover status --all", N(lambda: cutover_status(NOW)))
A("The controller agrees with the plan. The pilot wave is live with all its lanes up, tonight's wave is scheduled "
  "with every store either ready or with its agent staged, and waves 3 to 6 are drafts without dates, their stores "
  "still on StoreLink with no agents staged. Three notes in the per-store list deserve a look before tonight: one of "
  "tonight's Yorkshire stores has an overdue end-of-day upload, another has fragmentation alarms on its VPN, and "
  "one pilot store's agent restarted within the last week. None of them blocks the plan on its own, but each could "
  "become a preflight failure this evening.", pad=False)

new_turn("kickoff")
U(f"A standing rule for the whole day, and for any comms you draft: {RULES[0][1]}. In March a hotfix printed "
  f"shelf-edge labels mid-afternoon and one store spent two hours arguing with customers about prices. "
  f"{M['pm']} is the programme manager; he runs the go/no-go for tonight at 17:00. Show me the wave plan file so I "
  f"can check tonight's membership.")
read("cutover/waves.yaml", waves_yaml())
A("Understood, and it holds for the rest of the day: no price file goes to any store between seven in the morning "
  "and ten at night store local time, even when pricecast's schedule or a queued request says otherwise. If a push "
  "would land inside that window I will hold it and say so rather than let it run.\n\nThe plan file matches the "
  "controller: the pilot and tonight's wave have dates, the other four have none yet, and every store appears in "
  "exactly one wave. The defaults already encode two things we care about tonight: a finance sign-off is required "
  "before a wave moves, and a store whose agent is older than the minimum version cannot be cut over. Tonight's "
  "wave is the north-east plus the first ten Yorkshire stores, so the Yorkshire and north-east numbers are the ones "
  "that have to be clean.", pad=False)

new_turn("kickoff")
U(f"Second rule, also permanent: {RULES[1][1]}. The store managers have had enough of surprise reboots at the tills. "
  f"On the network side {M['netlead']} leads; she wants us to look at the hub tunnels before tonight. Pull the "
  f"tunnel summary from the Leeds hub.")
sh("ssh netops@fw-hub-lds01 'get vpn ipsec tunnel summary'", N(lambda: vpn_summary(NORTH_HUB, down=[PERTH.no])))
A("Noted for the whole day: no restart of a back-office server or a till agent while its store is trading. Anything "
  "like that waits for the overnight window, and the store manager is told before it happens.\n\nThe Leeds hub "
  "serves the northern stores and the data-centre links. Almost every store tunnel has both selectors up and clean "
  "error counters; a handful show a few transmit errors, which is normal for consumer-grade broadband at that "
  "volume. One Scottish store is running with a selector down on its primary, so it is leaning on its secondary "
  "link. Tonight's stores all look healthy from the hub's side, although the fragmentation alarm we saw in the "
  "controller would not show up in this summary; that needs the store router itself.", pad=False)

new_turn("kickoff")
U(f"Third and last rule: {RULES[2][1]}. {M['finance']} in finance does the sign-offs and is usually done by "
  f"mid-afternoon if the numbers are clean. For tonight that means Monday's recons for the north-east and Yorkshire. "
  f"What order would you tackle the day in?")
A("Agreed: no wave moves until finance has signed off the previous night's reconciliation for every one of its "
  "stores, so tonight needs Monday's north-east and Yorkshire reports signed.\n\nFor the order, I would start with "
  "the pilot's loose ends, because anything wrong with the pilot is likely to repeat tonight at four times the "
  "scale. Then price distribution, since tonight's bundle has to be built and queued inside the allowed window. "
  "Inventory sync and the gateways next, as they run centrally and can be fixed during the day. The replenishment "
  "failure from last night matters to the DCs but not to tonight. The recons should go to finance early enough for "
  "a sign-off before the go/no-go, so I would pull them before lunch rather than after. The store network and the "
  "individual store problems fit around those, and the cutover rehearsal comes last, once the fixes are in.",
  pad=False)

regular("kickoff")
U("What actually runs overnight in the scheduler? I want to see everything that touches the stores or the DCs.")
sh("schedctl list --all", N(lambda: schedctl_list(NOW)))
A("The scheduler runs the whole nightly cycle: each region's end-of-day collection from the stores just before "
  "midnight, the Tillwise sales export shortly after, the four DCs' replenishment runs in the small hours, the "
  "database backups, the gift-card and points batches, the label print batch before opening, and each region's "
  "reconciliation early in the morning so finance has it when they start. Two jobs were not clean last night: the "
  "Livingston replenishment run failed outright, and the Yorkshire end-of-day collection finished partial, which "
  "matches the store with the overdue upload. The rest ran on time.")

regular("kickoff")
U("Ravi wants a short status for the programme channel by nine. Draft me something, three or four sentences, no "
  "numbers we haven't checked yet.")
A("Draft:\n\n\"Wave 2 (north-east and north Yorkshire) is on track for tonight's window. This morning we are closing "
  "the pilot's loose ends, checking tonight's price bundle and the central services, and preparing the "
  "reconciliations finance needs to sign before the go/no-go at 17:00. Two known issues are being worked: one store "
  "with an overdue end-of-day upload and one store with a VPN alarm; neither is a blocker yet. Next update after "
  "lunch.\"\n\nI left out the failed replenishment run on purpose: it is a DC matter with no bearing on tonight, and "
  "mentioning it in this channel tends to start a thread of its own.", pad=False)

# --- the pilot's loose ends --------------------------------------------------------

regular("pilot")
U("Start with the pilot. Finance flagged that the pilot stores' migrated history doesn't quite add up. Count what "
  "StoreLink holds for the six pilot stores, table by table.")
sqlcmd("SET NOCOUNT OFF; SELECT t.name AS TableName, SUM(x.n) AS RowsForStores, MIN(x.d1) AS FirstBusinessDate, "
       "MAX(x.d2) AS LastBusinessDate FROM dbo.fn_StoreRowCounts(" + ", ".join(s.no for s in PILOT) + ") x JOIN "
       "sys.tables t ON t.object_id = x.object_id GROUP BY t.name ORDER BY t.name",
       planted(sqlcmd_counts, ["G1"]), expect=["G1"])
A("StoreLink holds a year of history for those six stores: sales headers, lines and tenders in the expected "
  "proportions, a much smaller number of returns and voids, the cash-ups, the stock deltas and counts, and the "
  "points and gift-card transactions. Every table stops at the business date of the cutover, which is right: from "
  "the next day on, those stores trade on Tillwise. Now the same counts on the Tillwise side will show whether "
  "anything fell out on the way.")

regular("pilot")
U("Now the same counts on the Tillwise side for those stores.")
psql("SELECT table_name, rows_for_stores, first_business_date, last_legacy_date, origin FROM migration.row_counts("
     "ARRAY[" + store_list(PILOT) + "]) ORDER BY 1", N(psql_counts))
A("Eleven of the fourteen tables match StoreLink exactly. Three do not, and they move together: the sales headers, "
  "the sales lines and the tenders are each short by a small number of rows, a couple of dozen headers with their "
  "lines and tenders. That pattern is a handful of whole transactions that never arrived, rather than a mapping "
  "problem, which would scatter across many tables. The next step is to find which transactions they are.")

regular("pilot")
U("Which transactions are missing? Can you find them?")
psql("SELECT l.store, l.lane, l.txn_no, l.txn_time, l.net, l.tender, l.legacy_source, 'not in tillwise' AS state "
     "FROM migration.legacy_txn l LEFT JOIN sales.header h USING (store, lane, txn_no) WHERE l.store IN (" +
     store_list(PILOT) + ") AND h.txn_no IS NULL ORDER BY l.txn_time", N(lambda: missing_txns(KENDAL)))
A("All of them come from the same store and the same lane, on one morning: the first trading day after the pilot "
  "went live, in a run of transactions over about two hours. They exist in StoreLink's copy of the lane journal but "
  "never reached Tillwise. One lane, one morning, a contiguous run: that looks like the agent losing its place in "
  "that lane's journal rather than anything wrong with the migration itself.")

regular("pilot")
U(f"So it's lane 3 at Kendal, the morning after go-live. What's your theory?")
A("The agent ships each lane's journal in sequence and remembers the last sequence number the platform "
  "acknowledged. If the process dies while it holds a lane's journal open, it restarts and resumes from the last "
  "acknowledged number, which is fine. But if StoreLink's comms service holds the same journal file open when the "
  "agent tries to read it, the read fails, and an unhandled failure there would crash the agent. If, on restart, "
  "the agent then skips to the newest journal record instead of the acknowledged one, the run of transactions in "
  "between would be lost from the platform while still sitting in the journal on disk. The store's event log and "
  "the agent's own log will show whether the crashes line up with that morning.")

regular("pilot")
U("Pull the event log from Kendal's back-office server for the last week, errors and warnings only.")
ps(f"Invoke-Command -ComputerName {KENDAL.host()} -ScriptBlock {{ Get-WinEvent -FilterHashtable @{{LogName="
   "'System','Application'; Level=1,2,3; StartTime=(Get-Date).AddDays(-7)} | Select-Object TimeCreated, Id, "
   "LevelDisplayName, ProviderName, Message | Format-List } | Select-Object * -ExcludeProperty PSComputerName, "
   "RunspaceId, PSShowComputerName",
   fitP(lambda n: winevents(n, AGENT_CRASHES, clock(6, 0, 0, day=-7)), 14, ["T2"], hi=9200), expect=["T2"])
A("The log tells a clear story. Alongside the usual background noise (DCOM permission warnings, a DNS timeout or "
  "two, the odd time-service complaint and a storage controller reset), the Tillwise Store Agent has crashed "
  "repeatedly over the week, each time with the same trio of entries: the .NET runtime reporting an unhandled I/O "
  "exception in the journal shipper, the application error for the agent's process, and the Service Control "
  "Manager restarting the service a minute later. The I/O exception fits the theory of a journal file locked by "
  "another process. The first crash falls on the morning the transactions went missing.")

regular("pilot")
U("And the services on that box, plus the agent's own log around the last crash.")
ps(f"Invoke-Command -ComputerName {KENDAL.host()} -ScriptBlock {{ Get-Service Tw*, SL*, MSSQL*, SQLAgent*, Spooler, "
   "W32Time, WinDefend, CcmExec, Zabbix* | Format-Table Status, Name, DisplayName -AutoSize }",
   N(lambda: get_service()))
say("The legacy end-of-day upload service is stopped on a pilot store, which is expected. The agent's log:")
ps(f"Invoke-Command -ComputerName {KENDAL.host()} -ScriptBlock {{ Get-Content "
   "'C:\\ProgramData\\Tillwise\\logs\\agent-20260511.log' -Tail 70 }",
   fitN(lambda n: agent_log(n, clock(23, 20, 0, day=-1), KENDAL.lanes), 60))
A("The agent's log confirms the mechanism. Before the crash, the journal shipper logs warnings that lane 3's "
  "journal is locked by StoreLink's comms service and retries; eventually the open fails outright, the exception "
  "is not caught and the process terminates. When the service comes back it says it resumes from the last "
  "acknowledged sequence, which would be safe, so the gap from the pilot's first morning probably comes from an "
  "older behaviour or a different path. StoreLink's comms service is still running on this pilot store and still "
  "touching the lane journals, which it should not be doing once a store is on Tillwise. That is worth fixing "
  "before tonight's stores go through the same transition.")

regular("pilot")
U(f"Tillwise support have this as {M['case']}. Can we just restart the agent on Kendal now and get lane 3's "
  f"journal replayed?")
A("Not now. Kendal is trading, and the standing rule is clear: a store's back-office server and its till agents "
  "are only restarted in the overnight window, and the store manager hears about it first. The store closes this "
  "evening, so I would schedule the restart for after closing and ask you (or the area manager) to let the manager "
  "know today.\n\nThe replay does not need a restart anyway. The missing transactions are still in lane 3's journal "
  "on disk, and Tillwise support can replay a journal range from the agent's spool through their API. I would ask "
  "them for that on the case, together with the fix for the uncaught exception, and separately stop StoreLink's "
  "comms service from touching lane journals on migrated stores; that last one is a config change for tonight's "
  "wave as much as for the pilot.")

regular("pilot")
U("Truro didn't take last week's agent update, according to the rollout dashboard. Check what the agent on Truro's "
  "back office actually reports about itself.")
ps(f"Invoke-Command -ComputerName {TRURO.host()} -ScriptBlock {{ Get-ItemProperty "
   "'HKLM:\\SOFTWARE\\Tillwise\\StoreAgent' | Select-Object AgentVersion, Channel, UpdateRing, InstallDate, "
   "InstallPath, ConfigEndpoint, TenantId, LastPolicySync, LastHeartbeatUtc, LanesManaged, PendingReboot | "
   "Format-List; Get-Service Tw*, SL*, MSSQL*, SQLAgent*, Spooler, W32Time, WinDefend, CcmExec, Zabbix* | "
   "Format-Table Status, Name, DisplayName -AutoSize; Get-TwLaneStatus | Format-Table; Get-ChildItem "
   "C:\\ProgramData\\Tillwise\\updates }",
   planted(lambda: registry(P["T1"], TRURO, NOW), ["T1"]), expect=["T1"])
A("The dashboard is right, and the reason is visible: the update package was downloaded and installed on the "
  "lanes, which report the current lane agent (a couple still on the previous build), but the back-office agent "
  "itself still reports the older version and has a reboot pending. The installer stages the new agent and only "
  "switches over on restart, and that restart never happened because the rollout policy's window falls at night "
  "and the store's server was not rebooted. By the rule, that reboot also waits for tonight's overnight window with "
  "the manager told first.")

regular("pilot")
U("What does the Tillwise rollout API say about the pilot stores?")
sh("curl -sS -i -H \"Authorization: Bearer $TW_TOKEN\" 'https://api.tillwise.cloud/v2/tenants/pennock-hale-prod/"
   "rollouts/agent-4.12.9/stores?wave=1'", N(lambda: agent_rings_json(PILOT, NOW)))
A("The rollout service sees the same thing from its side: five of the six pilot stores are current and one is "
  "pending a reboot. The rollout's own policy only reboots inside its night window and with a cap on parallel "
  "reboots, so it would have done this itself had the server's reboot not been blocked. I would leave the policy "
  "alone and add Truro's reboot to tonight's list of overnight actions, with the store manager told, alongside "
  "Kendal's restart.")

# --- price distribution ------------------------------------------------------------

W2_REJECTED = int(P["W2b"].split("=")[1])


def group_ini(v, labels=()):
    return planted(lambda: "\n".join(distributor_ini(v)), list(labels)).split("\n")


def pricecast_validate(changed):
    out = [f"pricecast config validate --all   (changed: {changed})"]
    for g in ["legacy", "w1", "w2", "w3", "w4", "w5", "w6"]:
        out.append(f"  conf/{g}/distributor.ini ".ljust(44, ".") + f" ok ({rng.randint(38, 44)} keys, window "
                   f"{'22:30-06:00' if g != 'legacy' else '22:00-06:30'})")
    out += ["  trading-hours guard: every group's window lies outside 07:00-22:00 local ok",
            "  activation after close: every group activates after its window closes ok",
            f"  queued pushes re-checked: {rng.randint(3, 6)}, all inside their group's window",
            "validate: 0 errors, 0 warnings"]
    return out


regular("pricing")
at(9, 35)
U("Price distribution next. Show me how pricecast's config is laid out, and the defaults every group inherits.")
sh("ls -l pricecast/conf pricecast/conf/*", N(pricecast_ls))
read("pricecast/conf/defaults.ini", DEFAULTS_INI.split("\n"))
A("One folder per store group: the legacy group for every store still on StoreLink, then one per wave, each with "
  "its own distributor config and store list. The defaults set a window that closes at half past six in the "
  "morning, a moderate pace, sftp with resumable chunks and sha256 checks, a full refresh on Sundays with deltas "
  "on other nights, and activation at the next price point after the window closes. A group's file only needs the "
  "keys it changes, although in practice every group file sets most of them explicitly.")

regular("pricing")
U("Tonight's group first: read wave 2's distributor.ini.")
read("pricecast/conf/w2/distributor.ini", group_ini({"backoff": P["W2a"]}, ["W2a"]), expect=["W2a"])
A("Tonight's group has a sensible window: it opens after ten and closes before six, with a Sunday window that stays "
  "clear of trading hours, and a push that overruns is parked rather than forced. Pacing and transfer settings are "
  "close to the defaults, with its own retry behaviour for failed transfers. Labels are on, and activation waits "
  "for the next price point in the morning, after the window. Nothing here conflicts with your rule.")

regular("pricing")
U("We did a shadow push of a full price file to the wave 2 stores overnight, so their agents could validate it "
  "without activating anything. Tail that push's log.")
sh("tail -n 80 /var/log/pricecast/w2/push-20260512T0000Z.log",
   fitP(lambda n: push_log(W2[:n], clock(0, 1, 0), W2_REJECTED, parked=[WHITBY.no, RIPON.no][:1 + (n > 12)]), 22,
        ["W2b"]), expect=["W2b"])
A("The shadow push went out in the middle of the night, inside the window. Almost every store received the file, "
  "verified it and acknowledged it in shadow mode; a couple of transfers needed a retry after a connection reset. "
  "Two stores received the file but never acknowledged it within the timeout, so the distributor parked them; one "
  "is Whitby, the store with the VPN alarm, which fits a path problem rather than a price problem. Each store's "
  "agent rejected a small number of lines, and the run's closing line gives the total across the wave.")

regular("pricing")
U("What were those rejections? Break them down by reason.")
psql("SELECT r.code, r.reason, count(*) AS lines, count(DISTINCT r.store) AS stores, count(DISTINCT r.item) AS "
     "distinct_items FROM pricecast.agent_rejects r WHERE r.push_id = (SELECT max(push_id) FROM pricecast.push WHERE "
     "grp = 'w2' AND mode = 'shadow') GROUP BY 1, 2 ORDER BY 1; SELECT store, item, barcode, code, sell_price FROM "
     "pricecast.agent_rejects WHERE push_id = (SELECT max(push_id) FROM pricecast.push WHERE grp = 'w2') ORDER BY "
     "random() LIMIT 14", N(lambda: rejected_reasons(W2, W2_REJECTED)))
A("The rejections are item-master problems rather than transfer problems, and the same items recur across stores: "
  "barcodes the store's item master does not know, sell prices below the cost floor, promotions and multibuys that "
  "point at items missing from the file, a unit-of-measure mismatch, unmapped VAT codes and label fields that are "
  "too long for the template. StoreLink tolerated most of these silently; Tillwise's agent validates each line and "
  "refuses the bad ones, which is better behaviour but means pricing has some cleaning to do. None of these lines "
  "stops a store from trading: the agent activates the rest of the file.")

regular("pricing")
U("Pricing owns the item master. Draft the note I send them, short.")
A("Draft:\n\n\"Last night's shadow price push to the wave 2 stores was rejected line-by-line for a small set of items, "
  "all of them item-master problems: unknown barcodes, prices under the cost floor, promotions and multibuys "
  "referencing missing items, EA/PK unit mismatches, unmapped VAT codes and label text too long for the A6 template. "
  "The breakdown and a sample are attached. Tillwise refuses these lines where StoreLink used to accept them, so "
  "they will recur in every wave until fixed at source. Could you correct them before tonight's 22:45 push to wave "
  "2? Anything fixed after that goes out with tomorrow night's delta.\"\n\nAttach the breakdown query's output "
  "rather than retyping the counts.")

regular("pricing")
U("For comparison, the pilot group's config.")
read("pricecast/conf/w1/distributor.ini", group_ini({}))
A("The pilot group's config is the one the others were copied from, and it shows: the same sections and nearly the "
  "same values, with a night window, parking on overrun and activation in the morning. It has been pushing deltas "
  "to the six pilot stores every night for a week without a parked store, which is a reasonable sign that the "
  "settings work in practice.")

regular("pricing")
U("Wave 3's config, please. They go in two weeks and Bronagh is worried about how much load the price pushes put on "
  "the tunnels.")
read("pricecast/conf/w3/distributor.ini", group_ini({"parallel": P["W3a"]}, ["W3a"]), expect=["W3a"])
A("Wave 3's config follows the same pattern as tonight's: a night window, parking on overrun, labels on, activation "
  "the next morning. The part Bronagh cares about is the pacing section, which sets how many stores pull at once, "
  "how long the distributor waits between starting one store and the next, and a per-store bandwidth cap. With "
  "those three, the load on the hub is bounded: at most the parallel count times the cap, and the stagger spreads "
  "the handshakes out. I can work out the worst case for her once we know the hub's spare capacity at night.")

regular("pricing")
U("And wave 4's.")
read("pricecast/conf/w4/distributor.ini", group_ini({"chunk": P["W4a"]}, ["W4a"]), expect=["W4a"])
A("Wave 4 differs from the defaults mostly in how it transfers: its chunk size is set for itself rather than "
  "inherited, which changes how many round trips a file takes and how much is resent after a dropped connection. "
  "Its window and activation are in line with the others. Larger chunks suit good links; the Midlands stores in "
  "that wave are mostly on fibre, so it is a reasonable choice.")

regular("pricing")
U("Do a dry run of wave 4's bundle for next Monday's prices so we can see the sizes.")
sh("pricecast bundle build --group w4 --effective 2026-05-18 --dry-run",
   planted(lambda: bundle_dryrun(WAVES[4], "2026-05-18", digest=P["W4b"]), ["W4b"]), expect=["W4b"])
sh("pricecast bundle diff --group w4 --effective 2026-05-18 --against 2026-05-11", N(lambda: bundle_diff(WAVES[4])))
A("The dry run resolves every store in the group with no skips. Per store the file carries the whole range with "
  "each store's own overrides and promotions, a few thousand shelf-edge labels and several megabytes of payload, "
  "and the bundle as a whole has a digest we can compare against when the real build runs. The estimated transfer "
  "time at the group's parallelism fits comfortably inside the night window. Nothing was written or scheduled.")

regular("pricing")
U("Wave 5's config now.")
w5 = group_ini({"stagger": P["W5a"], "close_local": "07:30"}, ["W5a"])
read("pricecast/conf/w5/distributor.ini", w5, expect=["W5a"])
A("This one breaks your rule. Wave 5's window closes at half past seven in the morning, store local time, so a push "
  "that runs late would still be transferring after seven, when the stores are opening. Every other group closes "
  "by six or half past. It looks like a copy from a template for stores that open late. I would change it to half "
  "past six like the defaults; it has no effect until wave 5 is scheduled, but it should not sit there waiting to be "
  "used. The pacing section also spaces stores further apart than most groups do, which is harmless.")

regular("pricing")
U("Fix it, 06:30 like the others.")
d, FILES["pricecast/conf/w5/distributor.ini"] = make_diff("pricecast/conf/w5/distributor.ini", w5,
                                                          [("close_local = 07:30", 1, ["close_local = 06:30"])])
patch("pricecast/conf/w5/distributor.ini", d, pricecast_validate("conf/w5/distributor.ini"))
A("Changed: wave 5's window now closes at half past six, and the validator is happy with every group, including its "
  "check that no window overlaps seven to ten. The validator re-checked the queued pushes too; none of them belongs "
  "to wave 5, so nothing already scheduled changed.")

regular("pricing")
U("Wave 6's too while we're here.")
read("pricecast/conf/w6/distributor.ini", group_ini({"cutoff": P["W6a"]}, ["W6a"]), expect=["W6a"])
A("Wave 6 is in line with the rule: a night window, parking on overrun, activation after close. What it changes is "
  "the delta section: its cut-off for including price changes in a night's delta is set for the group rather than "
  "inherited, so a price change entered after that time in the night waits for the next delta. The London and "
  "south-east stores have later promotions sign-off, which is probably why.")

regular("pricing")
U("Dry run wave 6's bundle for the same effective date.")
w6_skip = int(P["W6b"].split()[-1])
sh("pricecast bundle build --group w6 --effective 2026-05-18 --dry-run",
   planted(lambda: bundle_dryrun(WAVES[6], "2026-05-18", skipped=[s.no for s in WAVES[6][3:3 + w6_skip]],
                                 skipped_line=P["W6b"]), ["W6b"]), expect=["W6b"])
A("Most of wave 6 resolves cleanly, but the dry run skipped some stores because their agents are not enrolled with "
  "Tillwise yet. That is expected this far ahead of the wave, and the bundle is otherwise in the same range as "
  "wave 4's. The skipped stores will need enrolling before that wave's rehearsal, or its preflight will block on "
  "them.")

regular("pricing")
U("And tonight's wave 2 bundle, the one we'll stage this evening. Dry run it first.")
sh("pricecast bundle build --group w2 --effective 2026-05-13 --dry-run",
   N(lambda: bundle_dryrun(W2, "2026-05-13", parallel=8)))
A("Tonight's bundle resolves for all of the wave's stores with nothing skipped. Sizes and label counts are in line "
  "with the other groups. The rejections from last night will repeat for any items pricing has not fixed by the "
  "time we build it for real this evening, but they do not block the bundle.")

regular("pricing")
U("Was last night's legacy delta push clean? That's the one every store still on StoreLink gets.")
LEGACY = [s for s in STORES if s.wave != 1]
sh("tail -n 90 /var/log/pricecast/legacy/push-20260511T2230Z.log",
   fitN(lambda n: push_log(rng.sample(LEGACY, n), clock(22, 30, 0, day=-1), rng.randint(30, 110), mode="delta"), 30))
A("Yes. The legacy delta went to the StoreLink stores overnight inside the window, each store received and verified "
  "its file, and the bridge on each back office acknowledged it, with a small number of rejected lines per store "
  "for the same item-master reasons. No store parked. The legacy path is not what needs attention today.")

regular("pricing")
U("What's in pricecast's queue for today and tonight?")
sh("pricecast schedule list --from 2026-05-10 --to 2026-05-13", N(lambda: schedule_list(NOW)))
A("Two things. Tonight's wave 2 full push is queued for quarter to eleven, and the nightly deltas for the legacy "
  "and pilot groups at half past eleven; those are all fine. But there is also a hotfix queued for the legacy group "
  "at two o'clock this afternoon, to a few dozen stores. The queue's policy line explains how it got there: hotfix "
  "requests carry their own not-before time and skip the group's window. Under your rule that push must not run. "
  "I would cancel it and fold its contents into tonight's legacy delta, unless there is a reason it cannot wait, in "
  "which case it still waits: the rule has no exception for hotfixes.")

regular("pricing")
U("It's pricing's weekend promo correction. Cancel it, and they can put it in tonight's legacy delta.")
sh("pricecast schedule cancel q-20934 --reason 'no pushes 07:00-22:00; moved to legacy delta' && pricecast schedule "
   "list --from 2026-05-10 --to 2026-05-13", N(lambda: schedule_list(NOW, cancelled=True)))
A("Cancelled. The queue now shows the hotfix as cancelled by you, and nothing for any store between seven and ten. "
  "Pricing should add the correction to tonight's legacy delta before its cut-off; it will then activate at the "
  "stores' next price point tomorrow morning, which is the same effect for customers without any labels printing "
  "mid-afternoon. I would also ask whoever owns pricecast to make hotfixes respect the group windows, so that the "
  "rule is enforced by the tool rather than by people.")

# --- inventory sync ------------------------------------------------------------------

IN_VALUE = int(P["IN"].split("|")[1])
L3_VALUE = int(P["L3"].split("|")[1])


def worker_yaml(v, labels=()):
    return planted(lambda: "\n".join(invsync_yaml(v)), list(labels)).split("\n")


regular("invsync")
at(11, 5)
U("Inventory sync. The DC planners say stock on Tillwise lags behind StoreLink in some regions. What's the state of "
  "the invsync workers?")
sh("invsyncctl status", N(lambda: invsync_status(NOW, hot="southwest")))
sh("invsyncctl alerts --since 06:00", N(lambda: invsync_alerts(NOW, 60)))
A("Nine of the ten regional workers are running with lag measured in minutes and modest pending counts. The "
  "south-west worker is degraded: its lag is well over half an hour and its pending count is an order of magnitude "
  "above the others. The recent alerts show the other things going on: occasional rate limiting from the Tillwise "
  "inventory API, a few timeouts, and deltas landing in the dead-letter table for unknown SKUs. The planners' "
  "complaint is probably mostly the south-west.")

regular("invsync")
U("Show me the Midlands worker's config; the planners mentioned the Midlands first.")
read("invsync/workers/midlands.yaml", worker_yaml({"poll": P["IM"]}, ["IM"]), expect=["IM"])
A("Each worker reads StoreLink's stock-delta table for its own stores, batches the rows and applies them to "
  "Tillwise's inventory API, with a conflict policy, clamping of negative stock and a dead-letter table. The "
  "Midlands worker polls less often than most, so it runs a little behind by design, but its lag in the status "
  "output is still within a few minutes. If the planners need it fresher, the poll interval is the setting to "
  "shorten; the batch size would matter only if the backlog grew.")

regular("invsync")
U("And Scotland's, since wave 3 has most of Scotland.")
read("invsync/workers/scotland.yaml", worker_yaml({"batch": P["IS"]}, ["IS"]), expect=["IS"])
A("Scotland's worker has the same shape, with its own cap on how many delta rows it pulls per batch. That cap "
  "bounds both the size of each API call and how quickly the worker can catch up after an outage, so it matters "
  "more for wave 3 than for today: at cutover, the legacy worker for those stores stops and the agents take over, "
  "and any backlog left in the worker at that moment has to drain first.")

regular("invsync")
U("The south-west one is degraded. Tail its log on invsync-02.")
sh("ssh invsync-02 'tail -n 110 /var/log/invsync/southwest.log'",
   fitP(lambda n: invsync_log(n, clock(9, 40), P["IW"]), 110, ["IW"]), expect=["IW"])
A("The log explains the degradation. Batches are applying, but slowly: many take several seconds, some time out "
  "and retry, and the Tillwise API answers with rate-limit responses on a regular basis, each followed by a pause. "
  "Meanwhile new deltas keep arriving from StoreLink faster than the worker clears them, so its pending count "
  "keeps growing, and the monitor has logged a warning that the backlog is above its threshold. This is a worker "
  "sending more concurrent requests than its API quota allows, so it spends its time backing off.")

regular("invsync")
U("Its config?")
sw_yaml = worker_yaml({"inflight": 4})
read("invsync/workers/southwest.yaml", sw_yaml)
A("It allows more concurrent API requests than most workers, and the south-west region is large, so it is the one "
  "that trips the API's per-client rate limit. Fewer requests in flight would mean fewer rate-limit responses and "
  "less time lost to back-off; the total throughput would likely go up rather than down. I would halve its "
  "in-flight limit before touching anything else.")

regular("invsync")
U("And the north-east worker's config; those are tonight's stores.")
read("invsync/workers/northeast.yaml", worker_yaml({}))
A("The north-east worker is configured like most of the others, with nothing unusual in its source, target or "
  "apply settings. At cutover the controller stops this worker for the wave 2 stores only (step 7 of the plan); "
  "it keeps running for the region's stores in later waves, which is why its stores file is trimmed the day after "
  "rather than tonight.")

regular("invsync")
U("How many stock deltas are sitting unapplied for the north-east stores right now?")
psql("SELECT count(*) AS unapplied_deltas, min(created_at) AS oldest_pending, max(created_at) AS newest_pending, "
     "count(DISTINCT store) AS stores_affected, count(DISTINCT sku) AS skus_affected, count(*) FILTER (WHERE "
     "dead_lettered) AS dead_lettered, now() AS checked_at FROM invsync.delta_queue WHERE region = 'northeast' AND "
     "applied_at IS NULL \\gx\nSELECT store, count(*) AS unapplied, min(created_at)::timestamp(0) AS oldest, count("
     "DISTINCT sku) AS skus, max(last_error) AS last_error FROM invsync.delta_queue WHERE region = 'northeast' AND "
     "applied_at IS NULL GROUP BY store ORDER BY store",
     planted(lambda: delta_summary(IN_VALUE, [s for s in W2 if s.key == "northeast"], NOW), ["IN"]), expect=["IN"])
A("The north-east has a backlog of unapplied deltas spread across all of its stores, the oldest from early this "
  "morning, and a few dead-lettered. For tonight the question is whether they drain before the stock snapshot "
  "handover in the cutover. At the worker's current pace they will, by a wide margin, but I would check the count "
  "again at the preflight: any delta still queued at handover would be applied on top of the snapshot, which the "
  "platform handles, but it makes the first morning's stock harder to reconcile.")

regular("invsync")
U("Same for the north-west, for comparison.")
psql("SELECT count(*) AS unapplied_deltas, min(created_at) AS oldest_pending, max(created_at) AS newest_pending, "
     "count(DISTINCT store) AS stores_affected, count(DISTINCT sku) AS skus_affected, count(*) FILTER (WHERE "
     "dead_lettered) AS dead_lettered, now() AS checked_at FROM invsync.delta_queue WHERE region = 'northwest' AND "
     "applied_at IS NULL \\gx\nSELECT store, count(*) AS unapplied, min(created_at)::timestamp(0) AS oldest, count("
     "DISTINCT sku) AS skus, max(last_error) AS last_error FROM invsync.delta_queue WHERE region = 'northwest' AND "
     "applied_at IS NULL GROUP BY store ORDER BY store",
     N(lambda: delta_summary(None, region_stores("northwest"), NOW)))
A("The north-west is much healthier: far fewer unapplied deltas, all of them recent, which is the normal state of "
  "a worker keeping up. So the north-east is carrying more than it should, though nothing like the south-west; "
  "it probably reflects this morning's deliveries being booked in at the stores.")

regular("invsync")
U("What's in the dead-letter table? I don't want tonight's stores to have stock stuck in there.")
psql("SELECT delta_id, store, sku, qty, reason, dead_lettered_at::timestamp(0) FROM invsync.dead_letter ORDER BY "
     "dead_lettered_at DESC LIMIT 60", fitN(lambda n: dead_letters(n, NOW), 60))
A("The dead-letter table is mostly unknown SKUs, deltas for items the Tillwise item master does not have yet, "
  "with a few deltas for stores not enrolled and some superseded by a newer delta for the same item. None of the "
  "unknown-SKU rows can be fixed in invsync; they clear once the item exists in Tillwise and the rows are replayed. "
  "It overlaps with pricing's item-master problems, so the same clean-up will fix both. A few of tonight's stores "
  "appear, but only for unknown items, which would not change the stock of anything they sell today.")

regular("invsync")
U("Go with your change on the south-west worker: halve max_inflight.")
d, FILES["invsync/workers/southwest.yaml"] = make_diff("invsync/workers/southwest.yaml", sw_yaml,
                                                       [("max_inflight: 4", 1, ["  max_inflight: 2"])])
patch("invsync/workers/southwest.yaml", d,
      ["invsyncctl validate invsync/workers/southwest.yaml", "  loaded 52 keys from invsync/workers/southwest.yaml"] +
      [f"  {k}: ok" for k in ["schema", "source reachable (SQLSL-LDS01)", "target reachable (inventory.api)",
                              "stores_file: 14 stores, all enrolled or legacy", "alerts thresholds",
                              "mapping: reasons.yaml (31 reason codes)", "retries within api quota (max_inflight x "
                              "requests/s <= 40)", "log path writable (/var/log/invsync)"]] +
      ["", "invsyncctl diff southwest --running", "  target.max_inflight: 4 -> 2 (takes effect on restart)", "",
       "git -C invsync commit -am 'southwest: halve max_inflight (API 429s)'",
       f"[main {hexs(7)}] southwest: halve max_inflight (API 429s)", " 1 file changed, 1 insertion(+), 1 deletion(-)"])
A("Changed and committed; the worker picks it up on restart. Restarting an invsync worker is a central service on "
  "our own hosts, not a store server or a till agent, so the trading-hours rule does not stand in the way: the "
  "stores are not touched, and deltas simply wait in StoreLink's table for the few seconds it takes.")

regular("invsync")
U("Restart that worker and show me the status a couple of minutes later.")
sh("invsyncctl restart southwest && sleep 150 && invsyncctl status", N(lambda: invsync_status(NOW)))
A("The south-west worker is back to running, and its lag and pending count have started to come down; they will "
  "take a while to reach the other regions' levels, but the direction is right. No new rate-limit alerts since the "
  "restart. I would look again in half an hour.")

# --- gateways --------------------------------------------------------------------------

at(12, 0)
regular("gateways")
U("Loyalty next. Read the loyalty gateway's production appsettings.")
read("gateways/loyalty/appsettings.Production.json",
     planted(lambda: "\n".join(gateway_settings({
         "base": "https://api.emberpoints.io/v3/programmes/phl", "secondary": "https://api-dr.emberpoints.io/v3/"
         "programmes/phl", "redis": "gw-redis-a.store-gateways.svc.cluster.local", "timeout": P["L1"]})),
             ["L1"]).split("\n"), expect=["L1"])
A("The gateway is a small ASP.NET service: it terminates the stores' TLS (with client certificates required and an "
  "allow-list of store networks), calls the programme provider's API with a request timeout, retries and a "
  "circuit breaker, falls back to a secondary endpoint, and keeps a Redis-backed store-and-forward queue for when "
  "the provider is down. Earn and burn requests from the tills go through it in both the legacy and the new path.")

regular("gateways")
U("And its health endpoint.")
sh("curl -sS -i --cert ~/.phl/ops.pem https://loyalty-gw.phl.internal:8443/health/detail",
   planted(lambda: health_json(NOW, "3.2.1", LOY_ROUTES, queue_line=P["L2"]), ["L2"]), expect=["L2"])
sh("kubectl -n store-gateways get pods -l app=loyalty-gw -o wide && kubectl -n store-gateways top pods -l "
   "app=loyalty-gw && kubectl -n store-gateways get hpa loyalty-gw --no-headers", N(lambda: kube_pods("loyalty-gw", 6, NOW)))
A("The gateway reports itself degraded, and not because of the upstream: both provider endpoints answer within "
  "their normal latencies with no errors to speak of. It is the queue: the store-and-forward queue holds a lot of "
  "items and the oldest has been waiting for a while, which means requests are being queued rather than forwarded. "
  "The route list shows where: the offline-batch earn route, which replays points earned while a till was offline, "
  "is busy and slow.")

regular("gateways")
U("Finance and CRM both say some members' points balances are off between StoreLink and Tillwise since the pilot. "
  "Compare them.")
psql("SELECT count(*) AS accounts_compared, count(*) FILTER (WHERE legacy_points <> tillwise_points) AS "
     "mismatched_accounts, sum(tillwise_points - legacy_points) AS points_diff_total, max(abs(tillwise_points - "
     "legacy_points)) AS max_abs_diff, count(DISTINCT last_store) FILTER (WHERE legacy_points <> tillwise_points) AS "
     "stores_involved, now() AS checked_at FROM crm.loyalty_balance_compare \\gx\nSELECT member_masked AS member, "
     "legacy_points, tillwise_points, tillwise_points - legacy_points AS diff, last_store, last_txn_at::timestamp(0), "
     "last_kind FROM crm.loyalty_balance_compare WHERE legacy_points <> tillwise_points ORDER BY random() LIMIT 18",
     planted(lambda: points_mismatch(L3_VALUE, PILOT, NOW), ["L3"]), expect=["L3"])
A("A few hundred members out of several hundred thousand have different balances, and the difference is mostly in "
  "one direction: Tillwise shows fewer points than StoreLink. The sample says why: most mismatched members last "
  "shopped at a pilot store, and the last event on their account is an offline earn, with some reversed "
  "redemptions. That fits the queue we just saw: points earned at the pilot stores while a lane was offline are "
  "sitting in the gateway's queue, or failed to replay, so Tillwise has not credited them yet.")

regular("gateways")
U("So offline earns from the pilot aren't being replayed properly? Walk me through it.")
A("When a till cannot reach the loyalty gateway, it records the earn locally and sends it later as part of an "
  "offline batch. On StoreLink those batches went to the gateway at end of day; on Tillwise the agent sends them as "
  "soon as the lane is back online, through the offline-batch route. The gateway queues each batch and forwards it "
  "to the provider, which credits the points to the member and makes the balance visible to both platforms.\n\n"
  "Two things go wrong at once. The pilot lanes that crashed (Kendal's agent) produced offline batches that "
  "overlap with transactions the provider had already seen through the old path, and the provider rejects the "
  "whole batch when one line is a duplicate, so the gateway keeps retrying it. And the batches that are fine are "
  "stuck behind those in the queue. The fix is on the gateway side: forward batches line by line, or drop "
  "duplicates before forwarding. Tonight's stores would hit the same thing, so I would raise it with the gateway's "
  "owners today.")

regular("gateways")
U("Who last touched the loyalty gateway's batch forwarding? I want to know who to talk to.")
def _git_day(k):
    return f"{clock(0, 0, day=-4 - 3 * k - rng.randint(0, 2)):%Y-%m-%d}"


tool("git", {"cmd": "git -C gateways log --date=short --format='%h %ad %an  %s' -n 30 -- src/Loyalty/ shared/Queue/"},
     N(lambda: "\n".join(f"{hexs(7)} {_git_day(k)} {a}  {subj}" for k, (a, subj) in enumerate([
         (rng.choice(["Dominika Halvorsen", "Sunil Ferreira", "Gwen Ashworth", "Tomasz Lind", "Priya Okonjo"]), x)
         for x in ["queue: forward offline batches as one request", "loyalty: map provider 409 to retry",
                   "queue: drain workers configurable", "loyalty: earn idempotency key from txn id",
                   "deps: bump Polly to 8.4", "health: queue oldest item age", "loyalty: secondary endpoint",
                   "ci: run contract tests against sandbox", "queue: redis ssl", "loyalty: burn reversal route",
                   "logging: request ids in every line", "loyalty: offline-batch route", "docs: runbook for DR",
                   "queue: dead letter after 20 attempts", "loyalty: timeout per route", "tls: client cert allow-list",
                   "loyalty: member lookup cache 60s", "build: dotnet 8.0.4", "queue: metrics per store",
                   "loyalty: reject batches larger than 500", "health: upstream probe interval",
                   "k8s: pod disruption budget", "loyalty: map provider 422 to permanent failure",
                   "queue: exponential backoff with jitter", "ci: sbom", "loyalty: batch size histogram",
                   "tests: offline batch with duplicate line", "queue: pause drain when breaker open",
                   "loyalty: programme id from config", "initial import"]]))))
A("The batch forwarding was changed a few weeks ago, by the commit that sends an offline batch as one request to "
  "the provider, and a later commit maps the provider's conflict response to a retry; together those explain the "
  "behaviour we saw, where one duplicate line makes the whole batch fail and retry forever. There is even a test "
  "for a batch with a duplicate line, so the case was considered; it may be that the provider's response changed. "
  "The author of the forwarding change is the person to talk to.")

regular("gateways")
U("Show me the loyalty gateway's log for the offline-batch route, last ten minutes.")
sh("kubectl -n store-gateways logs deploy/loyalty-gw --since=10m | grep -E 'offline-batch|queue|breaker' | tail -n 70",
   fitN(lambda n: gateway_log(n, NOW - datetime.timedelta(hours=1, minutes=10), ["POST /v1/earn/offline-batch"]), 70))
A("The log shows the pattern: offline-batch requests from a handful of stores, several timing out against the "
  "provider and being retried, interleaved with the queue draining only a few items at a time. The breaker stays "
  "closed, so the gateway never stops trying, which is right for a provider that is up but slow with these "
  "batches. The store numbers in the failing requests are mostly pilot stores.")

regular("gateways")
U("Payments gateway now: PayBridge's production appsettings.")
read("gateways/paybridge/appsettings.Production.json",
     planted(lambda: "\n".join(gateway_settings({
         "base": "https://ecom-gw.nbms-acq.co.uk/api/v4", "secondary": "https://ecom-gw-dr.nbms-acq.co.uk/api/v4",
         "redis": "gw-redis-b.store-gateways.svc.cluster.local", "breaker": P["B1"], "saf": "false",
         "retries": 0})), ["B1"]).split("\n"), expect=["B1"])
A("Same codebase and layout as the loyalty gateway, with two differences that matter for payments: it never "
  "retries a request (a retried authorisation can charge twice) and store-and-forward is off, so when the acquirer "
  "is unavailable the till gets a decline rather than a queued payment. The breaker's threshold decides how many "
  "failures in its window open it, after which requests go to the secondary endpoint.")

regular("gateways")
U("And PayBridge's health.")
sh("curl -sS -i --cert ~/.phl/ops.pem https://paybridge.phl.internal:8443/health/detail",
   planted(lambda: health_json(NOW, "2.14.3", PAY_ROUTES, p95_line=P["B2"]), ["B2"]), expect=["B2"])
sh("kubectl -n store-gateways get pods -l app=paybridge -o wide && kubectl -n store-gateways top pods -l "
   "app=paybridge && kubectl -n store-gateways get hpa paybridge --no-headers", N(lambda: kube_pods("paybridge", 8, NOW)))
A("PayBridge also reports itself degraded, and this time it is the primary upstream: its p95 latency is well above "
  "what the secondary shows and above what the tills tolerate comfortably, though its error rate is still low and "
  "the breaker is closed. The queue is empty, as expected with store-and-forward off. Card authorisations are "
  "slower than they should be, but they are succeeding.")

regular("gateways")
U(f"Our acquirer is {M['acquirer']}; their status page says all green. Tail PayBridge's log for the last ten "
  f"minutes.")
sh("kubectl -n store-gateways logs deploy/paybridge --since=10m | tail -n 80",
   fitN(lambda n: gateway_log(n, NOW - datetime.timedelta(hours=1, minutes=10), PAY_ROUTES), 80))
A("The log is mostly successful requests with upstream times that vary a lot, and a sprinkling of gateway "
  "timeouts on authorisations that were retried by the till itself rather than by the gateway. Several stores "
  "present client certificates that expire within the month, which is a separate job for the certificate rotation. "
  "Nothing here points inside our side: the slow part is the time the acquirer's endpoint takes. I would send the "
  "acquirer our timings from the health output and this log, with request IDs, rather than rely on their status "
  "page.")

regular("gateways")
U("Tonight's stores' PIN pads need the new keys before they can take cards on Tillwise. Pull the PED estate export "
  "for the wave 2 stores.")
ps("Import-Csv \\\\fs01\\storesys\\exports\\ped_estate_20260512.csv | Where-Object { $_.store -in (Get-Content "
   "\\\\fs01\\storesys\\waves\\w2_stores.txt) } | ConvertTo-Csv -NoTypeInformation",
   fitN(lambda n: ped_csv(W2, n), 90))
A("Most of tonight's PIN pads already have the new key injected and have taken transactions this morning. A "
  "minority are still on the legacy key or pending injection, spread over several stores rather than concentrated "
  "in one. Those lanes would decline cards after cutover, so they either need injecting during the day (remote "
  "injection does not restart anything and is fine while trading) or the cutover's PED step has to skip them, "
  "which the controller will report as a preflight warning.")

# --- replenishment ---------------------------------------------------------------------

def dc_stores(dc):
    return [s for s in STORES if s.key in DC_REGIONS[dc]]


at(13, 25)
regular("replen")
U("DC planning pinged me: the Avonmouth replenishment job ordered against the wrong cut-off last week. Read its job "
  "definition.")
read("scheduler/jobs/repl_avonmouth.yaml",
     planted(lambda: "\n".join(repl_yaml({"cron": "15 1 * * *", "cutoff": P["R1"]}, dc_stores("avonmouth"))), ["R1"]).split("\n"),
     expect=["R1"])
A("The definition is straightforward: it runs in the small hours, waits for both the Tillwise sales export (for "
  "migrated stores) and the StoreLink end-of-day files (for legacy ones), takes the stock snapshot from invsync and "
  "the weekly forecasts, and orders with a lead time, a review period and a service-level safety stock, rounded to "
  "cases and capped per store. The order cut-off is the time by which the DC must have the orders to pick them for "
  "the next delivery; if planning thinks it is wrong, it is one line to change, but I would let them tell us the "
  "right value rather than guess.")

regular("replen")
U("Compare Doncaster's; it serves tonight's stores.")
read("scheduler/jobs/repl_doncaster.yaml",
     N(lambda: "\n".join(repl_yaml({"cron": "45 0 * * *"}, dc_stores("doncaster")))).split("\n"))
A("Doncaster's job has the same structure with its own schedule, cut-off, lead time and caps. Both read sales for "
  "migrated stores from the Tillwise export, so tonight's cutover changes where Doncaster gets sales for the wave 2 "
  "stores from tomorrow night onwards, with no change to the job itself: the job decides per store, based on the "
  "wave file, which source to wait for.")

regular("replen")
U("And Livingston's definition, since that's the one that failed last night.")
read("scheduler/jobs/repl_livingston.yaml", N(lambda: "\n".join(repl_yaml({"cron": "15 1 * * *", "far": "island ferry"}, dc_stores("livingston")))).split("\n"))
A("Livingston's definition is unremarkable: the same inputs and the same wait for complete sales, with its own "
  "cut-off and lead time for the Scottish stores, and an override for an island store with a longer lead time. "
  "Nothing in it would make it fail on its own; the run history and the log will show what happened.")

regular("replen")
U("Livingston's run failed last night. Show me its run history.")
sh("schedctl runs repl_livingston --last 20", planted(lambda: schedctl_runs(P["R2"]), ["R2"]), expect=["R2"])
A("Livingston has run cleanly every night for the last three weeks, always in twenty to thirty minutes, except last "
  "night: the newest run failed with exit code 3 after about three quarters of an hour and wrote no order lines. "
  "Exit 3 is the job's code for incomplete inputs, and the duration matches the job waiting for its maximum and "
  "then giving up.")

regular("replen")
U("Why did it fail? Show me the log of the failed run.")
sh("schedctl logs repl_livingston --run last-failed",
   N(lambda: repl_log(12, clock(1, 15, 2), dc_stores("livingston"), fail=True)))
A("It waited for the Tillwise sales export to be complete for its migrated stores, which is only one store in "
  "Scotland (the pilot store in Stirling). The export manifest never showed that store as complete, so after the "
  "maximum wait the job refused to order on partial sales and failed, as designed. The other stores' inputs were "
  "fine. So the failure is in the Tillwise export for one pilot store, not in the replenishment job.")

regular("replen")
U("And Doncaster's last run, to be sure it's happy with the pilot stores' sales coming from Tillwise.")
sh("schedctl logs repl_doncaster --run last",
   planted(lambda: repl_log(18, clock(0, 45, 1), dc_stores("doncaster"), written_line=P["R3"]), ["R3"]),
   expect=["R3"])
A("Doncaster's run was clean: it found the Tillwise export complete for its migrated stores and the StoreLink files "
  "for the rest, proposed orders store by store (a few capped by the maximum order value, which is normal), wrote "
  "its order lines, sent the EDI interchange to the warehouse gateway and archived it. So the mixed sourcing works; "
  "Livingston's problem is specific to the one store's export.")

regular("replen")
U("So Livingston waited for an export that only matters for Stirling. What do we do, and does it affect tonight?")
A("It does not affect tonight: Doncaster serves the wave 2 stores and ran cleanly. For Livingston, two things. "
  "First, rerun it now for yesterday's business date: Stirling's export has completed since (the export job's "
  "status shows a late finish), so the rerun should find all its inputs and produce the orders the DC missed. The "
  "DC can still pick them today for tomorrow's delivery if planning agrees. Second, the job's all-or-nothing wait "
  "means one slow store stops a whole DC; a per-store fallback (order that store on its forecast alone and flag it) "
  "would be better, but that is a change for dc-planning to agree, not something to rush in today.")

regular("replen")
U("Trigger the Livingston rerun for yesterday's business date and follow it.")
sh("schedctl trigger repl_livingston --business-date 2026-05-11 --reason 'rerun after late tillwise export' --follow",
   N(lambda: repl_log(14, NOW - datetime.timedelta(hours=1), dc_stores("livingston"))))
A("The rerun found every input this time, ordered for all the DC's stores and sent the interchange to the "
  "warehouse gateway. DC planning can pick it up; I would tell them it is a rerun of last night's orders, so they "
  "do not treat it as an extra day.")

# --- reconciliation --------------------------------------------------------------------

at(14, 5)
regular("recon")
U("Recon. Monday's Yorkshire report first; Idris needs Yorkshire and the north-east signed before the go/no-go.")
sh("recon run --region yorkshire --business-date 2026-05-11 --compare storelink,tillwise",
   planted(lambda: recon_report(region_stores("yorkshire"), "2026-05-11", NOW,
                                variance=float(P["C1"].split()[-1]), must=[RIPON.no], stale=[RIPON.no]), ["C1"]),
   expect=["C1"])
A("Yorkshire is outside tolerance. Transaction counts match almost everywhere, but several stores show a net "
  "difference between the two platforms, all in the same direction (Tillwise lower), carried by the card and cash "
  "tenders. Ripon has the largest difference, and the freshness block at the bottom shows why: StoreLink's last "
  "end-of-day file from Ripon is ten days old. That file carries the post-close voids and cash-up corrections into "
  "StoreLink, so without it StoreLink still counts sales that were voided, and looks higher than Tillwise. The "
  "other stores' differences are smaller and need the per-store, per-tender breakdown. Finance will not sign this "
  "as it stands.")

regular("recon")
U("The north-east too.")
sh("recon run --region northeast --business-date 2026-05-11 --compare storelink,tillwise",
   N(lambda: recon_report(region_stores("northeast"), "2026-05-11", NOW, missing=0, variance=0.0, unmatched=0)))
A("The north-east is clean: every store matches on transactions and net sales, no unmatched tenders, and the report "
  "says within tolerance. Idris can sign that one as soon as he looks at it.")

regular("recon")
U("Wales, since Idris asked about it this morning.")
sh("recon run --region wales --business-date 2026-05-11 --compare storelink,tillwise",
   planted(lambda: recon_report(region_stores("wales"), "2026-05-11", NOW, missing=0,
                                variance=-rng.randint(200, 4000) / 100, unmatched=int(P["C2"].split()[-1])), ["C2"]),
   expect=["C2"])
A("Wales is within a small variance on net sales, but it has an unusual number of unmatched tenders: tenders that "
  "exist on one platform without a matching tender line on the other. With net sales that nearly agree, that is "
  "usually the same money recorded as a different tender type, for example a gift card payment taken as a voucher, "
  "rather than money missing. It does not affect tonight, since no Welsh store is in wave 2, but Idris will want "
  "the list.")

regular("recon")
U("Scotland.")
sh("recon run --region scotland --business-date 2026-05-11 --compare storelink,tillwise",
   planted(lambda: recon_report(region_stores("scotland"), "2026-05-11", NOW,
                                missing=int(P["C3"].split()[-1])), ["C3"]), expect=["C3"])
A("Scotland has a different problem: a block of transactions present in StoreLink that never reached Tillwise, "
  "spread over a few stores. That is the same symptom as the late Tillwise export for Stirling, but here it is the "
  "dual-running stores, so it is more likely their agents' upload than the export. Scotland is wave 3, so this "
  "does not stand in the way tonight, but it is the thing to understand before that wave's rehearsal.")

regular("recon")
U("North-west too, while we're at it; Kendal is in there.")
sh("recon run --region northwest --business-date 2026-05-11 --compare storelink,tillwise",
   N(lambda: recon_report(region_stores("northwest"), "2026-05-11", NOW, missing=0,
                          variance=-rng.randint(500, 4500) / 100, unmatched=rng.randint(2, 9))))
A("The north-west is close: a small variance over a few stores and a handful of unmatched tenders, within what "
  "midnight-crossing transactions produce. Kendal trades on Tillwise only, so its rows compare Tillwise with "
  "StoreLink's read-only copy and match. Nothing there for finance to worry about.")

regular("recon")
U("Finance also asked about gift cards in the South East on Monday. What does StoreLink have for the South East's "
  "tenders on the 11th?")
sqlcmd("SELECT h.StoreNo, COUNT(*) AS Txns, SUM(h.NetAmount) AS NetSales FROM dbo.SalesHeader h JOIN dbo.Store s ON "
       "s.StoreNo = h.StoreNo WHERE s.Region = 'South East' AND h.BusinessDate = '2026-05-11' GROUP BY h.StoreNo "
       "ORDER BY h.StoreNo; SELECT t.TenderType, COUNT(*) AS Txns, SUM(t.Amount) AS Amount FROM dbo.TenderLine t "
       "JOIN dbo.Store s ON s.StoreNo = t.StoreNo WHERE s.Region = 'South East' AND t.BusinessDate = '2026-05-11' "
       "GROUP BY t.TenderType ORDER BY Amount DESC; SELECT t.StoreNo, t.TenderType, COUNT(*) AS Txns, SUM(t.Amount) "
       "AS Amount FROM dbo.TenderLine t JOIN dbo.Store s ON s.StoreNo = t.StoreNo WHERE s.Region = 'South East' AND "
       "t.BusinessDate = '2026-05-11' AND t.TenderType IN ('CARD', 'CASH', 'POINTS') GROUP BY t.StoreNo, t.TenderType "
       "ORDER BY t.StoreNo, t.TenderType",
       planted(lambda: sqlcmd_tenders(region_stores("southeast"), gift_amount=P["C4"]), ["C4"]), expect=["C4"])
A("StoreLink's side for the region: each store's transaction count and net sales, and the tender totals across the "
  "region, cards by far the largest, then cash, points, gift cards, vouchers and the small account and change "
  "lines. The gift card total is the figure finance asked about; the Tillwise side will show whether the two "
  "platforms agree on it.")

regular("recon")
U("And the Tillwise side for the same stores and day.")
psql("SELECT store, count(*) AS txns, sum(net) AS net_sales FROM sales.header WHERE store IN (" +
     store_list(region_stores("southeast")) + ") AND business_date = '2026-05-11' GROUP BY store ORDER BY store; "
     "SELECT lower(tender) AS tender, count(*) AS txns, sum(amount) AS amount FROM sales.tender_line WHERE store IN (" +
     store_list(region_stores("southeast")) + ") AND business_date = '2026-05-11' GROUP BY 1 ORDER BY amount DESC",
     N(lambda: psql_tenders(region_stores("southeast"))))
A("The Tillwise side has the same shape, and the tender totals differ from StoreLink's by small amounts in most "
  "tenders, gift cards included. Those differences are within what we see from transactions crossing midnight, "
  "which the two platforms assign to different business days. I would answer finance with both outputs side by "
  "side and that explanation, and offer a re-run of the South East recon if they want it in report form.")

regular("recon")
U("Yorkshire's variance: which stores and tenders?")
psql("SELECT store, tender, sum(legacy_amount) AS storelink, sum(tillwise_amount) AS tillwise, sum(tillwise_amount - "
     "legacy_amount) AS diff, count(*) FILTER (WHERE tillwise_amount IS NULL) AS missing_lines FROM recon.tender_diff "
     "WHERE region = 'yorkshire' AND business_date = '2026-05-11' GROUP BY 1, 2 HAVING sum(tillwise_amount - "
     "legacy_amount) <> 0 ORDER BY 1, 2",
     N(lambda: psql_table(["store", "tender", "storelink", "tillwise", "diff", "missing_lines"],
                          [[s.no, t, f"{a:.2f}", f"{a - dd:.2f}", f"{-dd:.2f}", rng.randint(0, 6)]
                           for s in [RIPON] + rng.sample([x for x in region_stores("yorkshire") if x is not RIPON], 7)
                           for t in ["card", "cash", "gift_card"]
                           for a, dd in [(rng.uniform(2000, 30000),
                                          rng.uniform(40, 120) if s is RIPON else rng.uniform(3, 30))]],
                          numeric=(2, 3, 4, 5))))
A("Ripon's rows are the largest, in every tender, and they are the voids and corrections StoreLink never received. "
  "At the other stores the differences are small and come with missing tender lines: whole tenders absent on the "
  "Tillwise side, a few per store, which points at those stores' uploads to Tillwise rather than at StoreLink. Once "
  "Ripon's upload is fixed and its files land, a re-run should shrink the variance to the other stores' small "
  "differences.")

regular("recon")
U("Idris will want an explanation for Ripon before he signs anything for Yorkshire. What do I tell him?")
A("Suggested wording:\n\n\"Most of Yorkshire's variance for Monday comes from Ripon, whose StoreLink end-of-day "
  "upload has been failing for about ten days, so one side of the comparison is incomplete for that store. We are "
  "fixing the upload this afternoon; once Monday's file has landed we will re-run the Yorkshire recon and send you "
  "the new report. The remaining differences at other stores are missing tender lines on the Tillwise side, "
  "which we are tracing to the agents' uploads. No Yorkshire store cuts over tonight unless you have signed the "
  "re-run.\"\n\nThe last sentence matters: it tells him the rule is being kept, which makes the sign-off easier to "
  "give.")

regular("recon")
U("Idris asked for the Welsh unmatched tenders as a list. Give me a sample of them.")
psql("SELECT store, txn_no, txn_time::timestamp(0), legacy_tender, legacy_amount, tillwise_tender, tillwise_amount "
     "FROM recon.unmatched_tender WHERE region = 'wales' AND business_date = '2026-05-11' ORDER BY txn_time LIMIT 20",
     N(lambda: psql_table(["store", "txn_no", "txn_time", "legacy_tender", "legacy_amount", "tillwise_tender",
                           "tillwise_amount"],
                          [[rng.choice(region_stores("wales")).no, rng.randint(20000, 49999),
                            f"2026-05-11 {rng.randint(8, 19):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}",
                            lt, f"{amt:.2f}", tt, f"{amt:.2f}"]
                           for lt, tt, amt in [(rng.choice(["GIFTCARD", "VOUCHER", "GIFTCARD"]),
                                                rng.choice(["voucher", "gift_card_ext", "other"]),
                                                rng.uniform(5, 80)) for _ in range(20)]],
                          numeric=(4, 6))))
A("The sample confirms it: every unmatched pair has the same amount on both sides but a different tender type. "
  "StoreLink's gift card and voucher tenders map to Tillwise types that the recon does not treat as equivalent, "
  "so the money agrees but the tender lines do not pair up. That is a mapping fix in recon (or in the Tillwise "
  "tender set-up) rather than missing takings; Idris can note it and sign Wales.")

# --- store network ---------------------------------------------------------------------

at(14, 55)
regular("network")
U("Network. Bronagh says Whitby has had fragmentation alarms since it was staged for wave 2. Look at Whitby's "
  "router: the tunnel interface's config and its IPsec SA.")
sh(f"netexec rtr-s{WHITBY.no} --cmd 'show running-config interface Tunnel100' --cmd 'show crypto ipsec sa interface "
   "Tunnel100' --cmd 'show interfaces Tunnel100 | include MTU|drops|rate'",
   planted(lambda: tunnel_config(P["N1"]), ["N1"]), expect=["N1"])
sh(f"netexec rtr-s{WHITBY.no} --cmd 'show ip interface brief' --cmd 'show version | include uptime|image|IOS' "
   "--cmd 'show ip ospf neighbor'",
   N(ip_int_brief))
A("The tunnel's IP MTU on this router is set lower than our standard, and the TCP MSS adjustment follows it, while "
  "the SA reports a path MTU and a plaintext MTU that would comfortably carry the standard size. A hand-set value "
  "like this usually dates from an old troubleshooting session. With a lower tunnel MTU, full-size packets from the "
  "store LAN that do not honour the MSS (UDP, some of the agent's uploads) get fragmented before encryption, which "
  "is what the hub's fragmentation alarm counts. The SA itself is healthy, with no send errors and few receive "
  "errors, so the link is sound; it is the MTU that is off.")

regular("network")
U("What does the standard template put there?")
read("netcfg/templates/store-router.j2", ROUTER_TEMPLATE.split("\n"))
A("The template renders both tunnels with the same MTU, taken from the store's host variables and defaulting to "
  "the standard value when none is set, with the MSS adjustment derived from it. So either Whitby's host variables "
  "set a lower value, or the router was changed by hand and has drifted from what netcfg would render. Either way, "
  "the fix is to make the host variables say what we want and let netcfg push it, rather than another hand edit.")

regular("network")
U("What does the hub side see for Whitby's tunnel?")
sh(f"ssh netops@fw-hub-lds01 'diagnose vpn tunnel list name ST{WHITBY.no}-P1'",
   N(lambda: "\n".join([
       "list ipsec tunnel by names in vd 0", "------------------------------------------------------",
       f"name=ST{WHITBY.no}-P1 ver=2 serial={rng.randint(100, 400)} 195.12.44.10:4500->81.{rng.randint(1, 254)}."
       f"{rng.randint(1, 254)}.{rng.randint(2, 250)}:4500 tun_id=10.250.{rng.randint(1, 60)}.1 dst_mtu=1500 "
       "dpd-link=on weight=1",
       "bound_if=5 lgwy=static/1 tun=intf mode=dial_inst/3 encap=none/4616 options[1208]=npu rgwy-chg frag-rfc "
       "run_state=0 role=primary accept_traffic=1 overlay_id=0", "",
       f"parent=ST-STORES index=0", f"proxyid_num=1 child_num=0 refcnt={rng.randint(5, 9)} ilast=0 olast=0 ad=/0",
       f"stat: rxp={rng.randint(10**6, 10**8)} txp={rng.randint(10**6, 10**8)} rxb={rng.randint(10**9, 10**11)} "
       f"txb={rng.randint(10**9, 10**11)}", f"dpd: mode=on-idle on=1 idle=20000ms retry=3 count=0 seqno={rng.randint(10, 9000)}",
       "natt: mode=keepalive draft=0 interval=10 remote_port=4500",
       f"fec: egress=0 ingress=0", f"frag-stats: rx_frag={rng.randint(200000, 900000)} rx_reasm_fail={rng.randint(10, 400)} "
       f"tx_frag={rng.randint(100000, 500000)}",
       "proxyid=ST-STORES proto=0 sa=1 ref=3 serial=1 auto-negotiate adr",
       "  src: 0:0.0.0.0-255.255.255.255:0", "  dst: 0:0.0.0.0-255.255.255.255:0",
       f"  SA:  ref=6 options=18227 type=00 soft=0 mtu=1438 expire={rng.randint(1000, 40000)}/0B replaywin=2048",
       f"       seqno={hexs(6)} esn=0 replaywin_lastseq={hexs(8)} qat=0 rekey=0 hash_search_len=1",
       f"  life: type=01 bytes=0/0 timeout=42903/43200",
       f"  dec: spi={hexs(8)} esp=aes key=32 {hexs(64)}", f"       ah=sha256 key=32 {hexs(64)}",
       f"  enc: spi={hexs(8)} esp=aes key=32 {hexs(64)}", f"       ah=sha256 key=32 {hexs(64)}",
       f"  dec:pkts/bytes={rng.randint(10**6, 10**8)}/{rng.randint(10**9, 10**11)}, "
       f"enc:pkts/bytes={rng.randint(10**6, 10**8)}/{rng.randint(10**9, 10**11)}",
       f"  npu_flag=03 npu_rgwy=81.{rng.randint(1, 254)}.{rng.randint(1, 254)}.{rng.randint(2, 250)} npu_lgwy=195.12.44.10 "
       f"npu_selid={hexs(2)} dec_npuid=1 enc_npuid=1", "run_tally=1"])))
A("From the hub's side the tunnel is up, the SA is healthy and dead-peer detection has never fired, but the "
  "fragmentation counters are high: the hub is receiving a lot of fragments from this store and failing to "
  "reassemble some of them. That is the alarm Bronagh sees, and it is consistent with the store router's lower "
  "tunnel MTU: the router fragments packets before encryption and the hub has to put them back together.")

regular("network")
U("Perth's link has been flaky all week, and it's wave 3. Check its WAN interface and the link events.")
sh(f"netexec rtr-s{PERTH.no} --cmd 'show interfaces GigabitEthernet0/0/0' --cmd 'show logging | include "
   "LINK|LINEPROTO|TRACK'",
   planted(lambda: "=== show interfaces GigabitEthernet0/0/0 ===\n" + show_interface("GigabitEthernet0/0/0",
                                                                                      crc_text=P["N2"]) +
           "\n\n" + link_log(NOW, 4), ["N2"]), expect=["N2"])
A("The WAN port is up, but it has negotiated at a hundred megabit rather than gigabit, its reliability is a little "
  "below perfect, and the input error counter is dominated by CRC errors since the counters were last cleared. The "
  "log shows the link dropping and coming back several times in two days, each time taking the hub tracking with "
  "it. CRC errors on a copper hand-off to the ISP's equipment usually mean a bad patch lead or port; I would ask "
  "the store to swap the lead between the router and the ONT first, then the ISP if it persists. It has to be "
  "stable before wave 3.")

regular("network")
U("Cheltenham says Tillwise screens are slow in their back office. Test from Cheltenham's BOS to the Tillwise API.")
ps(f"Invoke-Command -ComputerName {CHELT.host()} -ScriptBlock {{ Test-NetConnection api.tillwise.cloud -Port 443 "
   "-InformationLevel Detailed; tracert -d -w 1000 api.tillwise.cloud; 1..10 | ForEach-Object { curl.exe -so NUL -w "
   "'connect=%{time_connect} tls=%{time_appconnect} ttfb=%{time_starttransfer} total=%{time_total} "
   "http=%{http_code}\\n' https://api.tillwise.cloud/v2/ping }; Get-NetAdapter | Format-Table Name, "
   "InterfaceDescription, ifIndex, Status, MacAddress, LinkSpeed }",
   planted(lambda: test_netconnection(P["N3"], CHELT), ["N3"]), expect=["N3"])
say("For comparison, the same test to the price distributor in our own data centre:")
ps(f"Invoke-Command -ComputerName {CHELT.host()} -ScriptBlock {{ Test-NetConnection pc-dist-01.phl.internal -Port "
   "2222 -InformationLevel Detailed; tracert -d -w 1000 pc-dist-01.phl.internal; 1..10 | ForEach-Object { curl.exe "
   "-so NUL -w 'connect=%{time_connect} tls=%{time_appconnect} ttfb=%{time_starttransfer} total=%{time_total} "
   "http=%{http_code}\\n' https://pc-dist-01.phl.internal/healthz }; Get-NetAdapter | Format-Table Name, "
   "InterfaceDescription, ifIndex, Status, MacAddress, LinkSpeed }",
   N(lambda: test_netconnection(fl("PingReplyDetails (RTT)", f"{rng.randint(9, 16)} ms", W_TEST), CHELT,
                                target="pc-dist-01.phl.internal")))
A("The connection works end to end: DNS resolves both addresses, TCP to 443 succeeds and the ping succeeds, but the "
  "round trip is high for a store on fibre, and the trace shows why: traffic goes through the tunnel to the Leeds "
  "hub (quick, as the second test to our own distributor confirms) and out to the internet from there, then to the "
  "cloud region, with most of the delay added after Leeds and one hop that does not answer. The back office's Tillwise screens make many small requests, so the "
  "round trip adds up. Local internet breakout for Tillwise traffic at the stores would fix it, but that is a "
  "design change for Bronagh, not something for today.")

regular("network")
U("Lichfield keeps falling over to its backup tunnel. What do the IP SLA stats on its router say?")
sh(f"netexec rtr-s{LICH.no} --cmd 'show ip sla statistics' --cmd 'show track'",
   planted(lambda: ip_sla(NOW, P["N4"]), ["N4"]), expect=["N4"])
A("The probe that tracks the hub through the primary tunnel has failed a noticeable number of times against its "
  "successes, while the probes to the cloud and to the NTP server have almost none, and the track object has "
  "changed state many times. So the primary tunnel path to Leeds drops probes now and then, long enough for the "
  "track to go down and the route to switch to the backup tunnel, then comes back. That is the tunnel or the WAN, "
  "not the LAN.")

regular("network")
U("And Lichfield's store switch: anything err-disabled?")
sh(f"netexec sw-s{LICH.no}-01 --cmd 'show interfaces status' --cmd 'show errdisable recovery | include "
   "Enabled|psecure|bpdu'", N(switch_status))
A("Two ports are err-disabled, neither of them a till: by the names, one access point and one device port (a "
  "printer, kiosk or similar), and port-security violations are not set to recover automatically, so those ports "
  "stay down until someone resets them. None of that would make the router's tunnel probe fail; the switch's uplink to the router is connected at "
  "full speed. The err-disabled ports are worth a ticket for the store, separately.")

regular("network")
U("Bronagh can push the Whitby MTU change tonight at 22:05, before the cutover starts at 22:30. Does that fit the "
  "rules and the cutover?")
A("It fits. The rule about restarts covers the back-office server and the till agents; a router interface change is "
  "neither, and at 22:05 Whitby is closed anyway. The tunnel will re-key for a few seconds and the tills hold "
  "transactions locally during that, so nothing is lost. Two conditions: it should go in through netcfg (so the "
  "host variables and the router agree), and the store manager should still hear about it as part of tonight's "
  "note, because the alarm on their screen will clear and someone will ask why. The cutover's preflight at nine "
  "will still show the fragmentation warning, which is expected; the real run starts after the change, so I would "
  "check the tunnel again just before half past ten.")

regular("network")
U("Cheltenham's BOS network config, while we're at it; I want to check it's not using the old DNS servers.")
tool("cmd", {"cmd": f"psexec \\\\{CHELT.host()} ipconfig /all"},
     N(lambda: "\nPsExec v2.43 - Execute processes remotely\nCopyright (C) 2001-2023 Mark Russinovich\nSysinternals - "
               "www.sysinternals.com\n" + ipconfig_all(CHELT) + "\nipconfig exited on " + CHELT.host() +
               " with error code 0."))
A("It uses the two current DNS servers in the data centre, a static address in the store's server range with the "
  "router as gateway, and the ISATAP adapter is disconnected as it should be. Nothing stale there, so the slowness "
  "is the path, as the trace showed, rather than name resolution.")

# --- store servers -----------------------------------------------------------------------

at(15, 40)
regular("stores")
U("Ripon's end-of-day upload is overdue. Show me the scheduled tasks on Ripon's back-office server.")
ps(f"Invoke-Command -ComputerName {RIPON.host()} -ScriptBlock {{ Get-ScheduledTask -TaskPath '\\StoreLink\\', "
   "'\\Tillwise\\', '\\Maintenance\\' | Get-ScheduledTaskInfo | Format-List LastRunTime, LastTaskResult, NextRunTime, "
   "NumberOfMissedRuns, TaskName, TaskPath }",
   planted(lambda: scheduled_tasks(P["T3"], NOW), ["T3"]), expect=["T3"])
ps(f"Invoke-Command -ComputerName {RIPON.host()} -ScriptBlock {{ Get-ChildItem D:\\StoreLink\\EOD\\outbox, "
   "D:\\StoreLink\\EOD\\sent | Sort-Object LastWriteTime }", N(lambda: outbox_listing(RIPON, range(2, 12))))
A("Every task on the server ran recently except the StoreLink end-of-day upload: its last run was about ten days "
  "ago, with a result code that decodes to access denied, and the scheduler has counted missed runs since. The "
  "task is still scheduled, so something prevents it from starting as its account or from copying once started. "
  "The upload's own log will say which.")

regular("stores")
U("Let's see the upload's robocopy log.")
ps(f"Invoke-Command -ComputerName {RIPON.host()} -ScriptBlock {{ Get-Content D:\\StoreLink\\logs\\eodupload.log -Tail 60 }}",
   N(lambda: robocopy_log([f"EOD_{RIPON.no}_202605{d:02d}.eod" for d in range(1, 6)], clock(23, 15, 2, day=-10),
                          failed_at=1)))
A("The last attempt copied the first file and then failed on the next with access denied, retried and gave up; "
  "nothing has run since. Access denied on the destination share, from a task that worked for months, almost always "
  "means the account's stored credentials are stale: the service account's password was rotated, and the task "
  "still holds the old one, so it cannot authenticate to the share (and later cannot even start).")

regular("stores")
U("Anything in Ripon's Task Scheduler event log about it?")
ps(f"Invoke-Command -ComputerName {RIPON.host()} -ScriptBlock {{ Get-WinEvent -LogName "
   "'Microsoft-Windows-TaskScheduler/Operational' -MaxEvents 400 | Where-Object { $_.Id -in 101,104,203,311 } | "
   "Select-Object -First 16 TimeCreated, Id, LevelDisplayName, ProviderName, Message | Format-List }",
   N(lambda: "\n".join(l for k in range(16) for l in ev(
       clock(23, 15, 14 if k % 2 == 0 else 10, day=-(k // 2) - 1), [101, 104][k % 2], "Error",
       "Microsoft-Windows-TaskScheduler",
       ["Task Scheduler failed to start \"\\StoreLink\\EodUpload\" task for user \"PHL\\svc-sl-eod\". "
        "Additional Data: Error Value: 2147943726.",
        "Task Scheduler failed to log on \"PHL\\svc-sl-eod\" . Failure occurred in \"LogonUserCall\" . User "
        "Action: Ensure the credentials for the task are correctly specified. Additional Data: Error Value: "
        "2147943726."][k % 2])).rstrip()))
A("Every night since the failure the scheduler has logged the same pair of errors: it could not log on as the "
  "end-of-day service account, and so could not start the task. The error value is the Windows code for an "
  "unknown user name or bad password. So the task never even starts now; the access-denied copy error in the "
  "robocopy log was the last run before the password change took full effect.")

regular("stores")
U("The svc-sl-eod password was rotated on the 2nd, that fits. Update the task's credentials and run it once. This "
  "isn't a restart of anything, right?")
ps(f"Invoke-Command -ComputerName {RIPON.host()} -ScriptBlock {{ $c = Get-Secret -Vault StoreSys -Name svc-sl-eod; "
   "Set-ScheduledTask -TaskPath '\\StoreLink\\' -TaskName EodUpload -User 'PHL\\svc-sl-eod' -Password "
   "$c.GetNetworkCredential().Password | Out-Null; Start-ScheduledTask -TaskPath '\\StoreLink\\' -TaskName EodUpload; "
   "Start-Sleep 150; Get-ScheduledTaskInfo -TaskPath '\\StoreLink\\' -TaskName EodUpload | Format-List; Get-Content "
   "D:\\StoreLink\\logs\\eodupload.log -Tail 24 }",
   N(lambda: "\n".join([fl("LastRunTime", uk(NOW - datetime.timedelta(hours=1, minutes=2)), W_TASK),
                        fl("LastTaskResult", 0, W_TASK), fl("NextRunTime", uk(clock(23, 15)), W_TASK),
                        fl("NumberOfMissedRuns", 0, W_TASK), fl("TaskName", "EodUpload", W_TASK),
                        fl("TaskPath", "\\StoreLink\\", W_TASK)]) +
     robocopy_log([f"EOD_{RIPON.no}_202605{d:02d}.eod" for d in range(2, 12)], NOW - datetime.timedelta(hours=1,
                                                                                                        minutes=2))))
A("Right, nothing was restarted: the back-office server, its services and the tills were untouched; only a scheduled "
  "task's stored credentials changed and the task ran once. It ran clean this time: every pending end-of-day file "
  "since the failure copied to the central share, and the task's missed-run counter is back to zero with a success "
  "code. The Yorkshire recon can be re-run once the end-of-day collection has loaded those files, which it does "
  "within the hour.")

# --- cutover rehearsals -------------------------------------------------------------------

at(16, 5)
regular("cutover")
U("Cutover rehearsal for tonight: dry run wave 2.")
sh("cutover plan --wave 2 --dry-run",
   planted(lambda: cutover_dryrun(W2, rollback=P["W2c"], warn_stores={
       WHITBY.no: "tunnel fragmentation", RIPON.no: "eod upload overdue", W2[4].no: "journal backlog 40+"}), ["W2c"]),
   expect=["W2c"])
A("The rehearsal passes with warnings and no blocks. The plan is the usual eleven steps, from freezing legacy "
  "price changes to marking the stores live with StoreLink kept read-only. Every store passes preflight; three have "
  "warnings: Whitby's tunnel fragmentation (expected until tonight's change), Ripon's end-of-day upload (fixed an "
  "hour ago, the controller has not re-checked yet) and one store with a journal backlog. The estimated offline "
  "window fits inside the night with room to spare, and the rehearsal took a rollback snapshot to prove that step "
  "works.")

regular("cutover")
U("Wave 3 as well, for the planning.")
sh("cutover plan --wave 3 --dry-run",
   planted(lambda: cutover_dryrun(WAVES[3], offline_line=P["W3b"], warn_stores={PERTH.no: "vpn primary flapping"}),
           ["W3b"]),
   expect=["W3b"])
A("Wave 3 rehearses cleanly apart from one warning, Perth's tunnel, which matches the flaky WAN link. With more "
  "stores than tonight, its estimated offline window is longer than wave 2's but still well inside the night. The "
  "agents for wave 3 are enrolled, which is why nothing blocks; their staging is what remains.")

regular("cutover")
U("Wave 4.")
sh("cutover plan --wave 4 --dry-run", N(lambda: cutover_dryrun(WAVES[4], warn_stores={
    LICH.no: "vpn failovers (track 10)", WAVES[4][7].no: "label printer offline"})))
A("Wave 4 also rehearses without blocks. Lichfield is one of its warnings, for the tunnel failovers we saw, and "
  "one other store has a label printer offline. The offline window is similar to wave 3's.")

regular("cutover")
U("And wave 5.")
w5_blocks = int(P["W5b"].split()[-1])
sh("cutover plan --wave 5 --dry-run",
   planted(lambda: cutover_dryrun(WAVES[5], blocking_line=P["W5b"],
                                  block_stores=[s.no for s in WAVES[5][2:2 + w5_blocks]],
                                  warn_stores={CHELT.no: "high rtt to tillwise"}),
           ["W5b"]), expect=["W5b"])
A("Wave 5 would not go today: several stores block preflight, for reasons that are all preparation (agents not "
  "enrolled, PIN pads without the new keys, a stale stock snapshot, a secondary VPN link down). That is expected "
  "for a wave weeks away; the list is its to-do list. Cheltenham carries a warning for the slow path to the cloud.")

regular("cutover")
U("And wave 6, to complete the set.")
sh("cutover plan --wave 6 --dry-run",
   N(lambda: cutover_dryrun(WAVES[6], block_stores=[s.no for s in WAVES[6][3:3 + next(k for k in (4, 2, 5) if k != w5_blocks)]],
                            warn_stores={WAVES[6][10].no: "label printer offline"})))
A("Wave 6 blocks on its unenrolled agents, the same stores the price dry run skipped this morning, plus one more. "
  "Like wave 5 it is a preparation list rather than a problem.")

regular("cutover")
U(f"Go/no-go was quick. Ravi confirmed {M['w3date']}, and the {M['freeze']}, so waves 4 to 6 have to fit before "
  f"that or wait until after the summer sale. Tonight is a go, conditional on Idris signing the north-east and the "
  f"Yorkshire re-run.")
A("Good. So tonight goes ahead only once finance has signed both regions, which keeps the third rule intact: if the "
  "Yorkshire re-run is not signed by the time the window opens, the Yorkshire stores stay on StoreLink tonight and "
  "the north-east goes alone. The controller supports a partial wave, so we would not lose the night.\n\nFor the "
  "later waves, with wave 3 dated and the freeze fixed, waves 4 to 6 need to fit into the few weeks between; "
  "fortnightly waves would put wave 6 right against the freeze, so Ravi may want weekly waves for 4 to 6, or to "
  "merge two of them. The rehearsals we just ran say waves 3 and 4 are close to ready and wave 5 needs work, which "
  "is useful input for that.")

regular("cutover")
U("Draft the note to tonight's 22 store managers. Include Kendal's and Truro's overnight actions in a separate "
  "line for those two managers, since they're pilot stores and get their own note.")
A("For the wave 2 store managers:\n\n\"Tonight your store moves to Tillwise. From 22:30 the store systems team will "
  "switch your tills, PIN pads and back office over; it normally takes under an hour and nothing needs doing in "
  "store. Please make sure the back office PC and tills are left powered on, and the tills logged off. Tomorrow "
  "morning the tills will show the new login screen; your usual credentials work. New prices and labels for "
  "tomorrow are sent overnight and activate before opening. If anything looks wrong at opening, call the service "
  "desk and say you are a wave 2 store.\"\n\nFor Whitby only, add: \"Between 22:00 and 22:15 the network team will "
  "make a small change to your internet connection; you may see the network alarm on the back office clear.\"\n\n"
  "For the pilot managers (Kendal and Truro): \"After closing tonight we will restart the Tillwise agent on your "
  "back office server (Kendal) and reboot the back office server to finish last week's update (Truro). The tills "
  "are not affected, but please leave the back office PC on.\"")

# --- afternoon: fixes before the window --------------------------------------------------

RUNBOOK = """# Wave cutover runbook (StoreLink -> Tillwise)

Owner: store systems. Applies to every wave after the pilot. Times are store local time.

## Before the night

1. Wave file (cutover/waves.yaml) has the wave's date and final membership; a membership change needs a CHG.
2. Finance has signed off the previous night's reconciliation for every store in the wave (`recon signoff list`).
   A region that is not signed stays on StoreLink; the controller can run a partial wave (`--exclude-region`).
3. Rehearsal (`cutover plan --wave N --dry-run`) shows no blocking checks. Warnings are reviewed one by one.
4. Price bundle for the next trading day is built and queued for the wave's group, not before 22:00 and inside
   the group's window. No price file reaches a store between 07:00 and 22:00.
5. PIN pads carry the new key (PED estate export, key_slot K2). Lanes without it are excluded from step 5 and
   reported to the payments team.
6. Store managers have had the wave note by 18:00. Any restart of a back-office server or till agent happens only
   after the store has closed and the manager has been told.

## On the night

| time  | what                                                     | who          |
|-------|----------------------------------------------------------|--------------|
| 21:00 | live preflight (`cutover preflight --wave N`)            | store systems|
| 21:30 | hub tunnels checked; network changes for the wave done   | network      |
| 22:30 | window opens; `cutover run --wave N`                      | store systems|
| 22:45 | price push for the wave's group starts (pricecast queue) | automatic    |
| 23:30 | smoke tests per store (sale, refund, gift card, points)  | store systems|
| 04:30 | rollback deadline                                        | store systems|
| 06:00 | first-morning checks: agents, lanes, price activation    | on-call      |

## Rollback

`cutover rollback --wave N --snapshot <id>` restores the lanes' StoreLink configuration, repoints PEDs and restarts
the legacy services. It is only possible before the rollback deadline. After it, fix forward.

## Afterwards

- Recon for the wave's first Tillwise business day runs the next morning as usual; a variance there is handled
  like any other.
- invsync's legacy worker for the wave's stores stays stopped; its stores file is trimmed the next day.
- StoreLink stays read-only for the wave's stores for 30 days, then is archived."""


def replay_response(now):
    body = ("{\n  \"request_id\": \"rpl_" + hexs(20) + "\",\n  \"case\": \"linked\",\n  \"state\": \"accepted\",\n"
            "  \"scope\": {\n    \"lane\": 3,\n    \"from_seq\": " + str(rng.randint(400000, 420000)) + ",\n"
            "    \"to_seq\": " + str(rng.randint(420001, 421000)) + ",\n    \"source\": \"agent_spool\"\n  },\n"
            "  \"dedupe\": \"by_txn_no\",\n  \"dry_run_result\": {\n    \"records_in_range\": " +
            str(rng.randint(900, 1400)) + ",\n    \"already_on_platform\": " + str(rng.randint(800, 1300)) + ",\n"
            "    \"to_ingest_transactions\": \"see ingest report\",\n    \"conflicts\": 0\n  },\n  \"eta_minutes\": " +
            str(rng.randint(10, 30)) + ",\n  \"submitted_by\": \"fstrachan@phl.co.uk\",\n  \"submitted_utc\": \"" +
            f"{now - datetime.timedelta(hours=1):%Y-%m-%dT%H:%M:%SZ}" + "\",\n  \"links\": {\n    \"self\": \"/v2/tenants/"
            "pennock-hale-prod/journal-replays/rpl\",\n    \"report\": \"/v2/tenants/pennock-hale-prod/journal-replays/"
            "rpl/report\"\n  }\n}")
    head = ("HTTP/2 202\ncontent-type: application/json\nlocation: /v2/tenants/pennock-hale-prod/journal-replays/rpl\n"
            f"x-request-id: {hexs(16)}\nx-ratelimit-remaining: {rng.randint(100, 900)}\ndate: "
            f"{now:%a, %d %b %Y %H:%M:%S} GMT\n\n")
    follow = ["", "--- poll: GET .../journal-replays/rpl (every 60s) ---"]
    t = now - datetime.timedelta(hours=1)
    for k, state in enumerate(["accepted", "reading_spool", "reading_spool", "ingesting", "ingesting", "ingesting",
                               "reconciling", "completed"]):
        t += datetime.timedelta(seconds=60)
        follow.append(f"{t:%H:%M:%SZ}  state={state:<14} records_read={min(1200, 180 * (k + 1))} "
                      f"ingested={0 if k < 3 else 4 * (k - 2)} duplicates_skipped={0 if k < 3 else 150 * (k - 2)}")
    return head + body + "\n".join(follow)


def whitby_vars():
    return ["# rtr-s0733 host variables (rendered by netcfg with templates/store-router.j2)", "store:",
            f'  number: "{WHITBY.no}"', f"  town: {WHITBY.town}", "  wan:", "    provider: Fibrewave",
            "    kind: FTTP 330/50", f"    address: 81.{rng.randint(1, 254)}.{rng.randint(1, 254)}.{rng.choice([2, 10, 18])}",
            "    mask: 255.255.255.248", "    bandwidth_kbps: 100000", "  tunnel:",
            f"    address: 10.250.{rng.randint(1, 60)}.{rng.choice([2, 6, 10])}",
            f"    secondary_address: 10.251.{rng.randint(1, 60)}.{rng.choice([2, 6, 10])}", "  vlans:",
            f"    - {{id: 10, name: SERVERS, gateway: {WHITBY.net}.1, mask: 255.255.255.0}}",
            f"    - {{id: 20, name: LANES, gateway: 10.{rng.randint(48, 55)}.{rng.randint(0, 255)}.1, mask: 255.255.255.0}}",
            f"    - {{id: 30, name: DEVICES, gateway: 10.{rng.randint(56, 60)}.{rng.randint(0, 255)}.1, mask: 255.255.255.0}}",
            f"    - {{id: 40, name: GUEST, gateway: 172.{rng.randint(16, 31)}.{rng.randint(0, 255)}.1, mask: 255.255.255.0}}"]


def net_changes_tonight():
    rows = [["NET-4471", f"rtr-s{WHITBY.no}", "Tunnel100/101 mtu to template default", "22:05", "bkeely", "scheduled"],
            ["NET-4468", "fw-hub-lds01", "phase2 lifetime for DC-AZURE-UKS", "23:50", "bkeely", "scheduled"],
            ["NET-4455", f"sw-s{LICH.no}-01", "errdisable recovery psecure", "02:00", "tmcallister", "scheduled"],
            ["NET-4460", f"rtr-s{PERTH.no}", "replace WAN patch lead (store staff)", "08:30", "tmcallister", "awaiting store"]]
    return table(["CHANGE", "DEVICE", "WHAT", "AT", "BY", "STATE"], rows)


at(16, 45)
regular("recon")
U("Where are the sign-offs?")
sh("recon signoff list --business-date 2026-05-11", N(lambda: signoff_list(NOW, signed=("northeast",))))
A("Idris has signed the north-east and several other regions; Yorkshire is still pending, which is right, since he "
  "is waiting for the re-run. The note on one region says its variance was explained by an offline lane, the "
  "sort of explanation he will want for Yorkshire too.")

regular("recon")
U("Ripon's files were loaded by the end-of-day collection at 16:50. Re-run Yorkshire.")
sh("recon run --region yorkshire --business-date 2026-05-11 --compare storelink,tillwise --rerun",
   N(lambda: recon_report(region_stores("yorkshire"), "2026-05-11", NOW, missing=0,
                          variance=-rng.randint(900, 4400) / 100, unmatched=rng.randint(0, 3))))
A("The re-run is within tolerance. With Ripon's end-of-day file in, the large differences are gone; what is left is "
  "a few small differences at other stores, consistent with transactions crossing midnight. That is the report to "
  "send Idris for the Yorkshire sign-off, with the one-line explanation about Ripon's upload.")

regular("pilot")
U("Tillwise support replied on the Kendal case: we can request a replay of lane 3's journal from the agent's spool "
  "ourselves, deduplicated by transaction number. Request it and follow it.")
sh("curl -sS -i -X POST -H \"Authorization: Bearer $TW_TOKEN\" -H 'Content-Type: application/json' "
   "https://api.tillwise.cloud/v2/tenants/pennock-hale-prod/journal-replays -d '{\"store\": \"" + KENDAL.no + "\", "
   "\"lane\": 3, \"business_date\": \"2026-05-06\", \"source\": \"agent_spool\", \"dedupe\": \"by_txn_no\"}' && "
   "twctl replays follow --last", N(lambda: replay_response(NOW)))
A("The replay was accepted and ran to completion within a few minutes: it read the lane's journal range from the "
  "agent's spool, skipped everything the platform already had, and ingested the rest. This did not need a restart "
  "of anything at the store; the agent serves its spool to the platform while running. The pilot recon for that "
  "day will show whether the gap is closed.")

regular("pilot")
U("Re-run the pilot recon for Wednesday the 6th to see if the gap closed.")
sh("recon run --stores " + ",".join(s.no for s in PILOT) + " --business-date 2026-05-06 --compare storelink,tillwise "
   "--rerun", N(lambda: recon_report(PILOT, "2026-05-06", NOW, missing=0, variance=0.0, unmatched=0)))
A("Closed: for the pilot stores on that day the two platforms now agree on transactions, net sales and every "
  "tender, with nothing missing. I would add this report to the Tillwise case and ask them to keep it open until "
  "the agent fix for the uncaught exception ships.")

regular("network")
U("Bronagh sent the Whitby fix as a netcfg change: set the tunnel MTU explicitly in its host vars so it renders the "
  "standard value. Apply it.")
wv = whitby_vars()
d, FILES["netcfg/host_vars/rtr-s0733.yml"] = make_diff(
    "netcfg/host_vars/rtr-s0733.yml", wv,
    [("secondary_address", 1, [wv[12], "    mtu: 1400          # was hand-set lower on the router; render the standard"])])
patch("netcfg/host_vars/rtr-s0733.yml", d,
      ["netcfg lint host_vars/rtr-s0733.yml: ok", "netcfg render rtr-s0733 --section 'interface Tunnel100':",
       "  interface Tunnel100", "   description IPsec to fw-hub-lds01 (primary)", "   bandwidth 100000",
       "   ip mtu 1400", "   ip tcp adjust-mss 1360", "   tunnel protection ipsec profile PHL-HUB-IPSEC",
       "netcfg drift rtr-s0733: 2 line(s) differ from running config (Tunnel100: ip mtu, ip tcp adjust-mss)", "",
       "netcfg schedule rtr-s0733 --at '2026-05-12 22:05' --ticket NET-4471", "", "network changes tonight:",
       N(net_changes_tonight)])
A("Applied, and netcfg agrees with what we expected: Whitby's host variables now state the standard MTU, the render "
  "produces the standard tunnel config, and the drift check shows exactly the two tunnel lines the router will "
  "change at five past ten. The change is in tonight's network list with Bronagh's other changes; the Perth patch "
  "lead waits for the store staff tomorrow morning.")

regular("cutover")
U("Show me the cutover runbook so I can check we've covered everything.")
read("cutover/runbook.md", RUNBOOK.split("\n"))
A("Against the runbook: the wave file is right; the north-east is signed and the Yorkshire re-run is with Idris; "
  "the rehearsal showed no blocking checks and we have gone through its warnings; tonight's bundle is dry-run and "
  "will be built and queued for quarter to eleven, inside the group's window; the PIN pads still missing the new "
  "key need a decision (inject this afternoon or exclude those lanes); and the store managers' note should go out "
  "by six. The night itself follows the table, with Bronagh's Whitby change before the window opens.")

regular("gateways")
U("Payments team says they injected keys remotely on the remaining wave 2 PIN pads this afternoon. Check the export "
  "again for the wave 2 stores, only lanes not on the new key.")
ps("Import-Csv \\\\fs01\\storesys\\exports\\ped_estate_20260512-1630.csv | Where-Object { $_.store -in (Get-Content "
   "\\\\fs01\\storesys\\waves\\w2_stores.txt) -and $_.key_slot -ne 'K2' } | ConvertTo-Csv -NoTypeInformation; "
   "'---'; Import-Csv \\\\fs01\\storesys\\exports\\ped_estate_20260512-1630.csv | Group-Object p2pe_state | "
   "Sort-Object Count -Descending | Format-Table Count, Name -AutoSize",
   N(lambda: "\n".join(ped_csv(W2, 3).split("\n")[:3]) + "\n---\n\nCount Name\n----- ----\n" +
     f"{rng.randint(640, 700):5d} injected\n{rng.randint(120, 180):5d} legacy_key\n{rng.randint(2, 9):5d} "
     "pending_injection\n\n" + "\n".join(ped_csv(STORES, 30).split("\n")[1:])))
A("Only two lanes in tonight's stores are still without the new key, down from many this morning. The estate as a "
  "whole is mostly injected, with the legacy-key pads belonging to later waves. For tonight I would let the "
  "cutover exclude those two lanes from the PED step: they keep working on the old route until the payments team "
  "finishes them tomorrow, and the controller reports them as warnings rather than blocking the stores.")

regular("invsync")
U("Half an hour on: how's the south-west worker?")
sh("invsyncctl status", N(lambda: invsync_status(NOW)))
A("The south-west worker has caught up most of the way: its lag is down to a few minutes and its pending count is "
  "in the same range as the other regions. No rate-limit alerts since the change. The north-east, which matters "
  "tonight, is also low. I would leave both as they are.")

regular("replen")
U("For the DC planners: did Stirling's Tillwise sales export finish late last night? Show me that export job's "
  "recent runs.")
sh("schedctl runs tillwise_sales_export --last 14",
   N(lambda: schedctl_runs(None, 14).replace("ORDER LINES", "STORES OK  ")))
A("The sales export has run every night, always successfully and in a similar time, including last night. So from "
  "the scheduler's point of view it finished on time; the incomplete part was a single store inside it, which the "
  "export reports as done once the others are. That explains why Livingston waited: the manifest said one store was "
  "missing even though the job itself succeeded. Worth a change to the export so that a late store is reported "
  "as a failure of that store, which the replenishment job could then handle.")

regular("stores")
U("Truro's reboot tonight will also pick up Windows updates, I assume. What's pending on that box?")
ps(f"Invoke-Command -ComputerName {TRURO.host()} -ScriptBlock {{ Get-HotFix | Sort-Object InstalledOn -Descending | "
   "Select-Object -First 18 | Format-Table HotFixID, Description, InstalledOn, InstalledBy -AutoSize; "
   "Get-WindowsUpdateLog -Pending 2>$null; (New-Object -ComObject Microsoft.Update.Session).CreateUpdateSearcher()."
   "Search('IsInstalled=0').Updates | Select-Object Title, MsrcSeverity | Format-Table -AutoSize }",
   N(lambda: "\n" + table(["HotFixID", "Description", "InstalledOn", "InstalledBy"],
                          [[f"KB50{rng.randint(10000, 49999)}", rng.choice(["Security Update", "Update", "Security Update"]),
                            f"{rng.randint(1, 28):02d}/{rng.randint(1, 4):02d}/2026 00:00:00", "NT AUTHORITY\\SYSTEM"]
                           for _ in range(18)], gap=" ") + "\n\n" +
     table(["Title", "MsrcSeverity"],
           [["2026-05 Cumulative Update for Windows Server 2016 for x64-based Systems (KB5058383)", "Critical"],
            ["2026-05 Servicing Stack Update for Windows Server 2016 (KB5058525)", ""],
            ["Security Intelligence Update for Microsoft Defender Antivirus - KB2267602 (Version 1.429.112.0)", ""],
            ["2026-04 Cumulative Update for .NET Framework 4.8 for Windows Server 2016 (KB5056578)", "Important"]])))
A("Four updates are waiting: the May cumulative update with its servicing stack update, the .NET Framework "
  "cumulative update and a Defender definitions update. The cumulative update will install during tonight's reboot "
  "and add several minutes to it; the .NET update is the one the agent cares about, and it is compatible with the "
  "agent version being installed. All of that happens after closing, with the manager told, so it fits the rule. I "
  "would keep the store's tills out of the reboot: only the back-office server restarts.")

regular("kickoff")
U("Quick status for Ravi before he leaves for the day. Same style as this morning.")
A("Draft:\n\n\"Wave 2 status: go, conditional on finance's Yorkshire sign-off (the re-run is within tolerance and "
  "with Idris). Today's fixes: pilot lane replay completed and the pilot recon is clean; Ripon's end-of-day upload "
  "restored; a queued daytime price hotfix was cancelled and folded into tonight's delta; the south-west stock sync "
  "is caught up; Livingston's replenishment was rerun. Open items that do not block tonight: the loyalty gateway's "
  "offline batches, PayBridge latency with the acquirer, Perth's and Lichfield's links (wave 3 and 4). Rehearsals "
  "for waves 3 to 5 are done; wave 5 has preparation to do.\"")

# --- the evening and the window ------------------------------------------------------------

at(19, 20)
regular("evening")
U("Evening. Idris says he's signed Yorkshire. Check the list.")
sh("recon signoff list --business-date 2026-05-11", N(lambda: signoff_list(NOW, signed=("northeast", "yorkshire"))))
A("Both of tonight's regions are signed for Monday, so the third rule is satisfied for every store in wave 2 and "
  "the wave can run in full tonight.")

regular("evening")
U("Build tonight's wave 2 bundle for real and queue it for 22:45.")
sh("pricecast bundle build --group w2 --effective 2026-05-13 && pricecast schedule add --group w2 --kind full "
   "--bundle latest --not-before '2026-05-12 22:45' --replace q-20931",
   N(lambda: bundle_dryrun(W2, "2026-05-13").replace("dry run: nothing written, nothing scheduled",
                                                     "written: /srv/pricecast/bundles/pb-0512-w2/ (22 payloads, "
                                                     "22 manifests, signed)\nq-20931 replaced: group w2, kind full, "
                                                     "not before 2026-05-12 22:45 (inside window 22:30-06:00)")))
A("Built and queued. The real build resolves the same stores as the dry run with nothing skipped, the manifests are "
  "signed, and the queue entry now points at this bundle with a not-before time of quarter to eleven, inside the "
  "group's window and after ten, so it respects your rule on both counts. Any items pricing fixed this afternoon "
  "are in it.")

regular("evening")
U("Kendal and Truro both closed at 20:00 and I've told both managers. Schedule Kendal's agent restart for 20:30 and "
  "Truro's server reboot for 20:45.")
ps(f"Invoke-Command -ComputerName {KENDAL.host()} -ScriptBlock {{ Register-ScheduledTask -TaskPath '\\Ops\\' "
   "-TaskName 'RestartTwAgent-20260512' -Trigger (New-ScheduledTaskTrigger -Once -At '2026-05-12 20:30') -Action "
   "(New-ScheduledTaskAction -Execute 'powershell.exe' -Argument '-NoProfile -Command Restart-Service TwStoreAgent "
   "-Force') -User SYSTEM }}; Invoke-Command -ComputerName " + TRURO.host() + " -ScriptBlock { Register-ScheduledTask "
   "-TaskPath '\\Ops\\' -TaskName 'Reboot-20260512' -Trigger (New-ScheduledTaskTrigger -Once -At '2026-05-12 20:45') "
   "-Action (New-ScheduledTaskAction -Execute 'shutdown.exe' -Argument '/r /t 60 /d p:2:17 /c \"Tillwise agent "
   "update\"') -User SYSTEM }; Get-ScheduledTask -CimSession " + KENDAL.host() + "," + TRURO.host() + " -TaskPath "
   "'\\Ops\\','\\StoreLink\\','\\Tillwise\\' | Format-Table PSComputerName, TaskPath, TaskName, State -AutoSize",
   N(lambda: "\nTaskPath                                       TaskName                          State\n"
             "--------                                       --------                          -----\n"
             "\\Ops\\                                          RestartTwAgent-20260512           Ready\n\n"
             "TaskPath                                       TaskName                          State\n"
             "--------                                       --------                          -----\n"
             "\\Ops\\                                          Reboot-20260512                   Ready\n\n" +
     table(["PSComputerName", "TaskPath", "TaskName", "State"],
           [[h.host(), tp, tn, rng.choice(["Ready", "Ready", "Ready", "Disabled"]) if tn not in (
               "RestartTwAgent-20260512", "Reboot-20260512") else "Ready"]
            for h in (KENDAL, TRURO) for tp, tn in [("\\Ops\\", "RestartTwAgent-20260512" if h is KENDAL else
                                                    "Reboot-20260512"), ("\\StoreLink\\", "EodUpload"),
                                                   ("\\StoreLink\\", "PriceLoad"), ("\\StoreLink\\", "LabelSpoolPurge"),
                                                   ("\\StoreLink\\", "JournalArchive"), ("\\StoreLink\\", "DbBackupDiff"),
                                                   ("\\Tillwise\\", "AgentUpdateCheck"), ("\\Tillwise\\", "JournalCompact"),
                                                   ("\\Tillwise\\", "PolicySync")]], gap=" ")))
A("Both are scheduled as one-off tasks: Kendal's agent restart at half past eight and Truro's reboot (with a "
  "minute's warning and a planned-restart reason code) at quarter to nine, both after closing and with the "
  "managers told, which is what the rule asks. The existing StoreLink and Tillwise tasks on both servers are "
  "untouched. Truro's reboot will take longer than usual because of the pending cumulative update.")

at(21, 0)
regular("evening")
U("21:00. Live preflight for wave 2.")
sh("cutover preflight --wave 2",
   N(lambda: cutover_dryrun(W2, warn_stores={WHITBY.no: "tunnel fragmentation",
                                             W2[9].no: "PED keys pending (2 lanes)"}).replace(
       "cutover 2.3.1 -- DRY RUN, nothing will be changed", "cutover 2.3.1 -- PREFLIGHT (live checks, no changes)")))
A("Preflight is clean enough to go: every store passes and nothing blocks. The remaining warnings are Whitby's "
  "tunnel, which Bronagh changes at five past ten, and the store with the two PIN pads without the new key, which "
  "the PED step will skip. Ripon no longer warns now that its uploads have caught up.")

regular("evening")
U("Kendal's restart ran at 20:30. Services and the agent log since then?")
ps(f"Invoke-Command -ComputerName {KENDAL.host()} -ScriptBlock {{ Get-Service Tw*, SL* | Format-Table Status, Name, "
   "DisplayName -AutoSize; Get-Content 'C:\\ProgramData\\Tillwise\\logs\\agent-20260512.log' -Tail 50 }",
   N(lambda: get_service() + "\n\n" + agent_log(44, clock(20, 29), KENDAL.lanes).rsplit("\n", 9)[0]))
A("The agent restarted on schedule and has been shipping journals and answering heartbeats since, with the usual "
  "warnings about StoreLink's comms service holding a lane journal, but no crash. Those warnings will keep coming "
  "until StoreLink's comms service stops touching the journals on migrated stores; I would include that in "
  "tonight's cutover for wave 2 as well, so the new stores do not inherit it.")

regular("evening")
U("Truro's reboot ran at 20:45. Does its agent report the new version now?")
ps(f"Invoke-Command -ComputerName {TRURO.host()} -ScriptBlock {{ Get-ItemProperty "
   "'HKLM:\\SOFTWARE\\Tillwise\\StoreAgent' | Select-Object AgentVersion, Channel, UpdateRing, InstallDate, "
   "InstallPath, ConfigEndpoint, TenantId, LastPolicySync, LastHeartbeatUtc, LanesManaged, PendingReboot | "
   "Format-List; Get-Service Tw*, SL*, MSSQL*, SQLAgent*, Spooler, W32Time, WinDefend, CcmExec, Zabbix* | "
   "Format-Table Status, Name, DisplayName -AutoSize; Get-TwLaneStatus | Format-Table; Get-ChildItem "
   "C:\\ProgramData\\Tillwise\\updates }", N(lambda: registry(None, TRURO, NOW)))
A("Yes. After the reboot the back-office agent reports the current version with no reboot pending, its policy sync "
  "and heartbeat are fresh, and every service is running. The lanes were not touched and carry on as before. "
  "Truro is now on the same agent as the rest of the pilot.")

at(22, 10)
regular("evening")
U("Whitby's MTU change went in at 22:05. Check the tunnel now.")
sh(f"netexec rtr-s{WHITBY.no} --cmd 'show running-config interface Tunnel100' --cmd 'show crypto ipsec sa interface "
   "Tunnel100' --cmd 'show interfaces Tunnel100 | include MTU|drops|rate'", N(lambda: tunnel_config("ip mtu 1400")))
A("The tunnel now carries the standard MTU and MSS, the SA re-established and is passing traffic in both "
  "directions with no errors, and the router matches what netcfg renders. The hub's fragmentation alarm for "
  "Whitby should clear within its next polling interval.")

regular("evening")
U("And the hub's fragmentation counters for Whitby since the change?")
sh(f"ssh netops@fw-hub-lds01 'diagnose vpn tunnel list name ST{WHITBY.no}-P1 | grep -E \"name=|stat:|frag|mtu\"; "
   "diagnose sys session stat; get system performance status'",
   N(lambda: "\n".join([
       f"name=ST{WHITBY.no}-P1 ver=2 serial={rng.randint(100, 400)} 195.12.44.10:4500->81.{rng.randint(1, 254)}."
       f"{rng.randint(1, 254)}.{rng.randint(2, 250)}:4500 tun_id=10.250.{rng.randint(1, 60)}.1 dst_mtu=1500 "
       "dpd-link=on weight=1",
       f"stat: rxp={rng.randint(10**5, 10**6)} txp={rng.randint(10**5, 10**6)} rxb={rng.randint(10**8, 10**9)} "
       f"txb={rng.randint(10**8, 10**9)}", "frag-stats: rx_frag=0 rx_reasm_fail=0 tx_frag=0 (counters reset 22:05:41)",
       f"  SA:  ref=6 options=18227 type=00 soft=0 mtu=1438 expire={rng.randint(40000, 43000)}/0B replaywin=2048",
       "", f"misc info:       session_count={rng.randint(40000, 90000)} setup_rate={rng.randint(100, 900)} "
       f"exp_count=0 clash={rng.randint(0, 40)}", "        memory_tension_drop=0 ephemeral=0/1048576 removeable=0",
       "delete=0, flush=0, dev_down=0/0 ses_walkers=0", "TCP sessions:",
       f"         {rng.randint(2000, 9000)} in ESTABLISHED state", f"         {rng.randint(10, 90)} in SYN_SENT state",
       f"         {rng.randint(100, 900)} in TIME_WAIT state", "firewall error stat:", "error1=00000000",
       "error2=00000000", "error3=00000000", "error4=00000000", "tt=00000000", "cont=00000000",
       f"ids_recv=00{rng.randint(100000, 999999)}", "url_recv=00000000", "av_recv=00000000", "fqdn_count=0000004e", "",
       f"CPU states: {rng.randint(0, 6)}% user {rng.randint(1, 9)}% system 0% nice {rng.randint(80, 96)}% idle "
       f"0% iowait 0% irq {rng.randint(0, 4)}% softirq",
       f"Memory: {rng.randint(7000000, 8000000)}k total, {rng.randint(3000000, 4000000)}k used "
       f"({rng.randint(38, 50)}.{rng.randint(0, 9)}%), {rng.randint(3000000, 4000000)}k free",
       f"Average network usage: {rng.randint(200000, 900000)} / {rng.randint(200000, 900000)} kbps in 1 minute",
       f"Average sessions: {rng.randint(40000, 90000)} sessions in 1 minute",
       f"Average session setup rate: {rng.randint(100, 900)} sessions per second in last 1 minute",
       f"Virus caught: 0 total in 1 minute", f"IPS attacks blocked: {rng.randint(0, 4)} total in 1 minute",
       f"Uptime: {rng.randint(40, 300)} days,  {rng.randint(0, 23)} hours,  {rng.randint(0, 59)} minutes"])))
A("Since the change the hub has not received a single fragment from Whitby and no reassembly has failed, against "
  "the high counts this afternoon; the alarm will clear at its next poll. The hub itself is comfortable: low CPU, "
  "memory well within limits, no firewall errors, and session numbers normal for the evening.")

regular("evening")
U("Hub tunnels before we start.")
sh("ssh netops@fw-hub-lds01 'get vpn ipsec tunnel summary'", N(lambda: vpn_summary(NORTH_HUB, down=[PERTH.no])))
A("All of tonight's stores have both selectors up. The only tunnel with a selector down is still the Scottish store "
  "with the flaky WAN link, which is not in tonight's wave.")

at(22, 40)
regular("evening")
U("Cutover started at 22:30. Tail the execution log.")
sh("cutover logs --wave 2 --follow --since 22:30 | head -n 140",
   fitN(lambda n: cutover_exec_log(W2, clock(22, 30, 4), n), 4, hi=9000))
A("The run is progressing as rehearsed: the legacy price freeze, the final StoreLink end-of-day export and the "
  "journal drain have completed for every store, and the lane switch is under way. Each store reports ok at each "
  "step, and the step timings are in line with the rehearsal's estimates.")

regular("evening")
U("The 22:45 price push to wave 2 should be going. Tail it.")
sh("tail -n 80 /var/log/pricecast/w2/push-20260512T2145Z.log",
   fitN(lambda n: push_log(W2[:n], clock(21, 45, 0), rng.randint(20, 90), mode="live"), 22))
A("The live push is running inside the window and every store has received, verified and acknowledged its file; "
  "none parked this time, Whitby included. The rejection count is much smaller than last night's, reflecting "
  "pricing's fixes; the remaining lines are items they have not corrected yet. The files activate at the morning "
  "price point.")

regular("evening")
U("PayBridge, now that the first stores' PIN pads are on the new route.")
sh("curl -sS -i --cert ~/.phl/ops.pem https://paybridge.phl.internal:8443/health/detail",
   N(lambda: health_json(NOW, "2.14.3", PAY_ROUTES)))
A("Healthy: the primary upstream's latency is back in its normal range at this time of night, with no errors, and "
  "the PED heartbeat route shows the new stores' pads checking in. The daytime slowness is still worth raising with "
  "the acquirer, since it only shows under load.")

regular("evening")
U("invsync: the legacy worker should have stopped for the wave 2 stores at step 7.")
sh("invsyncctl status && invsyncctl stores northeast yorkshire --state", N(lambda: invsync_status(NOW) + "\n\n" + table(
    ["STORE", "WORKER", "STATE", "SINCE"],
    [[s.no, s.key, "handed over" if s.wave == 2 else "syncing",
      f"{clock(23, rng.randint(0, 20)):%H:%M}" if s.wave == 2 else "-"]
     for s in STORES if s.key in ("northeast", "yorkshire")])))
A("The handover happened: every wave 2 store in the north-east and Yorkshire workers is marked as handed over, and "
  "the remaining Yorkshire stores (wave 3) are still syncing from StoreLink as they should. The two workers carry on "
  "for those.")

regular("evening")
U("Cutover status for wave 2 now.")
sh("cutover status --wave 2",
   N(lambda: table(["STORE", "NAME", "STATE", "LANES", "PEDS", "PRICES", "STEP", "NOTE"],
                   [[s.no, s.town, "live", f"{s.lanes}/{s.lanes}",
                     f"{s.lanes - (2 if s is W2[9] else 0)}/{s.lanes}", "received", "11/11",
                     "2 PEDs on legacy route" if s is W2[9] else ""] for s in W2]) +
     f"\n\nwave 2: {len(W2)}/{len(W2)} stores live, rollback deadline 04:30 (not needed), StoreLink read-only for "
     "these stores until 2026-06-11\nnext: per-store smoke test report (cutover smoke --wave 2 --report)"))
A("All of wave 2 is live on Tillwise: lanes switched, price files received, the final step done. The one store with "
  "two PIN pads on the legacy route is marked as such, as planned. StoreLink is read-only for these stores from "
  "now on.")

regular("evening")
U("Run the smoke tests and show me the report.")
sh("cutover smoke --wave 2 --report",
   N(lambda: table(["STORE", "SALE", "REFUND", "GIFT CARD", "POINTS", "PRINT", "RESULT"],
                   [[s.no] + [rng.choice(["ok", "ok", "ok", "ok", "retry ok"]) for _ in range(5)] + ["pass"]
                    for s in W2]) + "\n\nsmoke tests: " + f"{len(W2)} stores, {len(W2)} passed, 0 failed; test "
     "transactions voided and excluded from tomorrow's recon"))
A("Every store passed: a sale, a refund, a gift card and a points transaction, and a receipt printed, on one lane "
  "per store, with a few needing a retry, which is the tills warming up on first use. The test transactions were "
  "voided and are excluded from tomorrow's reconciliation.")

regular("evening")
U("Does Tillwise's onboarding API agree that all of wave 2 is live?")
sh("curl -sS -H \"Authorization: Bearer $TW_TOKEN\" 'https://api.tillwise.cloud/v2/tenants/pennock-hale-prod/"
   "stores?wave=2&fields=store,state,lanes_online,peds_online,price_file,agent' | jq -c '.stores[]'",
   N(lambda: "\n".join(json.dumps({"store": s.no, "state": "live", "lanes_online": s.lanes,
                                    "peds_online": s.lanes - (2 if s is W2[9] else 0), "price_file": "received",
                                    "agent": "4.12.9", "since_utc": f"2026-05-12T2{rng.randint(1, 2)}:"
                                                                   f"{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}Z",
                                    "first_txn_utc": None, "journal_lag_s": rng.randint(0, 9)})
                         for s in W2)))
A("The platform agrees: every wave 2 store is live with all lanes online, its price file received and the current "
  "agent, and none has taken a real transaction yet, as you would expect at this hour. The store with two PIN pads "
  "on the legacy route shows two fewer pads online, which matches the plan.")

regular("evening")
U("The 23:30 legacy delta should be running now, with pricing's promo correction in it. Tail it.")
sh("tail -n 80 /var/log/pricecast/legacy/push-20260512T2230Z.log",
   fitN(lambda n: push_log(rng.sample([s for s in STORES if s.wave > 2], n), clock(22, 30, 0), rng.randint(30, 110),
                           mode="delta"), 30))
A("It is: the legacy group's delta started at half past eleven local time, inside the window, and the stores are "
  "receiving and acknowledging their files one after another with the usual small number of rejected lines. The "
  "wave 2 stores are no longer in the legacy group, so none of them appears here; they got their prices from the "
  "full push earlier.")

regular("evening")
U("Tomorrow's shelf-edge label batch: will it print for the wave 2 stores from Tillwise?")
sh("schedctl show label_batch_print --next && schedctl runs label_batch_print --last 5",
   N(lambda: "job: label_batch_print\nschedule: 0 5 * * * (Europe/London)\nnext run: 2026-05-13 05:00\nsources:\n"
             "  tillwise stores: price activation events (waves: 1, 2)\n  storelink stores: SLLabelSpool queue\n"
             "stores in scope: 142 (28 on tillwise)\n\n" +
     schedctl_runs(None, 14).replace("ORDER LINES", "LABELS     ")))
A("Yes: the label job already takes the Tillwise stores from the wave file, so from tomorrow it will print labels "
  "for the wave 2 stores from Tillwise's price activation events, and for the legacy stores from StoreLink's spool "
  "as before. It runs at five in the morning, before opening, like every night.")

# --- the write-up ---------------------------------------------------------------------------

at(23, 40)
regular("evening")
U("Write the handover for whoever does the 06:00 first-morning checks on wave 2. Keep it to what they need.")
A("Handover, wave 2 first morning:\n\n- All 22 stores went live overnight and passed smoke tests; StoreLink is read-only "
  "for them. Rollback is no longer possible after 04:30; anything now is fix-forward.\n- At 06:00 check, per store: "
  "agent heartbeat, lanes online, price file activated at the morning price point (pricecast digest at 08:00 also "
  "reports it), labels printed by the 05:00 batch.\n- One store has two PIN pads still on the legacy route; the "
  "payments team finishes them today. If a lane there declines cards, that is why.\n- Whitby had its tunnel MTU "
  "corrected at 22:05; if its fragmentation alarm comes back, tell network.\n- Kendal's agent was restarted and "
  "Truro's server rebooted after closing; both should report the current agent. If Kendal's agent crashes again, "
  "the Tillwise case is open and the journal replay procedure is in today's ticket.\n- Tomorrow's recon for these "
  "stores is their first Tillwise business day; finance expects small midnight-crossing differences.")

regular("evening")
U("And what's left open for tomorrow, for me?")
A("For you tomorrow:\n\n1. Stop StoreLink's comms service from opening lane journals on migrated stores (pilot and "
  "wave 2), and confirm with Tillwise that the agent fix for the uncaught exception is scheduled.\n2. Loyalty "
  "gateway: offline batches that fail on one duplicate line; agree the fix with the gateway's owners.\n3. PayBridge "
  "latency under daytime load: send the acquirer our timings.\n4. Perth's WAN patch lead (store staff at 08:30) and "
  "Lichfield's tunnel probe failures.\n5. pricecast hotfixes should respect group windows; raise it with the tool's "
  "owner.\n6. Recon's tender mapping for gift cards and vouchers (Wales).\n7. Wave planning with Ravi: waves 4 to 6 "
  "before the freeze, and wave 5's preparation list from its rehearsal.")

FILLER_TURNS = [
    ("Is the cutover channel quiet?",
     "Quiet. The last messages are the smoke-test summary and the network team confirming the Whitby change."),
    ("Any alerts from the wave 2 stores since?",
     "None. Heartbeats are steady and no lane has gone offline since the switch."),
    ("Did the pilot group's delta go out as well?",
     "Yes, to the six pilot stores, inside the window, a few minutes after the legacy group's."),
    ("Is Kendal's agent still up?",
     "Yes. No crash since the restart at half past eight, and its journals are shipping."),
    ("Has Idris said anything else?",
     "Only a thank-you for the Yorkshire re-run; he will look at tomorrow's first Tillwise recon for wave 2 first thing."),
    ("Anything from Bronagh?",
     "She confirmed the hub alarm for Whitby cleared and that the Lichfield switch change is still on for 02:00."),
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
    U("That's me done. Thanks, long day. Anything before I log off?")
    A("Nothing urgent. Wave 2 is live, the handover is written, and the open items are listed for tomorrow. No price "
      "file reached a store during trading hours today, no store server or till agent was restarted while its store "
      "was open, and the wave moved only after finance signed off both of its regions.", pad=False)


finish()


# ---------------------------------------------------------------------------
# More questions in other words, not asked in the conversation: about tool
# facts no recall question above asks about, each at a turn at least MIN_GAP
# turns after its fact (and unrelated ones, with no fact).

DEV_QUESTIONS = [
    ("G1", 72, "Finance are writing up the pilot and want the raw number: how many transaction headers did the old "
               "system hold for the six pilot shops?"),
    ("T1", 101, "Which build was Truro's back-office agent stuck on before tonight's reboot? The version it reported "
                "for itself, not the lanes'."),
    ("W2a", 119, "If a price transfer to one of tonight's shops fails, how long does pricecast sit before having "
                 "another go? The second wave's setting, in secs."),
    ("W2b", 99, "Pricing want a total for the overnight shadow run to the wave-two stores. How many price lines did "
                "the agents bounce altogether?"),
    ("W4a", 113, "In what size pieces does the fourth wave's price distributor send its files? KB is fine."),
    ("W5a", 121, "How far apart does pricecast space out the W5 stores when it starts pushing, i.e. the gap between "
                 "one shop and the next?"),
    ("W6a", 129, "By what time at night does a price change have to be in to make the nightly delta for the last "
                 "wave's shops?"),
    ("W6b", 106, "In this morning's bundle rehearsal for wave six, how many shops did pricecast leave out?"),
    ("IS", 123, "Thinking about wave 3 again. What's the most stock changes the Scottish sync worker will pull in "
                "one go?"),
    ("IN", 112, "Before tonight we counted how many NE stock movements were still queued and not yet applied. What "
                "was the figure?"),
    ("L2", 104, "How many items were backed up in the rewards gateway's store-and-forward queue when we checked its "
                "health at lunchtime?"),
    ("L3", 125, "CRM are asking again: how many members had points totals that disagreed between the two platforms?"),
    ("B1", 131, "After how many failures does the card payments gateway open its breaker, going by its prod "
                "appsettings?"),
    ("R2", 108, "I need it for the scheduler ticket: what was the ID of the Livingston DC's replen run that fell over "
                "last night?"),
    ("R3", 127, "Doncaster DC want to compare with their WMS. How big was the order Doncaster's replen job sent on its "
                "last run, in lines?"),
    ("C2", 115, "Idris is on about the Welsh stores again: how many tenders couldn't be paired up in Monday's recon "
                "for Wales?"),
    ("C3", 135, "In Monday's Scottish recon, how many txns never made it over to Tillwise?"),
    ("C4", 128, "What did the legacy DB say the SE stores took on gift cards on the 11th?"),
    ("N2", 126, "Perth again, sorry. How many checksum errors were on the counters of its internet-facing port?"),
    ("N3", 132, "What was the ping round trip from Cheltenham's back office to the Tillwise API when we tested it, "
                "in ms?"),
    ("T3", 137, "How many nightly EoD uploads did Ripon's back office skip before we fixed the creds?"),
    ("W5b", 139, "Last one for Ravi's planning: how many blockers did the wave five rehearsal flag?"),
    ("", 90, "Off topic: what's a decent red to take to a barbecue on Saturday, under fifteen quid?"),
    ("", 130, "Random one while things run: any tips for getting a toddler to sleep past five now the mornings are "
              "lighter?"),
]


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
            assert not any(v in i["content"] for v in list(P.values()) + list(M.values())), i["content"][:80]
        if i["role"] == "user":
            assert not any(v in i["content"] for v in P.values()), i["content"][:80]
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
        assert len(calls) <= 4, t
    for t, rule in RULES:
        assert rule in turns[t][0]["content"], rule
    for c in everything:
        c.encode("ascii")
    bad = [(i["turn"], i["call_id"], i["tool_name"], len(i["content"])) for i in items
           if i["kind"] == "tool_result" and not 1200 <= len(i["content"]) <= 10000]
    assert not bad, bad
    # Recall questions: twelve about facts, one about nothing the conversation holds.
    asked = [p for p in probes if p["facts"]]
    assert len(asked) == 12 and sum(1 for p in probes if not p["facts"]) == 1, probes
    by_id = {f["id"]: f for f in facts}
    for p in asked:
        q = turns[p["turn"]][0]["content"]
        for fid in p["facts"]:
            f = by_id[fid]
            assert p["turn"] - f["turn"] >= MIN_GAP, (fid, p["turn"])
            assert f["text"] not in q and f["text"].lower() not in q.lower(), (fid, q)
    assert sum(1 for p in asked if by_id[p["facts"][0]]["source"] == "tool") >= 10
    # Development questions: other tool facts, at least MIN_GAP turns later, no later than the last turn.
    recalled = {fid for p in asked for fid in p["facts"]}
    dev = [d for d in DEV_QUESTIONS if d[0]]
    assert 20 <= len(dev) <= 24 and len(DEV_QUESTIONS) - len(dev) == 2
    assert len({d[0] for d in dev}) == len(dev)
    for label, t, q in DEV_QUESTIONS:
        assert 1 <= t <= turn_no, (label, t)
        if not label:
            continue
        assert label in P, label
        fid = fact_ids[label]
        assert fid not in recalled, label
        assert t - fact_turns[label] >= MIN_GAP, (label, t, fact_turns[label])
        assert P[label] not in q and P[label].lower() not in q.lower(), label
    assert turn_no >= 130, turn_no
    assert 450 <= len(items) <= 550, len(items)
    return turns


def main():
    turns = check()
    tool_turns = sum(1 for its in turns.values() if any(i["kind"] == "tool_call" for i in its))
    fact_points = [40, 80, 120, turn_no]

    def write(name, rows):
        with open(os.path.join(HERE, name), "w") as out:
            for r in rows:
                out.write(json.dumps(r, ensure_ascii=False) + "\n")

    write("retail.jsonl", [{"system_prompt": SYSTEM}] + items)
    write("retail_facts.jsonl", facts)
    write("retail_probes.jsonl", [{"kind": "instruction", "turn": t, "text": rule} for t, rule in RULES] +
          [{"kind": "facts", "turn": t} for t in fact_points] + sorted(probes, key=lambda p: p["turn"]))
    write("retail_dev_questions.jsonl",
          [{"fact": fact_ids[l] if l else "", "turn": t, "question": q}
           for l, t, q in sorted(DEV_QUESTIONS, key=lambda d: (fact_ids.get(d[0], "zzz"), d[1]))])
    size = os.path.getsize(os.path.join(HERE, "retail.jsonl"))
    assert 400_000 <= size <= 550_000, size
    sizes = [len(i["content"]) for i in items if i["kind"] == "tool_result"]
    print(f"{turn_no} turns, {len(items)} items, {call_no} tool calls in {tool_turns} turns "
          f"({100 * tool_turns / turn_no:.0f}%), outputs {min(sizes)}-{max(sizes)} chars, {len(facts)} facts "
          f"({sum(f['source'] == 'tool' for f in facts)} from tools), {len(probes)} recall probes, "
          f"{len(DEV_QUESTIONS)} dev questions, retail.jsonl {size} bytes")


main()
