"""A small decoder-only transformer, trained from scratch on a paper's synthetic world, as the stand-in for an LLM.

One readable file: a character/word tokenizer, a GPT (pre-LayerNorm blocks, causal attention with an optional
key/value cache), a seeded training loop, sampling (temperature, top-k) and beam search, log-likelihood scoring,
mean-pooled embeddings, and hooks that read or overwrite any block's residual stream. ``TinyLM`` bundles model and
tokenizer behind the interface the language-model papers share: ``generate``, ``score``, ``embed``.
"""

from __future__ import annotations

import io
import json
import math
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterator, Literal, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from paperflows.core.io import atomic_write_bytes, json_safe
from paperflows.core.seeding import global_rngs_isolated, torch_generator, torch_seeded

PAD, BOS, EOS = "<pad>", "<bos>", "<eos>"


class Tokenizer:
    """Character- or word-level tokens over a fixed vocabulary; ids 0, 1, 2 are pad, bos, eos."""

    def __init__(self, symbols: Sequence[str], level: Literal["char", "word"]) -> None:
        self.level = level
        self.itos = [PAD, BOS, EOS, *sorted(set(symbols) - {PAD, BOS, EOS})]
        self.stoi = {s: i for i, s in enumerate(self.itos)}
        self.pad, self.bos, self.eos = 0, 1, 2

    @classmethod
    def fit(cls, texts: Sequence[str], level: Literal["char", "word"] = "char") -> "Tokenizer":
        """The vocabulary of every symbol in ``texts``."""
        return cls([s for text in texts for s in cls._split(text, level)], level)

    @staticmethod
    def _split(text: str, level: str) -> list[str]:
        return list(text) if level == "char" else text.split()

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, text: str, bos: bool = False, eos: bool = False) -> list[int]:
        symbols = self._split(text, self.level)
        unknown = [s for s in symbols if s not in self.stoi]
        if unknown:
            raise ValueError(f"symbols outside the vocabulary: {sorted(set(unknown))[:5]}")
        return [self.bos] * bos + [self.stoi[s] for s in symbols] + [self.eos] * eos

    def decode(self, ids: Sequence[int]) -> str:
        symbols = [self.itos[i] for i in ids if i not in (self.pad, self.bos, self.eos)]
        return "".join(symbols) if self.level == "char" else " ".join(symbols)

    def batch(self, texts: Sequence[str], length: int) -> torch.Tensor:
        """``texts`` as bos + tokens + eos, right-padded to ``length``: (len(texts), length) int64."""
        rows = [self.encode(t, bos=True, eos=True) for t in texts]
        if max(map(len, rows)) > length:
            raise ValueError(f"a text needs {max(map(len, rows))} tokens but length is {length}")
        return torch.tensor([r + [self.pad] * (length - len(r)) for r in rows], dtype=torch.long)


@dataclass(frozen=True)
class GPTConfig:
    vocab_size: int
    context: int = 64
    n_layer: int = 2
    n_head: int = 4
    d_model: int = 64


Cache = list[tuple[torch.Tensor, torch.Tensor]]


class Attention(nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.n_head = config.n_head
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model)
        self.proj = nn.Linear(config.d_model, config.d_model)

    def forward(self, x: torch.Tensor, past: tuple[torch.Tensor, torch.Tensor] | None
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        b, t, d = x.shape
        q, k, v = (z.view(b, t, self.n_head, d // self.n_head).transpose(1, 2) for z in self.qkv(x).split(d, dim=2))
        if past is not None:
            k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)
        # New queries sit at the end: query i may see keys 0 .. (past length + i).
        offset = k.shape[2] - t
        mask = torch.ones(t, k.shape[2], dtype=torch.bool).tril(diagonal=offset)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.proj(out.transpose(1, 2).reshape(b, t, d)), (k, v)


class Block(nn.Module):
    """Pre-LayerNorm transformer block; its output is the residual stream after this layer."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(config.d_model), nn.LayerNorm(config.d_model)
        self.attention = Attention(config)
        self.mlp = nn.Sequential(nn.Linear(config.d_model, 4 * config.d_model), nn.GELU(),
                                 nn.Linear(4 * config.d_model, config.d_model))

    def forward(self, x: torch.Tensor, past: tuple[torch.Tensor, torch.Tensor] | None = None
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        attended, present = self.attention(self.ln1(x), past)
        x = x + attended
        return x + self.mlp(self.ln2(x)), present


class GPT(nn.Module):
    """Token + learned position embeddings → ``n_layer`` blocks → LayerNorm → logits (weights tied to the embedding)."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.config = config
        self.token = nn.Embedding(config.vocab_size, config.d_model)
        self.position = nn.Embedding(config.context, config.d_model)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.d_model)

    def hidden(self, ids: torch.Tensor, cache: Cache | None = None) -> tuple[torch.Tensor, Cache]:
        """Final hidden states (b, t, d_model) of ``ids`` (b, t) following the cached prefix, and the new cache."""
        start = 0 if cache is None else cache[0][0].shape[2]
        if start + ids.shape[1] > self.config.context:
            raise ValueError(f"{start + ids.shape[1]} positions exceed the context of {self.config.context}")
        x = self.token(ids) + self.position(torch.arange(start, start + ids.shape[1]))
        new_cache = []
        for i, block in enumerate(self.blocks):
            x, present = block(x, None if cache is None else cache[i])
            new_cache.append(present)
        return self.ln_f(x), new_cache

    def forward(self, ids: torch.Tensor, cache: Cache | None = None) -> tuple[torch.Tensor, Cache]:
        """Logits (b, t, vocab) and the key/value cache."""
        h, cache = self.hidden(ids, cache)
        return h @ self.token.weight.T, cache


def make_gpt(config: GPTConfig, seed: int) -> GPT:
    with torch_seeded(seed):
        return GPT(config)


def cached_lm(path: Path, key: dict, train: Callable[[], GPT]) -> GPT:
    """The model saved at ``path`` if it was trained under the same ``key``, else ``train()``, saved atomically.

    ``key`` (JSON-able) must name everything that determines the weights: seed, corpus, config, training
    params. Papers keep the file under their ``data/<slug>/`` folder, a DVC-cached output, so ``dvc repro``
    trains once and a rerun with changed evaluation params reuses the weights.
    """
    path = Path(path)
    key = json.loads(json.dumps(json_safe(key), sort_keys=True))
    if path.exists():
        saved = torch.load(path, weights_only=True)
        if saved["key"] == key:
            with global_rngs_isolated():   # the random init, replaced by the saved weights, must not shift a seed's
                model = GPT(GPTConfig(**saved["config"]))
            model.load_state_dict(saved["state"])
            return model.eval()
    model = train()
    buffer = io.BytesIO()
    torch.save({"key": key, "config": asdict(model.config), "state": model.state_dict()}, buffer)
    atomic_write_bytes(path, buffer.getvalue())
    return model


def train_lm(model: GPT, sequences: torch.Tensor, *, epochs: int, batch_size: int, lr: float, seed: int,
             pad: int = 0, weight_decay: float = 0.0) -> list[float]:
    """Next-token cross-entropy on ``sequences`` (n, L) int64 (pad positions ignored), AdamW, seeded batch order.

    Returns the mean loss per epoch.
    """
    optimiser = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    generator = torch_generator(seed)
    history = []
    model.train()
    for _ in range(epochs):
        order = torch.randperm(len(sequences), generator=generator)
        total, count = 0.0, 0
        for start in range(0, len(order), batch_size):
            batch = sequences[order[start:start + batch_size]]
            logits, _ = model(batch[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1), ignore_index=pad)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            tokens = int((batch[:, 1:] != pad).sum())
            total, count = total + float(loss.detach()) * tokens, count + tokens
        history.append(total / max(count, 1))
    model.eval()
    return history


@torch.no_grad()
def sample(model: GPT, prompt: torch.Tensor, max_new: int, *, temperature: float = 1.0, top_k: int | None = None,
           seed: int = 0, eos: int | None = None) -> torch.Tensor:
    """Continue each row of ``prompt`` (b, t) by up to ``max_new`` tokens, reusing the key/value cache.

    ``temperature`` 0 is greedy; ``top_k`` keeps the k most likely tokens. Rows that emit ``eos`` keep emitting
    it. Returns (b, t + max_new).
    """
    model.eval()
    generator = torch_generator(seed)
    logits, cache = model(prompt)
    out, done = prompt, torch.zeros(len(prompt), dtype=torch.bool)
    for _ in range(max_new):
        step = logits[:, -1]
        if temperature == 0:
            token = step.argmax(dim=-1)
        else:
            step = step / temperature
            if top_k is not None:
                threshold = step.topk(min(top_k, step.shape[-1]), dim=-1).values[:, -1:]
                step = step.masked_fill(step < threshold, -torch.inf)
            token = torch.multinomial(torch.softmax(step, dim=-1), 1, generator=generator)[:, 0]
        if eos is not None:
            token = torch.where(done, torch.full_like(token, eos), token)
            done |= token == eos
        out = torch.cat([out, token[:, None]], dim=1)
        if out.shape[1] >= model.config.context or (eos is not None and bool(done.all())):
            break
        logits, cache = model(token[:, None], cache)
    return out


@torch.no_grad()
def beam_search(model: GPT, prompt: torch.Tensor, max_new: int, beam: int, eos: int | None = None) -> torch.Tensor:
    """The highest-log-probability continuation of ``prompt`` (t,) found by a beam of width ``beam``: (t + m,)."""
    model.eval()
    beams = [(0.0, prompt.tolist(), False)]
    for _ in range(max_new):
        candidates = []
        for score, ids, finished in beams:
            if finished or len(ids) >= model.config.context:
                candidates.append((score, ids, True))
                continue
            log_p = torch.log_softmax(model(torch.tensor([ids]))[0][0, -1], dim=-1)
            top = log_p.topk(beam)
            candidates += [(score + float(lp), ids + [int(tok)], eos is not None and int(tok) == eos)
                           for lp, tok in zip(top.values, top.indices)]
        beams = sorted(candidates, key=lambda c: -c[0])[:beam]
        if all(finished for _, _, finished in beams):
            break
    return torch.tensor(beams[0][1])


@torch.no_grad()
def sequence_log_likelihood(model: GPT, prompt: torch.Tensor, continuation: torch.Tensor) -> float:
    """log p(continuation | prompt) under ``model``: the sum of next-token log-probabilities, ids (t,) and (m,)."""
    model.eval()
    ids = torch.cat([prompt, continuation])[None]
    log_p = torch.log_softmax(model(ids[:, :-1])[0][0], dim=-1)
    targets = ids[0, len(prompt):]
    return float(log_p[len(prompt) - 1:].gather(1, targets[:, None]).sum())


@contextmanager
def residual_hook(model: GPT, layer: int, fn: Callable[[torch.Tensor], torch.Tensor | None]) -> Iterator[None]:
    """Call ``fn`` on the residual stream (b, t, d_model) after block ``layer``; a tensor it returns replaces it.

    Reading: return None (store the tensor yourself). Writing: return the new stream (steering, activation
    patching, grafting one model's state into another).
    """
    def hook(module, inputs, output):
        replaced = fn(output[0])
        return output if replaced is None else (replaced, output[1])

    handle = model.blocks[layer].register_forward_hook(hook)
    try:
        yield
    finally:
        handle.remove()


class TinyLM:
    """The language-model interface of the stand-in papers, on text: ``generate``, ``score``, ``embed``."""

    def __init__(self, model: GPT, tokenizer: Tokenizer) -> None:
        self.model, self.tokenizer = model, tokenizer

    def generate(self, prompt: str, max_new: int, *, temperature: float = 0.0, top_k: int | None = None,
                 seed: int = 0) -> str:
        """The continuation of ``prompt`` (without the prompt), stopping at eos."""
        ids = torch.tensor([self.tokenizer.encode(prompt, bos=True)])
        out = sample(self.model, ids, max_new, temperature=temperature, top_k=top_k, seed=seed, eos=self.tokenizer.eos)
        return self.tokenizer.decode(out[0, ids.shape[1]:].tolist())

    def score(self, prompt: str, continuation: str) -> float:
        """log p(continuation + eos | bos + prompt)."""
        return sequence_log_likelihood(self.model, torch.tensor(self.tokenizer.encode(prompt, bos=True)),
                                       torch.tensor(self.tokenizer.encode(continuation, eos=True)))

    @torch.no_grad()
    def embed(self, texts: Sequence[str]) -> torch.Tensor:
        """Mean of the final hidden states over each text's tokens: (len(texts), d_model)."""
        rows = []
        for text in texts:
            h, _ = self.model.hidden(torch.tensor([self.tokenizer.encode(text, bos=True)]))
            rows.append(h[0].mean(dim=0))
        return torch.stack(rows)


def perplexity(model: GPT, sequences: torch.Tensor, pad: int = 0) -> float:
    """exp of the mean next-token cross-entropy over non-pad targets of ``sequences`` (n, L)."""
    with torch.no_grad():
        logits, _ = model(sequences[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), sequences[:, 1:].reshape(-1), ignore_index=pad)
    return math.exp(float(loss))
