"""Two-sample tests and distances of tasks.two_sample: wall time as the sample size grows.

Compares the batched permutation tests (`kernel_permutation_tests`: every permutation's energy and MMD statistic
from one matrix product) with the generic loop (`permutation_test`, recomputing the statistic per permutation),
and the sliced Wasserstein distance with equal sizes (sorted projections) and unequal sizes (quantiles). Each
time is the minimum over --reps calls. The diffusion papers run these tests once per seed, sampler and data set.

Usage: python benchmarks/bench_two_sample.py [--ns 250 500 1000 2000] [--permutations 100] [--reps 3]
Prints a markdown table and writes benchmarks/results/two_sample.csv. Not a test.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tasks import two_sample  # noqa: E402
from timing import best_time  # noqa: E402  (benchmarks/timing.py)




def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ns", type=int, nargs="+", default=[250, 500, 1000, 2000])
    parser.add_argument("--permutations", type=int, default=100)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--generic-cap", type=int, default=1000, help="largest n for the per-permutation loop")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "two_sample.csv")
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    rows = []
    for n in args.ns:
        x, y = rng.standard_normal((n, 2)), rng.standard_normal((n, 2))
        row = {"n": n,
               "batched_energy_and_mmd_s": best_time(
                   lambda: two_sample.kernel_permutation_tests(x, y, args.permutations), args.reps),
               "generic_energy_s": float("nan"),
               "sliced_w2_equal_s": best_time(lambda: two_sample.sliced_wasserstein(x, y), args.reps),
               "sliced_w2_unequal_s": best_time(lambda: two_sample.sliced_wasserstein(x, y[:-1]), args.reps)}
        if n <= args.generic_cap:
            row["generic_energy_s"] = best_time(
                lambda: two_sample.permutation_test(x, y, two_sample.energy_distance, args.permutations), 1)
        rows.append(row)

    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"| n per sample | batched energy + MMD ({args.permutations} perms) | generic energy loop | "
          "sliced W2, equal sizes | sliced W2, unequal sizes |")
    print("|---|---|---|---|---|")
    for row in rows:
        generic = "–" if np.isnan(row["generic_energy_s"]) else f"{row['generic_energy_s']:.3f}"
        print(f"| {row['n']} | {row['batched_energy_and_mmd_s']:.3f} | {generic} | "
              f"{row['sliced_w2_equal_s']:.4f} | {row['sliced_w2_unequal_s']:.4f} |")


if __name__ == "__main__":
    main()
