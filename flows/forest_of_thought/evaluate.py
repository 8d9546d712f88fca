"""Forest of Thought, the evaluation: per-seed success rates, the claims' paired differences, the capability
gates, the figure."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from flows.forest_of_thought.params import Params
from paperflows.core import stats
from paperflows.core.contract import RunOutput
from paperflows.core.records import Records
from paperflows.core.report import fmt


def _difference(per_seed: pd.DataFrame, a: str, b: str, corr_a: bool, corr_b: bool) -> dict:
    """Mean over seeds of (a with correction ``corr_a``) - (b with ``corr_b``), seeds paired."""
    left = per_seed[per_seed["correction"] == corr_a].set_index("seed")[a]
    right = per_seed[per_seed["correction"] == corr_b].set_index("seed")[b]
    return stats.paired_difference(left.to_numpy(float), right.loc[left.index].to_numpy(float))


def evaluate(params: Params, records: Records) -> RunOutput:
    rows, rules_rows, gates = records["puzzles"], records["rules"], records["gates"]
    sizes = params.forest_sizes
    success_cols = (["cot_success", "tot_success", "identical_success", "cged_success", "random_success",
                     "random_b_success", "score_success", "any_correct"]
                    + [f"fot{n}_success" for n in sizes] + [f"fot{n}_dense_success" for n in sizes])
    call_cols = (["cot_calls", "tot_calls", "identical_calls", "expert_calls", "n_answers", "n_correct_answers",
                  "activated"] + [f"fot{n}_calls" for n in sizes] + [f"fot{n}_dense_calls" for n in sizes])
    per_seed = (rows.astype({c: float for c in success_cols})
                .groupby(["correction", "seed"], sort=True)[success_cols + call_cols].mean().reset_index())
    fot = f"fot{params.headline_trees}_success"

    claims = {
        "fot_vs_tot": _difference(per_seed, fot, "tot_success", True, True),
        "identical_vs_tot": _difference(per_seed, "identical_success", "tot_success", True, True),
        "correction_gain": _difference(per_seed, "tot_success", "tot_success", True, False),
        "cged_vs_random": _difference(per_seed, "cged_success", "random_success", False, False),
        "random_vs_random": _difference(per_seed, "random_b_success", "random_success", False, False),
        # the same FoT-vs-ToT difference without correction (reported, not claimed)
        "fot_vs_tot_no_correction": _difference(per_seed, fot, "tot_success", False, False),
    }
    rules_seed = rules_rows.astype({"tot_rules_success": float}).groupby(["correction", "seed"])["tot_rules_success"].mean()
    claims["correction_gain_rules"] = stats.paired_difference(rules_seed[True].to_numpy(float),
                                                              rules_seed[False].to_numpy(float))
    by_setting = {("correction" if corr else "no_correction"): {c: stats.summarize(g[c].to_numpy(float))
                                                                for c in success_cols + call_cols}
                  for corr, g in per_seed.groupby("correction")}
    corrected = rows[rows["correction"]]
    g = gates.sort_values("seed")
    sanity = {"arithmetic_accuracy": stats.summarize(g["arithmetic_accuracy"].to_numpy(float)),
              "arithmetic_chance": stats.summarize(g["arithmetic_chance"].to_numpy(float)),
              "arithmetic_over_chance": stats.paired_difference(g["arithmetic_accuracy"].to_numpy(float),
                                                                g["arithmetic_chance"].to_numpy(float)),
              "evaluator_auc": stats.summarize(g["evaluator_auc"].to_numpy(float)),
              "evaluator_auc_over_chance": stats.summarize(g["evaluator_auc"].to_numpy(float) - 0.5),
              "evaluator_mean_value": stats.summarize(g["evaluator_mean_value"].to_numpy(float)),
              "sparse_threshold": stats.summarize(g["evaluator_sparse_threshold"].to_numpy(float)),
              "evaluator_reachable_share": stats.summarize(g["evaluator_reachable_share"].to_numpy(float)),
              "valid_step_share": stats.summarize(g["valid_step_share"].to_numpy(float)),
              "wrong_answers_with_correction": float((corrected["n_answers"] - corrected["n_correct_answers"]).sum())}
    metrics = {"claims": claims, "by_setting": by_setting, "sanity": sanity,
               "tot_rules": {"correction" if k else "no_correction": stats.summarize(rules_seed[k].to_numpy(float))
                             for k in (False, True)},
               "n_puzzles_per_seed": int(rows.groupby("seed")["puzzle"].size().iloc[0] // 2)}
    plot = _plot_table(by_setting, params)
    return RunOutput(metrics=metrics, tables={"plot": plot, "per_seed": per_seed}, figure=_figure(plot),
                     setup=_setup(params, metrics), notes=_measured(params, metrics))


def _plot_table(by_setting: dict, params: Params) -> pd.DataFrame:
    """Success against model calls per puzzle, with and without correction."""
    out = []
    names = [("CoT", "cot"), ("ToT", "tot")] + [(f"FoT-{n}", f"fot{n}") for n in params.forest_sizes] \
        + [(f"FoT-{n} dense", f"fot{n}_dense") for n in params.forest_sizes]
    for corr in ("no_correction", "correction"):
        s = by_setting[corr]
        for label, key in names:
            out.append({"x": s[f"{key}_calls"]["mean"], "y": s[f"{key}_success"]["mean"],
                        "y_low": s[f"{key}_success"]["ci_low"], "y_high": s[f"{key}_success"]["ci_high"],
                        "series": f"{corr}:{label}"})
    return pd.DataFrame(out)


def _figure(plot: pd.DataFrame):
    fig, ax = plt.subplots(figsize=(7, 4.6))
    for corr, marker in (("no_correction", "o"), ("correction", "s")):
        g = plot[plot["series"].str.startswith(corr + ":")]
        for colour, (_, r) in zip(plt.cm.tab10.colors, g.iterrows()):
            ax.errorbar(r["x"], r["y"], yerr=[[r["y"] - r["y_low"]], [r["y_high"] - r["y"]]], fmt=marker,
                        color=colour, capsize=3, label=r["series"].replace("_", " "))
    ax.set(xscale="log", xlabel="model calls per puzzle (proposer + evaluator, mean)",
           ylabel="puzzles solved (mean over seeds, 95% CI)",
           title="Three-number target puzzles, SmolLM2-135M-Instruct")
    ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    return fig


def _setup(params: Params, metrics: dict) -> str:
    return (
        f"**Task.** Each seed draws {metrics['n_puzzles_per_seed']} puzzles: three numbers from 1..{params.max_number} "
        f"and a target in [{params.min_target}, {params.max_target}] (not one of the numbers), drawn uniformly among the "
        "values the numbers reach in two steps `a op b = c` with +, - or * (non-negative integer results); every "
        "puzzle is solvable by construction, checked exactly by brute force.\n\n"
        f"**Model.** `{params.model}` (tasks.pretrained, float32, CPU) plays every role, each prompt a few-shot "
        "prefix whose key/value cache is computed once: the proposer samples one step per row at temperature "
        f"{params.temperature} in the official ToT format `3 * 8 = 24 (left: 24 5)` (at most {params.max_new_tokens} "
        "tokens, to the newline; a final step stops at its `(`); the evaluator scores a 2-number state by p(sure) / "
        "(p(sure) + p(impossible)) after `Numbers: x y, target T:`; the CGED expert scores an answer by p(yes) / "
        "(p(yes) + p(no)) after `... Steps: ... Correct?`.\n\n"
        f"**Methods** (official `methods/bfs.py`). ToT: BFS over 2 layers, {params.n_propose} sampled steps per "
        f"proposer call, duplicates dropped, one evaluator call per new 2-number state, greedy top {params.n_select}, "
        "then the final step from each kept state; a tree's answer is the first chain whose written result is the "
        "target (best parents first). Without correction the model's written left numbers are the next state. CoT: "
        "one sampled step per layer, no evaluator. Self-correction (official `result_correction_*`): a step whose "
        "operands are not among the current numbers is dropped, its result recomputed and the left numbers "
        "rewritten. FoT-n: tree 0 sees the numbers as given, trees 1..n-1 a shuffled order (official "
        "`init_numbers`), each with its own sampling seed; sparse activation stops a tree after its first layer "
        f"when its best value is below the {params.sparse_quantile:g} quantile of the evaluator's values over every "
        "state one step from the seed's puzzles (its p(sure) is not calibrated: mean below); trees run one after another and the forest stops "
        "at the first answer (official `forest_solve`); calls are summed up to that tree. The corrected and "
        "uncorrected trees share their first-layer samples (same prompts, same seed). CGED: all "
        f"{params.headline_trees} trees run; the answer a strict plurality of at least two trees agree on (up to "
        "commutative operands), else the expert's best-judged answer. Random: a uniformly random answer; score: "
        "the answer whose 2-number state had the best value. An answer counts when it is really a solution (steps "
        f"replayed exactly). {params.seeds} seeds.\n\n"
        f"**Capability gate.** {params.gate_problems} one-step problems `a op b =` per seed (greedy, few-shot), "
        "against chance: always answering the most common true result."
    )


def _interval(s: dict) -> str:
    return f"{fmt(s['mean'])} [{fmt(s['ci_low'])}, {fmt(s['ci_high'])}]"


def _measured(params: Params, metrics: dict) -> str:
    """The measured numbers behind the claims, for the notes (interpretation is in NOTES.md)."""
    c, b, s = metrics["claims"], metrics["by_setting"], metrics["sanity"]
    h = params.headline_trees
    lines = []
    for corr in ("no_correction", "correction"):
        g = b[corr]
        parts = [f"CoT {g['cot_success']['mean']:.3f} ({g['cot_calls']['mean']:.1f} calls)",
                 f"ToT {g['tot_success']['mean']:.3f} ({g['tot_calls']['mean']:.1f})"]
        parts += [f"FoT-{n} {g[f'fot{n}_success']['mean']:.3f} ({g[f'fot{n}_calls']['mean']:.1f}; dense "
                  f"{g[f'fot{n}_dense_success']['mean']:.3f}, {g[f'fot{n}_dense_calls']['mean']:.1f})"
                  for n in params.forest_sizes]
        lines.append(f"- {corr.replace('_', ' ')}: " + ", ".join(parts))
    off, on = b["no_correction"], b["correction"]
    sel = (f"CGED {off['cged_success']['mean']:.3f}, random {off['random_success']['mean']:.3f}, score-based "
           f"{off['score_success']['mean']:.3f}, any tree right {off['any_correct']['mean']:.3f}; answers per puzzle "
           f"{off['n_answers']['mean']:.2f} of which right {off['n_correct_answers']['mean']:.2f}; expert calls "
           f"{off['expert_calls']['mean']:.2f}")
    return (
        f"**Capability.** One-step arithmetic: accuracy {_interval(s['arithmetic_accuracy'])} against chance "
        f"{_interval(s['arithmetic_chance'])}. Of the steps the proposer samples in tree 0's first layer, "
        f"{_interval(s['valid_step_share'])} are valid as written (operands among the numbers, result and left "
        f"numbers right). Evaluator ROC AUC {_interval(s['evaluator_auc'])} on states of which "
        f"{s['evaluator_reachable_share']['mean']:.2f} can reach the target; mean p(sure) "
        f"{s['evaluator_mean_value']['mean']:.3f}, sparse-activation threshold {s['sparse_threshold']['mean']:.3f}; "
        f"trees activated (of {h}) {off['activated']['mean']:.2f} without "
        f"and {on['activated']['mean']:.2f} with correction.\n\n"
        "**Success (puzzles solved) and model calls per puzzle**, mean over seeds:\n" + "\n".join(lines) + "\n\n"
        f"**Final decision among {h} trees, no correction:** {sel}.\n\n"
        f"**Claims (mean over seeds [95% CI]).** FoT-{h} - ToT with correction {_interval(c['fot_vs_tot'])}; "
        f"control, identical trees {_interval(c['identical_vs_tot'])}. Without correction FoT - ToT "
        f"{_interval(c['fot_vs_tot_no_correction'])}. Correction gain for ToT {_interval(c['correction_gain'])}; "
        f"control, error-free proposer {_interval(c['correction_gain_rules'])} (ToT with it: "
        f"{_interval(metrics['tot_rules']['no_correction'])}). CGED - random {_interval(c['cged_vs_random'])}; "
        f"control, random - random {_interval(c['random_vs_random'])}."
    )
