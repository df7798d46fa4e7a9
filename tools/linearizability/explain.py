#!/usr/bin/env python3
"""Explains Porcupine's verdicts on `strata torture` histories
(docs/reliability.md, "Linearizability") by the patterns found so far, per
key:

- stale: a read returns a value that a write acknowledged entirely before
  the read began had replaced (finding 5: a delete that found the object
  hidden by an unfinished delete's tombstone and wrote nothing);
- new-then-old: a read returns a write (a PUT's value, or absent for a
  DELETE) and a later read an older one, with no order of the writes that
  fits both (finding 4: a write visible on one replica before it is
  acknowledged);
- order cycle: reads see two overlapping PUTs in both orders (finding 4
  with concurrent writes: a cycle in the order the reads and real time
  impose on the PUTs).

A history none of these explains is printed as "unexplained".

Usage: explain.py HISTORY.json..."""
import json, sys
INF = float('inf')
def analyse(path):
    ops = json.load(open(path))["ops"]
    res = {}
    for key in sorted({o["key"] for o in ops}):
        ko = [o for o in ops if o["key"] == key]
        writes = []
        for o in ko:
            if o["op"] in ("put", "delete"):
                ret = o["return"] if o["outcome"] == "ok" else INF
                writes.append(dict(kind=o["op"], val=o["value"] if o["op"] == "put" else None, call=o["call"], ret=ret, id=id(o)))
        init = dict(kind="init", val=None, call=-1, ret=-1, id=0)
        reads = sorted((o for o in ko if o["op"] == "get" and o["outcome"] == "ok"), key=lambda o: o["call"])
        def cands(r):
            if r["value"] is None:
                c = [w for w in writes if w["kind"] == "delete" and w["call"] < r["return"]] + [init]
            else:
                c = [w for w in writes if w["kind"] == "put" and w["val"] == r["value"] and w["call"] < r["return"]]
            return c
        C = {id(r): cands(r) for r in reads}
        for r in reads:
            if not C[id(r)]:
                res.setdefault("read of a value never written", []).append((key, r))
                continue
            # stale
            def stale(w):
                return any(w2["id"] != w["id"] and w2["val"] != w["val"] and w["ret"] < w2["call"] and w2["ret"] < r["call"] for w2 in writes)
            fresh = [w for w in C[id(r)] if not stale(w)]
            if not fresh:
                res.setdefault("stale", []).append((key, r))
            else:
                C[id(r)] = fresh
        for i, a in enumerate(reads):
            for b in reads[i+1:]:
                if b["call"] <= a["return"] or b["value"] == a["value"]:
                    continue
                # b's write ended before a began (so a's is after it), or
                # before each of a's candidates began: no order fits.
                if all(wb["ret"] < a["call"] or all(wa["id"] != wb["id"] and wb["ret"] < wa["call"] for wa in C[id(a)]) for wb in C[id(b)]):
                    kind = "new-then-old (put then older)" if a["value"] is not None and b["value"] is not None else \
                           "new-then-old (delete visible, then older put)" if a["value"] is None else \
                           "new-then-old (put visible, then older delete/absent)"
                    res.setdefault(kind, []).append((key, a, b))
                    break
    return res

def check(path):
    ops = json.load(open(path))["ops"]
    out = []
    for key in sorted({o["key"] for o in ops}):
        ko = [o for o in ops if o["key"] == key]
        puts = {o["value"]: o for o in ko if o["op"] == "put"}
        def ret(o): return o["return"] if o["outcome"] == "ok" else INF
        reads = [o for o in ko if o["op"] == "get" and o["outcome"] == "ok" and o["value"] in puts]
        edges = {}
        def add(a, b, why):
            if a != b: edges.setdefault(a, {}).setdefault(b, why)
        # real time between puts
        pl = list(puts.values())
        for a in pl:
            for b in pl:
                if a is not b and ret(a) < b["call"]:
                    add(a["value"], b["value"], "rt")
        for r in reads:
            w = puts[r["value"]]
            for w2 in pl:
                if w2 is w: continue
                if ret(w2) < r["call"]: add(w2["value"], w["value"], "read-after")
                if w2["call"] > r["return"]: add(w["value"], w2["value"], "read-before")
        rs = sorted(reads, key=lambda o: o["call"])
        for i, a in enumerate(rs):
            for b in rs[i+1:]:
                if b["call"] > a["return"] and a["value"] != b["value"]:
                    add(a["value"], b["value"], ("reads", a["client"], b["client"], a["call"], b["call"]))
        # find a cycle (DFS) involving at least one 'reads' edge
        color = {}
        stack = []
        found = None
        sys.setrecursionlimit(100000)
        def dfs(u):
            nonlocal found
            color[u] = 1; stack.append(u)
            for v, why in edges.get(u, {}).items():
                if found: return
                if color.get(v) == 1:
                    cyc = stack[stack.index(v):] + [v]
                    found = cyc
                    return
                if color.get(v) is None:
                    dfs(v)
            stack.pop(); color[u] = 2
        for u in list(edges):
            if color.get(u) is None and not found:
                dfs(u)
        if found:
            desc = []
            for x, y in zip(found, found[1:]):
                w = edges[x][y]
                px, py = puts[x], puts[y]
                desc.append(f"{x}[{px['call']/1e9:.3f}-{ret(px)/1e9:.3f}]->{y}: {w if isinstance(w,str) else 'reads c%d@%.3f then c%d@%.3f' % (w[1], w[3]/1e9, w[2], w[4]/1e9)}")
            out.append((key, desc))
    return out

counts = {}
for p in sys.argv[1:]:
    r = analyse(p)
    cyc = check(p)
    kinds = {("finding 5: stale" if k == "stale" else "finding 4: " + k): len(v) for k, v in r.items()}
    if cyc:
        kinds["finding 4: order cycle"] = len(cyc)
    print(p.split("/")[-1], kinds if kinds else "unexplained")
    for k in kinds or {"unexplained": 0}:
        counts[k] = counts.get(k, 0) + 1
print("histories with each pattern:", counts)
