"""What pinning the numeric kernels costs (issue #20): two papers at default scale, each run as a fresh process
with the kernels pinned (the default) and unpinned (``PAPERFLOWS_UNPINNED=1``, and none of the pinned variables
in the environment), interleaved and repeated; the flow body's own time from each run's ``metrics.json``.

Usage: ``python benchmarks/bench_pinning.py [SLUG ...]`` (default: quantum_reuploading, torch-bound, and
feddp_kmeans, NumPy/scikit-learn-bound). Writes ``benchmarks/results/pinning.md``.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from paperflows.settings import PINNED, UNPIN_VARIABLE  # noqa: E402
from timing import paper_run_seconds  # noqa: E402  (benchmarks/timing.py)

PAPERS = ("quantum_reuploading", "feddp_kmeans")
REPEATS = 2


def flow_body_seconds(slug: str, pinned: bool, out: Path) -> float:
    env = {k: v for k, v in os.environ.items() if k not in PINNED and k != UNPIN_VARIABLE}
    if not pinned:
        env[UNPIN_VARIABLE] = "1"
    return paper_run_seconds(slug, env, out)["flow_body_s"]


def main(papers: tuple[str, ...]) -> str:
    rows = ["| paper | pinned (s) | unpinned (s) | pinned / unpinned |", "|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as scratch:
        for slug in papers:
            times = {True: [], False: []}
            for repeat in range(REPEATS):
                for pinned in (True, False):  # interleaved, so machine load hits both alike
                    times[pinned].append(flow_body_seconds(slug, pinned, Path(scratch) / f"{slug}-{pinned}-{repeat}"))
            best = {k: min(v) for k, v in times.items()}
            rows.append(f"| `{slug}` | {best[True]:.1f} | {best[False]:.1f} | {best[True] / best[False]:.2f} |")
    table = "\n".join(rows) + "\n"
    target = ROOT / "benchmarks" / "results" / "pinning.md"
    target.parent.mkdir(exist_ok=True)
    target.write_text(f"Flow body, best of {REPEATS} interleaved runs each, on {os.cpu_count()} cores:\n\n{table}")
    return table


if __name__ == "__main__":
    print(main(tuple(sys.argv[1:]) or PAPERS))
