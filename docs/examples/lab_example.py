"""strata_lab in a notebook or a script: reproduce one EXPECTED.md cell and
plot a miss-ratio curve.

    pip install ./python matplotlib
    python docs/examples/lab_example.py [TRACES_DIR] [OUT.png]

TRACES_DIR defaults to ../shared/traces beside the repository.
"""

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import strata_lab  # noqa: E402

root = Path(__file__).resolve().parents[2]
traces = Path(sys.argv[1]) if len(sys.argv) > 1 else root.parent / "shared" / "traces"
out = Path(sys.argv[2]) if len(sys.argv) > 2 else root / "docs" / "screenshots" / "mrc_python.png"
trace = traces / "twitter_cluster52.csv"

# EXPECTED.md, twitter_cluster52.csv, lru at 10% of the working set:
# request miss ratio 0.2091, byte miss ratio 0.2156 (libCacheSim's cachesim).
cell = strata_lab.simulate(trace, "lru", "10%")
print(cell[["policy", "cache_size", "miss_ratio", "byte_miss_ratio"]].to_string(index=False))
assert round(cell["miss_ratio"][0], 4) == 0.2091
assert round(cell["byte_miss_ratio"][0], 4) == 0.2156

# The exact LRU curve (one pass over the trace), the SHARDS estimate from a
# 10% sample, and three other policies simulated at a few sizes.
curves = strata_lab.mrc(trace, exact=True, sample=0.1, points=40)
sizes = ["1%", "2%", "5%", "10%", "20%", "40%"]
others = strata_lab.simulate(trace, ["fifo", "s3fifo", "arc"], sizes)

fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
mib = 1 << 20
ax.plot(curves.exact["cache_size"] / mib, curves.exact["miss_ratio"], label="LRU (exact MRC)", lw=2)
ax.plot(curves.shards["cache_size"] / mib, curves.shards["miss_ratio"], "--", label="LRU (SHARDS, 10% sample)")
for name, g in others.groupby("policy"):
    g = g.sort_values("cache_size")
    ax.plot(g["cache_size"] / mib, g["miss_ratio"], "o-", ms=3, label=name)
ax.scatter([cell["cache_size"][0] / mib], [cell["miss_ratio"][0]], color="black", zorder=5,
           label="EXPECTED.md: lru 10% = 0.2091")
ax.set_xlabel("cache size (MiB)")
ax.set_ylabel("miss ratio")
ax.set_title("twitter_cluster52.csv (1M requests) — strata_lab")
ax.grid(alpha=0.3)
ax.legend(fontsize=8)
fig.tight_layout()
out.parent.mkdir(parents=True, exist_ok=True)
fig.savefig(out)
print(f"wrote {out}")
