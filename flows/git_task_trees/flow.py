"""GIT as a Prefect flow: task-tree pretraining on 4 synthetic source domains of a shared feature space, then
5-shot fine-tuning and in-context prototype inference on 2 held-out domains (node, link and graph tasks), against
training from scratch, a node-only pretrained GNN, raw-feature prototypes, and a noise-pretrained control."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.git_task_trees import method
from flows.git_task_trees.params import SMOKE, Params
from tasks import stats
from tasks.contract import Claim, Control, Paper, RunContext, RunOutput, ci
from tasks.data import save_parquet
from tasks.paper import over_seeds, paper_flow

WHERE = "on 2 held-out synthetic domains (CSBM node graphs + small networkx-family graphs, shared feature space)"
NOISE = "GIT pretrained on noise domains (ER structure, N(0, I) features: nothing to transfer)"

PAPER = Paper(
    slug="git_task_trees",
    title="Towards Graph Foundation Models: Learning Generalities Across Graphs via Task-Trees",
    method="GIT: GraphSAGE encoder + task-tree pooling, pretrained by cross-view task-tree reconstruction "
           "with a KL alignment regulariser, adapted by few-shot fine-tuning or in-context prototypes",
    paper_class="B",
    source="abstracts-000.txt #8",
    official_code="Zehong-Wang/GIT (model/pretrain_model.py, model/encoder.py, config/base.yaml read)",
    claims=(
        Claim(id="finetune_beats_scratch_2_of_3_levels",
              text=("pretraining a GNN on diverse task-trees with a reconstruction objective induces transferable "
                    "knowledge. This enables efficient adaptation to downstream tasks with minimal fine-tuning -- "
                    "5-shot fine-tune accuracy GIT - scratch >= 2 pp on at least 2 of the 3 task levels (node, "
                    f"link, graph) {WHERE}: the metric is the second-largest of the three level gains "
                    "(mean over seeds and domains)"),
              source="abstract; plan claim 1 (direction + magnitude)", metric="finetune_gain.git.second_best.mean",
              comparison=">=", threshold=0.02, kind="magnitude", role="claim",
              interval=ci("finetune_gain.git.second_best"), per_setting="finetune_gain.git.by_level",
              # if pretraining on content-free graphs also 'gains', the gain is optimisation, not transfer
              control=Control(name=f"{NOISE} - scratch", metric="finetune_gain.noise.second_best.mean",
                              interval=ci("finetune_gain.noise.second_best"))),
        Claim(id="incontext_beats_raw_prototypes_node",
              text=("GIT demonstrates strong performance ... via in-context learning -- in-context prototype "
                    "accuracy (class means of the support task-tree embeddings, no updates) of GIT > raw-feature "
                    f"prototypes on the held-out node tasks {WHERE}"),
              source="abstract; plan claim 2 (direction)", metric="incontext_node.git_minus_raw.mean",
              comparison=">", threshold=0.0, kind="direction", role="claim",
              interval=ci("incontext_node.git_minus_raw"), per_setting="incontext_node.git_minus_raw_by_domain",
              # an untrained encoder already averages neighbours: if it beats raw too, structure (not
              # pretraining) explains the gain
              control=Control(name="untrained (random-init) encoder in context - raw prototypes",
                              metric="incontext_node.random_minus_raw.mean",
                              interval=ci("incontext_node.random_minus_raw"))),
        Claim(id="all_task_trees_beat_node_only_graph_level",
              text=("task-trees ... serve as unified learning instances aligning node-, edge-, and graph-level "
                    "tasks -- graph-level 5-shot fine-tune accuracy of GIT pretrained on all task-tree levels >= "
                    f"the same GNN pretrained on node task-trees only (same graphs, loss and steps) {WHERE}"),
              source="abstract; plan claim 3 (direction)", metric="graph_level.git_minus_node_only.mean",
              comparison=">=", threshold=0.0, kind="direction", role="claim",
              interval=ci("graph_level.git_minus_node_only"),
              control=Control(name=f"{NOISE} - node-only", metric="graph_level.noise_minus_node_only.mean",
                              interval=ci("graph_level.noise_minus_node_only"))),
        Claim(id="pretraining_loss_decreases",
              text="our implementation: the GIT pretraining loss (mean of the last 10 steps) / its first step < 1 "
                   "on every seed (largest ratio over seeds)",
              source="implementation check", metric="pretrain.git_loss_ratio_max", comparison="<", threshold=1.0,
              kind="direction", role="sanity"),
    ),
    limitations=(
        "Synthetic, laptop-scale stand-in for the paper's 30+ real graphs with LLM text features: 4 source and 2 "
        "held-out domains of one shared 32-d feature space (class prototypes shared across domains, a random shift "
        "per domain), CSBM node graphs of a few hundred nodes and small networkx-family graphs. The official "
        "pretraining (lr 1e-7 for 10 epochs over millions of task-trees) cannot be matched; here it runs full-batch "
        "AdamW at lr 1e-3 for a few hundred steps. Not run: zero-shot inference, domain specialisation (GIT-S "
        "SFT on a sibling graph), the optional feature/topology reconstruction terms (multitask=False), the "
        "paper's baselines other than scratch and node-only, and the theory (stability/transferability bounds). "
        "Link prediction is framed as 5-shot binary edge-task classification (held-out edges vs non-edges)."
    ),
)


def _second_best(per_seed: np.ndarray, n_boot: int = 4000, seed: int = 0) -> dict[str, float]:
    """Second-largest of the column means of ``per_seed`` (seeds, levels), with a percentile bootstrap over seeds:
    'at least 2 of 3 levels >= t' holds exactly when this statistic is >= t."""
    stat = lambda a: np.sort(a.mean(axis=-2), axis=-1)[..., -2]
    rng = np.random.default_rng(seed)
    draws = stat(per_seed[rng.integers(0, len(per_seed), size=(n_boot, len(per_seed)))])
    low, high = np.quantile(draws, [0.025, 0.975])
    return {"mean": float(stat(per_seed)), "ci_low": float(low), "ci_high": float(high), "n": int(len(per_seed))}


def _per_seed(rows: pd.DataFrame, mode: str, method_name: str, level: str, by_domain: bool = False):
    sel = rows[(rows["mode"] == mode) & (rows["method"] == method_name) & (rows["level"] == level)]
    if by_domain:
        return {d: g.sort_values("seed")["accuracy"].to_numpy(float) for d, g in sel.groupby("domain")}
    return sel.groupby("seed")["accuracy"].mean().sort_index().to_numpy(float)   # mean over held-out domains


def _metrics(rows: pd.DataFrame, per_seed: list[dict]) -> dict:
    out: dict = {"finetune": {}, "incontext": {}, "finetune_gain": {}}
    for mode in ("finetune", "incontext"):
        for m in sorted(rows.loc[rows["mode"] == mode, "method"].unique()):
            out[mode][m] = {lv: stats.summarize(_per_seed(rows, mode, m, lv)) for lv in method.LEVELS}
    for m in ("git", "node_only", "noise"):
        gains = np.stack([_per_seed(rows, "finetune", m, lv) - _per_seed(rows, "finetune", "scratch", lv)
                          for lv in method.LEVELS], axis=1)
        out["finetune_gain"][m] = {"second_best": _second_best(gains),
                                   "by_level": {lv: float(gains[:, i].mean()) for i, lv in enumerate(method.LEVELS)},
                                   "per_level": {lv: stats.summarize(gains[:, i]) for i, lv in enumerate(method.LEVELS)}}
    raw = _per_seed(rows, "incontext", "raw", "node")
    raw_d = _per_seed(rows, "incontext", "raw", "node", by_domain=True)
    git_d = _per_seed(rows, "incontext", "git", "node", by_domain=True)
    out["incontext_node"] = {
        "git_minus_raw": stats.paired_difference(_per_seed(rows, "incontext", "git", "node"), raw),
        "random_minus_raw": stats.paired_difference(_per_seed(rows, "incontext", "random_init", "node"), raw),
        "node_only_minus_raw": stats.paired_difference(_per_seed(rows, "incontext", "node_only", "node"), raw),
        "git_minus_raw_by_domain": {d: float((git_d[d] - raw_d[d]).mean()) for d in sorted(raw_d)}}
    node_only = _per_seed(rows, "finetune", "node_only", "graph")
    out["graph_level"] = {
        "git_minus_node_only": stats.paired_difference(_per_seed(rows, "finetune", "git", "graph"), node_only),
        "noise_minus_node_only": stats.paired_difference(_per_seed(rows, "finetune", "noise", "graph"), node_only)}
    ratios = {m: [s["loss_last"][m] / s["loss_first"][m] for s in per_seed] for m in ("git", "node_only", "noise")}
    out["pretrain"] = {"git_loss_ratio_max": float(max(ratios["git"])),
                       "loss_ratio_mean": {m: float(np.mean(v)) for m, v in ratios.items()},
                       "loss_last_mean": {m: float(np.mean([s["loss_last"][m] for s in per_seed])) for m in ratios}}
    return out


@paper_flow(PAPER, Params, smoke=SMOKE)
def git_task_trees_flow(params: Params, ctx: RunContext) -> RunOutput:
    per_seed = over_seeds(method.run_seed, ctx.seeds, p=params)
    rows = pd.DataFrame([r for s in per_seed for r in s["rows"]])
    save_parquet(rows, ctx.data_dir / "per_seed.parquet")
    metrics = _metrics(rows, per_seed)
    plot = pd.DataFrame([{"x": lv, "y": metrics[mode][m][lv]["mean"], "y_low": metrics[mode][m][lv]["ci_low"],
                          "y_high": metrics[mode][m][lv]["ci_high"], "series": f"{mode}:{m}"}
                         for mode in ("finetune", "incontext") for m in metrics[mode] for lv in method.LEVELS])
    return RunOutput(metrics=metrics, tables={"plot": plot, "runs": rows}, figure=_figure(plot),
                     setup=_setup(params), notes=_notes(metrics))


def _figure(plot: pd.DataFrame):
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), sharey=True)
    for ax, mode in zip(axes, ("finetune", "incontext")):
        series = [s for s in plot["series"].unique() if s.startswith(mode)]
        width = 0.8 / len(series)
        for i, s in enumerate(series):
            g = plot[plot["series"] == s]
            xs = np.arange(len(g)) + i * width
            ax.bar(xs, g["y"], width, yerr=[g["y"] - g["y_low"], g["y_high"] - g["y"]], capsize=2,
                   label=s.split(":")[1])
        ax.set_xticks(np.arange(len(method.LEVELS)) + 0.4 - width / 2, method.LEVELS)
        ax.set(title=f"{mode} on held-out domains (5-shot)", ylabel="query accuracy (mean, 95% CI)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def _setup(p: Params) -> str:
    return (
        f"Shared {p.dim}-d feature space with {p.n_prototypes} class prototypes and 4 family prototypes (unit "
        f"vectors). Source domains (homophily {p.source_homophily}) and held-out domains (homophily "
        f"{p.target_homophily}): each a CSBM node graph ({p.nodes_per_graph} nodes, {p.n_classes} classes drawn "
        f"from the shared prototypes, mean degree {p.mean_degree}, features {p.node_signal} x prototype + domain "
        f"shift (norm {p.shift_scale}) + N(0, I)) and {p.graphs_per_family} small graphs ({p.small_graph_nodes} "
        f"nodes) per family (ER, BA, WS, 2-block SBM; features {p.graph_signal} x family prototype + shift + noise). "
        f"Encoder: {p.layers} GraphSAGE-mean layers of width {p.hidden}, ReLU, task-tree pooling Linear. "
        f"Pretraining: {p.pretrain_steps} full-batch AdamW steps (lr {p.pretrain_lr}), feature mask {p.feature_mask}, "
        f"edge drop {p.edge_drop}, KL alignment lambda {p.align_lambda}, {p.edges_per_step} edge task-trees per step. "
        f"Evaluation: {p.shots}-shot per class; fine-tuning = {p.finetune_steps} Adam steps (lr {p.finetune_lr}) of "
        f"encoder + linear head; in-context = cosine nearest class mean; link tasks: {p.link_queries} held-out edges "
        f"and as many non-edges ({p.link_holdout:.0%} of edges held out of message passing). {p.seeds} seeds; every "
        "seed redraws the world, the domains and the splits."
    )


def _fmt(d: dict) -> str:
    return f"{d['mean']:+.3f} [{d['ci_low']:+.3f}, {d['ci_high']:+.3f}]"


def _notes(m: dict) -> str:
    ft, ic = m["finetune"], m["incontext"]
    table = "; ".join(f"{meth}: " + ", ".join(f"{lv} {ft[meth][lv]['mean']:.3f}" for lv in method.LEVELS)
                      for meth in ft)
    table_ic = "; ".join(f"{meth}: " + ", ".join(f"{lv} {ic[meth][lv]['mean']:.3f}" for lv in method.LEVELS)
                         for meth in ic)
    gains = "; ".join(f"{meth} - scratch: " + ", ".join(f"{lv} {_fmt(v)}" for lv, v in g["per_level"].items())
                      for meth, g in m["finetune_gain"].items())
    return (
        "**Sources.** Official code read: `model/pretrain_model.py` (semantic reconstruction with stop-gradient "
        "targets and a 2-layer MLP decoder, optional feature/topology reconstruction, KL alignment "
        "`F.kl_div(z1.log_softmax, z_mean.softmax)` x 10), `model/encoder.py` (SAGE-mean with root weight; "
        "`pooling` = mean aggregation along edge_index + Linear), `config/base.yaml` (pt_lr 1e-7, 10 epochs, "
        "masks 0.2/0.2, lambda 10). Written anew in plain torch on `tasks.gnn.SAGELayer`/`mean_adjacency`.\n\n"
        f"**Fine-tune accuracy (5-shot, mean over seeds and held-out domains).** {table}.\n\n"
        f"**In-context accuracy.** {table_ic}.\n\n"
        f"**Gains over scratch (paired over seeds).** {gains}. Second-best level gain: GIT "
        f"{_fmt(m['finetune_gain']['git']['second_best'])}, noise control "
        f"{_fmt(m['finetune_gain']['noise']['second_best'])}.\n\n"
        f"**In context, node tasks.** GIT - raw {_fmt(m['incontext_node']['git_minus_raw'])}; untrained encoder - raw "
        f"{_fmt(m['incontext_node']['random_minus_raw'])}; node-only - raw "
        f"{_fmt(m['incontext_node']['node_only_minus_raw'])}."
        + (" Every method's link accuracy (fine-tuned and in context) lies within 0.06 of chance (0.5): an edge "
           "task-tree's root averages its two endpoints, and a linear head on that mean barely separates held-out "
           "edges from non-edges here, so the link level cannot show a gain and the 2-of-3 claim rests on the node "
           "and graph levels." if all(abs(m[mode][k]["edge"]["mean"] - 0.5) < 0.06 for mode in ("finetune", "incontext")
                                      for k in m[mode]) else "")
        + "\n\n"
        f"**Graph level.** GIT - node-only {_fmt(m['graph_level']['git_minus_node_only'])}; noise control - "
        f"node-only {_fmt(m['graph_level']['noise_minus_node_only'])}.\n\n"
        f"**Pretraining.** Loss last/first (mean over seeds): "
        + ", ".join(f"{k} {v:.3f}" for k, v in m["pretrain"]["loss_ratio_mean"].items())
        + (". The GIT loss ends below 0.1: with stop-gradient targets and the alignment regulariser pulling every "
           "embedding toward the mean, such a low loss suggests the task-tree embeddings collapse toward a common "
           "direction, which leaves little for in-context prototypes to separate."
           if m["pretrain"]["loss_last_mean"]["git"] < 0.1 else ".")
    )
