"""Representation shattering (Nishi et al., ICML 2025) with ROME on a real pretrained LM: read top to bottom.

No official code exists; the setup follows the paper's naturalistic experiment (a pretrained LM's cyclic knowledge of
the months, edited by ROME) at the scale of a 135M model.

1. **Knowledge.** Two cyclic orders the model has read about: the 12 months and the 7 weekdays. Facts are
   zero-shot raw-text prompts, "The month after March is" -> " April" ("after" = +1, "before" = -1 on the cycle); a
   fact is recalled when its object has the highest log-probability among the structure's candidates (every
   name is one token). Reasoning over the structure: "The month two months after March is" -> " May" (+2).
2. **Editor: ROME** (Meng et al. 2022; read in ``kmeng01/rome``: ``rome_main.py``, ``compute_u.py``,
   ``compute_v.py``). The MLP down-projection W (d x m) of block ``edit_layer`` is a key-value memory: key k =
   SiLU(gate x) * (up x) (m = 1536 for SmolLM2), value W k. For an edit (x, r) -> y':
   * C = E[k k^T], the uncentred second moment of keys over text (here: Python standard-library docstrings);
   * k_bar = the key at the subject's last token averaged over ``n_contexts`` prompts (the bare one and short
     neutral prefixes), u = C^-1 k_bar (``compute_u``);
   * v* = v_init + delta, delta optimised with Adam so that every prompt predicts y' (NLL) + KL of the next-token
     distribution after "{subject} is a" + weight decay |delta| / |v_init|^2, |delta| clamped to
     ``clamp_norm_factor`` |v_init|, early stop at loss < 0.05 (``compute_v``, its GPT-2-XL hyper-parameters);
   * W <- W + (v* - W k*) u^T / (u^T k*), k* the key of the bare prompt: the closed form of min |W' K - V| s.t.
     W' k* = v* (``rome_main.execute_rome``).
   The edit re-maps (month, after/before) from its object y to the month y' at ring distance d from y.
3. **Shattering.** Entity representation = the residual stream after block ``repr_layer`` at the month's token in
   "It happened in {month}"; D = pairwise Euclidean distances of the 12 months; R = |D_edit - D_orig|_F / |D_orig|_F.
4. **Damage.** Recall = candidate-argmax accuracy on the facts whose subject is not the edited month (the other
   months' facts and every weekday fact); reasoning = accuracy of the +2 questions whose chain avoids the edited
   month; each as the drop from the unedited model on the same items.

Controls per edit: a same-object edit (d = 0: the full ROME pipeline asserting the true fact, which agrees with the cycle) and a
random rank-one update of the same Frobenius norm as ROME's (a direction that ignores the keys' geometry).

Helpers here that are generic (``mlp_keys``: a module's input at chosen positions; ``last_token_forward``: one padded
forward returning last-token logits and residual states) would fit ``tasks/pretrained.py``.
"""

from __future__ import annotations

import inspect
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import import_module
from typing import Iterator

import numpy as np
import torch
import torch.nn.functional as F
from scipy import stats as sps
from scipy.spatial.distance import pdist, squareform

from flows.repr_shattering_ke.params import Params
from paperflows.core.seeding import numpy_rng
from tasks import pretrained as P
from tasks.correlation import spearman
from tasks.train import torch_single_thread

ROME_EARLY_STOP = 5e-2       # compute_v: stop once the v* loss is below this
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
STRUCTURES = {"months": ("month", MONTHS), "days": ("day", DAYS)}
RELATIONS = {"after": 1, "before": -1}
REPR_TEMPLATE = {"months": "It happened in {}", "days": "It happened on {}"}
# Short neutral prefixes standing in for ROME's model-generated context templates ("{}" plus prefixes).
CONTEXT_PREFIXES = ("Here is a fact. ", "I looked it up. ", "As everyone knows, ", "Note this down. ",
                    "My teacher said that ", "In the calendar, ", "It is simple: ", "Remember that ")
# The covariance text: docstrings of these standard-library modules and their public members (English prose
# that ships with Python, so it is offline and fixed by the interpreter version).
COV_MODULES = ("collections", "json", "random", "string", "textwrap", "statistics", "datetime", "calendar",
               "fractions", "decimal", "itertools", "functools", "pathlib", "shutil", "heapq", "bisect", "csv",
               "argparse", "logging", "unittest", "threading", "subprocess", "os", "re", "typing", "inspect",
               "email.message", "http.client", "urllib.parse", "zipfile", "tarfile", "sqlite3", "socket", "asyncio")


# =============================================================================================
# 1. The facts: prompts as token ids whose last token is where the answer (or the representation) is read
# =============================================================================================
@dataclass(frozen=True)
class Item:
    """One prompt. ``head`` ends with the subject's name; ``ids`` = head + tail tokens; ``kind``: "fact",
    "composition" or "repr"; ``answer`` and ``candidates`` are token ids (none for "repr")."""

    kind: str
    structure: str
    subject: int
    relation: str
    ids: tuple[int, ...]
    head_len: int
    answer: int | None
    candidates: tuple[int, ...]


def name_ids(tokenizer, structure: str) -> tuple[int, ...]:
    """The one token of " {name}" for every name of the structure (an error if a name takes several)."""
    ids = [P.token_ids(tokenizer, " " + name, bos=False) for name in STRUCTURES[structure][1]]
    if any(len(i) != 1 for i in ids):
        raise ValueError(f"every {structure} name must be one token for candidate scoring; got {ids}")
    return tuple(i[0] for i in ids)


def prompt_ids(tokenizer, head: str, tail: str) -> tuple[list[int], int]:
    """Token ids of head + tail (tokenised apart, so the head's last token is the subject's last) and len(head)."""
    h = P.token_ids(tokenizer, head)
    return h + P.token_ids(tokenizer, tail, bos=False), len(h)


def fact_text(structure: str, relation: str, subject: int) -> tuple[str, str]:
    unit, names = STRUCTURES[structure]
    return f"The {unit} {relation} {names[subject]}", " is"


def build_items(tokenizer) -> list[Item]:
    """Every fact (2 structures x 2 relations x each name), every +2 month question, every representation prompt."""
    items = []
    for structure, (unit, names) in STRUCTURES.items():
        cands = name_ids(tokenizer, structure)
        n = len(names)
        for relation, shift in RELATIONS.items():
            for s in range(n):
                ids, head = prompt_ids(tokenizer, *fact_text(structure, relation, s))
                items.append(Item("fact", structure, s, relation, tuple(ids), head, cands[(s + shift) % n], cands))
        for s in range(n):
            ids, head = prompt_ids(tokenizer, REPR_TEMPLATE[structure].format(names[s]), "")
            items.append(Item("repr", structure, s, "", tuple(ids), head, None, ()))
    cands = name_ids(tokenizer, "months")
    for s in range(len(MONTHS)):
        ids, head = prompt_ids(tokenizer, f"The month two months after {MONTHS[s]}", " is")
        items.append(Item("composition", "months", s, "after2", tuple(ids), head, cands[(s + 2) % len(MONTHS)], cands))
    return items


# =============================================================================================
# 2. Reading the model
# =============================================================================================
def positions_of(mask: torch.Tensor) -> torch.Tensor:
    """Rotary positions from 0 at each left-padded row's first real token."""
    return (mask.cumsum(dim=1) - 1).clamp(min=0)


def down_proj(model, layer: int) -> torch.nn.Linear:
    """W of block ``layer``'s MLP: keys (m) -> values (d)."""
    return P.decoder_layers(model)[layer].mlp.down_proj


@torch.no_grad()
def last_token_forward(model, tokenizer, rows: list[tuple[int, ...]], layers: list[int]
                       ) -> tuple[torch.Tensor, dict[int, np.ndarray]]:
    """One left-padded forward: last-token logits (b, V) and the residual stream after each of ``layers`` at the
    last token ({layer: (b, d) float64})."""
    ids, mask = P.pad(rows, tokenizer.pad_token_id, side="left")
    with P.read_residual(model, layers) as seen:
        logits = model(input_ids=ids, attention_mask=mask, position_ids=positions_of(mask), logits_to_keep=1).logits
    return logits[:, -1].float(), {layer: seen[layer][0][:, -1].double().numpy() for layer in layers}


class _Stop(Exception):
    """Raised by a hook once the keys are read: the layers above are not needed."""


@torch.no_grad()
def mlp_keys(model, layer: int, ids: torch.Tensor, mask: torch.Tensor, sites: torch.Tensor) -> torch.Tensor:
    """The down-projection's input of block ``layer`` at column ``sites[i]`` of row i (left-padded ids (b, t)):
    (b, m) float32; the forward stops at that block."""
    store = {}

    def hook(module, inputs):
        store["key"] = inputs[0][torch.arange(len(sites)), sites]
        raise _Stop

    handle = down_proj(model, layer).register_forward_pre_hook(hook)
    try:
        model(input_ids=ids, attention_mask=mask, position_ids=positions_of(mask))
    except _Stop:
        pass
    finally:
        handle.remove()
    return store["key"]


def covariance_text() -> str:
    """English prose from the interpreter itself: the docstrings of :data:`COV_MODULES` and their public members."""
    docs = []
    for name in COV_MODULES:
        module = import_module(name)
        docs.append(inspect.getdoc(module) or "")
        for member_name in sorted(vars(module)):
            member = getattr(module, member_name)
            if not member_name.startswith("_") and (inspect.isclass(member) or inspect.isfunction(member)):
                docs.append(inspect.getdoc(member) or "")
    return "\n\n".join(d for d in docs if len(d) > 40)


@torch.no_grad()
def key_second_moment(model, tokenizer, layer: int, n_tokens: int, chunk: int = 128) -> np.ndarray:
    """C = E[k k^T] (m, m) float64 over the keys of block ``layer`` at every position of the first ``n_tokens``
    tokens of :func:`covariance_text`, in windows of ``chunk`` tokens (ROME's uncentred ``mom2``)."""
    ids = P.token_ids(tokenizer, covariance_text(), bos=False)
    if len(ids) < n_tokens:
        raise ValueError(f"the covariance text has {len(ids)} tokens, fewer than cov_tokens = {n_tokens}")
    windows = torch.tensor(ids[:n_tokens - n_tokens % chunk]).view(-1, chunk)
    moment = torch.zeros(down_proj(model, layer).in_features, down_proj(model, layer).in_features, dtype=torch.float64)
    with torch_single_thread():
        for batch in windows.split(16):
            store = {}

            def hook(module, inputs):
                store["key"] = inputs[0].reshape(-1, inputs[0].shape[-1]).double()
                raise _Stop

            handle = down_proj(model, layer).register_forward_pre_hook(hook)
            try:
                model(input_ids=batch)
            except _Stop:
                pass
            finally:
                handle.remove()
            moment += store["key"].T @ store["key"]
    return (moment / windows.numel()).numpy()


@dataclass
class State:
    """What a model (unedited or edited) does on the items: per item, the softmax over its candidates (None for a
    representation prompt), whether the answer wins it and the answer's probability; the representations
    ({layer: {structure: (n, d)}})."""

    cand_probs: list[np.ndarray | None]
    correct: np.ndarray
    prob: np.ndarray
    reps: dict[int, dict[str, np.ndarray]]


def read_state(model, tokenizer, items: list[Item], layers: list[int]) -> State:
    logits, states = last_token_forward(model, tokenizer, [it.ids for it in items], layers)
    cand_probs: list[np.ndarray | None] = [None] * len(items)
    correct, prob = np.full(len(items), np.nan), np.full(len(items), np.nan)
    for i, it in enumerate(items):
        if it.answer is not None:
            cand_probs[i] = torch.softmax(logits[i, list(it.candidates)].double(), -1).numpy()
            answer = it.candidates.index(it.answer)
            correct[i] = float(cand_probs[i].argmax() == answer)
            prob[i] = float(cand_probs[i][answer])
    reps = {layer: {s: states[layer][[i for i, it in enumerate(items) if it.kind == "repr" and it.structure == s]]
                    for s in STRUCTURES} for layer in layers}
    return State(cand_probs, correct, prob, reps)


def distance_matrix(x: np.ndarray) -> np.ndarray:
    """Pairwise Euclidean distances of the rows of ``x`` (n, d): (n, n)."""
    return squareform(pdist(x))


def shattering(d_orig: np.ndarray, d_edit: np.ndarray) -> float:
    """R = |D_edit - D_orig|_F / |D_orig|_F."""
    return float(np.linalg.norm(d_edit - d_orig) / np.linalg.norm(d_orig))


def ring_distance(a: np.ndarray | int, b: np.ndarray | int, n: int) -> np.ndarray:
    """min(|a - b|, n - |a - b|) of ring positions."""
    gap = np.abs(np.asarray(a) - np.asarray(b)) % n
    return np.minimum(gap, n - gap)


def ring_geometry(d_orig: np.ndarray) -> float:
    """Spearman of representation distance with ring distance over the pairs of a cycle listed in ring order:
    does the geometry hold the ring (the paper's Isomap rings)? ~0 when it does not."""
    n = len(d_orig)
    i, j = np.triu_indices(n, k=1)
    return spearman(ring_distance(i, j, n), d_orig[i, j])


# =============================================================================================
# 3. ROME
# =============================================================================================
def rome_update(w: np.ndarray, c: np.ndarray, k_bar: np.ndarray, k_star: np.ndarray, v_star: np.ndarray) -> np.ndarray:
    """ROME's rank-one update of W (d, m): Delta = (v* - W k*) u^T / (u^T k*), u = C^-1 k_bar (shapes (m,)).

    After it, (W + Delta) k* = v* exactly, and any other key k moves by (v* - W k*) (u.k) / (u.k*). With
    k_bar = k* it is the minimiser of |(W' - W) K|_F (C = K K^T / n) subject to W' k* = v*.
    """
    u = np.linalg.solve(c, k_bar)
    return np.outer(v_star - w @ k_star, u) / (u @ k_star)


def edit_prompts(tokenizer, subject: int, relation: str, n_contexts: int, rng: np.random.Generator
                 ) -> tuple[list[list[int]], list[int]]:
    """ROME's rewriting prompts: the bare fact prompt and ``n_contexts - 1`` prefixed ones: their ids, and each one's
    subject position counted from its end (1 = the last token; the tail " is" is one token, so 2 for all)."""
    head, tail = fact_text("months", relation, subject)
    prefixes = ["", *rng.choice(CONTEXT_PREFIXES, n_contexts - 1, replace=False)]
    rows = [prompt_ids(tokenizer, prefix + head, tail) for prefix in prefixes]
    return [ids for ids, _ in rows], [len(ids) - h + 1 for ids, h in rows]


@contextmanager
def value_delta(model, layer: int, delta: torch.Tensor, where: torch.Tensor) -> Iterator[None]:
    """Add ``delta`` (d,) to the down-projection's output of block ``layer`` where ``where`` (b, t, 1) is 1."""
    handle = down_proj(model, layer).register_forward_hook(lambda module, inputs, out: out + where * delta)
    try:
        yield
    finally:
        handle.remove()


def compute_v_delta(model, p: Params, ids: torch.Tensor, mask: torch.Tensor, sites: torch.Tensor, n_rewrite: int,
                    target: int) -> tuple[np.ndarray, int, float]:
    """ROME's v* search on one left-padded batch: rows < ``n_rewrite`` are rewriting prompts (their last token must
    predict ``target``), the last row is the KL prompt "{subject} is a". delta (d,) is added at each row's
    subject site; loss = NLL + kl_factor KL + v_weight_decay |delta| / |v_init|^2, |delta| <= clamp_norm_factor
    |v_init|, v_init = the down-projection's output at the site of row 0 (the bare prompt).
    Returns (delta, steps taken, final NLL)."""
    layer = p.edit_layer
    where = torch.zeros(*ids.shape, 1)
    where[torch.arange(len(sites)), sites] = 1.0
    keys = mlp_keys(model, layer, ids[:1], mask[:1], sites[:1])
    v_init = down_proj(model, layer)(keys)[0].detach()
    position = positions_of(mask)
    with torch.no_grad():
        kl_init = torch.log_softmax(model(input_ids=ids[-1:], attention_mask=mask[-1:], position_ids=position[-1:],
                                          logits_to_keep=1).logits[0, -1], -1)
    delta = torch.zeros(v_init.shape, requires_grad=True)
    optimiser = torch.optim.Adam([delta], lr=p.v_lr)
    steps, nll = 0, float("nan")
    for step in range(p.v_steps):
        with value_delta(model, layer, delta, where):
            logp = torch.log_softmax(model(input_ids=ids, attention_mask=mask, position_ids=position,
                                           logits_to_keep=1).logits[:, -1], -1)
        nll_t = -logp[:n_rewrite, target].mean()
        kl = F.kl_div(kl_init[None], logp[-1:], log_target=True, reduction="batchmean")
        loss = nll_t + p.kl_factor * kl + p.v_weight_decay * delta.norm() / v_init.norm() ** 2
        steps, nll = step, float(nll_t.detach())
        if float(loss.detach()) < ROME_EARLY_STOP or step == p.v_steps - 1:
            break
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        with torch.no_grad():
            max_norm = p.clamp_norm_factor * v_init.norm()
            if delta.norm() > max_norm:
                delta.mul_(max_norm / delta.norm())
    return delta.detach().double().numpy(), steps, nll


def rome_edit(model, tokenizer, p: Params, c: np.ndarray, subject: int, relation: str, new_object: int,
              rng: np.random.Generator) -> tuple[np.ndarray, dict]:
    """ROME's update (d, m) re-mapping (month ``subject``, ``relation``) to month ``new_object``, the k*, v* it
    must satisfy, and diagnostics."""
    rows, from_end = edit_prompts(tokenizer, subject, relation, p.n_contexts, rng)
    kl_ids, kl_head = prompt_ids(tokenizer, MONTHS[subject], " is a")
    rows.append(kl_ids)
    from_end.append(len(kl_ids) - kl_head + 1)
    ids, mask = P.pad(rows, tokenizer.pad_token_id, side="left")
    sites = ids.shape[1] - torch.tensor(from_end)
    with torch_single_thread():
        keys = mlp_keys(model, p.edit_layer, ids, mask, sites).double().numpy()
        k_star, k_bar = keys[0], keys[:-1].mean(axis=0)          # the KL prompt's key takes no part (compute_u)
        target = name_ids(tokenizer, "months")[new_object]
        delta, steps, nll = compute_v_delta(model, p, ids, mask, sites, len(rows) - 1, target)
    w = down_proj(model, p.edit_layer).weight.detach().double().numpy()
    v_star = w @ k_star + delta
    update = rome_update(w, c, k_bar, k_star, v_star)
    return update, {"k_star": k_star, "v_star": v_star, "bare": rows[0], "bare_site": int(sites[0]) - ids.shape[1],
                    "delta_norm": float(np.linalg.norm(delta)), "update_norm": float(np.linalg.norm(update)),
                    "v_steps": steps, "v_nll": nll}


def random_update_like(update: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A random rank-one matrix a b^T (Gaussian directions) with the Frobenius norm of ``update``."""
    a, b = rng.standard_normal(update.shape[0]), rng.standard_normal(update.shape[1])
    out = np.outer(a, b)
    return out * (np.linalg.norm(update) / np.linalg.norm(out))


@contextmanager
def updated(model, layer: int, update: np.ndarray) -> Iterator[None]:
    """The model with W of block ``layer`` += ``update`` (d, m) inside the block; the original weights restored
    bit for bit afterwards."""
    weight = down_proj(model, layer).weight
    original = weight.detach().clone()
    with torch.no_grad():
        weight.add_(torch.as_tensor(update, dtype=weight.dtype))
    try:
        yield
    finally:
        with torch.no_grad():
            weight.copy_(original)


@torch.no_grad()
def site_value(model, tokenizer, layer: int, ids: list[int], site: int) -> np.ndarray:
    """The down-projection's output of block ``layer`` at position ``site`` (from the end) of one prompt: (d,)."""
    store = {}
    handle = down_proj(model, layer).register_forward_hook(lambda m, i, out: store.__setitem__("v", out[0, site]))
    try:
        model(input_ids=torch.tensor([ids]))
    finally:
        handle.remove()
    return store["v"].double().numpy()


# =============================================================================================
# 4. One seed: the edits at every distance on a fresh copy of the model
# =============================================================================================
def far_near(p: Params) -> tuple[int, int]:
    """Edits with d >= 3 (a quarter of the year or more) are 'far', d <= 2 'near'."""
    return len(MONTHS) // 4, 2


def month_facts(items: list[Item]) -> list[int]:
    return [i for i, it in enumerate(items) if it.kind == "fact" and it.structure == "months"]


def sample_edits(p: Params, items: list[Item], known: np.ndarray, rng: np.random.Generator) -> list[dict]:
    """``edits_per_distance`` edits at d = 0 (same object) and at every d of ``edit_distances``: distinct month facts,
    those the unedited model recalls first (ROME edits known facts), the new month at ring distance d from the
    old one (random side)."""
    facts = np.array(month_facts(items))
    ranked = np.concatenate([rng.permutation(facts[known[facts] == 1]), rng.permutation(facts[known[facts] != 1])])
    distances = [0, *p.edit_distances]
    n = len(MONTHS)
    edits = []
    for i, index in enumerate(ranked[:len(distances) * p.edits_per_distance]):
        it, d = items[index], distances[i // p.edits_per_distance]
        old = (it.subject + RELATIONS[it.relation]) % n
        edits.append({"subject": it.subject, "relation": it.relation, "old": old,
                      "new": int((old + rng.choice([-1, 1]) * d) % n), "d": d})
    return edits


def damage_masks(items: list[Item], subject: int) -> dict[str, np.ndarray]:
    """The items a month edit must leave alone: facts about other subjects (months other than the edited one, and all
    weekdays) and +2 questions whose chain s -> s+1 -> s+2 avoids the edited month."""
    n = len(MONTHS)
    fact = np.array([it.kind == "fact" and not (it.structure == "months" and it.subject == subject) for it in items])
    return {"recall": fact,
            "month_recall": fact & np.array([it.structure == "months" for it in items]),
            "day_recall": fact & np.array([it.structure == "days" for it in items]),
            "composition": np.array([it.kind == "composition" and subject not in (it.subject, (it.subject + 1) % n)
                                     for it in items])}


def run_seed(p: Params, seed: int, cov_path: str) -> dict:
    """One seed: a fresh copy of the model (hooks and edits stay on it), edited (d + 1) x ``edits_per_distance``
    times, each time beside a random rank-one update of the same norm.

    Returns {"rows": one dict per edit, "model": the unedited model's gate values (identical across seeds),
    "reps": month representations unedited and after the first farthest edit (for the figure)}.
    """
    model, tokenizer = P.load(p.model)
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    c = np.load(cov_path)
    items = build_items(tokenizer)
    layers = sorted({p.edit_layer, p.repr_layer})
    rng = numpy_rng(seed, 0)
    with torch_single_thread():
        base = read_state(model, tokenizer, items, layers)
        d_orig = {layer: {s: distance_matrix(base.reps[layer][s]) for s in STRUCTURES} for layer in layers}
        rows, far_reps = [], None
        for i, e in enumerate(sample_edits(p, items, base.correct, rng)):
            update, info = rome_edit(model, tokenizer, p, c, e["subject"], e["relation"], e["new"], rng)
            masks = damage_masks(items, e["subject"])
            others = np.arange(len(MONTHS)) != e["subject"]
            row = {"seed": seed, **e, **{k: info[k] for k in ("delta_norm", "update_norm", "v_steps", "v_nll")}}
            for name, upd in (("rome", update), ("random", random_update_like(update, numpy_rng(seed, 1, i)))):
                with updated(model, p.edit_layer, upd):
                    out = read_state(model, tokenizer, items, layers)
                    if name == "rome":   # ROME's constraint in the edited model itself (float32): W' k* = v*
                        v = site_value(model, tokenizer, p.edit_layer, info["bare"], info["bare_site"])
                        row["exactness"] = float(np.linalg.norm(v - info["v_star"]) / np.linalg.norm(info["v_star"]))
                d_edit = distance_matrix(out.reps[p.repr_layer]["months"])
                row[f"R_{name}"] = shattering(d_orig[p.repr_layer]["months"], d_edit)
                row[f"R_others_{name}"] = shattering(d_orig[p.repr_layer]["months"][np.ix_(others, others)],
                                                     d_edit[np.ix_(others, others)])
                row[f"R_days_{name}"] = shattering(d_orig[p.repr_layer]["days"],
                                                   distance_matrix(out.reps[p.repr_layer]["days"]))
                row[f"R_edit_layer_{name}"] = shattering(d_orig[p.edit_layer]["months"],
                                                         distance_matrix(out.reps[p.edit_layer]["months"]))
                for metric, mask in masks.items():
                    row[f"{metric}_drop_{name}"] = float(base.correct[mask].mean() - out.correct[mask].mean())
                row[f"recall_prob_drop_{name}"] = float(base.prob[masks["recall"]].mean() - out.prob[masks["recall"]].mean())
                if name == "rome":
                    edited = next(j for j, it in enumerate(items) if it.kind == "fact" and it.structure == "months"
                                  and it.subject == e["subject"] and it.relation == e["relation"])
                    row["new_prob"] = float(out.cand_probs[edited][e["new"]])
                    row["success"] = float(out.cand_probs[edited].argmax() == e["new"])
                    if far_reps is None and e["d"] == max(p.edit_distances):
                        far_reps = {"subject": e["subject"], "reps": out.reps[p.repr_layer]["months"].tolist()}
            rows.append(row)
    facts = np.array([it.kind == "fact" for it in items])
    month_facts_mask = facts & np.array([it.structure == "months" for it in items])
    composition = np.array([it.kind == "composition" for it in items])
    return {"seed": seed, "rows": rows,
            "model": {"fact_recall": float(base.correct[facts].mean()),
                      "month_fact_recall": float(base.correct[month_facts_mask].mean()),
                      "day_fact_recall": float(base.correct[facts & ~month_facts_mask].mean()),
                      "composition_accuracy": float(base.correct[composition].mean()),
                      "ring_geometry_months": ring_geometry(d_orig[p.repr_layer]["months"]),
                      "ring_geometry_days": ring_geometry(d_orig[p.repr_layer]["days"]),
                      "ring_geometry_months_edit_layer": ring_geometry(d_orig[p.edit_layer]["months"])},
            "reps": {"orig": base.reps[p.repr_layer]["months"].tolist(), "far": far_reps}}


# =============================================================================================
# 5. Per-seed statistics of the claims (evaluation summarises them over seeds)
# =============================================================================================
def r2_of_means(d: np.ndarray, values: np.ndarray) -> float:
    """r^2 of the least-squares line through (distance, mean value at that distance)."""
    levels = np.unique(d)
    means = np.array([values[d == level].mean() for level in levels])
    if np.ptp(means) == 0:
        return float("nan")
    return float(sps.linregress(levels, means).rvalue ** 2)


def seed_statistics(p: Params, rows: list[dict], seed: int) -> dict:
    """The claim statistics of one seed's edits, with their negative controls: a seeded permutation of the distance
    labels (no geometry behind them) or of the pairing of R with damage, and the same-object (d = 0) edits."""
    counter = [r for r in rows if r["d"] > 0]
    d = np.array([r["d"] for r in counter], float)
    big_r = np.array([r["R_rome"] for r in counter])
    recall = np.array([r["recall_drop_rome"] for r in counter])
    composition = np.array([r["composition_drop_rome"] for r in counter])
    perm = numpy_rng(seed, 2).permutation(len(counter))
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
        "control_spearman_d_R_permuted": spearman(d[perm], big_r), "control_r2_permuted_d": r2_of_means(d[perm], big_r),
        "control_spearman_R_recall_drop_permuted": spearman(big_r, recall[perm]),
        "control_far_minus_near_recall_permuted": far_minus_near(d[perm], recall),
        "control_far_minus_near_composition_permuted": far_minus_near(d[perm], composition),
        "control_recall_drop_same_object": float(np.mean([r["recall_drop_rome"] for r in same])),
        "spearman_d_R_random": spearman(d, np.array([r["R_random"] for r in counter])),
        "spearman_d_R_others": spearman(d, np.array([r["R_others_rome"] for r in counter])),
        "spearman_d_update_norm": spearman(d, np.array([r["update_norm"] for r in counter])),
        "success_rate": float(np.mean([r["success"] for r in counter])),
    }
