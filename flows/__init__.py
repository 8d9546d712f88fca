"""One package per paper: ``flows/<slug>/method.py`` (the algorithm), ``flow.py`` (its experiment),
``claims.py``, ``evaluate.py`` and ``NOTES.md`` (its evaluation)."""

import paperflows.core  # noqa: F401  (pins the numeric kernels before a paper loads NumPy or torch)
