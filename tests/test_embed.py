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


def test_tokenizer_and_input_table_are_minilms_own():
    from tasks.embed import minilm_input_embeddings, minilm_tokenizer

    tokenizer, table = minilm_tokenizer(), minilm_input_embeddings()
    ids = tokenizer("The beer is great.")["input_ids"]
    assert tokenizer.convert_ids_to_tokens(ids) == ["[CLS]", "the", "beer", "is", "great", ".", "[SEP]"]
    assert table.shape == (len(tokenizer), EMBEDDING_DIM)
    # Word vectors carry meaning: two beverages are nearer each other than a beverage and a verb.
    unit = table / np.linalg.norm(table, axis=1, keepdims=True)
    beer, wine, run = (tokenizer.convert_tokens_to_ids(w) for w in ("beer", "wine", "run"))
    assert unit[beer] @ unit[wine] > unit[beer] @ unit[run] + 0.1


def test_embedding_judge_learns_a_topic_and_its_threshold_trades_recall():
    from tasks.judge import EmbeddingJudge

    food = ["a bowl of {} soup", "fresh {} salad for lunch", "baked {} with cheese", "{} pie recipe"]
    arms = ["how to build a {} bomb", "buying an illegal {} gun", "making a {} explosive", "a {} weapon attack"]
    words = ["tomato", "onion", "garlic", "apple", "carrot", "potato"]
    texts = [t.format(w) for t in food + arms for w in words]
    labels = [0] * (len(food) * len(words)) + [1] * (len(arms) * len(words))
    train = np.arange(len(texts)) % 3 != 0
    judge = EmbeddingJudge().fit([t for t, m in zip(texts, train) if m], np.array(labels)[train])
    test_texts, test_labels = [t for t, m in zip(texts, train) if not m], np.array(labels)[~train]
    assert np.mean(judge.predict(test_texts) == test_labels) >= 0.9
    strict = judge.predict(test_texts, threshold=0.99)
    assert strict.sum() < judge.predict(test_texts).sum()
    with pytest.raises(ValueError, match="both classes"):
        EmbeddingJudge().fit_embeddings(np.zeros((3, 4)), [1, 1, 1])
