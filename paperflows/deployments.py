"""Deployments of every paper flow, for ``paperflows serve``."""

from __future__ import annotations

from pathlib import Path

from tasks.pipeline import load_flow, read_params_file, resolve_params, validate_schedules
from tasks.seeding import seed_list


def build_deployments(params_file: Path = Path("params.yaml")) -> list:
    """One deployment per paper, parameterised from ``params.yaml`` (validated now, not at 3 a.m.)."""
    raw = read_params_file(params_file)
    schedules = validate_schedules(raw)
    deployments = []
    for slug in raw.get("papers") or {}:
        flow = load_flow(slug)
        params, common = resolve_params(flow, raw)
        deployments.append(flow.flow.to_deployment(
            name=f"{slug}-scheduled",
            parameters={"params": params.model_dump(mode="json"), "seeds": seed_list(common.seed, params.seeds),
                        "data_dir": str(Path.cwd() / "data" / slug), "results_dir": str(Path.cwd() / "results" / slug)},
            cron=schedules.get(slug),
            tags=["paperflows", slug, "scheduled"],
        ))
    return deployments
