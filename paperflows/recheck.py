"""A scheduled run is a re-check, not an overwrite.

:func:`recheck_paper` (what the deployments of ``paperflows serve`` call) reads ``params.yaml`` when it
runs, writes the fresh run into a dated folder outside ``results/`` (so DVC and git stay clean),
compares its verdicts with the committed ``results/<slug>/metrics.json`` claim by claim, publishes the
comparison as the Prefect artifact ``<slug>-drift`` and fails, visibly, when any verdict changed:
continuous re-verification as library versions move.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from paperflows.core.io import atomic_write_json
from paperflows.pipeline import run_paper
from paperflows.summary import load_metrics

RECHECK_DIR = Path(".paperflows") / "rechecks"


class VerdictDrift(RuntimeError):
    """A re-check's verdicts differ from the committed ones."""


def compare_verdicts(committed: dict[str, Any] | None, fresh: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per claim of either run: both verdicts and observed values, and whether the verdict changed."""
    before = (committed or {}).get("claims", {})
    after = fresh["claims"]
    rows = []
    for claim in sorted(set(before) | set(after)):
        old, new = before.get(claim, {}), after.get(claim, {})
        rows.append({"claim": claim, "committed": old.get("verdict", "absent"), "now": new.get("verdict", "absent"),
                     "changed": old.get("verdict") != new.get("verdict"),
                     "committed observed": old.get("observed"), "observed now": new.get("observed")})
    return rows


def recheck_paper(slug: str, *, root: Path = Path("."), stamp: str | None = None, smoke: bool = False,
                  runner: str = "threads") -> dict[str, Any]:
    """Rerun ``slug`` with ``root/params.yaml`` as it is now into ``root/.paperflows/rechecks/<stamp>/``
    and compare its verdicts with ``root/results/<slug>/metrics.json``.

    Returns ``{"slug", "out_root", "rows", "changed"}`` and writes it as ``drift.json`` beside the run;
    raises :class:`VerdictDrift` (after writing and publishing) when a verdict changed.
    """
    root = Path(root)
    stamp = stamp or datetime.now(timezone.utc).strftime("%Y-%m-%dT%H%M%SZ")
    out_root = root / RECHECK_DIR / stamp
    run_paper(slug, params_file=root / "params.yaml", out_root=out_root, smoke=smoke, runner=runner,
              extra_tags=("recheck",))
    fresh = load_metrics(out_root / "results", slug)
    rows = compare_verdicts(load_metrics(root / "results", slug), fresh)
    changed = [r["claim"] for r in rows if r["changed"]]
    report = {"slug": slug, "out_root": str(out_root), "rows": rows, "changed": changed}
    atomic_write_json(out_root / "results" / slug / "drift.json", report)
    _publish(slug, rows, changed)
    if changed:
        raise VerdictDrift(f"{slug}: verdicts changed for {', '.join(changed)} (see {out_root / 'results' / slug / 'drift.json'})")
    return report


def _publish(slug: str, rows: list[dict[str, Any]], changed: list[str]) -> None:
    from prefect.artifacts import create_table_artifact
    from prefect.context import FlowRunContext

    if FlowRunContext.get() is None:
        return
    artifact_rows = [{k: json.dumps(v) if not isinstance(v, str) else v for k, v in r.items()} for r in rows]
    create_table_artifact(key=f"{slug.replace('_', '-')}-drift", table=artifact_rows,
                          description=f"{slug}: verdicts of this re-check against the committed ones"
                                      + (f"; CHANGED: {', '.join(changed)}" if changed else "; none changed"))


def recheck_flow():
    """The Prefect flow a scheduled deployment runs: ``recheck(slug)`` -> :func:`recheck_paper`."""
    from prefect import flow

    @flow(name="recheck", log_prints=True, validate_parameters=False)
    def recheck(slug: str) -> dict[str, Any]:
        """Rerun one paper with today's params and libraries; fail when a verdict moved."""
        return recheck_paper(slug, root=Path.cwd())

    return recheck
