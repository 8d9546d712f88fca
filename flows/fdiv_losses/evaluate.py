"""f-divergence losses, the evaluation: the operator errors, accuracy differences to cross-entropy paired over
seeds, the char-LM learning curve, the figure and the measured numbers."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.fdiv_losses import method
from flows.fdiv_losses.claims import CONTROL, TASK_LABEL, TASKS
from flows.fdiv_losses.params import Params
from paperflows.core import estimates as est
from paperflows.core import stats
from paperflows.core.contract import RunOutput
from paperflows.core.records import Records


def evaluate(params: Params, records: Records) -> RunOutput:
    rows = records["accuracy"]
    metrics = _metrics(records, params)
    figure, plot = _figure(metrics)
    tables = {"plot": plot, "accuracy": rows}
    return RunOutput(metrics=metrics, tables=tables, figure=figure, setup=_setup(params, metrics),
                     notes=_measured(metrics))


def _accuracies(rows: pd.DataFrame, task: str, loss: str) -> np.ndarray:
    return est.per_seed(rows, "accuracy", task=task, loss=loss)


def _metrics(records: Records, params: Params) -> dict:
    rows, exact, checks = records["accuracy"], records["exact"], records["checks"]
    errors = {k: g.sort_values("seed", kind="stable")["error"] for k, g in exact.groupby("check", sort=False)}
    metrics: dict = {"exact": {k: float(e.max()) for k, e in errors.items()}}
    metrics["exact"]["per_seed"] = {k: [float(v) for v in e] for k, e in errors.items()}
    metrics["optimality_gap"] = float(checks["optimality_gap"].max())
    metrics["kl_vs_ce"] = float(checks["kl_vs_ce"].max())
    metrics["accuracy"], metrics["diff_vs_ce"] = {}, {}
    for task in TASKS:
        losses = list(rows[rows["task"] == task]["loss"].unique())
        ce = _accuracies(rows, task, "ce")
        metrics["accuracy"][task] = {loss: stats.summarize(_accuracies(rows, task, loss)) for loss in losses}
        metrics["diff_vs_ce"][task] = {loss: stats.paired_difference(_accuracies(rows, task, loss), ce)
                                       for loss in losses if loss != "ce"}
    diffs = np.array([_accuracies(rows, t, "alpha15") - _accuracies(rows, t, "ce") for t in TASKS])   # (3, seeds)
    controls = np.array([_accuracies(rows, t, CONTROL) - _accuracies(rows, t, "ce") for t in TASKS])
    metrics["direction"] = {
        "median_task_diff": stats.summarize(np.median(diffs, axis=0)),
        "per_task": {t: float(d.mean()) for t, d in zip(TASKS, diffs)},
        "tasks_alpha15_ge_ce": int(sum(d.mean() >= 0 for d in diffs)),
        "control_median_task_diff": stats.summarize(np.median(controls, axis=0)),
    }
    steps = method.lm_checkpoints(params.lm_steps)
    lm = records["lm_curve"]
    curves = {name: est.by_setting(lm, "accuracy", "step", steps, loss=name).T  # (seeds, steps)
              for name in dict.fromkeys(lm["loss"])}
    metrics["lm_curve"] = {
        "steps": list(steps),
        "accuracy": {name: {f"step_{s}": float(c[:, i].mean()) for i, s in enumerate(steps)} for name, c in curves.items()},
        "diff_vs_ce": {name: {f"step_{s}": stats.paired_difference(c[:, i], curves["ce"][:, i])
                              for i, s in enumerate(steps)} for name, c in curves.items() if name != "ce"},
    }
    metrics["model_parameters"] = method.parameter_count(params, len(method.load_corpus(params.lm_train_frac).vocab))
    return metrics


def _figure(metrics: dict) -> tuple[plt.Figure, pd.DataFrame]:
    records = [{"x": loss, "y": 100 * d["mean"], "low": 100 * d["ci_low"], "high": 100 * d["ci_high"], "series": task}
               for task in TASKS for loss, d in metrics["diff_vs_ce"][task].items()]
    plot = pd.DataFrame(records)
    fig, axes = plt.subplots(1, len(TASKS), figsize=(13, 4), gridspec_kw={"width_ratios": [3, 1.3, 1.1]})
    for ax, task in zip(axes, TASKS):
        sub = plot[plot["series"] == task]
        pos = np.arange(len(sub))
        ax.bar(pos, sub["y"], color=["tab:red" if x == CONTROL else "tab:blue" for x in sub["x"]])
        ax.errorbar(pos, sub["y"], yerr=[sub["y"] - sub["low"], sub["high"] - sub["y"]], fmt="none", color="k")
        ax.axhline(0, color="k", lw=0.8)
        ax.axhline(-0.5, color="gray", ls="--", lw=0.8)
        ax.set_xticks(pos, [x.replace("_permuted", "\npermuted").replace("_unigram", "\nunigram") for x in sub["x"]],
                      fontsize=8)
        ax.set_title(TASK_LABEL[task])
        low = min(-3.0, float(sub[sub["x"] != CONTROL]["low"].min()) - 1) if len(sub) else -3.0
        ax.set_ylim(low, max(3.0, float(sub["high"].max()) + 1))
    axes[0].set_ylabel("test accuracy - cross-entropy (pp), 95% CI over seeds")
    fig.suptitle("f-divergence losses vs cross-entropy (dashed: the -0.5 pp margin; red: permuted-target control, "
                 "clipped)", fontsize=10)
    fig.tight_layout()
    return fig, plot[["x", "y", "series"]]


def _setup(params: Params, metrics: dict) -> str:
    pc = metrics["model_parameters"]
    return (
        f"**Operator checks.** Per seed, {params.exact_rows} random score vectors for each k in {params.exact_ks} "
        "(entries N(0, s^2), s log-uniform in [0.1, 30], so outputs range from dense to one-hot), bisection in float64 "
        f"with {params.exact_iters} halvings. References: torch.softmax, entmax.entmax15 and entmax.sparsemax (the "
        "entmax package, an independent implementation), at q = 1 and q = 1/k (the latter at temperature k^(alpha-1)). "
        f"Optimality: {params.brute_rows} instances per generator (k = 5) against scipy's SLSQP.\n\n"
        f"**(a) Classification.** scikit-learn digits / 16, stratified 80/20 split drawn per seed; MLP 64-"
        f"{params.clf_hidden}-10 (ReLU), Adam lr {params.clf_lr}, batch {params.clf_batch}, {params.clf_epochs} "
        f"epochs; losses {', '.join(params.clf_losses)}.\n\n"
        f"**(b) Char-LM.** The {len(method.corpus_text())} characters of scikit-learn's dataset descriptions "
        f"(sklearn/datasets/descr/*.rst), first {params.lm_train_frac:.0%} for training; causal transformer "
        f"({params.lm_layers} pre-norm layers, d = {params.lm_d_model}, {params.lm_heads} heads, context "
        f"{params.lm_context}; {pc['teacher_lm']} parameters), AdamW lr {params.lm_lr}, {params.lm_steps} steps of "
        f"{params.lm_batch} random windows; metric: next-character accuracy on the held-out tail (non-overlapping "
        f"windows); losses {', '.join(params.lm_losses)}.\n\n"
        f"**(c) Distillation.** The seed's CE char-LM of (b) is the teacher; a student ({params.student_layers} layer, "
        f"d = {params.student_d_model}; {pc['student_lm']} parameters) is trained {params.student_steps} steps only "
        f"on the teacher's softmax outputs over the training windows; losses {', '.join(params.distill_losses)}; "
        "metric: the student's next-character accuracy on the held-out text.\n\n"
        f"**Losses.** 'ce' = torch cross-entropy; '<f>' = the Fenchel-Young f-loss with the unit measure q = 1 "
        "(alpha15 = 1.5-entmax loss, alpha2 = sparsemax loss, kl = CE); '_unigram' = q = k x add-one-smoothed "
        f"training class frequencies (prediction by argmax of the f-softargmax). Training bisection: "
        f"{params.train_iters} halvings in float32; backward = p* - y. Control: alpha15 on permuted targets. "
        f"{params.seeds} seeds (split, initialisation, batches); every loss of a seed starts from the same weights."
    )


def _pp_interval(d: dict, scale: float = 100.0) -> str:
    """An interval dict as 'mean [low, high]', in percentage points."""
    return f"{scale * d['mean']:+.2f} [{scale * d['ci_low']:+.2f}, {scale * d['ci_high']:+.2f}]"


def _measured(metrics: dict) -> str:
    """The measured numbers behind the claims, for the notes (how to read them is in NOTES.md)."""
    e = metrics["exact"]
    lines = []
    for task in TASKS:
        acc = metrics["accuracy"][task]
        diff = metrics["diff_vs_ce"][task]
        lines.append(f"- {TASK_LABEL[task]}: CE accuracy {100 * acc['ce']['mean']:.2f} %; difference to CE (pp, "
                     "95% CI): " + "; ".join(f"{loss} {_pp_interval(d)}" for loss, d in diff.items()) + ".")
    dr = metrics["direction"]
    d = metrics["diff_vs_ce"]
    half = {t: 100 * (d[t]["alpha15"]["ci_high"] - d[t]["alpha15"]["ci_low"]) / 2 for t in ("classification", "lm")}
    curve = metrics["lm_curve"]["diff_vs_ce"]["alpha15"]
    gaps = ", ".join(f"{s} steps {_pp_interval(curve[f'step_{s}'])}" for s in metrics["lm_curve"]["steps"])
    kl = d["classification"].get("kl")
    kl_text = f" KL f-loss (bisection, float32) - torch's CE on digits: {_pp_interval(kl)} pp." if kl else ""
    return (
        f"**Operator.** Max abs error of the bisection: softmax {e['softmax']:.1e}, entmax15 {e['entmax15']:.1e}, "
        f"sparsemax {e['sparsemax']:.1e}; the neighbouring operators differ from the same references by "
        f"{e['control_alpha15_vs_softmax']:.2f}, {e['control_kl_vs_entmax15']:.2f} and "
        f"{e['control_alpha15_vs_sparsemax']:.2f}. Largest SLSQP objective gain over the bisection, any generator: "
        f"{metrics['optimality_gap']:.1e}; KL f-loss vs CE: {metrics['kl_vs_ce']:.1e}.\n\n"
        "**Accuracy (test, mean over seeds).**\n" + "\n".join(lines) + "\n\n"
        f"alpha = 1.5 is at least as accurate as CE (mean over seeds) on {dr['tasks_alpha15_ge_ce']} of 3 tasks; "
        f"median over tasks of the difference {_pp_interval(dr['median_task_diff'])} pp; control (permuted targets) "
        f"{_pp_interval(dr['control_median_task_diff'])} pp.\n\n"
        "**Measured intervals.** Half-widths of the 95% intervals of the alpha = 1.5 - CE difference: "
        f"{half['classification']:.2f} pp (digits) and {half['lm']:.2f} pp (char-LM). Char-LM, alpha = 1.5 - CE "
        f"(pp) along training: {gaps}." + kl_text
    )
