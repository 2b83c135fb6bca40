#!/usr/bin/env python3
"""bench/weave/why.py — why the running system's weaver got a link wrong.

    python3 bench/weave/why.py DIR HOPS [-v] [--replay FILE]

DIR is one level of run-real.sh (coord.log at --log-level debug, truth/). For
every hop the coordinator decided ("weave decision", one per open hop of a
triggered request) the truth names the callee trace that call caused; the
batch's whole input ("weave input" lines: every client and root the weaver saw)
says what the weaver had to go by. Each wrong decision gets one cause, the
first that applies:

  no_answer        the batch had no root at all, or no call but ours: the
                   callee's or the caller's agent did not answer the window
                   query within --weave-timeout (a loaded host)
  missing_root     the right root was not among the candidates (the window
                   query missed it: outside the window, evicted, not yet ended)
  impossible       the right root was there but not nested in the call (its
                   start before the call's, or its end after the call's end):
                   clock offsets between the hosts' tick->ns conversions
  left_none        the weaver left the call unmatched though the right root was
                   a possible candidate
  missing_owner    the root the weaver chose was caused by a call it never saw
                   (not among the batch's clients): nobody held that root, so
                   it was free to be taken
  model            everything was there and possible; the weaver preferred
                   another root (the delays of the right pair, against the
                   chosen, are summarised)

Also per level: the share of the batches' roots whose causing call was among
the clients, and of the clients whose root was among the roots (completeness).
Prints one line `bench weave why hops=H ...` (and details with -v).
--replay FILE writes the batches with each call's true root for
bench/weave/replay.c (weave_replay), which weaves them again with other options.
"""
import os
import sys
from collections import Counter, defaultdict


def kv(fields):
    return dict(x.split("=", 1) for x in fields if "=" in x)


def main():
    d, hops = sys.argv[1], int(sys.argv[2])
    verbose = "-v" in sys.argv[3:]
    # truth: callee trace -> (caller trace, caller span); caller span -> callee trace
    cause_of, child_of, svc_of = {}, {}, {}
    owner_svc = Counter()
    for f in os.listdir(os.path.join(d, "truth")):
        for line in open(os.path.join(d, "truth", f)):
            p = line.split()
            k = kv(p[3:])
            svc_of[p[0]] = p[1]
            if "cause" in k:
                ct, cs = k["cause"].split(":")
                cause_of[p[0]] = (ct, cs)
                child_of[cs] = p[0]
    batches = defaultdict(lambda: {"c": [], "s": []})
    decisions = []
    for line in open(os.path.join(d, "coord.log")):
        if "weave input" in line:
            k = kv(line.split())
            batches[k["batch"]][k["side"]].append(
                (k["span"], k["trace"], int(k["start"]), int(k["end"]), k["ours"] == "1",
                 int(k.get("conn", "0"), 16)))
        elif "weave decision" in line:
            decisions.append(kv(line.split()))
    causes = Counter()
    per_callee = defaultdict(lambda: [0, 0])  # callee -> [right, decided]
    right = 0
    req_true, req_chosen, resp_true, resp_chosen = [], [], [], []
    offs = []
    for dd in decisions:
        b = batches.get(dd.get("batch"))
        want = child_of.get(dd["span"])
        if b is None or want is None:
            causes["no_truth"] += 1
            continue
        per_callee[dd.get("callee", "?")][1] += 1
        if dd["weaver"] == want:
            right += 1
            per_callee[dd.get("callee", "?")][0] += 1
            continue
        cli = [c for c in b["c"] if c[0] == dd["span"]][0]
        roots = {s[1]: s for s in b["s"]}
        if not roots or all(c[4] for c in b["c"]):
            causes["no_answer"] += 1  # no roots, or no call but ours: an agent was silent
            continue
        if want not in roots:
            causes["missing_root"] += 1
            continue
        s = roots[want]
        if s[2] < cli[2] or s[3] > cli[3]:
            causes["impossible"] += 1
            offs.append(min(s[2] - cli[2], cli[3] - s[3]))
            continue
        if dd["weaver"] == "none":
            causes["left_none"] += 1
            continue
        owner = cause_of.get(dd["weaver"])
        client_spans = {c[0] for c in b["c"]}
        if owner is None or owner[1] not in client_spans:
            causes["missing_owner"] += 1
            if owner is not None:
                owner_svc[svc_of.get(owner[0], "?")] += 1
            continue
        causes["model"] += 1
        x = roots[dd["weaver"]]
        req_true.append(s[2] - cli[2]); resp_true.append(cli[3] - s[3])
        req_chosen.append(x[2] - cli[2]); resp_chosen.append(cli[3] - x[3])
    # completeness over all batches
    own_in = own_n = root_in = root_n = 0
    for b in batches.values():
        cs = {c[0] for c in b["c"]}
        rs = {s[1] for s in b["s"]}
        for s in b["s"]:
            o = cause_of.get(s[1])
            if o:
                own_n += 1
                own_in += o[1] in cs
        for c in b["c"]:
            w = child_of.get(c[0])
            if w:
                root_n += 1
                root_in += w in rs
    n = len(decisions)
    wrong = sum(v for k, v in causes.items() if k != "no_truth")

    def med(v):
        return sorted(v)[len(v) // 2] / 1000 if v else 0

    print("bench weave why hops=%d decisions=%d right=%d wrong=%d %s "
          "roots_with_owner_seen=%.3f clients_with_root_seen=%.3f "
          "model_err_req_us_true/chosen=%.0f/%.0f model_err_resp_us_true/chosen=%.0f/%.0f "
          "impossible_median_us=%.0f" % (
              hops, n, right, wrong,
              " ".join("%s=%d" % (k, causes[k]) for k in
                       ("no_answer", "missing_root", "impossible", "left_none", "missing_owner", "model",
                        "no_truth")),
              own_in / own_n if own_n else 0, root_in / root_n if root_n else 0,
              med(req_true), med(req_chosen), med(resp_true), med(resp_chosen), med(offs)))
    print("missing owners by caller service:", dict(owner_svc),
          "per callee right/decided:", {k: "%d/%d" % tuple(v) for k, v in per_callee.items()})
    if "--replay" in sys.argv:
        with open(sys.argv[sys.argv.index("--replay") + 1], "w") as out:
            for b in batches.values():
                idx = {s[1]: i for i, s in enumerate(b["s"])}
                out.write("B\n")
                for c in b["c"]:
                    w = child_of.get(c[0])
                    out.write("c %d %d %d %d %x\n" % (c[2], c[3], idx.get(w, -1) if w else -1,
                                                      1 if c[4] else 0, c[5]))
                for s in b["s"]:
                    out.write("s %d %d %x\n" % (s[2], s[3], s[5]))
    if verbose:
        print("impossible offsets (us):", sorted(o / 1000 for o in offs))


if __name__ == "__main__":
    main()
