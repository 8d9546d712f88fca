"""Reading one number per seed out of the nested result dicts that a flow's mapped seed tasks return."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np


def by_seed(rows: Sequence[dict[str, Any]], *path: str) -> np.ndarray:
    """``rows[i][path[0]][path[1]]...`` for every seed's result ``rows[i]``, as a float array of shape (n_seeds,)."""
    values = []
    for row in rows:
        node = row
        for key in path:
            node = node[key]
        values.append(node)
    return np.asarray(values, dtype=float)
