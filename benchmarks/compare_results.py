"""Compare two results trees paper by paper: every non-timing measurement and every non-timing claim's
observed value, interval and verdict must be identical.

Interval dicts whose point estimate is named ``ratio`` or ``slope`` are read as the ``mean`` that
``tasks.stats`` (now ``paperflows.core.stats``) called them before the keys were named after the statistic; the params every paper gained for
the two looks (``seed_cap``, ``extra_seeds``) count as unchanged at their defaults.
Usage: python benchmarks/compare_results.py OLD_RESULTS_DIR NEW_RESULTS_DIR [SLUG ...]
Exit 1 when any paper differs.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from paperflows.core.report import flatten  # noqa: E402

RENAMED = ("ratio", "slope")
SEED_DEFAULTS = {"seed_cap": None, "extra_seeds": 0}
"""Params every paper gained with the two looks: at these values, absent before, they change nothing."""


def measurements(metrics: dict) -> dict:
    """``metrics`` flattened as the report flattens them, without the timings; an interval's point estimate
    named ``ratio`` or ``slope`` under the name ``mean`` that older trees gave it."""
    flat = {key: value for key, value in flatten(metrics).items() if "timings" not in key.split(".")}
    return {current_name(key, flat): value for key, value in flat.items()}


def current_name(key: str, flat: dict) -> str:
    parent, _, leaf = key.rpartition(".")
    prefix = f"{parent}." if parent else ""
    return f"{prefix}mean" if leaf in RENAMED and f"{prefix}ci_low" in flat else key


def same(a, b) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def differences(old: dict, new: dict) -> list[str]:
    problems = []
    before, after = measurements(old["metrics"]), measurements(new["metrics"])
    for key in sorted(set(before) | set(after)):
        if key not in before or key not in after:
            problems.append(f"metric {key}: only in {'old' if key in before else 'new'}")
        elif not same(before[key], after[key]):
            problems.append(f"metric {key}: {before[key]!r} -> {after[key]!r}")
    for cid, claim in old["claims"].items():
        if claim["metric"].startswith("timings."):
            continue
        fresh = new["claims"].get(cid)
        if fresh is None:
            problems.append(f"claim {cid}: missing")
            continue
        for field in ("observed", "ci_low", "ci_high", "verdict", "threshold", "comparison"):
            if not same(claim.get(field), fresh.get(field)):
                problems.append(f"claim {cid}.{field}: {claim.get(field)!r} -> {fresh.get(field)!r}")
    if old["params"] != {k: v for k, v in new["params"].items() if k in old["params"] or SEED_DEFAULTS.get(k, v) != v}:
        problems.append("params differ")
    return problems


def main(old_root: Path, new_root: Path, slugs: list[str]) -> int:
    slugs = slugs or sorted(p.parent.name for p in old_root.glob("*/metrics.json"))
    failed = 0
    for slug in slugs:
        old, new = (json.loads((root / slug / "metrics.json").read_text()) for root in (old_root, new_root))
        problems = differences(old, new)
        failed += bool(problems)
        print(f"{slug}: {len(measurements(old['metrics']))} metrics, {len(old['claims'])} claims: "
              + ("identical" if not problems else f"{len(problems)} differences"))
        for problem in problems[:20]:
            print(f"  {problem}")
    print(f"{len(slugs) - failed} of {len(slugs)} papers identical apart from timings")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]))
