"""delphi_autointerp: Delphi's automated-interpretability pipeline on SmolLM2-135M-Instruct; no Prefect.

Read top to bottom:

1. the text: Python's own help pages (``pydoc_data.topics``, shipped with CPython), whitespace collapsed,
   tokenised once and cut into evenly spaced rows;
2. the residual stream of SmolLM2-135M-Instruct after one middle block on those rows (cached once: it does not
   depend on the seed);
3. a TopK SAE (Gao et al. 2024, with the AuxK dead-latent loss) on it, and density-matched random-direction
   "latents" (thresholded random projections of the same stream) as the negative control;
4. latent records as in delphi: context windows; activating ones split into an explanation half (its top windows
   are shown to the explainer) and a test half (one window per activation quantile), plus random non-activating
   windows;
5. the explainer: SmolLM2 itself, by greedy generation, from the top windows with the active tokens marked
   ``<<like this>>`` (delphi's highlighting);
6. the scorers, reading only the explanation text: detection (does the text contain the feature?) and fuzzing
   (are the marked tokens what the explanation describes? activating windows marked where the latent fires,
   non-activating ones with as many random tokens marked), both by SmolLM2's log-probability of "Yes" minus "No"
   and summarised per latent by the AUROC of activating against non-activating windows (delphi's ``log_prob``
   scoring); embedding scoring by the cosine similarity of explanation and window under all-MiniLM-L6-v2.

Helper that would belong in tasks.pretrained: :func:`residual_activations` (the stream after one block, with the
forward stopped there) and :func:`yes_no_margin` (next-token log-odds of two answers, batched).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from sklearn.metrics import roc_auc_score

from flows.delphi_autointerp.params import Params
from paperflows.core.seeding import numpy_rng, torch_generator, torch_seeded
from tasks import pretrained as P
from tasks.embed import minilm_embed
from tasks.sae import SparseAutoencoder
from tasks.train import torch_single_thread

STREAM_SPLIT, STREAM_RANDOM, STREAM_SHUFFLE, STREAM_FUZZ, STREAM_CHOICE = range(1, 6)


# ------------------------------------------------------------------------------------------------ 1. the text
def corpus_text() -> str:
    """Python's help pages (``help('topics')``), in key order, whitespace runs collapsed to one space."""
    from pydoc_data.topics import topics

    return " ".join(" ".join(topics[key].split()) for key in sorted(topics))


def corpus_rows(tokenizer, n_rows: int, context: int) -> torch.Tensor:
    """``n_rows`` rows of ``context`` consecutive tokens, their starts evenly spaced over the corpus: (n, context)."""
    stream = tokenizer(corpus_text(), add_special_tokens=False)["input_ids"]
    starts = np.linspace(0, len(stream) - context, n_rows).astype(int)
    return torch.tensor([stream[s:s + context] for s in starts], dtype=torch.long)


# ----------------------------------------------------------------------------------------- 2. the activations
class _StopForward(Exception):
    """Raised by the read hook: nothing after the interpreted block is needed."""


@torch.no_grad()
def residual_activations(model, rows: torch.Tensor, layer: int, batch: int = 32) -> torch.Tensor:
    """The residual stream after block ``layer`` (``output_hidden_states[layer + 1]``) at every position of the
    unpadded ``rows`` (n, t): (n, t, d_model). The forward stops after that block."""
    out: list[torch.Tensor] = []

    def grab(h: torch.Tensor) -> None:
        out.append(h.detach().clone())
        raise _StopForward

    with torch_single_thread(), P.residual_hook(model, layer, grab):
        for start in range(0, len(rows), batch):
            try:
                model(input_ids=rows[start:start + batch], use_cache=False)
            except _StopForward:
                pass
    return torch.cat(out)


def activations_key(p: Params) -> str:
    """What the cached activations depend on (not the seed)."""
    spec = f"{p.model}|{p.layer}|{p.n_rows}|{p.context}|{hashlib.sha256(corpus_text().encode()).hexdigest()}"
    return hashlib.sha256(spec.encode()).hexdigest()[:16]


def cached_activations(p: Params, data_dir: Path, model=None, tokenizer=None) -> dict:
    """``{"rows": (n, t) token ids, "acts": (n, t, d) float32}``, computed once into ``data_dir`` (a DVC output)."""
    path = Path(data_dir) / f"activations_{activations_key(p)}.pt"
    if path.exists():
        return torch.load(path)
    if model is None:
        model, tokenizer = P.load(p.model)
    rows = corpus_rows(tokenizer, p.n_rows, p.context)
    cache = {"rows": rows, "acts": residual_activations(model, rows, p.layer)}
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".part")
    torch.save(cache, partial)
    partial.replace(path)
    return cache


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
            error = batch - (codes @ sae.decoder + sae.decoder_bias)
            loss = error.pow(2).sum(dim=1).mean()
            fired = (codes > 0).any(dim=0)
            since_fired = torch.where(fired, torch.zeros_like(since_fired), since_fired + len(batch))
            dead = since_fired >= p.dead_tokens
            if p.aux_coef > 0 and int(dead.sum()) > 0:
                aux_top = pre.masked_fill(~dead, 0.0).topk(min(p.aux_k, int(dead.sum())), dim=1)
                aux_recon = torch.zeros_like(pre).scatter(1, aux_top.indices, aux_top.values) @ sae.decoder
                # normalised as in Gao et al.: relative to the error's own scale
                aux = (error.detach() - aux_recon).pow(2).sum(dim=1).mean() / error.detach().pow(2).sum(dim=1).mean()
                loss = loss + p.aux_coef * aux
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            sae.normalise_decoder()
    return sae


@torch.no_grad()
def explained_variance(sae: TopKSAE, x: torch.Tensor) -> float:
    recon, _ = sae(x)
    return float(1 - (x - recon).pow(2).sum() / (x - x.mean(dim=0)).pow(2).sum())


def random_direction_latents(x: np.ndarray, n: int, density: float, seed: int) -> np.ndarray:
    """Control "latents": ReLU((x - mean) r - b) for random unit r, b set so each fires on ``density`` of tokens.
    Returns the codes (N, n)."""
    rng = numpy_rng(seed, STREAM_RANDOM)
    r = rng.standard_normal((n, x.shape[1]))
    r /= np.linalg.norm(r, axis=1, keepdims=True)
    pre = (x - x.mean(axis=0)) @ r.T
    return np.maximum(pre - np.quantile(pre, 1 - density, axis=0), 0.0)


# ---------------------------------------------------------------------------------------- 4. latent records
def window_activations(codes: np.ndarray, n_rows: int, window: int) -> np.ndarray:
    """Per-token codes (n_rows * (context - 1), m) of the rows without their first token → per-window activations
    (m, W, window), windows in row order (aligned with :func:`window_tokens`)."""
    c = codes.reshape(n_rows, -1, codes.shape[1])
    c = c.reshape(n_rows * (c.shape[1] // window), window, -1)
    return np.ascontiguousarray(c.transpose(2, 0, 1))


def window_tokens(tokenizer, rows: torch.Tensor, window: int) -> list[list[str]]:
    """Each window's tokens as text pieces (W windows of ``window`` pieces; a piece keeps its leading space)."""
    body = rows[:, 1:].reshape(-1, window)
    return [[tokenizer.decode([int(i)]) for i in w] for w in body]


@dataclass
class Record:
    """One latent's examples: window indices."""

    explain: np.ndarray   # the n_explain highest-activating windows of the explanation half
    test: np.ndarray      # n_test held-out activating windows, one per activation quantile (lowest first)
    nonact: np.ndarray    # n_nonact random non-activating windows


def build_record(acts: np.ndarray, p: Params, rng: np.random.Generator) -> Record | None:
    """delphi's example construction for one latent's window activations ``acts`` (W, w); None if it fires in too
    few windows (or too many to leave non-activating ones)."""
    peak = acts.max(axis=1)
    active, silent = np.flatnonzero(peak > 0), np.flatnonzero(peak <= 0)
    if len(active) < 2 * max(p.n_explain, p.n_test) or len(silent) < 2 * p.n_nonact:
        return None
    active = rng.permutation(active)
    explain, test = active[:len(active) // 2], active[len(active) // 2:]
    top = explain[np.argsort(-peak[explain], kind="stable")[:p.n_explain]]
    by_rank = np.array_split(test[np.argsort(peak[test], kind="stable")], p.n_test)
    test_q = np.array([rng.choice(b) for b in by_rank])
    return Record(top, test_q, rng.choice(silent, size=p.n_nonact, replace=False))


def mark(pieces: Sequence[str], active: Sequence[bool]) -> str:
    """The window's text with each run of active tokens wrapped in << >> (a leading space stays outside)."""
    out, i = [], 0
    while i < len(pieces):
        if not active[i]:
            out.append(pieces[i])
            i += 1
            continue
        j = i
        while j < len(pieces) and active[j]:
            j += 1
        span = "".join(pieces[i:j])
        lead = len(span) - len(span.lstrip())
        out.append(f"{span[:lead]}<<{span[lead:]}>>")
        i = j
    return "".join(out).strip()


def fuzz_marks(acts: np.ndarray, test: np.ndarray, nonact: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Fuzzing's highlights (len(test) + len(nonact), w): the latent's active tokens on its activating windows;
    on the non-activating ones, as many random tokens as an activating window has (cycled)."""
    right = acts[test] > 0
    counts = np.resize(right.sum(axis=1), len(nonact))
    wrong = np.zeros((len(nonact), acts.shape[1]), dtype=bool)
    for i, n in enumerate(counts):
        wrong[i, rng.choice(acts.shape[1], size=n, replace=False)] = True
    return np.concatenate([right, wrong])


# ------------------------------------------------------------------------------------------ 5. the explainer
EXPLAINER_SYSTEM = "You describe patterns in text briefly."
SCORER_SYSTEM = "Answer Yes or No."


def explainer_prompt(tokenizer, examples: Sequence[str]) -> str:
    """delphi's explainer, shortened for a 135M model: marked examples in, one short phrase out."""
    shown = "\n".join(f"Excerpt {i + 1}: {e}" for i, e in enumerate(examples))
    return P.chat_prompt(tokenizer, (
        "In each excerpt below, the words between << and >> are where a hidden feature is active.\n\n"
        f"{shown}\n\nWhat do the marked words have in common? Answer with one short phrase."),
        system=EXPLAINER_SYSTEM)


def clean_explanation(text: str) -> str:
    """The first non-empty line of the reply, without quotes or a trailing period ('' when there is none)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0].strip("\"' ").rstrip(".") if lines else ""


def explain(model, tokenizer, prompts: Sequence[str], max_tokens: int, batch: int = 16) -> list[str]:
    """Greedy explanations, batched; an empty reply becomes 'nothing in particular' (scored like any other)."""
    out = []
    for start in range(0, len(prompts), batch):
        replies = P.generate(model, tokenizer, list(prompts[start:start + batch]), max_tokens)
        out += [clean_explanation(r) or "nothing in particular" for r in replies]
    return out


# --------------------------------------------------------------------------------------------- 6. the scorers
def detection_prompt(tokenizer, explanation: str, text: str) -> str:
    return P.chat_prompt(tokenizer, (
        f'Feature description: "{explanation}"\nText: "{text}"\n'
        "Is the feature described above present in the text? Answer Yes or No."), system=SCORER_SYSTEM)


def fuzzing_prompt(tokenizer, explanation: str, marked_text: str) -> str:
    return P.chat_prompt(tokenizer, (
        f'Feature description: "{explanation}"\nText: "{marked_text}"\n'
        "Do the words between << and >> match the feature description? Answer Yes or No."), system=SCORER_SYSTEM)


@torch.no_grad()
def yes_no_margin(model, tokenizer, prompts: Sequence[str], batch: int = 16) -> np.ndarray:
    """log p("Yes") - log p("No") for the first token of the reply to each prompt: (len(prompts),).

    Prompts are batched in order of length (less padding); left padding with positions restarted per row, so a
    prompt's score does not depend on its batch."""
    yes, no = (P.token_ids(tokenizer, w, bos=False) for w in ("Yes", "No"))
    if len(yes) != 1 or len(no) != 1:
        raise ValueError("'Yes' and 'No' must each be one token")
    encoded = [P.token_ids(tokenizer, t) for t in prompts]
    order = np.argsort([len(e) for e in encoded], kind="stable")
    margin = np.zeros(len(prompts))
    with torch_single_thread():
        for start in range(0, len(order), batch):
            idx = order[start:start + batch]
            ids, mask = P.pad([encoded[i] for i in idx], tokenizer.pad_token_id, side="left")
            logits = model(input_ids=ids, attention_mask=mask, position_ids=P.positions(mask),
                           logits_to_keep=1).logits[:, -1].float()
            logp = torch.log_softmax(logits, dim=-1)
            margin[idx] = (logp[:, yes[0]] - logp[:, no[0]]).numpy()
    return margin


def auroc(pos: np.ndarray, neg: np.ndarray) -> float:
    """P(score of an activating window > that of a non-activating one), ties half: 0.5 is chance."""
    return float(roc_auc_score(np.r_[np.ones(len(pos)), np.zeros(len(neg))], np.r_[pos, neg]))


# ------------------------------------------------------------------------ capability gate: hand-made cases
# Fixed before any run: a description, a text it clearly fits (with the fitting words marked) and one it clearly
# does not (with as many ordinary words marked). A working scorer rates the first above the second.
HANDMADE: tuple[tuple[str, str, str], ...] = (
    ("numbers and digits", "The meeting starts at <<10>> and ends at <<12>>.",
     "The <<cat>> sat quietly on the <<warm>> mat."),
    ("animals such as dogs, cats and birds", "The <<dog>> chased a <<bird>> across the yard.",
     "The <<invoice>> is due at the end of the <<month>>."),
    ("Python keywords such as def and return", "<<def>> f(x): <<return>> x + 1",
     "She <<walked>> to the market to buy <<bread>>."),
    ("colors such as red, blue and green", "She wore a <<red>> coat and <<blue>> shoes.",
     "The <<train>> leaves the station at <<noon>>."),
    ("question words such as what, why and how", "<<Why>> did he leave, and <<how>> did she know?",
     "The <<river>> flows south past the old <<mill>>."),
    ("names of countries", "They flew from <<France>> to <<Japan>> last year.",
     "Please <<close>> the door when you <<leave>>."),
    ("arithmetic operators such as plus and minus signs", "x = a <<+>> b <<->> c",
     "The <<children>> played in the <<garden>> all day."),
    ("words about weather such as rain and snow", "Heavy <<rain>> and <<snow>> fell all night.",
     "He <<opened>> his laptop and read the <<email>>."),
)


def unmarked(text: str) -> str:
    return text.replace("<<", "").replace(">>", "")


def scorer_gate(model, tokenizer) -> dict[str, float]:
    """Fraction of hand-made cases where each scorer rates the fitting text above the unfitting one."""
    descriptions = [d for d, _, _ in HANDMADE]
    fits, misfits = [f for _, f, _ in HANDMADE], [m for _, _, m in HANDMADE]
    det = yes_no_margin(model, tokenizer, [detection_prompt(tokenizer, d, unmarked(t))
                                           for d, t in zip(descriptions * 2, fits + misfits)])
    fuzz = yes_no_margin(model, tokenizer, [fuzzing_prompt(tokenizer, d, t)
                                            for d, t in zip(descriptions * 2, fits + misfits)])
    emb_d = minilm_embed(descriptions)
    emb_t = minilm_embed([unmarked(t) for t in fits + misfits])
    cos = (emb_t * np.concatenate([emb_d, emb_d])).sum(axis=1)
    n = len(HANDMADE)
    return {f"gate_{name}": float((s[:n] > s[n:]).mean()) for name, s in
            (("detection", det), ("fuzzing", fuzz), ("embedding", cos))}


# ------------------------------------------------------------------------------------------------- one seed
def derangement(n: int, rng: np.random.Generator) -> np.ndarray:
    """A permutation with no fixed point (n >= 2): latent perm[i] gets latent perm[i+1]'s explanation."""
    order = rng.permutation(n)
    out = np.empty(n, dtype=int)
    out[order] = np.roll(order, -1)
    return out


def records_for(acts: np.ndarray, p: Params, seed: int, stream: int) -> dict[int, Record]:
    """The eligible latents of ``acts`` (m, W, w) and their records."""
    out = {}
    for j in range(len(acts)):
        record = build_record(acts[j], p, numpy_rng(seed, STREAM_SPLIT, stream, j))
        if record is not None:
            out[j] = record
    return out


def score_set(model, tokenizer, name: str, explanations: list[str], acts: np.ndarray, records: list[Record],
              pieces: list[list[str]], marks: list[np.ndarray], window_emb: np.ndarray, seed: int) -> list[dict]:
    """Detection, fuzzing and embedding AUROC of every latent of one set under its explanations."""
    det_prompts, fuzz_prompts = [], []
    for expl, rec, mk in zip(explanations, records, marks):
        idx = np.concatenate([rec.test, rec.nonact])
        det_prompts += [detection_prompt(tokenizer, expl, "".join(pieces[w]).strip()) for w in idx]
        fuzz_prompts += [fuzzing_prompt(tokenizer, expl, mark(pieces[w], m)) for w, m in zip(idx, mk)]
    det = yes_no_margin(model, tokenizer, det_prompts)
    fuzz = yes_no_margin(model, tokenizer, fuzz_prompts)
    expl_emb = minilm_embed(explanations)
    rows, at = [], 0
    for j, (expl, rec) in enumerate(zip(explanations, records)):
        n_pos, n = len(rec.test), len(rec.test) + len(rec.nonact)
        cos = window_emb[np.concatenate([rec.test, rec.nonact])] @ expl_emb[j]
        rows.append({"seed": seed, "set": name, "latent": j, "explanation": expl,
                     "detection": auroc(det[at:at + n_pos], det[at + n_pos:at + n]),
                     "fuzzing": auroc(fuzz[at:at + n_pos], fuzz[at + n_pos:at + n]),
                     "embedding": auroc(cos[:n_pos], cos[n_pos:]),
                     "density": float((acts[j] > 0).mean())})
        at += n
    return rows


def run_seed(p: Params, seed: int, data_dir: str) -> dict:
    """One seed: SAE, latents and random directions, explanations, every scorer. Per-latent rows and seed facts."""
    started = time.process_time()
    cache = cached_activations(p, Path(data_dir))
    rows_tok, acts = cache["rows"], cache["acts"][:, 1:]          # the first position is the attention sink
    n_rows, d = len(rows_tok), acts.shape[-1]
    held_out = torch.arange(n_rows) % p.holdout_every == 0
    # one scale for the whole stream (the SAE trains at unit mean norm); explained variance is scale-free
    scale = float(acts[~held_out].reshape(-1, d).norm(dim=1).mean())
    x = acts.reshape(-1, d) / scale
    with torch_single_thread():
        sae = train_topk_sae(acts[~held_out].reshape(-1, d) / scale, p, seed)
        ev = explained_variance(sae, acts[held_out].reshape(-1, d) / scale)
        with torch.no_grad():
            codes = sae.encode(x).numpy()
    sae_s = time.process_time() - started
    acts_sae = window_activations(codes, n_rows, p.window)               # (m, W, w)
    del codes

    sae_records = records_for(acts_sae, p, seed, 0)
    rng = numpy_rng(seed, STREAM_CHOICE)
    chosen = np.sort(rng.choice(sorted(sae_records), size=min(p.n_latents, len(sae_records)), replace=False))
    density = float(np.median([(acts_sae[j] > 0).mean() for j in chosen]))
    # random-direction control latents, density-matched; keep the first as many as there are SAE latents
    acts_rand = window_activations(random_direction_latents(x.numpy(), 4 * p.n_latents, density, seed), n_rows,
                                   p.window)
    rand_records = records_for(acts_rand, p, seed, 1)
    rand_keep = sorted(rand_records)[:len(chosen)]
    sets = {"sae": (acts_sae[chosen], [sae_records[j] for j in chosen]),
            "random": (acts_rand[rand_keep], [rand_records[j] for j in rand_keep])}

    model, tokenizer = P.load(p.model)   # a fresh model per seed: seeds run in threads
    pieces = window_tokens(tokenizer, rows_tok, p.window)
    explanations = {}
    for name, (a, recs) in sets.items():
        prompts = [explainer_prompt(tokenizer, [mark(pieces[w], a[j, w] > 0) for w in rec.explain])
                   for j, rec in enumerate(recs)]
        explanations[name] = explain(model, tokenizer, prompts, p.explain_tokens)
    shuffle_rng = numpy_rng(seed, STREAM_SHUFFLE)
    perm_a, perm_b = derangement(len(chosen), shuffle_rng), derangement(len(chosen), shuffle_rng)
    texts = {"sae": explanations["sae"], "random": explanations["random"],
             "sae_shuffled": [explanations["sae"][i] for i in perm_a],
             "sae_shuffled_b": [explanations["sae"][i] for i in perm_b]}
    marks = {name: [fuzz_marks(a[j], rec.test, rec.nonact, numpy_rng(seed, STREAM_FUZZ, k, j))
                    for j, rec in enumerate(recs)] for k, (name, (a, recs)) in enumerate(sets.items())}
    used = sorted({int(w) for _, recs in sets.values() for r in recs for w in np.r_[r.test, r.nonact]})
    emb = np.zeros((len(pieces), 384), dtype=np.float32)
    emb[used] = minilm_embed(["".join(pieces[w]).strip() for w in used])

    rows = []
    for name, explanation_texts in texts.items():
        base = "random" if name == "random" else "sae"
        a, recs = sets[base]
        rows += score_set(model, tokenizer, name, explanation_texts, a, recs, pieces, marks[base], emb, seed)
    return {"rows": rows,
            "facts": {"seed": seed, "explained_variance": ev, "n_eligible": len(sae_records),
                      "n_latents": len(chosen), "n_random": len(rand_keep), "density": density,
                      "n_windows": len(pieces), "dead_fraction": float((acts_sae.max(axis=(1, 2)) <= 0).mean()),
                      "sae_cpu_s": sae_s, "seed_cpu_s": time.process_time() - started}}
