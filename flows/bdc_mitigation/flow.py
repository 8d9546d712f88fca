"""BDC mitigation assessment as a Prefect flow: fidelity and contamination resistance of rule-based mitigation
strategies, over clean and contaminated (mild, intensive) frozen-MiniLM scoring models on a synthetic benchmark."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from flows.bdc_mitigation import method
from flows.bdc_mitigation.params import SMOKE, Params
from tasks import stats
from tasks.contract import Claim, Control, Paper, RunContext, RunOutput, ci
from tasks.data import save_parquet
from tasks.paper import over_seeds, paper_flow, run_task

STAND_IN = ("on the stand-in (frozen all-MiniLM-L6-v2 + a scoring MLP as the LLM, three synthetic four-choice "
            "benchmark families, rule-based strategies)")
PLACEBO = "the clean model fine-tuned with the same recipe on held-out non-benchmark items (placebo contamination)"
MATCH_TOLERANCE = 0.02  # the plan's "accuracy matches the clean model": |delta acc| < 2 pp


def _no_preserving_beats_vanilla(recipe: str) -> Claim:
    return Claim(
        id=f"no_preserving_strategy_beats_vanilla_{recipe}",
        text=("No semantic-preserving strategy yields a significant improvement in resistance over the vanilla case "
              "(i.e., no benchmark update) across all benchmarks -- number of semantic-preserving strategies whose "
              "resistance minus vanilla's has a paired 95% bootstrap lower bound > 0 in every benchmark family, "
              f"{recipe} contamination recipe, {STAND_IN} (each typo rate of the sweep counts as a strategy): 0"),
        source="abstract; plan claim check 1", metric=f"claims.preserving_beating_vanilla.{recipe}",
        comparison="<=", threshold=0.0, kind="direction", role="claim",
        no_interval_reason=("a count of strategies, each decided by its own paired 95% bootstrap interval over seeds "
                            "in each benchmark family"),
        per_setting=f"claims.preserving_beating_vanilla_by_family.{recipe}",
        # the same significance test must be able to find an improvement where the paper says there is one
        control=Control(name="the same count over the semantic-altering strategies",
                        metric=f"claims.altering_beating_vanilla.{recipe}"))


PAPER = Paper(
    slug="bdc_mitigation",
    title=("The Emperor's New Clothes in Benchmarking? A Rigorous Examination of Mitigation Strategies for LLM "
           "Benchmark Data Contamination"),
    method="Fidelity and contamination resistance: question-level matching of evaluation vectors of clean and "
           "contaminated models on original and updated benchmarks",
    paper_class="C",
    source="abstracts-004.txt #16",
    official_code="ASTRAL-Group/BDC_mitigation_assessment (example/calculate_metrics.ipynb and mitigated_datasets/ read)",
    claims=(
        _no_preserving_beats_vanilla("mild"),
        _no_preserving_beats_vanilla("intensive"),
        Claim(id="altering_strategies_gain_resistance",
              text=("semantic-altering strategies sacrifice fidelity for resistance (resistance part) -- mean "
                    "resistance of the semantic-altering strategies minus mean resistance of the semantic-preserving "
                    f"ones > 0, whole benchmark, {STAND_IN}; worst setting over recipe x typo rate"),
              source="abstract; plan claim check 2", metric="claims.altering_minus_preserving_resistance_worst.mean",
              comparison=">", threshold=0.0, kind="direction", role="claim",
              interval=ci("claims.altering_minus_preserving_resistance_worst"),
              per_setting="claims.altering_minus_preserving_resistance_by_setting",
              # without benchmark exposure there is nothing to resist: the gap must vanish
              control=Control(name=f"the same gap with {PLACEBO}, its most favourable setting",
                              metric="claims.placebo_altering_minus_preserving_best.mean",
                              interval=ci("claims.placebo_altering_minus_preserving_best"))),
        Claim(id="altering_strategies_lose_fidelity",
              text=("semantic-altering strategies sacrifice fidelity for resistance (fidelity part) -- mean fidelity "
                    "of the semantic-altering strategies minus mean fidelity of the semantic-preserving ones < 0, "
                    f"whole benchmark, {STAND_IN}; worst setting over the typo rates"),
              source="abstract; plan claim check 2", metric="claims.altering_minus_preserving_fidelity_worst.mean",
              comparison="<", threshold=0.0, kind="direction", role="claim",
              interval=ci("claims.altering_minus_preserving_fidelity_worst"),
              per_setting="claims.altering_minus_preserving_fidelity_by_setting",
              control=Control(name="the same gap for a uniform random guesser (trivial solution), its most favourable "
                                   "setting", metric="claims.random_altering_minus_preserving_fidelity_best.mean",
                              interval=ci("claims.random_altering_minus_preserving_fidelity_best"))),
        Claim(id="accuracy_matching_hides_mismatch",
              text=("Previous assessment methods, such as accuracy drop and accuracy matching, focus solely on "
                    "aggregate accuracy, often leading to incomplete or misleading conclusions -- among the (recipe, "
                    "strategy) pairs whose contaminated accuracy on the updated benchmark matches the clean model's on "
                    f"the original (|delta acc| < {MATCH_TOLERANCE:g}, mean over seeds), the lowest resistance < 0.8 "
                    f"{STAND_IN}; NaN (inconclusive) when no pair matches"),
              source="abstract; plan claim check 3 (exploratory)", metric="claims.matched_lowest_resistance.mean",
              comparison="<", threshold=0.8, kind="magnitude", role="claim",
              interval=ci("claims.matched_lowest_resistance"),
              control=Control(name=f"the same (recipe, strategy) pair scored against {PLACEBO}",
                              metric="claims.matched_placebo_resistance.mean",
                              interval=ci("claims.matched_placebo_resistance"))),
        Claim(id="clean_model_above_chance",
              text="the clean stand-in answers the original benchmark above chance (1/4): accuracy - 0.25 > 0",
              source="ours (the pipeline needs a capable uncontaminated model)",
              metric="claims.clean_accuracy_above_chance.mean", comparison=">", threshold=0.0, kind="direction",
              role="sanity", interval=ci("claims.clean_accuracy_above_chance")),
        Claim(id="contamination_raises_original_accuracy",
              text=("contamination is effective (the paper validates it): contaminated minus clean accuracy on the "
                    "original benchmark > 0, worst recipe"),
              source="paper (contamination validation checks); plan", metric="claims.contamination_gain_worst.mean",
              comparison=">", threshold=0.0, kind="direction", role="sanity",
              interval=ci("claims.contamination_gain_worst"), per_setting="claims.contamination_gain_by_recipe"),
        Claim(id="mismatch_bounds_accuracy_gap",
              text=("question-level mismatch is at least the aggregate accuracy gap (holds by construction, checks the "
                    "metric code): min over every row of (1 - resistance) - |acc_conta - acc_clean| on the updated "
                    "benchmark >= 0"),
              source="ours (metric identity)", metric="claims.mismatch_minus_accuracy_gap_min", comparison=">=",
              threshold=0.0, kind="exact", role="sanity"),
    ),
    limitations=(
        "What the stand-in cannot show: anything about LLM memorisation or GPT-4o rewrites. The 'LLM' is frozen "
        "all-MiniLM-L6-v2 with a small scoring MLP trained here; contamination is fine-tuning that head on the "
        "original benchmark (mild and intensive = two epoch counts), so memorisation lives in a head over sentence "
        "embeddings, and a strategy resists exactly when it moves the question's embedding away from the memorised "
        "one. The benchmark is three synthetic four-choice families (real capitals, word categories, two-digit "
        "sums), not ARC-C/MMLU/GSM8K..., and the strategies are ten rules standing in for the paper's twenty GPT-4o "
        "rewrites (no translation, no LLM-generated extensions; the official incorrect_choice adds wrong options, so "
        "it is semantic-preserving here, and the plan's negated question has no rule); the typo rate, the one rule "
        "knob, is swept and "
        "every claim takes its worst setting. One benchmark and one set of rewrites per run: the intervals are over "
        "seeds of model training (clean head, contamination order, placebo), not over benchmark draws. 'Across "
        "all benchmarks' is read as across the three families."
    ),
)


def _means(frame: pd.DataFrame, column: str, recipe: str, family: str, strategies: list[str]) -> np.ndarray:
    """Per-seed mean of ``column`` over ``strategies`` (shape (n_seeds,), seeds in order)."""
    rows = frame[(frame.recipe == recipe) & (frame.family == family) & frame.strategy.isin(strategies)]
    return rows.groupby("seed")[column].mean().sort_index().to_numpy()


def _per_seed(frame: pd.DataFrame, column: str, recipe: str, family: str, strategy: str) -> np.ndarray:
    return _means(frame, column, recipe, family, [strategy])


def _resistance_minus_vanilla(frame: pd.DataFrame, recipe: str, strategy: str, family: str) -> dict[str, float]:
    """Paired difference over seeds of a strategy's resistance and vanilla's."""
    return stats.paired_difference(_per_seed(frame, "resistance", recipe, family, strategy),
                                   _per_seed(frame, "resistance", recipe, family, method.VANILLA))


def _beating_vanilla(frame: pd.DataFrame, recipe: str, strategies: list[str]) -> tuple[int, dict[str, int]]:
    """How many ``strategies`` beat vanilla's resistance (paired bootstrap lower bound > 0) in every family, and
    how many in each family."""
    significant = {s: {f: _resistance_minus_vanilla(frame, recipe, s, f)["ci_low"] > 0 for f in method.FAMILIES}
                   for s in strategies}
    per_family = {f: sum(significant[s][f] for s in strategies) for f in method.FAMILIES}
    return sum(all(by_family.values()) for by_family in significant.values()), per_family


def _claims(frame: pd.DataFrame, p: Params) -> dict:
    kinds = method.strategy_kinds(p)
    typos = [s for s in kinds if s.startswith("typo_")]
    preserving = [s for s, k in kinds.items() if k == method.SEMANTIC_PRESERVING]
    altering = [s for s, k in kinds.items() if k == method.SEMANTIC_ALTERING]
    preserving_at = {t: [s for s in preserving if s not in typos or s == t] for t in typos}  # one typo rate each
    recipes = list(method.recipes(p))
    out: dict = {"preserving_beating_vanilla": {}, "preserving_beating_vanilla_by_family": {},
                 "altering_beating_vanilla": {}}
    for r in recipes:
        count, out["preserving_beating_vanilla_by_family"][r] = _beating_vanilla(frame, r, preserving)
        out["preserving_beating_vanilla"][r] = count
        out["altering_beating_vanilla"][r] = _beating_vanilla(frame, r, altering)[0]

    gap = lambda column, r, t, family="all": stats.paired_difference(_means(frame, column, r, family, altering),
                                                                     _means(frame, column, r, family, preserving_at[t]))
    resistance = {f"{r}_{t}": gap("resistance", r, t) for r in recipes for t in typos}
    placebo = {f"{r}_{t}": gap("placebo_resistance", r, t) for r in recipes for t in typos}
    # fidelity uses the clean model only: identical under both recipes
    fidelity = {t: gap("fidelity", recipes[0], t) for t in typos}
    random = {t: gap("random_fidelity", recipes[0], t) for t in typos}
    # worst settings for the claims, most favourable ones for their controls (a control must fail everywhere)
    worst_res = min(resistance, key=lambda k: resistance[k]["ci_low"])
    best_placebo = max(placebo, key=lambda k: placebo[k]["ci_low"])
    worst_fid = max(fidelity, key=lambda k: fidelity[k]["ci_high"])
    best_random = min(random, key=lambda k: random[k]["ci_high"])
    out |= {
        "altering_minus_preserving_resistance_worst": {**resistance[worst_res], "setting": worst_res},
        "altering_minus_preserving_resistance_by_setting": {f"{r}_{t}_{f}": gap("resistance", r, t, f)["mean"]
                                                            for r in recipes for t in typos for f in method.FAMILIES},
        "placebo_altering_minus_preserving_best": {**placebo[best_placebo], "setting": best_placebo},
        "altering_minus_preserving_fidelity_worst": {**fidelity[worst_fid], "setting": worst_fid},
        "altering_minus_preserving_fidelity_by_setting": {f"{t}_{f}": gap("fidelity", recipes[0], t, f)["mean"]
                                                          for t in typos for f in method.FAMILIES},
        "random_altering_minus_preserving_fidelity_best": {**random[best_random], "setting": best_random},
    }

    whole = frame[frame.family == "all"]
    by_pair = (whole[whole.strategy != method.VANILLA].groupby(["recipe", "strategy"])
               [["accuracy_gap_to_clean", "resistance"]].mean())
    matched = by_pair[by_pair.accuracy_gap_to_clean.abs() < MATCH_TOLERANCE]
    if len(matched):
        r, s = matched.resistance.idxmin()
        out["matched_lowest_resistance"] = {**stats.summarize(_per_seed(frame, "resistance", r, "all", s)),
                                            "recipe": r, "strategy": s}
        out["matched_placebo_resistance"] = stats.summarize(_per_seed(frame, "placebo_resistance", r, "all", s))
    else:
        nan = {"mean": float("nan"), "ci_low": float("nan"), "ci_high": float("nan")}
        out["matched_lowest_resistance"], out["matched_placebo_resistance"] = nan, dict(nan)
    out["matched_pairs"] = [f"{r}/{s}" for r, s in matched.index]

    clean = _per_seed(frame, "acc_clean_original", recipes[0], "all", method.VANILLA)
    out["clean_accuracy_above_chance"] = stats.summarize(clean - 0.25)
    gains = {r: stats.paired_difference(_per_seed(frame, "acc_conta_original", r, "all", method.VANILLA), clean)
             for r in recipes}
    worst_gain = min(gains, key=lambda r: gains[r]["ci_low"])
    out["contamination_gain_worst"] = {**gains[worst_gain], "setting": worst_gain}
    out["contamination_gain_by_recipe"] = {r: g["mean"] for r, g in gains.items()}
    # rounded: the identity is exact in counts, and shares of the same counts cancel only to ~1e-16
    out["mismatch_minus_accuracy_gap_min"] = round(float(
        ((1 - frame.resistance) - (frame.acc_conta_updated - frame.acc_clean_updated).abs()).min()), 12) + 0.0
    return out


@paper_flow(PAPER, Params, smoke=SMOKE)
def bdc_mitigation_flow(params: Params, ctx: RunContext) -> RunOutput:
    with threadpool_limits(limits=1):  # the seeds are the parallelism
        benchmark = run_task(method.make_benchmark, p=params, seed=ctx.seeds[0])
        rows = pd.DataFrame([row for seed_rows in over_seeds(method.run_seed, ctx.seeds, p=params, benchmark=benchmark)
                             for row in seed_rows])
    save_parquet(rows, ctx.data_dir / "per_seed.parquet")
    kinds = method.strategy_kinds(params)
    table = (rows.groupby(["recipe", "strategy", "family"], sort=False).mean(numeric_only=True).drop(columns="seed")
             .reset_index())
    table.insert(2, "kind", table.strategy.map(kinds))
    whole = table[table.family == "all"]
    metrics = {"claims": _claims(rows, params),
               # every metric of every strategy on the whole benchmark, mean over seeds
               "strategies": {r: {row.strategy: {c: float(getattr(row, c)) for c in whole.columns[4:]}
                                  for row in t.itertuples()} for r, t in whole.groupby("recipe", sort=False)},
               "benchmark": {"items": len(benchmark.items[method.VANILLA]), "train_items": len(benchmark.items["train"]),
                             "placebo_items": len(benchmark.items["placebo"]), "distinct_texts": benchmark.n_texts,
                             "strategies": len(kinds) - 1}}
    plot = pd.DataFrame({"x": whole.fidelity, "y": whole.resistance, "series": whole.recipe + " / " + whole.kind})
    # the first and the last benchmark item (first and last family) as each strategy updates them
    examples = pd.DataFrame([{"strategy": s, "question": it.question, "options": " | ".join(it.options),
                              "answer": it.options[it.answer]}
                             for s in kinds for it in (benchmark.items[s][0], benchmark.items[s][-1])])
    versus_vanilla = pd.DataFrame([{"recipe": r, "strategy": s, "kind": kinds[s], "family": f,
                                    **_resistance_minus_vanilla(rows, r, s, f)}
                                   for r in method.recipes(params) for s in kinds if s != method.VANILLA
                                   for f in ("all", *method.FAMILIES)])
    return RunOutput(metrics=metrics, tables={"plot": plot, "strategies": table, "examples": examples,
                                              "resistance_minus_vanilla": versus_vanilla},
                     figure=_figure(whole), setup=_setup(params, metrics, examples), notes=_notes(metrics, table))


def _figure(whole: pd.DataFrame):
    fig, axes = plt.subplots(1, 2, figsize=(13, 5), sharex=True, sharey=True)
    markers = {method.VANILLA: "*", method.SEMANTIC_PRESERVING: "o", method.SEMANTIC_ALTERING: "s"}
    for axis, (recipe, t) in zip(axes, whole.groupby("recipe", sort=False)):
        for _, row in t.iterrows():
            axis.plot(row.fidelity, row.resistance, markers[row.kind], color=f"C{list(markers).index(row.kind)}")
            axis.annotate(row.strategy, (row.fidelity, row.resistance), fontsize=7, xytext=(3, 3),
                          textcoords="offset points")
        axis.set(xlabel="fidelity", ylabel="contamination resistance", title=f"{recipe} contamination")
    fig.suptitle("star: vanilla (no update), circles: semantic-preserving, squares: semantic-altering; whole benchmark, "
                 "mean over seeds", fontsize=9)
    fig.tight_layout()
    return fig


def _setup(p: Params, m: dict, examples: pd.DataFrame) -> str:
    b = m["benchmark"]
    shown = examples.drop_duplicates("strategy").head(3)
    return (f"A synthetic four-choice benchmark of {b['items']} items ({p.bench_per_family} per family: capitals of "
            "real countries, word categories, two-digit sums; disjoint fact pools for 'pretraining', benchmark and a "
            f"reserve), {b['strategies']} updated benchmarks from {b['strategies'] - len(p.typo_rates) + 1} rule-based "
            f"mitigation strategies (the typo rule at each swept rate {p.typo_rates}), "
            f"{b['distinct_texts']} distinct texts embedded once with all-MiniLM-L6-v2. The 'LLM': a scoring MLP "
            f"(hidden {p.hidden}) over [e_q, e_c, e_q*e_c, position] trained {p.clean_epochs} epochs on {b['train_items']} "
            f"'pretraining' items (three wordings); contaminated = the clean model fine-tuned on the original benchmark "
            f"for {p.mild_epochs} (mild) or {p.intensive_epochs} (intensive) epochs (Adam, lr {p.lr}, batch {p.batch_size}); "
            f"placebo = the same fine-tune on {b['placebo_items']} held-out non-benchmark items. Metrics per the official "
            "calculate_metrics.ipynb: fidelity = mean(clean_updated == clean_original), resistance = mean(clean_updated "
            f"== conta_updated). {p.seeds} seeds (model training); intervals are 95% bootstraps over seeds. Examples: "
            + "; ".join(f"{r.strategy}: \"{r.question}\" ({r.options})" for r in shown.itertuples()) + ".")


def _notes(m: dict, table: pd.DataFrame) -> str:
    c, whole = m["claims"], table[table.family == "all"]
    vanilla = table[(table.strategy == method.VANILLA) & (table.family != "all")]
    lines = ["Per family, vanilla benchmark (clean accuracy / contaminated accuracy / resistance): " + "; ".join(
                 f"{r.recipe} {r.family} {r.acc_clean_original:.3f} / {r.acc_conta_original:.3f} / {r.resistance:.3f}"
                 for r in vanilla.itertuples())
             + ". A family the clean model already answers almost perfectly leaves contamination nothing to flip, so "
             "no strategy can beat vanilla's resistance there.",
             "The random guesser's fidelity depends on the number of choices (agreement 2/3 between a six- and a "
             "four-choice guess, 5/8 between two four-choice guesses), so add_incorrect_choices alone gives its "
             "altering-minus-preserving fidelity gap an expected value of (0.625 - 0.667) / 7 = -0.006, not 0.",
             "Per strategy, whole benchmark, mean over seeds (fidelity / resistance / placebo resistance / accuracy "
             "drop / contaminated-minus-clean accuracy):"]
    for recipe, t in whole.groupby("recipe", sort=False):
        lines.append(f"- {recipe}: " + "; ".join(
            f"{r.strategy} {r.fidelity:.3f} / {r.resistance:.3f} / {r.placebo_resistance:.3f} / {r.accuracy_drop:+.3f} / "
            f"{r.accuracy_gap_to_clean:+.3f}" for r in t.itertuples()))
    lines.append("Semantic-preserving strategies beating vanilla's resistance significantly, per family: "
                 + "; ".join(f"{r}: {v}" for r, v in c["preserving_beating_vanilla_by_family"].items())
                 + f" (in every family: {c['preserving_beating_vanilla']}; semantic-altering: "
                 f"{c['altering_beating_vanilla']}).")
    lines.append(f"Accuracy-matched (recipe/strategy) pairs (|delta acc| < {MATCH_TOLERANCE:g}): "
                 + (", ".join(c["matched_pairs"]) or "none") + ".")
    return "\n\n".join(lines)
