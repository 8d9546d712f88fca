"""tasks/embed.py: the offline MiniLM embedder loads without the hub and orders meanings sensibly."""

import numpy as np
import pytest

from tasks.embed import EMBEDDING_DIM, minilm_embed


def test_embeddings_are_unit_norm_deterministic_and_semantically_ordered():
    texts = ["a handwritten digit three", "a handwritten digit eight", "a recipe for tomato soup"]
    e = minilm_embed(texts)
    assert e.shape == (3, EMBEDDING_DIM) and e.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(e, minilm_embed(texts))
    similarity = e @ e.T
    assert similarity[0, 1] > similarity[0, 2] + 0.2


def test_embed_rejects_empty_or_non_text_input():
    with pytest.raises(ValueError, match="non-empty"):
        minilm_embed([])
    with pytest.raises(ValueError, match="strings"):
        minilm_embed([3])
