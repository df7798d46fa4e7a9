"""Strata's lab in Python.

The same Rust code as the ``strata`` command line (crates/strata-trace,
strata-sim, strata-analyze, strata-provision), called through PyO3: trace
readers for every format the command line reads (compressed or not), the
cache simulator on all cores, exact and SHARDS miss-ratio curves, the
workload characterisation and Janus flash provisioning. Results come back as
NumPy arrays, pandas DataFrames and plain Python objects; errors are Python
exceptions (``ValueError`` for bad arguments, ``OSError`` for files that
cannot be read) carrying the Rust message.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from os import PathLike
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

import numpy as np
import pandas as pd

from . import _native

__all__ = [
    "read_trace",
    "iter_trace",
    "simulate",
    "mrc",
    "analyze",
    "provision",
    "Curves",
    "Plan",
    "OPS",
]

Path = Union[str, "PathLike[str]"]
Size = Union[int, str]

#: The op codes of the ``op`` column.
OPS = {0: "get", 1: "put", 2: "delete"}

_COLUMNS = (
    ("time", np.dtype("<f8")),
    ("op", np.dtype("u1")),
    ("object", np.dtype("<u8")),
    ("workload", np.dtype("<u4")),
    ("size", np.dtype("<u8")),
)


def iter_trace(
    path: Path, format: Optional[str] = None, chunk_rows: int = 1 << 20
) -> Iterator[Dict[str, np.ndarray]]:
    """Streams a trace in chunks of ``chunk_rows`` requests.

    Each chunk is a dict of NumPy arrays: ``time`` (float64 seconds),
    ``op`` (uint8: 0 get, 1 put, 2 delete; see :data:`OPS`), ``object``
    (uint64), ``workload`` (uint32), ``size`` (uint64 bytes). Memory stays
    bounded by one chunk whatever the trace's size.

    ``format`` forces a format by the command line's name (``oracle``,
    ``csv``, ``strace``, ...); by default it is detected.
    """
    if chunk_rows < 1:
        raise ValueError("chunk_rows must be at least 1")
    reader = _native.open_trace(str(path), format)
    while True:
        cols = reader.next_chunk(chunk_rows)
        if cols is None:
            return
        yield {
            name: np.frombuffer(buf, dtype=dt)
            for (name, dt), buf in zip(_COLUMNS, cols)
        }


def read_trace(
    path: Path,
    format: Optional[str] = None,
    *,
    as_frame: bool = True,
    chunk_rows: Optional[int] = None,
) -> Union[pd.DataFrame, Dict[str, np.ndarray], Iterator[Any]]:
    """Reads a trace (every format ``strata`` reads, compressed or not).

    By default the whole trace as a pandas DataFrame with the columns of
    :func:`iter_trace`; ``as_frame=False`` gives the dict of NumPy arrays.
    With ``chunk_rows`` it returns an iterator of chunks instead (DataFrames
    or dicts), for traces larger than RAM.
    """
    if chunk_rows is not None:
        chunks = iter_trace(path, format, chunk_rows)
        return (pd.DataFrame(c) for c in chunks) if as_frame else chunks
    parts = list(iter_trace(path, format))
    if parts:
        cols = {name: np.concatenate([p[name] for p in parts]) for name, _ in _COLUMNS}
    else:
        cols = {name: np.empty(0, dtype=dt) for name, dt in _COLUMNS}
    return pd.DataFrame(cols) if as_frame else cols


def _sizes(sizes: Union[Size, Sequence[Size]]) -> List[str]:
    if isinstance(sizes, (int, str)):
        sizes = [sizes]
    out = []
    for s in sizes:
        if isinstance(s, bool) or not isinstance(s, (int, str)):
            raise TypeError(f"a size is an int (units) or a str like '10%', not {s!r}")
        out.append(str(s))
    if not out:
        raise ValueError("no size given")
    return out


def simulate(
    path: Path,
    policies: Union[str, Sequence[str]],
    sizes: Union[Size, Sequence[Size]],
    unit: str = "bytes",
    *,
    format: Optional[str] = None,
    threads: Optional[int] = None,
) -> pd.DataFrame:
    """Simulates caches, as ``strata sim`` does, in one read of the trace.

    ``policies`` are ``strata sim``'s names (``"lru"``, ``"s3fifo"``,
    ``"lru-mid:75"``, ... or one comma-separated string); ``sizes`` are
    cache sizes in ``unit`` (``"bytes"`` or ``"objects"``) or percentages of
    the working set (``"10%"``). Every policy x size runs in parallel on all
    cores (``threads`` to bound it) with the GIL released.

    Returns one row per cache: ``policy``, ``cache_size``, ``unit``,
    ``requests``, ``hits``, ``misses``, ``miss_ratio``, ``byte_miss_ratio``
    and the rest of ``strata sim --json``'s fields.
    """
    if not isinstance(policies, str):
        policies = ",".join(policies)
    rows = json.loads(
        _native.simulate_json(str(path), policies, _sizes(sizes), unit, format, threads)
    )
    return pd.DataFrame(rows)


@dataclass
class Curves:
    """Miss-ratio curves: DataFrames with ``cache_size``, ``miss_ratio`` and
    ``byte_miss_ratio`` (``None`` when not computed)."""

    exact: Optional[pd.DataFrame]
    shards: Optional[pd.DataFrame]
    unit: str


def mrc(
    path: Path,
    exact: bool = True,
    sample: Optional[float] = None,
    sizes: Optional[Sequence[Size]] = None,
    points: int = 20,
    unit: str = "bytes",
    *,
    format: Optional[str] = None,
    seed: Optional[int] = None,
) -> Curves:
    """Miss-ratio curves of LRU, as ``strata mrc`` computes them.

    ``exact=True``: the exact curve from stack distances (one pass);
    ``sample=0.01``: SHARDS at that sampling rate (with ``seed`` for another
    hash). At ``sizes`` (as in :func:`simulate`), or at ``points`` even
    steps of the working set.
    """
    out = json.loads(
        _native.mrc_json(
            str(path),
            exact,
            sample,
            _sizes(sizes) if sizes is not None else [],
            points,
            unit,
            format,
            seed,
        )
    )
    frame = lambda v: None if v is None else pd.DataFrame(v)  # noqa: E731
    return Curves(exact=frame(out["exact"]), shards=frame(out["shards"]), unit=unit)


def analyze(path: Path, *, format: Optional[str] = None) -> Dict[str, Any]:
    """The workload summary of ``strata analyze --json`` as a dict: op mix,
    sizes, lifetimes, locality, read heat, popularity by age."""
    return json.loads(_native.analyze_json(str(path), format))


@dataclass
class Plan:
    """A Janus provisioning result.

    ``workloads`` is one row per workload (flash share, write probability,
    TTL, predicted flash reads); ``provision`` the whole result as
    ``strata provision --json`` gives it; ``tier_plan`` the plan a store
    loads (write it with ``json.dump`` and ``strata server --plan``).
    """

    predicted_flash_hit_ratio: float
    workloads: pd.DataFrame
    provision: Dict[str, Any]
    tier_plan: Dict[str, Any]


def provision(
    path: Path,
    flash_bytes: float,
    policy: str = "fifo",
    *,
    write_bound_bytes_per_s: Optional[float] = None,
    format: Optional[str] = None,
) -> Plan:
    """Janus flash provisioning from a trace, as ``strata provision``: the
    cacheability curves of every workload, the allocation of
    ``flash_bytes`` that maximises flash reads (bounded in flash writes
    with ``write_bound_bytes_per_s``), and the tier plan."""
    out = json.loads(
        _native.provision_json(
            str(path), float(flash_bytes), policy, write_bound_bytes_per_s, format
        )
    )
    p = out["provision"]
    return Plan(
        predicted_flash_hit_ratio=p["predicted_flash_hit_ratio"],
        workloads=pd.DataFrame(p["workloads"]),
        provision=p,
        tier_plan=out["plan"],
    )
