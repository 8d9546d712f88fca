"""The harness budgets of issue #10, measured (never asserted in tests).

1. Feedback: wall time of a params error (`paperflows run lapsum --set tau=-1`) and of `paperflows check`,
   each as a fresh process, median of 5.
2. DVC: no-op `dvc repro` (median of 3) in a copy of the repo (with its DVC cache and data) holding the
   first 1, 5, 10, 15 and all papers, and its projection to 57 papers by a quadratic fit (DVC parses each
   stage's params file once per stage; since each paper got its own small params/<slug>.yaml, that part
   no longer grows with the square of the paper count).
3. Precision: for each tasks/ and paperflows/ module, how many paper stages `dvc status` lists after an
   edit to it (the importers; 0 for a module no paper runs).

Run it on a repo whose `dvc status` is clean (after `make repro`).
Usage: python benchmarks/bench_harness.py    Writes benchmarks/results/harness.md.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

from paperflows.dvcgen import RESERVED_STAGES

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
TARGET_PAPERS = 57


def wall(args: list[str], cwd: Path, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run(args, cwd=cwd, capture_output=True, text=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def copy_repo(destination: Path) -> Path:
    shutil.copytree(ROOT, destination, ignore=shutil.ignore_patterns(".venv", ".paperflows", "__pycache__"),
                    symlinks=True)
    return destination


def keep_papers(repo: Path, count: int) -> list[str]:
    raw = yaml.safe_load((repo / "params.yaml").read_text())
    kept = list(raw["papers"])[:count]
    raw["papers"] = {slug: raw["papers"][slug] for slug in kept}
    (repo / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    subprocess.run([str(BIN / "python"), "-m", "paperflows", "dvc-yaml"], cwd=repo, check=True, capture_output=True)
    return kept


def changed_stages(repo: Path) -> set[str]:
    out = subprocess.run([str(BIN / "dvc"), "status", "--json"], cwd=repo, capture_output=True, text=True).stdout
    return {stage for stage, changes in json.loads(out or "{}").items()
            if any("changed deps" in c for c in changes if isinstance(c, dict))}


def main() -> None:
    python = str(BIN / "python")
    lines = ["# Harness budgets\n", f"Measured {time.strftime('%Y-%m-%d')} on a 2-core machine.\n"]
    error = wall([python, "-m", "paperflows", "run", "lapsum", "--set", "tau=-1"], ROOT, 5)
    check = wall([python, "-m", "paperflows", "check"], ROOT, 5)
    lines += ["## Feedback (fresh process, median of 5)\n", "| command | wall s | budget |", "|---|---|---|",
              f"| `paperflows run lapsum --set tau=-1` (params error) | {error:.2f} | ≤ 1.5 |",
              f"| `paperflows check` (all papers, default and smoke) | {check:.2f} | – |", ""]

    with tempfile.TemporaryDirectory() as tmp:
        repo = copy_repo(Path(tmp) / "repo")
        total = len(yaml.safe_load((repo / "params.yaml").read_text())["papers"])
        assert not changed_stages(repo), "run `make repro` first: dvc status must be clean"
        counts = sorted({1, min(5, total), min(10, total), min(15, total), total})
        noop = {}
        for count in reversed(counts):
            keep_papers(repo, count)
            noop[count] = wall([str(BIN / "dvc"), "repro"], repo, 3)
        projected = float(np.polyval(np.polyfit(list(noop), list(noop.values()), 2), TARGET_PAPERS))
        lines += ["## No-op `dvc repro` (median of 3)\n", "| papers | wall s |", "|---|---|"]
        lines += [f"| {n} | {noop[n]:.2f} |" for n in counts]
        lines += [f"| {TARGET_PAPERS} (quadratic projection) | {projected:.2f} |", "",
                  f"Budget: ≤ 2 s at the current {total} papers.\n"]

    with tempfile.TemporaryDirectory() as tmp:
        repo = copy_repo(Path(tmp) / "repo")
        lines += ["## Papers rerun by an edit to one module (`dvc status`, changed deps)\n",
                  "| module | paper stages | summary |", "|---|---|---|"]
        for module in sorted([*(repo / "tasks").glob("*.py"), *(repo / "paperflows").rglob("*.py")]):
            original = module.read_text()
            module.write_text(original + "\n# an edit\n")
            stages = changed_stages(repo)
            module.write_text(original)
            papers = sorted(stages - set(RESERVED_STAGES))
            lines.append(f"| `{module.relative_to(repo)}` | {len(papers)} of {total}"
                         + (f" ({', '.join(papers)})" if 0 < len(papers) < 8 else "")
                         + f" | {'yes' if 'summary' in stages else 'no'} |")
    out = ROOT / "benchmarks" / "results" / "harness.md"
    out.write_text("\n".join(lines) + "\n")
    print(out.read_text())


if __name__ == "__main__":
    main()
