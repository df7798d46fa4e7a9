#!/usr/bin/env python3
"""Explains Porcupine's verdicts on `strata torture` histories by the one
pattern found so far: a read returns a value, and a read that starts after
it ends returns an older value (one whose PUT returned before the first
value's PUT was called) — a write visible before it is acknowledged, then
invisible again. Prints each instance and a count per history.

Usage: new_then_old.py HISTORY.json..."""
import json, sys

total = 0
for path in sys.argv[1:]:
    ops = json.load(open(path))["ops"]
    n = 0
    for key in sorted({o["key"] for o in ops}):
        ko = sorted((o for o in ops if o["key"] == key), key=lambda o: o["call"])
        puts = {o["value"]: o for o in ko if o["op"] == "put"}
        gets = [o for o in ko if o["op"] == "get" and o["outcome"] == "ok" and o["value"] in puts]
        for i, a in enumerate(gets):
            pa = puts[a["value"]]
            for b in gets[i + 1:]:
                if b["call"] <= a["return"] or b["value"] == a["value"]:
                    continue
                pb = puts[b["value"]]
                if pb["return"] < pa["call"]:
                    n += 1
                    if n <= 3:
                        print(f"{path}: {key}: read {a['value']} at {a['call']/1e9:.3f}s "
                              f"(its PUT {pa['call']/1e9:.3f}-{pa['return']/1e9 if pa['outcome']=='ok' else float('inf'):.3f}s {pa['outcome']}), "
                              f"then read older {b['value']} at {b['call']/1e9:.3f}s "
                              f"(its PUT returned {pb['return']/1e9:.3f}s)")
                    break
    print(f"{path}: {n} new-then-old read pairs")
    total += n
print(f"total: {total}")
