"""LapSum soft top-k vs the baselines: CPU forward + backward time as n grows (k = n/10).

Times one forward and one backward (a random vector-Jacobian product) of each method on a batch of
float32 score rows: CPU time of the calling thread (with --threads 1) and wall-clock time, each the
minimum over --reps calls after a warm-up. NeuralSort and SoftSort build a
(batch, k, n) matrix (quadratic for k = n/10) and are timed up to --quadratic-cap; Sinkhorn's
unrolled autograd keeps O(n x iterations) memory and is timed up to --sinkhorn-cap.

Usage: python benchmarks/bench_lapsum.py [--ns 1000 10000 20000 100000 1000000] [--batch 4] [--reps 3]
       [--threads 1] [--quadratic-cap 20000] [--sinkhorn-cap 100000] [--methods lapsum softmax ...]
Prints a markdown table and writes benchmarks/results/lapsum_scaling.csv. Not a test.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from flows.lapsum import method  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ns", type=int, nargs="+", default=[1000, 10000, 20000, 100000, 1000000])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--tau", type=float, default=1.0)
    parser.add_argument("--sinkhorn-iter", type=int, default=100)
    parser.add_argument("--quadratic-cap", type=int, default=20000)
    parser.add_argument("--sinkhorn-cap", type=int, default=100000)
    parser.add_argument("--methods", nargs="+", default=list(method.METHODS), choices=method.METHODS)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "lapsum_scaling.csv")
    args = parser.parse_args()

    rows = method.scaling_rows(sorted(args.ns), args.methods, args.quadratic_cap, args.sinkhorn_cap, args.batch,
                              args.reps, args.tau, args.sinkhorn_iter, args.threads)
    t = {(r["method"], r["n"]): r["cpu_s"] for r in rows}
    w = {(r["method"], r["n"]): r["wall_s"] for r in rows}
    for r in rows:
        r["speedup_of_lapsum"] = r["cpu_s"] / t["lapsum", r["n"]] if ("lapsum", r["n"]) in t else math.nan

    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["method", "n", "cpu_s", "wall_s", "speedup_of_lapsum"])
        writer.writeheader()
        writer.writerows(rows)

    ns = sorted(args.ns)
    print(f"forward+backward CPU seconds (wall-clock in brackets), batch {args.batch}, k = n/10, float32, "
          f"{args.threads} thread(s), min of {args.reps} (x = its CPU time / LapSum's; '-' = above the cap)\n")
    print("| method | " + " | ".join(f"n={n:.0e}" for n in ns) + " |")
    print("|---|" + "---|" * len(ns))
    for m in args.methods:
        cells = [f"{t[m, n]:.4g} [{w[m, n]:.4g}] ({t[m, n] / t['lapsum', n]:.3g}x)" if (m, n) in t and ("lapsum", n) in t
                 else f"{t[m, n]:.4g} [{w[m, n]:.4g}]" if (m, n) in t else "-" for n in ns]
        print(f"| {m} | " + " | ".join(cells) + " |")
    lap = [n for n in ns if ("lapsum", n) in t]
    if len(lap) >= 2:
        print(f"\nLapSum CPU time({lap[-1]}) / time({lap[-2]}) = {t['lapsum', lap[-1]] / t['lapsum', lap[-2]]:.2f}"
              f" (wall-clock: {w['lapsum', lap[-1]] / w['lapsum', lap[-2]]:.2f})")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
