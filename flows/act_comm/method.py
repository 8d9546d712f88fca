"""Activation communication (AC) between two real language models: SmolLM2-135M-Instruct (agent A) and
Gemma-3-270M (agent B).

The paper (Ramesh & Li, "Communicating Activations Between Language Model Agents", ICML 2025) has no
official code; the protocol below is written from its description:

* agent A reads its prompt; its **last-token** residual stream after block ``k`` is sent. A runs blocks 0..k
  only and never decodes;
* the two models differ in width (576 vs 640), so A's vector goes through a linear map W, the only learned part,
  fitted once by least squares on paired activations of the same generic text (task-agnostic);
* agent B reads its own prompt and is paused after block ``j``; its last-token residual ``h_B`` becomes
  ``f(W h_A, h_B)`` with f in {replace: W h_A, sum: W h_A + h_B, mean: (W h_A + h_B) / 2}; B's forward pass
  then continues to its answer;
* natural-language (NL) communication: A decodes a message that B reads before its question. Compute is
  counted in FLOPs for each protocol.

The game (the paper's Countries game with cities in place of landmarks): A is told "<name> is in <city>.", B is
asked "Which country is <name> in?"; B's answer is the most likely of the 25 countries' first tokens after
"Answer:" (multiple choice by continuation log-probability). B alone can only guess.

Shapes: ``n`` episodes or text positions, ``dA`` = 576 (A's width), ``dB`` = 640 (B's width).
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from flows.act_comm.params import Combine, Params
from paperflows.core.seeding import numpy_rng
from tasks import pretrained as P
from tasks.train import torch_single_thread

MODEL_A, MODEL_B = "smollm2-135m-instruct", "gemma3-270m"
STREAM_VAL, STREAM_TEST, STREAM_SPLIT, STREAM_SHUFFLE, STREAM_DERANGE = 1, 2, 3, 4, 5

# Two well-known cities per country, written down before any run; no pair was dropped after seeing a score.
CITIES = {
    "France": ("Paris", "Lyon"), "Japan": ("Tokyo", "Osaka"), "Germany": ("Berlin", "Munich"),
    "Italy": ("Rome", "Milan"), "Spain": ("Madrid", "Barcelona"), "Russia": ("Moscow", "Saint Petersburg"),
    "Egypt": ("Cairo", "Alexandria"), "China": ("Beijing", "Shanghai"), "India": ("Mumbai", "Delhi"),
    "Canada": ("Toronto", "Vancouver"), "Australia": ("Sydney", "Melbourne"), "Portugal": ("Lisbon", "Porto"),
    "Greece": ("Athens", "Thessaloniki"), "Turkey": ("Istanbul", "Ankara"), "Thailand": ("Bangkok", "Chiang Mai"),
    "Kenya": ("Nairobi", "Mombasa"), "Peru": ("Lima", "Cusco"), "Netherlands": ("Amsterdam", "Rotterdam"),
    "Sweden": ("Stockholm", "Gothenburg"), "Austria": ("Vienna", "Salzburg"), "Poland": ("Warsaw", "Krakow"),
    "Norway": ("Oslo", "Bergen"), "Mexico": ("Guadalajara", "Cancun"), "Brazil": ("Rio de Janeiro", "Sao Paulo"),
    "Argentina": ("Buenos Aires", "Mendoza"),
}
COUNTRIES = list(CITIES)
NAMES = ("Alice Bob Carol David Emma Frank Grace Henry Irene Jack Karen Leo Maria Nathan Olivia Peter Rachel Sam "
         "Tina Victor Wendy Adam Bella Chris Diana Ethan Fiona George Hannah Ian Julia Kevin Laura Mike Nina Oscar "
         "Paula Ryan Sarah Tom").split()
A_SYSTEM = "You are agent A. Tell agent B what you were told, in one short sentence."


# ----------------------------------------------------------------------------------------------- the game
@dataclass(frozen=True)
class Episode:
    name: str
    city: str
    country: str


def draw_episodes(n: int, seed: int, stream: int) -> list[Episode]:
    """``n`` games: a random name placed in a random city (uniform over the 50 cities)."""
    rng = numpy_rng(seed, stream)
    cities = [(city, country) for country, pair in CITIES.items() for city in pair]
    picks = rng.integers(0, len(cities), n)
    names = rng.integers(0, len(NAMES), n)
    return [Episode(NAMES[q], *cities[c]) for q, c in zip(names, picks)]


def a_prompt(tok_a, e: Episode) -> str:
    """A's prompt (SmolLM2's chat template), the same for AC and NL: the fact it is told."""
    return P.chat_prompt(tok_a, f"{e.name} is in {e.city}.", system=A_SYSTEM)


def b_prompt(e: Episode, context: str | None = None) -> str:
    """B's prompt (raw text: Gemma-3-270M is a base model); ``context``: a line from agent A before the question."""
    question = f"Question: Which country is {e.name} in?\nAnswer:"
    return question if context is None else f"Agent A says: {context}\n{question}"


def fact(e: Episode) -> str:
    """The fact in plain text: full information, the capability gate's context."""
    return f"{e.name} is in {e.city}."


def country_token_ids(tok_b) -> torch.Tensor:
    """The first token of ' <country>' for each country (K,); they must differ, so one next-token distribution
    scores every option."""
    ids = [tok_b(f" {c}", add_special_tokens=False)["input_ids"][0] for c in COUNTRIES]
    if len(set(ids)) != len(ids):
        raise ValueError("two countries share a first token: the multiple-choice read-out would be ambiguous")
    return torch.tensor(ids)


# ------------------------------------------------------------------------------------- generic shared text
SUBJECTS = ("The old farmer", "A young teacher", "My neighbour", "The small dog", "Our manager", "The quiet student",
            "A tired nurse", "The baker", "His sister", "The pilot", "Every child", "The new doctor")
VERBS = ("carried", "painted", "repaired", "found", "sold", "cleaned", "borrowed", "described", "forgot", "opened",
         "measured", "dropped")
OBJECTS = ("a wooden chair", "the broken clock", "three green apples", "an old letter", "the red bicycle",
           "a heavy box", "the kitchen window", "a paper map", "the blue jacket", "a loaf of bread", "two tickets",
           "the heavy door")
TAILS = ("before lunch.", "after the storm.", "on Monday morning.", "near the station.", "without a word.",
         "for the first time.", "in the garden.", "at the end of the day.", "with great care.", "while it rained.")


def shared_texts(n: int, tok_a) -> list[str]:
    """``n`` generic paragraphs (five template sentences each, fixed draw), every other one wrapped as a chat turn
    in SmolLM2's template so that the map also sees the positions of A's prompt format. No city, country or
    question of the game appears: the map is task-agnostic."""
    rng = numpy_rng(0, 0)
    texts = []
    for i in range(n):
        sentences = [f"{SUBJECTS[rng.integers(12)]} {VERBS[rng.integers(12)]} {OBJECTS[rng.integers(12)]} "
                     f"{TAILS[rng.integers(10)]}" for _ in range(5)]
        paragraph = " ".join(sentences)
        if i % 2:
            paragraph = P.chat_prompt(tok_a, paragraph, system=sentences[0]) + sentences[1]
        texts.append(paragraph)
    return texts


def token_ends(tok, text: str) -> tuple[list[int], list[int]]:
    """The ids of ``text`` (BOS first where the model uses one) and the character offset each token ends at
    (BOS: -1)."""
    enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
    ids, ends = list(enc["input_ids"]), [end for _, end in enc["offset_mapping"]]
    if P.token_ids(tok, text)[:1] != ids[:1]:   # the tokenizer leads with BOS
        ids, ends = [P.token_ids(tok, text)[0], *ids], [-1, *ends]
    return ids, ends


def aligned_positions(tok_a, tok_b, text: str) -> tuple[list[int], list[int], list[int], list[int]]:
    """A's and B's ids of ``text`` and the token positions (pos_a, pos_b) where both tokenizers end a token at the
    same character (past the first 8 characters): both models have read exactly the same prefix there, so their
    residual streams at those positions form the paired activations of the map."""
    ids_a, ends_a = token_ends(tok_a, text)
    ids_b, ends_b = token_ends(tok_b, text)
    where_b = {end: i for i, end in enumerate(ends_b)}
    pairs = [(i, where_b[end]) for i, end in enumerate(ends_a) if end > 8 and end in where_b]
    return ids_a, ids_b, [i for i, _ in pairs], [j for _, j in pairs]


class _Stop(Exception):
    """Raised by a reading hook after the deepest block needed: the blocks after it are never run."""


@torch.no_grad()
def read_states(model, ids: torch.Tensor, mask: torch.Tensor, layers: list[int]) -> dict[int, torch.Tensor]:
    """Residual stream after each block in ``layers``: {layer: (b, t, d)}; blocks after max(layers) are not run."""
    stored: dict[int, torch.Tensor] = {}
    deepest = max(layers)

    def reader(layer: int):
        def fn(h: torch.Tensor) -> None:
            stored[layer] = h.detach()
            if layer == deepest:
                raise _Stop
        return fn

    with ExitStack() as stack:
        for layer in layers:
            stack.enter_context(P.residual_hook(model, layer, reader(layer)))
        try:
            model(input_ids=ids, attention_mask=mask, position_ids=positions(mask), use_cache=False)
        except _Stop:
            pass
    return stored


def positions(mask: torch.Tensor) -> torch.Tensor:
    """Rotary positions that start at 0 at each row's first real token (left padding): (b, t)."""
    return (mask.cumsum(dim=1) - 1).clamp(min=0)


def block_at(depth: float, n_blocks: int) -> int:
    """The 0-based block at relative ``depth`` (the paper's k = j = 26 of LLaMA's 32 layers is depth 0.81)."""
    return max(0, round(depth * n_blocks) - 1)


def shared_activations(p: Params, data_dir: Path) -> Path:
    """Paired activations of both models on the shared text at every depth of ``p.depths``, cached in
    ``data_dir`` (seed-independent): {"a": {k: (n, dA)}, "b": {j: (n, dB)}, "text": (n,) paragraph index}."""
    path = Path(data_dir) / "shared_activations.pt"
    key = {"n_shared_texts": p.n_shared_texts, "depths": list(p.depths), "models": [MODEL_A, MODEL_B], "format": 1}
    if path.exists() and torch.load(path)["key"] == key:
        return path
    (model_a, tok_a), (model_b, tok_b) = P.load(MODEL_A), P.load(MODEL_B)
    layers_a = sorted({block_at(d, len(P.decoder_layers(model_a))) for d in p.depths})
    layers_b = sorted({block_at(d, len(P.decoder_layers(model_b))) for d in p.depths})
    a = {k: [] for k in layers_a}
    b = {j: [] for j in layers_b}
    text_index = []
    with torch_single_thread():
        for t, text in enumerate(shared_texts(p.n_shared_texts, tok_a)):
            ids_a, ids_b, pos_a, pos_b = aligned_positions(tok_a, tok_b, text)
            states_a = read_states(model_a, torch.tensor([ids_a]), torch.ones(1, len(ids_a), dtype=torch.long), layers_a)
            states_b = read_states(model_b, torch.tensor([ids_b]), torch.ones(1, len(ids_b), dtype=torch.long), layers_b)
            for k in layers_a:
                a[k].append(states_a[k][0, pos_a])
            for j in layers_b:
                b[j].append(states_b[j][0, pos_b])
            text_index += [t] * len(pos_a)
    Path(data_dir).mkdir(parents=True, exist_ok=True)
    torch.save({"key": key, "a": {k: torch.cat(v) for k, v in a.items()}, "b": {j: torch.cat(v) for j, v in b.items()},
                "text": torch.tensor(text_index)}, path)
    return path


# ------------------------------------------------------------------------------------------------- the map
@dataclass(frozen=True)
class LinearMap:
    """h_A (n, dA) -> h_A @ weight + bias (n, dB)."""

    weight: torch.Tensor   # (dA, dB)
    bias: torch.Tensor     # (dB,)

    def __call__(self, h: torch.Tensor) -> torch.Tensor:
        return h @ self.weight + self.bias


def fit_map(x: torch.Tensor, y: torch.Tensor, ridge: float) -> LinearMap:
    """Least squares y ~ x W + b on paired activations x (n, dA), y (n, dB), in float64: centred normal equations
    with a ridge ``ridge * n * mean feature variance`` on W (conditioning; b is not penalised)."""
    x, y = x.double(), y.double()
    mx, my = x.mean(0), y.mean(0)
    xc, yc = x - mx, y - my
    gram = xc.T @ xc
    penalty = ridge * gram.diagonal().mean()
    weight = torch.linalg.solve(gram + penalty * torch.eye(len(gram), dtype=gram.dtype), xc.T @ yc)
    return LinearMap(weight.float(), (my - mx @ weight).float())


def r_squared(m: LinearMap, x: torch.Tensor, y: torch.Tensor) -> float:
    """1 - residual / total sum of squares of ``y`` (n, dB) around its own mean, over all dimensions."""
    residual = ((m(x) - y) ** 2).sum()
    return float(1 - residual / ((y - y.mean(0)) ** 2).sum())


# --------------------------------------------------------------------------------------- grafting and scoring
def combine(f: Combine, h_a: torch.Tensor, h_b: torch.Tensor) -> torch.Tensor:
    """The paper's functional forms, (n, dB) x (n, dB) -> (n, dB); ``h_a`` is A's activation already mapped."""
    if f == "replace":
        return h_a
    if f == "sum":
        return h_a + h_b
    if f == "mean":
        return (h_a + h_b) / 2
    raise ValueError(f"unknown combination {f!r}")


@torch.no_grad()
def answer_logprobs(model_b, tok_b, prompts: list[str], option_ids: torch.Tensor, batch_size: int,
                    graft: tuple[int, Combine, torch.Tensor] | None = None) -> torch.Tensor:
    """log p(first token of each option | prompt) under B: (n, K).

    ``graft = (j, f, sent)``: after block j, B's last-token residual h_B becomes f(sent, h_B) (sent (n, dB)).
    Prompts are left-padded, so every row's last token is the final column.
    """
    out = []
    for start in range(0, len(prompts), batch_size):
        ids, mask = P.encode(tok_b, prompts[start:start + batch_size])
        with ExitStack() as stack:
            if graft is not None:
                j, f, sent = graft
                rows = sent[start:start + batch_size]

                def write(h: torch.Tensor, rows=rows, f=f) -> torch.Tensor:
                    h = h.clone()
                    h[:, -1] = combine(f, rows, h[:, -1])
                    return h

                stack.enter_context(P.residual_hook(model_b, j, write))
            logits = model_b(input_ids=ids, attention_mask=mask, position_ids=positions(mask), use_cache=False,
                             logits_to_keep=1).logits[:, -1].float()
        out.append(torch.log_softmax(logits, dim=-1)[:, option_ids])
    return torch.cat(out)


def accuracy(logprobs: torch.Tensor, episodes: list[Episode]) -> float:
    truth = torch.tensor([COUNTRIES.index(e.country) for e in episodes])
    return float((logprobs.argmax(dim=1) == truth).float().mean())


@torch.no_grad()
def last_token_states(model_a, tok_a, prompts: list[str], layers: list[int], batch_size: int) -> dict[int, torch.Tensor]:
    """The last-token residual after each block in ``layers``: {k: (n, d)}; the model stops after max(layers)."""
    out = {k: [] for k in layers}
    for start in range(0, len(prompts), batch_size):
        ids, mask = P.encode(tok_a, prompts[start:start + batch_size])
        for k, h in read_states(model_a, ids, mask, layers).items():
            out[k].append(h[:, -1])
    return {k: torch.cat(v) for k, v in out.items()}


def nl_messages(model_a, tok_a, prompts: list[str], max_new: int, batch_size: int) -> tuple[list[str], list[int]]:
    """A's greedy message after each prompt (text) and the number of tokens A decoded (eos included)."""
    eos = set(P.eos_ids(model_a, tok_a))
    messages, decoded = [], []
    for start in range(0, len(prompts), batch_size):
        ids, mask = P.encode(tok_a, prompts[start:start + batch_size])
        new = P.generate_ids(model_a, ids, mask, max_new, eos_id=sorted(eos), pad_id=tok_a.pad_token_id)
        for row in new.tolist():
            ended = [i for i, t in enumerate(row) if t in eos]
            length = ended[0] + 1 if ended else len(row)
            messages.append(" ".join(tok_a.decode(row[:length], skip_special_tokens=True).split()))
            decoded.append(length)
    return messages, decoded


# ------------------------------------------------------------------------------------------------- FLOPs
@dataclass(frozen=True)
class Shape:
    """What the FLOP count of a decoder needs: blocks, width, weights per block, attention width, vocabulary."""

    n_blocks: int
    d_model: int
    block_weights: int   # entries of the block's weight matrices (norm gains are vectors, not counted)
    attn_width: int      # query heads x head dim: the width of q k^T and of the weighted sum over values
    vocab: int


def shape_of(model) -> Shape:
    blocks = P.decoder_layers(model)
    weights = {sum(w.numel() for w in block.parameters() if w.dim() == 2) for block in blocks}
    if len(weights) != 1:
        raise ValueError("blocks of different sizes: the per-block count would be wrong")
    c = model.config
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    return Shape(len(blocks), c.hidden_size, weights.pop(), c.num_attention_heads * head_dim, c.vocab_size)


def dense_flops(s: Shape, n_new: int, n_blocks: int, logit_positions: int) -> int:
    """Weights x activations, 2 FLOPs per multiply-add: every block matrix per new token, and the unembedding
    (2 d V) at each position whose logits are computed."""
    return n_blocks * n_new * 2 * s.block_weights + logit_positions * 2 * s.d_model * s.vocab


def attention_flops(s: Shape, n_new: int, n_past: int) -> int:
    """One block's scores q k^T and weighted sum over values: 2 x 2 x attn_width per (query, key) pair; the
    causal kernel computes every pair of the (n_new, n_past + n_new) block."""
    return 4 * s.attn_width * n_new * (n_past + n_new)


def forward_flops(s: Shape, n_new: int, n_past: int = 0, n_blocks: int | None = None, logit_positions: int = 1) -> int:
    """Matmul FLOPs of one forward of ``n_new`` tokens after ``n_past`` cached ones through ``n_blocks`` blocks
    (default all), logits at ``logit_positions`` positions (default 1: the next token). Norms, activations,
    rotary embeddings and softmax are not counted (the usual convention)."""
    n_blocks = s.n_blocks if n_blocks is None else n_blocks
    return dense_flops(s, n_new, n_blocks, logit_positions) + n_blocks * attention_flops(s, n_new, n_past)


def nl_flops(sa: Shape, sb: Shape, t_a: int, decoded: int, t_b: int) -> int:
    """NL: A reads its prompt and decodes ``decoded`` tokens with a key/value cache (the last one need not be fed
    back), then B reads message + question."""
    a = forward_flops(sa, t_a) + sum(forward_flops(sa, 1, t_a + i) for i in range(decoded - 1))
    return a + forward_flops(sb, t_b)


def ac_flops(sa: Shape, sb: Shape, t_a: int, t_b: int, k: int) -> int:
    """AC: A runs blocks 0..k on its prompt (no logits), W maps the vector (2 dA dB + dB), f costs dB at most,
    B reads its question."""
    return (forward_flops(sa, t_a, n_blocks=k + 1, logit_positions=0) + 2 * sa.d_model * sb.d_model
            + 2 * sb.d_model + forward_flops(sb, t_b))


def counter_rel_error(model, tok, text: str) -> float:
    """|dense_flops - torch's FlopCounterMode count| / count on one full forward of ``text`` (logits everywhere).
    On CPU the attention kernel is not counted by torch, so only the dense part is compared."""
    from torch.utils.flop_counter import FlopCounterMode

    ids = torch.tensor([P.token_ids(tok, text)])
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(input_ids=ids, use_cache=False)
    counted = counter.get_total_flops()
    s = shape_of(model)
    return abs(dense_flops(s, ids.shape[1], s.n_blocks, ids.shape[1]) - counted) / counted


# ------------------------------------------------------------------------------------------------ one seed
def derangement(n: int, seed: int) -> np.ndarray:
    """A random permutation (n,) with no fixed point: episode i gets the A activation of episode other[i] != i.
    Follow a random cycle through all n episodes: each one points to its neighbour in the cycle."""
    order = numpy_rng(seed, STREAM_DERANGE).permutation(n)
    other = np.empty_like(order)
    other[order] = np.roll(order, 1)
    return other


def fit_maps(p: Params, seed: int, shared: dict, pairs: list[tuple[int, int]]) -> dict:
    """Per (k, j): the map W fitted on this seed's share of the shared-text paragraphs, its held-out R^2, and the
    shuffled-pair control map (B's side permuted across positions before the fit)."""
    texts = shared["text"]
    n_texts = int(texts.max()) + 1
    train_texts = numpy_rng(seed, STREAM_SPLIT).permutation(n_texts)[:max(1, round(p.map_train_frac * n_texts))]
    train = torch.isin(texts, torch.tensor(train_texts))
    shuffle = torch.from_numpy(numpy_rng(seed, STREAM_SHUFFLE).permutation(int(train.sum())))
    out = {}
    for k, j in pairs:
        x, y = shared["a"][k], shared["b"][j]
        w = fit_map(x[train], y[train], p.ridge)
        out[(k, j)] = {"map": w, "r2_heldout": r_squared(w, x[~train], y[~train]),
                       "r2_train": r_squared(w, x[train], y[train]),
                       "shuffled": fit_map(x[train], y[train][shuffle], p.ridge)}
    return out


def run_seed(p: Params, seed: int, shared_path: str) -> dict:
    """One seed: maps fitted, (depth, f) chosen on validation episodes, every protocol on test episodes."""
    with torch_single_thread():
        (model_a, tok_a), (model_b, tok_b) = P.load(MODEL_A), P.load(MODEL_B)
        sa, sb = shape_of(model_a), shape_of(model_b)
        options = country_token_ids(tok_b)
        pairs = [(block_at(d, sa.n_blocks), block_at(d, sb.n_blocks)) for d in p.depths]
        maps = fit_maps(p, seed, torch.load(shared_path), pairs)
        layers_a = sorted({k for k, _ in pairs})
        score = lambda prompts, graft=None: answer_logprobs(model_b, tok_b, prompts, options, p.batch_size, graft)

        val = draw_episodes(p.n_val, seed, STREAM_VAL)
        h_val = last_token_states(model_a, tok_a, [a_prompt(tok_a, e) for e in val], layers_a, p.batch_size)
        b_val = [b_prompt(e) for e in val]
        grid = {(d, f): accuracy(score(b_val, (j, f, maps[(k, j)]["map"](h_val[k]))), val)
                for d, (k, j) in zip(p.depths, pairs) for f in p.combines}
        best_depth = {f: max(p.depths, key=lambda d: grid[(d, f)]) for f in p.combines}   # first best on ties
        best_f = max(p.combines, key=lambda f: grid[(best_depth[f], f)])

        test = draw_episodes(p.n_test, seed, STREAM_TEST)
        a_texts = [a_prompt(tok_a, e) for e in test]
        h_test = last_token_states(model_a, tok_a, a_texts, layers_a, p.batch_size)
        messages, decoded = nl_messages(model_a, tok_a, a_texts, p.message_max_tokens, p.batch_size)
        b_alone, full = [b_prompt(e) for e in test], [b_prompt(e, fact(e)) for e in test]
        nl = [b_prompt(e, m) for e, m in zip(test, messages)]
        acc = {"b_alone": accuracy(score(b_alone), test), "full_info": accuracy(score(full), test),
               "nl": accuracy(score(nl), test)}
        for f in p.combines:
            k, j = pairs[p.depths.index(best_depth[f])]
            acc[f"ac_{f}"] = accuracy(score(b_alone, (j, f, maps[(k, j)]["map"](h_test[k]))), test)
        k, j = pairs[p.depths.index(best_depth[best_f])]
        acc["ac"] = acc[f"ac_{best_f}"]
        acc["shuffled_map"] = accuracy(score(b_alone, (j, best_f, maps[(k, j)]["shuffled"](h_test[k]))), test)
        other = torch.from_numpy(derangement(len(test), seed))
        acc["mismatched"] = accuracy(score(b_alone, (j, best_f, maps[(k, j)]["map"](h_test[k][other]))), test)
        # diagnostic, no map and no A: B's own last-token state after block j when it reads the fact, grafted into
        # B alone; tells whether one last-token state can carry the fact into B's answer at all
        b_own = last_token_states(model_b, tok_b, full, [j], p.batch_size)[j]
        acc["self_graft"] = accuracy(score(b_alone, (j, best_f, b_own)), test)

        t_a = [len(P.token_ids(tok_a, t)) for t in a_texts]
        t_b = lambda prompts: [len(P.token_ids(tok_b, t)) for t in prompts]
        flops = {"ac": np.mean([ac_flops(sa, sb, ta, tb, k) for ta, tb in zip(t_a, t_b(b_alone))]),
                 "nl": np.mean([nl_flops(sa, sb, ta, g, tb) for ta, g, tb in zip(t_a, decoded, t_b(nl))]),
                 "b_alone": np.mean([forward_flops(sb, tb) for tb in t_b(b_alone)]),
                 "full_info": np.mean([forward_flops(sb, tb) for tb in t_b(full)])}
        named = np.mean([e.country in m for e, m in zip(test, messages)])
        cited = np.mean([e.city in m for e, m in zip(test, messages)])
        sanity = {"hook_identity_error": hook_identity_error(model_b, tok_b, b_alone[:4], j),
                  "flops_counter_rel_error": max(counter_rel_error(model_a, tok_a, a_texts[0]),
                                                 counter_rel_error(model_b, tok_b, full[0]))}
    return {"seed": seed, "accuracy": acc, "flops": flops, "grid": grid, "best_depth": best_depth[best_f],
            "best_f": best_f, "k": k, "j": j, "maps": {d: {key: maps[pair][key] for key in ("r2_heldout", "r2_train")}
                                                     for d, pair in zip(p.depths, pairs)},
            "message_tokens": float(np.mean(decoded)), "message_names_city": float(cited),
            "message_names_country": float(named), "example_message": messages[0], "example_fact": fact(test[0]),
            **sanity}


@torch.no_grad()
def hook_identity_error(model_b, tok_b, prompts: list[str], j: int) -> float:
    """Max |logit| change when B's own last-token state after block j is read and grafted back with replace
    (should be exactly 0: the graft has no side effect)."""
    ids, mask = P.encode(tok_b, prompts)
    own = read_states(model_b, ids, mask, [j])[j][:, -1]
    kwargs = dict(input_ids=ids, attention_mask=mask, position_ids=positions(mask), use_cache=False)
    plain = model_b(**kwargs).logits

    def write(h: torch.Tensor) -> torch.Tensor:
        h = h.clone()
        h[:, -1] = combine("replace", own, h[:, -1])
        return h

    with P.residual_hook(model_b, j, write):
        grafted = model_b(**kwargs).logits
    return float((plain - grafted).abs().max())

