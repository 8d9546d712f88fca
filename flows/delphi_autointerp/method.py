"""delphi_autointerp: Delphi's automated-interpretability pipeline on a small GPT's TopK SAE; no Prefect.

Read top to bottom:

1. the world: a procedural grammar corpus with semantic word classes, quotes and brackets;
2. the stand-in LLM: a small word-level GPT (tasks.lm) trained on it; its residual stream after block ``layer``;
3. a TopK SAE (written here on top of tasks.sae.SparseAutoencoder, with the AuxK dead-latent loss), and
   random-direction "latents" (thresholded random projections, density-matched) as the negative control;
4. latent records as in delphi: context windows, activating ones split into explanation and test halves, the
   test half split by activation quantile; non-activating test contexts random and hard (MiniLM-nearest);
5. the SCRIPTED EXPLAINER (stand-in for the LLM explainer): finds the token-class / token-set predicate, with an
   optional context clause, that best fits the highlighted tokens, and writes it as a template sentence;
6. the scorers, each reading only the explanation text (parsed back into a predicate by the scripted scorer,
   the stand-in for the LLM scorer): detection, fuzzing, surprisal, embedding (the real all-MiniLM-L6-v2),
   intervention (surprisal-based, on steered generations of the GPT), and the OpenAI simulation baseline.
   Detection and fuzzing answers pass through a noisy scorer that flips each answer with probability ``eps``.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import roc_auc_score

from flows.delphi_autointerp.params import Params
from tasks.embed import minilm_embed
from tasks.lm import GPT, GPTConfig, Tokenizer, cached_lm, make_gpt, residual_hook, sample, train_lm
from tasks.sae import SparseAutoencoder
from tasks.seeding import numpy_rng, torch_generator, torch_seeded
from tasks.train import torch_single_thread

# ----------------------------------------------------------------------------------------------- 1. the world
CLASSES: dict[str, tuple[str, ...]] = {
    "color": ("red", "blue", "green", "yellow", "black", "white", "purple", "orange", "pink", "brown"),
    "animal": ("cat", "dog", "fox", "horse", "bird", "mouse", "rabbit", "wolf", "bear", "lion", "sheep", "duck"),
    "number": ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"),
    "place": ("park", "house", "forest", "river", "city", "garden", "school", "market", "beach", "farm"),
    "verb": ("runs", "sleeps", "jumps", "eats", "sees", "likes", "finds", "chases", "follows", "watches"),
    "food": ("apple", "bread", "cheese", "rice", "soup", "cake", "fish", "honey", "corn", "milk"),
    "person": ("teacher", "farmer", "doctor", "child", "king", "queen", "sailor", "baker"),
    "size": ("big", "small", "old", "young", "tall", "tiny"),
}
FUNCTION_WORDS = ("the", "a", "to", "in", "near", "with", "and", "on", "is", "says", ".", "(", ")", '"')
TEMPLATES = (
    "the color animal verb to the place .",
    "number animal verb near the place .",
    'the person says " the animal verb the food " .',
    "( the size animal ) verb in the place .",
    "the person verb number color food with the animal .",
    "a size person verb the color animal on the place .",
    'the animal says " number person verb " .',
    "( number food and the food ) is in the place .",
)
CLASS_NAMES = tuple(CLASSES)
STREAM_TRAIN, STREAM_EVAL, STREAM_SPLIT, STREAM_RANDOM, STREAM_SHUFFLE, STREAM_PROMPTS, STREAM_FLIP = range(1, 8)


def vocabulary() -> list[str]:
    return [w for words in CLASSES.values() for w in words] + list(FUNCTION_WORDS)


def make_tokenizer() -> Tokenizer:
    return Tokenizer(vocabulary(), level="word")


def generate_sentences(n: int, seed: int, stream: int) -> list[str]:
    """``n`` sentences: a template drawn uniformly, each class slot filled by a uniform word of that class."""
    rng = numpy_rng(seed, stream)
    out = []
    for t in rng.integers(len(TEMPLATES), size=n):
        out.append(" ".join(CLASSES[s][rng.integers(len(CLASSES[s]))] if s in CLASSES else s
                            for s in TEMPLATES[t].split()))
    return out


def corpus_rows(sentences: list[str], tok: Tokenizer, context: int) -> torch.Tensor:
    """The sentences as one token stream chopped into rows bos + (context - 1) tokens: (n_rows, context) int64."""
    stream = [i for s in sentences for i in tok.encode(s)]
    width = context - 1
    n = len(stream) // width
    body = torch.tensor(stream[:n * width], dtype=torch.long).view(n, width)
    return torch.cat([torch.full((n, 1), tok.bos, dtype=torch.long), body], dim=1)


def token_classes(tok: Tokenizer) -> np.ndarray:
    """Class index (into CLASS_NAMES) of every token id, -1 for function/special tokens: (vocab,)."""
    out = np.full(len(tok), -1)
    for c, name in enumerate(CLASS_NAMES):
        for w in CLASSES[name]:
            out[tok.stoi[w]] = c
    return out


def context_flags(rows: np.ndarray, tok: Tokenizer) -> tuple[np.ndarray, np.ndarray]:
    """(inside quotes, inside brackets) per position of ``rows`` (n, L), from the row start (what the GPT sees)."""
    quote, open_, close = tok.stoi['"'], tok.stoi["("], tok.stoi[")"]
    is_quote = rows == quote
    # inside quotes: an odd number of quote marks strictly before the position
    in_quotes = (np.cumsum(is_quote, axis=1) - is_quote) % 2 == 1
    depth = np.cumsum((rows == open_).astype(int) - (rows == close).astype(int), axis=1)
    in_brackets = (depth - (rows == open_)) > 0
    return in_quotes & ~is_quote, in_brackets & (rows != close)


# ------------------------------------------------------------------------------------------ 2. the stand-in LLM
def model_key(p: Params, seed: int) -> dict:
    return {"seed": seed, "n_sentences": p.n_sentences, "context": p.context, "n_layer": p.n_layer,
            "n_head": p.n_head, "d_model": p.d_model, "epochs": p.lm_epochs, "batch": p.lm_batch, "lr": p.lm_lr,
            "templates": TEMPLATES, "vocab": vocabulary()}


def train_gpt(p: Params, rows: torch.Tensor, vocab_size: int, seed: int) -> GPT:
    model = make_gpt(GPTConfig(vocab_size, p.context, p.n_layer, p.n_head, p.d_model), seed)
    train_lm(model, rows, epochs=p.lm_epochs, batch_size=p.lm_batch, lr=p.lm_lr, seed=seed)
    return model


@torch.no_grad()
def residuals(model: GPT, rows: torch.Tensor, layer: int, batch: int = 256) -> torch.Tensor:
    """Residual stream after block ``layer`` at every position: (n, L, d_model)."""
    out: list[torch.Tensor] = []
    with residual_hook(model, layer, lambda h: out.append(h.detach()) or None):
        for start in range(0, len(rows), batch):
            model(rows[start:start + batch])
    return torch.cat(out)


@torch.no_grad()
def next_token_loss(model: GPT, rows: torch.Tensor) -> float:
    logits, _ = model(rows[:, :-1])
    return float(torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), rows[:, 1:].reshape(-1)))


# --------------------------------------------------------------------------------------------- 3. the TopK SAE
class TopKSAE(SparseAutoencoder):
    """Gao et al. (2024) TopK SAE: f = TopK(ReLU((x - b_dec) W_enc + b_enc)); decoder rows unit-norm (as the base)."""

    def __init__(self, d: int, n_latents: int, k: int) -> None:
        super().__init__(d, n_latents)
        self.k = k

    def pre_activations(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu((x - self.decoder_bias) @ self.encoder + self.encoder_bias)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Codes (n, n_latents) with at most k non-zeros per row."""
        pre = self.pre_activations(x)
        top = pre.topk(self.k, dim=1)
        return torch.zeros_like(pre).scatter(1, top.indices, top.values)


def train_topk_sae(x: torch.Tensor, p: Params, seed: int) -> TopKSAE:
    """MSE + aux_coef * AuxK loss (dead latents' top aux_k pre-activations reconstruct the residual error)."""
    with torch_seeded(seed):
        sae = TopKSAE(x.shape[1], p.sae_latents, p.sae_k)
    with torch.no_grad():
        sae.decoder_bias.copy_(x.mean(dim=0))
    optimiser = torch.optim.Adam(sae.parameters(), lr=p.sae_lr)
    generator = torch_generator(seed)
    since_fired = torch.zeros(p.sae_latents)
    for _ in range(p.sae_epochs):
        order = torch.randperm(len(x), generator=generator)
        for start in range(0, len(order), p.sae_batch):
            batch = x[order[start:start + p.sae_batch]]
            pre = sae.pre_activations(batch)
            top = pre.topk(sae.k, dim=1)
            codes = torch.zeros_like(pre).scatter(1, top.indices, top.values)
            recon = codes @ sae.decoder + sae.decoder_bias
            error = batch - recon
            loss = error.pow(2).sum(dim=1).mean()
            fired = (codes > 0).any(dim=0)
            since_fired = torch.where(fired, torch.zeros_like(since_fired), since_fired + len(batch))
            dead = since_fired >= p.dead_tokens
            if p.aux_coef > 0 and int(dead.sum()) > 0:
                k_aux = min(p.aux_k, int(dead.sum()))
                dead_pre = pre.masked_fill(~dead, 0.0)
                aux_top = dead_pre.topk(k_aux, dim=1)
                aux_codes = torch.zeros_like(pre).scatter(1, aux_top.indices, aux_top.values)
                aux_recon = aux_codes @ sae.decoder
                # normalised as in Gao et al.: relative to the error's own scale
                aux = (error.detach() - aux_recon).pow(2).sum(dim=1).mean() / error.detach().pow(2).sum(dim=1).mean()
                loss = loss + p.aux_coef * aux
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            sae.normalise_decoder()
    return sae


@torch.no_grad()
def topk_explained_variance(sae: TopKSAE, x: torch.Tensor) -> float:
    recon, _ = sae(x)
    return float(1 - (x - recon).pow(2).sum() / (x - x.mean(dim=0)).pow(2).sum())


# ---------------------------------------------------------------------------------------- 4. latent records
@dataclass
class Pool:
    """The held-out contexts: W windows of ``window`` tokens, with what every scorer needs per position."""

    tokens: np.ndarray      # (W, w) token ids
    prev: np.ndarray        # (W, w) previous token id (bos at a row start)
    quotes: np.ndarray      # (W, w) bool: inside quotation marks
    brackets: np.ndarray    # (W, w) bool: inside brackets
    texts: list[str]        # W window texts (for MiniLM)


def make_pool(rows: torch.Tensor, tok: Tokenizer, window: int) -> Pool:
    """Rows (n, L) without bos, chopped into windows; context flags computed on the whole row."""
    r = rows.numpy()
    quotes, brackets = context_flags(r, tok)
    prev = np.concatenate([np.full((len(r), 1), tok.bos), r[:, :-1]], axis=1)
    body = slice(1, r.shape[1])   # drop bos
    n_win = (r.shape[1] - 1) // window

    def chop(a: np.ndarray) -> np.ndarray:
        return a[:, body][:, :n_win * window].reshape(len(r) * n_win, window)

    tokens = chop(r)
    return Pool(tokens, chop(prev), chop(quotes), chop(brackets), [tok.decode(t) for t in tokens])


def window_activations(codes: np.ndarray, n_rows: int, context: int, window: int) -> np.ndarray:
    """Per-token codes (n_rows * context, m) → per-window activations (m, W, window), aligned with make_pool."""
    c = codes.reshape(n_rows, context, -1)[:, 1:]
    n_win = (context - 1) // window
    c = c[:, :n_win * window].reshape(n_rows * n_win, window, -1)
    return np.ascontiguousarray(c.transpose(2, 0, 1))


def random_direction_latents(x: np.ndarray, n: int, density: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Control "latents": ReLU((x - mean) r - b) for random unit r, b set so each fires on ``density`` of tokens.

    Returns the codes (N, n) and the directions (n, d) (used for steering, as a decoder row would be).
    """
    rng = numpy_rng(seed, STREAM_RANDOM)
    r = rng.standard_normal((n, x.shape[1]))
    r /= np.linalg.norm(r, axis=1, keepdims=True)
    pre = (x - x.mean(axis=0)) @ r.T
    b = np.quantile(pre, 1 - density, axis=0)
    return np.maximum(pre - b, 0.0), r


@dataclass
class Record:
    """One latent's examples: window indices into the pool."""

    explain_top: np.ndarray      # n_explain highest-activating windows of the explanation half
    explain_quantile: np.ndarray  # n_explain windows stratified over the explanation half's activation quantiles
    test_by_quantile: list[np.ndarray]  # per quantile (lowest first), n_test_per_quantile held-out windows
    nonact: np.ndarray           # random non-activating windows
    hard: np.ndarray             # MiniLM-nearest non-activating windows (hard negatives)


def quantile_bins(values: np.ndarray, q: int) -> list[np.ndarray]:
    """Indices of ``values`` split into q groups of (nearly) equal size by rank, lowest first."""
    return np.array_split(np.argsort(values, kind="stable"), q)


def build_record(acts: np.ndarray, pool_emb: np.ndarray, p: Params, rng: np.random.Generator) -> Record | None:
    """delphi's example construction for one latent's window activations ``acts`` (W, w); None if too rare."""
    peak = acts.max(axis=1)
    active = np.flatnonzero(peak > 0)
    silent = np.flatnonzero(peak <= 0)
    need_test = p.n_quantiles * p.n_test_per_quantile
    if len(active) < 2 * max(p.n_explain, need_test) or len(silent) < 2 * p.n_nonact_test:
        return None
    active = rng.permutation(active)
    half = len(active) // 2
    explain, test = active[:half], active[half:]
    top = explain[np.argsort(-peak[explain], kind="stable")[:p.n_explain]]
    per_q = [rng.choice(b, size=min(len(b), -(-p.n_explain // p.n_quantiles)), replace=False)
             for b in (explain[i] for i in quantile_bins(peak[explain], p.n_quantiles))]
    quantile = np.concatenate(per_q)[:p.n_explain]
    test_q = [rng.choice(test[b], size=p.n_test_per_quantile, replace=False)
              for b in quantile_bins(peak[test], p.n_quantiles)]
    nonact = rng.choice(silent, size=p.n_nonact_test, replace=False)
    # hard negatives: silent windows closest (cosine, MiniLM) to the centroid of the explanation examples
    centroid = pool_emb[explain].mean(axis=0)
    rest = np.setdiff1d(silent, nonact)
    hard = rest[np.argsort(-(pool_emb[rest] @ centroid), kind="stable")[:p.n_nonact_test]]
    return Record(top, quantile, test_q, nonact, hard)


# ------------------------------------------------------------------------ 5. the scripted explainer (LLM stand-in)
@dataclass(frozen=True)
class Predicate:
    """What an explanation says: the token part (a word class, or an explicit token set) and a context clause."""

    kind: str                      # "class" | "tokens"
    words: tuple[str, ...]         # the class name (kind "class") or the tokens
    context: str = "any"           # "any" | "quotes" | "brackets" | "after:<class>"


def predicate_mask(pred: Predicate, pool: Pool, idx: np.ndarray, tok: Tokenizer, classes: np.ndarray) -> np.ndarray:
    """Where ``pred`` holds in the windows ``idx``: (len(idx), w) bool."""
    t = pool.tokens[idx]
    if pred.kind == "class":
        mask = classes[t] == CLASS_NAMES.index(pred.words[0])
    else:
        mask = np.isin(t, [tok.stoi[w] for w in pred.words])
    if pred.context == "quotes":
        mask &= pool.quotes[idx]
    elif pred.context == "brackets":
        mask &= pool.brackets[idx]
    elif pred.context.startswith("after:"):
        mask &= classes[pool.prev[idx]] == CLASS_NAMES.index(pred.context[6:])
    return mask


def _f1(pred: np.ndarray, truth: np.ndarray) -> float:
    tp = float((pred & truth).sum())
    return 0.0 if tp == 0 else 2 * tp / (float(pred.sum()) + float(truth.sum()))


def scripted_explain(acts: np.ndarray, idx: np.ndarray, pool: Pool, tok: Tokenizer, classes: np.ndarray,
                     margin: float) -> Predicate:
    """SCRIPTED EXPLAINER: the predicate with the best token-level F1 against the highlighted (act > 0) tokens of
    the shown windows ``idx``: a word class or the set of highlighted tokens that fire at least half the time,
    plus a context clause only when it raises F1 by more than ``margin`` (an LLM also prefers short answers)."""
    truth = acts[idx] > 0
    t = pool.tokens[idx]
    highlighted, counts = np.unique(t[truth], return_counts=True)
    token_set = [int(w) for w, c in sorted(zip(highlighted, counts), key=lambda wc: (-wc[1], wc[0]))
                 if c >= 0.5 * (t == w).sum()][:6] or [int(highlighted[np.argmax(counts)])]
    candidates = [Predicate("class", (c,)) for c in CLASS_NAMES]
    candidates.append(Predicate("tokens", tuple(sorted(tok.itos[w] for w in token_set))))
    scored = [(_f1(predicate_mask(c, pool, idx, tok, classes), truth), i, c) for i, c in enumerate(candidates)]
    best_f1, _, best = max(scored, key=lambda s: (s[0], -s[1]))
    contexts = ["quotes", "brackets"] + [f"after:{c}" for c in CLASS_NAMES]
    with_ctx = [(_f1(predicate_mask(Predicate(c.kind, c.words, ctx), pool, idx, tok, classes), truth), -i, j,
                 Predicate(c.kind, c.words, ctx)) for i, c in enumerate(candidates) for j, ctx in enumerate(contexts)]
    ctx_f1, _, _, ctx_best = max(with_ctx, key=lambda s: (s[0], s[1], -s[2]))
    return ctx_best if ctx_f1 > best_f1 + margin else best


def render(pred: Predicate) -> str:
    """The explanation text (what the scorers, and MiniLM, read)."""
    if pred.kind == "class":
        head = f"{pred.words[0]} words such as {', '.join(CLASSES[pred.words[0]][:4])}"
    else:
        head = "the tokens [[ " + " | ".join(pred.words) + " ]]"
    if pred.context == "any":
        tail = "in any context"
    elif pred.context == "quotes":
        tail = "inside quotation marks"
    elif pred.context == "brackets":
        tail = "inside brackets"
    else:
        tail = f"right after {pred.context[6:]} words"
    return f"Fires on {head}; {tail}."


_PATTERN = re.compile(r"^Fires on (?:(?P<cls>\w+) words such as [^;]*|the tokens \[\[ (?P<toks>.*?) \]\]); "
                      r"(?P<ctx>in any context|inside quotation marks|inside brackets|right after (?P<prev>\w+) words)\.$")


def parse(text: str) -> Predicate:
    """SCRIPTED SCORER's reading of an explanation (stand-in for an LLM reading it): text → predicate."""
    m = _PATTERN.match(text)
    if m is None:
        raise ValueError(f"unparseable explanation: {text!r}")
    if m["cls"]:
        kind, words = "class", (m["cls"],)
    else:
        kind, words = "tokens", tuple(m["toks"].split(" | "))
    ctx = {"in any context": "any", "inside quotation marks": "quotes", "inside brackets": "brackets"}.get(
        m["ctx"], f"after:{m['prev']}")
    return Predicate(kind, words, ctx)


def explanation_words(pred: Predicate) -> tuple[str, ...]:
    return CLASSES[pred.words[0]] if pred.kind == "class" else pred.words


# ------------------------------------------------------------------------------------------------ 6. scorers
def noisy(answers: np.ndarray, eps: float, rng: np.random.Generator) -> np.ndarray:
    """The noisy scorer: each binary answer flipped with probability eps."""
    return np.where(rng.random(answers.shape) < eps, ~answers, answers)


def detection_answers(text: str, idx: np.ndarray, pool: Pool, tok: Tokenizer, classes: np.ndarray) -> np.ndarray:
    """Detection: 'does this context activate the latent described?' = the parsed predicate holds somewhere."""
    return predicate_mask(parse(text), pool, idx, tok, classes).any(axis=1)


def balanced_accuracy(answers_pos: np.ndarray, answers_neg: np.ndarray) -> float:
    return 0.5 * (float(answers_pos.mean()) + float(1 - answers_neg.mean()))


def fuzzing_answers(text: str, acts: np.ndarray, pos: np.ndarray, neg: np.ndarray, pool: Pool, tok: Tokenizer,
                    classes: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Fuzzing: activating contexts with their active tokens highlighted, non-activating ones with as many random
    tokens highlighted; 'are the highlighted tokens what the explanation describes?' = the predicate holds on at
    least half of the highlighted tokens."""
    pred = predicate_mask(parse(text), pool, np.concatenate([pos, neg]), tok, classes)
    marks_pos = acts[pos] > 0
    n_marks = np.resize(marks_pos.sum(axis=1), len(neg))
    marks_neg = np.zeros((len(neg), acts.shape[1]), dtype=bool)
    for i, n in enumerate(n_marks):
        marks_neg[i, rng.choice(acts.shape[1], size=n, replace=False)] = True
    marks = np.concatenate([marks_pos, marks_neg])
    yes = (pred & marks).sum(axis=1) >= 0.5 * marks.sum(axis=1)
    return yes[:len(pos)], yes[len(pos):]


def surprisal_score(text: str, pos: np.ndarray, neg: np.ndarray, pool: Pool, tok: Tokenizer,
                    unigram: np.ndarray, beta: float) -> float:
    """Surprisal: AUROC of the per-context loss reduction when the scorer LM is conditioned on the explanation.

    The scorer LM is a unigram model; conditioned on an explanation it mixes in a uniform distribution over the
    explanation's words with weight beta (the stand-in for an LLM reading the explanation as a prefix)."""
    words = [tok.stoi[w] for w in explanation_words(parse(text))]
    conditioned = (1 - beta) * unigram
    conditioned[words] += beta / len(words)
    gain = np.log(conditioned) - np.log(unigram)
    idx = np.concatenate([pos, neg])
    reduction = gain[pool.tokens[idx]].mean(axis=1)
    labels = np.r_[np.ones(len(pos)), np.zeros(len(neg))]
    return float(roc_auc_score(labels, reduction))


def embedding_score(text_emb: np.ndarray, pos: np.ndarray, neg: np.ndarray, pool_emb: np.ndarray) -> float:
    """Embedding: AUROC of cosine(explanation, context) under all-MiniLM-L6-v2, activating vs non-activating."""
    sims = pool_emb[np.concatenate([pos, neg])] @ text_emb
    return float(roc_auc_score(np.r_[np.ones(len(pos)), np.zeros(len(neg))], sims))


def simulation_score(text: str, acts: np.ndarray, idx: np.ndarray, pool: Pool, tok: Tokenizer,
                     classes: np.ndarray) -> float:
    """OpenAI-style simulation (the prior state of the art): simulated activation = 1 where the predicate holds;
    Pearson r with the true activations over every token of the contexts ``idx`` (0 if either is constant)."""
    sim = predicate_mask(parse(text), pool, idx, tok, classes).ravel().astype(float)
    true = acts[idx].ravel()
    if sim.std() == 0 or true.std() == 0:
        return 0.0
    return float(pearsonr(sim, true)[0])


# --------------------------------------------------------------------------- intervention (output side)
@torch.no_grad()
def steered_generations(model: GPT, prompts: torch.Tensor, layer: int, direction: torch.Tensor | None,
                        n_new: int, seed: int) -> np.ndarray:
    """Sampled continuations (n, n_new) of ``prompts`` (n, t), with ``direction`` (d,) added to the residual
    stream after block ``layer`` at every position (None: the clean model). Same sampling seed either way."""
    if direction is None:
        out = sample(model, prompts, n_new, temperature=1.0, seed=seed)
    else:
        with residual_hook(model, layer, lambda h: h + direction):
            out = sample(model, prompts, n_new, temperature=1.0, seed=seed)
    return out[:, prompts.shape[1]:].numpy()


def explain_output(clean: np.ndarray, steered: np.ndarray, classes: np.ndarray) -> str:
    """SCRIPTED OUTPUT EXPLAINER: the word class whose share of generated tokens rises most under steering."""
    def share(g: np.ndarray) -> np.ndarray:
        return np.array([(classes[g] == c).mean() for c in range(len(CLASS_NAMES))])

    best = int(np.argmax(share(steered) - share(clean)))
    return f"Promotes {CLASS_NAMES[best]} words such as {', '.join(CLASSES[CLASS_NAMES[best]][:4])}."


def parse_output(text: str) -> str:
    m = re.match(r"^Promotes (\w+) words such as [^.]*\.$", text)
    if m is None or m[1] not in CLASSES:
        raise ValueError(f"unparseable output explanation: {text!r}")
    return m[1]


def intervention_score(text: str, clean: np.ndarray, steered: np.ndarray, tok: Tokenizer, unigram: np.ndarray,
                       beta: float) -> float:
    """Surprisal-based intervention scoring: per prompt, the explanation's loss reduction on the steered
    continuation minus that on the clean one (same scorer LM as surprisal); the score is the fraction of prompts
    where the steered continuation gains more (ties count half). 0.5 = the explanation says nothing."""
    words = [tok.stoi[w] for w in CLASSES[parse_output(text)]]
    conditioned = (1 - beta) * unigram
    conditioned[words] += beta / len(words)
    gain = np.log(conditioned) - np.log(unigram)
    d = gain[steered].sum(axis=1) - gain[clean].sum(axis=1)
    return float((d > 0).mean() + 0.5 * (d == 0).mean())


# ------------------------------------------------------------------------------------------------- one seed
def derangement(n: int, rng: np.random.Generator) -> np.ndarray:
    """A permutation with no fixed point (n >= 2): latent perm[i] gets latent perm[i+1]'s explanation."""
    order = rng.permutation(n)
    out = np.empty(n, dtype=int)
    out[order] = np.roll(order, -1)
    return out


def score_latents(p: Params, seed: int, name: str, acts_all: np.ndarray, records: list[Record], texts: list[str],
                  emb: dict[str, np.ndarray], pool: Pool, pool_emb: np.ndarray, tok: Tokenizer,
                  classes: np.ndarray, unigram: np.ndarray, set_id: int) -> list[dict]:
    """Every scorer on every latent of one set (its explanations ``texts``); detection/fuzzing per flip rate."""
    rows = []
    for j, (acts, rec, text) in enumerate(zip(acts_all, records, texts)):
        pos = np.concatenate(rec.test_by_quantile)
        low, high = rec.test_by_quantile[0], rec.test_by_quantile[-1]
        det_pos = detection_answers(text, pos, pool, tok, classes)
        det_neg = detection_answers(text, rec.nonact, pool, tok, classes)
        det_hard = detection_answers(text, rec.hard, pool, tok, classes)
        det_low, det_high = det_pos[:len(low)], det_pos[-len(high):]
        fz_pos, fz_neg = fuzzing_answers(text, acts, pos, rec.nonact, pool, tok, classes,
                                         numpy_rng(seed, STREAM_FLIP, set_id, j, 999))
        row = {"seed": seed, "set": name, "latent": j, "explanation": text,
               "surprisal": surprisal_score(text, pos, rec.nonact, pool, tok, unigram, p.surprisal_beta),
               "embedding": embedding_score(emb[text], pos, rec.nonact, pool_emb),
               "simulation": simulation_score(text, acts, np.concatenate([pos, rec.nonact]), pool, tok, classes)}
        for e, eps in enumerate(p.flip_rates):
            rng = numpy_rng(seed, STREAM_FLIP, set_id, j, e)
            n = lambda a: noisy(a, eps, rng)  # noqa: E731 - one rng, answers drawn in a fixed order
            dp, dn, dh, fp, fn = n(det_pos), n(det_neg), n(det_hard), n(fz_pos), n(fz_neg)
            row[f"detection@{eps}"] = balanced_accuracy(dp, dn)
            row[f"detection_hard@{eps}"] = balanced_accuracy(dp, dh)
            row[f"detection_low@{eps}"] = balanced_accuracy(dp[:len(low)], dn)
            row[f"detection_high@{eps}"] = balanced_accuracy(dp[-len(high):], dn)
            row[f"fuzzing@{eps}"] = balanced_accuracy(fp, fn)
        del det_low, det_high
        rows.append(row)
    return rows


def run_seed(p: Params, seed: int, data_dir: str) -> dict:
    """One seed: corpus, GPT, SAE, records, explanations, every scorer. Returns per-latent rows and seed facts."""
    with torch_single_thread():
        started = time.process_time()
        tok = make_tokenizer()
        classes = token_classes(tok)
        train_rows = corpus_rows(generate_sentences(p.n_sentences, seed, STREAM_TRAIN), tok, p.context)
        eval_rows = corpus_rows(generate_sentences(p.n_eval_sentences, seed, STREAM_EVAL), tok, p.context)
        model = cached_lm(Path(data_dir) / f"lm_seed{seed}.pt", model_key(p, seed),
                          lambda: train_gpt(p, train_rows, len(tok), seed)).eval()
        lm_s = time.process_time() - started
        # unigram statistics of the training corpus (add-one): the scorer LM's base, and the LM's yardstick
        counts = np.bincount(train_rows[:, 1:].numpy().ravel(), minlength=len(tok)) + 1.0
        unigram = counts / counts.sum()
        eval_targets = eval_rows[:, 1:].numpy().ravel()
        lm_loss = next_token_loss(model, eval_rows)
        unigram_loss = float(-np.log(unigram[eval_targets]).mean())

        d = p.d_model
        x_train = residuals(model, train_rows, p.layer)[:, 1:].reshape(-1, d)   # bos position excluded
        sae = train_topk_sae(x_train, p, seed)
        x_eval_full = residuals(model, eval_rows, p.layer)                       # (n, L, d)
        x_eval = x_eval_full.reshape(-1, d)
        ev = topk_explained_variance(sae, x_eval_full[:, 1:].reshape(-1, d))
        with torch.no_grad():
            codes = sae.encode(x_eval).numpy()
        sae_s = time.process_time() - started - lm_s

        pool = make_pool(eval_rows, tok, p.window)
        pool_emb = minilm_embed(pool.texts)
        acts_sae = window_activations(codes, len(eval_rows), p.context, p.window)  # (m, W, w)

        # choose latents: those with enough activating and silent windows, at random
        rng = numpy_rng(seed, STREAM_SPLIT)
        records_all = {j: build_record(acts_sae[j], pool_emb, p, numpy_rng(seed, STREAM_SPLIT, 1, j))
                       for j in range(p.sae_latents)}
        eligible = [j for j, r in records_all.items() if r is not None]
        chosen = np.sort(rng.choice(eligible, size=min(p.n_latents, len(eligible)), replace=False))
        density = float(np.median([(acts_sae[j] > 0).mean() for j in chosen]))
        # random-direction control latents, density-matched; keep the first n_latents that have records
        rand_codes, rand_dirs = random_direction_latents(x_eval.numpy(), 4 * p.n_latents, density, seed)
        acts_rand_all = window_activations(rand_codes, len(eval_rows), p.context, p.window)
        rand_records, rand_keep = [], []
        for j in range(len(rand_dirs)):
            rec = build_record(acts_rand_all[j], pool_emb, p, numpy_rng(seed, STREAM_RANDOM, 1, j))
            if rec is not None and len(rand_keep) < len(chosen):
                rand_records.append(rec)
                rand_keep.append(j)
        sets = {"sae": (acts_sae[chosen], [records_all[j] for j in chosen]),
                "random": (acts_rand_all[rand_keep], rand_records)}

        # explanations (scripted explainer, top-only and quantile-sampled examples), and the parser's round trip
        expl, round_trip = {}, []
        for name, (acts, recs) in sets.items():
            for variant in ("top", "quantile"):
                preds = [scripted_explain(a, getattr(r, f"explain_{variant}"), pool, tok, classes, p.context_margin)
                         for a, r in zip(acts, recs)]
                expl[name, variant] = [render(q) for q in preds]
                round_trip += [parse(render(q)) == q for q in preds]
        shuffle_rng = numpy_rng(seed, STREAM_SHUFFLE)
        perm_a, perm_b = derangement(len(chosen), shuffle_rng), derangement(len(chosen), shuffle_rng)
        texts = {"sae": expl["sae", "top"], "sae_quantile": expl["sae", "quantile"],
                 "random": expl["random", "top"],
                 "sae_shuffled": [expl["sae", "top"][i] for i in perm_a],
                 "sae_shuffled_b": [expl["sae", "top"][i] for i in perm_b]}
        unique = sorted({t for ts in texts.values() for t in ts})
        emb = dict(zip(unique, minilm_embed(unique)))

        rows = []
        for set_id, (name, ts) in enumerate(texts.items()):
            acts, recs = sets["random" if name == "random" else "sae"]
            rows += score_latents(p, seed, name, acts, recs, ts, emb, pool, pool_emb, tok, classes, unigram, set_id)

        # intervention scoring on the SAE latents (and its shuffled-explanation control)
        prompt_rng = numpy_rng(seed, STREAM_PROMPTS)
        prompt_rows = eval_rows[prompt_rng.choice(len(eval_rows), size=p.n_int_prompts, replace=False)]
        prompts = prompt_rows[:, :p.int_prefix + 1]
        half = p.n_int_prompts // 2
        clean = steered_generations(model, prompts, p.layer, None, p.int_new, seed)
        decoder = sae.decoder.detach()
        out_texts, int_own = [], []
        for j, latent in enumerate(chosen):
            scale = p.steer_scale * float(acts_sae[latent].max())
            steered = steered_generations(model, prompts, p.layer, scale * decoder[latent], p.int_new, seed)
            text = explain_output(clean[:half], steered[:half], classes)
            out_texts.append((text, steered))
            int_own.append(intervention_score(text, clean[half:], steered[half:], tok, unigram, p.surprisal_beta))
        sae_rows = [r for r in rows if r["set"] == "sae"]
        for j, r in enumerate(sae_rows):
            r["output_explanation"] = out_texts[j][0]
            r["intervention"] = int_own[j]
            for key, perm in (("intervention_shuffled", perm_a), ("intervention_shuffled_b", perm_b)):
                r[key] = intervention_score(out_texts[perm[j]][0], clean[half:], out_texts[j][1][half:], tok,
                                            unigram, p.surprisal_beta)
        total_s = time.process_time() - started
    return {"seed": seed, "rows": rows,
            "facts": {"seed": seed, "lm_loss": lm_loss, "unigram_loss": unigram_loss, "explained_variance": ev,
                      "n_eligible": len(eligible), "n_latents": len(chosen), "n_random": len(rand_keep),
                      "density": density, "round_trip": float(np.mean(round_trip)), "n_windows": len(pool.texts),
                      "lm_cpu_s": lm_s, "sae_cpu_s": sae_s, "seed_cpu_s": total_s}}


def spearman_or_zero(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman correlation across latents; 0 when either side is constant (no ranking to agree with)."""
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return 0.0
    return float(spearmanr(a, b)[0])
