"""Where the development halves of the public benchmarks are (``../shared/bench-data``
beside the repository, or ``MEMSTRATA_BENCH_DATA``), for the tests that read them."""

from __future__ import annotations

import os
from pathlib import Path

_HERE = Path(__file__).resolve()
DATA = next((p for p in (Path(os.environ.get("MEMSTRATA_BENCH_DATA", "/nonexistent")),
                         _HERE.parents[2] / "shared" / "bench-data",  # ../shared from the repo
                         _HERE.parents[3] / "shared" / "bench-data") if p.is_dir()),
            _HERE.parents[2] / "shared" / "bench-data")
