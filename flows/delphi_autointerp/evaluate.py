"""delphi_autointerp, the evaluation: SAE-minus-random and own-minus-shuffled AUROC differences (seeds paired),
the capability gate, the figure."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.delphi_autointerp.params import Params
from paperflows.core import estimates as est
from paperflows.core.contract import RunOutput
from paperflows.core.records import Records

SCORERS = ("detection", "fuzzing", "embedding")
SETS = {"sae": "SAE latents", "random": "random directions", "sae_shuffled": "SAE, shuffled explanations",
        "sae_shuffled_b": "SAE, second shuffle"}


def _difference(means: pd.DataFrame, scorer: str, a_set: str, b_set: str) -> dict:
    """Summary over seeds of the mean ``scorer`` AUROC of ``a_set`` minus that of ``b_set``, seeds paired."""
    return est.paired(means, scorer, {"set": a_set}, {"set": b_set})


def evaluate(params: Params, records: Records) -> RunOutput:
    rows, facts = records["latents"], records["facts"]
    means = rows.groupby(["seed", "set"])[list(SCORERS)].mean().reset_index()
    claims: dict = {}
    for scorer in SCORERS:
        claims[f"{scorer}_vs_random"] = _difference(means, scorer, "sae", "random")
        claims[f"{scorer}_vs_random_ctrl"] = _difference(means, scorer, "sae_shuffled", "random")
        claims[f"{scorer}_own"] = _difference(means, scorer, "sae", "sae_shuffled")
        claims[f"{scorer}_aa"] = _difference(means, scorer, "sae_shuffled_b", "sae_shuffled")
    table = {s: {c: est.summary(means, c, set=s) for c in SCORERS} for s in SETS}
    sanity = {"explained_variance": float(facts["explained_variance"].min()),
              **{f"gate_{s}": float(facts[f"gate_{s}"].min()) for s in SCORERS}}

    figure, axis = plt.subplots(figsize=(8, 4))
    plot_rows = []
    for k, (s, label) in enumerate(SETS.items()):
        ys = [table[s][c]["mean"] for c in SCORERS]
        errs = [table[s][c]["mean"] - table[s][c]["ci_low"] for c in SCORERS]
        axis.bar(np.arange(len(SCORERS)) + 0.2 * (k - 1.5), ys, width=0.2, yerr=errs, label=label)
        plot_rows += [{"x": c, "y": y, "series": label} for c, y in zip(SCORERS, ys)]
    axis.axhline(0.5, color="grey", lw=0.8, ls="--")
    axis.set_xticks(np.arange(len(SCORERS)), SCORERS)
    axis.set(ylabel="mean AUROC over latents (0.5 = chance)", ylim=(0.3, 1.0),
             title="Delphi scorers on SmolLM2-135M's TopK SAE (SmolLM2 explains and scores)")
    axis.legend(fontsize=8)
    figure.tight_layout()

    metrics = {"claims": claims, "sanity": sanity, "scores": table,
               "facts": {c: float(facts[c].mean()) for c in facts.columns if c != "seed" and not c.endswith("_s")},
               "timings": {"shared_cpu_s": float(facts["shared_cpu_s"].iloc[0]),
                           "seed_cpu_s": float(facts["seed_cpu_s"].sum())}}
    f = metrics["facts"]
    sae_rows = rows[rows["set"] == "sae"]
    distinct = sae_rows["explanation"].nunique() / len(sae_rows)
    setup = (
        f"{len(records.seeds)} seeds. Text: {params.n_rows} rows of {params.context} SmolLM2 tokens evenly spaced "
        f"over Python's help pages (pydoc_data.topics, shipped with CPython), the first token of each row (the "
        f"attention sink) dropped, the rest cut into {int(f['n_windows'])} windows of {params.window} tokens. "
        f"Residual stream of {params.model} after block {params.layer} (of 30), cached once. Per seed: a TopK SAE "
        f"({params.sae_latents} latents, k = {params.sae_k}, AuxK) trained on all but every "
        f"{params.holdout_every}th row (held-out explained variance {f['explained_variance']:.3f}, mean over seeds; "
        f"{f['dead_fraction']:.0%} of latents never fire on the windows); {f['n_eligible']:.0f} latents on average "
        f"fire in enough windows, of which {params.n_latents} are drawn at random, against as many density-matched "
        f"random-direction latents (density {f['density']:.3f} of tokens). The explainer (SmolLM2, greedy, at most "
        f"{params.explain_tokens} tokens) sees the {params.n_explain} top-activating windows of a random half of the "
        f"latent's activating windows, active tokens marked << >>. Scoring: {params.n_test} held-out activating "
        f"windows (one per activation quantile) and {params.n_nonact} random non-activating ones per latent; "
        f"detection and fuzzing by SmolLM2's log p(Yes) - log p(No), embedding by MiniLM cosine similarity, each "
        f"summarised by the AUROC of activating against non-activating windows. Controls: explanations shuffled "
        f"across latents (a derangement), a second shuffle (A/A), random directions explained and scored alike."
    )
    examples = "; ".join(f"'{t}'" for t in sae_rows.sort_values(["seed", "latent"])["explanation"].head(6))
    notes = (
        "**Measured** mean AUROC over latents and seeds (SAE / random directions / SAE with shuffled explanations): "
        + "; ".join(f"{c} {table['sae'][c]['mean']:.3f} / {table['random'][c]['mean']:.3f} / "
                    f"{table['sae_shuffled'][c]['mean']:.3f}" for c in SCORERS)
        + f". Hand-made gate (fraction of 8 cases rated right): detection {sanity['gate_detection']:.3f}, fuzzing "
        f"{sanity['gate_fuzzing']:.3f}, embedding {sanity['gate_embedding']:.3f}. Distinct explanations among the "
        f"SAE latents: {distinct:.0%}. First explanations written by SmolLM2 (seed {records.seeds[0]}): {examples}."
    )
    tables = {"plot": pd.DataFrame(plot_rows),
              "latents": rows[["seed", "set", "latent", "explanation", *SCORERS, "density"]]}
    return RunOutput(metrics=metrics, tables=tables, figure=figure, setup=setup, notes=notes)
