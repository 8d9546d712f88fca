"""Generative social choice with budgets as a Prefect flow: DemocraticProcess on the paper's synthetic
agents with exact and approximately accurate (brute-force, error-injected) queries, its cost-based-BJR
guarantees checked by brute force over every statement, against a utilitarian greedy slate, a
cluster-then-summarize slate and random slates."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.gsc_budget import method
from flows.gsc_budget.params import SMOKE, Params
from tasks import stats
from tasks.contract import Claim, Control, Paper, RunContext, RunOutput, ci
from tasks.data import save_parquet
from tasks.paper import over_seeds, paper_flow

LABEL = {"democratic": "DemocraticProcess", "greedy": "utilitarian greedy", "cluster": "cluster-then-summarize",
         "random": "random slate"}

PAPER = Paper(
    slug="gsc_budget",
    title="Generative Social Choice: The Next Generation",
    method="DemocraticProcess (slate generation with Disc/Gen queries under a length budget)",
    paper_class="A",
    source="abstracts-003.txt #12",
    official_code="sara-fish/gen-soc-choice-next-gen (synthetic_experiments/main.py read in full)",
    claims=(
        Claim(id="cbjr_exact_queries",
              text=("providing theoretical guarantees ... and a budget limit on the overall length of the slate: with "
                    "exact queries (beta = delta = 0, mu = gamma = 1) DemocraticProcess satisfies cost-based BJR -- no "
                    "group of >= ceil(c(a) n / B) agents all strictly gains from some statement a -- in 100% of the "
                    "synthetic instances (uniform and Gaussian agents, B in the run's budgets)"),
              source="abstract; plan claim 1 (exact, a theorem check by brute force over all statements)",
              metric="exact.cbjr_rate.democratic", comparison=">=", threshold=1.0, kind="exact", role="claim",
              per_seed="exact.cbjr_rate_per_seed.democratic", every_instance=True,
              # a sensible non-proportional slate on the same instances, judged by the same axiom
              control=Control(name="utilitarian greedy slate (best-of-slate utility), same instances",
                              metric="exact.cbjr_rate.greedy")),
        Claim(id="approx_guarantee_all_cells",
              text=("providing theoretical guarantees even in the face of approximately optimal queries: with "
                    "beta-accurate Disc and (gamma, delta, mu)-accurate Gen, no (c, d)-deviation with c > 2 beta + delta "
                    "and d > 1 / (mu gamma) -- in 100% of instances, worst cell of the error grid (every beta, delta, "
                    "(mu, gamma) and error mode of the run, the exact cell included)"),
              source="abstract; plan claim 2 (exact, theorem check; the official heatmap bound)",
              metric="approx.min_rate.democratic", comparison=">=", threshold=1.0, kind="exact", role="claim",
              per_seed="approx.min_rate_per_seed.democratic", per_setting="approx.rate_by_cell.democratic",
              every_instance=True,
              # the non-proportional slate nearest the question (a random slate fails every bound by a mile);
              # where greedy meets every bound too, the check has no power on these instances
              control=Control(name="utilitarian greedy slate of budget B (best-of-slate utility), judged against "
                                   "each cell's bound",
                              metric="approx.min_rate.greedy")),
        Claim(id="p10_utility_above_greedy",
              text=("demonstrating its effectiveness in generating representative slates: the mean utility of the "
                    "worst-off 10% of agents (official tenth_percentile_mean; each agent's best slate statement, 0 "
                    "if none is positive) is higher under DemocraticProcess (exact queries) than under the "
                    "utilitarian greedy slate -- paired difference over seeds > 0"),
              source="abstract (representative slates); plan claim 3 (direction)",
              metric="utility.p10_diff.democratic_minus_greedy.mean", comparison=">", threshold=0.0,
              kind="direction", role="claim", interval=ci("utility.p10_diff.democratic_minus_greedy"),
              per_setting="utility.p10_diff_by_cell.democratic_minus_greedy",
              control=Control(name="random slate minus utilitarian greedy",
                              metric="utility.p10_diff.random_minus_greedy.mean",
                              interval=ci("utility.p10_diff.random_minus_greedy"))),
        Claim(id="budget_respected",
              text="every DemocraticProcess slate (exact and approximate queries) costs at most B: max cost / B <= 1",
              source="abstract (budget limit); holds by construction (each statement removes >= c(a) n / B agents)",
              metric="sanity.max_cost_over_budget", comparison="<=", threshold=1.0, kind="exact", role="sanity"),
        Claim(id="checker_matches_bruteforce_loop",
              text=("the vectorised deviation checker equals the official triple loop (statements x slacks x levels) "
                    "on a small instance with DemocraticProcess's and a random satisfaction vector: max abs diff == 0"),
              source="implementation check", metric="sanity.checker_max_abs_diff", comparison="<=", threshold=0.0,
              kind="exact", role="sanity"),
    ),
    limitations=(
        "Only the paper's synthetic experiments are reproduced: the queries are answered by brute force over all "
        "statements with injected errors, as in the official synthetic code; the GPT-4o PROSE pipeline on the "
        "city-improvement and drug-review data (LLM calls, not offline) is not run. `method.QueryOracle` is the "
        "interface a text/LLM oracle would implement (cost, Disc, Gen); no such oracle is included, so nothing "
        "here says how accurate an LLM's queries are (the beta, delta, mu, gamma a real model reaches). "
        "The guarantees are checked on small instances (m = 4 issues, o = 5 options, n = 60) where every statement "
        "can be enumerated; the official runs use 100 instances per setting and other (m, o, n, B) grids. With "
        "integer costs up to 4 the official ceil(mu x) makes mu = 0.8 compare against the same statements as "
        "mu = 1, so the mu cells only loosen the bound. The baselines are simple stand-ins (no k-means clustering "
        "of LLM embeddings as in the paper's text experiments). DemocraticProcess forms each group S' from Disc >= l, as "
        "the official code does; with delta > 0 and a worst-case Gen this can break the approximate bound (a seed-100 "
        "counterexample is described in the notes), so claim 2 tests the official algorithm, not a repaired one."
    ),
)


def _violates(rows: pd.DataFrame, beta: int, delta: int, mu: float, gamma: float, r: int) -> np.ndarray:
    cols = [f"d_c{c}" for c in range(2 * beta + delta + 1, r + 1)]
    if not cols:
        return np.zeros(len(rows), dtype=bool)
    return (rows[cols].to_numpy() > 1.0 / (mu * gamma) + 1e-9).any(axis=1)


def _per_seed(rows: pd.DataFrame, column: str, seeds: list[int]) -> list[float]:
    return [float(rows.loc[rows["seed"] == s, column].mean()) for s in seeds]


@paper_flow(PAPER, Params, smoke=SMOKE)
def gsc_budget_flow(params: Params, ctx: RunContext) -> RunOutput:
    rows = pd.DataFrame([r for seed_rows in over_seeds(method.run_seed, ctx.seeds, p=params) for r in seed_rows])
    save_parquet(rows, ctx.data_dir / "runs.parquet")
    r = params.issues * (params.options // 2)
    seeds = list(ctx.seeds)
    exact = rows[rows["exact"]]
    by_method = {m: exact[exact["method"] == m].sort_values(["seed", "agent_type", "budget", "instance"])
                 for m in method.METHODS}

    # claim 1: exact cBJR
    metrics: dict = {"exact": {
        "cbjr_rate": {m: float(g["cbjr"].mean()) for m, g in by_method.items()},
        "cbjr_rate_per_seed": {m: _per_seed(g, "cbjr", seeds) for m, g in by_method.items()},
        "mean_d_by_c": {m: [float(g[f"d_c{c}"].mean()) for c in range(r + 1)] for m, g in by_method.items()},
        "max_d_c0": {m: float(g["d_c0"].max()) for m, g in by_method.items()},
    }}

    # claim 2: the approximate guarantee, cell by cell (the exact cell included)
    dem = rows[rows["method"] == "democratic"].copy()
    dem["cell"] = [f"b{b}_d{d}_mu{mu:g}_g{g:g}_{mode}" if not ex else "exact"
                   for b, d, mu, g, mode, ex in dem[["beta", "delta", "mu", "gamma", "mode", "exact"]].itertuples(index=False)]
    dem["ok"] = ~dem["violates_bound"]
    baselines = ("greedy", "random")
    rate_by_cell = {m: {} for m in ("democratic", *baselines)}
    seed_rates = {m: [] for m in rate_by_cell}
    exact_cbjr_by_cell = {}
    for cell, g in dem.groupby("cell", sort=False):
        b, d, mu, ga = (g[c].iloc[0] for c in ("beta", "delta", "mu", "gamma"))
        rate_by_cell["democratic"][cell] = float(g["ok"].mean())
        exact_cbjr_by_cell[cell] = float(g["cbjr"].mean())
        seed_rates["democratic"].append(_per_seed(g, "ok", seeds))
        for m in baselines:   # each baseline's slate of the same instances, judged against this cell's bound
            base = by_method[m]
            ok = ~_violates(base, int(b), int(d), float(mu), float(ga), r)
            rate_by_cell[m][cell] = float(ok.mean())
            seed_rates[m].append([float(ok[base["seed"].to_numpy() == s].mean()) for s in seeds])
    random_by_cell = rate_by_cell["random"]
    metrics["approx"] = {
        "rate_by_cell": rate_by_cell,
        "min_rate": {m: min(v.values()) for m, v in rate_by_cell.items()},
        "min_rate_per_seed": {m: np.min(v, axis=0).tolist() for m, v in seed_rates.items()},
        # exact cBJR (c = 0, d = 1) under approximate queries: how much slack the errors actually need
        "exact_cbjr_rate_by_cell": exact_cbjr_by_cell,
        "worst_d_above_slack": {cell: float(g[[f"d_c{c}" for c in range(2 * int(g['beta'].iloc[0]) + int(g['delta'].iloc[0]) + 1, r + 1)]]
                                             .to_numpy().max()) if 2 * int(g['beta'].iloc[0]) + int(g['delta'].iloc[0]) < r else 0.0
                                for cell, g in dem.groupby("cell", sort=False)},
    }

    # claim 3: worst-off 10% utility, paired by seed
    p10 = {m: np.array(_per_seed(g, "p10_util_best", seeds)) for m, g in by_method.items()}
    by_cell = {}
    for m in ("democratic", "random"):
        diffs = {}
        for (t, B), g in by_method[m].groupby(["agent_type", "budget"], sort=False):
            base = by_method["greedy"]
            base = base[(base["agent_type"] == t) & (base["budget"] == B)]
            diffs[f"{t}_B{B}"] = float(g["p10_util_best"].mean() - base["p10_util_best"].mean())
        by_cell[f"{m}_minus_greedy"] = diffs
    metrics["utility"] = {
        "p10_best": {m: stats.summarize(v) for m, v in p10.items()},
        "mean_best": {m: stats.summarize(_per_seed(g, "mean_util_best", seeds)) for m, g in by_method.items()},
        "democratic_assigned": {"p10": stats.summarize(_per_seed(by_method["democratic"], "p10_util", seeds)),
                                "mean": stats.summarize(_per_seed(by_method["democratic"], "mean_util", seeds))},
        "p10_diff": {"democratic_minus_greedy": stats.paired_difference(p10["democratic"], p10["greedy"]),
                     "random_minus_greedy": stats.paired_difference(p10["random"], p10["greedy"]),
                     "cluster_minus_greedy": stats.paired_difference(p10["cluster"], p10["greedy"])},
        "p10_diff_by_cell": by_cell,
    }
    metrics["slates"] = {m: {"mean_cost": float(g["slate_cost"].mean()), "mean_statements": float(g["n_statements"].mean()),
                             "mean_length": float(g["mean_length"].mean())} for m, g in by_method.items()}

    # sanity
    metrics["sanity"] = {"max_cost_over_budget": float((dem["slate_cost"] / dem["budget"]).max()),
                         "checker_max_abs_diff": _checker_check(ctx.seeds[0])}

    plot = pd.DataFrame([{"x": c, "y": metrics["exact"]["mean_d_by_c"][m][c], "series": LABEL[m]}
                         for m in method.METHODS for c in range(r + 1)])
    table = pd.DataFrame([{"cell": k, "democratic_ok_rate": v, "greedy_ok_rate": rate_by_cell["greedy"][k],
                           "random_ok_rate": random_by_cell[k],
                           "democratic_exact_cbjr_rate": exact_cbjr_by_cell[k]} for k, v in rate_by_cell["democratic"].items()])
    return RunOutput(metrics=metrics, tables={"plot": plot, "approx_by_cell": table},
                     figure=_figure(plot, metrics, r), setup=_setup(params, rows), notes=_notes(params, metrics))


def _checker_check(seed: int) -> float:
    """The vectorised checker against the official triple loop on a tiny instance (m = 2, o = 3, n = 12)."""
    rng = np.random.default_rng([seed, 99])
    inst = method.make_instance(method.sample_opinions(rng, "uniform", 12, 2, 3), 3)
    oracle = method.SyntheticOracle(inst, method.EXACT, "random", rng)
    slate = method.democratic_process(oracle, inst.n, 2, 3, inst.max_level)
    worst = 0.0
    for sat in (method.assigned_utility(inst, slate), rng.integers(inst.min_level, inst.max_level + 1, inst.n)):
        worst = max(worst, float(np.abs(method.deviation_ratios(inst, sat, 3)
                                        - method.naive_deviation_ratios(inst, sat, 3)).max()))
    return worst


def _figure(plot: pd.DataFrame, metrics: dict, r: int):
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.4))
    for series, g in plot.groupby("series", sort=False):
        axes[0].plot(g["x"], g["y"], "o-", label=series)
    axes[0].axhline(1.0, color="k", ls="--", lw=1, label="d = 1 (a full deviating group)")
    axes[0].set(xlabel="slack c", ylabel="mean largest deviating group / ceil(c(a) n / B)",
                title="exact queries: deviation ratio d[c] (mean over instances)")
    axes[0].legend(fontsize=8)
    cells = metrics["approx"]["rate_by_cell"]
    names = list(cells["democratic"])
    x = np.arange(len(names))
    axes[1].bar(x - 0.2, [cells["democratic"][n] for n in names], 0.4, label="DemocraticProcess")
    axes[1].bar(x + 0.2, [cells["random"][n] for n in names], 0.4, label="random slate")
    axes[1].set_xticks(x, names, rotation=90, fontsize=6)
    axes[1].set(ylabel="fraction of instances without a (c > 2b + d, d > 1/(mu g)) deviation",
                title="approximate queries: the guarantee, cell by cell")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    return fig


def _setup(params: Params, rows: pd.DataFrame) -> str:
    n_inst = rows[rows["method"] == "greedy"].shape[0]
    statements = (params.options + 1) ** params.issues - 1
    return (
        f"Synthetic instances as the official `synthetic_experiments/main.py`: n = {params.agents} agents, m = "
        f"{params.issues} issues, o = {params.options} options ({statements} statements, cost = issues fixed, "
        f"utility per issue floor(o/2) - |a - s|), agent types {', '.join(params.agent_types)}, budgets B in "
        f"{params.budgets}; {params.instances_per_seed} instances per (type, B) per seed, {params.seeds} seeds "
        f"({n_inst} instances). DemocraticProcess (official version 0) is run with exact queries and with "
        f"{len(params.error_cells)} approximate cells x modes {params.error_modes} on every instance (the same "
        "instances, independent query noise). Queries: brute force over all statements with the official errors. "
        "Deviations are checked by brute force over every statement, level and slack. Baselines: utilitarian "
        f"greedy per unit cost, k-means (k = B // {params.cluster_share}) then the best statement of cost <= "
        f"{params.cluster_share} per cluster, random affordable statements. DemocraticProcess is judged on its "
        "assignment (an agent's utility for the statement whose group it joined, 0 if none, as the official code); "
        "baselines, which have no assignment, on each agent's best slate statement floored at 0 (more generous); the "
        "utility claim uses the best-of-slate reading for every method."
    )


def _notes(params: Params, metrics: dict) -> str:
    ex, ap, ut = metrics["exact"], metrics["approx"], metrics["utility"]
    d = ut["p10_diff"]
    fmt = lambda v: f"{v['mean']:.3f} [{v['ci_low']:.3f}, {v['ci_high']:.3f}]"
    failing = {k: v for k, v in ap["rate_by_cell"]["democratic"].items() if v < 1.0}
    exact_cbjr = ap["exact_cbjr_rate_by_cell"]
    return (
        "**Exact cBJR.** Fraction of instances satisfying cost-based BJR: "
        + ", ".join(f"{LABEL[m]} {v:.3f}" for m, v in ex["cbjr_rate"].items())
        + ". Largest d[0] over instances: " + ", ".join(f"{LABEL[m]} {v:.3f}" for m, v in ex["max_d_c0"].items())
        + ". DemocraticProcess's slates are judged on its assignment, the baselines on their best statement (the "
        "baselines get the easier reading). "
        + ("The utilitarian greedy slate meets cBJR as often as DemocraticProcess on these instances, so at this scale "
           "the axiom does not separate a proportional slate from a utilitarian one and the exact-query check has no "
           "power; the approximate-query runs below (exact cBJR broken by the errors, the relaxed bound kept) and the "
           "random slates are where the checker bites."
           if ex["cbjr_rate"]["greedy"] >= 1.0 else
           "The utilitarian greedy slate breaks cBJR on some instances, which DemocraticProcess never should.")
        + "\n\n"
        f"**Approximate queries.** Worst cell: DemocraticProcess {ap['min_rate']['democratic']:.3f}, utilitarian greedy "
        f"{ap['min_rate']['greedy']:.3f} (the control: a non-proportional slate judged against each cell's bound), random "
        f"slate {ap['min_rate']['random']:.3f}. "
        + ("Greedy meets every cell's bound on every instance, so the bound does not separate a proportional slate from "
           "a utilitarian one here and the claim has no power. " if ap["min_rate"]["greedy"] >= 1.0 else "")
        + "Cells where DemocraticProcess breaks the bound: "
        + (", ".join(f"{k} {v:.3f}" for k, v in failing.items()) or "none")
        + ". A known way it breaks (found at common.seed 100: Gaussian agents, B = 4, cell beta 0, delta 1, mu 1, "
        "gamma 0.8, worst mode, d[2] = 1.267 > 1.25 with 45 of 60 agents unassigned): the process forms S' from "
        "Disc >= l, as the official `base_slate_generation` does, while a delta-accurate Gen only promises support at "
        "l - delta; worst-mode Gen returns, at every level, a statement with just enough support at l - delta and "
        "too little at l, so no later group reaches ceil(c(a) n / B) and the loop ends at l = 0 with the agents left "
        "over. Forming S' from Disc >= l - delta - beta (which the slack 2 beta + delta suggests) removes this "
        "counterexample; we keep the official rule, so such a seed is a counterexample to the claim (listed with its "
        "verdict; while the greedy control meets every bound too, the verdict reads inconclusive, no power)"
        + ". Exact cBJR (c = 0, d = 1) under the approximate queries holds in: "
        + ", ".join(f"{k} {v:.2f}" for k, v in exact_cbjr.items())
        + " -- where it falls below 1 the errors do create deviations, and the slack c > 2 beta + delta absorbs them. "
        "Largest d above each cell's slack: " + ", ".join(f"{k} {v:.2f}" for k, v in ap["worst_d_above_slack"].items())
        + ". At large slack (e.g. beta = 2, delta = 1: c >= 6 of at most 8) the bound is nearly vacuous: any slate "
        "meets it, which the random-slate column shows cell by cell.\n\n"
        "**Worst-off 10% (best-of-slate utility, per-seed means).** "
        + ", ".join(f"{LABEL[m]} {fmt(v)}" for m, v in ut["p10_best"].items())
        + f". DemocraticProcess - greedy {fmt(d['democratic_minus_greedy'])}; random - greedy "
        f"{fmt(d['random_minus_greedy'])}; cluster - greedy {fmt(d['cluster_minus_greedy'])}. By cell (DP - greedy): "
        + ", ".join(f"{k} {v:.3f}" for k, v in ut["p10_diff_by_cell"]["democratic_minus_greedy"].items())
        + ". Mean utility (best-of-slate): " + ", ".join(f"{LABEL[m]} {fmt(v)}" for m, v in ut["mean_best"].items())
        + f"; DemocraticProcess on its assignment: mean {fmt(ut['democratic_assigned']['mean'])}, worst-off 10% "
        f"{fmt(ut['democratic_assigned']['p10'])}.\n\n"
        "**Slates.** " + "; ".join(f"{LABEL[m]}: cost {v['mean_cost']:.2f}, {v['mean_statements']:.2f} statements of "
                                  f"mean length {v['mean_length']:.2f}" for m, v in metrics["slates"].items())
        + ".\n\n**Sources and deviations.** DemocraticProcess, the error model, the agents and the (c, d) checker follow "
        "the official synthetic code (read in full; this is a vectorised re-implementation). Gen's ceil(gamma s*) is "
        "taken after rounding gamma s* to 9 decimals (the official float ceil makes 0.8 x 15 need 13 supporters). "
        "The official Gen ties are random; here they are drawn from a seeded generator."
    )
