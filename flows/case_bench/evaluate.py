"""CASE-Bench, the evaluation: per setting of the knob sweep, the power analysis's empirical power against its
target, the z-tests and the judges' metrics from the records; the worst settings for the claims, the figure."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.case_bench.params import Params
from paperflows.core import estimates as est
from paperflows.core import stats
from paperflows.core.contract import RunOutput
from paperflows.core.records import Records
from paperflows.core.report import fmt

SETTING = ("seed", "bias_sd", "context_effect")
REJECTIONS = ("power_rejections", "common_rejections", "null_rejections")
PLOTTED_JUDGES = ("J1_query_only", "J2_query_context", "J3_conservative", "J2_shuffled_context")


def _key(bias_sd: float, context_effect: float) -> str:
    return f"bias{bias_sd:g}_effect{context_effect:g}"


def _deviation(summary: dict, target: float) -> dict[str, float]:
    """|power - target| with the interval it takes when the power's interval is [ci_low, ci_high]."""
    low, high = summary["ci_low"] - target, summary["ci_high"] - target
    return {"mean": abs(summary["mean"] - target), "ci_low": 0.0 if low <= 0 <= high else min(abs(low), abs(high)),
            "ci_high": max(abs(low), abs(high))}


def _setting_metrics(records: Records, setting: dict[str, float], p: Params) -> dict:
    runs, judges = records["runs"], records["judges"]
    pooled = lambda name: np.concatenate([np.asarray(r, dtype=float) for r in est.seed_series(runs, name, setting)])
    power, common = stats.summarize(pooled("power_rejections")), stats.summarize(pooled("common_rejections"))
    accuracy = lambda judge, col="accuracy": est.per_seed(judges, col, **setting, judge=judge)
    # the CI-parameter ablations (J2_only_*) are run at the central setting only
    in_setting = (judges["bias_sd"] == setting["bias_sd"]) & (judges["context_effect"] == setting["context_effect"])
    names = list(dict.fromkeys(judges.loc[in_setting, "judge"]))
    scores = [c for c in judges.columns if c not in (*SETTING, "judge")]
    paired = lambda a, b: est.paired(judges, "accuracy", {**setting, "judge": a}, {**setting, "judge": b})
    return {
        "annotators_per_seed": est.seed_series(runs, "annotators", setting).tolist(),
        "pilot_safe_rate": {"safe_context": float(np.mean(est.per_seed(runs, "pilot_p_safe_context", **setting))),
                            "unsafe_context": float(np.mean(est.per_seed(runs, "pilot_p_unsafe_context", **setting)))},
        "power": power, "power_deviation": _deviation(power, p.target_power),
        "common_power": common, "common_deviation": _deviation(common, p.target_power),
        "type_one": float(pooled("null_rejections").mean()),
        "pooled_minus_log10_p_min": float(est.per_seed(runs, "pooled_minus_log10_p", **setting).min()),
        "majority_of_few_agreement": est.summary(runs, "majority_of_few_agreement", **setting),
        "bench_safe_share": float(np.mean(est.per_seed(runs, "bench_safe_share", **setting))),
        # the full compute_score.py suite as means over seeds; accuracy with its interval
        "judges": {j: {col: float(np.mean(accuracy(j, col))) for col in scores} for j in names},
        "judge_accuracy": {j: stats.summarize(accuracy(j)) for j in names},
        "j2_minus_j1": paired("J2_query_context", "J1_query_only"),
        "shuffled_minus_j1": paired("J2_shuffled_context", "J1_query_only"),
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


def _runs_table(runs: pd.DataFrame, judges: pd.DataFrame) -> pd.DataFrame:
    """One row per seed and setting: the panel's scalars, and every judge's metrics as ``<judge>.<metric>``."""
    scores = [c for c in judges.columns if c not in (*SETTING, "judge")]
    by_run = {run: {f"{row['judge']}.{m}": row[m] for row in group.to_dict("records") for m in scores}
              for run, group in judges.groupby(list(SETTING), sort=False)}
    return pd.DataFrame([row | by_run[tuple(row[k] for k in SETTING)]
                         for row in runs.drop(columns=list(REJECTIONS)).to_dict("records")])


def evaluate(params: Params, records: Records) -> RunOutput:
    settings = [(b, c) for b in params.annotator_bias_sd for c in params.context_effect]
    central = settings[len(settings) // 2]
    by_setting = {_key(b, c): _setting_metrics(records, {"bias_sd": b, "context_effect": c}, params)
                  for b, c in settings}
    bench = records["benchmark"].iloc[0]
    metrics = {"settings": by_setting, "central_setting": _key(*central), "claims": _claims(by_setting),
               "benchmark": {"queries": int(bench["queries"]), "items": int(bench["items"]),
                             "judge_training_items": int(bench["judge_training_items"]),
                             "example_queries": list(bench["example_queries"])}}
    if "real_data" in records.tables:
        real = records["real_data"].iloc[0]
        metrics["real_data"] = {"items": int(real["items"]),
                                **{k: float(real[k]) for k in ("safe_rate_safe_context", "safe_rate_unsafe_context",
                                                               "minus_log10_p")}}
    plot = pd.DataFrame([{"x": k, "y": s["power"]["mean"], "series": "power at the analysed N"} for k, s in by_setting.items()]
                        + [{"x": k, "y": s["common_power"]["mean"], "series": "power with 3 annotators"} for k, s in by_setting.items()]
                        + [{"x": k, "y": s["judges"][j]["accuracy"], "series": f"accuracy {j}"}
                           for k, s in by_setting.items() for j in PLOTTED_JUDGES])
    return RunOutput(metrics=metrics, tables={"plot": plot, "runs": _runs_table(records["runs"], records["judges"])},
                     figure=_figure(by_setting, params), setup=_setup(params, metrics), notes=_measured(metrics))


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
    for j, marker in zip(PLOTTED_JUDGES, ("s", "o", "v", "x")):
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


def _interval(s: dict) -> str:
    return f"{fmt(s['mean'])} [{fmt(s['ci_low'])}, {fmt(s['ci_high'])}]"


def _measured(m: dict) -> str:
    c, central = m["claims"], m["settings"][m["central_setting"]]
    lines = ["Measured: annotators per item chosen by the power analysis, per setting (seeds): "
             + "; ".join(f"{k}: {s['annotators_per_seed']}" for k, s in m["settings"].items()) + ".",
             "Empirical power at the chosen count, per setting: "
             + "; ".join(f"{k}: {_interval(s['power'])}" for k, s in m["settings"].items())
             + f". Worst deviation from the target: {fmt(c['power_deviation_worst']['mean'])} at "
               f"{c['power_deviation_worst']['setting']}.",
             f"Agreement of the common design's labels (majority of 3) with the powered panel's at the central setting "
             f"{m['central_setting']}: {fmt(central['majority_of_few_agreement']['mean'])}.",
             "Judges at the central setting (accuracy / safe-context accuracy / Pearson x100 / Brier): "
             + "; ".join(f"{j}: {fmt(s['accuracy'])} / {fmt(s['safe_context_accuracy'])} / "
                         f"{fmt(s['pearson_x100'])} / {fmt(s['brier'])}" for j, s in central["judges"].items()) + ".",
             f"J2 - J1 accuracy, worst setting {c['j2_minus_j1_worst']['setting']}: {_interval(c['j2_minus_j1_worst'])}; "
             f"J2 fed a shuffled context minus J1, its best setting {c['shuffled_minus_j1_best']['setting']}: "
             f"{_interval(c['shuffled_minus_j1_best'])}."]
    if "real_data" in m:
        r = m["real_data"]
        lines.append(f"Real CASEBench_data.json ({r['items']} items): safe rate {fmt(r['safe_rate_safe_context'])} in "
                     f"safe-intended vs {fmt(r['safe_rate_unsafe_context'])} in unsafe-intended contexts, pooled "
                     f"z-test -log10 p = {fmt(r['minus_log10_p'])}.")
    return "\n\n".join(lines)
