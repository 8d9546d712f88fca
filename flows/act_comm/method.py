"""Activation communication (AC) between two language-model agents, on a small GPT trained from scratch.

The paper (Ramesh & Li, "Communicating Activations Between Language Model Agents", ICML 2025) has no
official code; the protocol below is written from its description:

* agent A reads its prompt; its **last-token** residual stream after layer ``k`` is sent;
* agent B reads its own prompt and is paused after layer ``j``; its last-token residual ``h_B`` is
  replaced by ``f(h_A, h_B)`` with ``f`` in {replace: h_A, sum: h_A + h_B, mean: (h_A + h_B) / 2};
  B's forward pass then continues to its answer. No parameter and no data are added;
* A only needs layers 0..k and never decodes, which is where AC saves compute over natural-language
  (NL) communication, where A decodes a message that B reads. Compute is counted in FLOPs.

The stand-in world (a Countries-game analogue, plan of ``shared/papers/act_comm.md``): landmarks lie in
cities, cities in countries; A is told "P is at L .", B is asked "which country is P in ?". B alone can
only guess. One small GPT, trained on world facts, stories and full-information QA, plays both A and B.

Shapes: ``n`` episodes, ``d`` = d_model, ``V`` = vocabulary; prompts of one kind all have the same length.
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from flows.act_comm.params import Combine, Params
from tasks.lm import GPT, GPTConfig, Tokenizer, cached_lm, make_gpt, residual_hook, sample, train_lm
from tasks.seeding import numpy_rng
from tasks.train import torch_single_thread

CONTEXT = 32          # positions: the longest input is bos + a 20-token message + B's 6-token question
STREAM_TRAIN, STREAM_VAL, STREAM_TEST, STREAM_DERANGE = 1, 2, 3, 4


# ----------------------------------------------------------------------------------------------- the world
@dataclass(frozen=True)
class World:
    """Names and the two maps landmark -> city -> country (every city and country is used)."""

    people: list[str]
    landmarks: list[str]
    cities: list[str]
    countries: list[str]
    city_of: np.ndarray       # (n_landmarks,) city index of each landmark
    country_of: np.ndarray    # (n_cities,) country index of each city

    def country_of_landmark(self, landmark: np.ndarray) -> np.ndarray:
        return self.country_of[self.city_of[landmark]]


def make_world(p: Params, seed: int) -> World:
    """A random world: landmarks spread evenly over cities, cities evenly over countries, shuffled."""
    rng = numpy_rng(seed, 0)
    city_of = rng.permutation(np.arange(p.n_landmarks) % p.n_cities)
    country_of = rng.permutation(np.arange(p.n_cities) % p.n_countries)
    return World([f"person{i}" for i in range(p.n_people)], [f"landmark{i}" for i in range(p.n_landmarks)],
                 [f"city{i}" for i in range(p.n_cities)], [f"country{i}" for i in range(p.n_countries)],
                 city_of, country_of)


@dataclass(frozen=True)
class Episodes:
    """``n`` games: person (n,) and landmark (n,) indices; the answer is the landmark's country."""

    person: np.ndarray
    landmark: np.ndarray


def draw_episodes(world: World, n: int, seed: int, stream: int) -> Episodes:
    rng = numpy_rng(seed, stream)
    return Episodes(rng.integers(0, len(world.people), n), rng.integers(0, len(world.landmarks), n))


def a_prompt(w: World, person: int, landmark: int) -> str:
    return f"{w.people[person]} is at {w.landmarks[landmark]} ."


def b_prompt(w: World, person: int) -> str:
    return f"which country is {w.people[person]} in ?"


def corpus(p: Params, world: World, seed: int) -> list[str]:
    """The training text: world facts, stories that spell out the chain, and reading-comprehension QA.

    A story is S1 S2 S3 with S1 = "P is at L .", S2 = "L is in C .", S3 = "C is in K .". A QA line is a
    context, then "which country is P in ?" and the answer K; its context is one of the 7 non-empty
    in-order subsets of (S1, S2, S3), drawn uniformly, so the model learns to answer from whatever true
    statements precede the question (what B needs to read a natural-language message) and from facts it
    memorised (S1 alone, S2 alone). No line has the question without context, so B alone can only guess;
    persons are placed at random in every line, so no person has a fixed country.
    """
    w = world
    facts = [f"{w.landmarks[l]} is in {w.cities[w.city_of[l]]} ." for l in range(len(w.landmarks))]
    facts += [f"{w.cities[c]} is in {w.countries[w.country_of[c]]} ." for c in range(len(w.cities))]
    stories = draw_episodes(w, p.n_stories, seed, STREAM_TRAIN)
    qa = draw_episodes(w, p.n_qa, seed + 10_000, STREAM_TRAIN)
    subsets = [s for s in range(1, 8)]                                   # bit i set: sentence S(i+1) present
    choice = numpy_rng(seed, STREAM_TRAIN, 1).choice(subsets, p.n_qa)
    lines = facts * p.fact_repeats
    for person, l in zip(stories.person, stories.landmark):
        lines.append(" ".join(chain_sentences(w, person, l)))
    for person, l, bits in zip(qa.person, qa.landmark, choice):
        context = [s for i, s in enumerate(chain_sentences(w, person, l)) if bits >> i & 1]
        lines.append(f"{' '.join(context)} {b_prompt(w, person)} {w.countries[w.country_of_landmark(l)]}")
    return lines


def chain_sentences(w: World, person: int, landmark: int) -> list[str]:
    """S1, S2, S3: where P is, which city L is in, which country C is in."""
    c = w.city_of[landmark]
    return [a_prompt(w, person, landmark), f"{w.landmarks[landmark]} is in {w.cities[c]} .",
            f"{w.cities[c]} is in {w.countries[w.country_of[c]]} ."]


def tokenizer_for(world: World) -> Tokenizer:
    words = "is at in . which country ?".split()
    return Tokenizer([*words, *world.people, *world.landmarks, *world.cities, *world.countries], level="word")


# ------------------------------------------------------------------------------------------ the one model
def gpt_config(p: Params, vocab_size: int) -> GPTConfig:
    return GPTConfig(vocab_size=vocab_size, context=CONTEXT, n_layer=p.n_layer, n_head=p.n_head, d_model=p.d_model)


def train_model(p: Params, world: World, tok: Tokenizer, seed: int) -> GPT:
    """The small GPT of this seed, trained on :func:`corpus` (next-token cross-entropy, AdamW)."""
    lines = corpus(p, world, seed)
    sequences = tok.batch(lines, max(len(tok.encode(t, bos=True, eos=True)) for t in lines))
    model = make_gpt(gpt_config(p, len(tok)), seed)
    train_lm(model, sequences, epochs=p.epochs, batch_size=p.batch_size, lr=p.lr, seed=seed,
             weight_decay=p.weight_decay)
    return model


def model_key(p: Params, seed: int, smoke: bool) -> dict:
    """Everything that determines the weights (world, corpus, architecture, training)."""
    fields = ("n_people", "n_landmarks", "n_cities", "n_countries", "n_stories", "n_qa", "fact_repeats",
              "n_layer", "n_head", "d_model", "epochs", "batch_size", "lr", "weight_decay")
    return {"seed": seed, "smoke": smoke, "context": CONTEXT, **{f: getattr(p, f) for f in fields}}


# ------------------------------------------------------------------------------- reading and grafting
class _Stop(Exception):
    """Raised by a reading hook to skip the blocks after layer k: A's forward pass ends there."""


@torch.no_grad()
def read_last_token(model: GPT, ids: torch.Tensor, layers: list[int]) -> dict[int, torch.Tensor]:
    """Last-token residual stream after each block in ``layers``: {layer: (n, d)}.

    Blocks after ``max(layers)`` are not run (A in AC only computes up to layer k).
    """
    stored: dict[int, torch.Tensor] = {}
    last = max(layers)

    def reader(layer: int) -> Callable[[torch.Tensor], None]:
        def fn(x: torch.Tensor) -> None:
            stored[layer] = x[:, -1].clone()
            if layer == last:
                raise _Stop
        return fn

    with ExitStack() as stack:
        for layer in layers:
            stack.enter_context(residual_hook(model, layer, reader(layer)))
        try:
            model.hidden(ids)
        except _Stop:
            pass
    return stored


def combine(f: Combine, h_a: torch.Tensor, h_b: torch.Tensor) -> torch.Tensor:
    """The paper's functional forms, (n, d) x (n, d) -> (n, d)."""
    if f == "replace":
        return h_a
    if f == "sum":
        return h_a + h_b
    if f == "mean":
        return (h_a + h_b) / 2
    raise ValueError(f"unknown combination {f!r}")


@torch.no_grad()
def answer_logits(model: GPT, ids: torch.Tensor, last: torch.Tensor | None = None,
                  graft: tuple[int, Combine, torch.Tensor] | None = None) -> torch.Tensor:
    """Next-token logits (n, V) at each row's last real position (``last`` (n,), default the final column).

    ``graft = (j, f, h_a)``: after block j, B's residual at that position becomes f(h_a, h_B) (h_a (n, d)).
    """
    rows = torch.arange(len(ids))
    last = torch.full((len(ids),), ids.shape[1] - 1) if last is None else last
    if graft is None:
        return model(ids)[0][rows, last]
    j, f, h_a = graft

    def write(x: torch.Tensor) -> torch.Tensor:
        x = x.clone()
        x[rows, last] = combine(f, h_a, x[rows, last])
        return x

    with residual_hook(model, j, write):
        return model(ids)[0][rows, last]


def predict_country(logits: torch.Tensor, country_ids: torch.Tensor) -> np.ndarray:
    """The answer among the countries only (a multiple-choice read-out): (n, V) -> (n,) country index."""
    return logits[:, country_ids].argmax(dim=1).numpy()


def encode_rows(tok: Tokenizer, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """bos + text, right-padded: ids (n, t_max) and each row's last real position (n,)."""
    rows = [tok.encode(t, bos=True) for t in texts]
    width = max(map(len, rows))
    ids = torch.tensor([r + [tok.pad] * (width - len(r)) for r in rows], dtype=torch.long)
    return ids, torch.tensor([len(r) - 1 for r in rows])


@torch.no_grad()
def nl_messages(model: GPT, tok: Tokenizer, a_ids: torch.Tensor, max_new: int) -> tuple[list[list[int]], list[int]]:
    """A's greedy message after its prompt (n, t_a), up to eos or ``max_new`` tokens.

    Returns the message token ids (eos excluded) and the number of tokens A decoded (eos included).
    """
    out = sample(model, a_ids, max_new, temperature=0.0, eos=tok.eos)[:, a_ids.shape[1]:].tolist()
    messages, decoded = [], []
    for row in out:
        message = row[:row.index(tok.eos)] if tok.eos in row else row
        messages.append(message)
        decoded.append(min(len(message) + 1, max_new))
    return messages, decoded


# ------------------------------------------------------------------------------------------------- FLOPs
def forward_flops(c: GPTConfig, n_new: int, n_past: int = 0, n_blocks: int | None = None,
                  logit_positions: int | None = None) -> int:
    """Matmul FLOPs (2 per multiply-add) of one forward of ``n_new`` tokens after ``n_past`` cached ones:
    :func:`dense_flops` + :func:`attention_flops`. LayerNorms, GELUs, biases and softmax are not counted
    (the usual convention)."""
    n_blocks = c.n_layer if n_blocks is None else n_blocks
    return dense_flops(c, n_new, n_blocks, logit_positions) + n_blocks * attention_flops(c, n_new, n_past)


def dense_flops(c: GPTConfig, n_new: int, n_blocks: int, logit_positions: int | None = None) -> int:
    """Weights x activations: per token and block, the q, k, v and output projections (8 d^2) and the MLP
    (16 d^2); the tied unembedding 2 d V per position whose logits are computed (default every new one)."""
    logit_positions = n_new if logit_positions is None else logit_positions
    return n_blocks * n_new * 24 * c.d_model ** 2 + logit_positions * 2 * c.d_model * c.vocab_size


def attention_flops(c: GPTConfig, n_new: int, n_past: int) -> int:
    """One block's scores q k^T and weighted sum over values: 2 x 2 d per (query, key) pair; the masked
    attention of :mod:`tasks.lm` computes every pair, masked or not."""
    return 4 * c.d_model * n_new * (n_past + n_new)


def nl_flops(c: GPTConfig, t_a: int, decoded: int, t_b_input: int) -> int:
    """NL communication: A reads its prompt, decodes ``decoded`` tokens one at a time (key/value cache:
    ``decoded - 1`` single-token forwards: the last token need not be fed back, although tasks.lm.sample does,
    so NL is charged the minimum a decoder needs), then B reads message + question."""
    a = forward_flops(c, t_a) + sum(forward_flops(c, 1, t_a + i) for i in range(decoded - 1))
    return a + forward_flops(c, t_b_input)


def ac_flops(c: GPTConfig, t_a: int, t_b: int, k: int) -> int:
    """AC: A runs blocks 0..k on its prompt (no logits), B reads its question; f costs d FLOPs at most."""
    return forward_flops(c, t_a, n_blocks=k + 1, logit_positions=0) + forward_flops(c, t_b) + c.d_model


# -------------------------------------------------------------------------------------------- one seed
def derangement(n: int, seed: int) -> np.ndarray:
    """A random permutation (n,) with no fixed point: episode i gets the A activation of episode other[i] != i.

    Follow a random cycle through all n episodes: each one points to its neighbour in the cycle."""
    order = numpy_rng(seed, STREAM_DERANGE).permutation(n)
    other = np.empty_like(order)
    other[order] = np.roll(order, 1)
    return other


def evaluate(model: GPT, tok: Tokenizer, world: World, episodes: Episodes, p: Params, seed: int,
             configs: list[tuple[int, int, Combine]], control: bool = True) -> dict:
    """Accuracy of every protocol on ``episodes``; AC for each (k, j, f) in ``configs`` (and, with
    ``control``, AC fed another episode's A activation).

    Returns {"truth": (n,), "b_alone", "full_info", "ac": {(k, j, f): acc}, "mismatched": {...}, ...}.
    """
    w = world
    truth = w.country_of_landmark(episodes.landmark)
    country_ids = torch.tensor([tok.stoi[k] for k in w.countries])
    a_texts = [a_prompt(w, q, l) for q, l in zip(episodes.person, episodes.landmark)]
    b_texts = [b_prompt(w, q) for q in episodes.person]
    a_ids, _ = encode_rows(tok, a_texts)
    b_ids, _ = encode_rows(tok, b_texts)
    accuracy = lambda logits: float((predict_country(logits, country_ids) == truth).mean())

    out: dict = {"n": len(truth), "b_alone": accuracy(answer_logits(model, b_ids))}
    full_ids, _ = encode_rows(tok, [f"{a} {b}" for a, b in zip(a_texts, b_texts)])
    out["full_info"] = accuracy(answer_logits(model, full_ids))
    layers = sorted({k for k, _, _ in configs})
    h_a = read_last_token(model, a_ids, layers)
    other = derangement(len(truth), seed)     # negative control: another episode's A activation
    out["ac"], out["mismatched"] = {}, {}
    for k, j, f in configs:
        out["ac"][(k, j, f)] = accuracy(answer_logits(model, b_ids, graft=(j, f, h_a[k])))
        if control:
            out["mismatched"][(k, j, f)] = accuracy(answer_logits(model, b_ids, graft=(j, f, h_a[k][other])))
    return out


def nl_accuracy(model: GPT, tok: Tokenizer, world: World, episodes: Episodes, max_new: int) -> dict:
    """NL communication with a ``max_new``-token cap: accuracy, mean FLOPs and how often the country is named."""
    w = world
    truth = w.country_of_landmark(episodes.landmark)
    country_ids = torch.tensor([tok.stoi[k] for k in w.countries])
    a_ids, _ = encode_rows(tok, [a_prompt(w, q, l) for q, l in zip(episodes.person, episodes.landmark)])
    messages, decoded = nl_messages(model, tok, a_ids, max_new)
    b_rows = [[tok.bos, *m, *tok.encode(b_prompt(w, q))] for m, q in zip(messages, episodes.person)]
    width = max(map(len, b_rows))
    b_ids = torch.tensor([r + [tok.pad] * (width - len(r)) for r in b_rows])
    last = torch.tensor([len(r) - 1 for r in b_rows])
    pred = predict_country(answer_logits(model, b_ids, last), country_ids)
    named = [tok.stoi[w.countries[t]] in m for m, t in zip(messages, truth)]
    c = model.config
    flops = [nl_flops(c, a_ids.shape[1], g, len(r)) for g, r in zip(decoded, b_rows)]
    return {"accuracy": float((pred == truth).mean()), "flops": float(np.mean(flops)),
            "names_country": float(np.mean(named)), "message_tokens": float(np.mean([len(m) for m in messages])),
            "example": tok.decode(messages[0])}


def hook_identity_error(model: GPT, ids: torch.Tensor) -> float:
    """Max |logits| change when every block's residual is read and written back unchanged (should be 0)."""
    with torch.no_grad():
        plain = model(ids)[0]
        with ExitStack() as stack:
            for layer in range(model.config.n_layer):
                stack.enter_context(residual_hook(model, layer, lambda x: x.clone()))
            hooked = model(ids)[0]
    return float((plain - hooked).abs().max())


def run_seed(p: Params, seed: int, data_dir: str, smoke: bool) -> dict:
    """One seed: world, trained (or cached) model, (k, j, f) chosen on validation, every protocol on test."""
    with torch_single_thread():
        world = make_world(p, seed)
        tok = tokenizer_for(world)
        started = time.process_time()
        model = cached_lm(Path(data_dir) / f"lm_seed{seed}.pt", model_key(p, seed, smoke),
                          lambda: train_model(p, world, tok, seed))
        train_cpu_s = time.process_time() - started
        model.eval()
        configs = [(k, j, f) for f in p.combines for k in range(p.n_layer) for j in range(p.n_layer)]
        val = evaluate(model, tok, world, draw_episodes(world, p.n_val, seed, STREAM_VAL), p, seed, configs,
                       control=False)
        best = max(configs, key=lambda cfg: val["ac"][cfg])              # first best in grid order on ties
        best_per_f = {f: max((cfg for cfg in configs if cfg[2] == f), key=lambda cfg: val["ac"][cfg])
                      for f in p.combines}
        test_episodes = draw_episodes(world, p.n_test, seed, STREAM_TEST)
        chosen = sorted({best, *best_per_f.values()})
        test = evaluate(model, tok, world, test_episodes, p, seed, chosen)
        nl = {m: nl_accuracy(model, tok, world, test_episodes, m) for m in p.message_lengths}

        c = model.config
        t_a = len(tok.encode(a_prompt(world, 0, 0), bos=True))
        t_b = len(tok.encode(b_prompt(world, 0), bos=True))
        ids = encode_rows(tok, [b_prompt(world, q) for q in test_episodes.person[:8]])[0]
        timings = _time_protocols(model, tok, world, test_episodes, best, p.message_plan)
    return {
        "seed": seed, "train_cpu_s": train_cpu_s, "chosen": best, "best_per_f": best_per_f,
        "val_grid": val["ac"], "val_b_alone": val["b_alone"],
        "b_alone": test["b_alone"], "full_info": test["full_info"],
        "ac": test["ac"][best], "mismatched": test["mismatched"][best],
        "ac_per_f": {f: test["ac"][cfg] for f, cfg in best_per_f.items()},
        "nl": nl, "chance": 1.0 / p.n_countries,
        "flops": {"ac": ac_flops(c, t_a, t_b, best[0]), "b_alone": forward_flops(c, t_b),
                  "full_info": forward_flops(c, t_a + t_b - 1), "nl": nl[p.message_plan]["flops"]},
        "hook_identity_error": hook_identity_error(model, ids), "timings": timings,
    }


def _time_protocols(model: GPT, tok: Tokenizer, world: World, episodes: Episodes, best: tuple[int, int, Combine],
                    max_new: int) -> dict[str, float]:
    """Wall seconds of AC and NL on the whole test batch (reported, not claimed: the machine is shared)."""
    w, (k, j, f) = world, best
    a_ids, _ = encode_rows(tok, [a_prompt(w, q, l) for q, l in zip(episodes.person, episodes.landmark)])
    b_ids, _ = encode_rows(tok, [b_prompt(w, q) for q in episodes.person])
    started = time.perf_counter()
    answer_logits(model, b_ids, graft=(j, f, read_last_token(model, a_ids, [k])[k]))
    ac = time.perf_counter() - started
    started = time.perf_counter()
    nl_accuracy(model, tok, world, episodes, max_new)
    return {"ac_s": ac, "nl_s": time.perf_counter() - started}


def dense_flops_error(c: GPTConfig, n_new: int, seed: int = 0) -> float:
    """|dense_flops - torch's FlopCounterMode count| / count on a full forward of ``n_new`` tokens.

    torch's counter sees every matmul of the projections, MLP and unembedding; it does not count the fused
    attention kernel, which is why only the dense part is compared (attention is tested on its own).
    """
    from torch.utils.flop_counter import FlopCounterMode

    model = make_gpt(c, seed)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(torch.zeros((1, n_new), dtype=torch.long))
    counted = counter.get_total_flops()
    return abs(dense_flops(c, n_new, c.n_layer) - counted) / counted
