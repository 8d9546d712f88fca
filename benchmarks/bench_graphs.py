"""Neighbour aggregation for tasks.gnn: ``index_add_``, the dense adjacency product and torch.sparse (CSR, and the
COO matrix tasks.gnn uses).

One GraphSAGE-style mean aggregation, forward + backward, on contextual SBM graphs of growing size at mean
degree 10 and 64 features, one torch thread (as inside a paper's seed task). Each time is the minimum over --reps
calls. The dense route also pays for building A once per graph, reported apart.

Usage: python benchmarks/bench_graphs.py [--ns 250 500 1000 2000 5000] [--reps 20]
Prints a markdown table and writes benchmarks/results/graphs.csv. Not a test.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tasks import gnn, graphs  # noqa: E402
from timing import best_time  # noqa: E402  (benchmarks/timing.py)




def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ns", type=int, nargs="+", default=[250, 500, 1000, 2000, 5000])
    parser.add_argument("--features", type=int, default=64)
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "graphs.csv")
    args = parser.parse_args()
    torch.set_num_threads(1)

    rows = []
    for n in args.ns:
        g = graphs.csbm(n, 5, mean_degree=10.0, homophily=0.7, n_features=args.features, signal=1.0,
                        rng=np.random.default_rng(0))
        edge_index = torch.as_tensor(g.edge_index)
        x = torch.randn(n, args.features, requires_grad=True)
        degree = torch.bincount(edge_index[1], minlength=n).clamp(min=1).float()[:, None]
        x_mean = lambda h: torch.zeros_like(h).index_add_(0, edge_index[1], h[edge_index[0]]) / degree

        def build_dense():
            A = torch.zeros(n, n)
            A[edge_index[1], edge_index[0]] = 1.0
            return A / degree

        dense = build_dense()
        sparse = dense.to_sparse_csr()
        coo = gnn.mean_adjacency(edge_index, n)

        def step(aggregate):
            return lambda: aggregate(x).sum().backward()

        rows.append({
            "n": n, "edges": edge_index.shape[1],
            "index_add_s": best_time(step(x_mean), args.reps),
            "dense_s": best_time(step(lambda h: dense @ h), args.reps),
            "dense_build_s": best_time(build_dense, args.reps),
            "torch_sparse_csr_s": best_time(step(lambda h: sparse @ h), args.reps),
            "torch_sparse_coo_s": best_time(step(lambda h: torch.sparse.mm(coo, h)), args.reps),
        })

    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print("| n | directed edges | index_add_ | dense A·H | dense A build (once) | torch.sparse CSR | torch.sparse COO |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['n']} | {r['edges']} | {r['index_add_s'] * 1e3:.2f} ms | {r['dense_s'] * 1e3:.2f} ms | "
              f"{r['dense_build_s'] * 1e3:.2f} ms | {r['torch_sparse_csr_s'] * 1e3:.2f} ms | "
              f"{r['torch_sparse_coo_s'] * 1e3:.2f} ms |")


if __name__ == "__main__":
    main()
