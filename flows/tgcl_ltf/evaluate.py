"""LTF on temporal graphs, the evaluation: paired accuracy and forgetting differences over seeds, the controls,
the per-task accuracy curves, the figure and the measured numbers."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.tgcl_ltf import method
from flows.tgcl_ltf.params import Params
from paperflows.core import estimates as est
from paperflows.core import stats
from paperflows.core.contract import RunOutput
from paperflows.core.records import Records

LABEL = {"finetune": "Finetune (new classes only)", "joint": "Joint (all period data)", "er": "ER-random",
         "er_b": "ER-random (independent draw)", "icarl": "iCaRL (herding)", "ewc": "EWC", "lwf": "LwF",
         "ltf": "LTF", "ltf_select": "LTF selection without MMD (ablation)",
         "ltf_official": "LTF, official storage (distribution subset on top; not equal memory)"}


def evaluate(params: Params, records: Records) -> RunOutput:
    rows = records["per_seed"]
    metrics = _metrics(rows, records["probe"])
    task_cols = [f"acc_task{i}" for i in range(params.n_tasks)]
    curves = rows.groupby("method")[task_cols].mean()
    plot = pd.DataFrame([{"x": i, "y": float(curves.loc[m, c]), "series": LABEL[m]}
                         for m in method.METHODS for i, c in enumerate(task_cols)])
    figure, axis = plt.subplots(figsize=(7, 4.5))
    for m in method.METHODS:
        axis.plot(range(params.n_tasks), curves.loc[m], "o-" if m.startswith("ltf") else ".--", label=LABEL[m])
    axis.set(xlabel="task (period)", ylabel="accuracy on the period's test events, all seen classes",
             title="TGCL on a drifting temporal graph (mean over seeds)", xticks=range(params.n_tasks))
    axis.legend(fontsize=7)
    table = pd.DataFrame([{"method": LABEL[m], **{k: metrics["methods"][m][k]["mean"] for k in
                                                 ("avg_accuracy", "forgetting", "final_accuracy", "stored_events")}}
                          for m in method.METHODS])
    return RunOutput(metrics=metrics, tables={"plot": plot, "methods": table}, figure=figure,
                     setup=_setup(params, metrics), notes=_measured(metrics))


def _by_seed(rows: pd.DataFrame, m: str, col: str) -> np.ndarray:
    return est.per_seed(rows, col, method=m)


def _better(rows: pd.DataFrame, candidates: tuple[str, ...]) -> str:
    """The candidate with the highest mean average accuracy over seeds (decided in the run, not per seed)."""
    return max(candidates, key=lambda m: _by_seed(rows, m, "avg_accuracy").mean())


def _metrics(rows: pd.DataFrame, probe: pd.DataFrame) -> dict:
    acc = {m: _by_seed(rows, m, "avg_accuracy") for m in method.METHODS}
    fgt = {m: _by_seed(rows, m, "forgetting") for m in method.METHODS}
    best_replay, best_reg = _better(rows, ("er", "icarl")), _better(rows, ("ewc", "lwf"))
    stored = rows[rows["method"].isin(method.EQUAL_MEMORY)]["stored_events"]
    return {
        "chosen_weight": {m: [float(w) for w in _by_seed(rows, m, "weight")] for m in ("ewc", "lwf")},
        "methods": stats.summarize_by(rows, "method", ["avg_accuracy", "forgetting", "final_accuracy",
                                                       "stored_events"]),
        "best_replay_baseline": best_replay, "best_regulariser": best_reg,
        "diff": {"ltf_minus_er": stats.paired_difference(acc["ltf"], acc["er"]),
                 "ltf_minus_icarl": stats.paired_difference(acc["ltf"], acc["icarl"]),
                 "ltf_minus_best_regulariser": stats.paired_difference(acc["ltf"], acc[best_reg]),
                 "ltf_minus_best_replay": stats.paired_difference(acc["ltf"], acc[best_replay]),
                 "forgetting_ltf_minus_er": stats.paired_difference(fgt["ltf"], fgt["er"]),
                 "ltf_select_minus_er": stats.paired_difference(acc["ltf_select"], acc["er"]),
                 "ltf_minus_ltf_select": stats.paired_difference(acc["ltf"], acc["ltf_select"]),
                 "ltf_official_minus_er": stats.paired_difference(acc["ltf_official"], acc["er"])},
        "control": {"er_b_minus_er": stats.paired_difference(acc["er_b"], acc["er"]),
                    "finetune_minus_icarl": stats.paired_difference(acc["finetune"], acc["icarl"]),
                    "finetune_minus_best_regulariser": stats.paired_difference(acc["finetune"], acc[best_reg]),
                    "er_b_minus_best_replay": stats.paired_difference(acc["er_b"], acc[best_replay]),
                    "forgetting_er_b_minus_er": stats.paired_difference(fgt["er_b"], fgt["er"])},
        "sanity": {"stale_drop": est.summary(probe, "stale_drop"),
                   "er_minus_finetune": stats.paired_difference(acc["er"], acc["finetune"]),
                   "joint_minus_er": stats.paired_difference(acc["joint"], acc["er"]),
                   "stored_spread": float(stored.max() - stored.min()),
                   "stored_per_replay_method": float(stored.max())},
    }


def _setup(p: Params, metrics: dict) -> str:
    return (
        f"Stream: tasks.graphs.temporal_stream with {p.n_nodes} nodes, {p.n_events} events on [0, 1), "
        f"{p.n_tasks} tasks (equal periods) introducing {p.classes_per_task} classes each, homophily {p.homophily}, "
        f"{p.n_features}-d event features = class mean rotated by {p.drift} rad over the stream + N(0, {p.noise}^2). "
        f"{p.test_fraction:.0%} of each period's events are held out. Backbone: TGAT-style attention of the event "
        f"over the source's last {p.k_neighbours} earlier events (tasks.gnn.recent_events, TemporalAttention; "
        f"{p.embedding_dim}-d embedding), linear head over the seen classes; Adam lr {p.lr}, {p.epochs} epochs per "
        f"task, batch {p.batch_size}. Task 0 is trained once per seed and shared by every method. At task i each "
        f"method trains on the period's new-class events; replay methods add a batch from "
        f"{p.memory_per_class} stored events per old class, chosen from the period's old-class training events with "
        f"the task i-1 model (stored per replay method: "
        f"{metrics['sanity']['stored_per_replay_method']:.0f} events at the last task). LTF stores "
        f"{p.ltf_distribution_per_class} distribution events (greedy kernel selection, MMD target, weight "
        f"{p.ltf_mmd_weight}, gamma {p.ltf_reg_gamma}) and {p.memory_per_class - p.ltf_distribution_per_class} "
        f"error-min events (greedy kernel selection with the min-max normalised loss x {p.ltf_loss_weight}) per "
        "old class, and replays all of them. EWC "
        f"(per-event Fisher from {p.ewc_fisher_events} previous-task events, lambda in {p.ewc_lambdas}) and LwF "
        f"(weight in {p.lwf_weights}, T {p.lwf_temperature}) store no events; their weight is chosen per seed by "
        f"the average accuracy on each period's validation events ({p.val_fraction:.0%} of the non-test events, "
        "held out from every method's training). "
        f"{p.seeds} seeds; intervals are 95% paired Student-t intervals over seeds."
    )


def _pp_interval(d: dict, pct: bool = True) -> str:
    """An interval dict as 'mean pp [low, high]'."""
    k = 100 if pct else 1
    return f"{k * d['mean']:+.1f} pp [{k * d['ci_low']:+.1f}, {k * d['ci_high']:+.1f}]"


def _measured(metrics: dict) -> str:
    """The measured numbers behind the claims, for the notes (how to read them is in NOTES.md)."""
    m, d, c = metrics["methods"], metrics["diff"], metrics["control"]
    order = sorted(method.METHODS, key=lambda x: -m[x]["avg_accuracy"]["mean"])
    ranking = ", ".join(f"{LABEL[x]} {100 * m[x]['avg_accuracy']['mean']:.1f}%" for x in order)
    return (
        f"**Measured.** Average accuracy (mean over seeds), best first: {ranking}. "
        f"LTF - ER-random: {_pp_interval(d['ltf_minus_er'])} (null control ER - ER: {_pp_interval(c['er_b_minus_er'])}); "
        f"LTF - iCaRL: {_pp_interval(d['ltf_minus_icarl'])}; LTF - {LABEL[metrics['best_regulariser']]}: "
        f"{_pp_interval(d['ltf_minus_best_regulariser'])} (weights chosen on validation, per seed: EWC lambda "
        f"{metrics['chosen_weight']['ewc']}, LwF {metrics['chosen_weight']['lwf']}). Forgetting LTF - ER: "
        f"{_pp_interval(d['forgetting_ltf_minus_er'])}. Ablation: LTF's selection without the MMD term - ER: "
        f"{_pp_interval(d['ltf_select_minus_er'])}; the MMD term's own effect (LTF - ablation): "
        f"{_pp_interval(d['ltf_minus_ltf_select'])}. Diagnostic (no claim): LTF with the official storage "
        f"({m['ltf_official']['stored_events']['mean']:.0f} stored events, all error-min events replayed) - "
        f"ER-random ({m['er']['stored_events']['mean']:.0f}): {_pp_interval(d['ltf_official_minus_er'])}. Null "
        f"control in forgetting (ER - ER, independent draws): {_pp_interval(c['forgetting_er_b_minus_er'])}. The "
        f"frozen task-0 model's change on its own classes by the last period: "
        f"{_pp_interval(metrics['sanity']['stale_drop'])}."
    )
