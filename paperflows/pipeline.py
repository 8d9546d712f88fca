"""Run one paper end to end: validate its params (before Prefect is imported), then run its flow."""

from __future__ import annotations

import importlib
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from paperflows.params import ParamsError, paper_slugs, read_params_file, resolve_params

if TYPE_CHECKING:
    from tasks.paper import PaperFlow

# Prefect, torch and the paper's method are imported inside the functions, after the params are
# validated: a bad value must fail in well under a second.


def load_flow(slug: str) -> PaperFlow:
    from tasks.paper import PaperFlow

    if slug not in paper_slugs():
        raise ParamsError(f"unknown paper '{slug}'; known: {', '.join(paper_slugs())}")
    module = importlib.import_module(f"flows.{slug}.flow")
    found = [v for v in vars(module).values() if isinstance(v, PaperFlow)]
    if len(found) != 1:
        raise RuntimeError(f"flows/{slug}/flow.py must define exactly one @paper_flow, found {len(found)}")
    if found[0].paper.slug != slug:
        raise RuntimeError(f"flows/{slug}/flow.py declares slug '{found[0].paper.slug}'")
    return found[0]


def load_paper(slug: str) -> Any:
    """The :class:`tasks.contract.Paper` of ``slug``: its ``claims.py`` when split, else its one-stage flow's."""
    from paperflows.scoring import load_evaluation
    from paperflows.stages import is_split

    if slug in paper_slugs() and is_split(slug):
        return load_evaluation(slug)[0]
    return load_flow(slug).paper


def load_params_model(slug: str) -> type:
    """The params model the paper's experiment runs with."""
    from paperflows.stages import is_split, load_experiment

    if slug in paper_slugs() and is_split(slug):
        return load_experiment(slug).params_model
    return load_flow(slug).params_model


def run_paper(slug: str, *, params_file: Path = Path("params.yaml"), smoke: bool = False,
              overrides: Sequence[str] = (), **options: Any) -> dict[str, Any]:
    """Run the paper ``slug`` with its section of ``params_file``; see :func:`run_flow` for the options.
    A paper split into records and evaluation runs both stages (:func:`paperflows.scoring.run_split`).

    The params are validated first, from ``flows/<slug>/params.py`` alone: a bad value fails in well
    under a second, before the paper's method or Prefect is imported.
    """
    from paperflows.scoring import run_split
    from paperflows.stages import is_split

    if slug in paper_slugs() and is_split(slug):
        return run_split(slug, params_file=params_file, smoke=smoke, overrides=overrides, **options)
    raw = read_params_file(params_file)
    resolve_params(slug, raw, smoke, overrides)
    return run_flow(load_flow(slug), raw, smoke=smoke, overrides=overrides, **options)


def run_flow(flow: PaperFlow, raw_params: dict[str, Any], *, out_root: Path = Path("."), smoke: bool = False,
             overrides: Sequence[str] = (), runner: str = "threads", dask_address: str | None = None,
             extra_tags: Sequence[str] = ()) -> dict[str, Any]:
    """Validate, then run one paper's flow; outputs go to ``out_root/data/<slug>`` and ``out_root/results/<slug>``.

    Params are validated before anything runs or is written. Returns the flow's summary
    (results folder, verdict counts) with the wall time.
    """
    from prefect import tags

    from paperflows.runners import make_task_runner
    from tasks.seeding import seed_list

    slug = flow.paper.slug
    params, common = resolve_params(slug, raw_params, smoke, overrides, model=(flow.params_model, flow.smoke))
    if params.seed_cap is not None:
        raise ParamsError(f"papers.{slug}.seed_cap: two looks need a paper split into records and evaluation")
    stage = os.environ.get("DVC_STAGE")
    run_name = slug + (f"@{stage}" if stage else "") + ("-smoke" if smoke else "")
    configured = flow.flow.with_options(
        task_runner=make_task_runner(runner, common.max_workers, dask_address),
        flow_run_name=run_name,
    )
    run_tags = (["paperflows", slug, f"runner:{runner}", *extra_tags] + (["smoke"] if smoke else [])
                + ([f"dvc:{stage}"] if stage else []))
    started = time.perf_counter()
    with tags(*run_tags):
        summary = configured(
            params=params.model_dump(mode="json"),
            seeds=seed_list(common.seed, params.seeds),
            data_dir=str(Path(out_root).resolve() / "data" / slug),
            results_dir=str(Path(out_root).resolve() / "results" / slug),
            smoke_run=smoke,
        )
    return {**summary, "wall_s": time.perf_counter() - started}
