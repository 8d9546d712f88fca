"""GIT (Graph Generality Identifier on Task-Trees), scaled down: task-trees, the GIT pretraining objective, few-shot
fine-tuning and in-context (prototype) inference on held-out domains; no Prefect; read top to bottom.

1. Domains. A shared feature space (the analog of GIT's text-embedding space): ``n_prototypes`` class prototypes
   and 4 graph-family prototypes, unit vectors drawn once per seed. Each domain has a contextual-SBM node graph
   (its own homophily; its ``n_classes`` classes take distinct shared prototypes; features = node_signal ·
   prototype + domain shift + N(0, I)) and small graphs of 4 families (Erdős–Rényi, Barabási–Albert,
   Watts–Strogatz, 2-block SBM; features = graph_signal · family prototype + shift + N(0, I)).
2. Task-trees (official ``Encoder.pooling``): a task's embedding is Linear(mean of the encoder's node embeddings
   over the task's nodes S): S = the node's neighbours (node task; the official code mean-aggregates along the
   graph's edges into the node), S = {u, v} (edge task: a virtual root linked to both endpoints), S = all nodes
   (graph task: a virtual root linked to every node). One sparse (tasks, nodes) matrix of weights 1/|S| does it.
3. Pretraining (official ``PretrainModel``): two views (feature-column masking, edge dropping), cross-view
   semantic reconstruction ((1 − cos(sg z1, h(z2))) + (1 − cos(sg z2, h(z1))))/2 with h a 2-layer MLP (BatchNorm,
   dropout 0.5), plus λ · KL(softmax(mean z1) ‖ softmax(z1)) (``F.kl_div(z1.log_softmax, z̄.softmax)``, λ = 10).
   GIT pretrains on node-, edge- and graph-level task-trees of the source domains (equal weight per level);
   the node-only baseline pretrains on node task-trees of the same graphs; the noise control runs GIT's
   pretraining on graphs without transferable content (ER structure, N(0, I) features).
4. Held-out domains: 5-shot fine-tuning of encoder + linear head from each initialisation (scratch = the same
   random initialisation, no pretraining), and in-context prototype classification with the frozen encoder
   (class means of the support task-tree embeddings, cosine nearest), against raw-feature prototypes.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from flows.git_task_trees.params import Params
from paperflows.core.seeding import numpy_rng, torch_generator, torch_seeded
from tasks.gnn import SAGELayer, mean_adjacency
from tasks.graphs import Graph, csbm, family_graph, sbm, undirected_edge_index
from tasks.train import torch_single_thread

FAMILIES = ("erdos_renyi", "barabasi_albert", "watts_strogatz", "sbm2")
LEVELS = ("node", "edge", "graph")


# ----------------------------------------------------------------------------------------------------- domains
@dataclass(frozen=True)
class World:
    """The shared feature space: class prototypes (n_prototypes, dim) and family prototypes (4, dim), unit rows."""
    class_prototypes: np.ndarray
    family_prototypes: np.ndarray


@dataclass(frozen=True)
class Domain:
    """A domain's node graph (labels = class ids 0..C-1) and its small graphs with family labels (G,)."""
    node_graph: Graph
    small_graphs: list[Graph]
    small_labels: np.ndarray


def unit_rows(rng: np.random.Generator, k: int, dim: int) -> np.ndarray:
    v = rng.normal(size=(k, dim))
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def make_world(p: Params, seed: int) -> World:
    rng = numpy_rng(seed, 0)
    return World(unit_rows(rng, p.n_prototypes, p.dim), unit_rows(rng, len(FAMILIES), p.dim))


def small_graph(family: str, n: int, rng: np.random.Generator) -> Graph:
    """One small graph of ``family`` (mean degree about 3–4 for each family at n ≈ 24)."""
    if family == "sbm2":
        half = n // 2
        return sbm([half, n - half], np.array([[0.3, 0.03], [0.03, 0.3]]), rng)
    kwargs = {"erdos_renyi": {"p": 0.15}, "barabasi_albert": {"m": 2}, "watts_strogatz": {"k": 4, "p": 0.1}}[family]
    return family_graph(family, n, rng, **kwargs)


def make_domain(p: Params, world: World, homophily: float, rng: np.random.Generator, noise: bool = False) -> Domain:
    """A domain of the shared space; ``noise=True`` gives the control domain: an SBM at homophily 1/C (no
    communities), Erdős–Rényi small graphs and pure N(0, I) features (nothing to transfer)."""
    shift = p.shift_scale * unit_rows(rng, 1, p.dim)[0]
    h = 1.0 / p.n_classes if noise else homophily
    base = csbm(p.nodes_per_graph, p.n_classes, p.mean_degree, h, p.dim, 0.0, rng)  # features: N(0, I) only
    x = base.features.copy()
    if not noise:
        classes = rng.choice(p.n_prototypes, size=p.n_classes, replace=False)   # this domain's classes
        x += p.node_signal * world.class_prototypes[classes[base.labels]] + shift
    node_graph = Graph(base.n, base.edge_index, base.labels, x.astype(np.float32))
    graphs, labels = [], []
    for f, family in enumerate(FAMILIES):
        for _ in range(p.graphs_per_family):
            g = small_graph("erdos_renyi" if noise else family, p.small_graph_nodes, rng)
            feats = rng.normal(size=(g.n, p.dim))
            if not noise:
                feats += p.graph_signal * world.family_prototypes[f] + shift
            graphs.append(Graph(g.n, g.edge_index, None, feats.astype(np.float32)))
            labels.append(f)
    return Domain(node_graph, graphs, np.array(labels))


def disjoint_union(graphs: list[Graph]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Features (N, d), edge_index (2, E) and the graph id of each node (N,) of the graphs side by side."""
    offsets = np.cumsum([0] + [g.n for g in graphs])
    x = np.concatenate([g.features for g in graphs])
    edges = np.concatenate([g.edge_index + o for g, o in zip(graphs, offsets[:-1])], axis=1)
    member = np.repeat(np.arange(len(graphs)), [g.n for g in graphs])
    return x, edges, member


# ------------------------------------------------------------------------------------------------ task-trees
def pool_matrix(rows: np.ndarray, cols: np.ndarray, n_rows: int, n: int) -> torch.Tensor:
    """Sparse (n_rows, n): row t averages the nodes ``cols[rows == t]`` (each task-tree's virtual root takes
    the mean of its children); a row without children is zero."""
    rows, cols = np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)
    count = np.bincount(rows, minlength=n_rows).astype(np.float32)
    values = torch.from_numpy(1.0 / count[rows])
    return torch.sparse_coo_tensor(torch.from_numpy(np.stack([rows, cols])), values, (n_rows, n),
                                   check_invariants=False).coalesce()


def node_trees(edge_index: np.ndarray, n: int) -> torch.Tensor:
    """Node task-trees: node v's root averages its neighbours (the official pooling along edge_index)."""
    return mean_adjacency(torch.from_numpy(edge_index), n)


def edge_trees(pairs: np.ndarray, n: int) -> torch.Tensor:
    """Edge task-trees of ``pairs`` (m, 2): a virtual root linked to both endpoints."""
    m = len(pairs)
    return pool_matrix(np.repeat(np.arange(m), 2), pairs.reshape(-1), m, n)


def graph_trees(member: np.ndarray, n_graphs: int) -> torch.Tensor:
    """Graph task-trees: a virtual root linked to every node of its graph (``member`` (N,) graph ids)."""
    return pool_matrix(member, np.arange(len(member)), n_graphs, len(member))


# --------------------------------------------------------------------------------------------------- encoder
class Encoder(nn.Module):
    """GraphSAGE-mean layers (root weight, ReLU) and the task-tree pooling Linear (official ``Encoder``)."""

    def __init__(self, dim: int, hidden: int, layers: int) -> None:
        super().__init__()
        widths = [dim] + [hidden] * layers
        self.layers = nn.ModuleList(SAGELayer(a, b) for a, b in zip(widths[:-1], widths[1:]))
        self.pooling_lin = nn.Linear(hidden, hidden)

    def encode(self, x: torch.Tensor, mean_adj: torch.Tensor) -> torch.Tensor:
        """(N, dim) features -> (N, hidden) node embeddings."""
        for layer in self.layers:
            x = torch.relu(layer(x, mean_adj))
        return x

    def pool(self, z: torch.Tensor, trees: torch.Tensor) -> torch.Tensor:
        """(N, hidden) node embeddings, (T, N) task-tree matrix -> (T, hidden) task-tree embeddings."""
        return self.pooling_lin(torch.sparse.mm(trees, z))


def new_encoder(p: Params, seed: int) -> Encoder:
    with torch_seeded(seed):
        return Encoder(p.dim, p.hidden, p.layers)


class SemanticDecoder(nn.Module):
    """The official 2-layer MLP h (Linear, ReLU, BatchNorm, dropout 0.5, Linear). Dropout draws from its own
    seeded generator: seeds run in parallel threads, and torch's global generator would mix their draws."""

    def __init__(self, hidden: int, generator: torch.Generator, dropout: float = 0.5) -> None:
        super().__init__()
        self.first = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.BatchNorm1d(hidden))
        self.last = nn.Linear(hidden, hidden)
        self.generator, self.dropout = generator, dropout

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        h = self.first(z)
        if self.training and self.dropout > 0:
            keep = torch.rand(h.shape, generator=self.generator) >= self.dropout
            h = h * keep / (1 - self.dropout)
        return self.last(h)


def semantic_loss(z1: torch.Tensor, z2: torch.Tensor, decoder: SemanticDecoder) -> torch.Tensor:
    """((1 − cos(sg z1, h(z2))) + (1 − cos(sg z2, h(z1))))/2, mean over task-trees (z: (T, hidden))."""
    h1, h2 = F.normalize(decoder(z1), dim=-1), F.normalize(decoder(z2), dim=-1)
    t1, t2 = F.normalize(z1, dim=-1).detach(), F.normalize(z2, dim=-1).detach()
    return (((1 - (t1 * h2).sum(-1)) + (1 - (t2 * h1).sum(-1))) / 2).mean()


def align_regulariser(z: torch.Tensor) -> torch.Tensor:
    """KL(softmax(mean z) ‖ softmax(z_i)) averaged over task-trees: keeps embeddings from spreading out."""
    return F.kl_div(z.log_softmax(dim=-1), z.mean(0).softmax(dim=-1), reduction="batchmean")


def augment(x: torch.Tensor, edge_index: np.ndarray, p: Params, gen: torch.Generator,
            rng: np.random.Generator) -> tuple[torch.Tensor, np.ndarray]:
    """One view: each feature column masked with prob ``feature_mask`` (PyG ``mask_feature``, mode 'col') and each
    directed edge dropped with prob ``edge_drop`` (PyG ``dropout_adj``)."""
    keep_cols = (torch.rand(x.shape[1], generator=gen) >= p.feature_mask).float()
    keep_edges = rng.random(edge_index.shape[1]) >= p.edge_drop
    return x * keep_cols, edge_index[:, keep_edges]


def pretrain(p: Params, domains: list[Domain], levels: tuple[str, ...], seed: int) -> tuple[Encoder, list[float]]:
    """GIT pretraining on the task-trees of ``levels`` over all graphs of ``domains`` (one disjoint union).

    Returns the encoder and the loss per step. Each level's semantic loss is averaged over its task-trees, the
    levels weigh equally; the alignment regulariser acts on all task-tree embeddings of the first view.
    """
    graphs = [g for d in domains for g in [d.node_graph, *d.small_graphs]]
    x_np, edges, member = disjoint_union(graphs)
    n = len(x_np)
    x = torch.from_numpy(x_np)
    # graph task-trees: the small graphs only (a domain's big node graph is the node/edge tasks' host)
    is_small = np.concatenate([[False] + [True] * len(d.small_graphs) for d in domains])
    small_of_node = np.cumsum(is_small)[member] - 1
    small_nodes = np.flatnonzero(is_small[member])
    g_trees = pool_matrix(small_of_node[small_nodes], small_nodes, int(is_small.sum()), n)
    pairs = edges.T[edges[0] < edges[1]]
    encoder = new_encoder(p, seed)
    gen, rng = torch_generator(seed), numpy_rng(seed, 1)
    with torch_seeded(seed + 1):
        decoder = SemanticDecoder(p.hidden, torch_generator(seed + 2))
    optimiser = torch.optim.AdamW([*encoder.parameters(), *decoder.parameters()], lr=p.pretrain_lr)
    history = []
    encoder.train(), decoder.train()
    for _ in range(p.pretrain_steps):
        views = [augment(x, edges, p, gen, rng) for _ in range(2)]
        zs = [encoder.encode(xv, mean_adjacency(torch.from_numpy(ev), n)) for xv, ev in views]
        sampled = pairs[rng.choice(len(pairs), size=min(p.edges_per_step, len(pairs)), replace=False)]
        pooled = {level: [] for level in levels}
        for z, (_, ev) in zip(zs, views):
            trees = {"node": lambda: node_trees(ev, n), "edge": lambda: edge_trees(sampled, n),
                     "graph": lambda: g_trees}
            for level in levels:
                pooled[level].append(encoder.pool(z, trees[level]()))
        sem = torch.stack([semantic_loss(*pooled[level], decoder) for level in levels]).mean()
        align = align_regulariser(torch.cat([pooled[level][0] for level in levels]))
        loss = sem + p.align_lambda * align
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        history.append(float(loss.detach()))
    return encoder, history


# ---------------------------------------------------------------------------------------------- target tasks
@dataclass(frozen=True)
class Task:
    """A few-shot task on one held-out graph (or union of small graphs): features x (N, d), message-passing
    edges (2, E), task-trees (T, N) and raw-feature pooling (T, N), labels y (T,), support / query task ids."""
    level: str
    x: torch.Tensor
    mean_adj: torch.Tensor
    trees: torch.Tensor
    raw_pool: torch.Tensor
    y: np.ndarray
    support: np.ndarray
    query: np.ndarray
    n_classes: int


def few_shot_split(y: np.ndarray, shots: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``shots`` support ids per class (drawn by ``rng``), the rest as queries."""
    support = np.concatenate([rng.choice(np.flatnonzero(y == c), shots, replace=False) for c in np.unique(y)])
    return np.sort(support), np.setdiff1d(np.arange(len(y)), support)


def node_task(p: Params, domain: Domain, rng: np.random.Generator) -> Task:
    g = domain.node_graph
    support, query = few_shot_split(g.labels, p.shots, rng)
    eye = pool_matrix(np.arange(g.n), np.arange(g.n), g.n, g.n)
    return Task("node", torch.from_numpy(g.features), node_trees(g.edge_index, g.n), node_trees(g.edge_index, g.n),
                eye, g.labels, support, query, p.n_classes)


def link_task(p: Params, domain: Domain, rng: np.random.Generator) -> Task:
    """Link prediction as binary edge-task classification: held-out edges (label 1) against node pairs that are
    not edges (label 0); message passing sees only the remaining edges."""
    g = domain.node_graph
    pairs = g.edge_index.T[g.edge_index[0] < g.edge_index[1]]
    held = rng.random(len(pairs)) < p.link_holdout
    need = p.link_queries + p.shots
    if held.sum() < need:
        raise ValueError(f"{held.sum()} held-out edges, fewer than the {need} link tasks; lower link_queries")
    positives = pairs[held][rng.choice(int(held.sum()), need, replace=False)]
    existing = set(map(tuple, pairs.tolist()))
    negatives = []
    while len(negatives) < need:
        u, v = sorted(rng.choice(g.n, 2, replace=False).tolist())
        if (u, v) not in existing:
            negatives.append((u, v))
    task_pairs = np.concatenate([positives, np.array(negatives)])
    y = np.repeat([1, 0], need)
    support, query = few_shot_split(y, p.shots, rng)
    message = undirected_edge_index(pairs[~held])
    trees = edge_trees(task_pairs, g.n)
    return Task("edge", torch.from_numpy(g.features), node_trees(message, g.n), trees, trees, y, support, query, 2)


def graph_task(p: Params, domain: Domain, rng: np.random.Generator) -> Task:
    x, edges, member = disjoint_union(domain.small_graphs)
    trees = graph_trees(member, len(domain.small_graphs))
    support, query = few_shot_split(domain.small_labels, p.shots, rng)
    return Task("graph", torch.from_numpy(x), node_trees(edges, len(x)), trees, trees, domain.small_labels,
                support, query, len(FAMILIES))


def embed(encoder: Encoder, task: Task) -> torch.Tensor:
    """(T, hidden) task-tree embeddings of every task of ``task``."""
    return encoder.pool(encoder.encode(task.x, task.mean_adj), task.trees)


def finetune_accuracy(p: Params, encoder: Encoder, task: Task, seed: int) -> float:
    """Fine-tune a copy of ``encoder`` and a linear head (seeded) on the support task-trees (cross-entropy, Adam,
    full batch); accuracy on the queries."""
    model = copy.deepcopy(encoder)
    with torch_seeded(seed):
        head = nn.Linear(p.hidden, task.n_classes)
    optimiser = torch.optim.Adam([*model.parameters(), *head.parameters()], lr=p.finetune_lr)
    y = torch.from_numpy(task.y)
    support = torch.from_numpy(task.support)
    for _ in range(p.finetune_steps):
        loss = F.cross_entropy(head(embed(model, task)[support]), y[support])
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    with torch.no_grad():
        predicted = head(embed(model, task)).argmax(1).numpy()
    return float(np.mean(predicted[task.query] == task.y[task.query]))


def prototype_accuracy(embeddings: np.ndarray, task: Task) -> float:
    """In-context inference: class means of the support embeddings (T, h), each query to the cosine-nearest."""
    e = embeddings / np.maximum(np.linalg.norm(embeddings, axis=1, keepdims=True), 1e-12)
    classes = np.unique(task.y[task.support])
    protos = np.stack([e[task.support][task.y[task.support] == c].mean(0) for c in classes])
    predicted = classes[np.argmax(e[task.query] @ protos.T, axis=1)]
    return float(np.mean(predicted == task.y[task.query]))


# ------------------------------------------------------------------------------------------------- one seed
def run_seed(p: Params, seed: int) -> dict:
    """Pretrain GIT, node-only and the noise control on the source domains; evaluate every initialisation on the
    held-out domains' node, edge and graph tasks. Returns ``rows`` (seed, domain, level, method, mode, accuracy)
    and the pretraining losses."""
    with torch_single_thread():
        world = make_world(p, seed)
        rng = numpy_rng(seed, 2)
        sources = [make_domain(p, world, h, rng) for h in p.source_homophily]
        targets = [make_domain(p, world, h, rng) for h in p.target_homophily]
        noise = [make_domain(p, world, h, rng, noise=True) for h in p.source_homophily]
        init_seed = 1000 + seed
        encoders = {"scratch": new_encoder(p, init_seed)}
        losses = {}
        encoders["git"], losses["git"] = pretrain(p, sources, LEVELS, init_seed)
        encoders["node_only"], losses["node_only"] = pretrain(p, sources, ("node",), init_seed)
        encoders["noise"], losses["noise"] = pretrain(p, noise, LEVELS, init_seed)
        rows = []
        for t, domain in enumerate(targets):
            task_rng = numpy_rng(seed, 3, t)
            for task in (node_task(p, domain, task_rng), link_task(p, domain, task_rng), graph_task(p, domain, task_rng)):
                base = {"seed": seed, "domain": f"target{t}", "level": task.level}
                for name, encoder in encoders.items():
                    encoder.eval()
                    acc = finetune_accuracy(p, encoder, task, seed=init_seed + 7)
                    rows.append({**base, "method": name, "mode": "finetune", "accuracy": acc})
                    with torch.no_grad():
                        acc = prototype_accuracy(embed(encoder, task).numpy(), task)
                    # the untrained encoder in context is "random_init" (the in-context control)
                    rows.append({**base, "method": "random_init" if name == "scratch" else name,
                                 "mode": "incontext", "accuracy": acc})
                raw = torch.sparse.mm(task.raw_pool, task.x).numpy()
                rows.append({**base, "method": "raw", "mode": "incontext", "accuracy": prototype_accuracy(raw, task)})
    return {"seed": seed, "rows": rows,
            "loss_first": {k: v[0] if v else float("nan") for k, v in losses.items()},
            "loss_last": {k: float(np.mean(v[-10:])) if v else float("nan") for k, v in losses.items()}}
