"""CASE-Bench as a Prefect flow: a power-analysed simulated annotator panel over a Contextual-Integrity benchmark,
the context z-tests, and MiniLM judges scored with the official metric suite, across a sweep of the panel's knobs."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from flows.case_bench import method
from flows.case_bench.params import SMOKE, Params
from tasks import stats
from tasks.contract import Claim, Control, Paper, RunContext, RunOutput, ci
from tasks.data import save_parquet
from tasks.paper import paper_flow, run_mapped, run_task

SWEEP = "over the whole sweep of the simulated panel's knobs (annotator bias spread x context effect; worst setting)"

PAPER = Paper(
    slug="case_bench",
    title="CASE-Bench: Context-Aware SafEty Benchmark for Large Language Models",
    method="CASE-Bench protocol: CI-parameterised contexts, power-analysed annotator count, z-tests, compute_score.py metrics",
    paper_class="C",
    source="abstracts-003.txt #5",
    official_code="BriansIDP/CASEBench (scripts/compute_score.py and data/CASEBench_data.json read)",
    claims=(
        Claim(id="power_analysis_gives_target_power",
              text=("we recruited a sufficient number of annotators necessary to ensure the detection of statistically "
                    "significant differences among the experimental conditions based on power analysis -- the annotator "
                    "count chosen from a 20-item pilot gives the per-item context z-test an empirical power within 0.05 of "
                    f"the 0.8 target on fresh items, {SWEEP}"),
              source="abstract; plan claim 1 (magnitude, calibration)", metric="claims.power_deviation_worst.mean",
              comparison="<", threshold=0.05, kind="magnitude", role="claim",
              interval=ci("claims.power_deviation_worst"), per_setting="claims.power_deviation_by_setting",
              # the design the paper argues against, measured on the same fresh items
              control=Control(name="3 annotators per item (the common 3 + majority-vote design), its best setting",
                              metric="claims.common_deviation_best.mean", interval=ci("claims.common_deviation_best"))),
        Claim(id="context_aware_judge_agrees_better",
              text=("underscoring the necessity of context in safety evaluations -- a judge that reads the CI context "
                    "(MiniLM of query + context, logistic head) agrees with the panel's majority more often than the same "
                    f"judge on the query alone: accuracy(J2) - accuracy(J1) > 0, {SWEEP}. A check of the judge pipeline, "
                    "not a finding: the simulated labels depend on the context only through the planted context_effect "
                    "knob, so J2 can beat J1 only because of it (the difference vanishes as the knob goes to 0 and grows "
                    "with it); it checks that the judge learns a planted context effect"),
              source="abstract; plan (J1 vs J2 judges)", metric="claims.j2_minus_j1_worst.mean", comparison=">",
              threshold=0.0, kind="direction", role="sanity", interval=ci("claims.j2_minus_j1_worst"),
              per_setting="claims.j2_minus_j1_by_setting"),
        Claim(id="pooled_z_test_detects_planted_context_effect",
              text=("a substantial and significant influence of context on human judgments (p<0.0001 from a z-test) -- "
                    "on the simulator the effect is planted, so this only checks that the pooled z-test at the powered "
                    "annotator count detects it: min over settings and seeds of -log10 p > 4"),
              source="abstract; plan claim 2", metric="claims.pooled_minus_log10_p_min", comparison=">", threshold=4.0,
              kind="magnitude", role="sanity"),
        Claim(id="per_item_z_test_type_one_rate",
              text=("the per-item z-test at the chosen annotator count keeps its level under a planted null (both "
                    "contexts shift alike): worst-setting rejection rate at alpha = 0.05 <= 0.07"),
              source="plan claim 1 (type-I part)", metric="claims.type_one_worst", comparison="<=", threshold=0.07,
              kind="magnitude", role="sanity"),
        Claim(id="conservative_judge_loses_safe_context_accuracy",
              text=("notable mismatches between human judgments and LLM responses, particularly in commercial models "
                    "within safe contexts -- the over-refusing proxy J3 (J2's scores, safe only above P = 0.8) has lower "
                    "accuracy on safe-intended items than J2; holds by construction (a higher threshold can only say "
                    "'safe' less often), so it checks the metric code: worst-setting J3 - J2 < 0"),
              source="abstract; plan claim 3", metric="claims.j3_minus_j2_safe_context_worst", comparison="<",
              threshold=0.0, kind="direction", role="sanity"),
    ),
    limitations=(
        "What the stand-in cannot show: anything about real human context sensitivity or real LLMs. The annotators are "
        "a logistic simulator (annotator bias + query harm - context shift) whose context effect is planted, so the "
        "paper's p < 0.0001 is a property of the simulated effect size here, not a finding, and neither is the "
        "context-reading judge J2's gain over J1 (both are sanity checks of our pipeline). The simulator's two knobs "
        "are swept and every verdict is the worst over the sweep. The 'LLMs' are MiniLM-embedding judges with a logistic "
        "head trained on a separately simulated set, not instruction-tuned models answering in binary, 1-10 or logit "
        "mode. Queries are 45 templated requests (one per SORRY-Bench category) with Faker entities, not SORRY-Bench's "
        "gated queries; contexts are six CI field sentences per item, not the paper's GPT-written, human-revised "
        "paragraphs. A loader for the real CASEBench_data.json (params casebench_json) reports its pooled context "
        "z-test when a user has the file; it is never used by default or in tests."
    ),
)


def _key(bias_sd: float, context_effect: float) -> str:
    return f"bias{bias_sd:g}_effect{context_effect:g}"


def _deviation(summary: dict, target: float) -> dict[str, float]:
    """|power - target| with the interval it takes when the power's interval is [ci_low, ci_high]."""
    low, high = summary["ci_low"] - target, summary["ci_high"] - target
    return {"mean": abs(summary["mean"] - target), "ci_low": 0.0 if low <= 0 <= high else min(abs(low), abs(high)),
            "ci_high": max(abs(low), abs(high))}


def _setting_metrics(runs: list[dict], p: Params) -> dict:
    runs = sorted(runs, key=lambda r: r["seed"])
    pooled = lambda name: np.concatenate([np.asarray(r[name], dtype=float) for r in runs])
    power, common = stats.summarize(pooled("power_rejections")), stats.summarize(pooled("common_rejections"))
    accuracy = lambda judge, col="accuracy": [r["judges"][judge][col] for r in runs]
    return {
        "annotators_per_seed": [r["annotators"] for r in runs],
        "pilot_safe_rate": {"safe_context": float(np.mean([r["pilot_p_safe_context"] for r in runs])),
                            "unsafe_context": float(np.mean([r["pilot_p_unsafe_context"] for r in runs]))},
        "power": power, "power_deviation": _deviation(power, p.target_power),
        "common_power": common, "common_deviation": _deviation(common, p.target_power),
        "type_one": float(pooled("null_rejections").mean()),
        "pooled_minus_log10_p_min": float(min(r["pooled_minus_log10_p"] for r in runs)),
        "majority_of_few_agreement": stats.summarize([r["majority_of_few_agreement"] for r in runs]),
        "bench_safe_share": float(np.mean([r["bench_safe_share"] for r in runs])),
        # the full compute_score.py suite as means over seeds; accuracy with its interval
        "judges": {j: {col: float(np.mean(accuracy(j, col))) for col in runs[0]["judges"][j]} for j in runs[0]["judges"]},
        "judge_accuracy": {j: stats.summarize(accuracy(j)) for j in runs[0]["judges"]},
        "j2_minus_j1": stats.paired_difference(accuracy("J2_query_context"), accuracy("J1_query_only")),
        "shuffled_minus_j1": stats.paired_difference(accuracy("J2_shuffled_context"), accuracy("J1_query_only")),
        "j3_minus_j2_safe_context": float(np.mean(accuracy("J3_conservative", "safe_context_accuracy"))
                                          - np.mean(accuracy("J2_query_context", "safe_context_accuracy"))),
    }


def _claims(settings: dict) -> dict:
    """Worst settings for the claims, most favourable settings for their controls (a control must fail everywhere)."""
    worst_power = max(settings, key=lambda k: settings[k]["power_deviation"]["ci_high"])
    best_common = min(settings, key=lambda k: settings[k]["common_deviation"]["ci_low"])
    worst_judge = min(settings, key=lambda k: settings[k]["j2_minus_j1"]["ci_low"])
    best_shuffled = max(settings, key=lambda k: settings[k]["shuffled_minus_j1"]["ci_low"])
    return {
        "power_deviation_worst": {**settings[worst_power]["power_deviation"], "setting": worst_power},
        "power_deviation_by_setting": {k: s["power_deviation"]["mean"] for k, s in settings.items()},
        "common_deviation_best": {**settings[best_common]["common_deviation"], "setting": best_common},
        "j2_minus_j1_worst": {**settings[worst_judge]["j2_minus_j1"], "setting": worst_judge},
        "j2_minus_j1_by_setting": {k: s["j2_minus_j1"]["mean"] for k, s in settings.items()},
        "shuffled_minus_j1_best": {**settings[best_shuffled]["shuffled_minus_j1"], "setting": best_shuffled},
        "pooled_minus_log10_p_min": min(s["pooled_minus_log10_p_min"] for s in settings.values()),
        "type_one_worst": max(s["type_one"] for s in settings.values()),
        "j3_minus_j2_safe_context_worst": max(s["j3_minus_j2_safe_context"] for s in settings.values()),
    }


@paper_flow(PAPER, Params, smoke=SMOKE)
def case_bench_flow(params: Params, ctx: RunContext) -> RunOutput:
    settings = [(b, c) for b in params.annotator_bias_sd for c in params.context_effect]
    central = settings[len(settings) // 2]
    with threadpool_limits(limits=1):  # one BLAS thread per task: the (seed, setting) tasks are the parallelism
        benchmark = run_task(method.make_benchmark, p=params, seed=ctx.seeds[0])
        grid = [(seed, b, c) for seed in ctx.seeds for b, c in settings]
        runs = run_mapped(method.run_setting, {"seed": [g[0] for g in grid], "bias_sd": [g[1] for g in grid],
                                               "context_effect": [g[2] for g in grid],
                                               "ablations": [(g[1], g[2]) == central for g in grid]},
                          p=params, benchmark=benchmark)
    # the benchmark with each seed's central-setting panel safe rates, like the official CASEBench_data.json
    table = method.benchmark_table(benchmark)
    for r in runs:
        if r["bench_safe_rate"] is not None:
            table[f"safe_rate_seed{r['seed']}"] = r["bench_safe_rate"]
    save_parquet(table, ctx.data_dir / "benchmark.parquet")
    by_setting = {_key(b, c): _setting_metrics([r for r in runs if (r["bias_sd"], r["context_effect"]) == (b, c)], params)
                  for b, c in settings}
    metrics = {"settings": by_setting, "central_setting": _key(*central), "claims": _claims(by_setting),
               "benchmark": {"queries": len(benchmark.bench.texts), "items": 2 * len(benchmark.bench.texts),
                             "judge_training_items": 2 * len(benchmark.train.texts),
                             "example_queries": benchmark.bench.texts[:3]}}
    if params.casebench_json:
        metrics["real_data"] = method.real_context_test(method.load_casebench(Path(params.casebench_json)))
    runs_table = pd.DataFrame([{k: v for k, v in r.items() if not k.endswith(("rejections", "safe_rate")) and k != "judges"}
                               | {f"{j}.{m}": v for j, s in r["judges"].items() for m, v in s.items()} for r in runs])
    plot = pd.DataFrame([{"x": k, "y": s["power"]["mean"], "series": "power at the analysed N"} for k, s in by_setting.items()]
                        + [{"x": k, "y": s["common_power"]["mean"], "series": "power with 3 annotators"} for k, s in by_setting.items()]
                        + [{"x": k, "y": s["judges"][j]["accuracy"], "series": f"accuracy {j}"}
                           for k, s in by_setting.items() for j in ("J1_query_only", "J2_query_context", "J3_conservative",
                                                                    "J2_shuffled_context")])
    return RunOutput(metrics=metrics, tables={"plot": plot, "runs": runs_table}, figure=_figure(by_setting, params),
                     setup=_setup(params, metrics), notes=_notes(metrics))


def _figure(settings: dict, p: Params):
    keys = list(settings)
    x = np.arange(len(keys))
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.6))
    for name, label, shift in (("power", "annotator count from the power analysis", -0.15), ("common_power", "3 annotators", 0.15)):
        mean = np.array([settings[k][name]["mean"] for k in keys])
        err = np.array([[settings[k][name]["mean"] - settings[k][name]["ci_low"], settings[k][name]["ci_high"] - settings[k][name]["mean"]] for k in keys]).T
        left.errorbar(x + shift, mean, yerr=err, fmt="o", label=label)
    left.axhspan(p.target_power - 0.05, p.target_power + 0.05, color="C2", alpha=0.15, label="target 0.8 +- 0.05")
    left.set(xticks=x, ylabel="empirical power of the per-item z-test", title="power analysis, per simulator setting")
    left.set_xticklabels(keys, rotation=45, ha="right", fontsize=7)
    left.legend(fontsize=8)
    for j, marker in (("J1_query_only", "s"), ("J2_query_context", "o"), ("J3_conservative", "v"), ("J2_shuffled_context", "x")):
        right.plot(x, [settings[k]["judges"][j]["accuracy"] for k in keys], marker, label=j)
    right.set(xticks=x, ylabel="accuracy against the panel's majority", title="judges (compute_score.py accuracy)")
    right.set_xticklabels(keys, rotation=45, ha="right", fontsize=7)
    right.legend(fontsize=8)
    fig.tight_layout()
    return fig


def _setup(p: Params, m: dict) -> str:
    b = m["benchmark"]
    return (f"{b['queries']} templated queries ({p.n_categories} SORRY-Bench categories x {p.queries_per_category}), "
            f"each with a safe- and an unsafe-intended context of six Contextual-Integrity field sentences: {b['items']} "
            f"items (e.g. \"{b['example_queries'][0]}\"). One benchmark per run; each of the {p.seeds} seeds is an "
            f"independent simulated annotation study at every point of the knob sweep (annotator bias sd "
            f"{p.annotator_bias_sd} x context effect {p.context_effect}). Power analysis: a pilot of {p.pilot_queries} "
            f"queries x 2 contexts x {p.pilot_annotators} annotators gives the two safe rates, statsmodels' "
            f"NormalIndPower (Cohen's h, alpha {p.alpha}, power {p.target_power}) the annotators per item (cap "
            f"{p.max_annotators}); its empirical power is measured on {p.power_items} fresh query pairs per seed. Judges: "
            f"MiniLM (all-MiniLM-L6-v2, offline) embeddings of the query (J1) or query + mean of the context's field "
            f"sentences (J2; J3 = J2 saying safe only above P = {p.conservative_threshold}), a logistic head (C = "
            f"{p.judge_c}) fitted on {b['judge_training_items']} separately simulated items, scored with "
            "compute_score.py's metrics (labels: safe_rate > 0.5; child-related crimes forced unsafe).")


def _notes(m: dict) -> str:
    c, central = m["claims"], m["settings"][m["central_setting"]]
    lines = [f"Annotators per item chosen by the power analysis, per setting (seeds): "
             + "; ".join(f"{k}: {s['annotators_per_seed']}" for k, s in m["settings"].items()) + ".",
             f"Empirical power at the chosen count, per setting: "
             + "; ".join(f"{k}: {s['power']['mean']:.3f} [{s['power']['ci_low']:.3f}, {s['power']['ci_high']:.3f}]"
                         for k, s in m["settings"].items())
             + f". Worst deviation from the target: {c['power_deviation_worst']['mean']:.3f} at {c['power_deviation_worst']['setting']}.",
             f"The common design's labels (majority of 3) agree with the powered panel's on "
             f"{central['majority_of_few_agreement']['mean']:.3f} of items at the central setting {m['central_setting']}.",
             f"Judges at the central setting (accuracy / safe-context accuracy / Pearson x100 / Brier): "
             + "; ".join(f"{j}: {s['accuracy']:.3f} / {s['safe_context_accuracy']:.3f} / "
                         f"{s['pearson_x100']:.1f} / {s['brier']:.3f}" for j, s in central["judges"].items())
             + ". The J2_only_* rows are the CI-parameter ablations (one parameter's fields only).",
             f"J2 - J1 accuracy, worst setting {c['j2_minus_j1_worst']['setting']}: {c['j2_minus_j1_worst']['mean']:.3f} "
             f"[{c['j2_minus_j1_worst']['ci_low']:.3f}, {c['j2_minus_j1_worst']['ci_high']:.3f}] (a sanity check: "
             "the labels depend on the context only through the planted context_effect knob); J2 fed a shuffled "
             f"context minus J1 (does J2 read the item's own context?), its best setting: "
             f"{c['shuffled_minus_j1_best']['mean']:.3f} [{c['shuffled_minus_j1_best']['ci_low']:.3f}, "
             f"{c['shuffled_minus_j1_best']['ci_high']:.3f}]."]
    if "real_data" in m:
        r = m["real_data"]
        lines.append(f"Real CASEBench_data.json ({r['items']} items): safe rate {r['safe_rate_safe_context']:.3f} in safe-"
                     f"intended vs {r['safe_rate_unsafe_context']:.3f} in unsafe-intended contexts, pooled z-test "
                     f"-log10 p = {r['minus_log10_p']:.1f}.")
    return "\n\n".join(lines)
