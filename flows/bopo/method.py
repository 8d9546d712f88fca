"""BOPO (Best-anchored and Objective-guided Preference Optimization) on random Euclidean TSP, against
REINFORCE with a greedy-rollout baseline and SLIM-style self-labelling, all training the same small
attention (Kool-style) constructive solver; no Prefect. Read top to bottom:

1. instances and tour lengths;
2. exact optima by Held-Karp dynamic programming (the reference of every optimality gap);
3. the policy: a 2-layer attention encoder and a pointer decoder that builds a tour node by node;
4. the training signals: BOPO's best-anchored pairs + objective-guided loss, REINFORCE, SLIM;
5. one seed: train each method from the same initial weights for the same number of steps, evaluate.

Shapes: ``coords`` (I, n, 2) for I instances; tours (I, R, n) for R rollouts per instance, every tour
starts at node 0 (a TSP tour is invariant to rotation, so fixing the start loses no optimum).
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch
from torch import nn

from flows.bopo.params import Params
from paperflows.core.seeding import numpy_rng, torch_generator, torch_seeded
from tasks.train import torch_single_thread, warm_up_optimiser

TEST_SEED = 20_250_000  # the fixed test set, shared by every training seed (paired comparisons)
METHODS = ("bopo", "reinforce", "slim", "bopo_beta1", "bopo_allpairs")


# ---------------------------------------------------------------------------- 1. instances
def instances(seed: int, n_instances: int, n_nodes: int, *stream: int) -> np.ndarray:
    """Uniform points in the unit square, shape (n_instances, n_nodes, 2)."""
    return numpy_rng(seed, *stream).random((n_instances, n_nodes, 2))


def tour_lengths(coords: torch.Tensor, tours: torch.Tensor) -> torch.Tensor:
    """Closed-tour lengths: coords (I, n, 2), tours (I, R, n) -> (I, R)."""
    I, R, n = tours.shape
    pts = torch.gather(coords.unsqueeze(1).expand(I, R, n, 2), 2, tours.unsqueeze(-1).expand(I, R, n, 2))
    return (pts - pts.roll(-1, dims=2)).norm(dim=-1).sum(-1)


# ---------------------------------------------------------------------------- 2. exact optima
def held_karp(coords: np.ndarray) -> np.ndarray:
    """Optimal closed-tour length of every instance (coords (I, n, 2) -> (I,)) by Held-Karp DP,
    vectorised over instances; O(2^n n^2) per instance, fine up to n ~ 14.

    dp[:, S, j] = shortest path from node 0 through the node set S (bitmask over nodes 1..n-1) ending at j.
    """
    I, n, _ = coords.shape
    D = np.linalg.norm(coords[:, :, None] - coords[:, None], axis=-1)  # (I, n, n)
    m = n - 1
    inner = D[:, 1:, 1:]                                               # (I, m, m): i -> j among 1..n-1
    dp = np.full((I, 1 << m, m), np.inf)
    for j in range(m):
        dp[:, 1 << j, j] = D[:, 0, j + 1]
    for mask in range(1, 1 << m):
        js = [j for j in range(m) if mask >> j & 1]
        if len(js) < 2:
            continue
        prev = dp[:, [mask ^ (1 << j) for j in js], :]                 # (I, |js|, m) over last node i
        cand = prev + inner[:, :, js].transpose(0, 2, 1)               # + D[i, j]
        dp[:, mask, js] = cand.min(-1)
    return (dp[:, (1 << m) - 1, :] + D[:, 1:, 0]).min(-1)


# ---------------------------------------------------------------------------- 3. the policy
class AttentionPolicy(nn.Module):
    """Kool et al.'s attention model, small: a transformer encoder over the nodes, then a decoder whose
    query is the context [mean embedding, first node, last node], one masked multi-head glimpse and a
    tanh-clipped single-head pointer over the unvisited nodes."""

    def __init__(self, d: int, heads: int, layers: int, clip: float = 10.0):
        super().__init__()
        self.d, self.heads, self.clip = d, heads, clip
        self.embed = nn.Linear(2, d)
        layer = nn.TransformerEncoderLayer(d, heads, dim_feedforward=2 * d, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.project_nodes = nn.Linear(d, 3 * d, bias=False)  # glimpse keys, glimpse values, pointer keys
        self.project_context = nn.Linear(3 * d, d, bias=False)
        self.project_out = nn.Linear(d, d, bias=False)

    def rollout(self, coords: torch.Tensor, n_rollouts: int, mode: str, generator: torch.Generator | None = None,
                actions: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Build ``n_rollouts`` tours per instance. coords (I, n, 2); mode "sample", "greedy" or "force"
        (teacher forcing of ``actions`` (I, R, n)). Returns tours (I, R, n) and per-step log-probs (I, R, n-1)."""
        I, n, _ = coords.shape
        R, h, dk = n_rollouts, self.heads, self.d // self.heads
        emb = self.encoder(self.embed(coords))                                   # (I, n, d)
        gk, gv, pk = self.project_nodes(emb).chunk(3, dim=-1)
        gk = gk.view(I, n, h, dk).transpose(1, 2)                                # (I, h, n, dk)
        gv = gv.view(I, n, h, dk).transpose(1, 2)
        mean = emb.mean(1, keepdim=True).expand(I, R, self.d)
        first = emb[:, :1].expand(I, R, self.d)                                  # tours start at node 0
        rows = torch.arange(I)[:, None]
        visited = torch.zeros(I, R, n, dtype=torch.bool)
        visited[:, :, 0] = True
        last = torch.zeros(I, R, dtype=torch.long)
        tour, logps = [last], []
        for t in range(1, n):
            h_last = emb[rows, last]                                             # (I, R, d)
            q = self.project_context(torch.cat([mean, first, h_last], -1)).view(I, R, h, dk)
            score = torch.einsum("irhk,ihnk->irhn", q, gk) / math.sqrt(dk)
            score = score.masked_fill(visited[:, :, None, :], -math.inf)
            glimpse = torch.einsum("irhn,ihnk->irhk", score.softmax(-1), gv).reshape(I, R, self.d)
            glimpse = self.project_out(glimpse)
            logits = self.clip * torch.tanh(torch.einsum("ird,ind->irn", glimpse, pk) / math.sqrt(self.d))
            logp = logits.masked_fill(visited, -math.inf).log_softmax(-1)        # (I, R, n)
            if mode == "force":
                nxt = actions[:, :, t]
            elif mode == "greedy":
                nxt = logp.argmax(-1)
            else:  # Gumbel-max sampling from the policy, with an explicit generator (thread-safe seeding)
                u = torch.rand(logp.shape, generator=generator).clamp_(1e-12, 1 - 1e-12)
                nxt = (logp.detach() - torch.log(-torch.log(u))).argmax(-1)
            logps.append(logp.gather(-1, nxt[..., None]).squeeze(-1))
            visited = visited.clone()
            visited[rows, torch.arange(R)[None, :], nxt] = True
            last = nxt
            tour.append(nxt)
        return torch.stack(tour, -1), torch.stack(logps, -1)


# ---------------------------------------------------------------------------- 4. training signals
def uniform_filter(lengths: torch.Tensor, K: int) -> torch.Tensor:
    """BOPO's uniform filtering: sort the B solutions of each instance by objective and keep K of them at
    evenly spaced ranks 0, B/K, 2B/K, ... (the best always kept first). lengths (I, B) -> indices (I, K)."""
    I, B = lengths.shape
    order = lengths.argsort(dim=-1, stable=True)
    ranks = (torch.arange(K) * B) // K
    return order[:, ranks]


def preference_pairs(K: int, scheme: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(winner, loser) positions among K solutions sorted best first. "best": the paper's best-anchored pairs
    (0, j) for j = 1..K-1; "all": every (i, j) with i < j (the ablation)."""
    if scheme == "best":
        return torch.zeros(K - 1, dtype=torch.long), torch.arange(1, K)
    w, l = torch.triu_indices(K, K, offset=1)
    return w, l


def bopo_loss(mean_logp: torch.Tensor, lengths: torch.Tensor, winners: torch.Tensor, losers: torch.Tensor,
              objective_guided: bool = True) -> torch.Tensor:
    """Objective-guided pairwise loss, averaged over instances and pairs:
    -log sigmoid( g(y_l)/g(y_w) * (mean log pi(y_w) - mean log pi(y_l)) ), g = tour length (minimised),
    mean = per-step log-likelihood; no reference policy, no reward model. mean_logp, lengths (I, K) sorted
    best first; winners, losers (P,). ``objective_guided=False`` is the beta = 1 ablation."""
    beta = lengths[:, losers] / lengths[:, winners] if objective_guided else torch.ones(1)
    margin = mean_logp[:, winners] - mean_logp[:, losers]
    return -nn.functional.logsigmoid(beta.detach() * margin).mean()


def training_loss(model: AttentionPolicy, coords: torch.Tensor, method: str, p: Params,
                  generator: torch.Generator) -> torch.Tensor:
    """One step's loss for ``method`` on a batch of instances (I, n, 2). Every method sees the same
    hybrid rollout pool: B - 1 sampled tours + 1 greedy tour per instance."""
    B = p.samples
    if method == "reinforce":
        # REINFORCE with the current policy's greedy rollout as baseline (self-critical), POMO-style many
        # samples per instance; the greedy tour has zero advantage, so B - 1 samples carry the gradient
        with torch.no_grad():
            greedy, _ = model.rollout(coords, 1, "greedy")
            baseline = tour_lengths(coords, greedy)                                # (I, 1)
        tours, logp = model.rollout(coords, B - 1, "sample", generator)
        advantage = tour_lengths(coords, tours) - baseline                         # (I, B-1), lower is better
        return (advantage * logp.sum(-1)).mean()
    with torch.no_grad():  # sample the pool without a graph, then re-score the kept tours with one
        sampled, _ = model.rollout(coords, B - 1, "sample", generator)
        greedy, _ = model.rollout(coords, 1, "greedy")
        pool = torch.cat([greedy, sampled], 1)                                     # (I, B, n)
        lengths = tour_lengths(coords, pool)
    if method == "slim":  # self-labelling: cross-entropy (mean per step) on the best tour of the pool
        best = pool[torch.arange(len(pool)), lengths.argmin(-1)][:, None]
        _, logp = model.rollout(coords, 1, "force", actions=best)
        return -logp.mean()
    keep = uniform_filter(lengths, p.keep)                                         # (I, K), best first
    kept = torch.gather(pool, 1, keep[..., None].expand(-1, -1, pool.shape[-1]))
    kept_len = torch.gather(lengths, 1, keep)
    _, logp = model.rollout(coords, p.keep, "force", actions=kept)
    winners, losers = preference_pairs(p.keep, "all" if method == "bopo_allpairs" else "best")
    return bopo_loss(logp.mean(-1), kept_len, winners, losers, objective_guided=method != "bopo_beta1")


def new_policy(p: Params, seed: int) -> AttentionPolicy:
    with torch_seeded(seed):
        return AttentionPolicy(p.d_model, p.heads, p.layers)


def train(model: AttentionPolicy, method: str, p: Params, seed: int) -> list[float]:
    """Adam for ``p.steps`` steps of ``p.batch`` fresh instances each (the same instance stream and
    sampling stream for every method of a seed). Returns the loss per step."""
    opt = torch.optim.Adam(model.parameters(), lr=p.lr)
    generator = torch_generator(seed)
    history = []
    model.train()
    for step in range(p.steps):
        coords = torch.as_tensor(instances(seed, p.batch, p.n_nodes, 1, step), dtype=torch.float32)
        loss = training_loss(model, coords, method, p, generator)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        history.append(float(loss.detach()))
    model.eval()
    return history


@torch.no_grad()
def evaluate(model: AttentionPolicy, coords: torch.Tensor, optimum: torch.Tensor, p: Params,
             seed: int) -> dict[str, float]:
    """Mean optimality gap (length / optimum - 1) with greedy decoding and with the best of
    ``p.eval_samples`` sampled tours. coords (I, n, 2), optimum (I,)."""
    greedy, _ = model.rollout(coords, 1, "greedy")
    sampled, _ = model.rollout(coords, p.eval_samples, "sample", torch_generator(seed + 7))
    g = tour_lengths(coords, greedy)[:, 0]
    s = tour_lengths(coords, sampled).min(-1).values
    return {"gap_greedy": float((g / optimum - 1).mean()), "gap_sample": float((s / optimum - 1).mean())}


# ---------------------------------------------------------------------------- 5. one seed
def test_set(p: Params) -> tuple[np.ndarray, np.ndarray]:
    """The fixed test instances (n_test, n, 2) and their exact optimal lengths (n_test,)."""
    coords = instances(TEST_SEED, p.n_test, p.n_nodes)
    return coords, held_karp(coords)


def run_seed(p: Params, seed: int, coords: np.ndarray, optimum: np.ndarray) -> list[dict]:
    """Every method of ``p.methods`` trained from the same initial weights of this seed for the same
    number of steps, plus the untrained policy (the negative control). One row per method."""
    rows = []
    with torch_single_thread():
        warm_up_optimiser()
        X = torch.as_tensor(coords, dtype=torch.float32)
        opt = torch.as_tensor(optimum, dtype=torch.float32)
        init = new_policy(p, seed)
        rows.append({"seed": seed, "method": "untrained", **evaluate(init, X, opt, p, seed), "train_s": 0.0,
                     "final_loss": float("nan")})
        for method in p.methods:
            model = new_policy(p, seed)
            model.load_state_dict(init.state_dict())
            started = time.thread_time()  # this seed's thread only (seeds run in parallel threads)
            history = train(model, method, p, seed)
            elapsed = time.thread_time() - started
            rows.append({"seed": seed, "method": method, **evaluate(model, X, opt, p, seed), "train_s": elapsed,
                         "final_loss": float(np.mean(history[-10:]))})
    return rows
