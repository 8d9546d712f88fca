"""Creative composition (Shen & Guestrin), the experiment: the thematic analysis of a prompt log (filters, MinHash
dedup, MiniLM embeddings, clustering, zero-shot coding) on planted logs with known use categories, across a sweep
of the simulated log's knobs.

Records: ``runs`` (one row per seed and setting of the knobs: planted and estimated prevalence, coding F1, filter
and dedup rates, the planted and estimated usage distributions), ``lost_by_category`` (per seed, setting and
category, the share of distinct prompts lost to dedup), ``themes`` (per seed and setting, the coded clusters) and,
when a real prompt log is configured, ``real_data`` (its analysis). Scored by ``evaluate.py`` against the claims
in ``claims.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from flows.creative_composition import method
from flows.creative_composition.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import over_seeds, paper_experiment, run_task
from tasks.data import save_parquet

KNOBS = ("creative_share", "duplicate_rate", "junk_share")


# Seed-separable: each seed generates its own logs; the optional real-prompt analysis does not depend on the seed.
@paper_experiment("creative_composition", Params, smoke=SMOKE, seed_separable=True)
def creative_composition_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """The prompt-log pipeline on every seed's planted logs, one per setting of the sweep."""
    runs = [row for rows in over_seeds(method.run_seed, ctx.seeds, p=params, settings=method.sweep_settings(params))
            for row in rows]
    records = pd.DataFrame([{k: v for k, v in r.items() if k not in ("themes", "lost_by_category")} for r in runs])
    save_parquet(records.drop(columns=["usage", "planted_usage"]), ctx.data_dir / "runs.parquet")
    tables = {
        "runs": records,
        "lost_by_category": pd.DataFrame([{"seed": r["seed"], **{k: r[k] for k in KNOBS}, "category": c, "lost": lost}
                                          for r in runs for c, lost in r["lost_by_category"].items()]),
        "themes": pd.DataFrame([{"seed": r["seed"], **{k: r[k] for k in KNOBS}, **theme}
                                for r in runs for theme in r["themes"]]),
    }
    if params.real_prompts_jsonl:
        texts = method.load_prompts_jsonl(Path(params.real_prompts_jsonl), params.real_max_prompts)
        # one analysis for the whole run, filed under its first seed
        tables["real_data"] = pd.DataFrame([{"seed": ctx.seeds[0], "analysis": json.dumps(
            run_task(method.analyse_real, texts=texts, p=params))}])
    return tables
