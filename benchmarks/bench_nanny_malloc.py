"""What a Dask nanny's ``MALLOC_TRIM_THRESHOLD_`` costs a paper (issue #27): Dask exports it to its workers
(``distributed.nanny.pre-spawn-environ``), and setting it turns off glibc's dynamic mmap threshold, so every array
over 128 KB is mapped, unmapped and page-faulted anew. ``paperflows.scaleout`` runs papers without it. Each paper
runs at default scale as a fresh process with and without the nanny's value, interleaved and repeated.

Usage: ``python benchmarks/bench_nanny_malloc.py [SLUG ...]`` (default: vi_net, torch-bound, and feddp_kmeans,
NumPy/scikit-learn-bound). Writes ``benchmarks/results/nanny_malloc.md``.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from paperflows.scaleout import UNSET_FOR_PAPERS, paper_process_environment  # first: it pins NumPy's kernels
from timing import ROOT, paper_run_seconds  # benchmarks/timing.py

import dask  # noqa: E402
import distributed  # noqa: E402, F401  (registers the nanny's configuration)

PAPERS = ("vi_net", "feddp_kmeans")
REPEATS = 2
(VARIABLE,) = UNSET_FOR_PAPERS


def main(papers: tuple[str, ...]) -> str:
    nannys_value = str(dask.config.get("distributed.nanny.pre-spawn-environ")[VARIABLE])
    without = paper_process_environment(fresh=False)  # what a worker gives a paper's commands
    environments = {"without": without, "with": {**without, VARIABLE: nannys_value}}
    rows = [f"| paper | flow body without (s) | with {VARIABLE}={nannys_value} (s) | with / without | "
            "system CPU without (s) | with (s) |", "|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as scratch:
        for slug in papers:
            runs = {name: [] for name in environments}
            for repeat in range(REPEATS):
                for name, env in environments.items():  # interleaved, so machine load hits both alike
                    runs[name].append(paper_run_seconds(slug, env, Path(scratch) / f"{slug}-{name}-{repeat}"))
            best = {name: min(times, key=lambda run: run["flow_body_s"]) for name, times in runs.items()}
            rows.append(f"| `{slug}` | {best['without']['flow_body_s']:.1f} | {best['with']['flow_body_s']:.1f} | "
                        f"{best['with']['flow_body_s'] / best['without']['flow_body_s']:.2f} | "
                        f"{best['without']['sys_s']:.1f} | {best['with']['sys_s']:.1f} |")
    table = "\n".join(rows) + "\n"
    target = ROOT / "benchmarks" / "results" / "nanny_malloc.md"
    target.parent.mkdir(exist_ok=True)
    target.write_text(f"Flow body, best of {REPEATS} interleaved runs each (system CPU of that run), on "
                      f"{os.cpu_count()} cores:\n\n{table}")
    return table


if __name__ == "__main__":
    print(main(tuple(sys.argv[1:]) or PAPERS))
