"""The records stage of a split paper: ``record`` runs its experiment into per-seed records.

Its evaluation stage is :mod:`paperflows.scoring`. A paper is split when ``flows/<slug>/claims.py`` exists:
``flow.py`` holds its :func:`paper_experiment`, ``claims.py`` its ``PAPER`` (claims fixed before any run),
``evaluate.py`` its ``evaluate(params, records)``, and ``NOTES.md`` its fixed prose. Records go to
``<root>/records/<slug>`` (see :mod:`paperflows.core.records`; small, committed to git beside the results, so that
a fresh clone re-scores without training), datasets the experiment saves to ``<root>/data/<slug>`` (DVC-cached),
results to ``<root>/results/<slug>``. Params are validated before Prefect, torch or the method is imported.
"""

from __future__ import annotations

import importlib
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from paperflows.imports import files_digest, record_files
from paperflows.params import FLOWS_DIR, ParamsError, paper_slugs, read_params_file, resolve_params

if TYPE_CHECKING:
    from paperflows.core.experiment import PaperExperiment

RECORDS = "records"  # <root>/records/<slug>: small, in git, so a fresh clone can re-score without training
NOTES_FILE = "NOTES.md"
SPLIT_FILES = ("flow.py", "claims.py", "evaluate.py", NOTES_FILE)
SEED_COUNTS = ("seeds", "seed_cap", "extra_seeds")  # how many seeds: records of other counts can be reused
FRESH_ENV = "PAPERFLOWS_FRESH_RECORDS"  # 1: never append to stored records (a forced rerun from scratch)


def records_dir(out_root: Path, slug: str) -> Path:
    return Path(out_root).resolve() / RECORDS / slug


def is_split(slug: str) -> bool:
    """Whether ``slug`` is split into a records stage and an evaluation stage (it has ``claims.py``)."""
    return (FLOWS_DIR / slug / "claims.py").is_file()


def known_split(slug: str) -> None:
    if slug not in paper_slugs():
        raise ParamsError(f"unknown paper '{slug}'; known: {', '.join(paper_slugs())}")
    if not is_split(slug):
        raise ParamsError(f"flows/{slug} is a one-stage flow (no claims.py): use `paperflows run {slug}`")
    missing = [name for name in SPLIT_FILES if not (FLOWS_DIR / slug / name).is_file()]
    if missing:
        raise ParamsError(f"flows/{slug} has claims.py but lacks {', '.join(missing)}")


def load_experiment(slug: str) -> PaperExperiment:
    from paperflows.core.experiment import PaperExperiment

    known_split(slug)
    module = importlib.import_module(f"flows.{slug}.flow")
    found = [v for v in vars(module).values() if isinstance(v, PaperExperiment)]
    if len(found) != 1 or found[0].slug != slug:
        raise RuntimeError(f"flows/{slug}/flow.py must define exactly one @paper_experiment('{slug}', ...)")
    return found[0]


def code_digest(slug: str) -> str:
    """A digest of the code of the paper's records stage (the files ``dvc.yaml`` lists as its deps, see
    :func:`paperflows.imports.record_files`): records made by other code are never appended to."""
    return files_digest(record_files(slug))


def record_paper(slug: str, *, params_file: Path = Path("params.yaml"), **options: Any) -> dict[str, Any]:
    """Run the experiment of ``flows/<slug>`` (see :func:`record_experiment`) with ``params_file``; the params
    are validated before the paper's code is imported."""
    raw = read_params_file(params_file)
    resolve_params(slug, raw, options.get("smoke", False), options.get("overrides", ()))
    experiment = load_experiment(slug)
    return record_experiment(experiment, raw, code=code_digest(slug), **options)


def record_experiment(experiment: PaperExperiment, raw: dict[str, Any], *, code: str, out_root: Path = Path("."),
                      smoke: bool = False, overrides: Sequence[str] = (), runner: str = "threads",
                      dask_address: str | None = None, extra_tags: Sequence[str] = ()) -> dict[str, Any]:
    """Run ``experiment`` for the seeds its records under ``out_root`` lack, and save the records.

    Stored records made under the same key (the params apart from the seed counts, the base seed, ``code``: a
    digest of the experiment's source, the kernel fingerprint, the scale) are reused as they are when they cover
    exactly the run's seeds; a seed-separable experiment also keeps any stored seed and runs only new ones.
    ``PAPERFLOWS_FRESH_RECORDS=1`` reruns every seed. Nothing is written when the params are invalid.
    """
    from prefect import tags

    from paperflows.runners import make_task_runner
    from paperflows.core.fingerprint import fingerprint_digest
    from paperflows.core.records import grow_plan, load_records, merge_records, save_records, select_seeds
    from paperflows.core.seeding import seed_list

    slug = experiment.slug
    params, common = resolve_params(slug, raw, smoke, overrides, model=(experiment.params_model, experiment.smoke))
    if params.seed_cap is not None and not experiment.seed_separable:
        raise ParamsError(f"papers.{slug}.seed_cap: a second look appends seeds, which needs a seed-separable "
                          f"experiment (flows/{slug}/flow.py declares it is not)")
    seeds = seed_list(common.seed, params.all_seeds)
    dumped = params.model_dump(mode="json")
    key = {"params": {k: v for k, v in dumped.items() if k not in SEED_COUNTS}, "base_seed": common.seed,
           "code": code, "fingerprint": fingerprint_digest(), "smoke": smoke}
    data_dir = Path(out_root).resolve() / "data" / slug
    data_dir.mkdir(parents=True, exist_ok=True)  # a DVC output even when every seed's records are reused
    folder = records_dir(out_root, slug)
    stored = None
    if (folder / "meta.json").is_file() and os.environ.get(FRESH_ENV) != "1":
        stored = load_records(folder)
    todo = grow_plan(stored, key, seeds, experiment.seed_separable)

    started = time.perf_counter()
    if todo:
        stage = os.environ.get("DVC_STAGE")
        configured = experiment.flow.with_options(
            task_runner=make_task_runner(runner, common.max_workers, dask_address),
            flow_run_name=slug + (f"@{stage}" if stage else "") + ("-smoke" if smoke else ""))
        run_tags = (["paperflows", slug, "records", f"runner:{runner}", *extra_tags] + (["smoke"] if smoke else [])
                    + ([f"dvc:{stage}"] if stage else []))
        with tags(*run_tags):
            new = configured(params=dumped, seeds=todo, data_dir=str(data_dir),
                             results_dir=str(Path(out_root).resolve() / "results" / slug), smoke_run=smoke)
        new.meta["key"] = key
        reused = [s for s in seeds if s not in todo]
        records = merge_records(select_seeds(stored, reused), new, seeds) if reused else new
        records.meta["seeds_run"] = todo
    else:
        records = select_seeds(stored, seeds)
        records.meta["seeds_run"] = []
    save_records(records, folder)
    return {"paper": slug, "records_dir": str(folder), "seeds": seeds, "seeds_run": todo,
            "wall_s": time.perf_counter() - started}
