"""Forest of Thought, the evaluation: per-seed success rates, the worst-over-temperatures differences of
the claims, the setting table, the figure."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from flows.forest_of_thought.params import Params
from tasks import stats
from tasks.contract import RunOutput
from tasks.records import Records
from tasks.report import fmt


def _per_seed(rows: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """Mean over puzzles per (seed, temperature, correction)."""
    return rows.groupby(["temperature", "correction", "seed"], sort=True)[columns].mean().reset_index()


def _worst_over_temperatures(diff: pd.DataFrame) -> tuple[dict, dict]:
    """``diff``: columns temperature, seed, d. Summary of the per-seed minimum over temperatures, and the mean
    difference per temperature."""
    wide = diff.pivot(index="seed", columns="temperature", values="d")
    return (stats.summarize(wide.min(axis=1).to_numpy(float)),
            {f"T={t:g}": float(wide[t].mean()) for t in wide.columns})


def _difference(per_seed: pd.DataFrame, a: str, b: str, corr_a: bool, corr_b: bool) -> pd.DataFrame:
    left = per_seed[per_seed["correction"] == corr_a].set_index(["temperature", "seed"])[a]
    right = per_seed[per_seed["correction"] == corr_b].set_index(["temperature", "seed"])[b]
    return (left - right).rename("d").reset_index()


def evaluate(params: Params, records: Records) -> RunOutput:
    rows, rules_rows, value = records["puzzles"], records["rules"], records["value"]

    sizes = params.forest_sizes
    success_cols = (["cot_success", "tot_success", "identical_success", "cged_success", "random_success",
                     "random_b_success", "score_success", "any_correct"]
                    + [f"fot{n}_success" for n in sizes] + [f"fot{n}_dense_success" for n in sizes])
    call_cols = (["cot_calls", "tot_calls", "identical_calls", "expert_calls", "n_answers", "n_correct_answers"]
                 + [f"fot{n}_calls" for n in sizes] + [f"fot{n}_dense_calls" for n in sizes])
    per_seed = _per_seed(rows.astype({c: float for c in success_cols}), success_cols + call_cols)
    h = params.headline_trees
    fot = f"fot{h}_success"

    claims: dict = {}
    claims["fot_vs_tot"], claims["fot_vs_tot_by_temperature"] = _worst_over_temperatures(
        _difference(per_seed, fot, "tot_success", True, True))
    claims["identical_vs_tot"], _ = _worst_over_temperatures(
        _difference(per_seed, "identical_success", "tot_success", True, True))
    claims["correction_gain"], claims["correction_gain_by_temperature"] = _worst_over_temperatures(
        _difference(per_seed, "tot_success", "tot_success", True, False))
    claims["cged_vs_random"], claims["cged_vs_random_by_temperature"] = _worst_over_temperatures(
        _difference(per_seed, "cged_success", "random_success", False, False))
    claims["random_vs_random"], _ = _worst_over_temperatures(
        _difference(per_seed, "random_b_success", "random_success", False, False))
    rules_seed = rules_rows.astype({"tot_rules_success": float}).groupby(["correction", "seed"])["tot_rules_success"].mean()
    claims["correction_gain_rules"] = stats.summarize((rules_seed[True] - rules_seed[False]).to_numpy(float))
    # the same FoT-vs-ToT difference without correction (reported, not claimed)
    claims["fot_vs_tot_no_correction"], claims["fot_vs_tot_no_correction_by_temperature"] = _worst_over_temperatures(
        _difference(per_seed, fot, "tot_success", False, False))

    by_setting: dict = {}
    for (temperature, corr), g in per_seed.groupby(["temperature", "correction"]):
        key = f"T={temperature:g},{'correction' if corr else 'no_correction'}"
        by_setting[key] = {c: stats.summarize(g[c].to_numpy(float)) for c in success_cols + call_cols}
    corrected = rows[rows["correction"]]
    sanity = {"value_accuracy": stats.summarize(value["accuracy"].to_numpy(float)),
              "value_majority": stats.summarize(value["majority"].to_numpy(float)),
              "value_accuracy_over_majority": stats.summarize((value["accuracy"] - value["majority"]).to_numpy(float)),
              "wrong_answers_with_correction": float((corrected["n_answers"] - corrected["n_correct_answers"]).sum())}
    metrics = {"claims": claims, "by_setting": by_setting, "sanity": sanity,
               "tot_rules": {"correction" if k else "no_correction": stats.summarize(rules_seed[k].to_numpy(float))
                             for k in (False, True)},
               "n_test_puzzles_per_seed": int(rows.groupby("seed")["puzzle"].nunique().iloc[0])}
    plot = _plot_table(by_setting, params)
    return RunOutput(metrics=metrics, tables={"plot": plot, "per_seed": per_seed}, figure=_figure(plot, params),
                     setup=_setup(params, metrics), notes=_measured(params, metrics))


def _plot_table(by_setting: dict, params: Params) -> pd.DataFrame:
    """Success against model calls per puzzle at the headline temperature, with and without correction."""
    out = []
    for corr in ("no_correction", "correction"):
        s = by_setting[f"T={params.headline_temperature:g},{corr}"]
        names = [("CoT", "cot"), ("ToT", "tot")] + [(f"FoT-{n}", f"fot{n}") for n in params.forest_sizes] \
            + [(f"FoT-{n} dense", f"fot{n}_dense") for n in params.forest_sizes]
        for label, key in names:
            out.append({"x": s[f"{key}_calls"]["mean"], "y": s[f"{key}_success"]["mean"],
                        "y_low": s[f"{key}_success"]["ci_low"], "y_high": s[f"{key}_success"]["ci_high"],
                        "series": f"{corr}:{label}"})
    return pd.DataFrame(out)


def _figure(plot: pd.DataFrame, params: Params):
    fig, ax = plt.subplots(figsize=(7, 4.6))
    for corr, marker in (("no_correction", "o"), ("correction", "s")):
        g = plot[plot["series"].str.startswith(corr + ":")]
        for colour, (_, r) in zip(plt.cm.tab10.colors, g.iterrows()):
            ax.errorbar(r["x"], r["y"], yerr=[[r["y"] - r["y_low"]], [r["y_high"] - r["y"]]], fmt=marker,
                        color=colour, capsize=3, label=r["series"].replace("_", " "))
    ax.set(xscale="log", xlabel="model calls per puzzle (proposer + value, mean)",
           ylabel="held-out puzzles solved (mean over seeds, 95% CI)",
           title=f"Game of 24 with a small GPT, T = {params.headline_temperature:g}")
    ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    return fig


def _setup(params: Params, metrics: dict) -> str:
    s = metrics["sanity"]
    return (
        f"**World.** Game of 24 over the 1820 multisets of 4 numbers from 1..13; a move `a op b = c` is legal when "
        f"c is an integer in [0, {params.max_value}]; solvability by exact brute force. {params.held_out_frac:.0%} of "
        f"the puzzles are held out of the corpus; each seed draws {metrics['n_test_puzzles_per_seed']} of the "
        "held-out puzzles solvable in this world as its test set (the paper tests solvable puzzles).\n\n"
        f"**Stand-in LLM.** `tasks.lm` GPT ({params.n_layer} layers, {params.n_head} heads, width {params.d_model}, "
        f"word level: one token per number 0..999 and per symbol), trained {params.epochs} epochs (AdamW, lr {params.lr}, batch {params.batch_size}) on "
        f"{params.corpus_walks} random walks through training puzzles: at each state it is taught one move that keeps "
        "the state solvable (a random legal move where none does) written `P 4 6 8 13 > 13 - 8 = 5 > 4 6 5 .`, and "
        "the state's label `V <state> ? S` (sure) or `? I` (impossible); a walk follows a random legal move with "
        f"probability {params.explore_prob}. One model for all seeds (cached in data/). Value of a state = p(S) / "
        f"(p(S) + p(I)) at the label position; on states of held-out walks it is right {s['value_accuracy']['mean']:.3f} "
        f"of the time (majority label: {s['value_majority']['mean']:.3f}).\n\n"
        f"**Methods** (official `methods/bfs.py`). ToT: BFS over 3 layers, one proposer call per state sampling "
        f"{params.n_propose} moves (temperature T), duplicates dropped, one value call per new state, greedy top "
        f"{params.n_select}; a tree's answer is the first chain whose written final state is 24 (best parents "
        "first). CoT: one sampled move per call, 3 calls, no value model. Self-correction (official "
        "`result_correction_*`): a proposal whose operands are not in the current numbers is dropped, its result "
        "is recomputed and the left numbers rewritten. FoT-n: tree 0 sees the puzzle as given, trees 1..n-1 a "
        "shuffled order (official `init_numbers`); sparse activation stops a tree after its first layer when its "
        f"best value is below {params.sparse_threshold} ('likely'); trees run one after another and the forest "
        "stops at the first answer (official `forest_solve`); calls are summed up to that tree. CGED: all "
        f"{params.headline_trees} trees run; the answer a strict plurality of at least two trees agree on (up to "
        "commutative operands), else the expert: the answer whose chain the model finds most likely (one call per "
        "answer). Random: a uniformly random answer; score: the answer whose 2-number state had the best value. "
        f"An answer counts when it is really a solution (moves replayed exactly). {params.seeds} seeds; proposer "
        f"temperatures {params.temperatures} (official default 0.7)."
    )


def _interval(s: dict) -> str:
    return f"{fmt(s['mean'])} [{fmt(s['ci_low'])}, {fmt(s['ci_high'])}]"


def _temps(d: dict) -> str:
    return "(per temperature " + ", ".join(f"{k}: {v:+.3f}" for k, v in d.items()) + ")"


def _observations(params: Params, b: dict) -> str:
    """The numbers measured but not claimed."""
    T, h = params.headline_temperature, params.headline_trees
    on, off = b[f"T={T:g},correction"], b[f"T={T:g},no_correction"]
    sparse, dense = on[f"fot{h}_success"]["mean"], on[f"fot{h}_dense_success"]["mean"]
    saved = 1 - on[f"fot{h}_calls"]["mean"] / max(on[f"fot{h}_dense_calls"]["mean"], 1e-9)
    right = off["n_correct_answers"]["mean"] / max(off["n_answers"]["mean"], 1e-9)
    return (f"**Measured, no claim declared.** Sparse activation saves {saved:.0%} of FoT-{h}'s calls with "
            f"correction; success {sparse:.3f} sparse against {dense:.3f} dense. Without correction {right:.1%} of "
            f"the trees' answers are real solutions ({off['n_answers']['mean']:.2f} answers per puzzle); the "
            f"uncorrected methods solve {off['tot_success']['mean']:.3f} (ToT) to "
            f"{off[f'fot{h}_dense_success']['mean']:.3f} (dense FoT-{h}); some tree has a right answer on "
            f"{off['any_correct']['mean']:.1%} of the puzzles.")


def _measured(params: Params, metrics: dict) -> str:
    """The measured numbers behind the claims, for the notes (interpretation is in NOTES.md)."""
    c, b = metrics["claims"], metrics["by_setting"]
    T = params.headline_temperature
    lines = []
    for corr in ("no_correction", "correction"):
        s = b[f"T={T:g},{corr}"]
        parts = [f"CoT {s['cot_success']['mean']:.3f} ({s['cot_calls']['mean']:.1f} calls)",
                 f"ToT {s['tot_success']['mean']:.3f} ({s['tot_calls']['mean']:.1f})"]
        parts += [f"FoT-{n} {s[f'fot{n}_success']['mean']:.3f} ({s[f'fot{n}_calls']['mean']:.1f}; dense "
                  f"{s[f'fot{n}_dense_success']['mean']:.3f}, {s[f'fot{n}_dense_calls']['mean']:.1f})"
                  for n in params.forest_sizes]
        lines.append(f"- {corr.replace('_', ' ')}: " + ", ".join(parts))
    s = b[f"T={T:g},no_correction"]
    sel = (f"CGED {s['cged_success']['mean']:.3f}, random {s['random_success']['mean']:.3f}, score-based "
           f"{s['score_success']['mean']:.3f}, any tree right {s['any_correct']['mean']:.3f}; answers per puzzle "
           f"{s['n_answers']['mean']:.2f} of which right {s['n_correct_answers']['mean']:.2f}; expert calls "
           f"{s['expert_calls']['mean']:.2f}")
    return (
        f"**Success (held-out puzzles solved) and model calls per puzzle at T = {T:g}**, mean over seeds:\n"
        + "\n".join(lines) + "\n\n"
        f"**Final decision among {params.headline_trees} trees, no correction, T = {T:g}:** {sel}.\n\n"
        f"**Claims (worst case over temperatures per seed, mean [95% CI]).** FoT-{params.headline_trees} - ToT "
        f"with correction {_interval(c['fot_vs_tot'])} {_temps(c['fot_vs_tot_by_temperature'])}; control, "
        f"identical trees {_interval(c['identical_vs_tot'])}. Without correction FoT - ToT "
        f"{_interval(c['fot_vs_tot_no_correction'])} {_temps(c['fot_vs_tot_no_correction_by_temperature'])}. "
        f"Correction gain for ToT {_interval(c['correction_gain'])} {_temps(c['correction_gain_by_temperature'])}; "
        f"control, error-free proposer {_interval(c['correction_gain_rules'])} (ToT with it: "
        f"{_interval(metrics['tot_rules']['no_correction'])}). CGED - random {_interval(c['cged_vs_random'])} "
        f"{_temps(c['cged_vs_random_by_temperature'])}; control, random - random {_interval(c['random_vs_random'])}."
        "\n\n" + _observations(params, b)
    )
