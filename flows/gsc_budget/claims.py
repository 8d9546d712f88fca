"""The claims of generative social choice with budgets, fixed before any run: each names a metric of
``evaluate.py`` and its threshold."""

from __future__ import annotations

from paperflows.core.contract import Claim, Control, Paper, ci

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
