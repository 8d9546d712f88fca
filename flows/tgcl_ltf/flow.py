"""tgcl_ltf as a Prefect flow: LTF (error-minimising + distribution-preserving subset selection with an MMD
regulariser) against ER-random, iCaRL, EWC and LwF at equal memory on a drifting synthetic temporal graph."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.tgcl_ltf import method
from flows.tgcl_ltf.params import SMOKE, Params
from tasks import stats
from tasks.contract import Claim, Control, Paper, RunContext, RunOutput, ci
from tasks.data import save_parquet
from tasks.paper import over_seeds, paper_flow

LABEL = {"finetune": "Finetune (new classes only)", "joint": "Joint (all period data)", "er": "ER-random",
         "er_b": "ER-random (independent draw)", "icarl": "iCaRL (herding)", "ewc": "EWC", "lwf": "LwF",
         "ltf": "LTF", "ltf_select": "LTF selection without MMD (ablation)",
         "ltf_official": "LTF, official storage (distribution subset on top; not equal memory)"}
WHERE = ("on a drifting synthetic temporal graph (3 tasks x 2 new classes, class means rotating by `drift` rad over "
         "the stream), TGAT-lite backbone, average over tasks of the accuracy on each period's held-out events")
SCALED = ("a synthetic stream stands in for Yelp/Reddit/Amazon (no downloads); memory 50 events per old class for "
          "every replay method, LTF's distribution subset counted inside it and replayed too (equal storage, every stored "
          "event trains), decided before the run")
NULL = Control(name="ER-random with an independent memory draw in LTF's place (a null: same method, new draw)",
               metric="control.er_b_minus_er.mean", interval=ci("control.er_b_minus_er"))

PAPER = Paper(
    slug="tgcl_ltf",
    title="A Selective Learning Method for Temporal Graph Continual Learning",
    method="LTF (Learning Towards the Future): error-min kernel subset selection + MMD regulariser to the "
           "distribution subset",
    paper_class="B",
    source="abstracts-000.txt #13",
    official_code="liuhanmo321/dev_tgcl (SubGraphCL/methods/SubGraph.py, SubGraphCL/run.py; read, not copied)",
    claims=(
        Claim(id="ltf_beats_er",
              text=("we propose a selective learning framework that substitutes the old-class data with its subsets "
                    "... Experiments ... show that LTF effectively addresses the TGCL challenge: average accuracy "
                    f"LTF - ER-random > 0 at equal memory, {WHERE}"),
              source="abstract; plan claim 1 (direction)", metric="diff.ltf_minus_er.mean", comparison=">",
              threshold=0.0, kind="direction", role="claim", interval=ci("diff.ltf_minus_er"), control=NULL,
              scaled=SCALED),
        Claim(id="ltf_beats_icarl",
              text=f"average accuracy LTF - iCaRL (herding) > 0 at equal memory, {WHERE}",
              source="abstract; plan claim 1 (direction)", metric="diff.ltf_minus_icarl.mean", comparison=">",
              threshold=0.0, kind="direction", role="claim", interval=ci("diff.ltf_minus_icarl"),
              control=Control(name="Finetune (no old-class data) in LTF's place",
                              metric="control.finetune_minus_icarl.mean", interval=ci("control.finetune_minus_icarl")),
              scaled=SCALED),
        Claim(id="ltf_beats_regularisers",
              text=(f"average accuracy LTF - the better of EWC and LwF (by mean over seeds) > 0, {WHERE}; EWC and "
                    "LwF store no events, as in the official code; their penalty weight is the best of a small grid "
                    "on validation events, per seed"),
              source="abstract; issue 12 (baselines EWC, LwF)", metric="diff.ltf_minus_best_regulariser.mean",
              comparison=">", threshold=0.0, kind="direction", role="claim",
              interval=ci("diff.ltf_minus_best_regulariser"),
              control=Control(name="Finetune in LTF's place", metric="control.finetune_minus_best_regulariser.mean",
                              interval=ci("control.finetune_minus_best_regulariser")),
              scaled=SCALED),
        Claim(id="ltf_margin_1pp",
              text=("LTF - the best replay baseline (ER-random or iCaRL, the better by mean over seeds) >= 1 pp "
                    f"average accuracy, {WHERE}"),
              source="plan claim 2 (magnitude)", metric="diff.ltf_minus_best_replay.mean", comparison=">=",
              threshold=0.01, kind="magnitude", role="claim", interval=ci("diff.ltf_minus_best_replay"),
              control=Control(name="ER-random (independent draw) in LTF's place",
                              metric="control.er_b_minus_best_replay.mean",
                              interval=ci("control.er_b_minus_best_replay")),
              scaled=SCALED),
        Claim(id="ltf_forgets_less_than_er",
              text=("average forgetting(LTF) - forgetting(ER-random) <= 0 (strictly below, by the interval rule), "
                    f"{WHERE}; forgetting of a class group = its best earlier accuracy minus its final accuracy"),
              source="plan claim 3 (direction)", metric="diff.forgetting_ltf_minus_er.mean", comparison="<=",
              threshold=0.0, kind="direction", role="claim", interval=ci("diff.forgetting_ltf_minus_er"),
              control=Control(name="ER-random with an independent memory draw in LTF's place",
                              metric="control.forgetting_er_b_minus_er.mean",
                              interval=ci("control.forgetting_er_b_minus_er")),
              scaled=SCALED),
        Claim(id="old_classes_evolve",
              text=("TGCL: old classes evolve -- the frozen task-0 model loses accuracy on its own classes between the "
                    "first and the last period (> 0; holds by construction of the drifting stream)"),
              source="abstract (problem definition)", metric="sanity.stale_drop.mean", comparison=">",
              threshold=0.0, kind="direction", role="sanity", interval=ci("sanity.stale_drop")),
        Claim(id="old_data_needed",
              text="focusing only on new classes results in forgetting: ER-random - Finetune average accuracy > 0",
              source="abstract", metric="sanity.er_minus_finetune.mean", comparison=">", threshold=0.0,
              kind="direction", role="sanity", interval=ci("sanity.er_minus_finetune")),
        Claim(id="joint_upper_bound",
              text="training on all old-class data (Joint) beats a 50-event subset (ER-random): difference > 0",
              source="abstract (updating with full data is the costly reference)",
              metric="sanity.joint_minus_er.mean", comparison=">", threshold=0.0, kind="direction", role="sanity",
              interval=ci("sanity.joint_minus_er")),
        Claim(id="equal_memory",
              text=("every equal-memory replay method stores exactly the same number of events (max - min of the "
                    "stored counts over ER, ER-b, iCaRL, LTF and its ablation, all seeds) = 0"),
              source="issue 12 (equal memory)", metric="sanity.stored_spread", comparison="<=", threshold=0.0,
              kind="exact", role="sanity"),
    ),
    limitations=(
        "A synthetic drifting event stream (tasks.graphs.temporal_stream) stands in for Yelp, Reddit and Amazon; the "
        "task is classification of each event's source node, with a one-layer TGAT-style backbone (no DyGFormer or "
        "GraphMixer). Storage is equal across replay methods: LTF's distribution subset is counted inside the same "
        "50 events per class and replayed with the error-min subset, so every method trains on all 50 stored events "
        "(the official code stores it on top of the replay memory, 500 beside 1000, and replays only the error-min "
        "subset; the ltf_official diagnostic does so). Old-class "
        "pools are a few hundred events, so the official partitioning (k-means/random parts of 10,000) is a single "
        "part. The MMD regulariser is the full biased MMD^2 the paper derives; the official code keeps only the "
        "cross term (its XX term is commented out). LTF's hyper-parameters follow the official run.py (loss weight "
        "1, MMD weight 0.05, reg_gamma 0.1, distribution subset 1/3 of the stored events); none was tuned here. SSM, "
        "OTGNet and the paper's AP metric are not run. EWC and LwF store no events (as officially). Changed after "
        "review, before the rerun: EWC's Fisher is the mean of per-event squared gradients (it was the squared "
        "gradient of batch means, about batch-size times too small), and EWC's lambda (grid 1, 100, 1e4) and LwF's "
        "weight (0.1, 1, 10) are chosen per seed on held-out validation events (10% of the non-test events, taken "
        "from every method's training data); the chosen values are in the notes. One pre-claim single-seed trial was run with a 10-event "
        "distribution subset, MMD weight 1 and gamma 1/16 before these official values were read and fixed."
    ),
)


def _by_seed(rows: pd.DataFrame, m: str, col: str) -> np.ndarray:
    return rows[rows["method"] == m].sort_values("seed")[col].to_numpy(dtype=float)


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
        "sanity": {"stale_drop": stats.summarize(probe.sort_values("seed")["stale_drop"]),
                   "er_minus_finetune": stats.paired_difference(acc["er"], acc["finetune"]),
                   "joint_minus_er": stats.paired_difference(acc["joint"], acc["er"]),
                   "stored_spread": float(stored.max() - stored.min()),
                   "stored_per_replay_method": float(stored.max())},
    }


@paper_flow(PAPER, Params, smoke=SMOKE)
def tgcl_ltf_flow(params: Params, ctx: RunContext) -> RunOutput:
    per_seed = [row for rows in over_seeds(method.run_seed, ctx.seeds, p=params) for row in rows]
    frame = pd.DataFrame(per_seed)
    probe = frame[frame["method"] == "drift_probe"][["seed", "stale_drop"]]
    rows = frame[frame["method"] != "drift_probe"].drop(columns=["stale_drop"])
    save_parquet(rows, ctx.data_dir / "per_seed.parquet")
    metrics = _metrics(rows, probe)

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
                     setup=_setup(params, metrics), notes=_notes(metrics))


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


def _fmt(d: dict, pct: bool = True) -> str:
    k = 100 if pct else 1
    return f"{k * d['mean']:+.1f} pp [{k * d['ci_low']:+.1f}, {k * d['ci_high']:+.1f}]"


def _notes(metrics: dict) -> str:
    m, d, c = metrics["methods"], metrics["diff"], metrics["control"]
    order = sorted(method.METHODS, key=lambda x: -m[x]["avg_accuracy"]["mean"])
    ranking = ", ".join(f"{LABEL[x]} {100 * m[x]['avg_accuracy']['mean']:.1f}%" for x in order)
    return (
        f"Average accuracy (mean over seeds), best first: {ranking}. "
        f"LTF - ER-random: {_fmt(d['ltf_minus_er'])} (null control ER - ER: {_fmt(c['er_b_minus_er'])}); "
        f"LTF - iCaRL: {_fmt(d['ltf_minus_icarl'])}; LTF - {LABEL[metrics['best_regulariser']]}: "
        f"{_fmt(d['ltf_minus_best_regulariser'])} (weights chosen on validation, per seed: EWC lambda "
        f"{metrics['chosen_weight']['ewc']}, LwF {metrics['chosen_weight']['lwf']}). Forgetting LTF - ER: {_fmt(d['forgetting_ltf_minus_er'])}. "
        f"Ablation: LTF's selection without the MMD term - ER: {_fmt(d['ltf_select_minus_er'])}; the MMD term's own "
        f"effect (LTF - ablation): {_fmt(d['ltf_minus_ltf_select'])}. Diagnostic added after the first full run "
        f"(no claim): LTF with the official storage ({m['ltf_official']['stored_events']['mean']:.0f} stored "
        f"events, all error-min events replayed) - ER-random ({m['er']['stored_events']['mean']:.0f}): "
        f"{_fmt(d['ltf_official_minus_er'])}. Caveat from the null control: with 5 seeds the paired Student-t "
        f"interval of ER - ER (independent draws) is {_fmt(c['er_b_minus_er'])} in accuracy and "
        f"{_fmt(c['forgetting_er_b_minus_er'])} in forgetting, so differences of a pp or two between replay "
        "methods are at the noise floor of this setup. "
        f"The frozen task-0 model loses {_fmt(metrics['sanity']['stale_drop'])} on its own classes by the last "
        "period: the old classes do evolve, so what matters is how well the stored subset of the current period "
        "stands in for the full old-class data."
    )
