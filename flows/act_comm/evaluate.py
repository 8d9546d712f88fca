"""Activation communication, the evaluation: test accuracy of every protocol and the paired differences over
seeds, FLOPs ratios, the map's fit, the sanity checks, the tables and the figure."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from flows.act_comm import method
from flows.act_comm.params import Params
from paperflows.core import estimates as est
from paperflows.core import stats
from paperflows.core.contract import RunOutput
from paperflows.core.records import Records
from paperflows.core.report import fmt_estimate

ARMS = ("b_alone", "full_info", "nl", "ac", "shuffled_map", "mismatched", "self_graft")


def evaluate(params: Params, records: Records) -> RunOutput:
    protocols, grid = records["protocols"], records["validation_grid"]
    seeds = {arm: est.per_seed(protocols, arm) for arm in (*ARMS, *(f"ac_{f}" for f in params.combines))}
    accuracy = {**{arm: stats.summarize(seeds[arm]) for arm in ARMS},
                "ac_per_f": {f: stats.summarize(seeds[f"ac_{f}"]) for f in params.combines},
                "chance": 1.0 / len(method.COUNTRIES)}
    diff = {"ac_minus_b_alone": stats.paired_difference(seeds["ac"], seeds["b_alone"]),
            "shuffled_minus_b_alone": stats.paired_difference(seeds["shuffled_map"], seeds["b_alone"]),
            "mismatched_minus_b_alone": stats.paired_difference(seeds["mismatched"], seeds["b_alone"]),
            "ac_minus_nl": stats.paired_difference(seeds["ac"], seeds["nl"]),
            "mismatched_minus_nl": stats.paired_difference(seeds["mismatched"], seeds["nl"]),
            "ac_minus_shuffled": stats.paired_difference(seeds["ac"], seeds["shuffled_map"]),
            "ac_minus_mismatched": stats.paired_difference(seeds["ac"], seeds["mismatched"]),
            "self_graft_minus_b_alone": stats.paired_difference(seeds["self_graft"], seeds["b_alone"])}
    flops_seeds = {arm: est.per_seed(protocols, f"flops_{arm}") for arm in ("ac", "nl", "b_alone", "full_info")}
    flops = {"ac_over_nl": stats.ratio_of_means(flops_seeds["ac"], flops_seeds["nl"]),
             "full_info_over_nl": stats.ratio_of_means(flops_seeds["full_info"], flops_seeds["nl"]),
             "per_episode": {arm: float(v.mean()) for arm, v in flops_seeds.items()}}
    chosen = protocols.sort_values("seed")
    metrics = {
        "accuracy": accuracy, "diff": diff, "flops": flops,
        "map": {"r2_heldout": est.summary(protocols, "r2_heldout"), "r2_train": est.summary(protocols, "r2_train"),
                "r2_heldout_min_over_depths": float(protocols["r2_heldout_min"].min())},
        "nl_messages": {key: float(protocols[key].mean())
                        for key in ("message_tokens", "message_names_city", "message_names_country")},
        "chosen": {"k": [int(k) for k in chosen["k"]], "j": [int(j) for j in chosen["j"]],
                   "f_is_replace": [int(f == "replace") for f in chosen["f"]]},
        "sanity": {"hook_identity_max_abs": float(protocols["hook_identity_error"].max()),
                   "dense_flops_rel_error": float(protocols["flops_counter_rel_error"].max())},
    }
    per_seed = chosen[["seed", "depth", "k", "j", "f", *ARMS, *(f"ac_{f}" for f in params.combines), "r2_heldout",
                       "example_fact", "example_message"]].reset_index(drop=True)
    plot = _plot_table(accuracy, flops["per_episode"])
    return RunOutput(metrics=metrics, tables={"plot": plot, "per_seed": per_seed, "validation_grid": grid},
                     figure=_figure(plot, grid, params), setup=_setup(params, records.seeds),
                     notes=_measured(params, metrics, per_seed))


def _plot_table(accuracy: dict, flops: dict) -> pd.DataFrame:
    """Test accuracy (mean over seeds, 95% CI) against FLOPs per episode, one row per protocol."""
    entries = [("B alone", accuracy["b_alone"], flops["b_alone"]),
               ("AC, shuffled-pair map (control)", accuracy["shuffled_map"], flops["ac"]),
               ("AC, mismatched A (control)", accuracy["mismatched"], flops["ac"]),
               ("AC (depth, f chosen on validation)", accuracy["ac"], flops["ac"]),
               ("B's own fact-reading state grafted (diagnostic)", accuracy["self_graft"], flops["full_info"]),
               ("NL (A's message)", accuracy["nl"], flops["nl"]),
               ("full information (the fact in plain text)", accuracy["full_info"], flops["full_info"])]
    return pd.DataFrame([{"x": x, "y": s["mean"], "y_low": s["ci_low"], "y_high": s["ci_high"], "series": name}
                         for name, s, x in entries])


def _figure(plot: pd.DataFrame, grid: pd.DataFrame, p: Params):
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.4), gridspec_kw={"width_ratios": [2.2, 1]})
    for i, r in plot.iterrows():
        control = "control" in r["series"]                       # same FLOPs as AC: hollow squares beside it
        left.errorbar(r["x"] / 1e9, r["y"], yerr=[[r["y"] - r["y_low"]], [r["y_high"] - r["y"]]],
                      fmt="s" if control else "o", mfc="none" if control else None, ms=9 if control else 6,
                      color=f"C{i}", capsize=3, label=r["series"])
    left.axhline(1.0 / len(method.COUNTRIES), color="grey", ls=":", lw=1, label="chance")
    left.set(xlabel="GFLOPs per episode (analytic)", ylabel="test accuracy (mean over seeds, 95% CI)",
             title="Countries game: SmolLM2-135M (A) -> Gemma-3-270M (B)", ylim=(0, 1.05))
    left.legend(fontsize=7, loc="best")
    mean = grid.groupby(["depth", "f"])["val_accuracy"].mean().unstack()[list(p.combines)]
    image = right.imshow(mean.to_numpy(), vmin=0, vmax=1, cmap="viridis", origin="lower", aspect="auto")
    right.set(xlabel="f", ylabel="relative depth of k and j", title="AC on validation (mean over seeds)",
              xticks=range(len(p.combines)), xticklabels=p.combines, yticks=range(len(mean)),
              yticklabels=[f"{d:.2f}" for d in mean.index])
    for (row, col), v in pd.DataFrame(mean.to_numpy()).stack().items():
        right.text(col, row, f"{v:.2f}", ha="center", va="center", fontsize=8, color="w" if v < 0.5 else "k")
    fig.colorbar(image, ax=right, shrink=0.8)
    fig.tight_layout()
    return fig


def _setup(p: Params, seeds: list[int]) -> str:
    return (
        f"**Agents**: A = SmolLM2-135M-Instruct (30 blocks, d = 576, chat template), B = Gemma-3-270M base (18 "
        f"blocks, d = 640, raw text), float32 on CPU. **Game** (fresh episodes per seed): A is told '<name> is in "
        f"<city>.' (chat turn, system: '{method.A_SYSTEM}'); B is asked 'Question: Which country is <name> in?\\n"
        f"Answer:'; B's answer is the most likely of the {len(method.COUNTRIES)} countries' first tokens (chance "
        f"{1 / len(method.COUNTRIES):.2f}); {len(method.NAMES)} names x 50 cities. **Map W** (A's residual -> B's): "
        f"affine least squares (ridge {p.ridge} x mean feature variance) on the residual streams of both models at "
        f"every position where their tokenizers end a token at the same character of {p.n_shared_texts} generic "
        f"template paragraphs (half wrapped in A's chat template; no city or country of the game); each seed fits "
        f"on {p.map_train_frac:.0%} of the paragraphs and measures R^2 on the rest. **Protocols**: B alone; full "
        f"information (B reads 'Agent A says: <fact>' then the question); NL (A greedily writes a message, to eos, at "
        f"most {p.message_max_tokens} tokens; B reads 'Agent A says: <message>' then the question); AC (A's "
        f"last-token residual after block k, mapped by W, combined into B's last token after block j by f in "
        f"{{{', '.join(p.combines)}}}; k and j at the same relative depth in {p.depths}, the {len(p.depths)}x"
        f"{len(p.combines)} grid scored on {p.n_val} validation episodes, the best used on {p.n_test} test "
        f"episodes); controls: AC through a map fitted on shuffled pairs, and AC fed another test episode's A "
        f"activation (a derangement), both at the chosen depth and f; diagnostic: B's own last-token state after block j "
        f"when it reads the fact, grafted into B alone (no A, no map). **FLOPs**: analytic matmul FLOPs per episode "
        f"of what each protocol runs (method.forward_flops). {len(seeds)} seeds; intervals are 95% Student-t "
        f"intervals over seeds (paired differences)."
    )


def _measured(p: Params, m: dict, per_seed: pd.DataFrame) -> str:
    """The measured numbers behind the claims, for the notes (how to read them is in NOTES.md)."""
    a, d, fl, nl = m["accuracy"], m["diff"], m["flops"], m["nl_messages"]
    chosen = ", ".join(f"seed {r.seed}: depth {r.depth} (k={r.k}, j={r.j}), f={r.f}" for r in per_seed.itertuples())
    first = per_seed.iloc[0]
    return (
        f"**Measured. Accuracy (test, mean over seeds [95% CI]).** B alone {fmt_estimate(a['b_alone'])}; AC "
        f"{fmt_estimate(a['ac'])}; AC through the shuffled-pair map {fmt_estimate(a['shuffled_map'])}; AC with a "
        f"mismatched A {fmt_estimate(a['mismatched'])}; NL {fmt_estimate(a['nl'])}; full information "
        f"{fmt_estimate(a['full_info'])}. AC per f (each at its best depth on validation): "
        + ", ".join(f"{f} {fmt_estimate(s)}" for f, s in a["ac_per_f"].items()) + f". Chosen on validation: {chosen}.\n\n"
        f"**Differences.** AC - B alone {fmt_estimate(d['ac_minus_b_alone'])} (control, shuffled-pair map - B alone "
        f"{fmt_estimate(d['shuffled_minus_b_alone'])}; mismatched A - B alone "
        f"{fmt_estimate(d['mismatched_minus_b_alone'])}); AC - NL {fmt_estimate(d['ac_minus_nl'])} (control, "
        f"mismatched A - NL {fmt_estimate(d['mismatched_minus_nl'])}); AC - shuffled-pair map "
        f"{fmt_estimate(d['ac_minus_shuffled'])}; AC - mismatched A {fmt_estimate(d['ac_minus_mismatched'])}. "
        f"Diagnostic: B's own last-token state after block j when it reads the fact, grafted by the chosen f into B "
        f"alone: {fmt_estimate(a['self_graft'])} (minus B alone {fmt_estimate(d['self_graft_minus_b_alone'])}).\n\n"
        f"**The map.** Held-out R^2 at the chosen depth {fmt_estimate(m['map']['r2_heldout'])} (training "
        f"{fmt_estimate(m['map']['r2_train'])}; lowest held-out over all depths and seeds "
        f"{m['map']['r2_heldout_min_over_depths']:.3f}).\n\n"
        f"**NL messages.** {nl['message_tokens']:.1f} tokens decoded on average; the message names the city in "
        f"{nl['message_names_city']:.0%} and the country in {nl['message_names_country']:.0%} of test episodes. "
        f"First test episode of seed {first['seed']}: told '{first['example_fact']}', A wrote "
        f"'{first['example_message']}'.\n\n"
        f"**FLOPs per episode.** AC {fl['per_episode']['ac'] / 1e9:.2f} G, NL {fl['per_episode']['nl'] / 1e9:.2f} G, "
        f"B alone {fl['per_episode']['b_alone'] / 1e9:.2f} G, full information "
        f"{fl['per_episode']['full_info'] / 1e9:.2f} G. AC / NL = {fmt_estimate(fl['ac_over_nl'], 'ratio')}; full "
        f"information / NL = {fmt_estimate(fl['full_info_over_nl'], 'ratio')}."
    )
