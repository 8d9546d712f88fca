"""An embedding judge: the offline MiniLM sentence embedder with a logistic-regression head.

The stand-in for an LLM judge or moderator in papers whose protocol asks a model to label texts (safe/unsafe,
refusal/compliance, in character or not): a real pretrained text encoder, with only the last layer fitted here.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from sklearn.linear_model import LogisticRegression

from tasks.embed import minilm_embed


class EmbeddingJudge:
    """Binary judge: ``fit`` on labelled texts (or their embeddings), then ``predict_proba`` of label 1.

    ``C`` is the inverse L2 strength of scikit-learn's ``LogisticRegression`` (lbfgs, deterministic).
    """

    def __init__(self, C: float = 1.0, class_weight: str | None = None) -> None:
        self.head = LogisticRegression(C=C, class_weight=class_weight, max_iter=1000)

    def fit_embeddings(self, X: np.ndarray, y: Sequence[int]) -> "EmbeddingJudge":
        """Fit the head on embeddings ``X`` (n, d) and binary labels ``y`` (n,)."""
        y = np.asarray(y)
        if set(np.unique(y)) != {0, 1}:
            raise ValueError(f"the judge needs binary labels with both classes present, got {sorted(set(y.tolist()))}")
        self.head.fit(X, y)
        return self

    def fit(self, texts: Sequence[str], y: Sequence[int]) -> "EmbeddingJudge":
        return self.fit_embeddings(minilm_embed(texts), y)

    def proba_embeddings(self, X: np.ndarray) -> np.ndarray:
        """P(label 1) for embeddings ``X`` (n, d) -> (n,)."""
        return self.head.predict_proba(X)[:, 1]

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        return self.proba_embeddings(minilm_embed(texts))

    def predict(self, texts: Sequence[str], threshold: float = 0.5) -> np.ndarray:
        """Labels (n,) int: 1 where P(label 1) exceeds ``threshold`` (a higher threshold says 1 less often)."""
        return (self.predict_proba(texts) > threshold).astype(int)
