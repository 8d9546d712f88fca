"""Load and validate params, find the paper flows, and run one paper end to end."""

from __future__ import annotations

import importlib
import os
import time
from pathlib import Path
from typing import Any, Sequence

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tasks.paper import PaperFlow, PaperParams
from tasks.runners import make_task_runner
from tasks.seeding import seed_list

FLOWS_DIR = Path(__file__).resolve().parent.parent / "flows"  # the code; data, results and params live in the working directory


class ParamsError(ValueError):
    """Invalid params: the message names the key (``papers.lapsum.k ...``)."""


class CommonParams(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    seed: int = Field(ge=0, description="base seed; a paper's seeds are seed, seed+1, ...")
    max_workers: int = Field(ge=1, le=256, description="parallel tasks (threads, processes or Dask workers)")


CRON_FIELDS = 5


def paper_slugs() -> list[str]:
    """Every folder of ``flows/`` that holds a ``flow.py``."""
    return sorted(p.name for p in FLOWS_DIR.iterdir() if (p / "flow.py").is_file() and not p.name.startswith(("_", ".")))


def configured_slugs(params_file: Path = Path("params.yaml")) -> list[str]:
    """The papers of ``params.yaml`` (what ``dvc.yaml`` runs), in file order."""
    return list((read_params_file(params_file).get("papers") or {}))


def load_flow(slug: str) -> PaperFlow:
    if slug not in paper_slugs():
        raise ParamsError(f"unknown paper '{slug}'; known: {', '.join(paper_slugs())}")
    module = importlib.import_module(f"flows.{slug}.flow")
    found = [v for v in vars(module).values() if isinstance(v, PaperFlow)]
    if len(found) != 1:
        raise RuntimeError(f"flows/{slug}/flow.py must define exactly one @paper_flow, found {len(found)}")
    if found[0].paper.slug != slug:
        raise RuntimeError(f"flows/{slug}/flow.py declares slug '{found[0].paper.slug}'")
    return found[0]


def read_params_file(path: Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise ParamsError(f"params file {path} not found")
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise ParamsError(f"{path} is not valid YAML: {err}") from err
    unknown = set(raw) - {"common", "papers", "schedules"}
    if unknown:
        raise ParamsError(f"{path}: unknown top-level key(s) {sorted(unknown)}; expected common, papers, schedules")
    return raw


def _explain(prefix: str, err: ValidationError) -> str:
    messages = []
    for e in err.errors():
        key = ".".join([prefix, *map(str, e["loc"])])
        got = "" if e["type"] == "missing" else f" (got {e['input']!r})"
        messages.append(f"{key}: {e['msg']}{got}")
    return "; ".join(messages)


def parse_override(text: str) -> tuple[list[str], Any]:
    """``"k=200"`` or ``"common.seed=3"`` -> (key path, YAML-parsed value)."""
    if "=" not in text:
        raise ParamsError(f"override '{text}' must look like key=value")
    key, value = text.split("=", 1)
    return key.strip().split("."), yaml.safe_load(value)


def apply_overrides(section: dict[str, Any], common: dict[str, Any], overrides: Sequence[str]) -> None:
    for text in overrides:
        path, value = parse_override(text)
        target = common if path[0] == "common" else section
        path = path[1:] if path[0] == "common" else path
        for part in path[:-1]:
            target = target.setdefault(part, {})
        target[path[-1]] = value


def resolve_params(flow: PaperFlow, raw: dict[str, Any], smoke: bool = False,
                   overrides: Sequence[str] = ()) -> tuple[PaperParams, CommonParams]:
    """Validate ``papers.<slug>`` (with smoke values and ``key=value`` overrides applied) and ``common``."""
    slug = flow.paper.slug
    papers = raw.get("papers") or {}
    if slug not in papers:
        raise ParamsError(f"papers.{slug} is missing from params.yaml")
    section = dict(papers[slug] or {})
    common = dict(raw.get("common") or {})
    if smoke:
        section.update(flow.smoke)
    apply_overrides(section, common, overrides)
    try:
        common_params = CommonParams.model_validate(common)
    except ValidationError as err:
        raise ParamsError(_explain("common", err)) from None
    try:
        params = flow.params_model.model_validate(section)
    except ValidationError as err:
        raise ParamsError(_explain(f"papers.{slug}", err)) from None
    return params, common_params


def validate_schedules(raw: dict[str, Any]) -> dict[str, str]:
    schedules = raw.get("schedules") or {}
    known = set(raw.get("papers") or {})
    for slug, cron in schedules.items():
        if slug not in known:
            raise ParamsError(f"schedules.{slug}: no such paper")
        if not isinstance(cron, str) or len(cron.split()) != CRON_FIELDS:
            raise ParamsError(f"schedules.{slug}: expected a 5-field cron string, got {cron!r}")
    return dict(schedules)


def run_paper(slug: str, *, params_file: Path = Path("params.yaml"), **options: Any) -> dict[str, Any]:
    """Run the paper ``slug`` with its section of ``params_file``; see :func:`run_flow` for the options."""
    return run_flow(load_flow(slug), read_params_file(params_file), **options)


def run_flow(flow: PaperFlow, raw_params: dict[str, Any], *, out_root: Path = Path("."), smoke: bool = False,
             overrides: Sequence[str] = (), runner: str = "threads", dask_address: str | None = None) -> dict[str, Any]:
    """Validate, then run one paper's flow; outputs go to ``out_root/data/<slug>`` and ``out_root/results/<slug>``.

    Params are validated before anything runs or is written. Returns the flow's summary
    (results folder, verdict counts) with the wall time.
    """
    from prefect import tags

    slug = flow.paper.slug
    params, common = resolve_params(flow, raw_params, smoke, overrides)
    stage = os.environ.get("DVC_STAGE")
    run_name = slug + (f"@{stage}" if stage else "") + ("-smoke" if smoke else "")
    configured = flow.flow.with_options(
        task_runner=make_task_runner(runner, common.max_workers, dask_address),
        flow_run_name=run_name,
    )
    run_tags = ["paperflows", slug, f"runner:{runner}"] + (["smoke"] if smoke else []) + ([f"dvc:{stage}"] if stage else [])
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
