"""Type hints of the native part of strata_lab (see strata_lab/__init__.py)."""

from typing import List, Optional

class Reader:
    def next_chunk(self, n: int) -> Optional[List[bytes]]: ...

def open_trace(path: str, format: Optional[str] = None) -> Reader: ...
def simulate_json(
    path: str,
    policies: str,
    sizes: List[str],
    unit: str = "bytes",
    format: Optional[str] = None,
    threads: Optional[int] = None,
) -> str: ...
def mrc_json(
    path: str,
    exact: bool = True,
    sample: Optional[float] = None,
    sizes: List[str] = ...,
    points: int = 20,
    unit: str = "bytes",
    format: Optional[str] = None,
    seed: Optional[int] = None,
) -> str: ...
def analyze_json(path: str, format: Optional[str] = None) -> str: ...
def provision_json(
    path: str,
    flash_bytes: float,
    policy: str = "fifo",
    write_bound_bytes_per_s: Optional[float] = None,
    format: Optional[str] = None,
) -> str: ...
