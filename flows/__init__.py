"""One package per paper: ``flows/<slug>/method.py`` (the algorithm) and ``flow.py`` (the Prefect flow)."""

import tasks  # noqa: F401  (environment defaults, MPLBACKEND=Agg among them, before any pyplot import)
