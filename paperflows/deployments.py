"""Deployments for ``paperflows serve``: one scheduled re-check per paper (see :mod:`paperflows.recheck`)."""

from __future__ import annotations

from pathlib import Path

from paperflows.params import check_params_file, read_params_file, validate_schedules
from paperflows.recheck import recheck_flow


def build_deployments(params_file: Path = Path("params.yaml")) -> list:
    """One deployment ``<slug>-recheck`` of the ``recheck`` flow per paper, with its cron schedule from
    ``params.yaml``'s ``schedules``. The params are read again when each run starts (a re-check uses
    the params of its day); here they are only validated, so a bad file fails now rather than at 3 a.m."""
    problems = check_params_file(params_file)
    if problems:
        raise ValueError("; ".join(problems))
    raw = read_params_file(params_file)
    schedules = validate_schedules(raw)
    flow = recheck_flow()
    return [flow.to_deployment(name=f"{slug}-recheck", parameters={"slug": slug}, cron=schedules.get(slug),
                               tags=["paperflows", slug, "recheck"])
            for slug in raw.get("papers") or {}]
