"""strata_lab against the shared traces, EXPECTED.md and the strata binary.

The traces are ../shared/traces beside the repository (as for the Rust
tests); the binary is target/release/strata (built by `cargo test`), or
$STRATA_BIN.
"""

import json
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import strata_lab

ROOT = Path(__file__).resolve().parents[2]
TRACES = Path(os.environ.get("STRATA_TRACES", ROOT.parent / "shared" / "traces"))
TW1M = TRACES / "twitter_cluster52.csv"
TW10M = TRACES / "twitter_cluster52_10m.csv.zst"
CLOUD = TRACES / "cloudPhysicsIO.oracleGeneral.bin"
STRATA = Path(
    os.environ.get(
        "STRATA_BIN",
        Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "release" / "strata",
    )
)


def setup_module(_):
    assert TW1M.exists(), f"the shared traces are missing: expected {TW1M}"


def expected_cells(section: str):
    """EXPECTED.md's table under the heading that starts with `section`:
    {policy: [(req, byte, obj) at 1%, 5%, 10%, 20%]}."""
    text = (TRACES / "EXPECTED.md").read_text()
    part = text.split("## " + section, 1)[1].split("\n## ", 1)[0]
    out = {}
    for line in part.splitlines():
        m = re.match(r"\| (\w+) \| (.+) \|$", line)
        if not m or m.group(1) == "policy":
            continue
        cells = [tuple(float(x) for x in c.split(" / ")) for c in m.group(2).split(" | ")]
        out[m.group(1)] = cells
    return out


def test_read_trace_whole_and_in_chunks():
    df = strata_lab.read_trace(TW1M)
    assert isinstance(df, pd.DataFrame)
    assert list(df.columns) == ["time", "op", "object", "workload", "size"]
    assert len(df) == 1_000_000
    assert df["object"].nunique() == 143_542
    assert df["op"].isin([0, 1, 2]).all()
    # Chunks cover the same requests, in order, with bounded size.
    n, first_objects = 0, None
    for chunk in strata_lab.read_trace(TW1M, chunk_rows=100_000, as_frame=False):
        assert set(chunk) == {"time", "op", "object", "workload", "size"}
        assert len(chunk["object"]) <= 100_000
        if first_objects is None:
            first_objects = chunk["object"][:10]
        n += len(chunk["object"])
    assert n == 1_000_000
    np.testing.assert_array_equal(first_objects, df["object"].to_numpy()[:10])


def test_read_trace_compressed_and_binary_formats():
    # zstd-compressed CSV, streamed: only the first chunk is read.
    chunk = next(strata_lab.iter_trace(TW10M, chunk_rows=5000))
    assert len(chunk["time"]) == 5000
    assert (np.diff(chunk["time"]) >= 0).all()
    # The same CloudPhysics trace in two encodings reads the same.
    a = strata_lab.read_trace(CLOUD)
    b = strata_lab.read_trace(TRACES / "cloudPhysicsIO.vscsi")
    assert len(a) == len(b) == 113_872
    assert a["object"].nunique() == b["object"].nunique() == 48_974


def test_simulate_reproduces_expected_cells():
    want = expected_cells("twitter_cluster52.csv")
    df = strata_lab.simulate(TW1M, ["lru", "fifo", "s3fifo"], ["1%", "10%"])
    assert len(df) == 6
    for _, row in df.iterrows():
        name = row["policy"].split("(")[0].lower().replace("-", "")
        name = {"s3fifo": "s3fifo"}.get(name, name)
        col = 0 if row["cache_size"] == 292_272 else 2
        req, byte, _ = want[name if name in want else row["policy"].lower()][col]
        assert round(row["miss_ratio"], 4) == req, row.to_dict()
        assert round(row["byte_miss_ratio"], 4) == byte, row.to_dict()
        assert row["hits"] + row["misses"] == row["lookups"]


def test_simulate_equals_the_command_line():
    assert STRATA.exists(), f"build the strata binary first (cargo build --release): {STRATA}"
    out = subprocess.run(
        [str(STRATA), "sim", str(TW1M), "--policy", "lru,arc", "--size", "5%,20%", "--json"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    cli = pd.DataFrame([json.loads(l) for l in out.splitlines() if l.strip()])
    py = strata_lab.simulate(TW1M, "lru,arc", ["5%", "20%"])
    key = ["policy", "cache_size"]
    cli, py = cli.sort_values(key).reset_index(drop=True), py.sort_values(key).reset_index(drop=True)
    for col in ["cache_size", "requests", "hits", "misses"]:
        assert cli[col].tolist() == py[col].tolist(), col
    np.testing.assert_allclose(py["miss_ratio"], cli["miss_ratio"], rtol=0, atol=1e-12)


def test_object_mode_and_absolute_sizes():
    want = expected_cells("twitter_cluster52.csv")
    df = strata_lab.simulate(TW1M, "lru", ["1%"], unit="objects")
    assert round(df["miss_ratio"][0], 4) == want["lru"][0][2]
    df2 = strata_lab.simulate(TW1M, "lru", [292_272])
    assert round(df2["miss_ratio"][0], 4) == want["lru"][0][0]


def test_exact_mrc_equals_lru_and_shards_is_close():
    c = strata_lab.mrc(TW1M, exact=True, sample=0.1, sizes=["1%", "10%"])
    lru = strata_lab.simulate(TW1M, "lru", ["1%", "10%"]).sort_values("cache_size")
    np.testing.assert_allclose(c.exact["miss_ratio"], lru["miss_ratio"], atol=1e-9)
    assert (abs(c.shards["miss_ratio"] - c.exact["miss_ratio"]) < 0.03).all()
    even = strata_lab.mrc(TW1M, points=4)
    assert len(even.exact) == 4 and even.shards is None
    assert even.exact["miss_ratio"].is_monotonic_decreasing


def test_analyze_and_provision():
    a = strata_lab.analyze(TW1M)
    assert a["requests"] == 1_000_000
    p = strata_lab.provision(TW1M, flash_bytes=2_922_721)
    assert 0.0 < p.predicted_flash_hit_ratio < 1.0
    assert len(p.workloads) >= 1
    assert p.tier_plan["format"] == "strata-tier-plan"
    assert abs(sum(w["flash_bytes"] for w in p.tier_plan["workloads"]) - 2_922_721) <= 2_922_721 * 0.01


def test_errors_are_python_exceptions_with_the_rust_message():
    with pytest.raises(OSError, match="no-such-trace"):
        strata_lab.read_trace("/nonexistent/no-such-trace.csv")
    with pytest.raises(ValueError, match="nosuchpolicy"):
        strata_lab.simulate(TW1M, "nosuchpolicy", ["1%"])
    with pytest.raises(ValueError, match="unit"):
        strata_lab.simulate(TW1M, "lru", ["1%"], unit="pages")
    with pytest.raises(ValueError, match="percentage"):
        strata_lab.simulate(TW1M, "lru", ["150%"])
    with pytest.raises(ValueError):
        strata_lab.provision(TW1M, flash_bytes=-1)
    with pytest.raises(TypeError):
        strata_lab.simulate(TW1M, "lru", [1.5])


def test_the_docs_example_reproduces_a_cell_and_draws_the_curve(tmp_path):
    pytest.importorskip("matplotlib", reason="scripts/test installs matplotlib")
    png = tmp_path / "mrc.png"
    example = ROOT / "docs" / "examples" / "lab_example.py"
    subprocess.run([os.sys.executable, str(example), str(TRACES), str(png)], check=True)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size > 20_000
