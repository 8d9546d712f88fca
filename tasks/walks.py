"""node2vec's random walks (uniform, or biased by the return parameter p and in-out parameter q) and skip-gram
with negative sampling, vectorised over walkers.

The graph comes as CSR arrays (``Graph.csr()``): the neighbours of v are ``indices[indptr[v]:indptr[v+1]]``, sorted.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from paperflows.core.seeding import numpy_rng, torch_generator, torch_seeded


def _uniform_neighbour(indptr: np.ndarray, indices: np.ndarray, nodes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    degree = indptr[nodes + 1] - indptr[nodes]
    return indices[indptr[nodes] + (rng.random(len(nodes)) * degree).astype(np.int64)]


def _edge_keys(indptr: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """u·n + v for every stored edge (u, v): globally sorted, because CSR rows are sorted and come in node order."""
    n = len(indptr) - 1
    return np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr)) * n + indices


def _adjacent(keys: np.ndarray, n: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Whether each edge (a[i], b[i]) exists, by binary search in the sorted edge keys."""
    wanted = a.astype(np.int64) * n + b
    pos = np.minimum(np.searchsorted(keys, wanted), len(keys) - 1)
    return keys[pos] == wanted


def next_step(indptr: np.ndarray, indices: np.ndarray, prev: np.ndarray, cur: np.ndarray, p: float, q: float,
              rng: np.random.Generator) -> np.ndarray:
    """One second-order node2vec step for walkers at ``cur`` (m,) that came from ``prev`` (m,).

    The next node x ∈ N(cur) has probability ∝ 1/p if x = prev, 1 if x is a neighbour of prev, 1/q otherwise
    (Grover & Leskovec 2016). Drawn by rejection, as in torch_cluster: propose a uniform neighbour, accept with
    weight / max weight. Every cur must have a neighbour.
    """
    if p <= 0 or q <= 0:
        raise ValueError(f"p and q must be positive, got {p} and {q}")
    out = _uniform_neighbour(indptr, indices, cur, rng)
    if p == 1 and q == 1:
        return out
    bound = max(1 / p, 1.0, 1 / q)
    keys = _edge_keys(indptr, indices)
    pending = np.arange(len(cur))
    while len(pending):
        x = _uniform_neighbour(indptr, indices, cur[pending], rng)
        weight = np.where(x == prev[pending], 1 / p, np.where(_adjacent(keys, len(indptr) - 1, prev[pending], x), 1.0, 1 / q))
        accepted = rng.random(len(pending)) * bound < weight
        out[pending[accepted]] = x[accepted]
        pending = pending[~accepted]
    return out


def random_walks(indptr: np.ndarray, indices: np.ndarray, starts: np.ndarray, length: int, p: float, q: float,
                 rng: np.random.Generator) -> np.ndarray:
    """Walks of ``length`` nodes from each of ``starts`` (m,), shape (m, length); column 0 is the start.

    The first step is uniform; later steps follow :func:`next_step`. A walker on an isolated node stays there.
    """
    if length < 1:
        raise ValueError(f"length must be >= 1, got {length}")
    walks = np.empty((len(starts), length), dtype=np.int64)
    walks[:, 0] = starts
    degree = np.diff(indptr)
    for j in range(1, length):
        cur = walks[:, j - 1]
        moving = degree[cur] > 0
        walks[:, j] = cur
        if j == 1:
            walks[moving, 1] = _uniform_neighbour(indptr, indices, cur[moving], rng)
        else:
            walks[moving, j] = next_step(indptr, indices, walks[moving, j - 2], cur[moving], p, q, rng)
    return walks


def skipgram_pairs(walks: np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray]:
    """(center, context) pairs of every two nodes at most ``window`` apart along each walk (m, L), each pair once.

    With one shared embedding table the score z_u·z_v is symmetric, so one direction suffices (as in PyG's Node2Vec).
    """
    centers = [walks[:, :-k].ravel() for k in range(1, min(window, walks.shape[1] - 1) + 1)]
    contexts = [walks[:, k:].ravel() for k in range(1, min(window, walks.shape[1] - 1) + 1)]
    return np.concatenate(centers), np.concatenate(contexts)


def skipgram_loss(z_center: torch.Tensor, z_context: torch.Tensor, z_negative: torch.Tensor) -> torch.Tensor:
    """Negative-sampling loss: −mean log σ(z_c·z_o) − mean log σ(−z_c·z_n).

    ``z_center``, ``z_context`` (b, d); ``z_negative`` (b, k, d) — k negatives per pair.
    """
    positive = F.logsigmoid((z_center * z_context).sum(-1))
    negative = F.logsigmoid(-(z_center[:, None, :] * z_negative).sum(-1))
    return -positive.mean() - negative.mean()


def train_skipgram(walks: np.ndarray, n_nodes: int, dim: int, window: int, negatives: int, epochs: int,
                   batch_size: int, lr: float, seed: int) -> np.ndarray:
    """Node embeddings (n_nodes, dim) from skip-gram with uniform negative nodes, trained with SparseAdam on
    shuffled mini-batches of :func:`skipgram_pairs`. Deterministic under ``seed``."""
    centers, contexts = (torch.as_tensor(a) for a in skipgram_pairs(walks, window))
    with torch_seeded(seed):
        table = torch.nn.Embedding(n_nodes, dim, sparse=True)
    optimiser = torch.optim.SparseAdam(table.parameters(), lr=lr)
    generator = torch_generator(seed)
    for _ in range(epochs):
        order = torch.randperm(len(centers), generator=generator)
        for start in range(0, len(order), batch_size):
            batch = order[start:start + batch_size]
            negative = torch.randint(0, n_nodes, (len(batch), negatives), generator=generator)
            optimiser.zero_grad()
            skipgram_loss(table(centers[batch]), table(contexts[batch]), table(negative)).backward()
            optimiser.step()
    return table.weight.detach().numpy().copy()


def node2vec(indptr: np.ndarray, indices: np.ndarray, *, dim: int, walk_length: int, walks_per_node: int, window: int,
             negatives: int, p: float, q: float, epochs: int, batch_size: int, lr: float, seed: int) -> np.ndarray:
    """node2vec on a CSR graph: ``walks_per_node`` walks from every node, then :func:`train_skipgram`; (n, dim)."""
    n = len(indptr) - 1
    walks = random_walks(indptr, indices, np.tile(np.arange(n), walks_per_node), walk_length, p, q, numpy_rng(seed, 0))
    return train_skipgram(walks, n, dim, window, negatives, epochs, batch_size, lr, seed)
