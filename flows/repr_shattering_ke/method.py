"""Representation shattering (Nishi et al., ICML 2025) on a small GPT trained from scratch: read top to bottom.

No official code exists; the setup follows the paper's pages and the reproduction plan.

1. **World.** ``n_entities`` entities sit on ``n_cycles`` cyclic orders (independent random permutations). Relation
   (c, k) maps an entity to its k-th neighbour on cycle c, k in {+-steps}: 2 x n_cycles x len(steps) relations and
   N x R facts (x, r, y). A share ``holdout_frac`` of the facts is never shown in training (the facts a model could
   only *infer* from the cyclic structure). Training sequences are random walks over the training facts,
   ``<bos> e0 r1 e1 r2 e2 r3 e3 <eos>``, so facts are also recalled deep in a chain (composition).
2. **Model.** ``tasks.lm``'s GPT (pre-LayerNorm, tied embeddings), next-token loss, trained once per seed and cached.
3. **Editor: ROME** (Meng et al. 2022; read in ``kmeng01/rome``: ``rome_main.py``, ``compute_u.py``,
   ``compute_v.py``). The MLP of block ``edit_layer`` is a key-value memory: key k = GELU activations (4 d), value =
   W_out k (+ bias). For an edit (x, r) -> y':
   * C = E[k k^T], the uncentred second moment of keys over the training corpus (ROME's ``mom2``);
   * k_bar = the subject's key averaged over ``n_contexts`` prompts (the bare ``<bos> x r`` and chain prefixes
     ``<bos> a r_a x r``), u = C^-1 k_bar (``compute_u``);
   * v* = v_init + delta, delta optimised with Adam so that every prompt predicts y' (NLL) + KL of the subject's own
     next-token distribution + weight decay |delta| / |v_init|^2, |delta| clamped to ``clamp_norm_factor`` |v_init|,
     early stop at loss < 0.05 (``compute_v``, its GPT-2-XL hyper-parameters);
   * W_out <- W_out + (v* - W_out k*) u^T / (u^T k*), k* the key of the bare prompt: the closed form of
     min |W' K - V| s.t. W' k* = v* (``rome_main.execute_rome``: left vector u, right vector (v* - W k*) / (k*.u)).
   The edit re-maps (x, r) from its object y to the entity y' at ring distance d from y on the relation's cycle.
4. **Shattering.** Entity representations = the residual stream after block ``repr_layer`` at the entity token of
   ``<bos> e`` (read with ``tasks.lm.residual_hook``); D = their pairwise Euclidean distances (N x N);
   R = |D_edit - D_orig|_F / |D_orig|_F.
5. **Damage.** Recall = greedy accuracy on training facts whose subject is not the edited x; composition = greedy
   2-hop chains ``<bos> e0 r1 -> e1', e1' r2 -> e2`` (the model's own intermediate) avoiding x; inference =
   accuracy on the held-out facts. Each is reported as the drop from the unedited model on the same facts.

Baselines and controls per edit: a same-object edit (d = 0, the full ROME pipeline re-asserting the old fact) and a
random rank-one update of the same Frobenius norm as ROME's (a direction that ignores the keys' geometry).
"""

from __future__ import annotations

import copy
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np
import torch
import torch.nn.functional as F
from scipy import stats as sps
from scipy.spatial.distance import pdist, squareform

from flows.repr_shattering_ke.params import Params
from tasks.correlation import spearman
from tasks.lm import GPT, GPTConfig, Tokenizer, cached_lm, make_gpt, residual_hook, train_lm
from tasks.seeding import numpy_rng
from tasks.train import torch_single_thread

ROME_EARLY_STOP = 5e-2       # compute_v: stop once the v* loss is below this


# =============================================================================================
# 1. The knowledge graph
# =============================================================================================
@dataclass(frozen=True)
class World:
    """One synthetic knowledge graph and its tokenizer.

    ``order`` (C, N): entity at ring position i of cycle c; ``position`` (C, N): its inverse.
    ``relations``: (cycle, shift) per relation; ``objects`` (N, R): object of fact (x, r); ``held_out`` (N, R) bool.
    ``entity_ids`` (N,), ``relation_ids`` (R,): token ids.
    """

    order: np.ndarray
    position: np.ndarray
    relations: tuple[tuple[int, int], ...]
    objects: np.ndarray
    held_out: np.ndarray
    tokenizer: Tokenizer
    entity_ids: np.ndarray
    relation_ids: np.ndarray

    @property
    def n(self) -> int:
        return self.order.shape[1]


def ring_distance(a: np.ndarray | int, b: np.ndarray | int, n: int) -> np.ndarray:
    """min(|a - b|, n - |a - b|) of ring positions."""
    gap = np.abs(np.asarray(a) - np.asarray(b)) % n
    return np.minimum(gap, n - gap)


def make_world(p: Params, seed: int) -> World:
    rng = numpy_rng(seed, 0)
    n = p.n_entities
    order = np.stack([rng.permutation(n) for _ in range(p.n_cycles)])
    position = np.argsort(order, axis=1)
    relations = tuple((c, s * k) for c in range(p.n_cycles) for k in p.steps for s in (1, -1))
    objects = np.array([[order[c, (position[c, e] + shift) % n] for c, shift in relations] for e in range(n)])
    held_out = np.zeros(objects.size, dtype=bool)
    held_out[rng.choice(objects.size, int(round(p.holdout_frac * objects.size)), replace=False)] = True
    entities = [f"e{i}" for i in range(n)]
    names = [f"c{c}{shift:+d}" for c, shift in relations]
    tokenizer = Tokenizer(entities + names, level="word")
    return World(order, position, relations, objects, held_out.reshape(objects.shape), tokenizer,
                 np.array([tokenizer.stoi[s] for s in entities]), np.array([tokenizer.stoi[s] for s in names]))


def walk_corpus(world: World, n_walks: int, hops: int, rng: np.random.Generator) -> torch.Tensor:
    """Random walks over training facts: (n_walks, 2 hops + 3) token ids ``<bos> e0 r1 e1 ... r_h e_h <eos>``."""
    n, n_rel = world.objects.shape
    entity = rng.integers(0, n, n_walks)
    columns = [np.full(n_walks, world.tokenizer.bos), world.entity_ids[entity]]
    for _ in range(hops):
        relation = rng.integers(0, n_rel, n_walks)
        held = world.held_out[entity, relation]
        while held.any():                      # redraw the relation wherever the fact is held out
            relation[held] = rng.integers(0, n_rel, int(held.sum()))
            held = world.held_out[entity, relation]
        entity = world.objects[entity, relation]
        columns += [world.relation_ids[relation], world.entity_ids[entity]]
    columns.append(np.full(n_walks, world.tokenizer.eos))
    return torch.as_tensor(np.stack(columns, axis=1), dtype=torch.long)


# =============================================================================================
# 2. The model (trained once per seed; the weights are cached under the run's data folder)
# =============================================================================================
def model_config(p: Params, world: World) -> GPTConfig:
    return GPTConfig(vocab_size=len(world.tokenizer), context=2 * p.walk_hops + 3, n_layer=p.n_layer,
                     n_head=p.n_head, d_model=p.d_model)


def train_model(p: Params, world: World, seed: int) -> GPT:
    corpus = walk_corpus(world, p.n_walks, p.walk_hops, numpy_rng(seed, 1))
    model = make_gpt(model_config(p, world), seed)
    train_lm(model, corpus, epochs=p.epochs, batch_size=p.batch_size, lr=p.lr, seed=seed,
             weight_decay=p.weight_decay)
    return model


def training_key(p: Params, seed: int, smoke: bool) -> dict:
    """Everything that determines a seed's weights (JSON-able)."""
    fields = ("n_entities", "n_cycles", "steps", "holdout_frac", "walk_hops", "n_walks", "d_model", "n_layer",
              "n_head", "epochs", "batch_size", "lr", "weight_decay")
    return {"seed": seed, "smoke": smoke, **{f: getattr(p, f) for f in fields}}


# =============================================================================================
# 3. Reading the model: greedy facts, chains, entity representations, MLP keys
# =============================================================================================
@torch.no_grad()
def greedy_next(model: GPT, prompts: torch.Tensor) -> np.ndarray:
    """Argmax next token after each row of ``prompts`` (m, t): (m,) token ids."""
    return model(prompts)[0][:, -1].argmax(-1).numpy()


def fact_prompts(world: World, subjects: np.ndarray, relations: np.ndarray) -> torch.Tensor:
    """``<bos> x r`` rows: (m, 3)."""
    bos = np.full(len(subjects), world.tokenizer.bos)
    return torch.as_tensor(np.stack([bos, world.entity_ids[subjects], world.relation_ids[relations]], 1))


def fact_correct(model: GPT, world: World, subjects: np.ndarray, relations: np.ndarray) -> np.ndarray:
    """Greedy recall of facts (x, r): (m,) bool."""
    truth = world.entity_ids[world.objects[subjects, relations]]
    return greedy_next(model, fact_prompts(world, subjects, relations)) == truth


def chain_correct(model: GPT, world: World, chains: np.ndarray) -> np.ndarray:
    """2-hop composition with the model's own intermediate: chains (m, 3) = (e0, r1, r2); (m,) bool."""
    first = fact_prompts(world, chains[:, 0], chains[:, 1])
    middle = greedy_next(model, first)
    prompts = torch.cat([first, torch.as_tensor(np.stack([middle, world.relation_ids[chains[:, 2]]], 1))], 1)
    truth = world.entity_ids[world.objects[world.objects[chains[:, 0], chains[:, 1]], chains[:, 2]]]
    return greedy_next(model, prompts) == truth


@torch.no_grad()
def entity_representations(model: GPT, world: World, layer: int) -> np.ndarray:
    """Residual stream after block ``layer`` at the entity token of ``<bos> e``: (N, d_model)."""
    store = {}
    prompts = torch.as_tensor(np.stack([np.full(world.n, world.tokenizer.bos), world.entity_ids], 1))
    with residual_hook(model, layer, lambda h: store.__setitem__("h", h)):
        model(prompts)
    return store["h"][:, 1].double().numpy()


def distance_matrix(x: np.ndarray) -> np.ndarray:
    """Pairwise Euclidean distances of the rows of ``x`` (N, d): (N, N)."""
    return squareform(pdist(x))


def shattering(d_orig: np.ndarray, d_edit: np.ndarray) -> float:
    """R = |D_edit - D_orig|_F / |D_orig|_F."""
    return float(np.linalg.norm(d_edit - d_orig) / np.linalg.norm(d_orig))


def output_matrix(model: GPT, layer: int) -> torch.nn.Linear:
    """W_out of block ``layer``'s MLP: keys (4 d) -> values (d)."""
    return model.blocks[layer].mlp[2]


@contextmanager
def mlp_site(model: GPT, layer: int, store: dict | None = None, delta: torch.Tensor | None = None,
             where: torch.Tensor | None = None) -> Iterator[None]:
    """At W_out of block ``layer``: record its input keys (b, t, 4d) and output values (b, t, d) in ``store``,
    and/or add ``delta`` (d,) to the output at the positions where ``where`` (b, t) is 1."""
    def hook(module, inputs, output):
        if store is not None:
            store["key"], store["value"] = inputs[0], output
        if delta is not None:
            return output + where[..., None] * delta
        return None

    handle = output_matrix(model, layer).register_forward_hook(hook)
    try:
        yield
    finally:
        handle.remove()


@torch.no_grad()
def key_second_moment(model: GPT, layer: int, corpus: torch.Tensor) -> np.ndarray:
    """C = E[k k^T] over every position of ``corpus`` (n, L): (4d, 4d) float64 (ROME's uncentred mom2)."""
    store: dict = {}
    with mlp_site(model, layer, store):
        model(corpus)
    keys = store["key"].reshape(-1, store["key"].shape[-1]).double().numpy()
    return keys.T @ keys / len(keys)


# =============================================================================================
# 4. ROME
# =============================================================================================
def rome_update(w: np.ndarray, c: np.ndarray, k_bar: np.ndarray, k_star: np.ndarray, v_star: np.ndarray) -> np.ndarray:
    """ROME's rank-one update of W (d, m): Delta = (v* - W k*) u^T / (u^T k*), u = C^-1 k_bar (shapes (m,)).

    After it, (W + Delta) k* = v* exactly, and any other key k moves by (v* - W k*) (u.k) / (u.k*). With
    k_bar = k* it is the minimiser of |(W' - W) K|_F (C = K K^T / n) subject to W' k* = v*.
    """
    u = np.linalg.solve(c, k_bar)
    return np.outer(v_star - w @ k_star, u) / (u @ k_star)


def edit_prompts(world: World, subject: int, relation: int, n_contexts: int, rng: np.random.Generator
                 ) -> list[torch.Tensor]:
    """ROME's context templates here: the bare prompt ``<bos> x r`` (1, 3) and up to ``n_contexts - 1`` chain
    prefixes ``<bos> a r_a x r`` (m, 5) built from training facts (a, r_a) -> x (subject at -2, relation at -1)."""
    bare = fact_prompts(world, np.array([subject]), np.array([relation]))
    into = np.argwhere((world.objects == subject) & ~world.held_out)           # facts (a, r_a) whose object is x
    pick = into[rng.choice(len(into), min(n_contexts - 1, len(into)), replace=False)] if len(into) else into[:0]
    if not len(pick):
        return [bare]
    prefix = fact_prompts(world, pick[:, 0], pick[:, 1])
    tail = torch.as_tensor(np.stack([world.entity_ids[np.full(len(pick), subject)],
                                     world.relation_ids[np.full(len(pick), relation)]], 1))
    return [bare, torch.cat([prefix, tail], 1)]


def site_index(p: Params) -> int:
    """Index of the edited token in a fact prompt: ROME's ``fact_token`` = "subject_last" (the subject, -2 in
    ``<bos> x r``) or "last" (the prompt's last token, -1: the relation token, where the object is predicted)."""
    return -2 if p.fact_token == "subject_last" else -1


def compute_v_delta(model: GPT, p: Params, prompts: list[torch.Tensor], kl_prompt: torch.Tensor, target: int
                    ) -> tuple[np.ndarray, int]:
    """ROME's v* search: delta (d,) added to W_out's output at the edit site of every rewriting prompt (and at the
    last token of ``kl_prompt`` = ``<bos> x``, ROME's "{subject} is a") so that each rewriting prompt predicts token
    ``target``; loss = NLL + kl_factor KL(next-token distribution after ``<bos> x``) + v_weight_decay |delta| /
    |v_init|^2; |delta| <= clamp_norm_factor |v_init|, v_init = W_out's output at the site of the bare prompt.
    Returns (delta, steps taken)."""
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    delta = torch.zeros(model.config.d_model, requires_grad=True)
    optimiser = torch.optim.Adam([delta], lr=p.v_lr)
    site = site_index(p)

    def at(g: torch.Tensor, index: int) -> torch.Tensor:
        return torch.zeros(g.shape, dtype=torch.float32).index_fill_(1, torch.tensor([g.shape[1] + index]), 1.0)

    wheres = [at(g, site) for g in prompts]
    kl_where = at(kl_prompt, -1)
    store: dict = {}
    with torch.no_grad():
        with mlp_site(model, p.edit_layer, store):
            model(prompts[0])
        v_init = store["value"][0, site].clone()
        kl_init = torch.log_softmax(model(kl_prompt)[0][:, -1], -1)
    steps = 0
    for step in range(p.v_steps):
        nll = []
        for g, where in zip(prompts, wheres):
            with mlp_site(model, p.edit_layer, delta=delta, where=where):
                nll.append(-torch.log_softmax(model(g)[0][:, -1], -1)[:, target])
        with mlp_site(model, p.edit_layer, delta=delta, where=kl_where):
            kl_now = torch.log_softmax(model(kl_prompt)[0][:, -1], -1)
        kl = F.kl_div(kl_init, kl_now, log_target=True, reduction="batchmean")
        loss = torch.cat(nll).mean() + p.kl_factor * kl + p.v_weight_decay * delta.norm() / v_init.norm() ** 2
        steps = step
        if float(loss.detach()) < ROME_EARLY_STOP or step == p.v_steps - 1:
            break
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        with torch.no_grad():
            max_norm = p.clamp_norm_factor * v_init.norm()
            if delta.norm() > max_norm:
                delta.mul_(max_norm / delta.norm())
    for parameter in model.parameters():
        parameter.requires_grad_(True)
    return delta.detach().double().numpy(), steps


@torch.no_grad()
def site_keys(model: GPT, layer: int, prompts: list[torch.Tensor], site: int) -> tuple[np.ndarray, np.ndarray]:
    """(k*, k_bar): the key at the edit site of the bare prompt and its mean over all prompts, (4d,) each."""
    keys = []
    for g in prompts:
        store: dict = {}
        with mlp_site(model, layer, store):
            model(g)
        keys.append(store["key"][:, site].double().numpy())
    keys = np.concatenate(keys)
    return keys[0], keys.mean(axis=0)


def apply_update(model: GPT, layer: int, update: np.ndarray) -> GPT:
    """A copy of ``model`` with W_out of block ``layer`` += ``update`` (d, 4d)."""
    edited = copy.deepcopy(model)
    with torch.no_grad():
        output_matrix(edited, layer).weight.add_(torch.as_tensor(update, dtype=torch.float32))
    return edited


def rome_edit(model: GPT, p: Params, world: World, c: np.ndarray, subject: int, relation: int, new_object: int,
              rng: np.random.Generator) -> tuple[np.ndarray, dict]:
    """ROME's update (d, 4d) re-mapping (subject, relation) to ``new_object``, and its diagnostics."""
    prompts = edit_prompts(world, subject, relation, p.n_contexts, rng)
    kl_prompt = torch.as_tensor([[world.tokenizer.bos, int(world.entity_ids[subject])]])
    k_star, k_bar = site_keys(model, p.edit_layer, prompts, site_index(p))
    delta, steps = compute_v_delta(model, p, prompts, kl_prompt, int(world.entity_ids[new_object]))
    w = output_matrix(model, p.edit_layer).weight.detach().double().numpy()
    v_star = w @ k_star + delta                      # the bias is common to both sides of W' k* = v*
    update = rome_update(w, c, k_bar, k_star, v_star)
    exact = float(np.abs((w + update) @ k_star - v_star).max())
    return update, {"delta_norm": float(np.linalg.norm(delta)), "update_norm": float(np.linalg.norm(update)),
                    "v_steps": steps, "exactness": exact}


def random_update_like(update: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A random rank-one matrix a b^T (Gaussian directions) with the Frobenius norm of ``update``."""
    a, b = rng.standard_normal(update.shape[0]), rng.standard_normal(update.shape[1])
    out = np.outer(a, b)
    return out * (np.linalg.norm(update) / np.linalg.norm(out))


# =============================================================================================
# 5. One seed: train (or load) a model, then edit it at every distance
# =============================================================================================
def far_near(p: Params) -> tuple[int, int]:
    """Edits with d >= n/4 are 'far', d <= 2 'near' (the plan's d >= 16 and d <= 2 at N = 64)."""
    return p.n_entities // 4, 2


def sample_edits(p: Params, world: World, rng: np.random.Generator) -> list[dict]:
    """``edits_per_distance`` edits at d = 0 (same object) and at every d of ``edit_distances``: distinct training
    facts (x, r), the new object at ring distance d from the old one on r's cycle (random side)."""
    n = world.n
    facts = np.argwhere(~world.held_out)
    distances = [0, *p.edit_distances]
    chosen = facts[rng.choice(len(facts), len(distances) * p.edits_per_distance, replace=False)]
    edits = []
    for i, (x, r) in enumerate(chosen):
        d = distances[i // p.edits_per_distance]
        cycle, _ = world.relations[r]
        y = world.objects[x, r]
        y_new = world.order[cycle, (world.position[cycle, y] + rng.choice([-1, 1]) * d) % n]
        other = (cycle + 1) % p.n_cycles
        edits.append({"subject": int(x), "relation": int(r), "old": int(y), "new": int(y_new), "d": d,
                      "d_other": int(ring_distance(world.position[other, y], world.position[other, y_new], n))})
    return edits


def evaluate(model: GPT, p: Params, world: World, train_facts: np.ndarray, held_facts: np.ndarray,
             chains: np.ndarray) -> dict:
    """Per-item correctness on training facts (m, 2), held-out facts and 2-hop chains, and the entity distances."""
    return {"recall": fact_correct(model, world, train_facts[:, 0], train_facts[:, 1]),
            "inference": fact_correct(model, world, held_facts[:, 0], held_facts[:, 1]),
            "composition": chain_correct(model, world, chains),
            "reps": entity_representations(model, world, p.repr_layer)}


def run_seed(p: Params, seed: int, data_dir: str, smoke: bool = False) -> dict:
    """One seed = one knowledge graph and one trained model, edited (d + 1) x ``edits_per_distance`` times.

    Returns {"rows": one dict per edit, "model": the unedited model's accuracies, "reps": entity representations
    of the unedited model and after the first farthest edit (for the Isomap figure)}.
    """
    with torch_single_thread():
        world = make_world(p, seed)
        model = cached_lm(Path(data_dir) / f"lm_seed{seed}.pt", training_key(p, seed, smoke),
                          lambda: train_model(p, world, seed))
        corpus = walk_corpus(world, p.n_walks, p.walk_hops, numpy_rng(seed, 1))
        c = key_second_moment(model, p.edit_layer, corpus)
        c += 1e-8 * np.trace(c) / len(c) * np.eye(len(c))        # numerical guard only; C is full rank here

        rng = numpy_rng(seed, 2)
        train_facts, held_facts = np.argwhere(~world.held_out), np.argwhere(world.held_out)
        firsts = train_facts[rng.integers(0, len(train_facts), p.n_chains)]
        second = np.array([rng.choice(np.flatnonzero(~world.held_out[world.objects[x, r]])) for x, r in firsts])
        chains = np.column_stack([firsts, second])                # (e0, r1, r2), both facts seen in training
        base = evaluate(model, p, world, train_facts, held_facts, chains)
        d_orig = distance_matrix(base["reps"])

        rows, far_reps = [], None
        for i, e in enumerate(sample_edits(p, world, rng)):
            x = e["subject"]
            keep = {"recall": train_facts[:, 0] != x, "inference": held_facts[:, 0] != x,
                    "composition": (chains[:, 0] != x) & (world.objects[chains[:, 0], chains[:, 1]] != x)}
            others = np.arange(world.n) != x
            update, info = rome_edit(model, p, world, c, x, e["relation"], e["new"], rng)
            row = {"seed": seed, **e, **info}
            for name, upd in (("rome", update), ("random", random_update_like(update, numpy_rng(seed, 3, i)))):
                edited = apply_update(model, p.edit_layer, upd)
                out = evaluate(edited, p, world, train_facts, held_facts, chains)
                d_edit = distance_matrix(out["reps"])
                row[f"R_{name}"] = shattering(d_orig, d_edit)
                row[f"R_others_{name}"] = shattering(d_orig[np.ix_(others, others)], d_edit[np.ix_(others, others)])
                for metric, mask in keep.items():
                    row[f"{metric}_drop_{name}"] = float(base[metric][mask].mean() - out[metric][mask].mean())
                if name == "rome":
                    row["success"] = float(greedy_next(edited, fact_prompts(world, np.array([x]), np.array([e["relation"]])))[0]
                                           == world.entity_ids[e["new"]])
                    if far_reps is None and e["d"] == max(p.edit_distances):
                        far_reps = {"subject": x, "reps": out["reps"].tolist()}
            rows.append(row)
    return {"seed": seed, "rows": rows,
            "model": {"train_recall": float(base["recall"].mean()), "heldout_accuracy": float(base["inference"].mean()),
                      "composition_accuracy": float(base["composition"].mean()),
                      **{f"ring_geometry_cycle{c_}": ring_geometry(d_orig, world, c_) for c_ in range(p.n_cycles)}},
            "reps": {"orig": base["reps"].tolist(), "far": far_reps,
                     "position": world.position.tolist()}}


def ring_geometry(d_orig: np.ndarray, world: World, cycle: int) -> float:
    """Spearman of representation distance with ring distance on ``cycle`` over entity pairs: does the model's
    geometry hold the ring (the paper's Isomap rings)? ~0 when it does not."""
    i, j = np.triu_indices(world.n, k=1)
    return spearman(ring_distance(world.position[cycle, i], world.position[cycle, j], world.n), d_orig[i, j])


# =============================================================================================
# 6. Per-seed statistics of the claims (the flow summarises them over seeds)
# =============================================================================================
def r2_of_means(d: np.ndarray, values: np.ndarray) -> float:
    """r^2 of the least-squares line through (distance, mean value at that distance)."""
    levels = np.unique(d)
    means = np.array([values[d == level].mean() for level in levels])
    if np.ptp(means) == 0:
        return float("nan")
    return float(sps.linregress(levels, means).rvalue ** 2)


def seed_statistics(p: Params, rows: list[dict], seed: int) -> dict:
    """The claim statistics of one model from its edit rows, with their negative controls.

    Controls: the ring distance of the same old/new objects on the *other* cycle (not the geometry the edit
    conflicts with), and a seeded permutation of the distance labels / of the pairing of R with damage.
    """
    counter = [r for r in rows if r["d"] > 0]
    d = np.array([r["d"] for r in counter], float)
    d_other = np.array([r["d_other"] for r in counter], float)
    big_r = np.array([r["R_rome"] for r in counter])
    recall = np.array([r["recall_drop_rome"] for r in counter])
    composition = np.array([r["composition_drop_rome"] for r in counter])
    perm = numpy_rng(seed, 4).permutation(len(counter))
    far, near = far_near(p)

    def far_minus_near(labels: np.ndarray, values: np.ndarray) -> float:
        return float(values[labels >= far].mean() - values[labels <= near].mean())

    same = [r for r in rows if r["d"] == 0]
    return {
        "spearman_d_R": spearman(d, big_r), "r2_d_R": r2_of_means(d, big_r),
        "spearman_R_recall_drop": spearman(big_r, recall),
        "far_minus_near_recall_drop": far_minus_near(d, recall),
        "far_minus_near_composition_drop": far_minus_near(d, composition),
        "recall_drop_counterfactual": float(recall.mean()),
        "control_spearman_dother_R": spearman(d_other, big_r), "control_r2_permuted_d": r2_of_means(d[perm], big_r),
        "control_spearman_R_recall_drop_permuted": spearman(big_r, recall[perm]),
        "control_far_minus_near_recall_permuted": far_minus_near(d[perm], recall),
        "control_far_minus_near_composition_permuted": far_minus_near(d[perm], composition),
        "control_recall_drop_same_object": float(np.mean([r["recall_drop_rome"] for r in same])),
        "spearman_d_R_random": spearman(d, np.array([r["R_random"] for r in counter])),
        "spearman_d_R_others": spearman(d, np.array([r["R_others_rome"] for r in counter])),
        "success_rate": float(np.mean([r["success"] for r in counter])),
    }
