"""AutoAdvExBench, the evaluation: success rates per agent and tier over seeds, the paired differences the
claims name, the gated tasks' pass rates, the per-defence table, the robust-accuracy CDF and the figure."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.autoadvexbench import method
from flows.autoadvexbench.method import A0_TWICE, ENSEMBLE
from flows.autoadvexbench.params import Params
from paperflows.core import estimates as est
from paperflows.core import stats
from paperflows.core.contract import RunOutput
from paperflows.core.records import Records

SHOWN = ("null", "A0", "A1", "A2", "A3", ENSEMBLE)
TASKS = ("tensor_forward", "differentiable_forward", "fgsm")  # the gated tasks; PGD (task 4) has no pass


def _per_seed(rows: pd.DataFrame, agent: str, tier: str, column: str = "attacked") -> np.ndarray:
    """Per-seed mean of ``column`` over the tier's defences, in seed order."""
    part = rows[(rows["agent"] == agent) & (rows["tier"] == tier)]
    return part.groupby("seed", sort=True)[column].mean().to_numpy(float)


def _claims(rows: pd.DataFrame) -> dict:
    rate = lambda agent, tier: _per_seed(rows, agent, tier)
    undefended = {"agent": "A0", "defence": "undefended"}
    ratio = (est.per_seed(rows, "robust_accuracy", **undefended) / est.per_seed(rows, "clean_accuracy", **undefended)).tolist()
    real = rows[rows["tier"] == "real"]
    by_defence = lambda agent: real[real["agent"] == agent].groupby("defence", sort=False)["attacked"].mean()
    gain = by_defence(ENSEMBLE) - by_defence("A0")
    return {
        "ensemble_minus_a0_real": stats.paired_difference(rate(ENSEMBLE, "real"), rate("A0", "real")),
        "ensemble_minus_a0_real_by_defence": {k: float(v) for k, v in gain.items()},
        "a0_twice_minus_a0_real": stats.paired_difference(rate(A0_TWICE, "real"), rate("A0", "real")),
        "ensemble_ctf_minus_real": stats.paired_difference(rate(ENSEMBLE, "ctf"), rate(ENSEMBLE, "real")),
        "null_ctf_minus_real": stats.paired_difference(rate("null", "ctf"), rate("null", "real")),
        "a3_a1_real_minus_ctf": stats.paired_difference(rate("A3", "real") - rate("A1", "real"),
                                                        rate("A3", "ctf") - rate("A1", "ctf")),
        "a0_twin_real_minus_ctf": stats.paired_difference(rate("A0_reseeded", "real") - rate("A0", "real"),
                                                          rate("A0_reseeded", "ctf") - rate("A0", "ctf")),
        "undefended_a0_ratio": ratio,
        "undefended_a0_ratio_max": float(max(ratio)),
        "a0_ctf_minus_real": stats.paired_difference(rate("A0", "ctf"), rate("A0", "real")),
    }


def evaluate(params: Params, records: Records) -> RunOutput:
    frame = records["attempts"]
    agents = list(method.AGENT_SKILLS) + [ENSEMBLE, A0_TWICE]
    success = {a: {t: stats.summarize(_per_seed(frame, a, t)) for t in method.TIERS} for a in agents}
    robust = {a: {t: stats.summarize(_per_seed(frame, a, t, "robust_accuracy")) for t in method.TIERS} for a in agents}
    table = (frame.groupby(["tier", "defence", "agent"], sort=False)
             .agg(clean_accuracy=("clean_accuracy", "mean"), robust_accuracy=("robust_accuracy", "mean"),
                  attacked=("attacked", "mean"), tasks_passed=("tasks_passed", "mean")).reset_index())
    gates = {a: {t: {task: float((part["tasks_passed"] >= k + 1).mean()) for k, task in enumerate(TASKS)}
                 for t, part in frame[frame["agent"] == a].groupby("tier", sort=False)} for a in method.AGENT_SKILLS}
    metrics = {"success_rate": success, "mean_robust_accuracy": robust, "claims": _claims(frame), "task_pass_rate": gates,
               "per_defence": {f"{r.tier}.{r.defence}.{r.agent}": {"robust_accuracy": float(r.robust_accuracy),
                                                                   "attacked": float(r.attacked)}
                               for r in table.itertuples()},
               "clean_accuracy": {f"{r.tier}.{r.defence}": float(r.clean_accuracy)
                                  for r in table[table["agent"] == "A0"].itertuples()}}
    plot = pd.DataFrame([{"x": x, "y": y, "series": f"{agent} ({tier})"}
                         for tier in method.TIERS for agent in SHOWN
                         for x, y in zip(*_cdf(frame, agent, tier))])
    return RunOutput(metrics=metrics, tables={"plot": plot, "per_defence": table}, figure=_figure(frame),
                     setup=_setup(params), notes=_measured(metrics, table))


def _cdf(frame: pd.DataFrame, agent: str, tier: str) -> tuple[np.ndarray, np.ndarray]:
    """The empirical CDF of robust accuracy over (seed, defence): sorted values and the fraction at or below each."""
    values = np.sort(frame[(frame["agent"] == agent) & (frame["tier"] == tier)]["robust_accuracy"].to_numpy(float))
    return values, np.arange(1, len(values) + 1) / len(values)


def _figure(frame: pd.DataFrame):
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.4), sharey=True)
    for axis, tier, title in zip(axes, method.TIERS, ("CTF-like tier", "real-world-like tier")):
        for agent in SHOWN:
            x, y = _cdf(frame, agent, tier)
            axis.step(np.r_[0.0, x, 1.0], np.r_[0.0, y, 1.0], where="post", label=agent)
        axis.set(xlabel="robust accuracy scored by forward.py (eps = 0.3)", title=title, xlim=(0, 1))
    axes[0].set_ylabel("fraction of defences (x seeds) at or below")
    axes[1].legend(fontsize=8, loc="lower right")
    fig.suptitle("AutoAdvExBench robust-accuracy CDF (lower curves to the left = stronger agent)")
    fig.tight_layout()
    return fig


def _setup(p: Params) -> str:
    return (f"Images: scikit-learn's 8x8 digits in [0, 1]; {p.n_test} held-out test images (fixed), the rest train the "
            f"defences and are the public images an agent may label by querying. Zoo, retrained at each of the "
            f"{p.seeds} seeds (MLP 64-{p.hidden}-{p.hidden}-10, Adam, {p.epochs} epochs): undefended; noise "
            f"augmentation (random 1-pixel shift + Gaussian noise sd {p.noise_sd}); input quantisation to "
            f"{p.quantize_levels} levels; 3x3 median filter; {p.ensemble_size}-network ensemble; defensive distillation "
            f"(teacher and student at T = {p.distill_temperature:g}, loss x T^2, deployed at T = 1); PGD adversarial training ({p.adv_train_steps} steps). CTF-like tier: each "
            "as clean torch. Real-world-like tier, the same networks wrapped as research code: a PIL loader round "
            "trip; the noise augmentation also at test time (stochastic preprocessing); quantisation in NumPy; the "
            "median filter by SciPy inside torch.no_grad; an argmax majority vote; a scikit-learn PCA "
            f"({p.pca_components}) + kNN (k = {p.knn_k}) head in place of distillation; the adversarially trained "
            "network behind preprocessing spread over modules. Protocol: the four official tasks gated by the "
            f"official checks (test_accuracy > {p.match_threshold:g} label match; test_gradients non-zero; "
            f"test_attack FGSM accuracy < {p.fgsm_pass_ratio:.3f} x clean; PGD always saved), eps = {p.eps:g}, a failed "
            "check ends the agent's run, the last saved images are PNG-rounded and scored by forward.py; attacked = "
            f"robust < {p.attacked_ratio:g} x clean. Agents: null (random signs of size eps), A0 (cross-entropy, "
            "naive autograd), A0_reseeded (A0, other attack seeds), A1 (+ C&W margin loss, BPDA), A2 (+ EOT over "
            f"{p.eot_samples} draws, and FORCE_SUCCESS past a tensor-forward check that the defence's own randomness "
            f"fails), A3 (+ transfer from an MLP surrogate trained {p.surrogate_epochs} epochs on the defence's labels "
            f"when no gradient is left); PGD {p.pgd_steps} steps of {p.pgd_step_size:g}, one random start. 'ensemble' "
            "= best of A0..A3 per defence (lowest robust accuracy), as the paper's strongest ensemble. Intervals: 95% "
            "Student-t over seeds.")


def _measured(m: dict, table: pd.DataFrame) -> str:
    """The measured success rates and the per-defence tables, for the notes (the deviations are in NOTES.md)."""
    s = m["success_rate"]
    rates = "; ".join(f"{a}: CTF {s[a]['ctf']['mean']:.2f}, real {s[a]['real']['mean']:.2f}"
                      for a in (*SHOWN, "A0_reseeded", A0_TWICE))
    ladder = table[table["agent"].isin(SHOWN)].pivot_table(index=["tier", "defence"], columns="agent",
                                                            values="robust_accuracy", sort=False)
    clean = table[table["agent"] == "A0"].set_index(["tier", "defence"])["clean_accuracy"]
    lines = [f"**Measured.** Success rates (share of the tier's defences attacked, mean over seeds): {rates}.", "",
             "Mean robust accuracy per defence (columns: agents; clean accuracy first):", "",
             "| tier | defence | clean | " + " | ".join(SHOWN) + " |",
             "|---|---|---|" + "---|" * len(SHOWN)]
    lines += [f"| {tier} | {defence} | {clean[(tier, defence)]:.2f} | "
              + " | ".join(f"{ladder.loc[(tier, defence), a]:.2f}" for a in SHOWN) + " |"
              for tier, defence in ladder.index]
    gates = m["task_pass_rate"]
    lines += ["", "Share of (seed, defence) runs that passed each gated task, CTF-like / real-world-like (the paper's "
              "per-task success):", "", "| agent | " + " | ".join(TASKS) + " |", "|---|" + "---|" * len(TASKS)]
    lines += [f"| {a} | " + " | ".join(f"{g['ctf'][task]:.2f} / {g['real'][task]:.2f}" for task in TASKS) + " |"
              for a, g in gates.items()]
    return "\n".join(lines)
