"""LTF (Learning Towards the Future) for temporal-graph continual learning, and its baselines; read top to bottom.

The TGCL protocol (official ``SubGraphCL``, ``begin_task``): the stream is cut into ``n_tasks`` equal time periods;
each period brings ``classes_per_task`` new node classes while the old classes keep appearing *and evolving*
(their feature means rotate with time). At task i a model may train on all new-class events of period i, but the
period's old-class events only through a small stored subset (``memory_per_class`` events per old class, chosen
from period i's old-class training events with the model of task i-1). Evaluation: after task i, accuracy on
period i's held-out events of every class seen so far (class-incremental, one head over the seen classes).

Task: event-endpoint node classification of the source node of each event (label = its class).
Backbone: one TGAT-style attention layer (tasks.gnn.TemporalAttention) from the event's own features over the
source node's last k events before it (their features and time gaps), then a linear head.

Methods (``METHODS``):
* ``finetune``: new-class events only (no old data);
* ``joint``: every training event of the period (the full-data upper bound);
* ``er``: replay of a uniformly random subset; ``er_b`` the same with an independent draw (the null control);
* ``icarl``: replay of a herding subset (official iCaRL.py: greedy match of the class-mean embedding);
* ``ewc``, ``lwf``: regularisers, no stored events (as in the official EWC.py / LwF.py); EWC's diagonal Fisher is
  the mean of per-event squared gradients; the penalty weight (EWC lambda, LwF weight) is chosen per seed from a
  small grid by the average accuracy on held-out validation events of each period;
* ``ltf``: error-minimising greedy kernel selection (official ``select_prototypes(K, w·norm_loss, m)``) plus a
  distribution-only subset (``select_prototypes(K, None, m)``) that is the target of a per-class RBF-MMD
  regulariser on the replayed events' embeddings; both subsets count towards the same per-class budget and both
  are replayed, so LTF stores and replays exactly as many events as ER and iCaRL;
* ``ltf_select``: LTF's selection without the MMD regulariser (an ablation, reported, not claimed);
* ``ltf_official``: LTF with the official storage, not equal memory (a diagnostic added after the first full run,
  reported, not claimed): memory_per_class error-min events replayed plus ltf_distribution_per_class
  distribution events on top, both selected from the whole pool as in SubGraph.py.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from flows.tgcl_ltf.params import Params
from paperflows.core.seeding import numpy_rng, torch_generator, torch_seeded
from tasks.gnn import TemporalAttention, recent_events
from tasks.graphs import EventStream, temporal_stream
from tasks.train import torch_single_thread

METHODS = ("finetune", "joint", "er", "er_b", "icarl", "ewc", "lwf", "ltf", "ltf_select", "ltf_official")
EQUAL_MEMORY = ("er", "er_b", "icarl", "ltf", "ltf_select")   # each stores exactly memory_per_class per old class
REPLAY = EQUAL_MEMORY + ("ltf_official",)
MMD_REGULARISED = ("ltf", "ltf_official")


# ----------------------------------------------------------------------------------------------------------------
# Data: the stream, its periods (tasks) and the backbone's inputs, precomputed once per seed
# ----------------------------------------------------------------------------------------------------------------
@dataclass
class Stream:
    """Per-event tensors (E = events): ``x`` (E, d) features, ``neighbour_x`` (E, k, d) features of the source's
    last k earlier events, ``delta_t`` (E, k) their time gaps, ``valid`` (E, k), ``y`` (E,) source class,
    ``period`` (E,) task index, ``is_test`` (E,) held-out test flag, ``is_val`` (E,) held-out validation flag
    (disjoint from the test events; selects the regularisers' weights); ``task_classes[i]`` the classes new at
    task i."""
    x: torch.Tensor
    neighbour_x: torch.Tensor
    delta_t: torch.Tensor
    valid: torch.Tensor
    y: torch.Tensor
    period: np.ndarray
    is_test: np.ndarray
    is_val: np.ndarray
    task_classes: list[np.ndarray]


def make_stream(p: Params, seed: int) -> Stream:
    """Generate the drifting stream (classes 2i, 2i+1 appear at t = i / n_tasks) and the backbone inputs."""
    n_classes = p.n_tasks * p.classes_per_task
    onset = np.repeat(np.arange(p.n_tasks) / p.n_tasks, p.classes_per_task)
    events: EventStream = temporal_stream(p.n_nodes, p.n_events, n_classes, p.homophily, p.drift, p.n_features,
                                          p.noise, numpy_rng(seed, 0), class_onset=onset)
    _, past, valid = recent_events(events.src, events.dst, events.t, events.src, events.t, p.k_neighbours)
    x = torch.from_numpy(events.features).float()
    period = np.minimum((events.t * p.n_tasks).astype(int), p.n_tasks - 1)
    is_test = numpy_rng(seed, 1).random(p.n_events) < p.test_fraction
    is_val = ~is_test & (numpy_rng(seed, 3).random(p.n_events) < p.val_fraction)
    return Stream(x=x, neighbour_x=x[torch.from_numpy(past)] * torch.from_numpy(valid)[..., None],
                  delta_t=torch.from_numpy((events.t[:, None] - events.t[past]) * valid).float(),
                  valid=torch.from_numpy(valid), y=torch.from_numpy(events.node_class[events.src]).long(),
                  period=period, is_test=is_test, is_val=is_val,
                  task_classes=[np.arange(i * p.classes_per_task, (i + 1) * p.classes_per_task)
                                for i in range(p.n_tasks)])


class Backbone(nn.Module):
    """TGAT-lite: attention of the event (its features as the query node's state) over the source's last k events
    (neighbour state zero, event features, time gap), then a linear head over all classes."""

    def __init__(self, p: Params, n_classes: int) -> None:
        super().__init__()
        self.attention = TemporalAttention(p.n_features, p.n_features, p.time_features, p.hidden, p.embedding_dim)
        self.head = nn.Linear(p.embedding_dim, n_classes)

    def embed(self, s: Stream, idx: torch.Tensor) -> torch.Tensor:
        """Embeddings (len(idx), embedding_dim) of the events ``idx``."""
        neighbour_state = torch.zeros_like(s.neighbour_x[idx])
        return self.attention(s.x[idx], neighbour_state, s.neighbour_x[idx], s.delta_t[idx], s.valid[idx])

    def logits(self, z: torch.Tensor, n_seen: int) -> torch.Tensor:
        """Class-incremental head: classes not yet seen get no logit."""
        return self.head(z)[:, :n_seen]


# ----------------------------------------------------------------------------------------------------------------
# LTF's pieces: the greedy kernel selection and the MMD regulariser
# ----------------------------------------------------------------------------------------------------------------
def rbf_kernel(a: torch.Tensor, b: torch.Tensor, gamma: float) -> torch.Tensor:
    """exp(-gamma |a_i - b_j|²), (n, d), (m, d) -> (n, m) (official ``partial_rbf_kernel``; gamma = 1/d there)."""
    return torch.exp(-gamma * torch.cdist(a, b, compute_mode="donot_use_mm_for_euclid_dist") ** 2)


def select_prototypes(K: torch.Tensor, m: int, penalty: torch.Tensor | None = None) -> np.ndarray:
    """Greedy prototype selection of ``m`` of the n samples of the kernel matrix ``K`` (n, n) (official
    ``select_prototypes``): each step adds the candidate maximising
    colsum_i − (2 Σ_{s∈S} K_si + K_ii) / (|S| + 1) − penalty_i,  colsum_i = 2/n Σ_j K_ji,
    i.e. minimising (|S|+1)·MMD²(S ∪ {i}, all) + penalty_i. Returns the chosen indices in selection order (m,)."""
    n = K.shape[0]
    m = min(m, n)
    score_base = 2 * K.sum(0) / n - (0 if penalty is None else penalty)
    to_selected = torch.zeros(n, dtype=K.dtype)      # Σ_{s∈S} K_s·, kept incrementally (O(n) per step)
    chosen = torch.zeros(n, dtype=torch.bool)
    order = []
    for size in range(m):
        score = score_base - (2 * to_selected + K.diagonal()) / (size + 1)
        best = int(torch.where(chosen, -torch.inf, score).argmax())
        chosen[best] = True
        order.append(best)
        to_selected += K[best]
    return np.asarray(order, dtype=np.int64)


def mmd2(a: torch.Tensor, b: torch.Tensor, gamma: float) -> torch.Tensor:
    """Biased (V-statistic) squared MMD between samples a (n, d) and b (m, d) under exp(-gamma |·|²),
    differentiable in both."""
    return rbf_kernel(a, a, gamma).mean() + rbf_kernel(b, b, gamma).mean() - 2 * rbf_kernel(a, b, gamma).mean()


# ----------------------------------------------------------------------------------------------------------------
# Memory selection: every replay method stores exactly memory_per_class events per old class
# ----------------------------------------------------------------------------------------------------------------
@torch.no_grad()
def select_memory(method: str, p: Params, model: Backbone, s: Stream, candidates: np.ndarray, n_seen: int,
                  rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(replayed, distribution) event ids among ``candidates`` (old-class training events of the new period),
    per old class; ``replayed`` ∪ ``distribution`` has exactly min(memory_per_class, class size) events per class
    (for LTF and its ablation ``distribution`` ⊂ ``replayed``; ``ltf_official`` stores it on top)."""
    replayed, distribution = [], []
    for c in np.unique(s.y[candidates].numpy()):
        pool = candidates[s.y[candidates].numpy() == c]
        budget = min(p.memory_per_class, len(pool))
        if method in ("er", "er_b"):
            replayed.append(rng.choice(pool, budget, replace=False))
            continue
        z = model.embed(s, torch.from_numpy(pool))
        if method == "icarl":
            # herding (official iCaRL.py): the running mean of the chosen embeddings tracks the class mean
            target, total, taken = z.mean(0), torch.zeros_like(z[0]), torch.zeros(len(pool), dtype=torch.bool)
            picks = []
            for i in range(budget):
                gap = ((total + z) / (i + 1) - target).norm(dim=1).masked_fill(taken, torch.inf)
                best = int(gap.argmin())
                taken[best] = True
                total += z[best]
                picks.append(best)
            replayed.append(pool[picks])
            continue
        # LTF: a distribution-only subset first (the MMD target), then the error-minimising subset from the rest
        K = rbf_kernel(z, z, 1.0 / z.shape[1])
        n_dist = min(p.ltf_distribution_per_class, budget - 1)
        dist = select_prototypes(K, n_dist)
        rest = np.setdiff1d(np.arange(len(pool)), dist)
        if method == "ltf_official":   # official storage: both subsets from the whole pool, the replay one full size
            n_dist, rest = 0, np.arange(len(pool))
        loss = F.cross_entropy(model.logits(z[rest], n_seen), s.y[pool[rest]], reduction="none")
        span = (loss.max() - loss.min()).clamp_min(1e-12)
        penalty = p.ltf_loss_weight * (loss - loss.min()) / span
        chosen = select_prototypes(K[rest][:, rest], budget - n_dist, penalty)
        # at equal memory the distribution subset is replayed too (every stored event trains, as for ER); the
        # official storage replays only the error-min subset and keeps the distribution subset on top
        replayed.append(pool[rest[chosen]] if method == "ltf_official" else pool[np.concatenate([rest[chosen], dist])])
        distribution.append(pool[dist])
    cat = lambda parts: np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)  # noqa: E731
    return cat(replayed), cat(distribution)


# ----------------------------------------------------------------------------------------------------------------
# Regularisers of EWC and LwF
# ----------------------------------------------------------------------------------------------------------------
def diagonal_fisher(model: Backbone, s: Stream, events: np.ndarray, n_seen: int) -> dict:
    """Diagonal empirical Fisher: mean over ``events`` of the squared gradient of each event's own NLL (the
    squared gradient of a batch mean would be about batch-size times smaller)."""
    fisher = {n: torch.zeros_like(w) for n, w in model.named_parameters()}
    for e in events:
        model.zero_grad()
        idx = torch.tensor([e])
        F.cross_entropy(model.logits(model.embed(s, idx), n_seen), s.y[idx]).backward()
        for n, w in model.named_parameters():
            fisher[n] += w.grad.detach() ** 2 / len(events)
    model.zero_grad()
    return fisher


def distillation(old_logits: torch.Tensor, new_logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """LwF's soft-target cross-entropy on the old classes' logits (m, c_old), both at temperature T."""
    target = F.softmax(old_logits / temperature, dim=1)
    return -(target * F.log_softmax(new_logits / temperature, dim=1)).sum(1).mean()


# ----------------------------------------------------------------------------------------------------------------
# Training of one task, and the whole continual run
# ----------------------------------------------------------------------------------------------------------------
def train_task(method: str, p: Params, model: Backbone, s: Stream, new: np.ndarray, memory: np.ndarray,
               distribution: np.ndarray, n_seen: int, n_old: int, seed: int, old_model: Backbone | None = None,
               ewc: tuple[dict, dict] | None = None, weight: float = 0.0) -> None:
    """Adam over mini-batches of ``new`` events; replay methods add a memory batch each step (loss × old_data_weight),
    LTF adds Σ_old classes MMD²(replayed embeddings, distribution-subset embeddings) × ltf_mmd_weight; ``weight``:
    EWC's lambda or LwF's distillation weight."""
    optimiser = torch.optim.Adam(model.parameters(), lr=p.lr)
    generator = torch_generator(seed)
    memory_t, dist_t = torch.from_numpy(memory), torch.from_numpy(distribution)
    for _ in range(p.epochs):
        order = torch.from_numpy(new)[torch.randperm(len(new), generator=generator)]
        for start in range(0, len(order), p.batch_size):
            idx = order[start:start + p.batch_size]
            z = model.embed(s, idx)
            logits = model.logits(z, n_seen)
            loss = F.cross_entropy(logits, s.y[idx])
            if method == "lwf" and old_model is not None:
                with torch.no_grad():
                    old_logits = old_model.logits(old_model.embed(s, idx), n_old)
                loss = loss + weight * distillation(old_logits, logits[:, :n_old], p.lwf_temperature)
            if method == "ewc" and ewc is not None:
                fisher, anchor = ewc
                loss = loss + weight * sum((fisher[n] * (w - anchor[n]) ** 2).sum()
                                                 for n, w in model.named_parameters())
            if len(memory_t):
                pick = memory_t[torch.randperm(len(memory_t), generator=generator)[:p.batch_size]]
                z_old = model.embed(s, pick)
                old_loss = F.cross_entropy(model.logits(z_old, n_seen), s.y[pick])
                if method in MMD_REGULARISED and len(dist_t):
                    with torch.no_grad():   # the target side is a fixed sample, as in the official code
                        z_dist = model.embed(s, dist_t)
                    reg = 0.0
                    for c in torch.unique(s.y[pick]):
                        here, there = s.y[pick] == c, s.y[dist_t] == c
                        if here.sum() >= 2 and there.any():
                            reg = reg + mmd2(z_old[here], z_dist[there], p.ltf_reg_gamma)
                    old_loss = old_loss + p.ltf_mmd_weight * reg
                loss = loss + p.old_data_weight * old_loss
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()


@torch.no_grad()
def evaluate(model: Backbone, s: Stream, task: int, n_seen: int, classes_per_task: int,
             held: np.ndarray | None = None) -> tuple[float, list[float]]:
    """Accuracy on period ``task``'s test events (or the ``held`` events, e.g. ``s.is_val``; all seen classes),
    and per class group j ≤ task."""
    test = np.flatnonzero((s.period == task) & (s.is_test if held is None else held))
    idx = torch.from_numpy(test)
    correct = (model.logits(model.embed(s, idx), n_seen).argmax(1) == s.y[idx]).numpy()
    group = s.y[idx].numpy() // classes_per_task
    return float(correct.mean()), [float(correct[group == j].mean()) for j in range(task + 1)]


@torch.no_grad()
def evaluate_group(model: Backbone, s: Stream, task: int, group: int, classes_per_task: int) -> tuple[int, float]:
    """Accuracy of ``model`` (head restricted to the classes up to ``group``) on period ``task``'s test events of
    class group ``group``; returns (count, accuracy)."""
    test = np.flatnonzero((s.period == task) & s.is_test & (s.y.numpy() // classes_per_task == group))
    idx = torch.from_numpy(test)
    pred = model.logits(model.embed(s, idx), (group + 1) * classes_per_task).argmax(1)
    return len(test), float((pred == s.y[idx]).float().mean())


def forgetting(group_acc: list[list[float]]) -> float:
    """Average forgetting: mean over groups j < T-1 of max_{j ≤ i < T-1} acc_i(j) − acc_{T-1}(j)
    (``group_acc[i][j]``: accuracy on group j after task i)."""
    last = len(group_acc) - 1
    return float(np.mean([max(group_acc[i][j] for i in range(j, last)) - group_acc[last][j] for j in range(last)]))


def continual(method: str, p: Params, base: Backbone, s: Stream, train_of: list[np.ndarray], seed: int,
              rng: np.random.Generator, weight: float = 0.0) -> dict:
    """One method's run over tasks 1.. from the shared task-0 model ``base``; ``weight``: EWC's lambda or LwF's
    distillation weight. Returns the method's row, plus ``val_accuracy`` (the average over tasks of the accuracy
    on each period's validation events) for the choice of ``weight``."""
    model = copy.deepcopy(base)
    acc0, groups0 = evaluate(base, s, 0, p.classes_per_task, p.classes_per_task)
    accs, groups, stored = [acc0], [groups0], 0
    vals = [evaluate(base, s, 0, p.classes_per_task, p.classes_per_task, s.is_val)[0]]
    ewc_state = None
    for task in range(1, p.n_tasks):
        n_old, n_seen = task * p.classes_per_task, (task + 1) * p.classes_per_task
        period = train_of[task]
        is_new = s.y[period].numpy() >= n_old
        new, old = period[is_new], period[~is_new]
        memory = distribution = np.zeros(0, np.int64)
        if method == "joint":
            new = period
        elif method in REPLAY:
            memory, distribution = select_memory(method, p, model, s, old, n_old, rng)
            stored = max(stored, len(np.union1d(memory, distribution)))
        if method == "ewc":
            # the Fisher of (a random sample of) the previous task's training events, at the previous task's weights
            sample = rng.choice(train_of[task - 1], min(p.ewc_fisher_events, len(train_of[task - 1])), replace=False)
            fisher = diagonal_fisher(model, s, sample, n_old)
            anchor = {n: w.detach().clone() for n, w in model.named_parameters()}
            if ewc_state is not None:   # accumulate the importance of all earlier tasks
                fisher = {n: fisher[n] + ewc_state[0][n] for n in fisher}
            ewc_state = (fisher, anchor)
        old_model = copy.deepcopy(model).eval() if method == "lwf" else None
        train_task(method, p, model, s, new, memory, distribution, n_seen, n_old, seed * 1000 + task,
                   old_model=old_model, ewc=ewc_state, weight=weight)
        acc, group = evaluate(model, s, task, n_seen, p.classes_per_task)
        accs.append(acc)
        groups.append(group)
        vals.append(evaluate(model, s, task, n_seen, p.classes_per_task, s.is_val)[0])
    return {"method": method, "seed": seed, "avg_accuracy": float(np.mean(accs)), "forgetting": forgetting(groups),
            "final_accuracy": accs[-1], "stored_events": stored, "weight": weight,
            "val_accuracy": float(np.mean(vals)), **{f"acc_task{i}": a for i, a in enumerate(accs)}}


def run_seed(p: Params, seed: int) -> list[dict]:
    """One seed: the stream, task 0 trained once (identical for every method), then each method continues.
    Rows: method, seed, avg_accuracy, forgetting, final_accuracy, stored_events (max over tasks), weight (EWC's
    lambda or LwF's weight, the grid value best on validation; 0 for the others), val_accuracy, acc_task{i};
    plus one ``drift_probe`` row: stale_drop = accuracy of the frozen task-0 model on the first classes in period 0
    minus in the last period (the old classes' evolution, by construction of the stream)."""
    with torch_single_thread():
        s = make_stream(p, seed)
        n_classes = p.n_tasks * p.classes_per_task
        train_of = [np.flatnonzero((s.period == i) & ~s.is_test & ~s.is_val) for i in range(p.n_tasks)]
        with torch_seeded(seed):
            base = Backbone(p, n_classes)
        train_task("finetune", p, base, s, train_of[0], np.zeros(0, np.int64), np.zeros(0, np.int64),
                   p.classes_per_task, 0, seed)
        _, groups0 = evaluate(base, s, 0, p.classes_per_task, p.classes_per_task)
        # old classes evolve: the task-0 model, frozen, on the first classes' events of the last period
        _, stale = evaluate_group(base, s, p.n_tasks - 1, 0, p.classes_per_task)
        rows = [{"method": "drift_probe", "seed": seed, "stale_drop": groups0[0] - stale}]
        grids = {"ewc": p.ewc_lambdas, "lwf": p.lwf_weights}
        for m_id, method in enumerate(METHODS):
            candidates = [continual(method, p, base, s, train_of, seed, numpy_rng(seed, 2, m_id, g), w)
                          for g, w in enumerate(grids.get(method, [0.0]))]
            # the regularisers' weight: the best on validation, never on test (ties: the first, the weakest)
            rows.append(max(candidates, key=lambda r: r["val_accuracy"]))
        return rows
