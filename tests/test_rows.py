"""tasks.rows: one value per seed read along a key path of nested result dicts."""

import numpy as np
import pytest

from tasks.rows import by_seed


def test_by_seed_follows_the_key_path_in_seed_order():
    rows = [{"acc": {"test": 0.5}, "n": 3}, {"acc": {"test": 0.75}, "n": 4}]
    out = by_seed(rows, "acc", "test")
    assert out.dtype == float and out.tolist() == [0.5, 0.75]
    assert np.array_equal(by_seed(rows, "n"), [3.0, 4.0])


def test_by_seed_names_a_missing_key():
    with pytest.raises(KeyError, match="train"):
        by_seed([{"acc": {"test": 0.5}}], "acc", "train")
