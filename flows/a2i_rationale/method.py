"""A2I ("attack to inspection and instruction", Liu et al., ICML 2025) on synthetic reviews; no Prefect.

Read top to bottom:

1. **Data.** Procedural multi-aspect beer reviews: four aspect sentences ("the {noun} is {adj} .") in random
   order among neutral filler sentences. The label is the sentiment of the target aspect (``look``); that
   sentence is the exact ground-truth rationale. The other aspects' sentiments are drawn independently of
   the label, so the data set is *clean*: no token outside the rationale is correlated with the label.
   Tokens are MiniLM WordPiece pieces and their frozen 384-d input embeddings (standing in for GloVe).
2. **Models.** As in the official ``RNP_0908`` / ``Adv_generator``: a generator (bi-GRU -> LayerNorm ->
   dropout -> 2-way linear) samples a hard token mask by straight-through Gumbel-softmax; the predictor
   (bi-GRU over the masked embeddings, max-pool, dropout, linear) sees only the selected tokens. RNP has
   two encoders, FR (folded rationalization) shares one between generator and predictor.
3. **Training** (official ``train_separate_two_head``). Per minibatch: (a) generator + predictor step on
   ``cls_lambda CE + sparsity_lambda |mean z - s| + continuity_lambda mean |z_t - z_t-1|``, plus for A2I
   the *instruction* ``adv_lambda CE(pred(attacker's rationale), [0.5, 0.5])``; (b) for A2I, an attacker
   step with the rationalizer frozen: the attacker (a separate generator) learns a rationale on which the
   predictor outputs the *opposite* label, under the same sparsity and continuity terms.
4. **Inspection.** After training, a fresh attacker is trained against each frozen predictor; its
   success rate on test reviews is compared with random masks of the same per-review size.

Randomness: the data from ``numpy_rng(seed, 0)``; every model's initialisation under ``torch_seeded``;
batch order, dropout and Gumbel noise from explicit ``torch.Generator`` objects (seeds run in threads).
"""

from __future__ import annotations

import functools
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from flows.a2i_rationale.params import Params
from paperflows.core.seeding import numpy_rng, torch_generator, torch_seeded
from tasks.train import torch_single_thread

# ---------------------------------------------------------------------------------------------- 1. data
ASPECTS: dict[str, tuple[str, ...]] = {          # aspect -> the nouns that name it
    "look": ("look", "color", "head"),
    "smell": ("smell", "aroma", "nose"),
    "taste": ("taste", "flavor", "finish"),
    "feel": ("feel", "body", "texture"),
}
TARGET = "look"                                   # the label is this aspect's sentiment (BeerAdvocate "appearance")
# Sentiment words: every aspect has its own adjectives (as "hazy" or "golden" describe a beer's look), and
# half of the aspect sentences use a generic adjective shared by all aspects instead ("great", "awful").
ADJECTIVES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {   # aspect -> (negative, positive)
    "look": (("murky", "dull", "cloudy", "muddy"), ("golden", "clear", "bright", "brilliant")),
    "smell": (("musty", "sour", "rotten", "stale"), ("fragrant", "fresh", "floral", "sweet")),
    "taste": (("bland", "bitter", "watery", "flat"), ("delicious", "rich", "tasty", "balanced")),
    "feel": (("thin", "harsh", "sticky", "oily"), ("smooth", "creamy", "crisp", "lively")),
}
GENERIC = (("awful", "terrible", "poor", "horrible"), ("great", "excellent", "superb", "wonderful"))
TEMPLATES = ("the {noun} is {adj} .", "the {noun} was really {adj} .", "i thought the {noun} was {adj} .",
             "{adj} {noun} overall .")
FILLERS = (
    "i poured it into a pint glass .", "bought this bottle at a local shop last week .",
    "shared this one with a friend after work .", "it was served cold on a warm evening .",
    "the bottle has a simple label with a small logo .", "drank it with dinner at home .",
    "this one comes from a small brewery up north .", "my second time trying this one .",
    "picked it up on a trip to the coast .", "the cap came off with a loud pop .",
    "had it on tap at a bar downtown .", "a friend gave me this as a gift .",
    "it sat in my fridge for a month .", "the price was about average for the style .",
    "i had read a few reviews before buying .", "poured from a brown bottle into a tulip .",
)
# segment codes of every token, for the diagnostics of where a selector picks its tokens
PAD, FILLER, TARGET_SENTENCE, OTHER_SAME, OTHER_OPPOSITE = -1, 0, 1, 2, 3
SEGMENTS = {"filler": FILLER, "target": TARGET_SENTENCE, "other_same": OTHER_SAME, "other_opposite": OTHER_OPPOSITE}


def _all_words() -> list[str]:
    adjectives = [w for pair in (*ADJECTIVES.values(), GENERIC) for words in pair for w in words]
    text = " ".join(TEMPLATES + FILLERS + tuple(adjectives) + tuple(n for ns in ASPECTS.values() for n in ns))
    return sorted({w for w in text.split() if "{" not in w})


@functools.cache
def wordpiece_vocabulary(dim: int = 0) -> tuple[dict[str, tuple[int, ...]], np.ndarray]:
    """Every word of the generator -> its MiniLM WordPiece pieces as compact ids (1..V; 0 = padding), and the
    frozen MiniLM input-embedding rows of those pieces, shape (V + 1, 384) float32 (row 0 zeros); with
    ``dim > 0`` the rows are projected on their ``dim`` leading principal directions (a fixed linear map,
    which makes the bi-GRU's input projection 384 / dim times cheaper), shape (V + 1, dim).

    Only the tokenizer and the input embedding table are used, no transformer layer. Call once before
    starting threads (the model loads once per process)."""
    from tasks.embed import minilm_input_embeddings, minilm_tokenizer  # offline all-MiniLM-L6-v2

    tokenizer, table = minilm_tokenizer(), minilm_input_embeddings()
    pieces = {w: tokenizer.convert_tokens_to_ids(tokenizer.tokenize(w)) for w in _all_words()}
    used = sorted({i for ids in pieces.values() for i in ids})
    compact = {wp: k + 1 for k, wp in enumerate(used)}
    embedding = np.zeros((len(used) + 1, table.shape[1]), dtype=np.float32)
    embedding[1:] = table[used]
    if dim:
        rows = embedding[1:] - embedding[1:].mean(axis=0)
        _, _, vt = np.linalg.svd(rows.astype(np.float64), full_matrices=False)
        embedding = np.vstack([np.zeros((1, dim)), rows @ vt[:dim].T]).astype(np.float32)
    return {w: tuple(compact[i] for i in ids) for w, ids in pieces.items()}, embedding


@dataclass(frozen=True)
class Reviews:
    """Encoded reviews. ``tokens`` (n, T) int64 compact piece ids, 0 = padding; ``mask`` (n, T) float32, 1 on
    real tokens; ``rationale`` (n, T) bool, the exact ground truth (every piece of the target-aspect
    sentence); ``segment`` (n, T) int8 (PAD/FILLER/TARGET_SENTENCE/OTHER_SAME/OTHER_OPPOSITE: other-aspect
    sentences whose sentiment agrees or disagrees with the label); ``label`` (n,) int64; ``other_sentiment``
    (n, 3) int64, the other aspects' sentiments (independent of the label by construction)."""

    tokens: np.ndarray
    mask: np.ndarray
    rationale: np.ndarray
    segment: np.ndarray
    label: np.ndarray
    other_sentiment: np.ndarray

    def __len__(self) -> int:
        return len(self.label)

    def torch(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return torch.from_numpy(self.tokens), torch.from_numpy(self.mask), torch.from_numpy(self.label)


def _sentence(aspect: str, positive: bool, rng: np.random.Generator, generic_share: float) -> str:
    template = TEMPLATES[rng.integers(len(TEMPLATES))]
    nouns = ASPECTS[aspect]
    adjectives = (GENERIC if rng.random() < generic_share else ADJECTIVES[aspect])[int(positive)]
    return template.format(noun=nouns[rng.integers(len(nouns))], adj=adjectives[rng.integers(len(adjectives))])


def review_sentences(rng: np.random.Generator, min_words: int, max_words: int, generic_share: float) -> tuple[list[tuple[str, int]], int, list[int]]:
    """One review as (sentence, segment code) pairs, its label, and the other aspects' sentiments.

    The target sentiment (the label) and the three other sentiments are independent fair coins; filler
    sentences (distinct, random order) are added while the word count stays within a budget drawn
    uniformly in [min_words, max_words]; the aspect sentences are then put at random places among them."""
    label = int(rng.integers(2))
    others = [int(v) for v in rng.integers(2, size=len(ASPECTS) - 1)]
    aspect_sentences = [(_sentence(TARGET, bool(label), rng, generic_share), TARGET_SENTENCE)]
    for aspect, sentiment in zip([a for a in ASPECTS if a != TARGET], others):
        aspect_sentences.append((_sentence(aspect, bool(sentiment), rng, generic_share), OTHER_SAME if sentiment == label else OTHER_OPPOSITE))
    budget = int(rng.integers(min_words, max_words + 1))
    words = sum(len(s.split()) for s, _ in aspect_sentences)
    fillers = []
    for i in rng.permutation(len(FILLERS)):
        n = len(FILLERS[i].split())
        if words + n > budget:
            continue
        fillers.append((FILLERS[i], FILLER))
        words += n
    slots = rng.permutation(len(fillers) + len(aspect_sentences))       # where every sentence goes
    ordered: list[tuple[str, int]] = [("", PAD)] * len(slots)
    for slot, item in zip(slots, aspect_sentences + fillers):
        ordered[slot] = item
    return ordered, label, others


def make_reviews(n: int, rng: np.random.Generator, min_words: int, max_words: int, generic_share: float) -> Reviews:
    """``n`` encoded reviews (see :class:`Reviews`), padded to the longest one."""
    vocab, _ = wordpiece_vocabulary()
    rows, segs, labels, others = [], [], [], []
    for _ in range(n):
        sentences, label, other = review_sentences(rng, min_words, max_words, generic_share)
        ids, seg = [], []
        for sentence, code in sentences:
            for word in sentence.split():
                ids += vocab[word]
                seg += [code] * len(vocab[word])
        rows.append(ids)
        segs.append(seg)
        labels.append(label)
        others.append(other)
    T = max(len(r) for r in rows)
    tokens = np.zeros((n, T), dtype=np.int64)
    segment = np.full((n, T), PAD, dtype=np.int8)
    for i, (r, s) in enumerate(zip(rows, segs)):
        tokens[i, :len(r)] = r
        segment[i, :len(s)] = s
    return Reviews(tokens=tokens, mask=(tokens > 0).astype(np.float32), rationale=segment == TARGET_SENTENCE,
                   segment=segment, label=np.asarray(labels, dtype=np.int64),
                   other_sentiment=np.asarray(others, dtype=np.int64))


# ---------------------------------------------------------------------------------------------- 2. models
@dataclass
class Noise:
    """Where a forward pass gets its randomness: dropout and a straight-through Gumbel sample of the
    rationale from ``generator``; with ``generator`` None, no dropout and the rationale is the argmax of the
    selection logits."""

    generator: torch.Generator | None
    dropout: float = 0.0

    def drop(self, h: torch.Tensor) -> torch.Tensor:
        if self.generator is None or self.dropout == 0.0:
            return h
        keep = torch.rand(h.shape, generator=self.generator) >= self.dropout
        return h * keep / (1.0 - self.dropout)

    def select(self, logits: torch.Tensor) -> torch.Tensor:
        """(n, T, 2) selection logits -> (n, T) hard 0/1 mask (training: straight-through Gumbel sample)."""
        if self.generator is None:
            return (logits[..., 1] > logits[..., 0]).to(logits.dtype)
        return gumbel_straight_through(logits, self.generator)[..., 1]


def gumbel_straight_through(logits: torch.Tensor, generator: torch.Generator, tau: float = 1.0) -> torch.Tensor:
    """``F.gumbel_softmax(logits, tau, hard=True)`` (the official sampler) with an explicit generator:
    forward = one-hot argmax of ``logits + g``, backward = gradient of ``softmax((logits + g) / tau)``,
    with g ~ Gumbel(0, 1) of the shape of ``logits`` (..., k)."""
    u = torch.rand(logits.shape, generator=generator).clamp_(1e-10, 1.0 - 1e-7)
    soft = torch.softmax((logits - torch.log(-torch.log(u))) / tau, dim=-1)
    hard = F.one_hot(soft.argmax(dim=-1), logits.shape[-1]).to(soft.dtype)
    return hard - soft.detach() + soft


def _bigru(dim: int, hidden: int) -> nn.GRU:
    return nn.GRU(dim, hidden // 2, num_layers=1, batch_first=True, bidirectional=True)


def bigrus(rnns: list[nn.GRU], xs: list[torch.Tensor]) -> list[torch.Tensor]:
    """``[rnn(x)[0] for rnn, x in zip(rnns, xs)]`` for 1-layer bidirectional batch-first GRUs of one shape, in a
    single time loop: every direction of every GRU is one slice of batched matmuls. A small GRU on a CPU pays
    per-op overhead on every time step; the five models of a seed together take about half their time alone.
    Inputs x (n, T, D), all of the same shape; outputs (n, T, 2 h) as ``nn.GRU``'s, up to float rounding."""
    def stacked(name: str) -> torch.Tensor:     # (cells, ...): forward and reverse direction of every GRU
        return torch.stack([getattr(rnn, name + suffix) for rnn in rnns for suffix in ("_l0", "_l0_reverse")])

    w_ih, w_hh, b_ih, b_hh = (stacked(name) for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"))
    x = torch.stack([v for x in xs for v in (x, x.flip(1))])            # reverse cells read time backwards
    cells, n, T, D = x.shape
    H = w_hh.shape[-1]
    gates_in = torch.baddbmm(b_ih[:, None], x.reshape(cells, n * T, D), w_ih.transpose(1, 2)).view(cells, n, T, 3 * H)
    # split once, not sliced per step: the backward of every slice would fill a zero tensor of the whole input
    gates_rz, gates_n = (g.unbind(2) for g in gates_in.split([2 * H, H], dim=-1))
    w_hh_t, b_hh = w_hh.transpose(1, 2), b_hh[:, None]
    h = x.new_zeros(cells, n, H)
    states = []
    for gi_rz, gi_n in zip(gates_rz, gates_n):  # nn.GRU's cell: r, z gates; candidate with r on the hidden part
        gh_rz, gh_n = torch.baddbmm(b_hh, h, w_hh_t).split([2 * H, H], dim=-1)
        reset, update = torch.sigmoid(gi_rz + gh_rz).chunk(2, dim=-1)
        candidate = torch.tanh(gi_n + reset * gh_n)
        h = candidate + update * (h - candidate)
        states.append(h)
    out = torch.stack(states, dim=2).unbind(0)
    return [torch.cat([forward, reverse.flip(1)], dim=-1) for forward, reverse in zip(out[::2], out[1::2])]


class Selector(nn.Module):
    """Generator (and attacker): embeddings -> bi-GRU -> LayerNorm -> dropout -> linear (n, T, 2)."""

    def __init__(self, embed: nn.Embedding, rnn: nn.GRU, hidden: int):
        super().__init__()
        self.embed, self.rnn = embed, rnn
        self.norm = nn.LayerNorm(hidden)
        self.fc = nn.Linear(hidden, 2)

    def inputs(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.embed(x) * mask[..., None]

    def head(self, h: torch.Tensor, noise: Noise) -> torch.Tensor:
        """bi-GRU states (n, T, hidden) -> selection logits (n, T, 2)."""
        return self.fc(noise.drop(self.norm(h)))

    def forward(self, x: torch.Tensor, mask: torch.Tensor, noise: Noise) -> torch.Tensor:
        """x (n, T) ids, mask (n, T) -> selection logits (n, T, 2)."""
        return self.head(self.rnn(self.inputs(x, mask))[0], noise)


class Rationalizer(nn.Module):
    """RNP (``shared=False``: generator and predictor have their own bi-GRU) or FR (``shared=True``: one
    bi-GRU encodes the full text for the generator and the masked text for the predictor)."""

    def __init__(self, embedding: np.ndarray, hidden: int, shared: bool):
        super().__init__()
        self.embed = nn.Embedding.from_pretrained(torch.from_numpy(embedding), freeze=True, padding_idx=0)
        gen_rnn = _bigru(embedding.shape[1], hidden)
        self.gen = Selector(self.embed, gen_rnn, hidden)
        self.pred_rnn = gen_rnn if shared else _bigru(embedding.shape[1], hidden)
        self.pred_fc = nn.Linear(hidden, 2)

    def pred_inputs(self, x: torch.Tensor, mask: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        return self.embed(x) * (mask * z)[..., None]

    def pred_head(self, h: torch.Tensor, mask: torch.Tensor, noise: Noise) -> torch.Tensor:
        """Predictor bi-GRU states (n, T, hidden) -> class logits (n, 2): max-pool over real tokens."""
        h = h.masked_fill(mask[..., None] == 0, -1e6).max(dim=1).values
        return self.pred_fc(noise.drop(h))

    def predict(self, x: torch.Tensor, mask: torch.Tensor, z: torch.Tensor, noise: Noise) -> torch.Tensor:
        """Class logits (n, 2) from the selected tokens only: x (n, T), mask (n, T), z (n, T) in {0, 1}."""
        return self.pred_head(self.pred_rnn(self.pred_inputs(x, mask, z))[0], mask, noise)


def make_attacker(embedding: np.ndarray, hidden: int) -> Selector:
    """The official ``Adv_generator``: a generator with its own encoder."""
    embed = nn.Embedding.from_pretrained(torch.from_numpy(embedding), freeze=True, padding_idx=0)
    return Selector(embed, _bigru(embedding.shape[1], hidden), hidden)


Batch = tuple[torch.Tensor, torch.Tensor, torch.Tensor]      # x (n, T) ids, mask (n, T), y (n,)


def select_together(selectors: list[Selector], batches: list[Batch], noises: list[Noise]) -> list[torch.Tensor]:
    """``[noise.select(s(x, mask, noise))]`` for every selector on its own batch, the bi-GRUs run together."""
    states = bigrus([s.rnn for s in selectors], [s.inputs(x, mask) for s, (x, mask, _) in zip(selectors, batches)])
    return [noise.select(s.head(h, noise)) for s, h, noise in zip(selectors, states, noises)]


def predict_together(models: list[Rationalizer], batches: list[Batch], zs: list[torch.Tensor], noises: list[Noise]) -> list[torch.Tensor]:
    """``[model.predict(x, mask, z, noise)]`` for every model on its own batch and rationale, the bi-GRUs run together."""
    states = bigrus([m.pred_rnn for m in models], [m.pred_inputs(x, mask, z) for m, (x, mask, _), z in zip(models, batches, zs)])
    return [m.pred_head(h, mask, noise) for m, h, (_, mask, _), noise in zip(models, states, batches, noises)]


# ---------------------------------------------------------------------------------------------- 3. losses
def sparsity_loss(z: torch.Tensor, mask: torch.Tensor, level: float) -> torch.Tensor:
    """Official ``get_sparsity_loss``: |selected / real tokens - level| over the whole batch (padding masked)."""
    return torch.abs((z * mask).sum() / mask.sum() - level)


def continuity_loss(z: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Official ``get_continuity_loss``: mean |z_t - z_{t-1}| (here over pairs of real tokens)."""
    pairs = mask[:, 1:] * mask[:, :-1]
    return (torch.abs(z[:, 1:] - z[:, :-1]) * pairs).sum() / pairs.sum()


def instruction_loss(logits_adv: torch.Tensor, y: torch.Tensor, kind: str) -> torch.Tensor:
    """The instruction on the attacker's rationale (logits (n, 2)): ``uniform`` = CE toward [0.5, 0.5]
    (minimised by an uninformative prediction); ``hinge`` = -mean min(CE(opposite label), log 2), the
    official default, which pushes the opposite-label probability down to at most one half."""
    logp = F.log_softmax(logits_adv, dim=-1)
    if kind == "uniform":
        return -(0.5 * logp).sum(dim=-1).mean()
    ce_opposite = F.nll_loss(logp, 1 - y, reduction="none")
    return -torch.minimum(ce_opposite, torch.full_like(ce_opposite, float(np.log(2.0)))).mean()


def selection_penalty(z: torch.Tensor, mask: torch.Tensor, p: Params, sparse: bool = True, continuous: bool = True) -> torch.Tensor:
    out = torch.zeros(())
    if sparse:
        out = out + p.sparsity_lambda * sparsity_loss(z, mask, p.sparsity)
    if continuous:
        out = out + p.continuity_lambda * continuity_loss(z, mask)
    return out


@contextmanager
def frozen(*modules: nn.Module) -> Iterator[None]:
    """Parameters of ``modules`` get no gradient inside the block (the trainable ones are restored after)."""
    trainable = [q for module in modules for q in module.parameters() if q.requires_grad]
    for q in trainable:
        q.requires_grad_(False)
    try:
        yield
    finally:
        for q in trainable:
            q.requires_grad_(True)


def _adam(modules: list[nn.Module], lr: float) -> torch.optim.Adam:
    """One Adam over the trainable parameters of several models: Adam is per parameter, so this is each
    model's own Adam, in fewer (foreach) ops."""
    return torch.optim.Adam([q for module in modules for q in module.parameters() if q.requires_grad], lr=lr, foreach=True)


def attacker_step(models: list[Rationalizer], attackers: list[Selector], opt_adv: torch.optim.Optimizer,
                  batches: list[Batch], p: Params, noises_adv: list[Noise], noises_pred: list[Noise]) -> None:
    """One update of every attacker with its rationalizer frozen: the predictor should output the opposite
    label on the attacker's rationale (official: cls_lambda CE(pred(z_adv), 1 - y) + adv_sparse/adv_continue
    terms). The attackers are independent; their losses are summed only to take one backward pass."""
    with frozen(*models):
        zs = select_together(attackers, batches, noises_adv)
        logits = predict_together(models, batches, zs, noises_pred)
        loss = sum(p.cls_lambda * F.cross_entropy(out, 1 - y) + selection_penalty(z, mask, p, p.adv_sparse, p.adv_continue)
                   for out, z, (_, mask, y) in zip(logits, zs, batches))
        opt_adv.zero_grad()
        loss.backward()
        opt_adv.step()


@dataclass(frozen=True)
class Arm:
    """One rationalizer to train: RNP/FR (``shared``), with the attack-and-instruction step (``instruct``),
    initialisation and noise streams from ``seed``."""

    shared: bool
    instruct: bool
    seed: int


def train_rationalizers(p: Params, data: Reviews, arms: list[Arm], *, adv_lambda: float | None = None,
                        epochs: int | None = None) -> list[tuple[Rationalizer, Selector | None]]:
    """Train RNP/FR (``instruct=False``) or A2I-RNP/A2I-FR (``instruct=True``) on ``data``, one per arm, in
    lockstep: every minibatch step runs the bi-GRUs of all arms together (:func:`bigrus`); the arms share
    nothing else, each training as it would alone.

    An arm's initialisation, batch order, dropout and Gumbel noise depend on its ``seed`` only, and
    everything computed on the attacker's rationale (its Gumbel sample, the predictor's dropout there) draws
    from the attacker's own generator: with ``adv_lambda = 0`` A2I trains the very same weights as its
    base model, so the two differ by the instruction alone."""
    _, embedding = wordpiece_vocabulary(p.embed_dim)
    adv_lambda = p.adv_lambda if adv_lambda is None else adv_lambda
    models, generators = [], []
    for arm in arms:
        with torch_seeded(arm.seed):
            models.append(Rationalizer(embedding, p.hidden, arm.shared))
        generators.append(torch_generator(arm.seed))
    noises = [Noise(g, p.dropout) for g in generators]
    instructed = [k for k, arm in enumerate(arms) if arm.instruct]
    attackers, noises_adv = [], []
    for k in instructed:
        with torch_seeded(arms[k].seed + 7919):
            attackers.append(make_attacker(embedding, p.hidden))
        noises_adv.append(Noise(torch_generator(arms[k].seed + 7919), p.dropout))
    instructed_models = [models[k] for k in instructed]
    opt = _adam(models, p.lr)
    opt_adv = _adam(attackers, p.lr) if attackers else None
    X, M, Y = data.torch()
    for _ in range(epochs if epochs is not None else p.epochs):
        orders = [torch.randperm(len(Y), generator=g) for g in generators]
        for start in range(0, len(Y), p.batch_size):
            batches = [(X[idx], M[idx], Y[idx]) for idx in (order[start:start + p.batch_size] for order in orders)]
            adv_batches = [batches[k] for k in instructed]
            # (a) generator + predictor, with the instruction on the (frozen) attacker's rationale
            zs = select_together([m.gen for m in models], batches, noises)
            with torch.no_grad():
                zs_adv = select_together(attackers, adv_batches, noises_adv) if attackers else []
            # the predictor on the attacker's rationale draws its dropout from the attacker's stream
            logits = predict_together(models + instructed_models, batches + adv_batches, zs + zs_adv, noises + noises_adv)
            loss = sum(p.cls_lambda * F.cross_entropy(out, y) + selection_penalty(z, mask, p)
                       for out, z, (_, mask, y) in zip(logits, zs, batches))
            loss = loss + sum(adv_lambda * p.cls_lambda * instruction_loss(out, y, p.instruction)
                              for out, (_, _, y) in zip(logits[len(models):], adv_batches))
            opt.zero_grad()
            loss.backward()
            opt.step()
            # (b) attackers, rationalizers frozen (official: alternation in every minibatch)
            if attackers:
                attacker_step(instructed_models, attackers, opt_adv, adv_batches, p, noises_adv, noises_adv)
    for model in models:
        model.eval()
    by_arm = dict(zip(instructed, attackers))
    return [(model, by_arm.get(k)) for k, model in enumerate(models)]


# ---------------------------------------------------------------------------------------------- 4. evaluation
def token_prf(selected: np.ndarray, truth: np.ndarray, mask: np.ndarray) -> dict[str, float]:
    """Micro token precision, recall and F1 (official ``validate_share``) over real tokens; (n, T) arrays."""
    real = mask > 0
    s, t = selected.astype(bool) & real, truth.astype(bool) & real
    tp = float((s & t).sum())
    precision = tp / s.sum() if s.sum() else 0.0
    recall = tp / t.sum() if t.sum() else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "sparsity": float(s.sum() / real.sum())}


def segment_shares(selected: np.ndarray, segment: np.ndarray) -> dict[str, float]:
    """Share of the selected tokens that lie in each kind of sentence (filler, target, other aspects)."""
    s = selected.astype(bool) & (segment != PAD)
    total = max(int(s.sum()), 1)
    return {name: float((s & (segment == code)).sum() / total) for name, code in SEGMENTS.items()}


@torch.no_grad()
def rationales(selector: Selector, data: Reviews, p: Params, seed: int) -> np.ndarray:
    """The rationale of every review, (n, T) float32, without dropout: a hard Gumbel sample from a generator
    seeded by ``seed`` (``eval_rationale = "sample"``, as the official validation, which keeps sampling), or
    the argmax of the selection logits."""
    X, M, _ = data.torch()
    selector.eval()
    noise = Noise(torch_generator(seed) if p.eval_rationale == "sample" else None)
    return noise.select(selector(X, M, Noise(None))).numpy() * data.mask


@torch.no_grad()
def predictions(model: Rationalizer, data: Reviews, z: np.ndarray) -> np.ndarray:
    """The predictor's class (n,) on the tokens selected by ``z`` (n, T)."""
    X, M, _ = data.torch()
    model.eval()
    return model.predict(X, M, torch.from_numpy(z.astype(np.float32)), Noise(None)).argmax(dim=-1).numpy()


def evaluate(model: Rationalizer, data: Reviews, p: Params, seed: int) -> dict[str, float]:
    """Rationale P/R/F1 against the ground truth, sparsity, accuracy on the rationale, where the tokens lie."""
    z = rationales(model.gen, data, p, seed)
    out = token_prf(z, data.rationale, data.mask)
    out["accuracy"] = float((predictions(model, data, z) == data.label).mean())
    out.update({f"sel_{k}": v for k, v in segment_shares(z, data.segment).items()})
    return out


def random_masks_like(z: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Random rationales with the same number of selected tokens per review as ``z`` (n, T), placed
    uniformly among the review's real tokens."""
    keys = np.where(mask > 0, rng.random(mask.shape), np.inf)
    ranks = keys.argsort(axis=1).argsort(axis=1)           # rank of every position among the real tokens
    counts = (z * mask).sum(axis=1, keepdims=True)
    return ((ranks < counts) & (mask > 0)).astype(np.float32)


def attack(p: Params, models: list[Rationalizer], train: Reviews, test: Reviews, seeds: list[int]) -> list[dict[str, float]]:
    """Inspection: train a fresh attacker against each frozen predictor (eval mode) for ``attack_epochs``
    (the attackers in lockstep, each with its own ``seed``), then, on the test reviews, the share where the
    predictor outputs the opposite label on the attacker's rationale (attack success rate) and on random
    masks of the same per-review size; the same for the attacker before any training step (the negative
    control of the attack)."""
    _, embedding = wordpiece_vocabulary(p.embed_dim)
    attackers = []
    for seed in seeds:
        with torch_seeded(seed):
            attackers.append(make_attacker(embedding, p.hidden))
    rngs = [numpy_rng(seed, 1) for seed in seeds]
    opposite = 1 - test.label
    outs: list[dict[str, float]] = [{} for _ in seeds]

    def score(prefix: str) -> None:
        for model, attacker, rng, seed, out in zip(models, attackers, rngs, seeds, outs):
            z = rationales(attacker, test, p, seed + 1)
            out[f"{prefix}asr"] = float((predictions(model, test, z) == opposite).mean())
            out[f"{prefix}flip_random"] = float((predictions(model, test, random_masks_like(z, test.mask, rng)) == opposite).mean())
            out[f"{prefix}sparsity"] = float((z * test.mask).sum() / test.mask.sum())
            if not prefix:
                out.update({f"attack_sel_{k}": v for k, v in segment_shares(z, test.segment).items()})

    score("untrained_")
    for attacker in attackers:
        attacker.train()
    opt = _adam(attackers, p.lr)
    generators = [torch_generator(seed) for seed in seeds]
    noises_adv, noises_pred = [Noise(g, p.dropout) for g in generators], [Noise(None) for _ in seeds]
    X, M, Y = train.torch()
    for model in models:
        model.eval()
    for _ in range(p.attack_epochs):
        orders = [torch.randperm(len(Y), generator=g) for g in generators]
        for start in range(0, len(Y), p.batch_size):
            batches = [(X[idx], M[idx], Y[idx]) for idx in (order[start:start + p.batch_size] for order in orders)]
            attacker_step(models, attackers, opt, batches, p, noises_adv, noises_pred)
    score("")
    return outs


# ---------------------------------------------------------------------------------------------- 5. one seed
METHODS = {  # name -> (shared encoder, instruction, seed stream)
    "rnp": (False, False, 0),
    "a2i_rnp": (False, True, 0),      # same init and stream as rnp: differs by the instruction alone
    "fr": (True, False, 0),
    "a2i_fr": (True, True, 0),
    "rnp_aa": (False, False, 1),      # A/A replicate: RNP again with an independent init and noise stream
}


def run_seed(p: Params, seed: int) -> list[dict]:
    """Every method on one seed's data: one row per method with test rationale P/R/F1 (percent), accuracy,
    sparsity, selection shares and the post-hoc attack results. The methods train side by side
    (:func:`train_rationalizers`), each as it would alone."""
    with torch_single_thread():
        rng = numpy_rng(seed, 0)
        train = make_reviews(p.n_train, rng, p.min_words, p.max_words, p.generic_share)
        test = make_reviews(p.n_test, rng, p.min_words, p.max_words, p.generic_share)
        arms = [Arm(shared, instruct, seed=1000 * seed + 100 * stream + 1) for shared, instruct, stream in METHODS.values()]
        models = [model for model, _ in train_rationalizers(p, train, arms)]
        attacks = attack(p, models, train, test, seeds=[1000 * seed + 500 + 100 * stream for _, _, stream in METHODS.values()])
        rows = []
        for name, model, attacked in zip(METHODS, models, attacks):
            row = {"seed": seed, "method": name, **evaluate(model, test, p, seed=1000 * seed + 900)}
            for k in ("precision", "recall", "f1"):
                row[k] *= 100.0                                  # percent, as the paper's tables
            row.update(attacked)
            rows.append(row)
        return rows
