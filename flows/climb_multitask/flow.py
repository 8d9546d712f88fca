"""CLIMB's multitask-pretraining study, the experiment, on a synthetic mini-CLIMB: multitask pretraining against
single-task training (ECG, ultrasound-like images), few-shot transfer to a held-out ECG task, and ECG + EHR fusion.

Records: ``scores``, one row per seed, modality, quantity (``target_auc``, ``few_shot``, ``fusion``, ``spearman``,
``spearman_shuffled``, ``ehr_only_auc``, ``pretrain_loss``, ``control_pretrain_loss``), setting (few-shot k, encoder,
fusion; "" where none) and arm ("" where none). Scored by ``evaluate.py`` against the claims in ``claims.py``.
"""

from __future__ import annotations

import pandas as pd

from flows.climb_multitask import method
from flows.climb_multitask.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import over_seeds, paper_experiment
from tasks.data import save_parquet

NESTED = ("few_shot", "fusion")  # setting -> arm -> value; spearman(_shuffled) are fusion -> value


@paper_experiment("climb_multitask", Params, smoke=SMOKE, seed_separable=True)
def climb_multitask_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """Multitask pretraining, single-task and permuted-label encoders on the mini-CLIMB of every seed."""
    runs = sorted(over_seeds(method.run_seed, ctx.seeds, p=params), key=lambda r: r["seed"])
    scores = pd.DataFrame([row for r in runs for row in score_rows(r)])
    save_parquet(scores, ctx.data_dir / "scores.parquet")  # the mini-CLIMB is regenerated per seed: its scores
    return {"scores": scores}


def score_rows(run: dict) -> list[dict]:
    """The long rows of one ``method.run_seed`` result."""
    def row(modality: str, quantity: str, setting: str, arm: str, value: float) -> dict:
        return {"seed": run["seed"], "modality": modality, "quantity": quantity, "setting": setting, "arm": arm,
                "value": float(value)}

    ecg = run["ecg"]
    rows = [row("ecg", "target_auc", "", arm, v) for arm, v in ecg["target_auc"].items()]
    rows += [row("ultrasound", "target_auc", "", arm, v) for arm, v in run["ultrasound"].items()]
    rows += [row("ecg", quantity, setting, arm, v) for quantity in NESTED for setting, by_arm in ecg[quantity].items()
             for arm, v in by_arm.items()]
    rows += [row("ecg", quantity, fusion, "", v) for quantity in ("spearman", "spearman_shuffled")
             for fusion, v in ecg[quantity].items()]
    rows += [row("ecg", quantity, "", "", ecg[quantity])
             for quantity in ("ehr_only_auc", "pretrain_loss", "control_pretrain_loss")]
    return rows
