"""AutoAdvExBench as a Prefect flow: the official four gated tasks and checks on a two-tier zoo of digit-scale
defences, scripted agents of graded skill in place of LLMs, the 'attacked' criterion and the robust-accuracy CDF."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.autoadvexbench import method
from flows.autoadvexbench.params import SMOKE, Params
from tasks import stats
from tasks.contract import Claim, Control, Paper, RunContext, RunOutput, ci
from tasks.data import save_parquet
from tasks.paper import over_seeds, paper_flow

ENSEMBLE = "ensemble"
A0_TWICE = "A0_best_of_two_seeds"
SHOWN = ("null", "A0", "A1", "A2", "A3", ENSEMBLE)
TASKS = ("tensor_forward", "differentiable_forward", "fgsm")  # the gated tasks; PGD (task 4) has no pass
DEVIATIONS = (
    "Deviations from the plan, decided before the first default run: 7 + 7 defences instead of 12 (each idea in "
    "both tiers, the same trained networks, so the tiers differ only in how the code is written); the real-world "
    "tier has a scikit-learn PCA + kNN head in place of a wrapped distillation network; A1 adds the C&W margin "
    "loss (an expert's standard answer to distillation's saturated softmax) together with BPDA; the official "
    "harness's FORCE_SUCCESS is used only by the EOT agents, and only past a tensor-forward check that the "
    "defence's own randomness fails. Plan claim 2 (A0's CTF - real gap) holds by "
    "construction and is a sanity check; the abstract's headline gap is checked on the strongest (best-of) "
    "ensemble instead, with the plan's 0.30 threshold."
)

DECLARED = ("every defence component declares whether it breaks gradients, its BPDA surrogate and whether it is "
            "random, and the agents act on those declarations (A1's BPDA replaces exactly the declared components, "
            "A2's EOT averages exactly over the declared random ones; with no surrogate declared A1 stops at the "
            "gradient check where A0 does), so which agent attacks which defence is set by the zoo's declarations. "
            "It checks that the techniques work where the code declares what they need")

PAPER = Paper(
    slug="autoadvexbench",
    title="AutoAdvExBench: Benchmarking Autonomous Exploitation of Adversarial Example Defenses",
    method="AutoAdvExBench protocol: four gated tasks (tensor forward, differentiable forward, FGSM, PGD) with the "
           "official checks, eps = 0.3, attacked = robust accuracy < 1/2 clean accuracy scored by forward.py",
    paper_class="C",
    source="abstracts-003.txt #3",
    official_code="ethz-spylab/autoadvexbench (baseline_attack_agent/attack.py and checks/ read)",
    claims=(
        Claim(id="skill_ladder_separates_agents_on_real_world",
              text=("a benchmark that directly measures success on tasks regularly performed by machine learning "
                    "security experts -- it tells agents of different skill apart: on the real-world-like tier the "
                    "best-of ensemble of the scripted agents (A0..A3) attacks a larger share of the defences than the "
                    "naive-autograd agent A0: paired difference of success rates over seeds > 0. A check of the "
                    f"scripted agents, not a finding: {DECLARED}"),
              source="abstract; plan claim 3 (direction)", metric="claims.ensemble_minus_a0_real.mean",
              comparison=">", threshold=0.0, kind="direction", role="sanity",
              interval=ci("claims.ensemble_minus_a0_real"), per_setting="claims.ensemble_minus_a0_real_by_defence"),
        Claim(id="strongest_ensemble_ctf_real_gap",
              text=("our strongest ensemble of agents can break 87% of CTF-like ('homework exercise') adversarial "
                    "example defenses, they break just 37% of real-world defenses -- the best-of ensemble's success "
                    "rate on the CTF-like tier minus that on the real-world-like tier >= 0.30"),
              source="abstract; plan claim 2 (magnitude)", metric="claims.ensemble_ctf_minus_real.mean",
              comparison=">=", threshold=0.30, kind="magnitude", role="claim",
              interval=ci("claims.ensemble_ctf_minus_real"),
              scaled="the paper's gap is 50 points (87% - 37%); the plan's 0.30 is kept for a 7 + 7 defence zoo",
              control=Control(name="the null agent (random signs of size eps) scored by the same harness",
                              metric="claims.null_ctf_minus_real.mean", interval=ci("claims.null_ctf_minus_real"))),
        Claim(id="ctf_success_does_not_predict_real_world",
              text=("LLMs that are good at CTFs are not always good at real-world defenses (Sonnet 3.5 vs Opus 4: 75% "
                    "vs 79% on CTF-like, 13% vs 30% on real-world) -- the success-rate difference between the full "
                    "scripted agent A3 and the BPDA agent A1 is larger on the real-world-like tier than on the "
                    "CTF-like tier: (A3 - A1)_real - (A3 - A1)_ctf > 0. A check of the scripted agents, not a finding: "
                    "the CTF half is zero by the zoo's construction (no CTF-like component is random or left without a "
                    "gradient), so the statistic is A3's EOT and transfer gain on the real tier's declared-random and "
                    f"surrogate-less defences; {DECLARED}"),
              source="abstract (direction)", metric="claims.a3_a1_real_minus_ctf.mean", comparison=">",
              threshold=0.0, kind="direction", role="sanity", interval=ci("claims.a3_a1_real_minus_ctf")),
        Claim(id="undefended_is_attacked_by_naive_agent",
              text=("harness check: A0 (naive FGSM then PGD through autograd) attacks the undefended network at every "
                    "seed: robust / clean accuracy < 1/2 (largest over seeds)"),
              source="plan claim 1 (exact)", metric="claims.undefended_a0_ratio_max", comparison="<", threshold=0.5,
              kind="exact", role="sanity", per_seed="claims.undefended_a0_ratio"),
        Claim(id="naive_agent_ctf_real_gap",
              text=("plan claim 2 for A0: its success rate on the CTF-like tier minus the real-world-like tier >= 0.30; "
                    "holds by construction (the real-world tier wraps the same networks in code built to break naive "
                    "autograd), so it checks the zoo and the gates, not any agent"),
              source="plan claim 2", metric="claims.a0_ctf_minus_real.mean", comparison=">=", threshold=0.30,
              kind="magnitude", role="sanity", interval=ci("claims.a0_ctf_minus_real")),
    ),
    limitations=(
        "What the stand-in cannot show: anything about LLM capability, the 87% / 37% figures, or the Sonnet / Opus "
        "comparison. No LLM runs; the agents are scripted (A0 naive autograd with cross-entropy, A1 + C&W margin loss "
        "and BPDA on the components the code marks as non-differentiable, A2 + EOT, A3 + a transfer surrogate) and "
        "never misread code, so the real-world tier is harder for them only where a technique is missing or fails, "
        "not because the code is long, undocumented or spread over a repository, which is what the paper's "
        "real-world defences (51 published ones, 1000 MNIST/CIFAR-10/ImageNet images, 40 LLM steps per task) make "
        "hard. The zoo is 7 defence ideas x 2 wrappers on 8x8 digits with small MLPs, retrained per seed; success "
        "rates move in steps of 1/7. Because the agents read each component's declarations (breaks gradients, random, "
        "BPDA surrogate), the skill ladder and the A3 - A1 tier difference are set by the zoo's design and are "
        "sanity checks of the agents, not findings. The gates are the official checks, but a scripted agent makes "
        "one attempt per task instead of up to 40 steps of trial and error."
    ),
)


def _per_seed(rows: pd.DataFrame, agent: str, tier: str, column: str = "attacked") -> np.ndarray:
    """Per-seed mean of ``column`` over the tier's defences, in seed order."""
    part = rows[(rows["agent"] == agent) & (rows["tier"] == tier)]
    return part.groupby("seed", sort=True)[column].mean().to_numpy(float)


def _claims(rows: pd.DataFrame) -> dict:
    rate = lambda agent, tier: _per_seed(rows, agent, tier)
    undefended = rows[(rows["agent"] == "A0") & (rows["defence"] == "undefended")].sort_values("seed")
    ratio = (undefended["robust_accuracy"] / undefended["clean_accuracy"]).tolist()
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


@paper_flow(PAPER, Params, smoke=SMOKE)
def autoadvexbench_flow(params: Params, ctx: RunContext) -> RunOutput:
    per_seed = over_seeds(method.run_seed, ctx.seeds, p=params)
    rows = [r for seed_rows in per_seed for r in seed_rows]
    rows += method.best_of(rows, method.LADDER, ENSEMBLE, params)
    rows += method.best_of(rows, ("A0", "A0_reseeded"), A0_TWICE, params)
    frame = pd.DataFrame(rows)
    save_parquet(frame, ctx.data_dir / "attempts.parquet")
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
                     setup=_setup(params), notes=_notes(metrics, table))


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
            "bootstrap over seeds.")


def _notes(m: dict, table: pd.DataFrame) -> str:
    s = m["success_rate"]
    rates = "; ".join(f"{a}: CTF {s[a]['ctf']['mean']:.2f}, real {s[a]['real']['mean']:.2f}"
                      for a in (*SHOWN, "A0_reseeded", A0_TWICE))
    ladder = table[table["agent"].isin(SHOWN)].pivot_table(index=["tier", "defence"], columns="agent",
                                                            values="robust_accuracy", sort=False)
    clean = table[table["agent"] == "A0"].set_index(["tier", "defence"])["clean_accuracy"]
    lines = [f"Success rates (share of the tier's defences attacked, mean over seeds): {rates}.", "",
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
    lines += ["", DEVIATIONS]
    return "\n".join(lines)
