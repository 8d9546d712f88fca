"""Every paper's runtime at default scale against the per-paper budget (issue #21): 60 s of flow body on 2 cores.

``python benchmarks/bench_papers.py`` reads the committed ``results/<slug>/metrics.json`` (the flow body's time of
the run that produced them); ``--run`` reruns every paper at default scale into a scratch folder first, each as a
fresh process, and reads those. Prints the table (slowest first), the total and the median, and writes
``benchmarks/results/papers.md``.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from paperflows.params import configured_slugs  # noqa: E402

BUDGET_S = 60.0


def flow_body_seconds(results_root: Path, slug: str) -> float:
    return json.loads((results_root / slug / "metrics.json").read_text())["metrics"]["timings"]["flow_body_s"]


def table(results_root: Path, slugs: list[str]) -> str:
    times = {slug: flow_body_seconds(results_root, slug) for slug in slugs}
    over = [s for s, t in times.items() if t > BUDGET_S]
    rows = ["| paper | flow body (s) | budget 60 s |", "|---|---|---|"]
    rows += [f"| `{slug}` | {t:.0f} | {'over' if t > BUDGET_S else 'ok'} |"
             for slug, t in sorted(times.items(), key=lambda item: -item[1])]
    total = sum(times.values())
    rows += ["", f"Total {total / 60:.1f} min over {len(times)} papers; median {statistics.median(times.values()):.0f} s; "
                 f"{len(over)} over the budget."]
    return "\n".join(rows) + "\n"


def main(run: bool) -> str:
    slugs = configured_slugs(ROOT / "params.yaml")
    if not run:
        return table(ROOT / "results", slugs)
    with tempfile.TemporaryDirectory() as scratch:
        for slug in slugs:
            subprocess.run([sys.executable, "-m", "paperflows", "run", slug, "--out", scratch], cwd=ROOT, check=True)
        return table(Path(scratch) / "results", slugs)


if __name__ == "__main__":
    text = main("--run" in sys.argv[1:])
    (ROOT / "benchmarks" / "results").mkdir(exist_ok=True)
    (ROOT / "benchmarks" / "results" / "papers.md").write_text(text)
    print(text)
