"""CoDy (Qu, Gomm, Färber, ICML 2025): counterfactual explanations for a temporal GNN's link predictions by a
Monte-Carlo tree search over sets of removed past events, against GreeDy, random search (iRand) and two factual
rankings turned into counterfactuals, all at the same budget of model calls. No Prefect; read top to bottom.

1. ``make_stream``: a bipartite user-item event stream with planted causal motifs (repeat an item of a recent
   event; pick an item of the same group as a recent event's item), each event's cause logged.
2. ``LinkModel`` / ``train_model``: a TGAT-lite link predictor (``tasks.gnn.TemporalAttention`` over the last k
   events of the user and of the item, MLP head), trained with one random negative item per event.
3. ``Instance``: one explained event: its candidate events (the official fixed-size 1-hop temporal subgraph) and
   a batched ``predict(masks)`` that recomputes the model with any subsets of candidates removed, counting
   every evaluated subset as one model call.
4. Explainers: ``cody`` (MCTS, policies random / temporal / spatio-temporal / event-impact), ``greedy`` (GreeDy),
   ``irand`` (random subsets of growing size) and ``factual_prefix`` (remove an attention or gradient ranking's
   prefix until the prediction flips).
5. ``aufsc``: fidelity+ as a function of sparsity and the area under it.

Details follow the official code (``daniel-gomm/CoDy``: ``cody/explainer/{cody,greedy,base}.py``,
``cody/selection.py``, ``cody/data.py``, ``cody/explainer/baseline/irand.py``), re-written.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from flows.cody.params import Params
from paperflows.core.seeding import numpy_rng, torch_generator, torch_seeded
from tasks.gnn import TemporalAttention, recent_events
from tasks.train import torch_single_thread

POLICIES = ("random", "temporal", "spatiotemporal", "event_impact")
EXPLAINERS = (*(f"cody_{p}" for p in POLICIES), "cody_random_b", "greedy_spatiotemporal", "greedy_event_impact",
              "irand", "factual_attention", "factual_gradient")
"""``cody_random_b`` is CoDy-random with a second, independent random stream: the placebo of the policy claim."""


# ----------------------------------------------------------------------------------------------------- the stream
@dataclass(frozen=True)
class Stream:
    """Events (E,) sorted by time: ``user`` in [0, n_users), ``item`` in [n_users, n_users + n_items) (one node
    id space), ``t`` strictly increasing; ``cause`` (E,) the id of the past event that triggered it (-1: none);
    ``node_features`` (n_nodes, feature_dim + 1): items get group centroid + noise, users zeros; the last column
    flags items."""

    user: np.ndarray
    item: np.ndarray
    t: np.ndarray
    cause: np.ndarray
    item_group: np.ndarray
    node_features: np.ndarray


def make_stream(p: Params, rng: np.random.Generator) -> Stream:
    """Each event: a uniform user; with chance ``p_repeat`` it repeats the item of one of its last
    ``motif_memory`` events, with chance ``p_cooc`` it takes another item of that item's group (the two co-occur),
    otherwise a uniform item (no cause). Times: a Poisson process of rate 1."""
    group = np.arange(p.n_items) % p.n_groups
    by_group = [np.flatnonzero(group == g) for g in range(p.n_groups)]
    users = rng.integers(0, p.n_users, p.n_events)
    draws, picks = rng.random(p.n_events), rng.random((p.n_events, 2))
    history: list[list[int]] = [[] for _ in range(p.n_users)]
    item = np.empty(p.n_events, dtype=np.int64)
    cause = np.full(p.n_events, -1, dtype=np.int64)
    for e, u in enumerate(users):
        recent = history[u][-p.motif_memory:]
        if recent and draws[e] < p.p_repeat + p.p_cooc:
            source = recent[int(picks[e, 0] * len(recent))]
            cause[e] = source
            if draws[e] < p.p_repeat:
                item[e] = item[source]
            else:
                same = by_group[group[item[source]]]
                item[e] = same[int(picks[e, 1] * len(same))]
        else:
            item[e] = int(picks[e, 1] * p.n_items)
        history[u].append(e)
    centroids = rng.standard_normal((p.n_groups, p.feature_dim))
    features = np.zeros((p.n_users + p.n_items, p.feature_dim + 1), dtype=np.float32)
    features[p.n_users:, :-1] = centroids[group] + p.feature_noise * rng.standard_normal((p.n_items, p.feature_dim))
    features[p.n_users:, -1] = 1.0
    t = np.cumsum(rng.exponential(1.0, p.n_events))
    return Stream(users.astype(np.int64), item + p.n_users, t, cause, group, features)


# ------------------------------------------------------------------------------------------------------- the TGNN
@dataclass(frozen=True)
class Windows:
    """What the model sees of m query nodes: ``node`` (m,), ``neighbour`` (m, k) node ids, ``delta_t`` (m, k)
    query time minus event time, ``valid`` (m, k); columns oldest to newest, as ``tasks.gnn.recent_events``."""

    node: np.ndarray
    neighbour: np.ndarray
    delta_t: np.ndarray
    valid: np.ndarray


def windows(s: Stream, nodes: np.ndarray, times: np.ndarray, k: int, upto: int | None = None) -> Windows:
    """The last k events of each node strictly before its time, among the stream's first ``upto`` events."""
    n = len(s.t) if upto is None else upto
    neighbour, event, valid = recent_events(s.user[:n], s.item[:n], s.t[:n], nodes, times, k)
    return Windows(np.asarray(nodes), neighbour, np.where(valid, times[:, None] - s.t[event], 0.0), valid)


class LinkModel(nn.Module):
    """logit(u, i, t) = MLP([z_u, z_i, z_u ⊙ z_i]) (TGN's merge MLP plus the product, which makes the user-item
    match easy to learn), z = one TGAT-style attention layer over the node's last k events (keys:
    the other endpoint's features and a cos time encoding of the event's age; one constant event feature)."""

    def __init__(self, node_features: torch.Tensor, time_dim: int, hidden: int) -> None:
        super().__init__()
        self.register_buffer("x", node_features)
        d = node_features.shape[1]
        self.attention = TemporalAttention(d, 1, time_dim, hidden, hidden)
        self.head = nn.Sequential(nn.Linear(3 * hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def embed(self, w: Windows, event_weight: torch.Tensor | None = None) -> torch.Tensor:
        """(m, hidden). ``event_weight`` (m, k) scales each slot's event feature (1 = present): the handle of the
        gradient saliency."""
        node, nb = torch.as_tensor(w.node), torch.as_tensor(w.neighbour)
        ones = torch.ones(*nb.shape, 1) if event_weight is None else event_weight[..., None]
        return self.attention(self.x[node], self.x[nb], ones, torch.as_tensor(w.delta_t, dtype=torch.float32),
                              torch.as_tensor(w.valid))

    def forward(self, wu: Windows, wi: Windows, weight_u: torch.Tensor | None = None,
                weight_i: torch.Tensor | None = None) -> torch.Tensor:
        """(m,) link logits of the m query pairs (user window, item window)."""
        zu, zi = self.embed(wu, weight_u), self.embed(wi, weight_i)
        return self.head(torch.cat([zu, zi, zu * zi], dim=-1))[:, 0]

    def attention_weights(self, w: Windows) -> torch.Tensor:
        """(m, k) the softmax weights of the attention layer on each slot (for the attention ranking)."""
        att = self.attention
        node = torch.as_tensor(w.node)
        h = self.x[node]
        query = att.query(torch.cat([h, att.time(torch.zeros(len(h)))], dim=-1))
        nb = self.x[torch.as_tensor(w.neighbour)]
        context = torch.cat([nb, torch.ones(*nb.shape[:2], 1), att.time(torch.as_tensor(w.delta_t, dtype=torch.float32))], -1)
        scores = (att.key(context) @ query[:, :, None])[..., 0] / math.sqrt(query.shape[-1])
        valid = torch.as_tensor(w.valid)
        return torch.softmax(scores.masked_fill(~valid, -1e9), dim=-1) * valid


def train_model(p: Params, s: Stream, seed: int) -> tuple[LinkModel, dict[str, float]]:
    """BCE on the training events (first ``train_fraction``) against one uniform negative item each; returns the
    model and its test AUC / accuracy (positives vs fresh negatives, events after the training range)."""
    n_train = int(p.train_fraction * len(s.t))
    rng = numpy_rng(seed, 1)
    with torch_seeded(seed):
        model = LinkModel(torch.from_numpy(s.node_features), p.time_dim, p.hidden)

    def batch_windows(ids: np.ndarray, neg_items: np.ndarray) -> tuple[Windows, Windows, Windows]:
        t = s.t[ids]
        return (windows(s, s.user[ids], t, p.neighbours), windows(s, s.item[ids], t, p.neighbours),
                windows(s, neg_items, t, p.neighbours))

    optimiser = torch.optim.Adam(model.parameters(), lr=p.lr)
    generator = torch_generator(seed)
    loss_fn = nn.BCEWithLogitsLoss()
    train_ids = np.arange(n_train)
    for _ in range(p.epochs):
        order = train_ids[torch.randperm(n_train, generator=generator).numpy()]
        negatives = rng.integers(0, p.n_items, n_train) + p.n_users
        wu, wi, wn = batch_windows(order, negatives)  # windows of the whole epoch at once, sliced per batch
        for start in range(0, n_train, p.batch_size):
            sl = slice(start, start + p.batch_size)
            bu, bi, bn = (Windows(w.node[sl], w.neighbour[sl], w.delta_t[sl], w.valid[sl]) for w in (wu, wi, wn))
            logits = torch.cat([model(bu, bi), model(bu, bn)])
            target = torch.cat([torch.ones(len(bu.node)), torch.zeros(len(bu.node))])
            optimiser.zero_grad()
            loss_fn(logits, target).backward()
            optimiser.step()
    model.eval()
    test_ids = np.arange(n_train, len(s.t))
    wu, wi, wn = batch_windows(test_ids, rng.integers(0, p.n_items, len(test_ids)) + p.n_users)
    with torch.no_grad():
        pos, neg = model(wu, wi).numpy(), model(wu, wn).numpy()
    auc = float((pos[:, None] > neg[None, :]).mean() + 0.5 * (pos[:, None] == neg[None, :]).mean())
    return model, {"test_auc": auc, "test_accuracy": float(((pos > 0).mean() + (neg < 0).mean()) / 2),
                   "positive_rate": float((pos > 0).mean())}


# ------------------------------------------------------------------------------------------- one explained event
def candidate_events(s: Stream, event: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """The official fixed-size 1-hop temporal subgraph (``cody/data.py``): among the events before ``event``,
    those whose both endpoints lie in {u, i} ∪ their past neighbours; the last ``size`` of them. Returns event ids
    (oldest first) and their hop distance (0: touches u or i, 1: otherwise)."""
    u, i = s.user[event], s.item[event]
    past_u, past_i = s.user[:event], s.item[:event]
    touches = (past_u == u) | (past_i == i)
    reached = np.zeros(len(s.node_features), dtype=bool)
    reached[[u, i]] = True
    reached[past_u[touches]] = True
    reached[past_i[touches]] = True
    ids = np.flatnonzero(reached[past_u] & reached[past_i])[-size:]
    return ids, np.where(touches[ids], 0, 1)


class Instance:
    """One explained event e = (u, i, t) with its candidates C (n,) and a batched, call-counting model.

    ``predict(masks)``: masks (B, n) bool, True = candidate removed; returns (B,) logits of the model on the
    stream without those events, and adds B to ``calls``. Only the user's and the item's last k events enter the
    model; removing one lets an older event slide into the window, exactly as deleting it from the stream.
    """

    def __init__(self, model: LinkModel, s: Stream, event: int, p: Params) -> None:
        self.model, self.event, self.k = model, event, p.neighbours
        self.u, self.i, self.t = int(s.user[event]), int(s.item[event]), float(s.t[event])
        self.candidates, self.distance = candidate_events(s, event, p.candidates)
        self.n = len(self.candidates)
        self.cause = int(s.cause[event])
        self.calls = 0
        # per endpoint: its past events (enough of them that k remain after removing every candidate), their
        # other endpoints and times, and the index of each in the candidate list (-1: not a candidate)
        position = {int(c): j for j, c in enumerate(self.candidates)}
        self.sides = []
        for node, mine, other in ((self.u, s.user, s.item), (self.i, s.item, s.user)):
            past = np.flatnonzero(mine[:event] == node)[-(self.k + self.n):]
            self.sides.append((node, other[past], s.t[past], np.array([position.get(int(e), -1) for e in past])))
        self.original = float(self.predict(np.zeros((1, self.n), dtype=bool))[0])
        self.calls = 0  # the original prediction is common to every explainer and not counted

    def windows(self, masks: np.ndarray) -> tuple[Windows, Windows]:
        """The user's and the item's windows (B rows each) with the masked candidates deleted."""
        out = []
        for node, other, times, cand in self.sides:
            kept = np.ones((len(masks), len(other)), dtype=bool)
            is_cand = cand >= 0
            kept[:, is_cand] = ~masks[:, cand[is_cand]]
            # rank from the newest kept event (1 = newest); slot k - rank, so columns run oldest to newest
            rank = np.cumsum(kept[:, ::-1], axis=1)[:, ::-1]
            take = kept & (rank <= self.k)
            rows, cols = np.nonzero(take)
            slot = self.k - rank[rows, cols]
            neighbour = np.zeros((len(masks), self.k), dtype=np.int64)
            delta = np.zeros((len(masks), self.k))
            valid = np.zeros((len(masks), self.k), dtype=bool)
            neighbour[rows, slot], delta[rows, slot], valid[rows, slot] = other[cols], self.t - times[cols], True
            out.append(Windows(np.full(len(masks), node), neighbour, delta, valid))
        return out[0], out[1]

    @torch.no_grad()
    def predict(self, masks: np.ndarray) -> np.ndarray:
        masks = np.atleast_2d(masks)
        self.calls += len(masks)
        return self.model(*self.windows(masks)).numpy().astype(float)

    def slot_candidates(self) -> list[np.ndarray]:
        """Per side, (k,) the candidate index in each slot of the unmasked window (-1: empty or not a candidate)."""
        out = []
        for node, other, times, cand in self.sides:
            last = cand[-self.k:]
            out.append(np.concatenate([np.full(self.k - len(last), -1), last]))
        return out


def prediction_delta(original: float, prediction: float) -> float:
    """Official ``calculate_prediction_delta``: how far the logit moved toward (and past) the other sign."""
    if original * prediction < 0:
        return abs(prediction) + abs(original)
    return abs(original) - abs(prediction)


@dataclass
class Explanation:
    """The removed candidates (indices into ``Instance.candidates``), whether removing them flips the
    prediction, and the model calls spent."""

    removed: list[int]
    counterfactual: bool
    calls: int
    prediction: float
    single_calls: int = 0           # calls spent on one-event subsets (CoDy's breadth)


# ------------------------------------------------------------------------------------------------- policies
def rank(policy: str, inst: Instance, excluded: set[int], rng: np.random.Generator,
         weights: np.ndarray | None) -> list[int]:
    """The official selection policies: candidates not yet removed, best first. ``random`` reshuffles at every
    call; ``temporal``: newest first; ``spatiotemporal``: hop distance, then newest; ``event_impact``: by the
    weight from the single-removal sweep (ties: newest first)."""
    idx = np.array([j for j in range(inst.n) if j not in excluded], dtype=np.int64)
    if policy == "random":
        return [int(j) for j in rng.permutation(idx)]
    if policy == "temporal":
        return [int(j) for j in idx[::-1]]
    if policy == "spatiotemporal":
        return [int(j) for j in idx[np.lexsort((-idx, inst.distance[idx]))]]
    if policy == "event_impact":
        return [int(j) for j in idx[np.lexsort((-idx, -weights[idx]))]]
    raise ValueError(policy)


# ----------------------------------------------------------------------------------------------------------- CoDy
@dataclass(eq=False)
class Node:
    """A search-tree node: the set of removed candidates is the path from the root (``event`` = the candidate
    this node adds). ``visits`` starts at 1 as in the official code."""

    event: int
    parent: "Node | None"
    rank: int
    depth: int
    prediction: float | None = None
    score: float = 0.0              # exploitation: visit-weighted mean of own and expanded children's delta / |p0|
    own: float = 0.0                # max(0, delta / |p0|) of this node alone
    visits: int = 1
    counterfactual: bool = False
    exhausted: bool = False         # nothing below it can still be selected
    children: list["Node"] = field(default_factory=list)

    @property
    def expanded(self) -> bool:
        return self.prediction is not None

    def removed(self) -> list[int]:
        out, node = [], self
        while node.parent is not None:
            out.append(node.event)
            node = node.parent
        return out[::-1]


def _selection_score(child: Node, parent: Node, alpha: float) -> float:
    """Official ``_calculate_score``: alpha · exploitation + (1 - alpha) · sqrt(ln N_parent / N_child)."""
    return alpha * child.score + (1 - alpha) * math.sqrt(math.log(parent.visits) / child.visits)


def _select(root: Node, max_depth: int, alpha: float) -> Node | None:
    """Official ``select_next_leaf``: descend by the selection score among children that are neither
    counterfactual nor exhausted (below the depth cap only unexpanded children); picking an unexpanded child means
    taking the unexpanded child of lowest policy rank. A node with nothing selectable is exhausted and the descent
    restarts at its parent. None: the tree is exhausted."""
    node = root
    while True:
        if not node.children and not node.expanded:
            return node
        options = [c for c in node.children if not (c.counterfactual or c.exhausted)
                   and (not c.expanded or c.depth < max_depth)]
        best, best_score = None, 0.0
        for child in options:
            score = _selection_score(child, node, alpha)
            if score > best_score:
                best, best_score = child, score
        if best is None:
            node.exhausted = True
            if node.parent is None:
                return None
            node = node.parent
            continue
        if not best.expanded:
            return min((c for c in options if not c.expanded), key=lambda c: c.rank)
        node = best


def _expand(node: Node, prediction: float, original: float, children_ranks: list[int] | None) -> None:
    """Official ``expand`` + ``expansion_backpropagation``: record the prediction; a counterfactual node gets no
    children; then every node from here to the root counts one more visit and re-averages its exploitation."""
    node.prediction = prediction
    node.own = max(0.0, prediction_delta(original, prediction) / abs(original))
    node.score = node.own
    if original * prediction < 0:
        node.counterfactual = True
    elif children_ranks:
        node.children = [Node(event=e, parent=node, rank=r, depth=node.depth + 1) for r, e in enumerate(children_ranks)]
    if node.counterfactual or not node.children:
        node.exhausted = True
    walker: Node | None = node
    while walker is not None:
        walker.visits += 1
        expanded = [c for c in walker.children if c.expanded]
        if expanded:
            total = walker.own * walker.visits + sum(c.score * c.visits for c in expanded)
            walker.score = total / (walker.visits + sum(c.visits for c in expanded))
        walker = walker.parent


def cody(inst: Instance, policy: str, p: Params, rng: np.random.Generator) -> Explanation:
    """CoDy's search at a budget of ``p.budget`` model calls. The first counterfactual found caps the depth at its
    own; a shallower one, or one as deep with a higher exploitation score, replaces it. Subsets already evaluated
    (same set, other order) are expanded from a cache without a call, as the official ``known_states``."""
    original = inst.original
    start_calls = inst.calls
    weights = np.zeros(inst.n)
    root = Node(event=-1, parent=None, rank=0, depth=0)
    cache: dict[frozenset, float] = {frozenset(): original}
    best: Node | None = None
    singles = 0
    if policy == "event_impact":
        # first every single-event removal (one batched forward, n calls), ranked by its own impact
        sweep = inst.predict(np.eye(inst.n, dtype=bool)[: min(inst.n, p.budget)])
        singles = len(sweep)
        weights[: len(sweep)] = [max(0.0, prediction_delta(original, q) / abs(original)) for q in sweep]
        _expand(root, original, original, rank(policy, inst, set(), rng, weights))
        for child in root.children:
            if child.event < len(sweep):
                q = float(sweep[child.event])
                cache[frozenset([child.event])] = q
                _expand(child, q, original, rank(policy, inst, {child.event}, rng, weights))
                if child.counterfactual and (best is None or child.score > best.score):
                    best = child
        if best is not None:  # a single event flips the prediction: done, as the official code
            return Explanation(best.removed(), True, inst.calls - start_calls, float(best.prediction), singles)
    else:
        _expand(root, original, original, rank(policy, inst, set(), rng, weights))
    max_depth = inst.n + 1
    while inst.calls - start_calls < p.budget:
        node = _select(root, max_depth, p.alpha)
        if node is None:
            break
        removed = node.removed()
        key = frozenset(removed)
        if key in cache:
            prediction = cache[key]
        else:
            mask = np.zeros((1, inst.n), dtype=bool)
            mask[0, removed] = True
            prediction = cache[key] = float(inst.predict(mask)[0])
            singles += len(removed) == 1
        _expand(node, prediction, original, rank(policy, inst, set(removed), rng, weights)
                if node.depth < max_depth else [])
        if node.counterfactual:
            if best is None or node.depth < best.depth or (node.depth == best.depth and node.score > best.score):
                best = node
            max_depth = best.depth
    if best is not None:
        return Explanation(best.removed(), True, inst.calls - start_calls, float(best.prediction), singles)
    return Explanation([], False, inst.calls - start_calls, original, singles)


# --------------------------------------------------------------------------------------------------------- GreeDy
def greedy(inst: Instance, policy: str, p: Params, rng: np.random.Generator) -> Explanation:
    """Official GreeDy: from the current set, evaluate the ``greedy_sample`` top-ranked candidates (one call
    each); stop at the first step with a counterfactual (take the one moving the prediction most), else move to
    the best child if it improves on the current set, else give up. ``event_impact`` first sweeps all singles."""
    original = inst.original
    start_calls = inst.calls
    weights = np.zeros(inst.n)
    current: list[int] = []
    current_score = 0.0

    def evaluate(sets: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
        left = p.budget - (inst.calls - start_calls)
        sets = sets[:left]
        masks = np.zeros((len(sets), inst.n), dtype=bool)
        for row, removed in enumerate(sets):
            masks[row, removed] = True
        q = inst.predict(masks) if sets else np.zeros(0)
        return q, np.array([max(0.0, prediction_delta(original, x) / abs(original)) for x in q])

    def finish(sets: list[list[int]], q: np.ndarray, score: np.ndarray) -> Explanation | None:
        flips = np.flatnonzero(q * original < 0)
        if len(flips):
            j = flips[np.argmax(score[flips])]
            return Explanation(sets[j], True, inst.calls - start_calls, float(q[j]))
        return None

    if policy == "event_impact":
        sets = [[j] for j in range(inst.n)]
        q, score = evaluate(sets)
        weights[: len(score)] = score
        done = finish(sets, q, score)
        if done is not None:
            return done
        if len(score) and score.max() > 0:
            current, current_score = [int(np.argmax(score))], float(score.max())
    while inst.calls - start_calls < p.budget:
        ranked = rank(policy, inst, set(current), rng, weights)[: p.greedy_sample]
        if not ranked:
            break
        sets = [current + [j] for j in ranked]
        q, score = evaluate(sets)
        done = finish(sets, q, score)
        if done is not None:
            return done
        if len(score) == 0 or score.max() <= current_score:
            break
        j = int(np.argmax(score))
        current, current_score = sets[j], float(score[j])
    return Explanation([], False, inst.calls - start_calls, original)


# ------------------------------------------------------------------------------------------- iRand and factual
def irand(inst: Instance, p: Params, rng: np.random.Generator) -> Explanation:
    """Official iRand: at try j = 1, 2, ... remove a fresh uniform subset of j candidates; the first that flips."""
    sizes = np.arange(1, min(inst.n, p.budget) + 1)
    masks = np.zeros((len(sizes), inst.n), dtype=bool)
    for row, size in enumerate(sizes):
        masks[row, rng.choice(inst.n, size, replace=False)] = True
    return _first_flip(inst, masks)


def _first_flip(inst: Instance, masks: np.ndarray) -> Explanation:
    """Evaluate the masks in order (batched) and charge the calls up to the first counterfactual only."""
    start_calls = inst.calls
    q = inst.predict(masks)
    inst.calls = start_calls
    flips = np.flatnonzero(q * inst.original < 0)
    if len(flips):
        j = int(flips[0])
        inst.calls += j + 1
        return Explanation([int(x) for x in np.flatnonzero(masks[j])], True, j + 1, float(q[j]))
    inst.calls += len(masks)
    return Explanation([], False, len(masks), inst.original)


def factual_ranking(inst: Instance, kind: str) -> np.ndarray:
    """(n,) importance of each candidate toward the current prediction's sign. ``attention``: the attention weight
    of its slot(s) in the unmasked windows; ``gradient``: gradient × input of the logit with respect to a per-slot
    event weight (input = 1), times sign(p0). Candidates outside the windows get 0."""
    wu, wi = inst.windows(np.zeros((1, inst.n), dtype=bool))
    slots = inst.slot_candidates()
    if kind == "attention":
        with torch.no_grad():
            per_side = [inst.model.attention_weights(w)[0].numpy() for w in (wu, wi)]
    elif kind == "gradient":
        weight_u = torch.ones(1, inst.k, requires_grad=True)
        weight_i = torch.ones(1, inst.k, requires_grad=True)
        inst.model(wu, wi, weight_u, weight_i).sum().backward()
        per_side = [np.sign(inst.original) * w.grad[0].numpy() for w in (weight_u, weight_i)]
    else:
        raise ValueError(kind)
    importance = np.zeros(inst.n)
    for values, cand in zip(per_side, slots):
        ok = cand >= 0
        np.add.at(importance, cand[ok], values[ok])
    return importance


def factual_prefix(inst: Instance, kind: str, p: Params) -> Explanation:
    """A factual ranking turned counterfactual: remove its top-1, top-2, ... candidates until the prediction flips
    (ties: newest first), one call per prefix."""
    importance = factual_ranking(inst, kind)
    idx = np.arange(inst.n)
    order = idx[np.lexsort((-idx, -importance))]
    masks = np.zeros((min(inst.n, p.budget), inst.n), dtype=bool)
    for row in range(len(masks)):
        masks[row, order[: row + 1]] = True
    return _first_flip(inst, masks)


def explain(inst: Instance, name: str, p: Params, rng: np.random.Generator) -> Explanation:
    if name == "cody_random_b":
        return cody(inst, "random", p, rng)
    if name.startswith("cody_"):
        return cody(inst, name.removeprefix("cody_"), p, rng)
    if name.startswith("greedy_"):
        return greedy(inst, name.removeprefix("greedy_"), p, rng)
    if name == "irand":
        return irand(inst, p, rng)
    if name.startswith("factual_"):
        return factual_prefix(inst, name.removeprefix("factual_"), p)
    raise ValueError(name)


# ----------------------------------------------------------------------------------------------------- the metric
def fidelity_curve(counterfactual: np.ndarray, sparsity: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """fid+(s): share of explained events whose explanation flips the prediction with sparsity <= s
    (sparsity = |explanation| / |candidates|). Shapes (m,), (m,), (L,) -> (L,)."""
    return ((counterfactual[None, :]) & (sparsity[None, :] <= levels[:, None])).mean(axis=1)


def aufsc(counterfactual: np.ndarray, sparsity: np.ndarray) -> float:
    """AUFSC+ = ∫_0^1 fid+(s) ds; fid+ is a step function, so the integral is the mean over explained events of
    (1 - sparsity) for a counterfactual explanation and 0 otherwise."""
    return float(np.where(counterfactual, 1.0 - sparsity, 0.0).mean()) if len(sparsity) else float("nan")


# ------------------------------------------------------------------------------------------------------ one seed
def explained_events(model: LinkModel, s: Stream, p: Params, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``n_correct`` events after the training range that the model predicts (logit > 0) and ``n_wrong`` it
    misses (logit < 0), drawn uniformly; returns ids and a correct flag."""
    n_train = int(p.train_fraction * len(s.t))
    ids = np.arange(n_train, len(s.t))
    with torch.no_grad():
        logit = model(windows(s, s.user[ids], s.t[ids], p.neighbours), windows(s, s.item[ids], s.t[ids], p.neighbours)).numpy()
    correct = rng.permutation(ids[logit > 0])[: p.n_correct]
    wrong = rng.permutation(ids[logit < 0])[: p.n_wrong]
    chosen = np.concatenate([correct, wrong])
    return chosen, np.concatenate([np.ones(len(correct), bool), np.zeros(len(wrong), bool)])


def run_seed(p: Params, seed: int) -> dict:
    """One seed: a fresh stream and model, every explainer on the same explained events. Returns the model's
    test metrics and one row per (explained event, explainer)."""
    with torch_single_thread():
        rng = numpy_rng(seed, 0)
        s = make_stream(p, rng)
        model, model_metrics = train_model(p, s, seed)
        events, correct = explained_events(model, s, p, numpy_rng(seed, 2))
        rows = []
        for n, (event, ok) in enumerate(zip(events, correct)):
            inst = Instance(model, s, int(event), p)
            cause = np.flatnonzero(inst.candidates == inst.cause)
            for m, name in enumerate(EXPLAINERS):
                inst.calls = 0
                out = explain(inst, name, p, numpy_rng(seed, 3, n, m))
                rows.append({"seed": seed, "event": int(event), "correct": bool(ok), "explainer": name,
                             "n_candidates": inst.n, "size": len(out.removed), "counterfactual": out.counterfactual,
                             "sparsity": len(out.removed) / inst.n if out.counterfactual else 1.0,
                             "calls": out.calls, "single_calls": out.single_calls, "original": inst.original, "prediction": out.prediction,
                             "cause_is_candidate": bool(len(cause)),
                             "cause_in_explanation": bool(len(cause) and int(cause[0]) in out.removed)})
    return {"seed": seed, **model_metrics, "n_train_events": int(p.train_fraction * p.n_events),
            "motif_share": float((s.cause >= 0).mean()), "rows": rows}
