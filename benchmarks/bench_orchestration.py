"""Orchestration overhead: what Prefect and DVC add to a paper's computation.

1. A paper run as a fresh process (`paperflows run SLUG --smoke`), against a temporary server (no
   PREFECT_API_URL) and against a running `prefect server start`, next to the flow body's own time.
2. Per-task overhead: N tiny tasks mapped in one flow against N plain calls.
3. `dvc status` and `dvc repro` when nothing changed.

Usage: python benchmarks/bench_orchestration.py [--papers lapsum waitless_olp] [--tasks 200]
Writes benchmarks/results/orchestration.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from paperflows import server  # noqa: E402  (imports no Prefect: the API address is set before Prefect loads)

BIN = Path(sys.executable).parent


def timed(args: list[str], env: dict[str, str]) -> tuple[float, str]:
    started = time.perf_counter()
    result = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise RuntimeError(f"{args} failed: {result.stderr[-2000:]}")
    return elapsed, result.stdout


def paper_runs(slugs: list[str]) -> list[dict[str, str]]:
    rows = []
    base_env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    server.start()
    modes = {"temporary server": base_env, "running server": {**base_env, "PREFECT_API_URL": server.API_URL}}
    import_s, _ = timed([sys.executable, "-c", "import prefect"], base_env)
    for slug in slugs:
        for mode, env in modes.items():
            with tempfile.TemporaryDirectory() as out:
                wall, _ = timed([sys.executable, "-m", "paperflows", "run", slug, "--smoke", "--out", out], env)
                body = json.loads((Path(out) / "results" / slug / "metrics.json").read_text())["metrics"]["timings"]["flow_body_s"]
            rows.append({"what": f"`paperflows run {slug} --smoke`", "mode": mode, "wall s": f"{wall:.1f}",
                         "flow body s": f"{body:.1f}", "overhead s": f"{wall - body:.1f}"})
    rows.append({"what": "`python -c 'import prefect'`", "mode": "-", "wall s": f"{import_s:.1f}",
                 "flow body s": "-", "overhead s": f"{import_s:.1f}"})
    return rows


def task_overhead(n_tasks: int) -> list[dict[str, str]]:
    from prefect import flow

    from paperflows.core.experiment import paper_task

    def work(i: int) -> int:
        return sum(range(1000)) + i

    mapped = paper_task(work)

    @flow
    def many() -> list[int]:
        return mapped.map(range(n_tasks)).result()

    many()  # warm up: server connection, imports
    started = time.perf_counter()
    many()
    in_flow = time.perf_counter() - started
    started = time.perf_counter()
    [work(i) for i in range(n_tasks)]
    plain = time.perf_counter() - started
    return [{"what": f"{n_tasks} mapped tasks in one flow", "wall s": f"{in_flow:.2f}",
             "per task ms": f"{1000 * (in_flow - plain) / n_tasks:.1f}"},
            {"what": f"{n_tasks} plain calls", "wall s": f"{plain:.4f}", "per task ms": "-"}]


def dvc_noop() -> list[dict[str, str]]:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    status_s, status = timed([str(BIN / "dvc"), "status"], env)
    repro_s, _ = timed([str(BIN / "dvc"), "repro"], env)
    return [{"what": "`dvc status`", "wall s": f"{status_s:.1f}", "note": status.strip().splitlines()[0] if status.strip() else ""},
            {"what": "`dvc repro`, nothing changed", "wall s": f"{repro_s:.1f}", "note": "every stage skipped"}]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--papers", nargs="+", default=["lapsum", "waitless_olp"])
    parser.add_argument("--tasks", type=int, default=200)
    args = parser.parse_args()
    server.start()
    os.environ["PREFECT_API_URL"] = server.API_URL  # this process talks to the running server
    from paperflows.core.report import markdown_table

    sections = [
        ("Paper runs as a fresh process", paper_runs(args.papers)),
        ("Per-task overhead (running server)", task_overhead(args.tasks)),
        ("DVC with nothing changed", dvc_noop()),
    ]
    text = "# Orchestration overhead\n\nMeasured by `benchmarks/bench_orchestration.py` on this machine "
    text += f"({os.cpu_count()} cores).\n\n" + "\n".join(f"## {title}\n\n{markdown_table(rows)}" for title, rows in sections)
    (ROOT / "benchmarks" / "results" / "orchestration.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
