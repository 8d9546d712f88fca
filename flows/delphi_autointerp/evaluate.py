"""delphi_autointerp, the evaluation: own-minus-shuffled and SAE-minus-random score differences over the
noisy-scorer flip rates, scorer agreement, intervention recall, the quantile guideline, the figure."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.delphi_autointerp import method
from flows.delphi_autointerp.params import Params
from tasks import estimates as est
from tasks import stats
from tasks.contract import RunOutput
from tasks.records import Records


def _summary_frame(rows: pd.DataFrame) -> pd.DataFrame:
    """Per seed and latent set: the mean of every score over latents."""
    return rows.drop(columns=[c for c in ("explanation", "output_explanation", "latent") if c in rows]) \
        .groupby(["seed", "set"]).mean(numeric_only=True).reset_index()


def _by_set(means: pd.DataFrame, name: str, col: str) -> np.ndarray:
    return est.per_seed(means, col, set=name)


def _difference(means: pd.DataFrame, a_set: str, a_col: str, b_set: str, b_col: str) -> dict:
    """Summary over seeds of (a_col on a_set) - (b_col on b_set), seeds paired."""
    scores = means.melt(id_vars=["seed", "set"], var_name="score")
    a, b = est.aligned(scores, "value", {"set": a_set, "score": a_col}, {"set": b_set, "score": b_col})
    return stats.summarize(a - b)


def _worst(per_eps: dict[float, dict], larger_is_better: bool = True) -> dict:
    """The sweep's worst setting: the summary whose interval's lower end is lowest, with its flip rate."""
    eps = min(per_eps, key=lambda e: per_eps[e]["ci_low"]) if larger_is_better else \
        max(per_eps, key=lambda e: per_eps[e]["ci_high"])
    return {**per_eps[eps], "eps": eps}


def evaluate(params: Params, records: Records) -> RunOutput:
    rows, facts = records["latents"], records["facts"]
    means = _summary_frame(rows)
    eps_list = list(params.flip_rates)
    claims: dict = {}

    def diff(a_set, a_col, b_set, b_col):
        return _difference(means, a_set, a_col, b_set, b_col)

    for scorer in ("detection", "fuzzing"):
        vs = {e: diff("sae", f"{scorer}@{e}", "random", f"{scorer}@{e}") for e in eps_list}
        ctrl = {e: diff("sae_shuffled", f"{scorer}@{e}", "random", f"{scorer}@{e}") for e in eps_list}
        w = _worst(vs)
        claims[f"{scorer}_vs_random"], claims[f"{scorer}_vs_random_ctrl"] = w, ctrl[w["eps"]]
        claims[f"{scorer}_vs_random_by_eps"] = {str(e): vs[e]["mean"] for e in eps_list}
        own = {e: diff("sae", f"{scorer}@{e}", "sae_shuffled", f"{scorer}@{e}") for e in eps_list}
        aa = {e: diff("sae_shuffled_b", f"{scorer}@{e}", "sae_shuffled", f"{scorer}@{e}") for e in eps_list}
        w = _worst(own)
        claims[f"{scorer}_own"], claims[f"{scorer}_aa"] = w, aa[w["eps"]]
        claims[f"{scorer}_own_by_eps"] = {str(e): own[e]["mean"] for e in eps_list}
    for scorer in ("surprisal", "embedding"):
        claims[f"{scorer}_own"] = diff("sae", scorer, "sae_shuffled", scorer)
        claims[f"{scorer}_aa"] = diff("sae_shuffled_b", scorer, "sae_shuffled", scorer)
    claims["intervention_own"] = diff("sae", "intervention", "sae", "intervention_shuffled")
    claims["intervention_aa"] = diff("sae", "intervention_shuffled_b", "sae", "intervention_shuffled")

    # scorer agreement: Spearman across latents within each seed
    sae = rows[rows["set"] == "sae"].sort_values(["seed", "latent"])
    sp = {}
    for e in eps_list:
        sp[e] = stats.summarize([method.spearman_or_zero(g[f"detection@{e}"].to_numpy(), g["simulation"].to_numpy())
                                 for _, g in sae.groupby("seed")])
    claims["spearman_det_sim"] = _worst(sp)
    claims["spearman_det_sim_by_eps"] = {str(e): sp[e]["mean"] for e in eps_list}

    # intervention recall of latents missed by detection, pooled over seeds
    rec, rec_ctrl = {}, {}
    for e in eps_list:
        missed = sae[sae[f"detection@{e}"] < params.detection_low]
        rec[e] = stats.proportion_ci(int((missed["intervention"] > params.intervention_high).sum()), len(missed))
        rec_ctrl[e] = stats.proportion_ci(int((missed["intervention_shuffled"] > params.intervention_high).sum()), len(missed))
    finite = {e: r for e, r in rec.items() if r["n"] > 0}
    if finite:
        w = _worst(finite)
        claims["intervention_recall"], claims["intervention_recall_ctrl"] = w, rec_ctrl[w["eps"]]
    else:
        claims["intervention_recall"] = claims["intervention_recall_ctrl"] = stats.proportion_ci(0, 0)
    claims["intervention_recall_by_eps"] = {str(e): rec[e]["mean"] for e in eps_list}

    # the guideline: quantile-sampled vs top-only explanation examples
    low = {e: diff("sae_quantile", f"detection_low@{e}", "sae", f"detection_low@{e}") for e in eps_list}
    high = {e: diff("sae_quantile", f"detection_high@{e}", "sae", f"detection_high@{e}") for e in eps_list}
    w = _worst(low)
    claims["quantile_low"], claims["quantile_high"] = w, high[w["eps"]]
    claims["quantile_low_by_eps"] = {str(e): low[e]["mean"] for e in eps_list}

    sanity = {"lm_over_unigram": float((facts["lm_loss"] / facts["unigram_loss"]).max()),
              "explained_variance": float(facts["explained_variance"].min()),
              "round_trip": float(facts["round_trip"].min())}
    scorers = ("detection@0.0", "fuzzing@0.0", "surprisal", "embedding", "simulation", "detection_hard@0.0")
    table = {s: {c: stats.summarize(_by_set(means, s, c)) for c in scorers}
             for s in ("sae", "sae_quantile", "random", "sae_shuffled")}
    table["sae"]["intervention"] = stats.summarize(_by_set(means, "sae", "intervention"))
    table["sae_shuffled"]["intervention"] = stats.summarize(_by_set(means, "sae", "intervention_shuffled"))

    # figure: mean score per scorer, SAE latents vs random directions vs shuffled explanations
    figure, axis = plt.subplots(figsize=(8, 4))
    plot_rows = []
    names = {"sae": "SAE latents", "random": "random directions", "sae_shuffled": "SAE, shuffled explanations"}
    for k, (s, label) in enumerate(names.items()):
        ys = [table[s][c]["mean"] for c in scorers[:5]]
        axis.bar(np.arange(5) + 0.27 * (k - 1), ys, width=0.27, label=label)
        plot_rows += [{"x": c, "y": y, "series": label} for c, y in zip(scorers[:5], ys)]
    axis.set_xticks(np.arange(5), [c.replace("@0.0", "") for c in scorers[:5]])
    axis.set(ylabel="mean score over latents (noise-free scorer)",
             title="Delphi scorers on a small GPT's TopK SAE (scripted explainer)")
    axis.legend(fontsize=8)
    figure.tight_layout()

    per_latent = rows[rows["set"] == "sae"][["seed", "latent", "explanation", "output_explanation",
                                           "detection@0.0", "fuzzing@0.0", "surprisal", "embedding",
                                           "simulation", "intervention"]]
    metrics = {"claims": claims, "sanity": sanity, "scores": table,
               "facts": {c: float(facts[c].mean()) for c in facts.columns if c != "seed" and not c.endswith("_s")},
               "timings": {"lm_cpu_s": float(facts["lm_cpu_s"].sum()), "seed_cpu_s": float(facts["seed_cpu_s"].sum())}}
    f = metrics["facts"]
    kinds = rows[rows["set"] == "sae"]["explanation"].map(lambda t: method.parse(t).kind).value_counts(normalize=True)
    ctxs = rows[rows["set"] == "sae"]["explanation"].map(lambda t: method.parse(t).context != "any").mean()
    setup = (
        f"{len(records.seeds)} seeds; per seed a fresh corpus ({params.n_sentences} training sentences, "
        f"{params.n_eval_sentences} held-out), a {params.n_layer}-block, {params.d_model}-wide word-level GPT "
        f"(held-out loss {f['lm_loss']:.2f} nats vs unigram {f['unigram_loss']:.2f}), and a TopK SAE "
        f"({params.sae_latents} latents, k = {params.sae_k}, AuxK) on the residual stream after block "
        f"{params.layer} (explained variance {f['explained_variance']:.2f}). Contexts: {int(f['n_windows'])} "
        f"held-out windows of {params.window} tokens; {f['n_eligible']:.0f} latents on average had enough "
        f"activating and silent windows, of which {params.n_latents} are interpreted, against as many "
        f"density-matched random-direction latents (density {f['density']:.3f}). The SCRIPTED EXPLAINER sees "
        f"{params.n_explain} activating windows (top-activating, or stratified over {params.n_quantiles} "
        f"quantiles) and wrote class-level explanations for {kinds.get('class', 0):.0%} of SAE latents and "
        f"token-list explanations for {kinds.get('tokens', 0):.0%}; {ctxs:.0%} carry a context clause. Test: "
        f"{params.n_test_per_quantile} held-out activating windows per quantile, {params.n_nonact_test} random "
        f"non-activating ones (and as many MiniLM hard negatives, reported). Intervention: steering by "
        f"{params.steer_scale} x the latent's max activation along its decoder row, {params.n_int_prompts} "
        f"prompts (half to write the output explanation, half to score it). Noisy-scorer flip rates "
        f"{eps_list}, fixed before the run; each claim on detection/fuzzing reports its worst rate."
    )
    c = claims

    def single(name: str) -> float:
        preds = rows[rows["set"] == name]["explanation"].map(method.parse)
        return float(preds.map(lambda q: q.kind == "tokens" and len(q.words) == 1).mean())

    notes = (
        f"**Measured** noise-free scores (mean over seeds): detection SAE {table['sae']['detection@0.0']['mean']:.3f}, random "
        f"directions {table['random']['detection@0.0']['mean']:.3f}, shuffled explanations "
        f"{table['sae_shuffled']['detection@0.0']['mean']:.3f}; fuzzing {table['sae']['fuzzing@0.0']['mean']:.3f} / "
        f"{table['random']['fuzzing@0.0']['mean']:.3f} / {table['sae_shuffled']['fuzzing@0.0']['mean']:.3f}; "
        f"embedding AUROC {table['sae']['embedding']['mean']:.3f} / {table['random']['embedding']['mean']:.3f} / "
        f"{table['sae_shuffled']['embedding']['mean']:.3f}; surprisal AUROC {table['sae']['surprisal']['mean']:.3f}"
        f" / {table['random']['surprisal']['mean']:.3f} / {table['sae_shuffled']['surprisal']['mean']:.3f}; "
        f"intervention {table['sae']['intervention']['mean']:.3f} (shuffled "
        f"{table['sae_shuffled']['intervention']['mean']:.3f}). Detection against MiniLM hard negatives: "
        f"{table['sae']['detection_hard@0.0']['mean']:.3f} (random negatives "
        f"{table['sae']['detection@0.0']['mean']:.3f}). Spearman(detection, simulation) by flip rate: "
        f"{c['spearman_det_sim_by_eps']}. Latents missed "
        f"by detection (< {params.detection_low}) and recalled by "
        f"intervention (> {params.intervention_high}), by flip rate: {c['intervention_recall_by_eps']} "
        f"(worst-rate pool: {c['intervention_recall'].get('k', 0)} of {c['intervention_recall']['n']}). "
        f"Quantile minus top-only explanations on the lowest quantile, by flip rate: {c['quantile_low_by_eps']}; "
        f"on the highest quantile at the worst rate: {c['quantile_high']['mean']:+.3f}. Single-token explanations: "
        f"{single('sae'):.0%} of SAE latents, {single('random'):.0%} of random-direction latents."
    )
    return RunOutput(metrics=metrics, tables={"plot": pd.DataFrame(plot_rows), "latents": per_latent},
                     figure=figure, setup=setup, notes=notes)
