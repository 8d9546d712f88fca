"""Run one paper end to end: validate its params (before Prefect is imported), record its experiment, score it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from paperflows.params import ParamsError, paper_slugs

# Prefect, torch and the paper's method are imported inside the functions, after the params are
# validated: a bad value must fail in well under a second.


def _known(slug: str) -> None:
    if slug not in paper_slugs():
        raise ParamsError(f"unknown paper '{slug}'; known: {', '.join(paper_slugs())}")


def load_paper(slug: str) -> Any:
    """The :class:`paperflows.core.contract.Paper` of ``slug`` (its ``claims.py``)."""
    from paperflows.scoring import load_evaluation

    _known(slug)
    return load_evaluation(slug)[0]


def load_params_model(slug: str) -> type:
    """The params model the paper's experiment runs with."""
    from paperflows.stages import load_experiment

    _known(slug)
    return load_experiment(slug).params_model


def run_paper(slug: str, *, params_file: Path = Path("params.yaml"), **options: Any) -> dict[str, Any]:
    """Run the paper ``slug`` with its section of ``params_file``: its records stage, then its evaluation
    (:func:`paperflows.scoring.run_split`; options: ``out_root``, ``smoke``, ``overrides``, ``runner``,
    ``dask_address``, ``extra_tags``). The params are validated first, from ``flows/<slug>/params.py`` alone: a
    bad value fails in well under a second, before the paper's method or Prefect is imported."""
    from paperflows.scoring import run_split

    _known(slug)
    return run_split(slug, params_file=params_file, **options)
