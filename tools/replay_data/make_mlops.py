#!/usr/bin/env python3
"""Writes the Corvane ML-platform replay conversation used by tools/replay.

Corvane Labs trains and serves its own models. Pretraining and fine-tuning
runs go to a Slurm cluster of HGX H100 nodes (partitions train, dev, eval),
configured with Hydra (conf/experiment, conf/data, conf/optim, ...); checkpoints
and dataset snapshots sit on S3-compatible object storage; runs are tracked
with trackctl, models are promoted with regctl, evaluation suites run through
the harness under evals/, features come from a feature store (fsctl), inference
is vLLM on Kubernetes behind Argo Rollouts canaries, and the cluster itself is
Terraform. An ML platform engineer spends a working day with an assistant
after a bad night: a 7B pretraining run went NaN, a 13B fine-tuning job hung
on NCCL because one node's GPU is failing, a dataset snapshot is missing
shards, a release candidate regressed on an eval, a serving canary shows
latency spikes, features went stale, GPU and storage costs went up, and then
the restart, the rollout, the clean-up and the write-up.

This conversation is built to measure recall honestly, and was written
without looking at how the service ranks what it recalls:
  * most turns are talk (planning, comms, reviews, recall questions); about
    two in five carry tool calls, usually two or three of them, with long
    outputs that look like the real thing (squeue and sacct tables, sinfo,
    nvidia-smi tables and -q reports, dmesg, nccl-tests, training logs with
    step/loss/lr/grad-norm lines, Hydra YAML configs with line numbers,
    tracker metric histories, S3 listings, dataset manifests, eval result
    JSON, registry records, Helm values, Prometheus query results, vLLM pod
    logs, kubectl tables, kubecost tables, Cost Explorer JSON, Terraform
    plans, Dockerfiles, pytest logs, git log and diffs);
  * the line holding a planted value never names what it belongs to, and
    neither does the rest of that output: the run, node, dataset, model,
    service, namespace, bucket or pool is named only in the call's arguments
    (a path, a job id, a pod, a query, a chdir) and in the user's message of
    that turn;
  * the same keys and summary lines recur for other components with other
    values (every experiment config has warmup_steps and
    gradient_accumulation_steps, every listing ends with Total Objects and
    Total Size, every training log reports loss and lr, every Prometheus
    result ends with min/max/mean, every cost table ends with TOTAL), so a
    question can only be answered from the one output its subject's call
    produced;
  * the assistant does not repeat tool values in its replies, and its
    answers to recall questions stay vague;
  * recall questions come 25 or more turns after the fact, in the user's own
    words: abbreviations (GPU, k8s, env, prod, ckpt, LR, TF, secs, ms),
    possessives, plurals, loose names for the run or job, unit changes
    (seconds asked in minutes or hours), chatty asides.

Two question sets ask about different facts (a tuning set and a held-out set,
one unrelated question each); both carry the same two standing instructions
and fact-count points.

Outputs (beside this file):
  mlops.jsonl                  system prompt, then one item per line
  mlops_facts.jsonl            id, turn, topic, source, text
  mlops_probes.jsonl           instructions, fact counts, tuning recall set
  mlops_heldout_probes.jsonl   instructions, fact counts, held-out recall set

Deterministic (seeded, no clock, standard library only). Re-run after editing:
  python3 tools/replay_data/make_mlops.py
"""

import datetime
import difflib
import json
import math
import os
import random
import re

rng = random.Random(20260304)
HERE = os.path.dirname(os.path.abspath(__file__))

SYSTEM = ("You are an ML platform assistant for Corvane's model-training infrastructure. Training runs go to a Slurm "
          "cluster of HGX H100 nodes (partitions train, dev and eval) and are configured with Hydra under conf/ "
          "(experiment, model, data, optim and cluster groups); checkpoints, dataset snapshots and registered models "
          "live on S3-compatible object storage; runs are tracked with trackctl and models promoted with regctl; "
          "evaluation suites run through the harness under evals/; features come from the feature store (features/, "
          "fsctl); inference is vLLM on Kubernetes under deploy/serving/ with Argo Rollouts canaries; the cluster and "
          "its node pools are Terraform under infra/. You can read files, run shell commands (Slurm tools, ssh to "
          "nodes, kubectl, aws, trackctl, regctl, fsctl, promq, terraform, gh), use git and apply patches. Quote "
          "values exactly as the tools return them, and say so when you are unsure.")

RULES = [
    (2, "never drain, reboot or reimage a GPU node without an ack from whoever holds the cluster pager, posted in "
        "the incident channel"),
    (3, "nothing reaches the prod serving fleet without a canary at 5 percent for at least 30 minutes, and the "
        "canary's p99 goes into the ticket before promotion"),
]

TODAY = datetime.date(2026, 3, 4)

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
    "warmup_steps": [500, 1000, 2000, 2500, 3000, 4000],
    "gradient_accumulation_steps": [1, 2, 4, 8, 16],
    "num_workers": [2, 4, 6, 8, 10, 12, 16],
    "max_new_tokens": [64, 128, 256, 512, 1024],
    "max_num_seqs": [32, 64, 128, 256],
    "scaleDownStabilizationSeconds": [120, 180, 300, 600],
    "ttl_seconds": [3600, 21600, 43200, 86400, 604800],
    "lr": ["1.0e-4", "1.5e-4", "2.0e-4", "3.0e-4", "6.0e-4", "2.0e-5", "1.0e-5"],
    "micro_batch_size": [1, 2, 4, 8],
    "global_batch_size": [256, 512, 1024, 2048],
    "seq_len": [2048, 4096, 8192],
    "nccl": ["2.18.5-1", "2.21.5-1", "2.22.3-1"],
}


def nz(key):
    return rng.choice(NOISE[key])


NVW = 42  # nvidia-smi -q: the label column's width, indent included


def nvkv(indent, key, value):
    return " " * indent + key.ljust(NVW - indent) + ": " + str(value)


BUSES = ["18:00", "2a:00", "3a:00", "5d:00", "9a:00", "ab:00", "ba:00", "db:00"]
BAD_GPU = 4  # index of the failing GPU on the flaky node

P = {}  # label -> planted tool text

# atlas-7b r14, the pretraining run that went NaN
P["A1"] = unique(lambda: f"warmup_steps: {pick([640, 750, 875, 1250, 1750])}")
NAN_STEP = rng.randint(41150, 41890)
while NAN_STEP % 10 in (0, 1, 9):
    NAN_STEP += 1
P["A2"] = unique(lambda: f"non-finite loss at step {NAN_STEP}")
P["A3"] = unique(lambda: f"{rng.randint(180, 640)}.{rng.randint(1000, 9999)}")
P["A4"] = unique(lambda: f"Total Size: {rng.randint(1101, 1499) / 10:.1f} GiB")
P["A5"] = unique(lambda: hexs(7))
# kestrel-13b SFT, the job that hung on NCCL
P["K1"] = unique(lambda: f"gradient_accumulation_steps: {pick([6, 10, 12, 20, 24])}")
P["K2"] = unique(lambda: f"ran for {1800000 + rng.randint(120, 990)} milliseconds")
# hgx-r3-14, the flaky node
P["N1"] = unique(lambda: f"Xid (PCI:0000:{BUSES[BAD_GPU]}): 79")
P["N2"] = unique(lambda: nvkv(12, "DRAM Uncorrectable", rng.randint(23, 97)).strip())


def _nccl_rows(peak, seed_jitter=1.0):
    """all_reduce_perf rows from 1 MiB to 8 GiB on 8 GPUs; busbw approaches `peak`."""
    rows = []
    size = 1 << 20
    while size <= 8 << 30:
        count = size // 4
        frac = size / (size + 96e6)
        bus = peak * frac * rng.uniform(0.97, 1.02) * seed_jitter
        alg = bus / 1.75
        t = size / (alg * 1e3)
        bus2 = bus * rng.uniform(0.98, 1.03)
        alg2 = bus2 / 1.75
        t2 = size / (alg2 * 1e3)
        rows.append((size, count, t, alg, bus, t2, alg2, bus2))
        size *= 2
    return rows


NCCL_BAD = _nccl_rows(rng.uniform(150, 240))
P["N3"] = unique(lambda: f"# Avg bus bandwidth    : {sum(r[4] + r[7] for r in NCCL_BAD) / (2 * len(NCCL_BAD)):.3f}")
# webdocs-v9, the snapshot with missing shards
P["D1"] = unique(lambda: f"Total Objects: {2050 - rng.randint(41, 88)}")
P["D2"] = unique(lambda: f'"total_tokens": {rng.randint(380_000_000_000, 420_000_000_000)}')
P["D3"] = unique(lambda: f"num_workers: {pick([5, 7, 9, 11, 14])}")
# marlin-1.3b-instruct rc3, the release candidate that regressed
P["E1"] = unique(lambda: f'"exact_match": 0.{rng.randint(5800, 6399)}')
P["E2"] = unique(lambda: f"max_new_tokens: {pick([192, 320, 384, 448, 640])}")
P["E3"] = unique(lambda: hexs(7))
P["E4"] = unique(lambda: hexs(12))
# the summarizer service's canary
P["S1"] = unique(lambda: f"max_num_seqs: {pick([48, 80, 96, 112, 160])}")
P["S2"] = unique(lambda: f"max={rng.uniform(3.2, 7.9):.3f}")
P["S3"] = unique(lambda: f"total_num_cumulative_preemption={50 * rng.randint(9, 24) + 1}")
P["S4"] = unique(lambda: f"scaleDownStabilizationSeconds: {pick([420, 540, 660, 780, 900])}")
# the user_engagement feature view
P["F1"] = unique(lambda: f"ttl_seconds: {pick([129600, 172800, 259200, 345600])}")
P["F2"] = unique(lambda: f"{rng.randint(12_000_000, 24_000_000)}")
# costs: the research-sweeps namespace, the L4 inference pool, the checkpoint bucket
P["C1"] = unique(lambda: f"{rng.randint(36, 52)},{rng.randint(100, 999)}.{rng.randint(10, 99)}")
P["C2"] = unique(lambda: (lambda a: f"~ max_size = {a} -> {a + rng.choice([8, 12, 16, 20])}")(rng.choice([10, 12, 14])))
P["C3"] = unique(lambda: f'"Amount": "{rng.randint(14000, 23999)}.{rng.randint(1000, 9999)}"')
# the trainer image and the eval harness's CI
P["I1"] = unique(lambda: f"NCCL_VERSION={pick(['2.19.3-1', '2.20.5-1', '2.18.6-1'])}")


def _pytest_time():
    s = rng.randint(140, 420) + rng.randint(10, 99) / 100
    return f"in {s:.2f}s ({int(s) // 3600}:{int(s) % 3600 // 60:02d}:{int(s) % 60:02d})"


P["I2"] = unique(_pytest_time)

# The messages' facts.
M = {
    "name": unique(lambda: "Imogen Thackeray-Obi"),
    "company": unique(lambda: "Corvane Labs"),
    "ticket": unique(lambda: "MLP-4471"),
    "channel": unique(lambda: "#inc-mlp-0304"),
    "oncall": unique(lambda: "Yusra Ellingham has the cluster pager this week"),
    "lead": unique(lambda: "Dariusz Wielgosz"),
    "deadline": unique(lambda: "the marlin go/no-go is at 15:30"),
    "evallead": unique(lambda: "Maelis Courtenay"),
    "drain": unique(lambda: "reimage window is 12:00 to 12:45 UTC"),
    "vendor": unique(lambda: "Cirrolux Systems"),
    "budget": unique(lambda: "GPU budget of USD 310,000 a month"),
    "pr": unique(lambda: "PR #8127"),
}

# What each planted label belongs to, and the pattern that names it. The
# output holding the value must not match; the call or the user's turn must.
SUBJECT = {
    "A": ("atlas", r"atlas"),
    "K": ("kestrel", r"kestrel"),
    "N": ("r3-14", r"r3-14"),
    "D": ("webdocs", r"webdocs"),
    "E": ("marlin", r"marlin"),
    "S": ("summarizer", r"summari[sz]"),
    "F": ("engagement", r"engagement"),
    "C1": ("sweeps", r"sweep"),
    "C2": ("l4 pool", r"\bl4\b|infer-l4"),
    "C3": ("checkpoints", r"ckpt|checkpoint"),
    "I1": ("trainer image", r"trainer"),
    "I2": ("eval harness", r"harness"),
}


def subject_of(label):
    return SUBJECT.get(label) or SUBJECT[label[0]]


def clean(s):
    return not any(r in s for r in RESERVED)


def N(make):
    """A noise output or line: drawn again until it holds no planted value."""
    for _ in range(1000):
        s = make()
        if clean(s):
            return s
    raise RuntimeError("noise keeps hitting a planted value")


def fit(make, n, lo=1400, hi=6900):
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


# ---------------------------------------------------------------------------
# Names that recur across outputs (invented).

NODES = [f"hgx-r{r}-{n:02d}" for r in range(1, 5) for n in range(1, 17)]
BAD_NODE = "hgx-r3-14"
EVAL_NODES = [f"a100-e-{n:02d}" for n in range(1, 9)]
DEV_NODES = [f"l40s-d-{n:02d}" for n in range(1, 7)]
USERS = ["dwielgosz", "mcourtenay", "ithackeray", "hnakamura", "rokafor", "lbergstrom", "svandermeer", "tquist",
         "abalogun", "jmoreau", "pkaranjit", "efairweather"]
AUTHORS = ["Hiro Nakamura", "Ruth Okafor", "Lasse Bergstrom", "Saskia van der Meer", "Tove Quist", "Ade Balogun",
           "Julien Moreau", "Prakash Karanjit", "Esme Fairweather", "Dariusz W.", "Maelis C.", "Imogen T-O"]
OTHER_RUNS = ["heron-1b-r6", "osprey-350m-abl3", "kite-3b-code-r2", "plover-vit-l-r9", "wren-embed-v4",
              "gannet-moe-8x1b-r1", "tern-2b-dpo-r3", "skua-rm-7b-r2", "petrel-3b-r1", "auk-700m-abl7"]
SERVICES = ["embedder", "reranker", "moderation", "autocomplete", "doc-classifier", "asr-lite"]
FEATURES_OTHER = ["user_profile", "item_popularity", "session_context", "merchant_risk", "query_intent"]


def clock(h, m=0, s=0):
    return datetime.datetime(TODAY.year, TODAY.month, TODAY.day) + datetime.timedelta(hours=h, minutes=m, seconds=s)


def iso(dt):
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def numbered(lines, start=1):
    return "\n".join(f"{i:6d}\t{l}" for i, l in enumerate(lines, start))


def compress(nodes):
    """hgx-r3-13,hgx-r3-14 -> hgx-r3-[13-14] (Slurm's hostlist form, per rack)."""
    by = {}
    for n in nodes:
        pre, num = n.rsplit("-", 1)
        by.setdefault(pre, []).append(int(num))
    parts = []
    for pre, nums in by.items():
        nums.sort()
        runs, start, prev = [], nums[0], nums[0]
        for x in nums[1:] + [None]:
            if x is not None and x == prev + 1:
                prev = x
                continue
            runs.append(f"{start:02d}" if start == prev else f"{start:02d}-{prev:02d}")
            if x is not None:
                start = prev = x
        parts.append(pre + "-" + (runs[0] if len(runs) == 1 and "-" not in runs[0] else "[" + ",".join(runs) + "]"))
    return ",".join(parts)


def table(headers, rows, right=()):
    rows = [[str(c) for c in r] for r in rows]
    w = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    out = ["  ".join(h.rjust(w[i]) if i in right else h.ljust(w[i]) for i, h in enumerate(headers)).rstrip()]
    for r in rows:
        out.append("  ".join(c.rjust(w[i]) if i in right else c.ljust(w[i]) for i, c in enumerate(r)).rstrip())
    return "\n".join(out)


def hms(sec):
    d, rem = divmod(int(sec), 86400)
    h, rem = divmod(rem, 3600)
    m, s = divmod(rem, 60)
    return (f"{d}-" if d else "") + f"{h:02d}:{m:02d}:{s:02d}"


# ---------------------------------------------------------------------------
# Slurm.

JOB_ATLAS, JOB_KESTREL, JOB_ATLAS_R15, JOB_KESTREL_RE = 4418203, 4419977, 4423318, 4423502
ATLAS_NODES = [f"hgx-r2-{n:02d}" for n in range(1, 17)]
KESTREL_NODES = [f"hgx-r3-{n:02d}" for n in range(13, 17)]


def _other_jobs(n, states=("R", "R", "R", "PD")):
    """(jobid, partition, name, user, state, seconds, nodes, nodelist-or-reason)."""
    free = [x for x in NODES if x not in ATLAS_NODES and x not in KESTREL_NODES]
    rng.shuffle(free)
    jobs = []
    jid = 4416000 + rng.randint(0, 900)
    for k in range(n):
        jid += rng.randint(3, 160)
        st = rng.choice(states)
        kind = rng.random()
        if kind < 0.45:
            name, part, nn = rng.choice(OTHER_RUNS), "train", rng.choice([1, 2, 4, 8])
            where = free[:nn] if st == "R" else []
            free = free[nn:] if st == "R" else free
        elif kind < 0.75:
            name = f"evals-{rng.choice(['docqa', 'mmlu-lite', 'codegen', 'safety', 'longctx', 'tooluse'])}-" \
                   f"{rng.choice(['heron', 'osprey', 'kite', 'tern', 'skua', 'petrel'])}"
            part, nn = "eval", 1
            where = [rng.choice(EVAL_NODES)] if st == "R" else []
        else:
            name, part, nn = rng.choice(["bash", "jupyter", "profile-kernels", "nsys-capture", "dataprep-tok"]), "dev", 1
            where = [rng.choice(DEV_NODES)] if st == "R" else []
        if st == "R" and not where:
            st = "PD"
        secs = rng.randint(60, 3 * 86400) if st == "R" else 0
        reason = compress(where) if st == "R" else "(" + rng.choice(["Resources", "Priority", "Priority",
                                                                       "QOSMaxGRESPerUser", "ReqNodeNotAvail, "
                                                                       "UnavailableNodes:" + BAD_NODE,
                                                                       "Dependency"]) + ")"
        jobs.append((jid, part, name, rng.choice(USERS), st, secs, nn, reason))
    return jobs


def squeue(n, extra=()):
    rows = []
    for jid, part, name, user, st, secs, nn, where in list(extra) + _other_jobs(n):
        rows.append([jid, part, name[:30], user, st, hms(secs) if st == "R" else "0:00", nn, where])
    rows.sort(key=lambda r: (r[4] != "R", r[0]))
    return table(["JOBID", "PARTITION", "NAME", "USER", "ST", "TIME", "NODES", "NODELIST(REASON)"], rows,
                 right=(0, 1, 2, 3, 4, 5, 6))


def sacct_overnight(n):
    rows = [[JOB_ATLAS, "atlas-7b-r14", "train", "research-llm", "billing=2048,cpu=2048,gres/gpu=128,mem=+",
             hms(rng.randint(2 * 86400, 3 * 86400)), "FAILED", "1:0"],
            [JOB_KESTREL, "kestrel-13b-sft-v2", "train", "research-llm", "billing=512,cpu=512,gres/gpu=32,mem=32+",
             hms(rng.randint(30000, 60000)), "FAILED", "6:0"]]
    for jid, part, name, user, st, secs, nn, where in _other_jobs(n, states=("R",)):
        state = rng.choices(["COMPLETED", "COMPLETED", "FAILED", "TIMEOUT", "CANCELLED+", "OUT_OF_ME+"],
                            [8, 8, 2, 1, 2, 1])[0]
        code = "0:0" if state == "COMPLETED" else rng.choice(["1:0", "0:15", "0:9", "137:0", "2:0"])
        rows.append([jid, name[:22], part, rng.choice(["research-llm", "research-rec", "evals", "platform",
                                                       "research-vis"]),
                     f"billing={16 * nn},cpu={16 * nn},gres/gpu={8 * nn if part == 'train' else rng.choice([1, 2, 4, 8])}"
                     f",mem={rng.choice([64, 128, 256, 512])}G" + ("+" if nn > 1 else ""),
                     hms(rng.randint(120, 60000)), state, code])
    rng.shuffle(rows)
    return table(["JobID", "JobName", "Partition", "Account", "AllocTRES", "Elapsed", "State", "ExitCode"], rows,
                 right=(0, 1, 2, 3, 4, 5, 6, 7))


def sacct_steps(jobid, name, nodes, elapsed, state, code, start, requeues=0):
    rows = []
    end = start + datetime.timedelta(seconds=elapsed)
    for r in range(requeues, -1, -1):
        st0 = start - datetime.timedelta(seconds=rng.randint(20000, 90000) * (r + 1)) if r else start
        rows.append([f"{jobid}" if not r else f"{jobid}", name[:20], "train", len(nodes) * 8, hms(elapsed if not r else
                     rng.randint(600, 20000)), st0.strftime("%Y-%m-%dT%H:%M:%S"),
                     (end if not r else st0 + datetime.timedelta(seconds=900)).strftime("%Y-%m-%dT%H:%M:%S"),
                     state if not r else "REQUEUED", code if not r else "0:0", compress(nodes)])
        for step, cpus, nd in [("batch", 64, nodes[:1]), ("extern", len(nodes) * 64, nodes), ("0", len(nodes) * 64, nodes)]:
            st = "CANCELLED" if step == "extern" else (state if step != "batch" else ("FAILED" if code != "0:0" else "COMPLETED"))
            rows.append([f"{jobid}.{step}", step, "", cpus, rows[-1][4] if step != "batch" else hms(elapsed + 3),
                         rows[-1][5], rows[-1][6], st, code if step != "extern" else "0:0", compress(nd)])
    return table(["JobID", "JobName", "Partition", "AllocCPUS", "Elapsed", "Start", "End", "State", "ExitCode",
                  "NodeList"], rows, right=(3, 4, 8))


def sinfo_nodes():
    rows = []
    for n in NODES:
        if n in ATLAS_NODES:
            st = "idle"
        elif n == BAD_NODE:
            st = "drain"
        elif n in KESTREL_NODES:
            st = "idle"
        else:
            st = rng.choice(["alloc", "alloc", "alloc", "mix", "idle"])
        alloc = {"alloc": 8, "mix": rng.randint(1, 7), "drain": 0, "idle": 0}[st]
        rows.append([n, "train*", st, "224", "2063000", f"gpu:h100:8(S:0-1)", f"gpu={alloc}/8",
                     "Kill task failed" if n == BAD_NODE else "none"])
    for n in EVAL_NODES:
        rows.append([n, "eval", rng.choice(["alloc", "mix", "idle"]), "128", "1031000", "gpu:a100:8(S:0-1)",
                     f"gpu={rng.randint(0, 8)}/8", "none"])
    return table(["NODELIST", "PARTITION", "STATE", "CPUS", "MEMORY", "GRES", "GRES_USED", "REASON"], rows)


def sinfo_reasons():
    out = [table(["REASON", "USER", "TIMESTAMP", "NODELIST"], [
        ["Kill task failed", "slurm", "2026-03-04T02:11:09", BAD_NODE],
        ["IB link flap, see INFRA-2291", "ybellingham", "2026-02-27T16:40:12", "hgx-r4-07"],
        ["bios update pending", "ybellingham", "2026-03-02T09:03:55", "a100-e-06"],
        ["nvme wear >90%", "jmoreau", "2026-02-19T11:22:31", "l40s-d-04"]]), ""]
    out.append(table(["PARTITION", "AVAIL", "TIMELIMIT", "NODES(A/I/O/T)", "NODELIST"], [
        ["train*", "up", "14-00:00:00", f"{rng.randint(30, 40)}/{rng.randint(18, 26)}/2/64", "hgx-r[1-4]-[01-16]"],
        ["dev", "up", "12:00:00", f"{rng.randint(2, 5)}/1/1/6", "l40s-d-[01-06]"],
        ["eval", "up", "2-00:00:00", f"{rng.randint(3, 6)}/1/1/8", "a100-e-[01-08]"]]))
    out.append("")
    for res, nodes, users, cnt, day, h0, dur in [("maint_r4_ib", "hgx-r4-[07-08]", "ybellingham,jmoreau", 2, 6, 6, 6),
                                                 ("evals_nightly", "a100-e-[01-04]", "mcourtenay,svc-evals", 4, 5, 0, 6)]:
        out.append(f"ReservationName={res} StartTime=2026-03-{day:02d}T{h0:02d}:00:00 "
                   f"EndTime=2026-03-{day:02d}T{h0 + dur:02d}:00:00 Duration={dur:02d}:00:00")
        out.append(f"   Nodes={nodes} NodeCnt={cnt} CoreCnt={cnt * (224 if 'hgx' in nodes else 128)} Features=(null) "
                   f"PartitionName={'eval' if 'a100' in nodes else 'train'} Flags={'MAINT,IGNORE_JOBS' if 'maint' in res else 'DAILY'}")
        out.append(f"   TRES=cpu={cnt * (224 if 'hgx' in nodes else 128)},gres/gpu={cnt * 8}")
        out.append(f"   Users={users} Groups=(null) Accounts=(null) Licenses=(null) State=INACTIVE BurstBuffer=(null)")
        out.append("   MaxStartDelay=(null)")
        out.append("")
    return "\n".join(out).rstrip()


def scontrol_job(jobid, name, nodes, state, user, account, excl=""):
    sub = clock(rng.randint(9, 11), rng.randint(0, 59), rng.randint(0, 59))
    lines = [
        f"JobId={jobid} JobName={name}",
        f"   UserId={user}(4{rng.randint(1000, 9999)}) GroupId=research(3100) MCS_label=N/A",
        f"   Priority={rng.randint(40000, 90000)} Nice=0 Account={account} QOS=train-high",
        f"   JobState={state} Reason={'None' if state == 'RUNNING' else 'Resources'} Dependency=(null)",
        "   Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0",
        f"   RunTime=00:0{rng.randint(1, 9)}:{rng.randint(10, 59)} TimeLimit=7-00:00:00 TimeMin=N/A",
        f"   SubmitTime={sub:%Y-%m-%dT%H:%M:%S} EligibleTime={sub:%Y-%m-%dT%H:%M:%S}",
        f"   AccrueTime={sub:%Y-%m-%dT%H:%M:%S}",
        f"   StartTime={sub + datetime.timedelta(seconds=rng.randint(5, 90)):%Y-%m-%dT%H:%M:%S} EndTime=Unknown Deadline=N/A",
        "   PreemptEligibleTime=2026-03-04T00:00:00 PreemptTime=None",
        "   SuspendTime=None SecsPreSuspend=0 LastSchedEval=2026-03-04T10:41:02 Scheduler=Main",
        "   Partition=train AllocNode:Sid=login-02:2214871",
        "   ReqNodeList=(null) ExcNodeList=" + (excl or "(null)"),
        f"   NodeList={compress(nodes) if state == 'RUNNING' else '(null)'}",
        f"   BatchHost={nodes[0] if state == 'RUNNING' else '(null)'}",
        f"   NumNodes={len(nodes)} NumCPUs={224 * len(nodes)} NumTasks={8 * len(nodes)} CPUs/Task=24 ReqB:S:C:T=0:0:*:*",
        f"   ReqTRES=cpu={224 * len(nodes)},mem={2000 * len(nodes)}G,node={len(nodes)},billing={224 * len(nodes)},"
        f"gres/gpu={8 * len(nodes)}",
        f"   AllocTRES=cpu={224 * len(nodes)},mem={2000 * len(nodes)}G,node={len(nodes)},billing={224 * len(nodes)},"
        f"gres/gpu={8 * len(nodes)}",
        "   Socks/Node=* NtasksPerN:B:S:C=8:0:*:* CoreSpec=*",
        "   MinCPUsNode=224 MinMemoryNode=2000G MinTmpDiskNode=0",
        "   Features=(null) DelayBoot=00:00:00",
        "   OverSubscribe=NO Contiguous=0 Licenses=(null) Network=(null)",
        "   Command=/home/svc-train/ml/scripts/slurm/launch.sbatch",
        "   WorkDir=/home/svc-train/ml",
        f"   StdErr=/lustre/slurm-logs/%x-%j.err",
        "   StdIn=/dev/null",
        f"   StdOut=/lustre/slurm-logs/%x-%j.out",
        "   TresPerNode=gres/gpu:8",
        "   MailUser=(null) MailType=NONE",
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# GPUs and nodes.

def nvsmi_table(bad=None, load=True, when=None):
    """Plain `nvidia-smi`; `bad`: index of a GPU in trouble."""
    when = when or clock(9, rng.randint(0, 59), rng.randint(0, 59))
    out = [when.strftime("%a %b %e %H:%M:%S %Y").replace("  ", "  ") + "       ",
           "+-----------------------------------------------------------------------------------------+",
           "| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |",
           "|-----------------------------------------+------------------------+----------------------+",
           "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
           "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |",
           "|                                         |                        |               MIG M. |",
           "|=========================================+========================+======================|"]
    procs = []
    for i, bus in enumerate(BUSES):
        busid = f"00000000:{bus.upper()}.0"
        if i == bad:
            ecc, temp, pwr, mem, util = str(rng.randint(3, 9)), rng.randint(58, 71), rng.randint(110, 190), 1, 0
        else:
            ecc = "0"
            temp = rng.randint(31, 38) if not load else rng.randint(52, 69)
            pwr = rng.randint(68, 80) if not load else rng.randint(420, 690)
            mem = 1 if not load else rng.randint(61000, 78500)
            util = 0 if not load else rng.randint(88, 100)
        out.append(f"|   {i}  NVIDIA H100 80GB HBM3          On  |   {busid} Off |{ecc:>21} |")
        out.append(f"| N/A   {temp}C    P0            {pwr:>3}W /  700W |  {mem:>6}MiB /  81559MiB |"
                   f"{util:>6}%      Default |")
        out.append("|                                         |                        |             Disabled |")
        out.append("+-----------------------------------------+------------------------+----------------------+")
        if load and i != bad:
            procs.append((i, rng.randint(1000000, 3999999), mem - rng.randint(500, 600)))
    out += ["", "+-----------------------------------------------------------------------------------------+",
            "| Processes:                                                                              |",
            "|  GPU   GI   CI        PID   Type   Process name                              GPU Memory |",
            "|        ID   ID                                                               Usage      |",
            "|=========================================================================================|"]
    if procs:
        for i, pid, m in procs:
            out.append(f"|  {i:>3}   N/A  N/A  {pid:>9}      C   python3                                    {m:>6}MiB |")
    else:
        out.append("|  No running processes found                                                             |")
    out.append("+-----------------------------------------------------------------------------------------+")
    return "\n".join(out)


def nvsmi_ecc(bad_counts=None, when=None):
    """`nvidia-smi -q -d ECC` with the SRAM source breakdown filtered out."""
    when = when or clock(9, rng.randint(0, 59), rng.randint(0, 59))
    out = ["", "==============NVSMI LOG==============", "",
           nvkv(0, "Timestamp", when.strftime("%a %b %e %H:%M:%S %Y")), nvkv(0, "Driver Version", "550.54.15"),
           nvkv(0, "CUDA Version", "12.4"), "", nvkv(0, "Attached GPUs", "8")]
    for i, bus in enumerate(BUSES):
        c = (bad_counts or {}).get(i, {})
        out.append(f"GPU 00000000:{bus.upper()}.0")
        out += ["    ECC Mode", nvkv(8, "Current", "Enabled"), nvkv(8, "Pending", "Enabled"), "    ECC Errors",
                "        Volatile"]
        out += [nvkv(12, "SRAM Correctable", c.get("vsc", 0)), nvkv(12, "SRAM Uncorrectable Parity", 0),
                nvkv(12, "SRAM Uncorrectable SEC-DED", 0), nvkv(12, "DRAM Correctable", c.get("vdc", rng.choice([0, 0, 0, 1]))),
                nvkv(12, "DRAM Uncorrectable", c.get("vdu", 0))]
        out.append("        Aggregate")
        out += [nvkv(12, "SRAM Correctable", c.get("asc", rng.choice([0, 0, 2]))), nvkv(12, "SRAM Uncorrectable Parity", 0),
                nvkv(12, "SRAM Uncorrectable SEC-DED", 0),
                nvkv(12, "DRAM Correctable", c.get("adc", rng.choice([0, 0, 1, 3, 6]))),
                nvkv(12, "DRAM Uncorrectable", c.get("adu", 0))]
        out.append("")
    return "\n".join(out).rstrip()


DMESG_NOISE = [
    "mlx5_core 0000:{b}.0: mlx5_pcie_event:301:(pid {p}): PCIe slot advertised sufficient power (27W).",
    "mlx5_core 0000:{b}.0: poll_health:{p3}:(pid 0): device's health compromised - reached miss count",
    "mlx5_core 0000:{b}.0 ibp{n}s0: Link down",
    "mlx5_core 0000:{b}.0 ibp{n}s0: Link up",
    "IPv6: ADDRCONF(NETDEV_CHANGE): ibp{n}s0: link becomes ready",
    "systemd-journald[{p}]: Data hash table of /var/log/journal/system.journal has a fill level at 75.0, suggesting rotation.",
    "audit: type=1400 audit({e}.{m}:{n}): apparmor=\"STATUS\" operation=\"profile_replace\" name=\"enroot\" pid={p}",
    "LustreError: 11-0: lfs-OST000{n}-osc-ffff9a{h}: operation ost_statfs to node 10.40.{n}.{o}@o2ib failed: rc = -107",
    "Lustre: lfs-OST000{n}-osc-ffff9a{h}: Connection restored to 10.40.{n}.{o}@o2ib (at 10.40.{n}.{o}@o2ib)",
    "Lustre: lfs-OST000{n}-osc-ffff9a{h}: Connection to lfs-OST000{n} (at 10.40.{n}.{o}@o2ib) was lost; in progress "
    "operations using this service will wait for recovery to complete",
    "nvidia-peermem nv_mem_acquire: peer memory client registered",
    "perf: interrupt took too long ({p3} > {p4}), lowering kernel.perf_event_max_sample_rate to {m}00",
    "nvidia-nvswitch{n}: SXid (PCI:0000:{b}.0): 12028, Non-fatal, Link {n} egress non-posted PRIV error (First)",
    "EDAC MC{n}: 1 CE memory read error on CPU_SrcID#{n}_Ha#0_Chan#{n}_DIMM#0 (channel:{n} slot:0 page:0x{h} offset:0x0 "
    "grain:32 syndrome:0x0)",
]


def dmesg(n, anchor, bad=False):
    """`dmesg -T | tail`; bad: the fatal line falls at `anchor`."""
    lines = []
    fatal_at = int(n * 0.72) if bad else n - 1
    bus = BUSES[BAD_GPU]
    gaps = [rng.randint(4, 700) for _ in range(n)]
    times = []
    for k in range(n):
        if k <= fatal_at:
            times.append(anchor - datetime.timedelta(seconds=sum(gaps[k:fatal_at])))
        else:
            times.append(anchor + datetime.timedelta(seconds=sum(gaps[fatal_at:k]) if k > fatal_at + 4 else k - fatal_at))
    for k in range(n):
        t = times[k]
        stamp = t.strftime("[%a %b %e %H:%M:%S %Y]")
        if bad and fatal_at - 9 <= k < fatal_at:
            pid = rng.randint(1800000, 1899999)
            kind = rng.choice([94, 94, 48, 63])
            text = {94: f"NVRM: Xid (PCI:0000:{bus}): 94, pid={pid}, name=pt_main_thread, Contained: SM (0x1). "
                        f"RST: No, D-RST: No",
                    48: f"NVRM: Xid (PCI:0000:{bus}): 48, pid={pid}, name=pt_main_thread, An uncorrectable double "
                        f"bit error (DBE) has been detected on GPU in the framebuffer at partition {rng.randint(0, 7)}, "
                        f"subpartition {rng.randint(0, 1)}.",
                    63: f"NVRM: Xid (PCI:0000:{bus}): 63, pid={pid}, name=pt_main_thread, Row Remapper: New row "
                        f"(0x{hexs(16)}) marked for remapping, reset gpu to activate."}[kind]
        elif bad and k == fatal_at:
            text = (f"NVRM: Xid (PCI:0000:{bus}): 79, pid={rng.randint(1800000, 1899999)}, name=pt_main_thread, "
                    f"GPU has fallen off the bus.")
        elif bad and k == fatal_at + 1:
            text = f"NVRM: GPU 0000:{bus}.0: GPU has fallen off the bus."
        elif bad and k == fatal_at + 2:
            text = "NVRM: A GPU crash dump has been created. If possible, please run nvidia-bug-report.sh as root."
        elif bad and k == fatal_at + 3:
            text = f"pcieport 0000:{int(bus[:2], 16) - 3:02x}:01.0: AER: Uncorrected (Fatal) error received: 0000:{bus}.0"
        elif bad and k == fatal_at + 4:
            text = f"nvidia 0000:{bus}.0: AER: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer"
        else:
            tpl = rng.choice(DMESG_NOISE)
            if not bad and rng.random() < 0.08:
                b2 = rng.choice(BUSES)
                tpl = (f"NVRM: Xid (PCI:0000:{b2}): {rng.choice([13, 31, 43])}, pid={{p}}, name=python3, "
                       f"{rng.choice(['Graphics SM Warp Exception on (GPC 1, TPC 3, SM 0): Out Of Range Address', 'Ch 00000008, intr 10000000. MMU Fault', 'Ch 00000010'])}")
            text = tpl.format(b=rng.choice(["17:00", "29:00", "39:00", "5c:00", "99:00", "aa:00", "b9:00", "da:00"]),
                              p=rng.randint(1000, 3999999), n=rng.randint(0, 7), e=int(t.timestamp()),
                              m=rng.randint(100, 999), h=hexs(6), o=rng.randint(2, 254), p3=rng.randint(2600, 9900),
                              p4=rng.randint(2500, 2600))
        lines.append(f"{stamp} {text}")
    return "\n".join(lines)


def nccl_out(rows, gpus=8):
    out = [f"# nThread 1 nGpus {gpus} minBytes 1048576 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 "
           "agg iters: 1 validation: 1 graph: 0", "#", "# Using devices", "#",
           "#                                                              out-of-place                       in-place          ",
           "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
           "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       "]
    for size, count, t, alg, bus, t2, alg2, bus2 in rows:
        out.append(f"{size:>12}  {count:>12}     float     sum      -1  {t:>7.1f}  {alg:>6.2f}  {bus:>6.2f}      0  "
                   f"{t2:>7.1f}  {alg2:>6.2f}  {bus2:>6.2f}      0")
    avg = sum(r[4] + r[7] for r in rows) / (2 * len(rows))
    out += ["# Out of bounds values : 0 OK", f"# Avg bus bandwidth    : {avg:.3f} ", "#"]
    return "\n".join(out)


def pdsh_gpu_query(nodes, when):
    out = []
    for n in nodes:
        for i, bus in enumerate(BUSES):
            if n == BAD_NODE and i == BAD_GPU:
                vals = [i, f"00000000:{bus.upper()}.0", rng.randint(55, 70), rng.randint(3, 9), rng.randint(1, 4), "Yes",
                        rng.randint(120, 180)]
            else:
                vals = [i, f"00000000:{bus.upper()}.0", rng.randint(40, 70), 0, rng.choice([0, 0, 0, 1]), "No",
                        rng.randint(380, 690)]
            out.append(f"{n}: " + ", ".join(str(v) for v in vals))
    out.sort()
    return "\n".join(out)


# ---------------------------------------------------------------------------
# Training: logs, configs, tracker, checkpoints.



def lr_at(step, lr, min_lr, warm, decay):
    if step < warm:
        return lr * step / warm
    p = min(1.0, (step - warm) / max(1, decay - warm))
    return min_lr + 0.5 * (lr - min_lr) * (1 + math.cos(math.pi * p))


def stamp(t):
    return t.strftime("%Y-%m-%d %H:%M:%S,") + f"{rng.randint(0, 999):03d}"


def step_line(t, step, loss, lr, gn, toks, mfu, mem):
    l = "nan" if loss is None else f"{loss:.4f}"
    g = "nan" if gn is None else f"{gn:.2f}"
    return (f"[{stamp(t)}][train.loop][INFO] - step {step} | loss {l} | lr {lr:.3e} | grad_norm {g} | "
            f"tok/s {toks:.2e} | mfu {mfu:.1f}% | mem {mem:.1f}G")


def train_log(n, end_step, t_end, opt, base_loss, secs_per_step, toks, mfu, events=(), every=10, warn_shards=(),
              gn_map=None, loss_map=None):
    """The last `n` lines of a rank-0 log ending at `end_step`; events: (step, line-maker) appended after that step."""
    lines = []
    step = end_step - end_step % every
    t = t_end
    extra = dict(events)
    k = 0
    while len(lines) < n and step > 0:
        lr = lr_at(step, *opt)
        loss = (loss_map or {}).get(step, base_loss + rng.uniform(-0.06, 0.06) + 0.00000015 * (60000 - step))
        block = [step_line(t, step, loss, lr, (gn_map or {}).get(step, rng.uniform(0.72, 1.25)),
                           toks * rng.uniform(0.97, 1.02), mfu + rng.uniform(-0.8, 0.8), rng.uniform(58, 64))]
        if step % 500 == 0:
            block.append(f"[{stamp(t + datetime.timedelta(seconds=1))}][train.eval][INFO] - val step {step} | "
                         f"val_loss {base_loss + 0.04 + rng.uniform(-0.02, 0.02):.4f} | val_ppl "
                         f"{math.exp(base_loss + 0.04):.3f} | batches 200")
        if step % 1000 == 0:
            block.append(f"[{stamp(t + datetime.timedelta(seconds=2))}][train.ckpt][INFO] - saved step {step} "
                         f"(async upload queued, {rng.randint(120, 190)} shards)")
        if warn_shards and rng.random() < 0.3:
            sh = rng.choice(warn_shards)
            block.insert(0, f"[{stamp(t - datetime.timedelta(seconds=4))}][data.stream][WARNING] - shard-{sh:05d}.tar: "
                            f"NoSuchKey from object store, skipping (on_missing_shard=skip, worker {rng.randint(0, 13)})")
        if step in extra:
            block += extra[step](t)
        lines = block + lines
        step -= every
        t -= datetime.timedelta(seconds=secs_per_step * every * rng.uniform(0.98, 1.02))
        k += 1
    return "\n".join(lines[-n:])


def tracker_history(run, key, steps_vals, total, t_end, secs):
    out = [f"run {run}  key {key}  showing {len(steps_vals)} of {total} points", "",
           f"{'STEP':<9}{'VALUE':<14}LOGGED_AT"]
    t = t_end - datetime.timedelta(seconds=secs * len(steps_vals))
    for s, v in steps_vals:
        t += datetime.timedelta(seconds=secs * rng.uniform(0.97, 1.03))
        val = "nan" if v is None else f"{v:.4f}"
        out.append(f"{s:<9}{val:<14}{t.strftime('%Y-%m-%dT%H:%M:%S.')}{rng.randint(0, 999):03d}Z")
    return "\n".join(out)


def tracker_runs(n, project="pretrain"):
    rows = []
    for _ in range(n):
        name = rng.choice(OTHER_RUNS + ["atlas-7b-r12", "atlas-7b-r13", "kestrel-13b-sft-v1"])
        st = rng.choice(["FINISHED", "FINISHED", "RUNNING", "FAILED", "KILLED"])
        rows.append([hexs(12), name, st, f"2026-0{rng.randint(1, 3)}-{rng.randint(1, 28):02d} {rng.randint(0, 23):02d}:"
                     f"{rng.randint(0, 59):02d}", rng.randint(2000, 160000), f"{rng.uniform(1.8, 3.2):.4f}",
                     f"{rng.uniform(1.9, 3.3):.4f}", rng.choice(USERS)])
    rows.sort(key=lambda r: r[3], reverse=True)
    return table(["RUN_ID", "NAME", "STATE", "STARTED", "STEP", "TRAIN_LOSS", "VAL_LOSS", "OWNER"], rows,
                 right=(4, 5, 6))


EXP_TEMPLATE = """# @package _global_
# One file per run. Anything not set here comes from the config groups below;
# the run name comes from RUN_NAME, set by scripts/slurm/launch.sbatch.
defaults:
  - override /model: {model}
  - override /data: {data}
  - override /optim: adamw_cosine
  - override /cluster: slurm_hgx
  - _self_

run:
  seed: {seed}
  output_dir: /lustre/runs/${{oc.env:RUN_NAME}}
  ckpt_uri: s3://corvane-ckpt/${{oc.env:RUN_NAME}}/
  resume_from: {resume}

trainer:
  max_steps: {max_steps}
  global_batch_size: {gbs}
  micro_batch_size: {mbs}
  gradient_accumulation_steps: {gas}
  seq_len: {seq}
  precision: bf16-mixed
  log_every_n_steps: 10
  val_every_n_steps: {val}
  ckpt_every_n_steps: {ckpt}
  keep_last_n_ckpts: {keep}
  activation_checkpointing: {ac}
  compile: {compile}

optim:
  lr: {lr}
  min_lr: {min_lr}
  warmup_steps: {warm}
  decay_steps: {decay}
  weight_decay: {wd}
  betas: [0.9, 0.95]
  eps: 1.0e-8
{clip}
parallel:
  tensor: {tp}
  pipeline: 1
  fsdp_shard: {fsdp}
  sequence_parallel: {sp}

guard:
  max_consecutive_nonfinite: 8
  skip_nonfinite_updates: true

nccl:
  timeout_minutes: 30
  async_error_handling: true

tracker:
  project: {project}
  tags: [{tags}]
  log_grad_norm_every: 1
"""


def exp_config(**over):
    gbs = over.pop("gbs", nz("global_batch_size"))
    mbs = over.pop("mbs", nz("micro_batch_size"))
    v = dict(model=rng.choice(["dense_1b", "dense_3b", "dense_350m", "moe_8x1b", "vit_l"]),
             data=rng.choice(["mix_v7", "code_v3", "forumqa_v2", "arxivmath_v4", "images_v2"]),
             seed=rng.choice([1234, 1337, 2024, 7, 31337]), resume="null",
             max_steps=rng.choice([60000, 80000, 120000, 200000]), gbs=gbs, mbs=mbs,
             gas=f"${{eval:'{gbs} // ({mbs} * ${{cluster.world_size}})'}}" if rng.random() < 0.3 else nz("gradient_accumulation_steps"),
             seq=nz("seq_len"), val=rng.choice([1000, 2000, 5000]), ckpt=rng.choice([500, 1000, 2000]),
             keep=rng.choice([3, 5, 10, "all"]), ac=rng.choice(["full", "selective", "none"]),
             compile=rng.choice(["true", "false"]), lr=nz("lr"), min_lr=rng.choice(["1.0e-5", "3.0e-5", "6.0e-6"]),
             warm=nz("warmup_steps"), decay=rng.choice([60000, 80000, 120000, 200000]),
             wd=rng.choice(["0.1", "0.05", "0.0"]), clip=f"  clip_grad: {rng.choice(['1.0', '0.5', '1.0'])}\n",
             tp=rng.choice([1, 2, 4]), fsdp=rng.choice(["full", "hybrid", "grad_op"]),
             sp=rng.choice(["true", "false"]), project=rng.choice(["pretrain", "sft", "dpo", "vision", "embed"]),
             tags=", ".join(rng.sample(["h100", "bf16", "cosine", "ablation", "baseline", "fsdp", "long-run", "v9-mix"], 3)))
    v.update(over)
    return EXP_TEMPLATE.format(**v)


BASE_CONFIG = """# Root config: composed for every run. Groups live in the folders beside this file.
defaults:
  - model: dense_1b
  - data: mix_v7
  - optim: adamw_cosine
  - cluster: slurm_hgx
  - tracker: trackd
  - experiment: null
  - override hydra/job_logging: rank_zero
  - _self_

hydra:
  run:
    dir: ${run.output_dir}/hydra/${now:%Y%m%d-%H%M%S}
  job:
    chdir: false
    env_set:
      NCCL_DEBUG: WARN
      NCCL_IB_HCA: mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_7
      NCCL_SOCKET_IFNAME: eno1
      TORCH_NCCL_ASYNC_ERROR_HANDLING: "1"
      CUDA_DEVICE_MAX_CONNECTIONS: "1"

run:
  seed: 1234
  output_dir: /lustre/runs/${oc.env:RUN_NAME,local}
  ckpt_uri: null
  resume_from: null

trainer:
  max_steps: 1000
  precision: bf16-mixed
  log_every_n_steps: 10
  val_every_n_steps: 500
  ckpt_every_n_steps: 500
  keep_last_n_ckpts: 3
  activation_checkpointing: selective
  compile: false
  profile_steps: []

guard:
  max_consecutive_nonfinite: 8
  skip_nonfinite_updates: true

nccl:
  timeout_minutes: 30
  async_error_handling: true

upload:
  tool: s5cmd
  concurrency: 64
  part_size_mb: 64
  verify: true
"""

OPTIM_CONFIG = """# AdamW with linear warmup and cosine decay to min_lr.
# clip_grad: per experiment since the clipping refactor; 0.0 turns clipping off.
_target_: train.optim.build_adamw
lr: 3.0e-4
min_lr: 3.0e-5
warmup_steps: 2000
decay_steps: ${trainer.max_steps}
weight_decay: 0.1
betas: [0.9, 0.95]
eps: 1.0e-8
clip_grad: ${oc.select:optim_override.clip_grad,0.0}
fused: true
foreach: false
no_decay:
  - bias
  - norm.weight
  - embed.weight
schedule:
  kind: cosine
  warmup: linear
  hold_steps: 0
  restart_every: null
zero_grad_set_to_none: true
param_groups:
  - match: "*.experts.*"
    lr_mult: 1.0
    weight_decay: ${..weight_decay}
  - match: "lm_head.*"
    lr_mult: 1.0
ema:
  enabled: false
  decay: 0.9999
  every_n_steps: 1
  start_step: 0
state:
  dtype: float32
  offload: false
  shard_with_params: true
# Groups that optimizers may read when an experiment enables them.
lookahead:
  enabled: false
  k: 5
  alpha: 0.5
loss_spike:
  warn_factor: 10.0
  window_steps: 200
  action: log
"""


def s3_ckpt_prefix(steps, run_files=True):
    out = [f"                           PRE step_{s:06d}/" for s in steps]
    if run_files:
        out += [f"2026-03-0{d} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"
                f"{b:>11} {f}" for f, b, d in [("config.resolved.yaml", rng.randint(4200, 6100), 1),
                                               ("latest", 12, 4), ("tracker.json", rng.randint(700, 1100), 1)]]
    return "\n".join(out)


def human(b):
    for unit in ["Bytes", "KiB", "MiB", "GiB", "TiB"]:
        if b < 1024 or unit == "TiB":
            return f"{int(b)} Bytes" if unit == "Bytes" else f"{b:.1f} {unit}"
        b /= 1024


def s3_ls_files(files, when, summary=True, total_bytes=None):
    """`aws s3 ls --human-readable --summarize` over (name, bytes)."""
    out = []
    t = when
    for name, b in files:
        t += datetime.timedelta(seconds=rng.randint(0, 3))
        out.append(f"{t:%Y-%m-%d %H:%M:%S} {human(b):>10} {name}")
    if summary:
        tb = total_bytes if total_bytes is not None else sum(b for _, b in files)
        out += ["", f"Total Objects: {len(files)}", f"   Total Size: {human(tb)}"]
    return "\n".join(out)


def ckpt_files(total_gib, shards=128):
    per = total_gib * 1024 ** 3 / shards
    files = [(f"__{i}_0.distcp", int(per * rng.uniform(0.995, 1.005))) for i in range(shards)]
    files += [(".metadata", rng.randint(2_400_000, 3_900_000)), ("train_state.json", rng.randint(1800, 2600)),
              ("rng_states.pt", rng.randint(90000, 140000))]
    files.sort(key=lambda f: f[0])
    return files


GIT_SUBJECTS = ["data: bump stream retries to 3", "train: log grad norm every step", "cluster: exclusive nodes on slurm_hgx",
                "ckpt: async upload through s5cmd", "eval: pin harness to 0.14", "ci: cache pip wheels between jobs",
                "model: fused rmsnorm kernel", "optim: floor cosine at min_lr", "launch: export RUN_NAME before srun",
                "guard: abort after N non-finite steps", "exp: new ablation grid", "data: switch mix to v9 snapshot",
                "tracker: tag runs with git sha", "cluster: NCCL_IB_HCA for rails 0-7", "lint: yamllint in pre-commit",
                "train: compile off by default", "exp: resume path for long runs", "docs: restart runbook",
                "data: prefetch_factor 4", "ckpt: keep_last_n default 3", "train: bf16 reduce-scatter",
                "exp: drop tp for small models", "launch: pin torchrun rdzv port", "optim: fused AdamW default",
                "data: tokenizer cache on lustre", "chore: bump hydra-core to 1.3.2"]


def git_log(n, planted=None, planted_subject=None, planted_at=3, subjects=GIT_SUBJECTS, author=None):
    rows = []
    d = datetime.date(2026, 3, 4)
    for k in range(n):
        d -= datetime.timedelta(days=rng.choice([0, 0, 1, 1, 2, 3]))
        if planted and k == planted_at:
            rows.append(f"{planted} {d.isoformat()} {(author or rng.choice(AUTHORS)):<18} {planted_subject}")
        else:
            rows.append(f"{hexs(7)} {d.isoformat()} {rng.choice(AUTHORS):<18} {rng.choice(subjects)}")
    return "\n".join(rows)


def make_diff(path, lines, edits, ctx=3, new_file=False):
    """A unified diff of `edits` against `lines`; edits: (anchor text, lines removed, lines added)."""
    new = list(lines)
    for anchor, n, add in sorted(edits, key=lambda e: -next(k for k, l in enumerate(lines) if e[0] in l)):
        i = next(k for k, l in enumerate(lines) if anchor in l)
        new[i:i + n] = add
    diff = difflib.unified_diff(lines, new, f"a/{path}", f"b/{path}", n=ctx, lineterm="")
    return "\n".join(diff), new


def new_file_diff(path, lines):
    return "\n".join([f"--- /dev/null", f"+++ b/{path}", f"@@ -0,0 +1,{len(lines)} @@"] + ["+" + l for l in lines])


HOOKS = ["trim trailing whitespace", "fix end of files", "check yaml", "check for added large files", "ruff",
         "ruff-format", "yamllint", "hydra compose check", "mypy (train/)", "shellcheck"]
EXPERIMENTS = ["atlas_7b_r12", "atlas_7b_r13", "atlas_7b_r14", "kestrel_13b_sft_v1", "kestrel_13b_sft_v2",
               "heron_1b_r6", "osprey_350m_abl1", "osprey_350m_abl2", "osprey_350m_abl3", "kite_3b_code_r1",
               "kite_3b_code_r2", "plover_vit_l_r9", "wren_embed_v4", "gannet_moe_8x1b_r1", "tern_2b_dpo_r3",
               "skua_rm_7b_r2", "petrel_3b_r1", "auk_700m_abl7", "heron_1b_r5", "tern_2b_dpo_r2"]


def patch_result(path, diff, compose=True):
    plus = sum(1 for l in diff.split("\n") if l.startswith("+") and not l.startswith("+++"))
    minus = sum(1 for l in diff.split("\n") if l.startswith("-") and not l.startswith("---"))
    out = [f"Applied patch to {path}: {diff.count(chr(10) + '@@') + diff.startswith('@@')} hunk(s), +{plus} -{minus}",
           "", diff, "", "pre-commit run --files " + path]
    for h in HOOKS:
        out.append(h.ljust(72, ".") + rng.choice(["Passed", "Passed", "Passed", "(no files to check)Skipped"]))
    if compose:
        out += ["", "python -m tools.compose_all --group experiment"]
        for e in EXPERIMENTS:
            out.append(f"  composed experiment={e:<22} ok  ({rng.randint(180, 240)} keys, {rng.randint(40, 900)} ms)")
        out.append(f"{len(EXPERIMENTS)} configs composed, 0 errors")
    return "\n".join(out)


# ---------------------------------------------------------------------------
# Datasets.

DATA_TEMPLATE = """# Streaming loader over a tokenized shard snapshot (wds-v2).
# The dataset's name is the config's own name (hydra:runtime.choices.data).
name: ${{hydra:runtime.choices.data}}
root: s3://corvane-datasets/${{data.name}}/snap-{snap}/
manifest: manifest.json
format: wds-v2
tokenizer: cv-bpe-64k
seq_len: ${{trainer.seq_len}}
pack_sequences: true
num_workers: {nw}
prefetch_factor: {pf}
persistent_workers: true
pin_memory: true
shuffle:
  shard_seed: ${{run.seed}}
  buffer_docs: {buf}
  reshuffle_each_epoch: true
on_missing_shard: {missing}   # skip | fail | wait
retries: {retries}
s3:
  endpoint: https://objects.corvane.internal
  max_pool_connections: {pool}
  read_timeout_s: 60
  addressing_style: path
filters:
  min_doc_tokens: {mindoc}
  max_doc_tokens: {maxdoc}
  drop_langs: []
cache:
  local_dir: /local_nvme/shards
  max_gb: 800
  evict: lru
validation:
  split: holdout
  max_batches: 200
  shards: [0, 1, 2, 3]
mix:
{mix}
"""


def data_config(**over):
    srcs = rng.sample(["cc-2025-51", "cc-2025-47", "wiki-2026-02", "books-pd-v3", "forums-v4", "papers-v6",
                       "code-docs-v2", "news-2025h2", "patents-v3", "qa-sites-v5"], 5)
    w = [rng.uniform(0.5, 3) for _ in srcs]
    v = dict(snap=rng.choice(["20260215", "20260222", "20260301"]), nw=nz("num_workers"), pf=rng.choice([2, 4, 8]),
             buf=rng.choice([10000, 50000, 100000]), missing=rng.choice(["fail", "wait", "fail"]),
             retries=rng.choice([3, 5]), pool=rng.choice([32, 64, 128]), mindoc=rng.choice([16, 32, 64]),
             maxdoc=rng.choice([65536, 131072]),
             mix="\n".join(f"  - source: {s}\n    weight: {x / sum(w):.3f}" for s, x in zip(srcs, w)))
    v.update(over)
    return DATA_TEMPLATE.format(**v)


SNAP_SHARDS = 2048
_present_objects = int(P["D1"].split(": ")[1])
_missing_n = SNAP_SHARDS + 2 - _present_objects
_m1 = rng.randint(1100, 1500)
_m1n = rng.randint(_missing_n // 3, 2 * _missing_n // 3)
_m2 = 1800 + rng.randint(0, 100)
MISSING_SHARDS = list(range(_m1, _m1 + _m1n)) + list(range(_m2, _m2 + _missing_n - _m1n))
SHARD_BYTES = {i: int(rng.uniform(205, 231) * 1024 * 1024) for i in range(SNAP_SHARDS)}


def shard_listing(n_tail, missing, when, total_objects=None):
    files = [("manifest.json", rng.randint(900000, 990000)), ("stats.json", rng.randint(40000, 60000))]
    files += [(f"shard-{i:05d}.tar", SHARD_BYTES[i]) for i in range(SNAP_SHARDS) if i not in missing]
    files.sort()
    total = sum(b for _, b in files)
    lines = s3_ls_files(files, when, summary=False).split("\n")[-n_tail:]
    return "\n".join(lines + ["", f"Total Objects: {len(files)}", f"   Total Size: {human(total)}"])


def manifest_json(total_tokens_line, n_shards_shown):
    shards = [{"name": f"shard-{i:05d}.tar", "bytes": SHARD_BYTES[i], "documents": rng.randint(40000, 56000),
               "tokens": rng.randint(185_000_000, 195_000_000), "sha256": hexs(64)} for i in range(n_shards_shown)]
    head = {"format": "wds-v2", "snapshot": "2026-03-01", "tokenizer": "cv-bpe-64k", "num_shards": SNAP_SHARDS,
            "total_documents": rng.randint(95_000_000, 105_000_000), "TOTAL_TOKENS": 0,
            "shard_naming": "shard-{index:05d}.tar",
            "dedup": {"method": "minhash-lsh", "threshold": 0.8, "removed_documents": rng.randint(8_000_000, 12_000_000)},
            "sources": [{"name": s, "documents": rng.randint(4_000_000, 40_000_000),
                         "tokens": rng.randint(20_000_000_000, 150_000_000_000)}
                        for s in ["cc-2025-51", "cc-2025-47", "wiki-2026-02", "forums-v4", "papers-v6", "news-2025h2"]],
            "created_by": "snapshot-builder 2.4.1", "created_at": "2026-03-01T21:12:09Z", "shards": shards}
    text = json.dumps(head, indent=2)
    return text.replace('"TOTAL_TOKENS": 0', total_tokens_line)


def verify_snapshot(missing, expected=SNAP_SHARDS):
    keys = expected + 2 - len(missing)
    out = [f"reading manifest ({expected} shards declared)", "listing prefix (paginated, 1000 keys per page) ..."]
    out += [f"  page {k + 1}: {min(1000, keys - 1000 * k)} keys" for k in range((keys + 999) // 1000)] + [""]
    if not missing:
        out += [f"OK: all {expected} shards present, sizes match manifest", ""]
    else:
        out.append("MISSING (declared in manifest, absent from prefix):")
        for i in missing:
            out.append(f"  shard-{i:05d}.tar  expected {SHARD_BYTES[i]} bytes")
        out.append("")
        runs, s, p = [], missing[0], missing[0]
        for x in missing[1:] + [None]:
            if x is not None and x == p + 1:
                p = x
                continue
            runs.append(f"{s:05d}-{p:05d}")
            if x is not None:
                s = p = x
        out.append("missing ranges: " + ", ".join(runs))
    out += [f"size mismatches: 0", f"unexpected keys: 0", f"checked sha256 of {rng.randint(60, 80)} sampled shards: ok",
            "exit status: " + ("0" if not missing else "2")]
    return "\n".join(out)


def sync_job_log(n):
    """The tail of the sync job's log: throttled, gives up on the missing shards, hits its deadline at 00:20."""
    end = datetime.datetime(2026, 3, 2, 0, 20, 5)
    t = end - datetime.timedelta(seconds=25 * n)
    done = SNAP_SHARDS - len(MISSING_SHARDS) - rng.randint(60, 90)
    gave_up = sorted(rng.sample(MISSING_SHARDS, len(MISSING_SHARDS) // 3))
    out = []
    body = n - 3
    for k in range(body):
        t += datetime.timedelta(seconds=rng.randint(8, 40))
        r = rng.random()
        if gave_up and r < 0.3:
            out.append(f"{iso(t)} ERROR  shard-{gave_up.pop(0):05d}.tar: giving up after 5 retries (SlowDown), "
                       f"will not be retried this run")
        elif r < 0.65:
            out.append(f"{iso(t)} WARN   shard-{rng.choice(MISSING_SHARDS + list(range(1900, 2048))):05d}.tar: 503 "
                       f"SlowDown from source, retry {rng.randint(1, 5)}/5 in {rng.choice([2, 4, 8, 16, 32])}s")
        else:
            done = min(SNAP_SHARDS - len(MISSING_SHARDS), done + rng.randint(0, 4))
            out.append(f"{iso(t)} INFO   progress {done}/{SNAP_SHARDS} shards, {rng.uniform(20, 90):.1f} MiB/s, "
                       f"{rng.randint(2, 12)} workers busy, {rng.randint(20, 60)} throttled")
    out += [f"{iso(end)} ERROR  job deadline exceeded (activeDeadlineSeconds=10800), {rng.randint(20, 40)} transfers in "
            f"flight cancelled",
            f"{iso(end + datetime.timedelta(seconds=2))} INFO   copying manifest.json and stats.json "
            f"(copy_manifest_on_exit=true)",
            f"{iso(end + datetime.timedelta(seconds=4))} INFO   exiting with status 1"]
    return "\n".join(out)


# ---------------------------------------------------------------------------
# Evals and the registry.

SUBSETS = ["contracts", "manuals", "forms", "tables", "emails", "policies"]


def eval_json(em_line=None, em=None, verbose=0.0, when=None):
    em = em if em is not None else rng.uniform(0.66, 0.72)
    subsets = {s: {"n": 400, "exact_match": round(em + rng.uniform(-0.07, 0.07), 4),
                   "f1": round(em + 0.08 + rng.uniform(-0.05, 0.05), 4)} for s in SUBSETS}
    d = {"suite": "docqa", "suite_version": "3.2.0", "split": "test", "n_examples": 2400,
         "checkpoint_sha256": hexs(64), "template_sha": hexs(12),
         "generation": {"temperature": 0.0, "top_p": 1.0, "seed": 0},
         "metrics": {"exact_match": "EM", "f1": round(em + 0.08, 4), "rougeL": round(em + 0.05, 4),
                     "refusal_rate": round(0.004 + verbose * 0.03, 4),
                     "avg_output_tokens": round(14 + verbose * 40 + rng.uniform(-2, 2), 1),
                     "truncated_rate": round(verbose * 0.01, 4)},
         "by_subset": subsets,
         "bootstrap_ci95": {"exact_match": [round(em - 0.018, 4), round(em + 0.018, 4)],
                            "f1": [round(em + 0.065, 4), round(em + 0.095, 4)]},
         "by_answer_length": {b: {"n": rng.randint(300, 700), "exact_match": round(em + rng.uniform(-0.08, 0.06), 4),
                                  "avg_output_tokens": round(o * (1 + 3 * verbose) + rng.uniform(-1, 1), 1)}
                              for b, o in [("1-3 tokens", 6.0), ("4-8 tokens", 11.0), ("9-16 tokens", 19.0),
                                           ("17+ tokens", 31.0)]},
         "latency": {"p50_ms": rng.randint(180, 260) * (1 + int(verbose)), "p99_ms": rng.randint(700, 1100) * (1 + int(verbose)),
                     "tokens_per_second": round(rng.uniform(2400, 3100), 1)},
         "harness_version": "0.14.2", "backend": "vllm 0.6.3",
         "started_at": iso(when or clock(rng.randint(0, 6), rng.randint(0, 59))), "wall_seconds": rng.randint(180, 420),
         "hardware": f"8x A100 80GB ({rng.choice(EVAL_NODES)})"}
    text = json.dumps(d, indent=2)
    return text.replace('"exact_match": "EM"', em_line or f'"exact_match": {em:.4f}')


EVAL_CFG = """# docqa: extractive answers over business documents, scored by exact match and token F1.
suite: docqa
suite_version: 3.2.0
split: test
model:
  registry_ref: ${{oc.env:MODEL_REF}}
  dtype: bfloat16
  template: ${{model.dir}}/chat_template.jinja
  tensor_parallel: 1
generation:
  temperature: 0.0
  top_p: 1.0
  {gen}
  stop: ["</s>", "\\n\\nQuestion:"]
  seed: 0
prompt:
  num_fewshot: {shots}
  fewshot_split: dev
  system: null
  format: "Document:\\n{{document}}\\n\\nQuestion: {{question}}\\nAnswer:"
scoring:
  normalize: [lower, strip_punct, strip_articles, collapse_ws]
  metrics: [exact_match, f1, rougeL, refusal_rate]
  bootstrap: 1000
runtime:
  batch_size: {bs}
  max_model_len: 8192
  backend: vllm
  gpu_memory_utilization: 0.85
report:
  upload: s3://corvane-evals/results/${{oc.env:MODEL_REF}}/
  gate:
    exact_match:
      baseline: previous_rc
      min_delta: -0.01
    refusal_rate:
      max: 0.02
logging:
  save_predictions: true
  predictions_sample: 200
  tracker_project: evals
  tags: [docqa, release-gate]
"""

TEMPLATE_RC2 = """{%- for message in messages -%}
{%- if message['role'] == 'system' -%}
<|system|>
{{ message['content'] | trim }}
{%- elif message['role'] == 'user' -%}
<|user|>
{{ message['content'] | trim }}
{%- elif message['role'] == 'assistant' -%}
<|assistant|>
{{ message['content'] | trim }}{{ eos_token }}
{%- endif %}
{% endfor -%}
{%- if add_generation_prompt -%}
<|assistant|>
{% endif -%}"""


def template_diff():
    old = TEMPLATE_RC2.split("\n")
    diff, _ = make_diff("models/marlin/chat_template.jinja", old, [
        ("{%- for message in messages -%}", 1, [
            "{%- if messages[0]['role'] != 'system' -%}",
            "<|system|>",
            "You are a careful assistant. Answer thoroughly, explain your reasoning, and say when a document does not",
            "contain enough information to answer.",
            "{% endif -%}",
            "{%- for message in messages -%}"]),
    ])
    return diff


def eval_run_log(n, em, model_ref):
    out = [f"[evals] suite=docqa v3.2.0 split=test n=2400 backend=vllm tp=1 template={model_ref}",
           "INFO 03-04 11:02:11 config.py:1021] Defaulting to use mp for distributed inference",
           f"INFO 03-04 11:02:11 llm_engine.py:237] Initializing an LLM engine (v0.6.3) with config: "
           f"model='/models/cache/{hexs(12)}', dtype=torch.bfloat16, max_seq_len=8192, "
           "tensor_parallel_size=1, enforce_eager=False, kv_cache_dtype=auto, seed=0",
           "INFO 03-04 11:02:19 model_runner.py:1056] Loading model weights took 2.6021 GB",
           f"INFO 03-04 11:02:24 gpu_executor.py:122] # GPU blocks: {rng.randint(24000, 29000)}, # CPU blocks: 2048",
           "INFO 03-04 11:02:31 model_runner.py:1402] Graph capturing finished in 6 secs."]
    done = 0
    for k in range(n):
        done = min(2399, done + rng.randint(20, 90))
        pct = done * 100 // 2400
        bar = "#" * (pct // 10) + "." * (10 - pct // 10)
        rate = rng.uniform(11.5, 13.0)
        el, left = int(done / rate), int((2400 - done) / rate)
        out.append(f"Processed prompts: {pct:3d}%|{bar}| {done}/2400 [{el // 60:02d}:{el % 60:02d}<"
                   f"{left // 60:02d}:{left % 60:02d}, {rate:.2f}it/s, "
                   f"est. speed input: {rng.uniform(9000, 14000):.2f} toks/s, output: {rng.uniform(180, 420):.2f} toks/s]")
    out += ["Processed prompts: 100%|##########| 2400/2400 [03:12<00:00, 12.47it/s]", "[evals] scoring 2400 predictions",
            f"[evals] wrote predictions to /scratch/evals/{hexs(8)}/predictions.jsonl",
            json.dumps({"metrics": {"exact_match": round(em, 4), "f1": round(em + 0.08, 4),
                                    "refusal_rate": round(rng.uniform(0.003, 0.006), 4),
                                    "avg_output_tokens": round(rng.uniform(12, 17), 1)},
                        "gate": {"exact_match": "pass", "refusal_rate": "pass"}}, indent=2)]
    return "\n".join(out)


def regctl_version(version, run_id, rc, stage="Staging"):
    lines = [f"version: {version}", f"stage: {stage}", "status: READY",
             f"artifact_uri: s3://corvane-models/registry/m-0047/v{version}/", f"source_run_id: {run_id}",
             f"source_checkpoint: step_{rng.randint(15, 22) * 500:06d}", "created_at: 2026-03-02T16:44:09Z",
             "created_by: svc-release", "description: release candidate build from the sft-v5 recipe",
             "runtime:", "  min_vllm: 0.6.1", "  dtype: bfloat16", "  recommended_gpu_memory_gib: 24",
             "  tensor_parallel: 1",
             "signature:", "  inputs: chat messages (role, content)", "  outputs: text", "  max_context: 8192",
             "files:"]
    for f, b in [("model.safetensors", rng.randint(2_600_000_000, 2_700_000_000)), ("config.json", rng.randint(700, 900)),
                 ("tokenizer.json", rng.randint(3_000_000, 3_200_000)), ("chat_template.jinja", rng.randint(600, 900)),
                 ("generation_config.json", rng.randint(150, 250))]:
        lines += [f"  - path: {f}", f"    bytes: {b}", f"    sha256: {hexs(64)}"]
    lines += ["tags:", "  eval_gate: pending", f'  rc: "{rc}"', '  base_model_version: "11"', "lineage:",
              f"  parent_version: {version - 1}", f"  dataset_refs: [sft-mix-v5@{hexs(8)}, prefs-v2@{hexs(8)}]",
              "metrics:", f"  train_loss_final: {rng.uniform(0.9, 1.2):.4f}", f"  val_loss_final: {rng.uniform(1.0, 1.3):.4f}",
              f"  tokens_seen: {rng.randint(2, 4)}.{rng.randint(10, 99)}e9", "deployments: []", "approvals: []"]
    return "\n".join(lines)


def regctl_list(n):
    rows = []
    notes = ["rc build", "hotfix tokenizer", "sft-v4 recipe", "sft-v5 recipe", "prefs-v2", "long-context ft", "", "",
             "distilled", "rollback of v{p}"]
    for v in range(n, 0, -1):
        st = "Staging" if v == n else ("Production" if v == n - 3 else rng.choice(["Archived", "Archived", "None"]))
        rows.append([v, st, "READY", f"2026-0{max(1, 3 - (n - v) // 5)}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:"
                     f"{rng.randint(0, 59):02d}Z", rng.choice(["svc-release", "mcourtenay", "hnakamura"]),
                     rng.choice(["", "1", "2", "3"]) if v > n - 5 else "", rng.choice(["pass", "pass", "fail", "n/a"]),
                     f"{rng.uniform(2.5, 2.7):.2f} GB", rng.choice(notes).format(p=v - 1)])
    return table(["VERSION", "STAGE", "STATUS", "CREATED", "CREATED_BY", "RC", "EVAL_GATE", "SIZE", "NOTES"], rows,
                 right=(0,))


# ---------------------------------------------------------------------------
# Serving.

CANARY_VALUES = """# Canary overrides, layered on values.yaml (Argo Rollouts, traffic split by weight).
replicaCount: 2
image:
  repository: registry.corvane.internal/serving/vllm-openai
  tag: v0.6.3-cv4
  pullPolicy: IfNotPresent
model:
  uri: s3://corvane-models/registry/m-0031/v9/
  revision: v9
  download_concurrency: 16
engine:
  {seqs}
  max_model_len: 16384
  tensor_parallel_size: 1
  block_size: 16
  swap_space_gib: 4
  enforce_eager: false
  kv_cache_dtype: auto
  gpu_memory_utilization: 0.82
  enable_chunked_prefill: false
  max_num_batched_tokens: 16384
  enable_prefix_caching: true
resources:
  limits:
    nvidia.com/gpu: 1
    memory: 48Gi
  requests:
    cpu: "6"
    memory: 40Gi
rollout:
  canary:
    steps:
      - setWeight: 5
      - pause: {{duration: 30m}}
      - setWeight: 25
      - pause: {{duration: 30m}}
      - setWeight: 50
      - pause: {{}}
    analysis:
      templates: [p99-latency, error-rate]
      startingStep: 1
env:
  - name: VLLM_LOGGING_LEVEL
    value: INFO
  - name: VLLM_ATTENTION_BACKEND
    value: FLASH_ATTN
"""

BASE_VALUES = """# Base values for this deployment; canary and stable both start from here.
replicaCount: 6
image:
  repository: registry.corvane.internal/serving/vllm-openai
  tag: v0.6.1-cv2
  pullPolicy: IfNotPresent
model:
  uri: s3://corvane-models/registry/m-0031/v8/
  revision: v8
  download_concurrency: 16
engine:
  {seqs}
  max_model_len: 8192
  tensor_parallel_size: 1
  block_size: 16
  swap_space_gib: 4
  enforce_eager: false
  kv_cache_dtype: auto
  gpu_memory_utilization: 0.90
  enable_chunked_prefill: true
  max_num_batched_tokens: 8192
  enable_prefix_caching: true
service:
  type: ClusterIP
  port: 8000
  metricsPort: 8000
probes:
  startup:
    path: /health
    failureThreshold: 60
    periodSeconds: 10
  readiness:
    path: /health
    periodSeconds: 5
  liveness:
    path: /health
    periodSeconds: 15
    failureThreshold: 4
autoscaling:
  enabled: true
  minReplicas: 4
  maxReplicas: 24
  metric: vllm:num_requests_waiting
  targetAverageValue: "8"
  scaleUpStabilizationSeconds: 0
  scaleUpPodsPerMinute: 4
  {down}
  scaleDownPercentPerMinute: 25
podDisruptionBudget:
  maxUnavailable: 1
nodeSelector:
  corvane.io/pool: inference-b
tolerations:
  - key: nvidia.com/gpu
    operator: Exists
    effect: NoSchedule
topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: topology.kubernetes.io/zone
    whenUnsatisfiable: ScheduleAnyway
resources:
  limits:
    nvidia.com/gpu: 1
    memory: 48Gi
  requests:
    cpu: "6"
    memory: 40Gi
"""


def kubectl_pods(prefix_kinds, ns_nodes, n_each=(2, 6)):
    rows = []
    for prefix, count in prefix_kinds:
        rs = hexs(10)[:9]
        for _ in range(count):
            st = rng.choices(["Running", "Running", "Running", "Pending", "CrashLoopBackOff"], [10, 10, 10, 1, 1])[0]
            rows.append([f"{prefix}-{rs}-{hexs(5)}", "1/1" if st == "Running" else "0/1", st,
                         rng.randint(0, 2) if st != "CrashLoopBackOff" else rng.randint(5, 30),
                         f"{rng.randint(1, 70)}m" if rng.random() < 0.5 else f"{rng.randint(1, 20)}h",
                         f"10.42.{rng.randint(0, 40)}.{rng.randint(2, 250)}", rng.choice(ns_nodes), "<none>", "<none>"])
    return table(["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED NODE", "READINESS GATES"], rows)


INFER_NODES = [f"ip-10-42-{a}-{b}.ec2.internal" for a, b in
               [(3, 17), (3, 201), (7, 44), (7, 90), (12, 9), (12, 133), (19, 61), (19, 240), (22, 35), (22, 118)]]


def promq(points, values, stats=True, step=5):
    t = clock(10, 40) - datetime.timedelta(minutes=step * (points + 1))
    out = [f"resolution {60 * step}s, {points} points, 1 series", "{}", f"{'TIME':<24}VALUE"]
    for v in values:
        t += datetime.timedelta(minutes=step)
        out.append(f"{iso(t):<24}{v:.4f}")
    if stats:
        out.append(f"stats: min={min(values):.3f} max={max(values):.3f} mean={sum(values) / len(values):.3f} "
                   f"last={values[-1]:.3f}")
    return "\n".join(out)


def latency_series(n, base, spikes=(), spike_max=None):
    vals = [base * rng.uniform(0.85, 1.2) for _ in range(n)]
    for i in spikes:
        vals[i] = base * rng.uniform(2.5, 5.5)
    if spike_max is not None:
        for i in spikes:
            vals[i] = spike_max * rng.uniform(0.55, 0.93)
        vals[spikes[len(spikes) // 2]] = spike_max
    return vals


def vllm_log(n, preempt_end=None, saturated=True):
    """vLLM OpenAI server log lines; preempt_end: the last cumulative preemption count printed."""
    t = clock(9, 2, 0)
    marks = []
    if preempt_end:
        marks = list(range(preempt_end - 50 * 6, preempt_end + 1, 50))
    out = []
    mi = 0
    for k in range(n):
        t += datetime.timedelta(seconds=rng.randint(1, 9))
        ts = t.strftime("%m-%d %H:%M:%S")
        r = rng.random()
        if marks and mi < len(marks) and k >= (mi + 1) * n // (len(marks) + 1):
            out.append(f"WARNING {ts} scheduler.py:1089] Sequence group cmpl-{hexs(32)} is preempted by "
                       f"PreemptionMode.RECOMPUTE mode because there is not enough KV cache space. This can affect the "
                       f"end-to-end performance. Increase gpu_memory_utilization or tensor_parallel_size to provide "
                       f"more KV cache memory. total_num_cumulative_preemption={marks[mi]}")
            mi += 1
        elif r < 0.3:
            out.append(f"INFO {ts} metrics.py:351] Avg prompt throughput: {rng.uniform(800, 4200):.1f} tokens/s, "
                       f"Avg generation throughput: {rng.uniform(150, 600):.1f} tokens/s, Running: "
                       f"{rng.randint(60, 96) if saturated else rng.randint(10, 40)} reqs, Swapped: 0 reqs, Pending: "
                       f"{rng.randint(8, 60) if saturated else rng.randint(0, 2)} reqs, GPU KV cache usage: "
                       f"{rng.uniform(96, 99.9) if saturated else rng.uniform(30, 70):.1f}%, CPU KV cache usage: 0.0%.")
        else:
            out.append(f"INFO:     10.42.{rng.randint(0, 40)}.{rng.randint(2, 250)}:{rng.randint(30000, 65000)} - "
                       f"\"POST /v1/chat/completions HTTP/1.1\" {rng.choice([200] * 30 + [429, 503] if saturated else [200])} "
                       f"{'OK' if True else ''}")
    return "\n".join(out)


def hpa_table():
    rows = []
    for s in SERVICES + ["summarizer-stable", "summarizer-canary"]:
        rows.append([s, f"Deployment/{s}" if "canary" not in s and "stable" not in s else f"Rollout/{s.rsplit('-', 1)[0]}",
                     f"{rng.randint(0, 14)}/8 (avg)", rng.choice([2, 3, 4]), rng.choice([12, 16, 24]),
                     rng.randint(2, 14), f"{rng.randint(3, 90)}d"])
    return table(["NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS", "AGE"], rows)


def rollout_status(weight, step, pods, paused=True):
    lines = ["Name:            summarizer", "Namespace:       serving",
             f"Status:          {'|| Paused' if paused else '>> Progressing'}",
             f"Message:         {'CanaryPauseStep' if paused else 'more replicas need to be updated'}",
             "Strategy:        Canary", f"  Step:          {step}/6", f"  SetWeight:     {weight}",
             f"  ActualWeight:  {weight}", "Images:          registry.corvane.internal/serving/vllm-openai:v0.6.1-cv2 (stable)",
             "                 registry.corvane.internal/serving/vllm-openai:v0.6.3-cv4 (canary)",
             "Replicas:", f"  Desired:       {len(pods)}", f"  Current:       {len(pods) + 2}", f"  Updated:       2",
             f"  Ready:         {len(pods) + 2}", f"  Available:     {len(pods) + 2}", "",
             "NAME                                   KIND        STATUS     AGE    INFO",
             "summarizer                             Rollout     Paused     41d",
             f"+--# revision:{rng.randint(30, 40)}"]
    for p in pods[:2]:
        lines.append(f"|  +--- summarizer-{hexs(9)}          ReplicaSet  Healthy    {rng.randint(5, 50)}m    canary")
        lines.append(f"|     +--- summarizer-{hexs(9)}-{hexs(5)}  Pod         Running    {rng.randint(5, 50)}m    ready:1/1")
    lines.append(f"+--# revision:{rng.randint(20, 29)}")
    lines.append(f"   +--- summarizer-{hexs(9)}          ReplicaSet  Healthy    {rng.randint(2, 9)}d     stable")
    for p in pods:
        lines.append(f"      +--- summarizer-{hexs(9)}-{hexs(5)}  Pod         Running    {rng.randint(2, 9)}d     ready:1/1")
    lines.append(f"   +--- summarizer-{hexs(9)}-{rng.randint(2, 9)}  AnalysisRun  Successful {rng.randint(2, 40)}m    "
                 f"(check) {rng.randint(1, 6)}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# Feature store.

FEATURE_NAMES = ["click_rate_7d", "sessions_28d", "dwell_p50_7d", "add_to_cart_7d", "purchases_28d", "active_days_28d",
                 "last_seen_hours", "notif_open_rate_14d", "search_count_7d", "share_count_28d", "scroll_p75_7d",
                 "return_visits_7d"]


def feature_view(ttl_line):
    lines = ["# Feature view. The view's name is this file's stem; the registry key is features/<stem>.",
             "entities: [user_id]", "owner: recs-platform", ttl_line, "online: true", "offline_store: warehouse",
             "source:", "  kind: batch", "  table: analytics.user_daily_activity", "  timestamp_field: activity_date",
             "  created_timestamp_field: loaded_at", "  delay_tolerance_minutes: 90", "materialization:",
             '  schedule: "15 */3 * * *"', "  lookback_hours: 6", "  engine: spark-k8s", "  executors: 8",
             "  write_batch_rows: 50000", "features:"]
    for f in FEATURE_NAMES:
        lines += [f"  - name: {f}", f"    dtype: {'int32' if 'count' in f or 'days' in f or 'sessions' in f or 'visits' in f or 'purchases' in f else 'float32'}",
                  f"    default: 0"]
    lines += ["tags:", "  tier: 1", "  consumers: [ranker-v7, notif-timing]"]
    return "\n".join(lines)


def materializations(n, newest_rows, stuck_day):
    rows = []
    t = clock(9, 15)
    for k in range(n):
        fin = t + datetime.timedelta(minutes=rng.randint(18, 34), seconds=rng.randint(0, 59))
        day = stuck_day if t >= datetime.datetime(2026, 3, 3, 6) else (t - datetime.timedelta(hours=30)).date()
        rows_w = newest_rows if k == 0 else str(rng.randint(9_000_000, 25_000_000))
        rows.append([f"mat-{hexs(6)}", iso(t), iso(fin), "SUCCEEDED", f"{day}T00:00:00Z", f"{day}T23:59:59Z", rows_w,
                     f"{rng.randint(4, 40)}s"])
        t -= datetime.timedelta(hours=3)
    return table(["RUN_ID", "STARTED", "FINISHED", "STATUS", "SRC_WINDOW_START", "SRC_WINDOW_END", "ROWS_WRITTEN",
                  "ONLINE_LAG"], rows, right=(6,))


def freshness_table():
    rows = []
    for f in FEATURE_NAMES:
        rows.append([f, "2026-03-02T23:59:59Z", f"{rng.randint(33, 35)}h{rng.randint(0, 59):02d}m",
                     f"{rng.randint(20, 40)}h", f"{rng.uniform(0.1, 2.5):.2f}%", rng.choice(["WARN", "WARN", "STALE"])])
    out = [table(["FEATURE", "MAX_EVENT_TS", "AGE", "TTL_LEFT", "NULL_RATE", "STATE"], rows), ""]
    out.append(table(["SHARD", "KEYS", "MEM_USED", "HIT_RATE", "P99_READ_MS"],
                     [[f"redis-online-{i}", rng.randint(4_000_000, 6_000_000), f"{rng.uniform(9, 14):.1f}G",
                       f"{rng.uniform(97, 99.8):.2f}%", f"{rng.uniform(1.1, 3.9):.2f}"] for i in range(6)], right=(1,)))
    out += ["", "recent writes (last 6 materializations):"]
    for k in range(6):
        out.append(f"  {iso(clock(9, 41) - datetime.timedelta(hours=3 * k))}  source_day=2026-03-02  keys_touched="
                   f"{rng.randint(4_000_000, 6_000_000)}  ttl_reset=yes")
    return "\n".join(out)


# ---------------------------------------------------------------------------
# Costs.

def money(x):
    return f"{x:,.2f}"


def kubecost(total_text, controllers, idle=True):
    target = float(total_text.replace(",", "")) if total_text else rng.uniform(20000, 90000)
    rows = []
    for c in controllers:
        gpu = rng.uniform(300, 2400)
        cpu, ram, pv, net = gpu * rng.uniform(0.01, 0.03), gpu * rng.uniform(0.004, 0.01), rng.uniform(0, 40), \
            rng.uniform(0, 3)
        shared = gpu * 0.014
        rows.append([c, cpu, ram, gpu, pv, net, shared, rng.uniform(8, 74)])
    others = sum(sum(r[1:7]) for r in rows)
    scale = target * rng.uniform(0.62, 0.74) / others
    for r in rows:
        for i in range(1, 7):
            r[i] = round(r[i] * scale, 2)
    rest = round(target - sum(sum(r[1:7]) for r in rows), 2)
    rows.append(["__idle__", 0.0, 0.0, rest, 0.0, 0.0, 0.0, 0.0])
    body = [[r[0]] + [money(x) for x in r[1:7]] + [f"{r[7]:.1f}%", money(sum(r[1:7]))] for r in rows]
    sums = [round(sum(r[i] for r in rows), 2) for i in range(1, 7)]
    body.append(["TOTAL"] + [money(x) for x in sums] + ["", total_text or money(target)])
    head = (f"window 2026-02-25T00:00:00Z/2026-03-04T00:00:00Z  aggregate=controller  accumulate=true  currency=USD\n"
            f"source: kubecost {rng.choice(['2.3.2', '2.3.3'])} (prometheus + spot data feed)\n")
    return head + table(["CONTROLLER", "CPU", "RAM", "GPU", "PV", "NETWORK", "SHARED", "EFFICIENCY", "TOTAL"], body,
                        right=(1, 2, 3, 4, 5, 6, 7, 8))


def ce_json(feb_line):
    months = [("2025-10-01", "2025-11-01"), ("2025-11-01", "2025-12-01"), ("2025-12-01", "2026-01-01"),
              ("2026-01-01", "2026-02-01"), ("2026-02-01", "2026-03-01"), ("2026-03-01", "2026-03-04")]
    res = []
    for s, e in months:
        amt = f"{rng.uniform(6000, 12000):.4f}" if s != "2026-03-01" else f"{rng.uniform(1500, 2600):.4f}"
        res.append({"TimePeriod": {"Start": s, "End": e},
                    "Total": {"UnblendedCost": {"Amount": "FEB" if s == "2026-02-01" else amt, "Unit": "USD"},
                              "UsageQuantity": {"Amount": f"{rng.uniform(2e6, 9e6):.4f}", "Unit": "N/A"}},
                    "Groups": [], "Estimated": s == "2026-03-01"})
    text = json.dumps({"GroupDefinitions": [], "ResultsByTime": res, "DimensionValueAttributes": []}, indent=4)
    return text.replace('"Amount": "FEB"', feb_line)


TF_REFRESH = ([f'module.pool.aws_iam_role_policy_attachment.node["{p}"]' for p in
               ["AmazonEKSWorkerNodePolicy", "AmazonEC2ContainerRegistryReadOnly", "AmazonSSMManagedInstanceCore",
                "AmazonEKS_CNI_Policy", "CloudWatchAgentServerPolicy"]] +
              [f'module.pool.aws_autoscaling_schedule.night["{p}"]' for p in ["scale-down-2200", "scale-up-0600",
                                                                                "weekend-floor"]] +
              [f"module.pool.aws_cloudwatch_metric_alarm.gpu_util[0]", "module.pool.aws_cloudwatch_metric_alarm.nodes_max[0]",
               "module.pool.aws_iam_role.node", "module.pool.aws_iam_instance_profile.node",
               "module.pool.aws_security_group.node", "module.pool.aws_security_group_rule.ingress_self",
               "module.pool.aws_security_group_rule.ingress_cluster", "module.pool.aws_security_group_rule.egress_all",
               "module.pool.kubernetes_labels.pool", "module.pool.kubernetes_config_map.capacity_plan",
               "module.pool.helm_release.dcgm_exporter", "module.pool.helm_release.node_problem_detector",
               "module.pool.aws_sns_topic_subscription.pager", "module.pool.aws_launch_template.warm_pool"])


def tf_plan(change_line, refresh_n=len(TF_REFRESH)):
    out = ["module.pool.data.aws_ssm_parameter.ami: Reading...",
           "module.pool.data.aws_ssm_parameter.ami: Read complete after 0s "
           "[id=/aws/service/eks/optimized-ami/1.30/amazon-linux-2-gpu/recommended/image_id]",
           f"module.pool.aws_launch_template.this: Refreshing state... [id=lt-0{hexs(16)}]",
           "module.pool.aws_eks_node_group.this: Refreshing state... [id=cv-prod-eks:pool-b-g6]"]
    for r in TF_REFRESH[:refresh_n]:
        out.append(f"{r}: Refreshing state... [id={rng.choice(['pool-b-g6-', 'sgr-0', 'arn:aws:sns:us-east-1:4412:', 'cv-'])}"
                   f"{hexs(12)}]")
    out += ["", "Terraform used the selected providers to generate the following execution plan. Resource actions are",
            "indicated with the following symbols:", "  ~ update in-place", "",
            "Terraform will perform the following actions:", "",
            "  # module.pool.aws_eks_node_group.this will be updated in-place",
            '  ~ resource "aws_eks_node_group" "this" {',
            '        id                     = "cv-prod-eks:pool-b-g6"',
            '      ~ labels                 = {',
            '          ~ "corvane.io/capacity-plan" = "2026q1" -> "2026q1-r2"',
            '            # (3 unchanged elements hidden)',
            '        }',
            '        tags                   = {',
            '            "cost-center" = "inference"',
            '            "team"        = "ml-platform"',
            '        }',
            '        # (16 unchanged attributes hidden)',
            "",
            "      ~ scaling_config {",
            "          " + change_line,
            "            # (2 unchanged attributes hidden)",
            "        }",
            "",
            "        # (3 unchanged blocks hidden)",
            "    }",
            "",
            "  # module.pool.aws_cloudwatch_metric_alarm.gpu_util[0] will be updated in-place",
            '  ~ resource "aws_cloudwatch_metric_alarm" "gpu_util" {',
            f'      ~ evaluation_periods        = {rng.choice([3, 5])} -> {rng.choice([6, 10])}',
            '        id                        = "pool-b-g6-gpu-util-low"',
            '        # (18 unchanged attributes hidden)',
            "    }",
            "",
            "Plan: 0 to add, 2 to change, 0 to destroy.",
            "",
            "-------------------------------------------------------------------------------",
            "",
            "Saved the plan to: plan.tfplan", "",
            'To perform exactly these actions, run the following command to apply:',
            '    terraform apply "plan.tfplan"']
    return "\n".join(out)


# ---------------------------------------------------------------------------
# Images and CI.

TRAIN_DOCKERFILE = """# syntax=docker/dockerfile:1.7
ARG BASE_IMAGE=nvcr.io/nvidia/pytorch:24.05-py3
FROM ${{BASE_IMAGE}} AS base

ARG {nccl}
ARG CUDA_SHORT=12.4
ENV DEBIAN_FRONTEND=noninteractive \\
    PIP_NO_CACHE_DIR=1 \\
    PYTHONUNBUFFERED=1 \\
    NCCL_DEBUG=WARN \\
    TORCH_NCCL_ASYNC_ERROR_HANDLING=1

# NCCL is pinned explicitly: the base image's build lags the fabric firmware.
RUN apt-get update && apt-get install -y --no-install-recommends --allow-change-held-packages \\
      libnccl2=${{NCCL_VERSION}}+cuda${{CUDA_SHORT}} libnccl-dev=${{NCCL_VERSION}}+cuda${{CUDA_SHORT}} \\
      ibverbs-utils rdma-core infiniband-diags numactl pdsh htop tmux \\
 && rm -rf /var/lib/apt/lists/*

RUN curl -fsSL https://github.com/peak/s5cmd/releases/download/v2.2.2/s5cmd_2.2.2_Linux-64bit.tar.gz \\
      | tar -xz -C /usr/local/bin s5cmd

FROM base AS deps
WORKDIR /workspace
COPY pyproject.toml uv.lock ./
RUN pip install uv==0.4.18 && uv pip install --system --no-deps -r uv.lock

FROM deps AS app
COPY src/ /workspace/src/
COPY conf/ /workspace/conf/
COPY scripts/ /workspace/scripts/
RUN uv pip install --system --no-deps -e . \\
 && python -c "import torch, torch.distributed as d; print(torch.__version__, torch.cuda.nccl.version())"

ENV PYTHONPATH=/workspace/src
LABEL org.opencontainers.image.source="https://git.corvane.internal/ml/ml" \\
      org.opencontainers.image.description="pretraining and fine-tuning runtime"
ENTRYPOINT ["python", "-m", "train.launch"]
"""

SERVE_DOCKERFILE = """# syntax=docker/dockerfile:1.7
ARG BASE_IMAGE=vllm/vllm-openai:v0.6.3
FROM ${{BASE_IMAGE}}

ARG {nccl}
# vLLM wheels bring their own NCCL through nvidia-nccl-cu12; pin it to match the nodes' fabric manager.
RUN pip install --no-cache-dir nvidia-nccl-cu12==${{NCCL_VERSION%-*}} \\
 && pip install --no-cache-dir prometheus-fastapi-instrumentator==7.0.0 boto3==1.35.36

COPY serving/entrypoint.sh /entrypoint.sh
COPY serving/model_fetch.py /opt/serving/model_fetch.py
COPY serving/logging.json /opt/serving/logging.json
RUN chmod +x /entrypoint.sh \
 && python -c "import vllm, torch; print(vllm.__version__, torch.__version__, torch.cuda.nccl.version())"

ENV VLLM_LOGGING_LEVEL=INFO \\
    VLLM_WORKER_MULTIPROC_METHOD=spawn \\
    HF_HUB_OFFLINE=1

RUN useradd --uid 10001 --create-home serve \
 && mkdir -p /models /tmp/vllm \
 && chown -R serve:serve /models /tmp/vllm
USER serve

HEALTHCHECK --interval=15s --timeout=3s --start-period=120s CMD curl -fsS localhost:8000/health || exit 1
EXPOSE 8000
LABEL org.opencontainers.image.source="https://git.corvane.internal/ml/ml" \
      org.opencontainers.image.description="vLLM OpenAI-compatible server with model fetch from the registry"
ENTRYPOINT ["/entrypoint.sh"]
"""

TEST_FILES = {"evals": ["tests/test_scoring.py", "tests/test_normalize.py", "tests/test_bootstrap.py",
                        "tests/test_templates.py", "tests/test_fewshot.py", "tests/test_gate.py",
                        "tests/test_report.py", "tests/test_vllm_backend.py", "tests/test_suites_docqa.py",
                        "tests/test_suites_codegen.py", "tests/test_suites_safety.py", "tests/test_cli.py"],
              "train": ["tests/config/test_compose.py", "tests/config/test_experiments.py", "tests/test_optim.py",
                        "tests/test_guard.py", "tests/test_lr_schedule.py", "tests/test_ckpt_io.py",
                        "tests/test_data_stream.py", "tests/test_launch.py", "tests/test_packing.py"]}


def pytest_log(kind, time_text, failed=(), stamp_prefix=True, skipped=9, warnings=14):
    files = TEST_FILES[kind]
    total = 0
    lines = ["============================= test session starts ==============================", ""]
    counts = []
    for f in files:
        c = rng.randint(18, 90)
        counts.append((f, c))
        total += c
    lines.insert(1, f"collected {total} items")
    done = 0
    for f, c in counts:
        done += c
        dots = "".join("F" if (f, k) in failed else ("s" if rng.random() < 0.01 else ".") for k in range(c))
        lines.append(f"{f} {dots}".ljust(74) + f"[{done * 100 // total:3d}%]")
    nf = len(failed)
    if nf:
        lines += ["", "=================================== FAILURES ==================================="]
        for f, k in failed:
            lines += [f"_________________ test_case_{k}[seed=0] _________________", "",
                      "    def test_case(seed):", "        a = run(seed)", "        b = run(seed)",
                      ">       assert a == b", f"E       AssertionError: assert {rng.uniform(0.6, 0.7):.4f} == "
                      f"{rng.uniform(0.6, 0.7):.4f}", "", f"{f}:{rng.randint(20, 200)}: AssertionError"]
        lines += ["=========================== short test summary info ============================"]
        lines += [f"FAILED {f}::test_case_{k}[seed=0] - AssertionError" for f, k in failed]
    lines += ["", "=============================== warnings summary ==============================="]
    for w in rng.sample(["DeprecationWarning: `torch.cuda.amp.autocast(args...)` is deprecated. Please use "
                         "`torch.amp.autocast('cuda', args...)` instead.",
                         "UserWarning: TypedStorage is deprecated. It will be removed in the future.",
                         "PytestUnraisableExceptionWarning: Exception ignored in: <function _after_fork at 0x7f>",
                         "FutureWarning: `resume_download` is deprecated and will be removed in version 1.0.0.",
                         "ResourceWarning: unclosed <socket.socket fd=17, family=2, type=1, proto=6>"], 3):
        f = rng.choice(files)
        lines += [f"{f}::test_{rng.choice(['roundtrip', 'defaults', 'compose', 'schedule', 'render'])}", f"  {w}", ""]
    lines.append("-- Docs: https://docs.pytest.org/en/stable/how-to/capture-warnings.html")
    summary = (f"{nf} failed, " if nf else "") + f"{total - nf - skipped} passed, {skipped} skipped, " \
              f"{warnings} warnings {time_text}"
    lines.append(f"{'=' * 8} {summary} {'=' * 8}")
    if stamp_prefix:
        t = clock(10, 38, 2)
        out = []
        for l in lines:
            t += datetime.timedelta(microseconds=rng.randint(800, 2_500_000))
            out.append(f"{t:%Y-%m-%dT%H:%M:%S}.{t.microsecond:06d}{rng.randint(0, 9)}Z {l}")
        return "\n".join(out)
    return "\n".join(lines)


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
    table_ = P if source == "tool" else M
    for label, text in table_.items():
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


# Sentences an answer may open or close with, and the follow-ups it may list, by the topics they fit.
FILLER = [
    ({"atlas", "restart"}, "I would keep the restart and the root-cause fix in separate changes, so either can be "
                           "reverted without the other."),
    ({"atlas", "restart"}, "The tracker keeps every run's metrics, so nothing we do to the restarted run loses the "
                           "history of the failed one."),
    ({"any"}, "Whatever we decide, it is worth writing the reasoning into the ticket now; the postmortem is much "
              "easier with it."),
    ({"serving", "rollout"}, "A quiet hour on the canary is not proof; the spikes came with the busier hours, so I "
                             "would watch through the afternoon."),
    ({"node"}, "Slurm only schedules onto a node once it is back in service, so a drained node is safe to leave as it "
               "is."),
    ({"atlas", "restart"}, "Most experiment configs share the optimizer group, so a pattern we fix for one run is "
                           "worth checking in the others."),
    ({"atlas", "dataset"}, "I would rather a run stops loudly than trains for a day on data it should not be seeing."),
    ({"eval", "image"}, "The eval gate compares against the previous candidate, so a change in how we prompt shows up "
                        "as a model change."),
    ({"atlas", "restart", "dataset"}, "Every config change goes through the compose check in CI, which catches a "
                                      "broken interpolation before Slurm does."),
    ({"atlas", "costs"}, "Object storage is cheap next to GPU hours; keeping an extra checkpoint around is almost "
                         "always the right trade."),
    ({"eval"}, "The registry keeps lineage for every version, so the release notes can point at the exact run and "
               "data behind it."),
    ({"serving", "rollout"}, "Autoscaling reacts to queue depth, so it cannot fix a replica that is slow for reasons "
                             "of its own."),
    ({"costs"}, "The node pools are Terraform, so any capacity change goes through a plan and a review like any other "
                "diff."),
    ({"any"}, "It helps to keep the before and after outputs side by side in the ticket, so a reviewer can compare "
              "them."),
    ({"node"}, "Hardware faults tend to come back after a reset; I would treat a GPU that has thrown these errors as "
               "suspect until replaced."),
    ({"features"}, "Feature staleness is silent by design: the store serves the last value it has until the TTL runs "
                   "out."),
    ({"node", "image"}, "NCCL errors usually name the peer that went away, which is why it pays to read the first "
                        "warning rather than the last."),
    ({"features"}, "Feature views are cheap to backfill once the source is right; the hard part is noticing that the "
                   "source stopped."),
    ({"dataset"}, "A shard-level verify is cheap next to a run that trains on a partial snapshot."),
    ({"costs"}, "Cost tools and the invoice rarely agree day by day; weekly totals are the fair comparison."),
    ({"image"}, "Image pins are worth keeping explicit; a silent bump in a base image is hard to bisect later."),
    ({"serving", "rollout"}, "A canary's value is that it fails small; a rollback at five percent costs almost "
                             "nothing."),
]
NEXT = [
    ({"any"}, "add the outputs to the ticket"),
    ({"atlas", "restart", "image", "costs"}, "ask for a review in #ml-platform"),
    ({"atlas", "restart"}, "watch the restarted run for an hour"),
    ({"node", "dataset"}, "update the runbook"),
    ({"atlas", "restart", "costs"}, "tell the research channel"),
    ({"atlas", "restart", "eval"}, "add a regression test for the config"),
    ({"serving", "rollout"}, "check the canary dashboard after lunch"),
    ({"eval", "image", "serving"}, "note the change in the changelog"),
    ({"eval"}, "re-run the eval after the template fix"),
    ({"node"}, "ping Yusra before anything touches the nodes"),
    ({"features"}, "tell the recs team"),
    ({"dataset"}, "verify the snapshot after the resync"),
    ({"costs"}, "send the figures to finance"),
    ({"features", "dataset"}, "ask the upstream owners for an alert"),
]


def fitting(pool):
    return [text for tags, text in pool if "any" in tags or topic in tags]


def A(body, pad=True):
    parts = []
    fillers = fitting(FILLER)
    pre = rng.randint(1, 2) if pad and rng.random() < 0.4 else 0
    post = rng.randint(0, 2) if pad else 0
    pre, post = min(pre, len(fillers)), min(post, max(0, len(fillers) - pre))
    drawn = rng.sample(fillers, pre + post)
    if pre:
        parts.append(" ".join(drawn[:pre]))
    parts.append(body)
    if pad and post:
        parts.append(" ".join(drawn[pre:]))
    nexts = fitting(NEXT)
    if pad and rng.random() < 0.35 and len(nexts) >= 2:
        parts.append("Next:\n" + "\n".join(f"- {x}" for x in rng.sample(nexts, min(len(nexts), rng.randint(2, 3)))))
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


def read(path, text, expect=(), numbered_=True):
    FILES[path] = text.rstrip("\n").split("\n")
    tool("read_file", {"path": path}, numbered(FILES[path]) if numbered_ else text, expect)


def sh(cmd, output, expect=()):
    tool("bash", {"cmd": cmd}, output, expect)


def git(cmd, output, expect=()):
    tool("git", {"cmd": cmd}, output, expect)


def patch(path, diff, compose=True):
    tool("apply_patch", {"path": path, "patch": diff}, patch_result(path, diff, compose))


# ---------------------------------------------------------------------------
# Recall questions: each asks about planted values in the user's own words,
# at its turn or as soon after as the day allows (never two questions in a
# row, never fewer than MIN_GAP turns after the fact). `what` is how the
# assistant's vague answer refers to the output; `kind` picks its wording.

QUESTIONS = [
    # tuning
    ("tune", ["A1"], 60, "config",
     "Dariusz is wondering whether atlas r14 warmed up too fast for its batch size. How many warmup steps did that "
     "run's experiment yaml give it?", "the r14 experiment config"),
    ("tune", ["A3"], 66, "tracker",
     "For the postmortem chart: how high did the atlas run's gradient norm spike right before the NaNs? The per-step "
     "number from the tracker, not the every-10-steps log.", "the tracker's per-step grad-norm history for r14"),
    ("tune", ["N1"], 72, "kernel",
     "The RMA form wants the error code. Which Xid did the flaky box log when its GPU dropped out, and at what PCI "
     "address?", "the kernel log we pulled from r3-14"),
    ("tune", ["K1"], 78, "config",
     "Prakash is redoing the batch math for kestrel's resubmit. What grad accum was its SFT config using when it died?",
     "kestrel's experiment config"),
    ("tune", ["N3"], 80, "nccl",
     "what avg bus bw did nccl-tests give us on r3-14 when we load-tested it? GB/s, exact please", "the all_reduce run "
     "on r3-14"),
    ("tune", ["D1"], 84, "listing",
     "How many files were actually sitting in the webdocs snapshot prefix for the 1st when we listed it this "
     "morning? Manifest and stats file included.", "the listing of the webdocs snapshot prefix"),
    ("tune", ["E1"], 88, "eval",
     "For Maelis's deck: what EM did marlin rc3 score on docqa? I need the exact figure from the results file, not "
     "a rounded one.", "rc3's docqa results file"),
    ("tune", ["E3"], 92, "commit",
     "What's the short hash of the commit that added the default system turn to marlin's chat template?",
     "the git log between the two release candidates"),
    ("tune", ["S2"], 96, "prom",
     "ticket needs it: what was the worst p99 the summarizer canary hit in that 6h Prometheus window, in secs?",
     "the canary's p99 query"),
    ("tune", ["S4"], 102, "config",
     "How long does the summarizer's autoscaler hold off before it scales pods down? minutes is fine",
     "the service's base values file"),
    ("tune", ["F1"], 106, "config",
     "quick one: how long do the engagement features live in the online store before they expire? in hours or days",
     "the feature view's definition"),
    ("tune", ["C1"], 110, "cost",
     "What did kubecost say the sweeps namespace cost us over the week, to the cent? Finance wants the exact number.",
     "the kubecost allocation for that namespace"),
    ("tune", ["I1"], 116, "docker",
     "which NCCL build is the training image pinned to? I want to compare it with what the vendor recommends",
     "the trainer image's Dockerfile"),
    ("tune", ["drain"], 70, "message",
     "Remind me when Yusra said she'd take r3-14 out of service? The time window, I mean.",
     "the message where you relayed Yusra's ack"),
    ("tune", ["vendor"], 98, "message",
     "who's the hardware support vendor for those HGX boxes again? I need the name for the RMA form",
     "your message about the support contract"),
    # held-out
    ("held", ["A2"], 58, "log",
     "At what step did the atlas run's loss first turn into NaN? Dariusz wants to line it up with the data order.",
     "the tail of r14's rank-0 log"),
    ("held", ["A5"], 62, "commit",
     "what's the short sha of the commit that quietly switched off grad clipping for atlas? linking it in the "
     "postmortem", "the git log of the config and the optimizer group"),
    ("held", ["A4"], 64, "listing",
     "How big was atlas's last good ckpt all told? I want to know how much the restart had to pull from S3.",
     "the listing of that checkpoint directory"),
    ("held", ["K2"], 68, "log",
     "How long had kestrel's allreduce been stuck when the NCCL watchdog finally killed it? In ms.",
     "kestrel's rank-0 log"),
    ("held", ["N2"], 74, "ecc",
     "How many memory errors that ECC couldn't fix had the bad GPU on r3-14 built up over its life? The lifetime "
     "count, not the one since the reset.", "the ECC report from r3-14"),
    ("held", ["deadline"], 76, "message",
     "When's the meeting that decides whether marlin ships? I've lost track of the time.",
     "what you told me this morning"),
    ("held", ["D2"], 86, "manifest",
     "How big is the webdocs snapshot in tokens, according to its manifest? The whole thing, not a shard.",
     "the snapshot's manifest"),
    ("held", ["D3"], 90, "config",
     "How many dataloader workers per rank does the webdocs data config spin up?", "the webdocs data config"),
    ("held", ["E2"], 94, "config",
     "What's the generation length cap in marlin's docqa eval config? Token count.", "the marlin docqa eval config"),
    ("held", ["E4"], 100, "registry",
     "Which tracker run produced the weights behind marlin v14 in the registry? Full run id please.",
     "the registry record for v14"),
    ("held", ["S1"], 104, "config",
     "What's the summarizer canary's cap on concurrent sequences per replica, according to its values?",
     "the canary's values file"),
    ("held", ["S3"], 108, "vllm",
     "By the end of that canary pod log, how many preemptions had the summarizer piled up in total?",
     "the canary pod's log"),
    ("held", ["F2"], 112, "table",
     "How many rows did the newest engagement materialization push to the online store?",
     "the materialization list for that view"),
    ("held", ["C2"], 118, "plan",
     "In the TF plan for the L4 inference pool, what ceiling was the node group going to get? Old and new, please.",
     "the plan for the L4 pool"),
    ("held", ["I2"], 120, "ci",
     "How long did the eval harness test job take on CI? Roughly in minutes is fine.",
     "the CI log of the harness tests"),
    ("held", ["C3"], 122, "cost",
     "What did Cost Explorer say the ckpt bucket cost us in February?",
     "the Cost Explorer query on the checkpoint bucket"),
]
OFF_TOPIC = [
    ("tune", 100, "Completely unrelated: my kettle is furred up with limescale. Vinegar or citric acid, and how long?",
     "Citric acid is the nicer option: a tablespoon of the powder in a kettle of water, bring it to the boil, leave "
     "it for twenty minutes to an hour, then empty it and rinse with two fresh boils. Vinegar works too (half and "
     "half with water) but the smell lingers and it needs more rinsing. Either way, never use it on an aluminium "
     "kettle for long."),
    ("held", 114, "Random one: how long should a steak rest after it comes off the grill?",
     "About five minutes for a thin steak and up to ten for a thick one, loosely covered so it does not steam. The "
     "rest lets the juices settle and the temperature even out; the centre keeps rising a few degrees while it "
     "rests, so take it off the heat a little before your target."),
]

ANSWERS = {
    "config": ["It is a key in {what}, as we read it earlier; nothing we merged today touched that line, so the value "
               "in that read is still the live one.",
               "That one comes straight from {what}. I would copy it from the read we did rather than from memory."],
    "tracker": ["It is in {what}, on the row just before the first NaN. I would quote it from that output as printed."],
    "kernel": ["Both are on the fatal line in {what}, the one that reports the GPU leaving the bus. Copy that line into "
               "the form as printed."],
    "nccl": ["It is the summary line at the bottom of {what}; put the neighbour's figure next to it to show the gap."],
    "listing": ["It is in the two summary lines at the bottom of {what}."],
    "vllm": ["It is on the last preemption warning in {what}; the counter in those warnings is cumulative, so the last "
             "one is the total."],
    "eval": ["It is in the metrics block of {what}; copy it exactly, the deck will be checked against the gate."],
    "commit": ["The short hash is on its line in {what}; I would link the commit from there, short hashes are easy to "
               "mistype."],
    "prom": ["It is in the stats line under {what}; the spike itself is the tallest row in the table above it."],
    "cost": ["It is the bottom line of {what}; I would hand finance that output rather than a retyped number."],
    "docker": ["It is one of the build arguments near the top of {what}."],
    "message": ["It was in {what}; scroll back to the start of the day and you will find it as it was said."],
    "log": ["It is near the end of {what}, on the line where the failure is first reported."],
    "ecc": ["It is in the aggregate block for the failing GPU in {what}; the volatile counters are lower, since the "
            "reset cleared them."],
    "manifest": ["It is near the top of {what}, among the snapshot-wide totals before the per-shard entries."],
    "registry": ["It is a field in {what}; copy it from there, the id is long enough to mistype."],
    "table": ["It is on the newest row of {what}, in the rows-written column."],
    "plan": ["It is the in-place change in {what}; the line with the arrow shows the old and the new value."],
    "ci": ["It is in the final summary line of {what}, after the pass and fail counts."],
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


for _order, (_which, _at, _text, _answer) in enumerate(OFF_TOPIC):
    pending.append([_at, 100 + _order, (_which, None, None, _text, _answer)])


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
# A few more output shapes used once or twice.

def train_state(step, world=128, workers=int(P["D3"].split(": ")[1])):
    cursors = [{"rank": r, "worker": w, "shard": f"shard-{rng.randint(0, 2047):05d}.tar", "sample": rng.randint(0, 50000)}
               for r, w in sorted(rng.sample([(r, w) for r in range(world) for w in range(workers)], 18))]
    d = {"step": step, "consumed_samples": step * 1024, "consumed_tokens": step * 1024 * 4096, "epoch": 0,
         "world_size": world, "saved_at": iso(clock(2, 40, 11)), "git_sha": hexs(40), "torch": "2.4.0+cu124",
         "scheduler": {"kind": "cosine", "last_step": step, "last_lr": round(lr_at(step, *ATLAS_OPT), 9)},
         "optimizer": {"kind": "AdamW", "fused": True, "state_dtype": "float32"},
         "data_state": {"shuffle_seed": 1337, "buffer_docs": 100000, "epoch_shards_done": rng.randint(1000, 1300),
                        "skipped_shards": rng.randint(0, 3), "cursors": cursors},
         "rng": {"python": hexs(16), "numpy": hexs(16), "torch_cpu": hexs(16), "torch_cuda": "per-rank, see rng_states.pt"},
         "guard": {"nonfinite_streak": 0, "skipped_updates_total": rng.randint(0, 2)}}
    return json.dumps(d, indent=2)


def slurmd_journal(job, node, n):
    pid = rng.randint(2214000, 2214600)
    fixed = [(clock(2, 10, 49), f"slurmstepd[{pid}]: error: *** STEP {job}.0 ON {node} CANCELLED AT 2026-03-04T02:10:49 ***"),
             (clock(2, 10, 49), f"slurmd[3311]: slurmd: debug:  _rpc_terminate_job: uid = 64030 JobId={job}"),
             (clock(2, 11, 9), f"slurmstepd[{pid}]: error: proctrack_p_wait: Unable to destroy container {pid} in cgroup "
                               f"plugin, giving up after 20 sec"),
             (clock(2, 11, 9), f"slurmstepd[{pid}]: error: Kill task failed: unkillable processes remain (pid 2214871 in "
                               f"D state, nvidia-uvm)"),
             (clock(2, 11, 9), f"slurmd[3311]: slurmd: error: Node {node} will be drained: Kill task failed"),
             (clock(2, 11, 10), f"slurmstepd[{pid}]: done with job")]
    out = []
    for _ in range(n - len(fixed)):
        t = clock(2, 9) + datetime.timedelta(seconds=rng.randint(0, 359))
        line = rng.choice([f"slurmd[3311]: slurmd: debug:  _handle_node_reg_resp: slurmctld sent back {rng.randint(8, 12)} TRES.",
                           "slurmd[3311]: slurmd: debug:  attempting to run health_check [/usr/sbin/nhc]",
                           f"nhc[{rng.randint(10000, 99999)}]: NHC: check_nv_healthmon: GPU {rng.randint(0, 7)} health "
                           f"{rng.choice(['OK', 'OK', 'OK', 'WARN'])}",
                           "slurmd[3311]: slurmd: debug:  _rpc_acct_gather_update",
                           f"slurmstepd[{pid}]: debug:  jag_common_poll_data: Task 0 pid {pid + 71} ave_freq = "
                           f"{rng.randint(2000000, 3800000)} mem size/max {rng.randint(50, 90)}G/{rng.randint(90, 120)}G",
                           f"kernel: NVRM: GPU at PCI:0000:{rng.choice(BUSES)}: GPU-{hexs(8)}-{hexs(4)}-{hexs(4)}",
                           f"slurmd[3311]: slurmd: debug:  Waiting for job {job}'s prolog/epilog",
                           f"systemd[1]: Started Session {rng.randint(1000, 9999)} of User root."])
        out.append((t, line))
    out = sorted(out + fixed, key=lambda x: x[0])
    return "\n".join(f"{t:%b %d %H:%M:%S} {node} {line}" for t, line in out)


QA_EXAMPLES = [("What is the policy number on the renewal form?", "PX-448210", "forms"),
               ("Which clause sets the notice period?", "clause 14.2", "contracts"),
               ("What torque does step 6 specify for the mounting bolts?", "35 Nm", "manuals"),
               ("Who approved the March travel request?", "D. Okonkwo", "emails"),
               ("What is the total in the Q3 column for EMEA?", "1,204", "tables"),
               ("How many days of leave carry over?", "five", "policies"),
               ("What is the supplier's VAT number?", "GB 302 1182 44", "forms"),
               ("Which firmware version fixed the fan issue?", "4.11.2", "manuals"),
               ("When does the lease expire?", "30 June 2027", "contracts"),
               ("Which region had the lowest churn?", "APAC", "tables"),
               ("What is the maximum reimbursable hotel rate?", "EUR 180 per night", "policies"),
               ("Who is the escalation contact?", "the duty manager", "emails")]


def prediction_diff(k):
    out = [f"docqa: examples rc2 got right and rc3 got wrong ({rng.randint(280, 340)} of 2400); showing {k}", ""]
    for q, gold, sub in rng.sample(QA_EXAMPLES, k):
        out += [f"--- docqa-test-{rng.randint(0, 2399):05d} (subset: {sub})", f"question: {q}", f"gold:     {gold}",
                f"rc2:      {gold}",
                "rc3:      " + rng.choice([f"Based on the document, the answer is {gold}. The document states this "
                                           f"explicitly in the relevant section, although other sections discuss "
                                           f"related details that do not change the answer.",
                                           f"The document does not state this with complete certainty. The most likely "
                                           f"answer is {gold}, but you may want to confirm with the original source.",
                                           f"{gold}. To explain: the question refers to the section that lists this "
                                           f"information, and the value given there is the one above."]),
                f"em: rc2=1 rc3=0   f1: rc2=1.00 rc3={rng.uniform(0.15, 0.45):.2f}", ""]
    return "\n".join(out)


def describe_pod(name, node):
    start = clock(9, rng.randint(0, 20), rng.randint(0, 59))
    lines = [f"Name:             {name}", "Namespace:        serving", "Priority:         1000000",
             "Priority Class Name:  serving-high", "Service Account:  serving", f"Node:             {node}/10.42.{rng.randint(0, 40)}.{rng.randint(2, 250)}",
             f"Start Time:       Wed, 04 Mar 2026 {start:%H:%M:%S} +0000",
             "Labels:           app.kubernetes.io/name=summarizer", f"                  rollouts-pod-template-hash={hexs(9)}",
             "                  track=canary", "Annotations:      prometheus.io/scrape: true", "                  prometheus.io/port: 8000",
             "Status:           Running", f"IP:               10.42.{rng.randint(0, 40)}.{rng.randint(2, 250)}",
             "Controlled By:    ReplicaSet/" + name.rsplit("-", 1)[0], "Containers:", "  vllm:",
             f"    Container ID:  containerd://{hexs(64)}",
             "    Image:         registry.corvane.internal/serving/vllm-openai:v0.6.3-cv4",
             f"    Image ID:      registry.corvane.internal/serving/vllm-openai@sha256:{hexs(64)}", "    Port:          8000/TCP",
             "    Args:", "      --model=/models/m-0031/v9", "      --max-model-len=16384", "      --block-size=16",
             "      --swap-space=4", "      --kv-cache-dtype=auto", "      --gpu-memory-utilization=0.82",
             "      --max-num-batched-tokens=16384", "      --enable-prefix-caching", "      --port=8000",
             "    State:          Running", f"      Started:      Wed, 04 Mar 2026 {start + datetime.timedelta(seconds=41):%H:%M:%S} +0000",
             "    Ready:          True", "    Restart Count:  0", "    Limits:", "      memory:          48Gi",
             "      nvidia.com/gpu:  1", "    Requests:", "      cpu:             6", "      memory:          40Gi",
             "      nvidia.com/gpu:  1", "    Readiness:       http-get http://:8000/health delay=0s timeout=1s period=5s "
             "#success=1 #failure=3", "    Liveness:        http-get http://:8000/health delay=0s timeout=1s period=15s "
             "#success=1 #failure=4", "Conditions:", "  Type              Status", "  PodReadyToStartContainers   True",
             "  Initialized       True", "  Ready             True", "  ContainersReady   True", "  PodScheduled      True",
             "QoS Class:        Burstable", "Node-Selectors:   corvane.io/pool=inference-b",
             "Tolerations:      nvidia.com/gpu:NoSchedule op=Exists", "Events:",
             "  Type     Reason     Age                  From     Message", "  ----     ------     ----                 ----     -------"]
    for _ in range(rng.randint(5, 8)):
        lines.append(f"  Warning  Unhealthy  {rng.randint(2, 58)}m (x{rng.randint(2, 9)} over {rng.randint(1, 3)}h)  kubelet  "
                     f"Readiness probe failed: Get \"http://10.42.{rng.randint(0, 40)}.{rng.randint(2, 250)}:8000/health\": "
                     f"context deadline exceeded (Client.Timeout exceeded while awaiting headers)")
    return "\n".join(lines)


def lifecycle_plan():
    out = [f"aws_s3_bucket.buckets[\"{b}\"]: Refreshing state... [id={b}]" for b in
           ["corvane-ckpt", "corvane-datasets", "corvane-models", "corvane-evals", "corvane-scratch"]]
    out += ["aws_s3_bucket_lifecycle_configuration.ckpt: Refreshing state... [id=corvane-ckpt]", "",
            "Terraform used the selected providers to generate the following execution plan. Resource actions are",
            "indicated with the following symbols:", "  ~ update in-place", "", "Terraform will perform the following actions:",
            "", "  # aws_s3_bucket_lifecycle_configuration.ckpt will be updated in-place",
            '  ~ resource "aws_s3_bucket_lifecycle_configuration" "ckpt" {', '        id     = "corvane-ckpt"',
            "        # (2 unchanged attributes hidden)", "", "      + rule {",
            '          + id     = "finished-runs-to-ia"', '          + status = "Enabled"', "", "          + filter {",
            "              + tag {", '                  + key   = "run_state"', '                  + value = "finished"',
            "                }", "            }", "", "          + transition {", "              + days          = 30",
            '              + storage_class = "STANDARD_IA"', "            }", "          + transition {",
            "              + days          = 120", '              + storage_class = "GLACIER_IR"', "            }", "        }", "",
            "        # (3 unchanged blocks hidden)", "    }", "",
            "  # aws_s3_bucket_lifecycle_configuration.scratch will be updated in-place",
            '  ~ resource "aws_s3_bucket_lifecycle_configuration" "scratch" {', '        id     = "corvane-scratch"',
            "      ~ rule {", '            id     = "expire-scratch"', "          ~ expiration {",
            f"              ~ days                         = {rng.choice([30, 60])} -> 14", "                # (1 unchanged attribute hidden)",
            "            }", "            # (1 unchanged block hidden)", "        }", "    }", "",
            "Plan: 0 to add, 2 to change, 0 to destroy.", "", "Saved the plan to: lifecycle.tfplan"]
    return "\n".join(out)


def scontrol_node(node, state, reason):
    return "\n".join([
        f"NodeName={node} Arch=x86_64 CoresPerSocket=56", "   CPUAlloc=0 CPUEfctv=224 CPUTot=224 CPULoad=0.41",
        "   AvailableFeatures=h100,nvlink,ib400,rack3", "   ActiveFeatures=h100,nvlink,ib400,rack3",
        "   Gres=gpu:h100:8(S:0-1)", "   GresUsed=gpu:h100:0(IDX:N/A)",
        f"   NodeAddr={node} NodeHostName={node} Version=23.11.6",
        "   OS=Linux 5.15.0-105-generic #115-Ubuntu SMP Mon Apr 15 09:52:04 UTC 2024",
        "   RealMemory=2063000 AllocMem=0 FreeMem=2011483 Sockets=2 Boards=1",
        "   State=" + state + " ThreadsPerCore=2 TmpDisk=0 Weight=10 Owner=N/A MCS_label=N/A",
        "   Partitions=train", "   BootTime=2026-02-11T08:14:52 SlurmdStartTime=2026-02-11T08:16:03",
        "   LastBusyTime=2026-03-04T02:11:09 ResumeAfterTime=None",
        "   CfgTRES=cpu=224,mem=2063000M,billing=224,gres/gpu=8", "   AllocTRES=",
        "   CapWatts=n/a", "   CurrentWatts=0 AveWatts=0", "   ExtSensorsJoules=n/a ExtSensorsWatts=0 ExtSensorsTemp=n/a",
        f"   Reason={reason} [slurm@2026-03-04T02:11:09]",
        "   Comment=(null)", "", "   HealthCheckProgram=/usr/sbin/nhc HealthCheckInterval=300",
        "   LastHealthCheck=2026-03-04T09:35:00 HealthCheckResult=OK (gpu count 8/8)"])


PROMPTING_SRC = """\"\"\"Builds the model's input for one example: few-shot turns, the question, the template.\"\"\"
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from jinja2 import Environment, StrictUndefined

from evals.suites.base import Example, Suite

_env = Environment(undefined=StrictUndefined, keep_trailing_newline=True)


@dataclass(frozen=True)
class Prompting:
    template_path: Path
    system: str | None          # None: the harness sends no system turn
    num_fewshot: int
    fewshot_split: str
    format: str


def load_template(path: Path):
    return _env.from_string(path.read_text())


def messages_for(example: Example, fewshot: list[Example], p: Prompting) -> list[dict]:
    msgs: list[dict] = []
    if p.system is not None:
        msgs.append({"role": "system", "content": p.system})
    for shot in fewshot[: p.num_fewshot]:
        msgs.append({"role": "user", "content": p.format.format(**shot.fields)})
        msgs.append({"role": "assistant", "content": shot.answer})
    msgs.append({"role": "user", "content": p.format.format(**example.fields)})
    return msgs


def render(example: Example, fewshot: list[Example], p: Prompting, tokenizer) -> str:
    # The model's own template decides everything else, including any default turns it adds.
    tpl = load_template(p.template_path)
    return tpl.render(messages=messages_for(example, fewshot, p), add_generation_prompt=True,
                      eos_token=tokenizer.eos_token, bos_token=tokenizer.bos_token)


def fewshot_pool(suite: Suite, split: str, seed: int = 0) -> list[Example]:
    pool = list(suite.examples(split))
    rnd = __import__("random").Random(seed)
    rnd.shuffle(pool)
    return pool
"""


def top_pods(n):
    rows = [[f"hpo-trial-{k:04d}-{hexs(5)}", f"{rng.randint(1, 3900)}m", f"{rng.randint(900, 30000)}Mi"]
            for k in sorted(rng.sample(range(700, 990), n))]
    return table(["NAME", "CPU(cores)", "MEMORY(bytes)"], rows) + "\n\n" + table(
        ["NODE", "GPU_UTIL_AVG_1H", "GPU_MEM_USED", "PODS"],
        [[f"ip-10-43-{a}-{b}.ec2.internal", f"{rng.uniform(0, 35):.1f}%", f"{rng.randint(3, 60)}%", rng.randint(3, 8)]
         for a, b in [(4, 12), (4, 77), (9, 130), (9, 201), (11, 5), (11, 88)]])


def r15_startup(n):
    t = clock(10, 31, 2)
    head = [f"[{stamp(t)}][train.launch][INFO] - world_size=128 nodes=16 gpus_per_node=8 backend=nccl",
            f"[{stamp(t + datetime.timedelta(seconds=3))}][train.launch][INFO] - composed experiment from 2 files, "
            f"{rng.randint(190, 230)} keys; optim.clip_grad=1.0",
            f"[{stamp(t + datetime.timedelta(seconds=9))}][train.ckpt][INFO] - resuming from step {LAST_GOOD}: 131 "
            f"objects, parallel read with 128 ranks",
            f"[{stamp(t + datetime.timedelta(seconds=151))}][train.ckpt][INFO] - state loaded in 142.7s; data cursors "
            f"restored for every worker",
            f"[{stamp(t + datetime.timedelta(seconds=153))}][train.compile][INFO] - torch.compile warm-up (mode=default)",
            f"[{stamp(t + datetime.timedelta(seconds=301))}][train.compile][INFO] - compiled in 148.0s"]
    body = train_log(n, LAST_GOOD + 10 * n, t + datetime.timedelta(seconds=301 + 10 * n * ATLAS_SPS), ATLAS_OPT, 2.19,
                     ATLAS_SPS, 9.5e5, 38.5)
    return "\n".join(head) + "\n" + body


# ---------------------------------------------------------------------------
# The day.

def fitN(make, n, lo=1400, hi=6900):
    """fit() over noise: each draw is redrawn until it holds no planted value."""
    return fit(lambda k: N(lambda: make(k)), n, lo, hi)


def planted(make, labels):
    """An output meant to hold exactly `labels`: drawn again until it holds no other planted value."""
    for _ in range(1000):
        out = make()
        held = {l for l, v in P.items() if v in out} | {l for l, v in M.items() if v in out}
        if held == set(labels):
            return out
    raise RuntimeError(f"cannot draw an output holding exactly {labels}")


def fitP(make, n, labels, lo=1400, hi=6900):
    return fit(lambda k: planted(lambda: make(k), labels), n, lo, hi)


def tree_output():
    tree = {
        "conf": {"cluster": ["slurm_hgx.yaml", "k8s_train.yaml"], "data": ["webdocs_v9.yaml", "mix_v7.yaml",
                 "code_v3.yaml", "sft_mix_v5.yaml", "forumqa_v2.yaml"], "experiment": [e + ".yaml" for e in EXPERIMENTS[:9]] + ["..."],
                 "model": ["dense_350m.yaml", "dense_1b.yaml", "dense_7b.yaml", "dense_13b.yaml", "moe_8x1b.yaml"],
                 "optim": ["adamw_cosine.yaml", "adafactor.yaml", "lion.yaml"], "tracker": ["trackd.yaml"], "": ["config.yaml"]},
        "deploy": {"argo": ["analysis-p99-latency.yaml", "analysis-error-rate.yaml"], "serving": ["chart/", "embedder/",
                   "reranker/", "summarizer/", "moderation/", "autocomplete/"]},
        "docker": {"trainer": ["Dockerfile"], "serving": ["Dockerfile", "entrypoint.sh"]},
        "evals": {"configs": ["marlin_docqa.yaml", "marlin_safety.yaml", "heron_mmlu_lite.yaml"], "harness": ["evals/",
                  "tests/", "pyproject.toml"], "results": ["marlin-1.3b-instruct/", "heron-1b/"], "suites": ["docqa/",
                  "codegen/", "safety/", "longctx/"]},
        "features": {"views": [f + ".yaml" for f in FEATURES_OTHER] + ["user_engagement.yaml"], "sources": ["warehouse.yaml"]},
        "infra": {"eks": ["cluster/", "nodepools/"], "slurm": ["nodes.tf", "partitions.tf"], "storage": ["buckets.tf",
                  "lifecycle.tf"]},
        "models": {"marlin": ["chat_template.jinja", "generation_config.json", "README.md"], "kestrel": ["chat_template.jinja"]},
        "scripts": {"slurm": ["launch.sbatch", "nccl_check.sh"], "ops": ["drain_node.sh", "gpu_report.sh"]},
        "src": {"train": ["launch.py", "loop.py", "guard.py", "optim.py", "ckpt.py"], "data": ["stream.py", "packing.py"]},
        "tools": {"data": ["verify_snapshot.py", "resync.py"], "": ["compose_all.py"]},
    }
    out = ["."]
    tops = list(tree.items())
    for ti, (top, subs) in enumerate(tops):
        last_top = ti == len(tops) - 1
        out.append(("`-- " if last_top else "|-- ") + top)
        pre = "    " if last_top else "|   "
        entries = [(k, v) for k, v in subs.items() if k] + [(f, None) for f in subs.get("", [])]
        for si, (name, files) in enumerate(entries):
            last_sub = si == len(entries) - 1
            out.append(pre + ("`-- " if last_sub else "|-- ") + name)
            if files:
                pre2 = pre + ("    " if last_sub else "|   ")
                for fi, f in enumerate(files):
                    out.append(pre2 + ("`-- " if fi == len(files) - 1 else "|-- ") + f)
    out += ["", f"{sum(len(v) for v in tree.values()) + len(tree)} directories, {rng.randint(180, 260)} files"]
    return "\n".join(out)


ATLAS_CFG = "conf/experiment/atlas_7b_r14.yaml"
ATLAS_R15 = "conf/experiment/atlas_7b_r15.yaml"
KESTREL_CFG = "conf/experiment/kestrel_13b_sft_v2.yaml"
ATLAS_RUN = "8c1f2a0d4b7e"
ATLAS_OPT = (3.0e-4, 3.0e-5, int(P["A1"].split(": ")[1]), 120000)
LAST_GOOD = NAN_STEP // 1000 * 1000
T_NAN = clock(3, 12, 37)
ATLAS_SPS = 4.4

# --- kickoff -------------------------------------------------------------------

new_turn("kickoff")
U(f"Morning. {M['name']}, ML platform at {M['company']}. Rough night: the atlas-7b pretraining run (r14) went NaN a "
  f"bit after three and stopped itself, and kestrel's 13B SFT job died even earlier with what looks like an NCCL "
  f"hang. I've opened {M['ticket']}. Can you pull the Slurm queue and everything that ended overnight?")
sh("squeue -o '%.10i %.9P %.30j %.10u %.2t %.12M %.6D %R' --sort=t,i", fitN(lambda n: squeue(n), 40))
say("The queue itself looks normal. Now the accounting for everything that ended since yesterday evening.")
sh("sacct -a -X -S 2026-03-03T18:00 -E now -o JobID,JobName%22,Partition,Account%14,AllocTRES%44,Elapsed,State,ExitCode",
   fitN(lambda n: sacct_overnight(n), 40))
say("And the pretraining job's own steps:")
sh(f"sacct -j {JOB_ATLAS} -o JobID%16,JobName%20,Partition,AllocCPUS,Elapsed,Start,End,State,ExitCode,NodeList%22",
   fitN(lambda n: sacct_steps(JOB_ATLAS, "atlas-7b-r14", ATLAS_NODES, rng.randint(180000, 200000), "FAILED", "1:0",
                              datetime.datetime(2026, 3, 1, 22, 41, 9), requeues=n), 2, lo=1300))
A("Two research jobs failed overnight, and in different ways: the 7B pretraining run after more than two days on the "
  "train partition, with the application's own exit code, and the 13B fine-tune after most of a night, killed by a "
  "signal. The rest is routine: ablations and evals completed, a few cancelled or out of memory. The queue has the "
  "usual jobs waiting on resources or priority. The two failures want different lenses: the pretraining run exited "
  "on its own, which points at the training loop or the data; the fine-tune was killed, which points at the "
  "collective layer or a node.")

new_turn("kickoff")
U(f"Before we touch anything, a standing rule for the whole day: {RULES[0][1]}. Last quarter someone rebooted a node "
  f"in the middle of a checkpoint upload and we lost two days of a run. Incident chatter goes in {M['channel']}. "
  f"Show me the repo layout so we're on the same page.")
sh("tree -L 3 --dirsfirst --charset=ascii -I '__pycache__|*.egg-info|.venv'", tree_output())
say("And the root Hydra config, since every run is composed from it.")
read("conf/config.yaml", BASE_CONFIG)
A("Understood, for the whole day: no drain, reboot or reimage of a GPU node unless the pager holder has acked it in "
  "the incident channel first, even when the node is obviously broken. The layout is the usual one for us: Hydra "
  "groups under conf (one experiment file per run, plus model, data, optimizer and cluster groups), the training "
  "code under src, evals with their own harness and results, the feature views, the serving chart with one folder "
  "per service, the two images, and Terraform for the EKS node pools, Slurm and storage. The root config sets the "
  "NCCL environment for every run and the checkpoint upload defaults; the experiment files only override.")

new_turn("kickoff")
U(f"Second rule, also permanent: {RULES[1][1]}. We got burned by a straight-to-prod rollout in January. And FYI, "
  f"{M['oncall']}, so she's the one who acks anything node-related. What does a healthy night look like on this "
  f"cluster, roughly?")
A("Noted, for the rest of the day: every serving change goes out as a canary at five percent, stays there for at "
  "least half an hour, and its p99 goes into the ticket before anyone promotes it. A healthy night: the long "
  "pretraining runs keep their nodes and checkpoint on schedule, uploading asynchronously to the checkpoint bucket; "
  "the nightly eval jobs take the eval partition between midnight and six; ablations and fine-tunes backfill the "
  "train partition; the feature store materializes every three hours; and the serving fleet scales down after "
  "the evening peak. Nothing should page, and a node only leaves service when Slurm or the health checks take it "
  "out.")

new_turn("kickoff")
U(f"Priorities. {M['lead']} owns atlas and has already asked twice. {M['evallead']} runs evals and flagged a "
  f"regression on the marlin release candidate, and {M['deadline']} today. So: atlas first, then whatever killed "
  f"kestrel since it may be hardware, then marlin, then the serving canary. Sound right?")
A("Mostly. Atlas first makes sense: it is the most expensive thing idle right now, and a restart decision needs the "
  "logs, the tracker and the checkpoints. Kestrel next, but I would look at it early rather than late, because if a "
  "node is bad it may take other jobs down while we work on atlas. Marlin has a hard deadline this afternoon, so it "
  "should start before lunch; the serving canary is only at a small weight and can wait until then, unless the "
  "spikes get worse.")

new_turn("kickoff")
U("What's the state of the train partition right now? Drained nodes, reasons, reservations, anything odd.")
sh("sinfo -p train,eval -N -o '%16N %10P %8t %5c %9m %20G %12C %20E' | column -t | sed 's/CPUS(A\\/I\\/O\\/T)/CPUS/'",
   N(lambda: sinfo_nodes()))
say("And the reasons and reservations.")
sh("sinfo -R -o '%40E %12u %20H %N' && echo && sinfo -s && echo && scontrol show reservation", N(sinfo_reasons))
say("And the drained node's own record:")
sh(f"scontrol show node {BAD_NODE} && sacct -N {BAD_NODE} -S 2026-03-02 -X -o JobID,JobName%22,State,Elapsed,End",
   N(lambda: scontrol_node(BAD_NODE, "IDLE+DRAIN", "Kill task failed") + "\n\n" + table(
       ["JobID", "JobName", "State", "Elapsed", "End"],
       [[4415000 + rng.randint(0, 2500), rng.choice(OTHER_RUNS)[:22], rng.choice(["COMPLETED", "COMPLETED", "CANCELLED"]),
         hms(rng.randint(600, 40000)), f"2026-03-0{rng.randint(2, 3)}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:"
         f"{rng.randint(0, 59):02d}"] for _ in range(5)] +
       [[JOB_KESTREL, "kestrel-13b-sft-v2", "FAILED", hms(rng.randint(30000, 34000)), "2026-03-04T02:10:49"]],
       right=(0, 1, 2, 3))))
A("One train node is drained, taken out by Slurm itself at ten past two with a kill-task failure, which is what "
  "happens when a job's processes cannot be killed, typically because a GPU stopped responding. The timing matches "
  "kestrel's death, and kestrel's nodes include it. The other reasons are old and known: an InfiniBand link flap "
  "on one node with a reservation for the fix, a BIOS update on an eval node, worn NVMe on a dev box. The atlas "
  "nodes are idle now; nothing has backfilled them yet.")

# --- atlas -------------------------------------------------------------------------

regular("atlas")
U("Start with atlas. Show me the r14 experiment config, and the shared optimizer group it pulls in.")
atlas_cfg = planted(lambda: exp_config(model="dense_7b", data="webdocs_v9", seed=1337, resume="null", max_steps=120000,
                                       gbs=1024, mbs=4, gas=2, seq=4096, val=500, ckpt=1000, keep="all", ac="selective",
                                       compile="true", lr="3.0e-4", min_lr="3.0e-5", warm=ATLAS_OPT[2],
                                       decay=120000, wd="0.1", clip="", tp=1, fsdp="hybrid", sp="false",
                                       project="pretrain", tags="h100, bf16, long-run"), ["A1"])
read(ATLAS_CFG, atlas_cfg, expect=["A1"])
say("The experiment file has no clipping line of its own, so the optimizer group decides.")
read("conf/optim/adamw_cosine.yaml", OPTIM_CONFIG)
A("The experiment config is the standard shape: the 7B dense model on the web-documents snapshot, a long cosine "
  "schedule, hybrid sharding, a checkpoint every thousand steps and all of them kept. What it does not have is a "
  "clip_grad line. The optimizer group's comment says clipping became a per-experiment setting, and its default "
  "resolves to zero when the experiment does not set one, and zero means no clipping at all. So unless something "
  "on the command line overrode it, r14 has been training without gradient clipping.")

regular("atlas")
U("Tail the atlas rank-0 log around where it died.")
gn = [(s, rng.uniform(0.74, 1.28)) for s in range(NAN_STEP - 92, NAN_STEP - 4)]
gn += [(NAN_STEP - 4, rng.uniform(1.6, 2.4)), (NAN_STEP - 3, rng.uniform(3.1, 5.9)), (NAN_STEP - 2, rng.uniform(14, 41)),
       (NAN_STEP - 1, float(P["A3"]))] + [(s, None) for s in range(NAN_STEP, NAN_STEP + 8)]
ls_ = [(s, rng.uniform(2.12, 2.27)) for s in range(NAN_STEP - 92, NAN_STEP - 3)]
ls_ += [(NAN_STEP - 3, rng.uniform(2.3, 2.5)), (NAN_STEP - 2, rng.uniform(2.9, 3.6)), (NAN_STEP - 1, rng.uniform(6.5, 9.9))]
ls_ += [(s, None) for s in range(NAN_STEP, NAN_STEP + 8)]
ATLAS_TAIL = fitP(lambda n: train_log(n, NAN_STEP - NAN_STEP % 10, T_NAN - datetime.timedelta(seconds=ATLAS_SPS * (NAN_STEP % 10)),
                                      ATLAS_OPT, 2.19, ATLAS_SPS, 9.5e5, 38.4, warn_shards=MISSING_SHARDS,
                                      gn_map=dict(gn), loss_map=dict(ls_)) + "\n" + "\n".join(
    [f"[{stamp(T_NAN)}][train.guard][WARNING] - {P['A2']} (rank 0); skipping optimizer update"] +
    sum([([step_line(T_NAN + datetime.timedelta(seconds=ATLAS_SPS * k), NAN_STEP + k, None,
                     lr_at(NAN_STEP + k, *ATLAS_OPT), None, 9.4e5, 38.0, 61.0)] if (NAN_STEP + k) % 10 == 0 else []) +
         [f"[{stamp(T_NAN + datetime.timedelta(seconds=ATLAS_SPS * k))}][train.guard][WARNING] - still non-finite at "
          f"step {NAN_STEP + k} ({k + 1} consecutive)"] for k in range(1, 8)], []) +
    [f"[{stamp(T_NAN + datetime.timedelta(seconds=ATLAS_SPS * 8))}][train.guard][ERROR] - 8 consecutive non-finite "
     f"losses; aborting (guard.max_consecutive_nonfinite=8)",
     f"[{stamp(T_NAN + datetime.timedelta(seconds=ATLAS_SPS * 8 + 1))}][train.ckpt][WARNING] - emergency checkpoint "
     f"skipped: parameters contain non-finite values",
     "Traceback (most recent call last):", '  File "/workspace/src/train/launch.py", line 61, in <module>',
     "    main()", '  File "/workspace/src/train/loop.py", line 418, in run', "    self.guard.check(loss, step)",
     '  File "/workspace/src/train/guard.py", line 92, in check',
     '    raise NonFiniteLossError(f"{self.count} consecutive non-finite losses")',
     "train.guard.NonFiniteLossError: 8 consecutive non-finite losses",
     "srun: error: hgx-r2-01: task 0: Exited with exit code 1"]), 30, ["A2"])
sh("tail -n 60 /lustre/runs/atlas-7b-r14/logs/rank0.log", ATLAS_TAIL, expect=["A2"])
say("There are data-stream warnings about missing shards in the same stretch. Counting them across all ranks:")
first_seen = {i: datetime.datetime(2026, 3, 3, 17, 0) + datetime.timedelta(seconds=rng.randint(0, 36000)) for i in MISSING_SHARDS}
sh("grep -h 'NoSuchKey' /lustre/runs/atlas-7b-r14/logs/rank*.log | awk '{print $4, $1, $2}' | sort | "
   "awk '{c[$1]++; if (!($1 in f)) f[$1]=$2\" \"$3} END {for (s in c) print c[s], s, f[s]}' | sort -k3 | column -t",
   N(lambda: "\n".join(f"{rng.randint(8, 64):<4} shard-{i:05d}.tar:  [{first_seen[i]:%Y-%m-%d}  "
                       f"{first_seen[i]:%H:%M:%S},{rng.randint(0, 999):03d}]"
                       for i in sorted(MISSING_SHARDS, key=lambda x: first_seen[x]))))
A("The end of the log is a textbook blow-up: loss and gradient norm are normal on the ten-step lines, then a "
  "non-finite loss, the guard skips the update, the next steps stay non-finite, and after the configured number "
  "of consecutive bad steps the guard aborts the run. The emergency checkpoint was rightly skipped, because the "
  "weights themselves had gone non-finite. Separately, the data stream has been skipping missing shards since "
  "yesterday evening, every rank, dozens of different shards, each one many times. With the skip policy, each "
  "missing shard is replaced by whatever comes next in the shuffle, so the run has been seeing a skewed slice of "
  "the data for hours. Two suspects then: no clipping, and a data stream that quietly changed its mix.")

regular("atlas")
U("The log only prints every ten steps. What does the tracker have for atlas's grad norm per step before the NaNs?")
sh(f"trackctl metrics history {ATLAS_RUN} --key train/grad_norm --last 100",
   planted(lambda: tracker_history(ATLAS_RUN, "train/grad_norm", gn, NAN_STEP + 8, T_NAN + datetime.timedelta(seconds=35),
                                   ATLAS_SPS), ["A3"]), expect=["A3"])
say("And the loss over the same steps, to see which moved first.")
sh(f"trackctl metrics history {ATLAS_RUN} --key train/loss --last 100",
   N(lambda: tracker_history(ATLAS_RUN, "train/loss", ls_, NAN_STEP + 8, T_NAN + datetime.timedelta(seconds=35), ATLAS_SPS)))
A("The per-step history shows the order of events clearly. The gradient norm sits in its normal band for the whole "
  "window, then climbs over a handful of steps and jumps by more than two orders of magnitude on the step right "
  "before the first non-finite loss. The loss only starts moving a step or two after the gradient norm, which is "
  "the signature of an unclipped update pushing the weights somewhere bad, rather than a bad batch producing a "
  "bad loss first. With clipping at one, that update would have been scaled down to an ordinary size.")

regular("atlas")
U("Before anyone restarts anything: which atlas checkpoints do we have, and how big is the newest complete one?")
sh("aws s3 ls s3://corvane-ckpt/atlas-7b-r14/", N(lambda: s3_ckpt_prefix(range(1000, LAST_GOOD + 1000, 1000))))
say("The newest prefix is the one saved before the spike. Listing what is inside it:")
ck_total = float(P["A4"].split(": ")[1].split()[0])
sh(f"aws s3 ls s3://corvane-ckpt/atlas-7b-r14/step_{LAST_GOOD:06d}/ --human-readable --summarize",
   planted(lambda: s3_ls_files(ckpt_files(ck_total), T_NAN - datetime.timedelta(seconds=ATLAS_SPS * (NAN_STEP - LAST_GOOD)),
                               total_bytes=ck_total * 1024 ** 3), ["A4"]), expect=["A4"])
say("And its train state, to see where the data stream was when it was saved:")
sh(f"aws s3 cp s3://corvane-ckpt/atlas-7b-r14/step_{LAST_GOOD:06d}/train_state.json - | jq .",
   N(lambda: train_state(LAST_GOOD)))
A("Every thousand steps has a prefix, and the newest one was written before the gradient norm started climbing, so "
  "it is clean as far as the training state goes. Its listing looks complete: one shard per rank, the metadata "
  "file, the train state and the RNG states, all written within a minute or so, which matches a healthy async "
  "upload. It is a sizeable pull for a restart, but the nodes read it in parallel from the bucket, so the restart "
  "should take minutes rather than an hour. Nothing in that prefix needs to change; a restart reads from it and "
  "writes its own checkpoints under a new run name.")

regular("atlas")
U("Who touched atlas's config or the optimizer group lately? Clipping being off smells like a change, not a choice.")
git("git log --date=short --format='%h %ad %an  %s' -n 44 -- conf/experiment/atlas_7b_r14.yaml conf/optim/adamw_cosine.yaml",
    fitP(lambda n: git_log(n, P["A5"], "optim: make clip_grad a per-experiment setting", 2, author="Lasse Bergstrom"), 44,
         ["A5"]), expect=["A5"])
say("The commit that made clipping per-experiment is the newest one in the optimizer group; here is what it changed:")
OPTIM_OLD = OPTIM_CONFIG.replace("# clip_grad: per experiment since the clipping refactor; 0.0 turns clipping off.\n", "") \
    .replace("clip_grad: ${oc.select:optim_override.clip_grad,0.0}", "clip_grad: 1.0")
d1, _ = make_diff("conf/optim/adamw_cosine.yaml", OPTIM_OLD.rstrip("\n").split("\n"), [
    ("# AdamW with linear warmup", 1, ["# AdamW with linear warmup and cosine decay to min_lr.",
                                       "# clip_grad: per experiment since the clipping refactor; 0.0 turns clipping off."]),
    ("clip_grad: 1.0", 1, ["clip_grad: ${oc.select:optim_override.clip_grad,0.0}"])])
d2 = "\n".join(["diff --git a/conf/optim/lion.yaml b/conf/optim/lion.yaml", "--- a/conf/optim/lion.yaml",
                "+++ b/conf/optim/lion.yaml", "@@ -5,7 +5,7 @@ warmup_steps: 2000", " decay_steps: ${trainer.max_steps}",
                " weight_decay: 0.2", " betas: [0.95, 0.98]", "-clip_grad: 1.0",
                "+clip_grad: ${oc.select:optim_override.clip_grad,0.0}", " fused: false", " schedule:", "   kind: cosine",
                "diff --git a/src/train/optim.py b/src/train/optim.py", "--- a/src/train/optim.py", "+++ b/src/train/optim.py",
                "@@ -88,14 +88,17 @@ def build_adamw(params, cfg):", "     return opt, sched", " ", " ",
                "-def clip(model, cfg):", "-    return torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip_grad)",
                "+def clip(model, cfg):", "+    # 0.0 disables clipping; experiments opt in by setting optim.clip_grad.",
                "+    if not cfg.clip_grad:", "+        return grad_norm(model)",
                "+    return torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip_grad)", " ", " ",
                " def grad_norm(model):", "     norms = [p.grad.detach().norm(2) for p in model.parameters() if p.grad is not None]",
                "     return torch.linalg.vector_norm(torch.stack(norms), 2)"])
git("git log -p -1 --format= -- conf/optim/ src/train/optim.py",
    "diff --git a/conf/optim/adamw_cosine.yaml b/conf/optim/adamw_cosine.yaml\n" + d1 + "\n" + d2)
A("That is the change. The commit turned clipping from a fixed value in the optimizer groups into something each "
  "experiment opts into, and the fallback when an experiment says nothing is zero, which the training code now "
  "treats as no clipping. The experiments written before the refactor that set clipping explicitly are fine; the "
  "ones that relied on the old default silently lost it. Atlas r14 was created after the merge from a template "
  "without the line, so it never had clipping at all. The author's intent was clearly to make clipping visible "
  "per run, not to turn it off; the default is the bug.")

regular("atlas")
U("So atlas has been training with no clipping at all since it started? How did it survive forty-odd thousand steps?")
A("It survived because unclipped training is often stable for long stretches: after warmup, with a decaying "
  "learning rate and AdamW's per-parameter normalisation, most updates are small anyway, and the gradient norm sat "
  "comfortably in its normal band for days. What clipping protects against is the rare step where the norm jumps, "
  "and such a step only needs to happen once. The timing suggests a trigger: the data stream had been skipping "
  "missing shards for hours, which concentrates the batches on whatever comes after them in the shuffle, and a run "
  "of unusual batches is exactly what produces one of those rare steps. Without clipping there was nothing to "
  "absorb it.")

regular("atlas")
U("Which other experiment configs don't set clip_grad? I don't want kestrel or anyone else in the same hole.")
sh("grep -L 'clip_grad' conf/experiment/*.yaml; echo ---; grep -rn 'clip_grad' conf/ src/train/ | sort | head -40",
   N(lambda: "\n".join([f"conf/experiment/{e}.yaml" for e in ["atlas_7b_r14", "osprey_350m_abl3", "auk_700m_abl7",
                                                              "petrel_3b_r1", "tern_2b_dpo_r3"]] + ["---"] +
                       [f"conf/experiment/{e}.yaml:{rng.randint(30, 40)}:  clip_grad: {rng.choice(['1.0', '0.5', '1.0'])}"
                        for e in sorted(set(EXPERIMENTS) - {"atlas_7b_r14", "osprey_350m_abl3", "auk_700m_abl7",
                                                            "petrel_3b_r1", "tern_2b_dpo_r3"})] +
                       ["conf/optim/adafactor.yaml:9:clip_grad: ${oc.select:optim_override.clip_grad,0.0}",
                        "conf/optim/adamw_cosine.yaml:2:# clip_grad: per experiment since the clipping refactor; 0.0 turns clipping off.",
                        "conf/optim/adamw_cosine.yaml:10:clip_grad: ${oc.select:optim_override.clip_grad,0.0}",
                        "conf/optim/lion.yaml:8:clip_grad: ${oc.select:optim_override.clip_grad,0.0}",
                        "src/train/loop.py:402:        gn = clip(self.model, self.cfg.optim)",
                        "src/train/optim.py:91:    # 0.0 disables clipping; experiments opt in by setting optim.clip_grad.",
                        "src/train/optim.py:92:    if not cfg.clip_grad:", "src/train/optim.py:94:    return "
                        "torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip_grad)"])))
say("When each of those five was last changed:")
git("git log --date=short --format='%h %ad %an  %s' -n 36 -- conf/experiment/",
    fitN(lambda n: git_log(n, subjects=["exp: new ablation grid", "exp: resume path for long runs", "exp: drop tp for "
                                        "small models", "exp: dpo beta sweep", "exp: long-context variant",
                                        "exp: seq_len 8192 for code", "exp: copy from previous round",
                                        "exp: tags for dashboards", "exp: warmup per model size",
                                        "exp: v9 mix for pretraining", "exp: smaller val interval"]), 36))
A("Five experiment files do not set it: atlas r14, two small ablations, the 3B petrel run and the DPO run. Kestrel "
  "sets clipping explicitly, so whatever killed it was not this. Of the other four, only the DPO run and the petrel "
  "run are long enough for it to matter; the ablations finish in hours. The clean fix is to make the default safe "
  "again rather than to patch five files, and to keep the opt-out explicit for the few experiments that really "
  "want no clipping.")

regular("atlas")
U("Plan for the restart? Dariusz wants it running again before lunch.")
A("I would restart as a new run, r15, rather than resume r14 in place: a new experiment file that inherits from "
  "r14, sets clipping to one explicitly, and resumes from the last clean checkpoint, with its own output and "
  "checkpoint prefix so r14's history stays untouched for the postmortem. The data question needs an answer before "
  "the restart reaches the affected part of the stream; the resume point is before it, so there are some hours of "
  "margin, and we can make the loader fail hard on a missing shard instead of skipping it. I would not change the "
  "learning rate or the warmup for the restart: the schedule was fine, and changing two things at once makes the "
  "outcome harder to read.")

regular("atlas")
U("Should r15 be a new run in the tracker, or continue r14's run so the curves stay in one place?")
A("A new run, linked to r14. Continuing r14's run would mix two configurations under one id, and anyone reading "
  "the curves later would not know that clipping changed at the resume step. The tracker can record r14 as r15's "
  "parent and the resume step, and the dashboard can overlay the two runs on one chart, so the picture stays "
  "continuous without pretending it is one run. The postmortem can then link both ids.")

regular("atlas")
U("Do it: write the r15 experiment file with clipping on and the resume path, then run the config tests.")
r15_lines = ["# @package _global_", "# Restart of r14 from its last clean checkpoint, with clipping set explicitly.",
             "defaults:", "  - /experiment/atlas_7b_r14", "  - _self_", "", "run:",
             f"  resume_from: s3://corvane-ckpt/atlas-7b-r14/step_{LAST_GOOD:06d}/", "  resume_reset_dataloader: false",
             "", "optim:", "  clip_grad: 1.0", "", "tracker:", "  tags: [h100, bf16, long-run, restart]"]
FILES[ATLAS_R15] = r15_lines
patch(ATLAS_R15, new_file_diff(ATLAS_R15, r15_lines))
say("Compose check passes with the new file. Running the config and optimizer tests:")
sh("pytest -q tests/config tests/test_optim.py tests/test_guard.py",
   N(lambda: pytest_log("train", f"in {rng.uniform(30, 90):.2f}s", stamp_prefix=False, skipped=3, warnings=2)))
A("The r15 file is in place: it inherits everything from r14, resumes from the last clean checkpoint and turns "
  "clipping on explicitly; the compose check resolves it without errors and the config, optimizer and guard tests "
  "pass. r14's files and checkpoints are untouched. Ready to submit when you are.")

regular("atlas")
U("Submit r15, same launcher, and show me the queue once it's in.")
sh("sbatch --parsable -J atlas-7b-r15 -N 16 -p train scripts/slurm/launch.sbatch experiment=atlas_7b_r15 && "
   "squeue -p train -o '%.10i %.9P %.30j %.10u %.2t %.12M %.6D %R'",
   fitN(lambda n: f"{JOB_ATLAS_R15}\n" + squeue(n, extra=[(JOB_ATLAS_R15, "train", "atlas-7b-r15", "dwielgosz", "R", 41,
                                                            16, compress(ATLAS_NODES))]), 42))
say("Its first lines, once it got going:")
sh("sleep 600; tail -n 30 /lustre/runs/atlas-7b-r15/logs/rank0.log", fitN(lambda n: r15_startup(n), 24))
A("Submitted, and it started straight away on the same sixteen nodes r14 had, since nothing had backfilled them. "
  "It loaded the checkpoint, restored every data worker's cursor, compiled, and its first step lines pick up at "
  "the resume step with the loss where r14's was before the spike and clipping on. Throughput is normal.")

regular("atlas")
U("Draft the atlas update for the incident channel. Dariusz reads it, so be precise but short.")
A("Draft:\n\n*atlas-7b r14: diverged at about 03:12, restarted as r15.*\nCause: r14 ran without gradient clipping. "
  "A recent refactor made clipping a per-experiment setting with an unsafe default of off, and r14's config did "
  "not set it. A gradient spike on a single step went unclipped and the weights went non-finite; the guard "
  "stopped the run as designed. Contributing: the data stream had been skipping missing shards of the web-docs "
  "snapshot for hours, which skews the batches.\nDone: r15 resumes from the last clean checkpoint with clipping "
  "on; r14's checkpoints are untouched.\nNext: the default goes back to safe; the snapshot's missing shards get "
  "restored; four other configs are being checked.")

# --- kestrel and the node -----------------------------------------------------------------

regular("atlas")
U("Dariusz asks how much we actually lost on atlas. Roughly, no need for decimals.")
A("Less than it feels like. The restart resumes from a checkpoint written a few hundred steps before the spike, "
  "so the training itself lost well under an hour of progress. The bigger loss is the idle time: the sixteen "
  "nodes sat empty from the abort until r15 started this morning, which is most of a night of the whole "
  "allocation. The lesson for the postmortem is that an aborted run should page someone, since the guard did its "
  "job at three and nobody knew until the morning.")

regular("node")
U("Now kestrel. It died around ten past two. Tail kestrel's rank-0 log.")
K_T = clock(2, 10, 41)


def kestrel_tail(n):
    stop = clock(1, 40, 38)
    body = train_log(n, 5230, stop, (2.0e-5, 2.0e-6, 100, 6000), 1.31, 6.1, 2.1e5, 36.5)
    warn = [f"hgx-r3-13:2214871:2215190 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer "
            f"10.40.3.14<{rng.randint(40000, 60000)}> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid "
            f"::ffff:10.40.3.13 remoteGid ::ffff:10.40.3.14",
            "hgx-r3-13:2214871:2215190 [0] NCCL INFO transport/net.cc:1103 -> 6",
            "hgx-r3-13:2214871:2215190 [0] NCCL INFO proxy.cc:1586 -> 6"]
    tail = [f"[rank0]:[E304 02:10:41.{rng.randint(100000000, 999999999)} ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog "
            f"caught collective operation timeout: WorkNCCL(SeqNum=884213, OpType=ALLREDUCE, NumelIn=131072000, "
            f"NumelOut=131072000, Timeout(ms)=1800000) {P['K2']} before timing out.",
            f"[rank0]:[E304 02:10:41.{rng.randint(100000000, 999999999)} ProcessGroupNCCL.cpp:1785] [PG 0 (default_pg) "
            f"Rank 0] Exception (either an error or timeout) detected by watchdog at work: 884213, last enqueued NCCL "
            f"work: 884214, last completed NCCL work: 884212.",
            f"[rank0]:[E304 02:10:41.{rng.randint(100000000, 999999999)} ProcessGroupNCCL.cpp:630] [Rank 0] Some NCCL "
            f"operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU "
            f"operations might run on corrupted/incomplete data.",
            f"[rank0]:[E304 02:10:41.{rng.randint(100000000, 999999999)} ProcessGroupNCCL.cpp:636] [Rank 0] To avoid "
            f"data inconsistency, we are taking the entire process down.",
            "terminate called after throwing an instance of 'c10::DistBackendError'",
            "  what():  [PG 0 (default_pg) Rank 0] Process group watchdog thread terminated with exception (see above)",
            "W0304 02:10:44.118000 140233 torch/distributed/elastic/multiprocessing/api.py:897] Sending process 2214872 "
            "closing signal SIGTERM",
            "E0304 02:10:49.502000 140233 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -6) "
            "local_rank: 0 (pid: 2214871) of binary: /usr/bin/python3",
            "srun: error: hgx-r3-13: task 0: Exited with exit code 6"]
    return body + "\n" + "\n".join(warn + tail)


sh("tail -n 48 /lustre/runs/kestrel-13b-sft-v2/logs/rank0.log", fitP(kestrel_tail, 30, ["K2"]), expect=["K2"])
say("The last step line is half an hour before the watchdog. Its accounting, with the nodes:")
sh(f"sacct -j {JOB_KESTREL} -o JobID%16,JobName%20,Partition,AllocCPUS,Elapsed,Start,End,State,ExitCode,NodeList%22",
   fitN(lambda n: sacct_steps(JOB_KESTREL, "kestrel-13b-sft-v2", KESTREL_NODES, rng.randint(30000, 34000), "FAILED",
                              "6:0", datetime.datetime(2026, 3, 3, 17, 2, 11), requeues=n), 2, lo=1300))
A("Kestrel's last training step was logged at about 01:40, and then nothing until the NCCL watchdog fired half an "
  "hour later on an allreduce that never completed, which is exactly the collective timeout in the config. Just "
  "before that, NCCL on the first node reports a failed receive from a peer on the third rack's fourteenth node, "
  "the same node Slurm drained. The job ran on four nodes in that rack. A fine-tune that hangs in an allreduce "
  "while one peer's transport errors out is the classic picture of one GPU or one NIC going away underneath it.")

regular("node")
U("Read kestrel's experiment config while we're at it. Does it set clipping, and what's its batch setup?")
read(KESTREL_CFG, planted(lambda: exp_config(model="dense_13b", data="sft_mix_v5", seed=7, resume="null", max_steps=6000,
                                             gbs=384, mbs=1, gas=int(P["K1"].split(": ")[1]), seq=8192, val=500, ckpt=500,
                                             keep=5, ac="full", compile="false", lr="2.0e-5", min_lr="2.0e-6", warm=100,
                                             decay=6000, wd="0.0", clip="  clip_grad: 1.0\n", tp=2, fsdp="full",
                                             sp="true", project="sft", tags="h100, bf16, sft"), ["K1"]), expect=["K1"])
A("Kestrel sets clipping explicitly, so the refactor did not touch it, and its batch setup is a normal fine-tune: "
  "small micro-batches with long sequences, gradient accumulation to reach the global batch, tensor parallel of "
  "two, full sharding. Nothing in the config would make it hang; its collective timeout is the default half hour, "
  "which is what the watchdog enforced. This is not a numerical problem like atlas, it is the collective layer.")

regular("node")
U("Kernel log on hgx-r3-14, please. Yusra reset its GPUs at about 07:40 but left it drained.")
sh("ssh hgx-r3-14 \"sudo dmesg -T | tail -n 56\"",
   fitP(lambda n: dmesg(n, clock(1, 40, 13), bad=True), 56, ["N1"]), expect=["N1"])
say("And what slurmd logged when it tried to clean up the job:")
sh("ssh hgx-r3-14 \"sudo journalctl -u slurmd -u nhc --since '2026-03-04 02:09' --until '2026-03-04 02:15' --no-pager\" "
   "| tail -n 40", fitN(lambda n: slurmd_journal(JOB_KESTREL, BAD_NODE, n), 40))
A("The kernel log tells the story in order. For a while before the failure one GPU reports contained errors and "
  "uncorrectable memory errors, with the row remapper marking rows for remapping, all on the same PCI address. "
  "Then that GPU drops off the bus, the driver asks for a bug report, and the PCIe root port above it reports a "
  "fatal uncorrected error. That lines up with kestrel's last step and with the transport errors from its peer. "
  "The other lines are routine: InfiniBand links, Lustre reconnects, the fabric manager.")

regular("node")
U("ECC counters on r3-14, and the plain nvidia-smi view after Yusra's reset.")
sh("ssh hgx-r3-14 \"nvidia-smi -q -d ECC | grep -vE 'SRAM (Threshold|L2|SM|Microcontroller|PCIE|Other)'\"",
   planted(lambda: nvsmi_ecc({BAD_GPU: {"vdu": rng.randint(1, 4), "vdc": rng.randint(2, 9),
                                        "adu": int(P["N2"].split(": ")[1]), "adc": rng.randint(150, 400),
                                        "asc": rng.randint(3, 9)}}, when=clock(9, 31, 6)), ["N2"]), expect=["N2"])
say("The plain view, for temperature, power and the error column:")
sh("ssh hgx-r3-14 nvidia-smi", N(lambda: nvsmi_table(bad=BAD_GPU, load=False, when=clock(9, 31, 40))))
A("After the reset all eight GPUs are visible again, but one of them is clearly not healthy. Its volatile "
  "counters already show new uncorrectable memory errors since the reset this morning, and its aggregate "
  "counters, which survive resets, show a long history of both corrected and uncorrectable errors; every other "
  "GPU on the node is at or near zero. In the plain view the same GPU reports errors in the ECC column and runs "
  "warmer than its idle neighbours. A GPU that keeps producing uncorrectable errors after a reset is a hardware "
  "replacement, not something to tune around.")

regular("node")
U("Let's prove it under load: nccl-tests all_reduce on r3-14 with all eight GPUs, and the same on a known-good "
  "neighbour.")
sh("ssh hgx-r3-14 '/opt/nccl-tests/build/all_reduce_perf -b 1M -e 8G -f 2 -g 8' | grep -v ' Rank '",
   planted(lambda: nccl_out(NCCL_BAD), ["N3"]), expect=["N3"])
say("And hgx-r3-09, same rack, same command:")
sh("ssh hgx-r3-09 '/opt/nccl-tests/build/all_reduce_perf -b 1M -e 8G -f 2 -g 8' | grep -v ' Rank '",
   N(lambda: nccl_out(_nccl_rows(rng.uniform(470, 490)))))
A("The difference is stark. On the neighbour the bus bandwidth climbs with message size to what an eight-way NVLink "
  "all-reduce on these boards should reach; on the fourteenth node it plateaus at a fraction of that, and the "
  "average across sizes is far below the neighbour's. Every rank in a collective runs at the speed of the slowest "
  "one, so this GPU would slow or hang any job placed on the node even when it does not fall off the bus. The "
  "node should stay out of the train partition until the GPU is replaced.")

regular("node")
U(f"Yusra acked in the channel: she'll reboot it, reimage it and run the vendor diagnostics; the {M['drain']}. It "
  f"stays drained until then. Can you prep the exact commands and the reason text for her, but don't run anything.")
A("Here is what I would hand her, nothing executed:\n\n1. Keep it drained with a clear reason: `scontrol update "
  "nodename=hgx-r3-14 state=drain reason=\"GPU4 uncorrectable ECC + Xid, RMA pending, see ticket\"`.\n2. Collect "
  "the bug report before the reboot, since the crash dump is lost otherwise: `sudo nvidia-bug-report.sh "
  "--extra-system-data`.\n3. Reboot and reimage through the usual provisioning job; then `dcgmi diag -r 3` and the "
  "same all_reduce test as this morning.\n4. Only if both pass would it come back, and with these errors I would "
  "not expect that.\n\nThe reason text names the ticket so anyone who looks at `sinfo -R` can find the history.")

regular("node")
U(f"The HGX boxes are under support with {M['vendor']}. Draft the RMA note for them. Keep it factual.")
A("Draft:\n\nSubject: RMA request, HGX H100 node hgx-r3-14, GPU at index 4\n\nDuring a multi-node training job the "
  "GPU at index 4 reported repeated contained and uncorrectable memory errors with row remapping, then fell off "
  "the bus; the PCIe root port logged a fatal uncorrected error. After a GPU reset the device is visible again but "
  "continues to accumulate uncorrectable DRAM errors, and an eight-GPU all_reduce test on the node reaches a small "
  "fraction of the bandwidth of an identical neighbour. Attached: the kernel log excerpt, the ECC report, the "
  "nccl-tests output for both nodes and the nvidia-bug-report archive (to follow after collection). The node is "
  "drained and will be reimaged and put through dcgmi diagnostics today. We request replacement of the GPU "
  "baseboard or module as appropriate.")

regular("node")
U("How long do these RMAs usually take, and do we keep a spare?")
A("From what the support contract usually promises for these systems, a few business days once the vendor has "
  "accepted the evidence; the bug report and the diagnostics are what they ask for first, so collecting them "
  "today keeps the clock short. Whether we hold a spare module is something Yusra will know; if we do, the swap "
  "can happen first and the failed part goes back afterwards. Either way the node stays drained until the part is "
  "in and the diagnostics pass.")

regular("node")
U("Is r3-14 alone, or is the whole rack going? Pull the GPU error counters across r3.")
sh("pdsh -w hgx-r3-[01-16] \"nvidia-smi --query-gpu=index,pci.bus_id,temperature.gpu,"
   "ecc.errors.uncorrected.volatile.total,ecc.errors.corrected.volatile.total,remapped_rows.pending,power.draw "
   "--format=csv,noheader,nounits\" | sort",
   fitN(lambda n: pdsh_gpu_query([f"hgx-r3-{k:02d}" for k in range(1, n + 1)], clock(9, 40)), 16, hi=7100))
A("It is alone. Across the rack every GPU reports zero uncorrected errors and at most a stray corrected one, no "
  "pending row remaps, and normal temperatures and power for whatever is running on them. Only index 4 on the "
  "fourteenth node has uncorrected errors and a pending remap, and it is the only GPU drawing idle power on a node "
  "that should be idle. So this is one failing device, not a rack-level power or cooling problem.")

regular("node")
U("Resubmit kestrel from its last checkpoint, excluding r3-14, and show me the job once it's scheduled.")
sh(f"sbatch --parsable --exclude=hgx-r3-14 -J kestrel-13b-sft-v2 -N 4 -p train scripts/slurm/launch.sbatch "
   f"experiment=kestrel_13b_sft_v2 run.resume_from=latest && scontrol show job {JOB_KESTREL_RE}",
   N(lambda: f"{JOB_KESTREL_RE}\n" + scontrol_job(JOB_KESTREL_RE, "kestrel-13b-sft-v2", [f"hgx-r3-{k:02d}" for k in (9, 10, 11, 12)],
                                                   "RUNNING", "pkaranjit", "research-llm", excl=BAD_NODE)))
A("Kestrel is running again on four healthy nodes in the same rack, with the bad node excluded explicitly, "
  "resuming from its latest checkpoint, which was written well before the hang. It loses roughly half an hour of "
  "steps plus the restart time. I would check its first step lines in a few minutes to confirm the resume step "
  "and that the collectives are running at normal speed.")

# --- the web-docs snapshot ------------------------------------------------------------

SNAP = "s3://corvane-datasets/webdocs-v9/snap-20260301/"

regular("node")
U("Should we be checking aggregate ECC counters across the fleet regularly, so this doesn't surprise us again?")
A("Yes, and it is cheap. The aggregate counters survive resets and reboots, so a weekly query across all nodes "
  "shows which GPUs are accumulating errors long before one falls off the bus. I would alert on any "
  "uncorrectable count above zero and on a pending row remap, and drain such a node at the next quiet moment, "
  "with the pager holder's ack as usual. The health check that runs before each job could also refuse a node "
  "with a pending remap, which would have stopped kestrel from landing there.")

regular("dataset")
U("Back to those missing-shard warnings in atlas's log. Is the webdocs-v9 snapshot from the 1st actually complete? "
  "List the prefix and pull its manifest.")
sh(f"aws s3 ls {SNAP} --human-readable --summarize | tail -n 110",
   planted(lambda: shard_listing(107, set(MISSING_SHARDS), datetime.datetime(2026, 3, 1, 22, 40, 5)), ["D1"]),
   expect=["D1"])
say("The listing ends short of a full set. The manifest, with the per-shard list trimmed to the first entries:")
sh(f"aws s3 cp {SNAP}manifest.json - | jq '.shards |= .[:14]'", planted(lambda: manifest_json(P["D2"], 14), ["D2"]),
   expect=["D2"])
A("The snapshot is incomplete. The manifest declares the full shard count and the snapshot-wide totals, but the "
  "prefix holds fewer objects than the manifest's shards plus the two metadata files, so a few dozen shards are "
  "missing, and the listing's tail shows the gaps are in the upper part of the index range. The manifest itself "
  "was written at the end of the build, which is why the loader trusted it: it reads the shard list from the "
  "manifest and only discovers a missing shard when it tries to open it.")

regular("dataset")
U("Which shards exactly? Run the verifier against the manifest.")
sh(f"python tools/data/verify_snapshot.py --manifest {SNAP}manifest.json --prefix {SNAP} --sample-sha 64",
   N(lambda: verify_snapshot(MISSING_SHARDS)))
A("Two contiguous ranges are missing, nothing else: every shard that is present has the size the manifest "
  "expects, there are no stray keys, and the sampled checksums match. Contiguous ranges point at a copy job that "
  "stopped part-way, not at random loss or a lifecycle rule. Those ranges are exactly the shards atlas's loader "
  "kept skipping.")

regular("dataset")
U("And the webdocs data config the loader uses: what happens on a missing shard, and how is the loader set up?")
read("conf/data/webdocs_v9.yaml", planted(lambda: data_config(snap="20260301", nw=int(P["D3"].split(": ")[1]), pf=4,
                                                              buf=100000, missing="skip", retries=3, pool=64,
                                                              mindoc=32, maxdoc=131072), ["D3"]), expect=["D3"])
say("Which data configs use which policy, and where the loader reads it:")
sh("grep -rn 'on_missing_shard' conf/data/ src/data/ | sort",
   N(lambda: "\n".join([f"conf/data/{d}.yaml:{rng.randint(18, 22)}:on_missing_shard: {pol}   # skip | fail | wait"
                         for d, pol in [("code_v3", "fail"), ("forumqa_v2", "wait"), ("mix_v7", "skip"),
                                        ("sft_mix_v5", "fail"), ("webdocs_v9", "skip"), ("arxivmath_v4", "fail"),
                                        ("images_v2", "skip"), ("patents_v3", "fail")]] +
                        ["src/data/stream.py:41:MISSING_POLICIES = (\"skip\", \"fail\", \"wait\")",
                         "src/data/stream.py:118:        policy = self.cfg.on_missing_shard",
                         "src/data/stream.py:131:            if policy == \"skip\":",
                         "src/data/stream.py:132:                log.warning(\"%s: NoSuchKey from object store, skipping "
                         "(on_missing_shard=skip, worker %d)\", shard, self.worker_id)",
                         "src/data/stream.py:133:                return self._next_shard()",
                         "src/data/stream.py:134:            if policy == \"wait\":",
                         "src/data/stream.py:135:                return self._wait_for(shard, timeout_s=self.cfg.get(\"wait_s\", 1800))",
                         "src/data/stream.py:136:            raise MissingShardError(shard)",
                         "src/data/stream.py:212:    on_missing_shard: str = \"skip\"   # default when a config omits it",
                         "tests/test_data_stream.py:77:def test_on_missing_shard_fail_raises(tmp_bucket):",
                         "tests/test_data_stream.py:91:def test_on_missing_shard_skip_warns(tmp_bucket, caplog):",
                         "tests/test_data_stream.py:108:def test_on_missing_shard_wait_times_out(tmp_bucket):"])))
A("The config confirms it: the missing-shard policy is skip, so a shard that cannot be opened is dropped and the "
  "worker moves to the next one in its shuffle order, with only a warning. The rest is an ordinary streaming "
  "setup, several workers per rank with prefetching and persistent workers, a large document shuffle buffer and "
  "packing to the run's sequence length. Skip was presumably chosen to survive transient read errors, but with "
  "retries already configured, a shard that is still missing after them is a real hole in the data, and a run "
  "should stop rather than silently reweight its mix.")

regular("dataset")
U("Could the skipped shards have biased r14 enough to matter for the model in the end, if it had survived?")
A("Probably not much in the end, but enough to matter locally. The missing shards are a small share of the "
  "snapshot, so the overall mix barely changes. The local effect is the problem: with skip, each worker replaces "
  "a missing shard with the next one in its order, so for a few hours some neighbouring shards are read twice as "
  "often, and the batches repeat more than the shuffle intends. That kind of short-lived repetition is a known "
  "trigger for loss spikes. Over a whole run it would wash out; at the moment it happened it was one more push "
  "towards the spike.")

regular("dataset")
U("Why is it incomplete? The sync job that builds the snapshot ran Sunday night.")
sh("kubectl -n data logs job/snapshot-sync-webdocs-v9-20260301 --tail=70", fitN(lambda n: sync_job_log(n), 70))
A("The sync job ran into throttling from the source store: a steady stream of slow-down responses, retries with "
  "backoff, some shards given up on after the last retry, and finally the job's deadline cancelled the transfers "
  "still in flight. Then it did the worst possible thing for us: it copied the manifest anyway, because it is "
  "configured to copy the manifest on exit whatever happened, and exited with an error that nobody was alerted "
  "on. So the snapshot looked finished to every reader.")

regular("dataset")
U("Plan for the shards? r15 will read that snapshot, and I don't want to touch it while a run is reading it.")
A("Adding the missing shards is additive: readers only open a shard when they reach it, and a shard that appears "
  "is read normally, so filling the gaps under a running job is safe. What I would not do is rewrite or re-upload "
  "shards that are already present, or the manifest. So: a resync job limited to the missing ranges, with the "
  "verifier run afterwards; and r15 switched to fail on a missing shard, so that if it reaches a gap before the "
  "resync is done it stops loudly instead of skewing its data. r15 resumes well before those ranges, so the resync "
  "has hours of margin.")

regular("dataset")
U("Go: start the resync for just the missing ranges, and patch r15 to fail hard on a missing shard.")
sh("kubectl -n data create job snapshot-resync-webdocs-v9-0304 --from=cronjob/snapshot-sync -- python -m "
   "tools.data.resync --manifest " + SNAP + "manifest.json --only-missing --workers 24 && sleep 20 && kubectl -n data "
   "get pods -o wide && kubectl -n data logs job/snapshot-resync-webdocs-v9-0304 --tail=20",
   fitN(lambda n: "job.batch/snapshot-resync-webdocs-v9-0304 created\n\n" +
        kubectl_pods([("snapshot-resync-webdocs-v9-0304", 1), ("feature-backfill", 2), ("tokenize-shards", n)],
                     INFER_NODES) + "\n\n" + "\n".join(
            f"{iso(clock(10, 12, 4 * k))} INFO   {'planning' if k == 0 else 'copy'} "
            f"{'' if k == 0 else f'shard-{rng.choice(MISSING_SHARDS):05d}.tar '}"
            f"{f'{len(MISSING_SHARDS)} shards to copy, 24 workers' if k == 0 else f'{rng.uniform(180, 260):.1f} MiB/s'}"
            for k in range(12)), 6))
say("The resync is copying. Now the r15 change:")
d, FILES[ATLAS_R15] = make_diff(ATLAS_R15, FILES[ATLAS_R15], [
    ("  clip_grad: 1.0", 1, ["  clip_grad: 1.0", "", "data:", "  on_missing_shard: fail"])])
patch(ATLAS_R15, d)
A("The resync job is running with only the missing shards in its plan and is copying at a healthy rate; it should "
  "be done well within the hour. r15's experiment file now overrides the missing-shard policy to fail, and the "
  "compose check passes. The change only takes effect on r15's next start, which is fine: it is hours away from "
  "the gap. If it does hit one, it will stop instead of skipping.")

# --- marlin eval ----------------------------------------------------------------------

regular("dataset")
U("Write a short note for the data platform channel about the sync job, so they hear it from us first.")
A("Draft:\n\nHeads-up: the web-docs snapshot sync on Sunday night was throttled by the source store, gave up on "
  "two ranges of shards, hit its deadline and still published the manifest, then exited with an error that did "
  "not alert. Readers saw a complete-looking snapshot with holes; one pretraining run skipped the missing shards "
  "for hours before it diverged. We have resynced the missing ranges and verified the snapshot. Suggestions for "
  "your side: write the manifest last and only after verification, and alert on the job's failure. Happy to "
  "pair on it.")

regular("eval")
U("Marlin. Maelis says rc3 dropped on docqa compared with rc2. Show me both results files.")
read("evals/results/marlin-1.3b-instruct/rc3/docqa.json",
     planted(lambda: eval_json(P["E1"], em=float(P["E1"].split(": ")[1]), verbose=1.0, when=clock(1, 14)), ["E1"]),
     expect=["E1"], numbered_=False)
say("And rc2 from last week:")
read("evals/results/marlin-1.3b-instruct/rc2/docqa.json",
     N(lambda: eval_json(None, em=rng.uniform(0.685, 0.715), verbose=0.0, when=datetime.datetime(2026, 2, 25, 2, 3))),
     numbered_=False)
say("Some of the examples that flipped from right to wrong:")
sh("python -m evals.compare --suite docqa --a evals/results/marlin-1.3b-instruct/rc2 --b "
   "evals/results/marlin-1.3b-instruct/rc3 --only a_right_b_wrong --show 8", N(lambda: prediction_diff(8)))
A("The drop is real and broad: rc3's exact match is several points below rc2's, outside both bootstrap intervals, "
  "and every subset is down, not just one document type. The other columns explain a lot: rc3's answers are "
  "several times longer on average and its refusal rate is far higher, while F1 fell less than exact match. That "
  "is what a model that answers correctly but wordily looks like under exact match: the right span buried in a "
  "sentence of explanation scores zero. Both runs used the same suite version and greedy decoding.")

regular("eval")
U("Is the eval setup the same for both? Show me the marlin docqa eval config.")
read("evals/configs/marlin_docqa.yaml", planted(lambda: EVAL_CFG.format(gen=P["E2"], shots=3, bs=32), ["E2"]),
     expect=["E2"])
say("And how the harness builds the prompt from it:")
read("evals/harness/evals/prompting.py", PROMPTING_SRC)
A("The eval config is shared by every candidate of this model and has not changed between the two runs: greedy "
  "decoding with a fixed length cap and stop sequences, few-shot examples from the dev split, no system prompt "
  "from the harness side, and normalised exact match and F1. One detail matters: the template comes from the "
  "model's own folder, so whatever chat template a candidate ships with is what the harness uses. A template "
  "change in the model would show up here as a model change.")

regular("eval")
U("What changed in marlin between rc2 and rc3? Code and template, not the weights.")
MARLIN_SUBJECTS = ["sft: three epochs on sft-mix-v5", "tokenizer: pin revision", "generation: stop on eos only",
                   "readme: intended use and limits", "data: drop near-duplicate prompts", "sft: lr 1e-5 -> 8e-6",
                   "eval: docqa suite 3.2.0", "eval: safety suite refresh", "sft: pack to 4096", "ci: template render test",
                   "prefs: prefs-v2 mix", "sft: loss on assistant turns only", "chore: regenerate lockfile"]
git("git log --date=short --format='%h %ad %an  %s' marlin-rc2..marlin-rc3 -- models/marlin/ recipes/sft/ evals/",
    fitP(lambda n: git_log(n, P["E3"], "chat: add a default system turn to the template", 5, subjects=MARLIN_SUBJECTS,
                           author="Julien Moreau"), 40, ["E3"], lo=1300), expect=["E3"])
say("The template commit is the one that changes what the model sees at inference. Its diff:")
git("git diff marlin-rc2 marlin-rc3 -- models/marlin/",
    "\n".join(["diff --git a/models/marlin/chat_template.jinja b/models/marlin/chat_template.jinja",
               f"index {hexs(7)}..{hexs(7)} 100644", template_diff(),
               "diff --git a/models/marlin/generation_config.json b/models/marlin/generation_config.json",
               f"index {hexs(7)}..{hexs(7)} 100644", "--- a/models/marlin/generation_config.json",
               "+++ b/models/marlin/generation_config.json", "@@ -1,8 +1,8 @@", " {", '   "bos_token_id": 1,',
               '-  "eos_token_id": [2, 32000],', '+  "eos_token_id": 2,', '   "pad_token_id": 0,',
               '   "do_sample": false,', '   "repetition_penalty": 1.0,', '   "transformers_version": "4.44.2"', " }",
               "diff --git a/models/marlin/README.md b/models/marlin/README.md", f"index {hexs(7)}..{hexs(7)} 100644",
               "--- a/models/marlin/README.md", "+++ b/models/marlin/README.md", "@@ -14,9 +14,12 @@ ## Intended use",
               " Short-form assistant for internal tools: extraction, summaries of single documents, form filling.",
               " Not intended for open-ended chat or for legal or medical advice.", " ", "-## Prompting",
               "-Send the conversation as-is; the template adds no system turn.",
               "+## Prompting", "+The template adds a default system turn when the conversation has none. Products",
               "+that need terse output should send their own system turn.", "+", " ## Evaluation",
               " Release candidates are gated on docqa, safety and longctx (see evals/configs/).",
               " Scores are reported with bootstrap 95% intervals."]))
A("The template now injects a default system turn whenever the conversation does not start with one, and that "
  "system turn tells the model to answer thoroughly and explain its reasoning. The harness sends no system prompt "
  "of its own, so every docqa prompt now arrives with that instruction, and the model does what it is told: long, "
  "explanatory answers and more hedged refusals. The same range also changed the end-of-sequence tokens in the "
  "generation config, which can make answers run on until the length cap. Neither is a weights problem.")

regular("eval")
U("Does that match what we saw in the outputs, longer answers and more refusals?")
A("Yes, on every count. Average output length went up several-fold, which is the explain-your-reasoning instruction "
  "at work; the refusal rate went up, which is the say-when-the-document-is-not-enough instruction, triggered on "
  "questions where the model used to just extract a span; and exact match fell more than F1, because F1 still "
  "gives partial credit when the right span is inside a longer answer. The per-subset pattern fits too: the "
  "subsets with short factual answers fell most. A quick confirmation is to run rc3 with rc2's template.")

regular("eval")
U("Should we re-run the other release suites on rc3 too, or is docqa enough?")
A("Re-run them, with the old template, because the template change affects every suite, not just docqa: safety "
  "answers get longer and more hedged, long-context answers may hit the length cap. The gate needs all three "
  "suites on the exact artifact we ship, and after the template fix that artifact is a new version. The eval "
  "partition is quiet at midday, so the three suites fit before the go/no-go.")

regular("eval")
U("What's in the registry for marlin v14, the rc3 build? And the version list around it.")
sh("regctl versions get marlin-1.3b-instruct 14 -o yaml",
   planted(lambda: regctl_version(14, P["E4"], 3), ["E4"]), expect=["E4"])
say("And the list of versions:")
sh("regctl versions list marlin-1.3b-instruct",
   N(lambda: regctl_list(14) + "\n\n" + "\n".join(
       f"v{v}: source_checkpoint step_{rng.randint(10, 22) * 500:06d}, dataset_refs sft-mix-v{rng.choice([4, 5])}"
       for v in range(14, 7, -1))))
A("Version 14 is the rc3 build, in Staging with its eval gate still pending, signed for chat input with an eight "
  "thousand token context, and its lineage points at the previous version as parent and at the SFT and preference "
  "data it was trained on. The source run recorded there is the training run that produced its checkpoint, so "
  "the weights are traceable. The production version is three back. Nothing in the registry itself is wrong; the "
  "problem is the template file it ships with.")

regular("eval")
U("Re-run docqa on rc3 with rc2's template to confirm. Use the eval partition.")
sh("srun -p eval --gres=gpu:8 -t 1:00:00 python -m evals.run suite=docqa model.registry_ref=marlin-1.3b-instruct/14 "
   "model.template=models/marlin/chat_template@marlin-rc2.jinja report.upload=null",
   fitN(lambda n: eval_run_log(n, rng.uniform(0.688, 0.712), "chat_template@marlin-rc2"), 38))
A("Confirmed. With rc2's template, rc3 is back in rc2's range on exact match, answers are short again and the "
  "refusal rate is normal, and the gate passes. So rc3's weights are fine and the regression comes entirely from "
  "the template change. The decision for this afternoon becomes simple: ship rc3 with the old template, or hold "
  "it until the template is fixed properly. The default system turn was meant for the chat product, where "
  "verbose answers are wanted, so it belongs in the product's prompt, not in the model's template.")

regular("eval")
U("Draft a short note for Maelis and for the go/no-go.")
A("Draft:\n\n*marlin rc3 docqa regression: cause found, weights are fine.*\nrc3's template adds a default system "
  "turn asking for thorough, explained answers. The harness sends no system prompt, so every docqa prompt got "
  "that instruction; answers became much longer and refusals rose, which exact match punishes. Re-running rc3 "
  "with rc2's template brings it back to rc2's level and passes the gate.\n*Proposal:* go, with the template "
  "reverted to rc2's (no default system turn) as a new registry version built from the same weights; the chat "
  "product sets its own system prompt.\n*Also:* a template render test in CI, and the harness will pass an "
  "explicit empty system prompt so template defaults cannot leak into evals.")

# --- serving canary --------------------------------------------------------------------

CANARY_POD = f"summarizer-{hexs(9)}-{hexs(5)}"

regular("serving")
U("Serving. The summarizer canary on vLLM has had latency spikes since yesterday's rollout. Show me the pods in "
  "the serving namespace and the canary's values file.")
sh("kubectl -n serving get pods -o wide",
   fitN(lambda n: kubectl_pods([(s, rng.randint(2, 5)) for s in SERVICES] + [("summarizer", 6 + n)], INFER_NODES), 2))
read("deploy/serving/summarizer/values-canary.yaml",
     planted(lambda: CANARY_VALUES.format(seqs=P["S1"]), ["S1"]), expect=["S1"])
say("And one canary pod's description, for its events:")
sh(f"kubectl -n serving describe pod {CANARY_POD}", N(lambda: describe_pod(CANARY_POD, rng.choice(INFER_NODES))))
A("All pods are up, including the two canary replicas next to the stable ones. The canary's values differ from the "
  "base in more than the image: a newer vLLM build, a new model version with a longer maximum context, chunked "
  "prefill turned off, a lower GPU memory share and a larger prefill batch. A longer context with less memory for "
  "the KV cache means fewer sequences fit at once, and without chunked prefill a long prompt holds the GPU for its "
  "whole prefill while everything else waits. Both are candidates for latency spikes under mixed traffic.")

regular("serving")
U("p99 for the canary versus stable over the last 6h, from Prometheus.")
can = latency_series(120, 0.92, spikes=sorted(rng.sample(range(30, 118), 14)), spike_max=float(P["S2"].split("=")[1]))
sh("promq --range 6h --step 3m 'histogram_quantile(0.99, sum by (le) (rate(vllm:e2e_request_latency_seconds_bucket"
   "{namespace=\"serving\", service=\"summarizer\", track=\"canary\"}[5m])))'",
   planted(lambda: promq(120, can, step=3), ["S2"]), expect=["S2"])
say("Stable, same window and query:")
sh("promq --range 6h --step 3m 'histogram_quantile(0.99, sum by (le) (rate(vllm:e2e_request_latency_seconds_bucket"
   "{namespace=\"serving\", service=\"summarizer\", track=\"stable\"}[5m])))'",
   N(lambda: promq(120, latency_series(120, 0.81), step=3)))
A("The two curves agree most of the time: both sit around a second at p99. The canary then has repeated spikes, "
  "several times its baseline, clustered in the busier hours, while stable stays flat apart from ordinary noise. "
  "With only five percent of traffic the canary sees few requests per replica, so a handful of slow requests is "
  "enough to move its p99; but the spikes repeat and stable never shows them, so they are real.")

regular("serving")
U("Logs from one of the summarizer canary pods.")
sh(f"kubectl -n serving logs {CANARY_POD} -c vllm --since=2h | tail -n 70",
   fitP(lambda n: vllm_log(n, preempt_end=int(P["S3"].split("=")[1])), 70, ["S3"]), expect=["S3"])
A("The log explains the spikes. Whenever a burst arrives the canary runs at its sequence cap with a queue behind "
  "it and a KV cache at nearly full, and the scheduler keeps preempting running sequences for lack of KV cache "
  "space; the cumulative preemption counter climbs steadily through the log. A preempted sequence in recompute "
  "mode throws away its cache and redoes its prefill later, which is exactly a request that suddenly takes "
  "several times longer. The occasional 429 and 503 are the queue overflowing.")

regular("serving")
U("Couldn't we just give the canary more replicas and be done with it?")
A("It would lower the canary's p99 a little, because each replica would see fewer concurrent requests, but it "
  "would also hide the problem we need to know about before promotion. At full rollout the canary settings would "
  "run every replica, and each replica would again run out of KV cache under bursts. The canary exists to show "
  "how one replica with the new settings behaves under real traffic; the right fix is the per-replica setting, "
  "and then the same replica count as stable.")

regular("serving")
U("What does the summarizer's base values file say about autoscaling? The canary inherits it.")
read("deploy/serving/summarizer/values.yaml",
     planted(lambda: BASE_VALUES.format(seqs="max_num_seqs: " + str(nz("max_num_seqs")), down=P["S4"]), ["S4"]),
     expect=["S4"])
say("And the autoscalers as the cluster sees them:")
sh("kubectl get hpa -A", N(lambda: table(["NAMESPACE", "NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS",
                                          "AGE"], [[ns, s, f"{'Rollout' if 'summ' in s else 'Deployment'}/{s}",
                                                    f"{rng.randint(0, 14)}/{rng.choice([8, 12, 70])}" + ("%" if ns != "serving" else " (avg)"),
                                                    rng.choice([1, 2, 3, 4]), rng.choice([6, 12, 16, 24]),
                                                    rng.randint(1, 14), f"{rng.randint(3, 300)}d"]
                                                   for ns, s in [("serving", x) for x in SERVICES + ["summarizer"]] +
                                                   [("features", "online-api"), ("features", "materializer-ui"),
                                                    ("data", "tokenizer-api"), ("data", "dedup-api"), ("evals", "evals-ui"),
                                                    ("platform", "trackd"), ("platform", "regd"), ("platform", "promq-gw"),
                                                    ("research", "notebook-proxy"), ("monitoring", "grafana"),
                                                    ("monitoring", "loki-gateway"), ("argo", "argo-rollouts-dashboard")]])))
A("Autoscaling is on the base, keyed to the number of waiting requests per replica, scaling up immediately and "
  "scaling down only after a stabilisation period and by a fraction per minute. That is sensible for the stable "
  "track. It does not help the canary, though: the canary's replica count is fixed by the rollout's weight, and "
  "its problem is not too few replicas but each replica preempting its own work. More replicas would only hide it.")

regular("serving")
U("Why would the canary behave so differently from stable with the same traffic mix?")
A("Because its per-replica capacity for concurrent work is lower while the work got bigger. The new model version "
  "allows a longer context and the summarizer's prompts have been getting longer, so each sequence needs more KV "
  "cache; at the same time the canary gives vLLM a smaller share of GPU memory, so there are fewer cache blocks to "
  "go round. Its sequence cap still lets the scheduler admit many sequences, and with chunked prefill off, long "
  "prefills run in one piece. The scheduler admits more than fits, runs out of blocks mid-decode and preempts. "
  "Stable runs the old settings with more memory and chunked prefill, and never gets into that state.")

regular("serving")
U("Patch the canary values: turn chunked prefill on and give the KV cache more headroom. Leave the sequence cap "
  "alone for now, one change at a time is enough.")
d, FILES["deploy/serving/summarizer/values-canary.yaml"] = make_diff(
    "deploy/serving/summarizer/values-canary.yaml", FILES["deploy/serving/summarizer/values-canary.yaml"], [
        ("  gpu_memory_utilization: 0.82", 1, ["  gpu_memory_utilization: 0.90"]),
        ("  enable_chunked_prefill: false", 2, ["  enable_chunked_prefill: true", "  max_num_batched_tokens: 4096"])])
patch("deploy/serving/summarizer/values-canary.yaml", d, compose=False)
say("Lint passes. What Helm would change on the canary:")
sh("helm diff upgrade summarizer deploy/serving/chart -n serving -f deploy/serving/summarizer/values.yaml "
   "-f deploy/serving/summarizer/values-canary.yaml --context 4",
   N(lambda: "\n".join(["serving, summarizer, Rollout (argoproj.io) has changed:", "  # Source: chart/templates/rollout.yaml",
                        "  apiVersion: argoproj.io/v1alpha1", "  kind: Rollout", "  metadata:", "    name: summarizer",
                        "    namespace: serving", "  spec:", "    template:", "      spec:", "        containers:",
                        "          - name: vllm", "            args:", "              - --model=/models/m-0031/v9",
                        "              - --max-model-len=16384", "              - --block-size=16",
                        "              - --swap-space=4", "              - --kv-cache-dtype=auto",
                        "-             - --gpu-memory-utilization=0.82", "+             - --gpu-memory-utilization=0.90",
                        "-             - --max-num-batched-tokens=16384", "+             - --max-num-batched-tokens=4096",
                        "+             - --enable-chunked-prefill", "              - --enable-prefix-caching",
                        "              - --port=8000", "            resources:", "              limits:",
                        "                nvidia.com/gpu: 1", "                memory: 48Gi",
                        f"      annotations:", f"-       checksum/values: {hexs(64)}", f"+       checksum/values: {hexs(64)}",
                        "serving, summarizer-engine-config, ConfigMap (v1) has changed:",
                        "  # Source: chart/templates/configmap.yaml", "  data:",
                        "-   VLLM_EXTRA_ARGS: \"--gpu-memory-utilization=0.82 --max-num-batched-tokens=16384\"",
                        "+   VLLM_EXTRA_ARGS: \"--gpu-memory-utilization=0.90 --max-num-batched-tokens=4096 "
                        "--enable-chunked-prefill\"",
                        "serving, summarizer-canary-analysis, AnalysisTemplate (argoproj.io) has no changes",
                        "serving, summarizer, Service (v1) has no changes",
                        "serving, summarizer, PodDisruptionBudget (policy) has no changes"])))
A("The patch raises the memory share back to the stable track's level and turns chunked prefill on with a smaller "
  "prefill batch, so long prompts are prefilled in slices between decode steps instead of stalling them. The Helm "
  "diff touches only the canary's engine arguments and the values checksum; the service, the disruption budget and "
  "the analysis template are unchanged. The sequence cap stays as it was, as you asked.")

regular("serving")
U("Before we roll it: what would make you abort the canary instead of promoting it?")
A("Any of three things during the window. The p99 spiking again above stable's band, even once, since the "
  "spikes were the symptom we are fixing. Preemption warnings reappearing in the canary pods, which would mean "
  "the memory change was not enough. Or errors: any 5xx or 429 share above stable's. A slightly higher median "
  "latency on its own would not worry me; chunked prefill can trade a little median for a much better tail.")

regular("serving")
U("Roll it out to the canary at 5% per the rule, and show me the rollout state.")
sh("helm upgrade summarizer deploy/serving/chart -n serving -f deploy/serving/summarizer/values.yaml "
   "-f deploy/serving/summarizer/values-canary.yaml --wait=false && kubectl argo rollouts get rollout summarizer "
   "-n serving --no-color",
   N(lambda: f"Release \"summarizer\" has been upgraded. Happy Helming!\nNAME: summarizer\nLAST DEPLOYED: Wed Mar  4 "
             f"11:{rng.randint(20, 40)}:{rng.randint(10, 59)} 2026\nNAMESPACE: serving\nSTATUS: deployed\nREVISION: "
             f"{rng.randint(40, 60)}\n\n" + rollout_status(5, 1, [hexs(5) for _ in range(6)])))
A("The new canary revision is at five percent with the rollout paused on its first step, and the analysis run "
  "for the previous step is done. The two canary pods restarted with the new arguments and are ready. Per the "
  "rule it stays there for at least half an hour; I would look at its p99 and its preemption counter after that, "
  "and put the p99 into the ticket before anyone promotes.")

# --- feature store ----------------------------------------------------------------------

regular("features")
U("The recs team says the engagement features look stale in the ranker. Read the user_engagement view and list its "
  "recent materializations.")
read("features/views/user_engagement.yaml", planted(lambda: feature_view(P["F1"]), ["F1"]), expect=["F1"])
say("The definition looks normal. Its materialization history:")
sh("fsctl materializations list --view user_engagement --limit 40",
   planted(lambda: materializations(40, P["F2"], datetime.date(2026, 3, 2)), ["F2"]), expect=["F2"])
A("The view is defined the usual way: keyed on the user, a dozen activity features from the daily activity table, "
  "materialized every three hours with a short lookback, and a TTL in the online store. The materialization jobs "
  "all succeed and write a normal number of rows, but look at their source windows: since yesterday morning every "
  "run has materialized the same source day again. The jobs are healthy; the source table stopped advancing, so "
  "they keep rewriting the day before yesterday, and the online store serves values that are a day and a half old.")

regular("features")
U("Is anything else reading the daily activity table that might be stale too?")
A("Probably, and it is worth checking before the recs team finds out on their own. The activity table feeds at "
  "least the notification-timing model through the same view, and the offline training sets that join on it. "
  "The feature registry lists every consumer of a view, and the warehouse lineage shows the other readers of the "
  "table; one message to those owners with the same explanation would cover it.")

regular("features")
U("How stale is it from the online store's point of view, and how long until values start expiring?")
sh("fsctl online-store freshness --view user_engagement && fsctl online-store stats --view user_engagement",
   N(freshness_table))
A("Every feature's newest event time is the end of the day before yesterday, so they are all a day and a half "
  "old and flagged as warnings or stale. Because each materialization rewrites the same day with a fresh write "
  "time, the TTL clock keeps being reset: nothing will expire, and the ranker will keep serving the same stale "
  "values until the source table moves. The online store itself is healthy: hit rates and read latencies are "
  "normal. This needs the warehouse team's daily activity load fixed, then a backfill for the missing days.")

regular("features")
U("Should the engagement view's TTL be shorter, so stale values at least expire?")
A("A shorter TTL would not have helped here, because each materialization rewrote the stale day and reset the "
  "clock. And in general, expiring features makes the ranker fall back to defaults, which is often worse than "
  "day-old values. What the view needs is a freshness check on the source window: if the newest source day does "
  "not advance for longer than a day, the materialization should fail and alert instead of succeeding on old "
  "data. The TTL can stay as it is.")

regular("features")
U("Ask the warehouse side what happened to the activity table, and tell the recs team what to expect. Draft both.")
A("To the warehouse team:\n\n> The daily activity table that feeds the user engagement features has not advanced "
  "since the load for the 2nd; our materializations keep reading that day. Could you check the load job for the "
  "3rd? Once it lands we will backfill the feature view for the missing days.\n\nTo the recs team:\n\n> Engagement "
  "features in the online store are about a day and a half old: the upstream activity table stopped updating. "
  "The store keeps serving the last values because each refresh resets their expiry. We are chasing the upstream "
  "load; once it lands we backfill, and you should see fresh values within one materialization cycle. Until then, "
  "treat recency-sensitive features with suspicion.")

# --- images and CI ---------------------------------------------------------------------

regular("image")
U("Kestrel's hang: I want to rule out an NCCL bump. Show me the trainer image's Dockerfile, and the serving one for "
  "comparison.")
read("docker/trainer/Dockerfile", planted(lambda: TRAIN_DOCKERFILE.format(nccl=P["I1"]), ["I1"]), expect=["I1"])
say("And the serving image:")
read("docker/serving/Dockerfile", N(lambda: SERVE_DOCKERFILE.format(nccl="NCCL_VERSION=" + nz("nccl"))))
A("The training image pins NCCL explicitly through a build argument, on top of the PyTorch base image, and the "
  "serving image pins its own NCCL wheel separately, to a different version, since vLLM brings its own. Neither "
  "Dockerfile has changed recently as far as these files show, and kestrel's failure does not look like an NCCL "
  "bug anyway: the transport errors name a single peer, and that peer's GPU fell off the bus at the same moment. "
  "I would not touch the pin as part of this incident.")

regular("image")
U("The eval harness fix PR for the template leak: is its CI green? Show me the tail of the test job's log.")
sh("gh run view 8841207713 --log --job 24399112 | cut -f3- | tail -n 70",
   planted(lambda: pytest_log("evals", P["I2"], failed=[("tests/test_bootstrap.py", 3)]), ["I2"]), expect=["I2"])
A("Not quite: one test failed, and it is not related to the change. It is the bootstrap determinism test, which "
  "compares two runs with the same seed, and it has been flaky before when the CI runner's thread count changes. "
  "Everything else passed, including the new template render tests and the backend tests. I would re-run the job "
  "once and, if it fails again, pin the bootstrap's thread count rather than loosen the assertion.")

regular("image")
U("Re-run it, and while that runs: should the harness always send an explicit system prompt, even an empty one?")
A("Yes. An eval should control every input the model sees, and a template that adds its own system turn when none "
  "is given is an input the harness did not choose. Sending an explicit system turn, empty by default and set per "
  "suite when a suite needs one, makes the harness's prompt the same for every candidate, so a template change "
  "shows up as a template diff in review rather than as a score change in an eval. The one thing to check is that "
  "every template handles an empty system turn gracefully; a render test per model covers that.")

# --- costs ----------------------------------------------------------------------------

regular("costs")
U("Finance says GPU spend is up by about a third this month. Start with kubecost for the research-sweeps namespace "
  "over the last week.")
sh("kubecost-cli allocation --namespace research-sweeps --window 7d --aggregate controller --accumulate",
   planted(lambda: kubecost(P["C1"], [f"job/hpo-trial-{k:04d}" for k in sorted(rng.sample(range(300, 900), 34))]),
           ["C1"]), expect=["C1"])
say("For comparison, the inference namespace over the same week:")
sh("kubecost-cli allocation --namespace inference-prod --window 7d --aggregate controller --accumulate",
   N(lambda: kubecost(None, [f"rollout/{s}" if s == "summarizer" else f"deployment/{s}" for s in SERVICES + ["summarizer"]]
                      + ["statefulset/redis-online", "deployment/gateway", "deployment/tokenizer-api",
                         "deployment/safety-filter", "deployment/ocr-lite", "deployment/translate-small",
                         "deployment/embed-batch", "cronjob/warmup-probe", "deployment/shadow-summarizer",
                         "deployment/ab-router", "statefulset/kv-spill", "deployment/quota-api"])))
A("The sweeps namespace is where the money went. Its week is dominated by GPU cost, and the largest single line "
  "is not a trial at all but the idle allocation: GPUs reserved by the namespace's node pool with nothing running "
  "on them. Many of the trial jobs also show low efficiency, meaning their pods held GPUs while waiting. The "
  "inference namespace, by contrast, is mostly busy GPU time with a small idle share. So the increase is mostly "
  "sweep capacity kept warm, not more useful work.")

regular("costs")
U("Checkpoint storage too: what does Cost Explorer say for the ckpt bucket, month by month?")
sh("aws ce get-cost-and-usage --time-period Start=2025-10-01,End=2026-03-04 --granularity MONTHLY --metrics "
   "UnblendedCost UsageQuantity --filter '{\"Tags\": {\"Key\": \"bucket\", \"Values\": [\"corvane-ckpt\"]}}'",
   planted(lambda: ce_json(P["C3"]), ["C3"]), expect=["C3"])
say("What is in the bucket, by run prefix:")
sh("aws s3 ls s3://corvane-ckpt/ && aws s3api list-objects-v2 --bucket corvane-ckpt --query 'length(Contents)' "
   "--prefix atlas-7b-r1", N(lambda: "\n".join(f"                           PRE {r}/" for r in sorted(
       ["atlas-7b-r12", "atlas-7b-r13", "atlas-7b-r14", "atlas-7b-r15", "kestrel-13b-sft-v1", "kestrel-13b-sft-v2"] +
       OTHER_RUNS + [f"abl-{hexs(6)}" for _ in range(14)] + ["_tmp", "_quarantine"])) + f"\n{rng.randint(9000, 14000)}"))
A("Storage for the checkpoints roughly doubled from the autumn to February, and March is on the same track. That "
  "fits the long runs keeping every checkpoint: a 7B run with all checkpoints kept adds its full state every "
  "thousand steps. Storage is still small next to GPU hours, but it grows without limit under the current "
  "settings. A lifecycle rule that moves older checkpoints of finished runs to an infrequent-access class, and a "
  "keep-last default for new runs with explicit milestones, would flatten it without deleting anything by hand.")

regular("costs")
U("And the L4 inference pool: there's a pending Terraform change to raise its ceiling. Plan it, don't apply.")
sh("terraform -chdir=infra/eks/nodepools/infer-l4 plan -out=plan.tfplan -no-color",
   planted(lambda: tf_plan(P["C2"]), ["C2"]), expect=["C2"])
A("The plan is small and in place: it raises the node group's maximum size, relabels the capacity plan and "
  "lengthens a low-utilisation alarm's evaluation window. Nothing is replaced, and the desired and minimum sizes "
  "are unchanged, so applying it costs nothing by itself; it only lets the autoscaler add nodes. Given today's "
  "finding that the canary's latency came from its own settings rather than from too few replicas, I would hold "
  "this until we see the canary behave after the fix.")

regular("costs")
U(f"For context: research has a {M['budget']}, and this month is tracking well over it. What do I tell finance?")
A("That the overrun has two causes we can name and act on, and one that is an investment. First, sweep capacity "
  "held idle: the sweeps namespace kept GPUs reserved between trials, which shows up as idle cost; a scale-to-zero "
  "policy for its pool and a time limit on pending trials fixes most of it within days. Second, checkpoint storage "
  "growing because long runs keep every checkpoint; a lifecycle rule flattens it, though it is small in dollars. "
  "Third, the lost atlas and kestrel hours from last night are a one-off. I would give them the namespace and "
  "storage figures as the outputs show them, the two fixes with owners, and an estimate of the monthly saving "
  "once the sweep pool scales to zero.")

# --- restart, rollout and clean-up -------------------------------------------------------

regular("restart")
U("How's atlas r15 doing? Tail its log and compare it with r14 in the tracker.")
R15_T = clock(10, 36, 3) + datetime.timedelta(seconds=1240 * ATLAS_SPS)
sh("tail -n 40 /lustre/runs/atlas-7b-r15/logs/rank0.log",
   fitN(lambda n: train_log(n, LAST_GOOD + 1240, R15_T, ATLAS_OPT, 2.18, ATLAS_SPS, 9.6e5, 38.6), 40))
say("And the two runs side by side in the tracker:")
sh(f"trackctl runs compare {ATLAS_RUN} {hexs(12)} --keys train/loss,train/grad_norm,val/loss --at-steps "
   f"{LAST_GOOD + 200},{LAST_GOOD + 400},{LAST_GOOD + 600},{LAST_GOOD + 800},{LAST_GOOD + 1000},{LAST_GOOD + 1200}",
   N(lambda: table(["STEP", "KEY", "RUN_A", "RUN_B", "DELTA"],
                   [[st, k, "-" if a is None else f"{a:.4f}", f"{b:.4f}", "-" if a is None else f"{b - a:+.4f}"]
                    for st in range(LAST_GOOD + 100, LAST_GOOD + 1201, 100)
                    for k in ["train/loss", "train/grad_norm", "val/loss"]
                    for a, b in [((rng.uniform(2.12, 2.26), rng.uniform(2.12, 2.26)) if k != "train/grad_norm" else
                                  (rng.uniform(0.7, 1.3), rng.uniform(0.6, 1.0)))
                                 if st < NAN_STEP else ((None, rng.uniform(2.1, 2.25)) if k != "train/grad_norm"
                                                        else (None, rng.uniform(0.6, 1.0)))]],
                   right=(0, 2, 3, 4)) + "\n\nRUN_A = " + ATLAS_RUN + " (FAILED)   RUN_B = running"))
say("And the project's run list, to check nothing else in pretraining is unhealthy:")
sh("trackctl runs list --project pretrain --limit 30", fitN(lambda n: tracker_runs(n), 30))
A("r15 resumed at the right step and has been training normally for over a thousand steps: loss in the same band "
  "as r14 before the spike, gradient norm a little lower on average now that clipping trims the occasional large "
  "step, and throughput and MFU where they were. It has passed the step where r14 blew up without incident. It "
  "has not reached the part of the stream with the missing shards yet, and by the time it does the resync should "
  "have filled them.")

regular("restart")
U("Dariusz asks whether he should also drop the learning rate for the rest of the run, just to be safe.")
A("I would not, at least not now. The evidence says the blow-up came from one unclipped step, not from a learning "
  "rate that is too high overall: the loss curve was smooth for forty thousand steps and the gradient norm sat in "
  "a narrow band until the spike. With clipping back, a lower learning rate would mostly cost quality for the "
  "rest of the run. If r15 shows repeated clipping events, meaning the clip is active on many steps, that would be "
  "the signal to revisit it. I would add the clip rate to his dashboard so he can watch for exactly that.")

regular("restart")
U(f"Let's fix the root cause: clip_grad back to a safe default of 1.0 in the optimizer groups, with an explicit 0.0 "
  f"still allowed per experiment. I've opened {M['pr']} for it. Make the change and run the tests.")
d, FILES["conf/optim/adamw_cosine.yaml"] = make_diff("conf/optim/adamw_cosine.yaml", OPTIM_CONFIG.rstrip("\n").split("\n"), [
    ("# clip_grad: per experiment", 1, ["# clip_grad: 1.0 unless an experiment sets optim.clip_grad; 0.0 turns it off."]),
    ("clip_grad: ${oc.select", 1, ["clip_grad: ${oc.select:optim_override.clip_grad,1.0}"])])
patch("conf/optim/adamw_cosine.yaml", d)
say("Compose passes. The optimizer and guard tests, plus the new default test:")
sh("pytest -q tests/test_optim.py tests/test_guard.py tests/config -k 'clip or default or compose'",
   N(lambda: pytest_log("train", f"in {rng.uniform(20, 60):.2f}s", stamp_prefix=False, skipped=2, warnings=3)))
A("Done: the optimizer group's fallback is one again, the comment says how to opt out, and the same change is "
  "needed in the other two optimizer groups, which I would include in the same PR. The compose check resolves all "
  "experiments and the tests pass. With this merged, the five experiments without a clipping line get clipping "
  "back on their next start; the two short ablations are finished, so nothing running changes behaviour mid-run.")

regular("restart")
U("Can we see how often clipping actually kicks in on r15? I'd like Dariusz to have that on his dashboard.")
A("Yes. The training loop already computes the gradient norm before clipping, so the clip rate is one more "
  "metric: the share of steps in the last hundred where the norm exceeded the threshold. I would log it to the "
  "tracker next to the gradient norm and add a panel with a threshold line. On a healthy run it sits near zero "
  "with the occasional blip; a clip rate that climbs and stays up is the early warning that the run is heading "
  "for trouble, well before a non-finite loss.")

regular("restart")
U("Lasse left a review comment: 'why not just add clip_grad: 1.0 to the five configs and keep the default at 0?'")
A("Because the default is what a new experiment gets when its author does not think about clipping, and that "
  "should be the safe choice. Adding the line to five files fixes today's files and leaves the trap for the next "
  "one. His goal, making clipping visible per run, is still met: the resolved config records the value for every "
  "run, and anyone who wants no clipping writes it down explicitly, which is also easier to spot in review. I "
  "would add a sentence to the PR saying exactly that, and thank him for the refactor, which was otherwise "
  "right.")

regular("dataset")
U("Has the webdocs resync finished? Verify the snapshot again.")
sh(f"python tools/data/verify_snapshot.py --manifest {SNAP}manifest.json --prefix {SNAP} --sample-sha 64 && "
   f"aws s3 ls {SNAP} --human-readable --summarize | tail -n 40",
   N(lambda: verify_snapshot([]) + "\n\n" + shard_listing(37, set(), datetime.datetime(2026, 3, 1, 22, 40, 5))))
A("The snapshot is complete now: the verifier finds every shard the manifest declares, with matching sizes and "
  "sampled checksums, and the listing's summary matches the manifest plus its two metadata files. r15 will read "
  "the restored shards when it gets there, and its fail-on-missing setting stays as a safety net.")

regular("dataset")
U("What should change so a half-finished sync can't publish a snapshot again?")
A("Three things, in order of value. The sync job should write the manifest last, only after every shard is "
  "verified, so a snapshot without a manifest is simply not there yet; that alone would have prevented last "
  "night. Its failure should page or at least post to the data channel, instead of ending as a failed pod nobody "
  "looks at. And the loader's default policy should be fail, with skip available per run for the rare case where "
  "someone knowingly trains on a partial snapshot. The verifier we ran today could also run as the last step of "
  "the sync and record its result next to the manifest.")

regular("rollout")
U("It's been over half an hour on the canary. How do p99 and the preemptions look now?")
sh("promq --range 45m --step 1m 'histogram_quantile(0.99, sum by (le) (rate(vllm:e2e_request_latency_seconds_bucket"
   "{namespace=\"serving\", service=\"summarizer\", track=\"canary\"}[5m])))'",
   N(lambda: promq(45, latency_series(45, 0.84), step=1)))
say("And the preemption warnings in the new canary pods since the restart:")
sh("kubectl -n serving logs -l app.kubernetes.io/name=summarizer,track=canary -c vllm --since=40m --prefix | tail -n 60",
   fitN(lambda n: vllm_log(n, saturated=False), 60))
A("Much better. Over the last three quarters of an hour the canary's p99 stays in the same band as stable's, with "
  "no spikes, and the new pods have logged no preemptions at all: the KV cache stays well below full and nothing "
  "waits in the queue. That is the behaviour we wanted from the memory and chunked-prefill changes. Per the rule, "
  "the p99 from this window goes into the ticket before anything is promoted.")

regular("rollout")
U("Write the ticket comment for the canary window. I'll paste the graphs myself, so words only.")
A("Draft:\n\n*summarizer canary, second window at 5%:* after the engine change (more GPU memory for the KV cache, "
  "chunked prefill on, smaller prefill batch) the canary's p99 tracks stable's for the whole window, with no "
  "spikes; the new pods logged no preemptions and no 429 or 503 responses. Graphs attached: canary and stable "
  "p99 over the window, KV cache usage per canary pod. Per the serving rule the window lasted more than thirty "
  "minutes at five percent and this comment records its p99 before promotion. Next step: promote to 25%.")

regular("rollout")
U("p99 is in the ticket. Promote to the next step and show me the rollout.")
sh("kubectl argo rollouts promote summarizer -n serving && sleep 5 && kubectl argo rollouts get rollout summarizer "
   "-n serving --no-color",
   N(lambda: "rollout 'summarizer' promoted\n\n" + rollout_status(25, 3, [hexs(5) for _ in range(6)], paused=True)))
A("Promoted: the canary is at twenty-five percent and paused on the next step, with its analysis run green. The "
  "rollout will not go further without another promote, so the next half-hour window is ours to watch. If the "
  "p99 stays flat through the afternoon peak, the last step takes it to half and then full.")

regular("eval")
U("Marlin: build a new registry version from v14's weights with rc2's template, so the go/no-go has something to "
  "approve.")
d, _ = make_diff("models/marlin/chat_template.jinja",
                 ["{%- if messages[0]['role'] != 'system' -%}", "<|system|>",
                  "You are a careful assistant. Answer thoroughly, explain your reasoning, and say when a document does not",
                  "contain enough information to answer.", "{% endif -%}"] + TEMPLATE_RC2.split("\n"),
                 [("{%- if messages[0]['role'] != 'system' -%}", 5, [])])
patch("models/marlin/chat_template.jinja", d, compose=False)
sh("regctl versions create marlin-1.3b-instruct --from-version 14 --replace-file chat_template.jinja="
   "models/marlin/chat_template.jinja --description 'rc3 weights, rc2 template' -o yaml",
   N(lambda: regctl_version(15, hexs(12), 3) + "\n\nqueued eval gate: docqa, safety, longctx (evals_nightly reservation "
             "not required, eval partition)"))
A("Version 15 exists: the same weights as v14, the template without the default system turn, and the eval gate "
  "queued on the eval partition. Its lineage points at v14 as parent, so the release notes can say exactly what "
  "changed. Once the gate reports, Maelis has a candidate for the go/no-go that is the rc3 model with the "
  "behaviour of rc2's prompting.")

regular("eval")
U("Maelis asks why nothing caught the template change before the eval did. Fair question.")
A("Because nothing looked at it as a behaviour change. The template lives in the model folder, it went through "
  "code review as a text edit, and the reviewer read it as a chat-product improvement; CI only checks that the "
  "template renders. The eval was the first thing to run the model with it, and the harness deliberately sends "
  "no system turn, so it was also the first place the default turn showed up. Two cheap guards: a CI test that "
  "renders each model's template for a plain user turn and fails if a system turn appears that the caller did "
  "not send, and a required eval owner on changes under the model folders.")

regular("eval")
U("Outline the go/no-go slides for me. Three slides max.")
A("1. *What regressed and why*: rc3 lost several points of exact match on docqa; the cause is a default system "
  "turn added to the template, not the weights. Evidence: longer answers and more refusals; rc3 with rc2's "
  "template recovers.\n2. *The candidate*: v15, rc3's weights with the old template, gate results on docqa, safety "
  "and long context, compared with rc2 and with production.\n3. *Decision and follow-ups*: go with v15; the chat "
  "product sets its own system prompt; the harness sends an explicit system turn from now on; a template render "
  "test per model in CI.")

regular("eval")
U("Go/no-go done: they said go with v15, production rollout tomorrow morning. Anything to watch?")
A("Two things. The gate ran on our suites, but the chat product will now send its own system prompt to a model "
  "whose template no longer adds one, so its behaviour in the product depends on that prompt; someone from the "
  "product side should check a sample of real conversations tomorrow. And the production rollout is a serving "
  "change like any other, so it goes through a canary at five percent for half an hour with its p99 in the ticket "
  "before promotion.")

regular("node")
U("Yusra's done with r3-14 after the window. What does Slurm say, and what did the diagnostics find?")
sh("sinfo -R -o '%50E %12u %20H %N' && ssh hgx-r3-14 'sudo dcgmi diag -r 3 -j' | jq -r '.\"DCGM GPU Diagnostic\""
   ".test_categories[].tests[] | \"\\(.name): \\(.results | map(.status) | join(\",\"))\"'",
   N(lambda: table(["REASON", "USER", "TIMESTAMP", "NODELIST"], [
       ["GPU4 uncorrectable ECC + Xid, RMA pending, see ticket", "ybellingham", "2026-03-04T12:41:52", BAD_NODE],
       ["IB link flap, see INFRA-2291", "ybellingham", "2026-02-27T16:40:12", "hgx-r4-07"],
       ["bios update pending", "ybellingham", "2026-03-02T09:03:55", "a100-e-06"],
       ["nvme wear >90%", "jmoreau", "2026-02-19T11:22:31", "l40s-d-04"]]) + "\n\n" + "\n".join(
       f"{t}: " + ",".join("Fail" if (t in ("Memory", "Memory Bandwidth", "Diagnostic", "Targeted Stress") and g == BAD_GPU)
                           else "Pass" for g in range(8))
       for t in ["Deployment", "Blacklist", "NVML Library", "CUDA Main Library", "Permissions and OS Blocks",
                 "Persistence Mode", "Environmental Variables", "Page Retirement/Row Remap", "Graphics Processes",
                 "Inforom", "GPU Memory", "Diagnostic", "PCIe", "SM Stress", "Targeted Stress", "Targeted Power",
                 "Memory Bandwidth", "Memory", "Memtest", "Pulse Test", "EUD Test"]) +
       "\n\nsummary: 4 tests failed on GPU 4; 0 failures on GPUs 0-3,5-7"))
A("The node is drained with the reason pointing at the ticket, reimaged, and the level-three diagnostics fail on "
  "the same GPU and only that one, in the memory, memory bandwidth, targeted stress and software diagnostic "
  "tests; every other GPU passes everything. That is as clear a hardware verdict as we will get, and exactly "
  "what the vendor will want to see. It stays drained until the part is replaced.")

regular("node")
U("Yusra asks whether r3-14 could take CPU-only jobs while we wait for the part. It's a lot of idle cores.")
A("I would say no. The node's scheduling unit is the whole box with its GPUs, the partition only runs GPU jobs, "
  "and a CPU-only job would still share PCIe and memory paths with a GPU that throws fatal bus errors; a second "
  "fall off the bus could take the node down with the job. If she wants the cores used, the clean way is a "
  "separate CPU partition with the failing GPU masked out in the node's gres configuration, which is more work "
  "than the few days until the part arrives are worth. Either way it is her call as the pager holder.")

regular("node")
U("Cirrolux replied: they want the nvidia-bug-report from the node before they'll ship a part. Collect it.")
sh("ssh hgx-r3-14 'sudo nvidia-bug-report.sh --extra-system-data --output-file /tmp/nvidia-bug-report-r3-14.log.gz' "
   "&& scp hgx-r3-14:/tmp/nvidia-bug-report-r3-14.log.gz /lustre/incidents/ && ls -la /lustre/incidents/",
   N(lambda: "\n".join(["", "nvidia-bug-report.sh will now collect information about your",
                        "system and create the file 'nvidia-bug-report.log.gz' in the current",
                        "directory.  It may take several seconds to run.  In some",
                        "cases, it may hang trying to capture data generated dynamically",
                        "by the Linux kernel and/or the NVIDIA kernel module.  While",
                        "the bug report log file will be incomplete if this happens, it",
                        "may still contain enough data to diagnose your problem.", "",
                        "Running nvidia-bug-report.sh --extra-system-data ...", "",
                        "Running nvidia-smi -q...", "Running nvidia-smi -q -d ROW_REMAPPER...",
                        "Running dmesg...", "Running journalctl -b -0...", "Running lspci -vvv...",
                        "Running dcgmi discovery -l...", "Running fabricmanager log collection...",
                        "Collecting /var/log/nvidia-installer.log...", "",
                        "Complete.", "", "total 2" + str(rng.randint(10000, 99999))] +
                       [f"-rw-r--r-- 1 ithackeray research {rng.randint(100000, 99000000):>9} Mar  4 "
                        f"{rng.randint(8, 13):02d}:{rng.randint(0, 59):02d} {f}" for f in
                        ["atlas-r14-rank0-tail.log", "kestrel-v2-rank0-tail.log", "r3-14-dmesg.txt",
                         "r3-14-ecc.txt", "r3-14-nccl-tests.txt", "r3-09-nccl-tests.txt", "r3-14-dcgmi-r3.json",
                         "nvidia-bug-report-r3-14.log.gz"]])))
A("Collected and copied to the incident folder on Lustre, next to the other evidence we gathered today: the "
  "kernel log, the ECC report, both nccl-tests runs and the diagnostics. I would attach the bug report and the "
  "diagnostics to the vendor case, with a link to the rest, and ask for an estimated ship date so Yusra can plan "
  "the swap.")

regular("features")
U("The recs team asks whether they need to retrain the ranker because of the stale days.")
A("No. The ranker was trained on fresh features; serving it a day and a half of stale values degraded its inputs "
  "for that time, but it did not change the model. The training set for its next scheduled retrain is built "
  "from the offline store, which reads the source table directly, so once the missing day is loaded there the "
  "training data is correct. What they may want is to exclude the stale window from their online metrics when "
  "they compare this week with last.")

regular("features")
U("The warehouse team fixed the activity load. Backfill the engagement view for the missing days.")
sh("fsctl materialize --view user_engagement --start 2026-03-03T00:00:00Z --end 2026-03-04T00:00:00Z --wait",
   fitN(lambda n: "\n".join(
       [f"{iso(clock(13, 40, 0))} planning materialization for 1 view, window 2026-03-03T00:00:00Z..2026-03-04T00:00:00Z",
        f"{iso(clock(13, 40, 2))} submitted spark-k8s application spark-{hexs(16)} (8 executors)"] +
       [f"{iso(clock(13, 41, 10 * k))} stage {k % 7}: {rng.randint(40, 400)}/{rng.randint(400, 800)} tasks, "
        f"{rng.uniform(0.2, 3.0):.1f} GiB shuffle read, {rng.randint(0, 3)} failed attempts" for k in range(n)] +
       [f"{iso(clock(14, 2, 41))} wrote {rng.randint(9, 25)} batches to redis-online-0..5",
        f"{iso(clock(14, 2, 44))} SUCCEEDED in 22m42s"]), 30))
A("The backfill ran cleanly: the missing day was read from the repaired activity table, written to the online "
  "store, and the job succeeded. The regular three-hourly runs will pick up today from here. I would confirm with "
  "the recs team that their freshness check is green after the next scheduled run, and ask whether they want an "
  "alert on the source window not advancing, which is what would have caught this yesterday.")

regular("costs")
U("Draft the note to finance about the overrun. Short, and no promises we can't keep.")
A("Draft:\n\nThis month's GPU spend is above the research budget. Most of the increase is GPU capacity held by "
  "the hyperparameter-sweep namespace while idle between trials; we have proposed a six-hour limit on trials and "
  "scaling that pool to zero when unused, and expect most of that cost to stop within a week of the research "
  "leads agreeing. Checkpoint storage is growing as well; a lifecycle rule moves finished runs' checkpoints to "
  "cheaper storage classes without deleting anything. Last night's two failed training jobs added a one-off cost. "
  "We will send the namespace and storage figures as exported from the cost tools, and an update after the "
  "changes have run for a week.")

regular("costs")
U("How do I put the sweeps idle cost to the research leads without starting a fight?")
A("As a shared problem with a cheap fix, not as blame. Show them the namespace's week with the idle line "
  "highlighted, say plainly that their sweeps are valuable and that the cost is capacity waiting between trials, "
  "and offer the two changes with the trade-off spelled out: a few minutes of cold start on the first trial in "
  "exchange for most of the idle spend. Ask them which hours they need a warm floor. People accept limits they "
  "helped shape.")

regular("costs")
U("What does scale-to-zero cost the sweeps team in startup latency?")
A("A few minutes on the first trial of a sweep: the autoscaler has to bring a GPU node up, the node has to join "
  "and pull the image, and then the pod starts. For sweeps that run for hours that is noise; for someone "
  "iterating interactively it is annoying. A middle ground is a small warm floor during working hours and zero "
  "overnight and at weekends, which keeps most of the saving.")

regular("costs")
U("Show me what's actually sitting in research-sweeps right now.")
sh("kubectl -n research-sweeps get pods -o wide --sort-by=.status.startTime",
   fitN(lambda n: kubectl_pods([(f"hpo-trial-{k:04d}", 1) for k in sorted(rng.sample(range(700, 990), n))],
                               [f"ip-10-43-{a}-{b}.ec2.internal" for a, b in [(4, 12), (4, 77), (9, 130), (9, 201)]]), 22))
say("And what they are actually using:")
sh("kubectl -n research-sweeps top pods && kubecost-cli gpu-util --namespace research-sweeps --window 1h --by node",
   fitN(lambda n: top_pods(n), 22))
A("A couple of dozen trial pods, most of them running, a few pending for hours waiting for a GPU that the "
  "scheduler keeps reserving, and one in a crash loop. Several running trials are many hours old, which for a "
  "sweep of small models usually means they finished their work and sit idle waiting for a controller that has "
  "moved on; the usage numbers agree, with most pods nearly idle and the nodes' GPU utilisation low. A time limit "
  "on trials and scale-to-zero on the pool are the two settings that stop this.")

regular("costs")
U("Write the policy for the sweeps namespace: kill trials after 6 hours, and let the pool scale to zero.")
sweeps_policy = ["apiVersion: kyverno.io/v1", "kind: ClusterPolicy", "metadata:", "  name: sweeps-trial-limits",
                 "spec:", "  rules:", "    - name: active-deadline", "      match:", "        any:", "          - resources:",
                 "              kinds: [Pod]", "              namespaces: [research-sweeps]", "      mutate:",
                 "        patchStrategicMerge:", "          spec:", "            activeDeadlineSeconds: 21600",
                 "    - name: ttl-after-finished", "      match:", "        any:", "          - resources:",
                 "              kinds: [Job]", "              namespaces: [research-sweeps]", "      mutate:",
                 "        patchStrategicMerge:", "          spec:", "            ttlSecondsAfterFinished: 600"]
patch("infra/k8s/policies/sweeps-trial-limits.yaml", new_file_diff("infra/k8s/policies/sweeps-trial-limits.yaml",
                                                                   sweeps_policy), compose=False)
A("The policy adds a six-hour deadline to every pod in the sweeps namespace and cleans up finished jobs after ten "
  "minutes, so a forgotten trial cannot hold a GPU overnight. Scale-to-zero is a node-pool setting rather than a "
  "policy: the pool's minimum size goes to zero in its Terraform, and the cluster autoscaler removes idle nodes "
  "after its usual delay. I would send both to the research leads before merging, since their sweep controller "
  "may rely on long-lived pods.")

regular("costs")
U("And the storage side: plan the lifecycle rule for finished runs' checkpoints that we talked about. Plan only.")
sh("terraform -chdir=infra/storage plan -target=aws_s3_bucket_lifecycle_configuration.ckpt "
   "-target=aws_s3_bucket_lifecycle_configuration.scratch -out=lifecycle.tfplan -no-color", N(lifecycle_plan))
A("The plan adds one rule to the checkpoint bucket: objects tagged as belonging to a finished run move to the "
  "infrequent-access class after a month and to instant-retrieval archive after four months. Nothing is deleted "
  "and running runs are untouched, since the launcher only sets the finished tag when a run completes. It also "
  "shortens the scratch bucket's expiry. Both are in-place changes with no replacements, safe to apply after "
  "review.")

regular("node")
U("Check kestrel: is the resubmitted job healthy?")
sh("tail -n 42 /lustre/runs/kestrel-13b-sft-v2/logs/rank0.log",
   fitN(lambda n: train_log(n, 5230 + 1400, clock(13, 5, 11), (2.0e-5, 2.0e-6, 100, 6000), 1.28, 6.0, 2.1e5, 36.8), 42))
A("Healthy: it resumed from its checkpoint and has run well over a thousand steps since, with the loss continuing "
  "its downward trend and throughput back at the level it had before the hang. No NCCL warnings, no slow steps. "
  "At this pace it finishes its schedule overnight.")

regular("image")
U("Did the harness CI re-run pass?")
sh("gh run view 8841207713 --log --job 24399530 | cut -f3- | tail -n 70",
   N(lambda: pytest_log("evals", f"in {rng.uniform(150, 420):.2f}s ({rng.randint(0, 0)}:0{rng.randint(2, 6)}:"
                                 f"{rng.randint(10, 59)})")))
A("Yes, everything passed on the re-run, including the bootstrap test that failed the first time. It is still a "
  "flaky test, so I would open a small follow-up to pin its thread count, but it does not block the PR.")

# --- the write-up -------------------------------------------------------------------

regular("write-up")
U("Start the postmortem timeline. All times UTC.")
A("Timeline (UTC):\n\n- Late February: the clipping refactor merges; optimizer groups fall back to no clipping "
  "when an experiment does not set it.\n- Sunday night: the web-docs snapshot sync is throttled, gives up on two "
  "ranges of shards, hits its deadline, publishes its manifest anyway and exits with an error nobody sees.\n- "
  "Tuesday evening onwards: atlas r14's loader starts skipping the missing shards.\n- Wednesday, about 01:40: a GPU "
  "on hgx-r3-14 throws memory errors and falls off the bus; kestrel's allreduce hangs.\n- About 02:10: kestrel's "
  "NCCL watchdog fires; Slurm drains the node.\n- About 03:12: atlas r14 has a gradient spike with no clipping, "
  "goes non-finite and is stopped by its guard.\n- Morning: ticket opened; causes found; r15 and kestrel restarted; "
  "snapshot resynced; node diagnosed and reimaged; RMA opened.")

regular("write-up")
U("Now contributing factors and action items, with owners.")
A("Contributing factors:\n- An unsafe default: clipping off unless an experiment opts in.\n- A silent data "
  "policy: the loader skipped missing shards with a warning.\n- A sync job that published a manifest for an "
  "incomplete snapshot, and no alert on its failure.\n- A failing GPU that was reset and left in a state where it "
  "could have been resumed into service.\n\nAction items:\n- Clipping default back to one (the PR above), owner: "
  "Lasse.\n- Loader default to fail on missing shards, owner: data platform.\n- Sync job writes the manifest last, "
  "verifies, and alerts on failure, owner: data platform.\n- GPU with uncorrectable errors stays drained until "
  "diagnostics pass, in the runbook, owner: Yusra.\n- Harness sends an explicit system turn; template render "
  "tests, owner: Maelis.\n- Sweeps namespace limits and scale-to-zero, owner: research leads with us.")

regular("write-up")
U("What went well today, for the postmortem's other column?")
A("- The guard stopped atlas on non-finite losses and refused to write a poisoned checkpoint, so the restart "
  "point was clean.\n- Keeping every checkpoint meant the restart lost minutes of training, not days.\n- The "
  "NCCL watchdog turned a silent hang into a clear failure with a timestamp, and Slurm drained the node on its "
  "own.\n- The eval gate caught the template regression before release.\n- The canary rule kept the serving "
  "problem at five percent of traffic, and the second window proved the fix before promotion.")

regular("write-up")
U("Should the guard have stopped atlas earlier, say on the first big grad-norm jump instead of waiting for NaNs?")
A("It could, and I think it should warn there, but I would be careful about stopping. A spike-triggered stop "
  "would have saved a few steps last night, not hours, because the checkpoint we restarted from was written well "
  "before the spike either way. The valuable version is an alert: a gradient norm far outside its recent band "
  "posts to the run's channel, so a human sees the run is in trouble even when it recovers by itself. Stopping "
  "automatically on non-finite loss, as it does now, is the right hard line.")

regular("write-up")
U("Draft the summary paragraph for the top of the postmortem.")
A("Overnight on 4 March two training jobs failed for unrelated reasons that met on the same night. The 7B "
  "pretraining run diverged because a refactor had made gradient clipping opt-in with an unsafe default, and a "
  "data snapshot with missing shards skewed its batches in the hours before; it was restarted from its last "
  "clean checkpoint with clipping on. The 13B fine-tune hung when a GPU with a history of uncorrectable memory "
  "errors fell off the bus; the node was drained, diagnosed and sent for RMA, and the job resumed elsewhere. The "
  "same day we found and fixed an eval regression caused by a template change, latency spikes on a serving "
  "canary caused by its engine settings, stale features from a stalled upstream load, and idle GPU spend in the "
  "sweeps namespace.")

regular("write-up")
U("Give me the day in five lines for tomorrow's standup.")
A("- atlas: diverged from unclipped training; r15 restarted from the last clean checkpoint with clipping; default "
  "fixed in a PR.\n- kestrel + r3-14: one GPU failing; node drained, diagnosed, RMA opened; kestrel resubmitted "
  "elsewhere and healthy.\n- data: web-docs snapshot missing shards; resynced and verified; sync and loader "
  "policies to change.\n- marlin: regression from the template; v15 approved at go/no-go, rollout tomorrow via "
  "canary.\n- serving/features/costs: canary fixed and promoted to a quarter; engagement features backfilled; "
  "sweeps limits proposed.")

regular("write-up")
U("Who should review the postmortem before it goes out?")
A("Dariusz for the atlas part and the clipping change, Yusra for the node and the drain, Lasse because his "
  "refactor is in the causes and he should see the wording first, someone from data platform for the sync job, "
  "and Maelis for the eval part. The blameless framing matters most for Lasse's section: the refactor was right, "
  "the default was a small mistake that review did not catch.")

regular("write-up")
U("If we only get one action item done this sprint, which one?")
A("The clipping default, which is already a PR. It is the one that turns a rare bad step into a dead run, it "
  "affects every experiment written from now on, and it costs one review. Second would be the manifest-last "
  "change in the sync job, because a snapshot that looks complete when it is not can poison any run that reads "
  "it, not just this one.")

regular("write-up")
U("Anything you'd flag for whoever has on-call tonight?")
A("Three things. Watch atlas r15 when it reaches the restored part of the snapshot; it will stop loudly if a shard "
  "is missing, which would be a surprise after the verify. Keep hgx-r3-14 drained whatever Slurm or anyone else "
  "suggests; it goes back only after the part is swapped and diagnostics pass, and only with the pager holder's "
  "ack. And the summarizer canary sits at a quarter of traffic; if its p99 spikes again overnight, abort the "
  "rollout rather than promote.")


FILLER_TURNS = [
    ("Any review comments on the clipping PR yet?",
     "Two approvals and one question about the other two optimizer groups, which the latest push covers. CI is "
     "green on it."),
    ("Is r15 still healthy?",
     "Yes. It is still training normally, and it has not logged a missing-shard error since the restart."),
    ("Anything new from the vendor on the RMA?",
     "They acknowledged the case and asked for the node's serial number; Yusra has it. No ship date yet."),
    ("How's the canary at twenty-five percent?",
     "Flat. Its p99 tracks stable's and the new pods have not logged a single preemption."),
    ("Did the warehouse team say why the activity load stopped?",
     "A schema change upstream broke the load's column mapping; they fixed the mapping and added a test."),
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
    U("That's it for me today. Thanks, that was a lot. Anything before I log off?")
    A("Only the handover note in the ticket: tonight's checks are r15 at the restored shards, the drained node, and "
      "the canary at a quarter. No node was drained, rebooted or reimaged without Yusra's ack today, and the canary "
      "was only promoted after its p99 went into the ticket.", pad=False)


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
    # The assistant never repeats a planted value, in any item of its own.
    for i in items:
        if i["role"] == "assistant" and i["kind"] == "message":
            assert not any(v in i["content"] for v in list(P.values()) + list(M.values())), i["content"][:80]
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
    bad = [(i["turn"], i["call_id"], i["tool_name"], len(i["content"].encode())) for i in items
           if i["kind"] == "tool_result" and not 1300 <= len(i["content"].encode()) <= 7200]
    assert not bad, bad
    for which in ("tune", "held"):
        asked = [p for p in probes[which] if p["facts"]]
        assert 14 <= len(asked) <= 16, (which, len(asked))
        assert sum(1 for p in probes[which] if not p["facts"]) == 1, which
        for p in asked:
            assert 50 <= p["turn"] <= turn_no
            for fid in p["facts"]:
                f = next(f for f in facts if f["id"] == fid)
                assert p["turn"] - f["turn"] >= MIN_GAP
                q = next(i for i in items if i["turn"] == p["turn"] and i["role"] == "user")["content"]
                assert f["text"] not in q and f["text"].lower() not in q.lower(), (fid, q)
    tuned = {fid for p in probes["tune"] for fid in p["facts"]}
    held = {fid for p in probes["held"] for fid in p["facts"]}
    assert not tuned & held, tuned & held
    assert turn_no >= 120, turn_no
    return sizes, turns


def main():
    sizes, turns = check()
    tool_lines = [l for i in items if i["kind"] == "tool_result" for l in i["content"].split("\n")]
    common = {w: sum(1 for l in tool_lines if re.search(r"\b" + w, l, re.I)) for w in
              ["step", "loss", "gpu", "node", "total", "error"]}
    tool_turns = sum(1 for its in turns.values() if any(i["kind"] == "tool_call" for i in its))
    assert 0.33 <= tool_turns / turn_no <= 0.45, tool_turns
    assert 400 <= len(items) <= 550, len(items)
    fact_points = [40, 80, 120, turn_no]

    def write(name, rows):
        with open(os.path.join(HERE, name), "w") as out:
            for r in rows:
                out.write(json.dumps(r, ensure_ascii=False) + "\n")

    write("mlops.jsonl", [{"system_prompt": SYSTEM}] + items)
    write("mlops_facts.jsonl", facts)
    common_probes = ([{"kind": "instruction", "turn": t, "text": rule} for t, rule in RULES]
                     + [{"kind": "facts", "turn": t} for t in fact_points])
    write("mlops_probes.jsonl", common_probes + sorted(probes["tune"], key=lambda p: p["turn"]))
    write("mlops_heldout_probes.jsonl", common_probes + sorted(probes["held"], key=lambda p: p["turn"]))
    blob = sum(len(i["content"].encode()) for i in items)
    print(f"{turn_no} turns, {len(items)} items, {call_no} tool calls in {tool_turns} turns "
          f"({100 * tool_turns / turn_no:.0f}%), outputs {min(sizes)}-{max(sizes)} bytes "
          f"(~{min(sizes) // 4}-{max(sizes) // 3} tokens), {len(facts)} facts "
          f"({sum(f['source'] == 'tool' for f in facts)} from tools), {len(probes['tune'])} tuning and "
          f"{len(probes['held'])} held-out recall probes, {blob} bytes of content; output lines with: "
          + ", ".join(f"{w} {n}" for w, n in common.items()))


main()
