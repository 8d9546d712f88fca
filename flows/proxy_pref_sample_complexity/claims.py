"""The claims of the proxy-preference paper, fixed before any run: each names a metric of ``evaluate.py`` and its
threshold."""

from __future__ import annotations

from paperflows.core.contract import Claim, Control, Paper, ci

_VIOLATED = "two-stage with the condition-violating proxy (different latent map)"

PAPER = Paper(
    slug="proxy_pref_sample_complexity",
    title="When Can Proxies Improve the Sample Complexity of Preference Learning?",
    method="Sufficient conditions on proxy feedback + two-stage parameterisation "
           "pi_dagger = phi~ o Theta~ o pi_bar o tau~ (proxy components frozen, D-dim adapter learned from expert data)",
    paper_class="A",
    source="abstracts-000.txt #11",
    official_code=None,
    claims=(
        Claim(id="two_stage_kl_ratio_at_35",
              text="proxy data can provably improve the sample complexity of learning the ground truth policy "
                   "(plan check 1: at n_true = 35, KL(two-stage) / KL(true-only) <= 0.7, mean over seeds)",
              source="abstract; plan claim check 1", metric="claims.kl_ratio_ref.mean", comparison="<=",
              threshold=0.7, kind="magnitude", role="claim",
              interval=ci("claims.kl_ratio_ref"),
              control=Control(name=_VIOLATED, metric="claims.violated_kl_ratio_ref.mean",
                              interval=ci("claims.violated_kl_ratio_ref"))),
        Claim(id="two_stage_wins_most_seeds",
              text="... and two-stage better in >= 8/10 seeds (plan check 1)",
              source="plan claim check 1", metric="claims.win_fraction_ref.mean", comparison=">=", threshold=0.8,
              kind="magnitude", role="claim", interval=ci("claims.win_fraction_ref"),
              scaled="8/10 seeds read as the probability that two-stage wins on a seed, with the exact "
                     "(Clopper-Pearson) interval of the fraction of seeds it wins",
              control=Control(name=_VIOLATED, metric="claims.violated_win_fraction_ref.mean",
                              interval=ci("claims.violated_win_fraction_ref"))),
        Claim(id="true_only_needs_3x_samples",
              text="The result implies a parameterisation for LLMs that achieves this improved sample complexity "
                   "(plan check 2: the smallest n_true at which true-only matches two-stage@35 is >= 3 x 35)",
              source="abstract; plan claim check 2", metric="claims.n_match_over_ref.mean", comparison=">=",
              threshold=3.0, kind="direction",
              role="claim", interval=ci("claims.n_match_over_ref"),
              control=Control(name=_VIOLATED, metric="claims.violated_n_match_over_ref.mean",
                              interval=ci("claims.violated_n_match_over_ref")),
              censored="claims.n_match_censored_fraction",
              scaled="n_match is interpolated in (log n, log KL) between the grid points 10..1000 and divided by "
                     "n_ref = 35; if true-only never matches, n_match is the largest grid n (a lower bound)"),
        Claim(id="advantage_vanishes_without_conditions",
              text="We outline a set of sufficient conditions on proxy feedback that, if satisfied, indicate that "
                   "proxy data can provably improve the sample complexity (plan check 3: with a proxy on a different "
                   "latent map, KL(two-stage) / KL(true-only) >= 0.9 at n_true = 35)",
              source="abstract; plan claim check 3", metric="claims.violated_kl_ratio_ref.mean", comparison=">=",
              threshold=0.9, kind="direction",
              role="claim", interval=ci("claims.violated_kl_ratio_ref"),
              control=Control(name="two-stage with the condition-satisfying proxy", metric="claims.kl_ratio_ref.mean",
                              interval=ci("claims.kl_ratio_ref"))),
    ),
    limitations=(
        "A synthetic Bradley–Terry world with 5-dimensional prompts, 3 responses and a 3-dimensional latent simplex, "
        "as in the paper's own Appendix D validation (X = R^5, Y = {1, 2, 3}, 8,000 proxy and 35 true triples); "
        "the paper's setting of interest is LLM fine-tuning, where tau~ is a transformer's representation and Theta~ "
        "its unembedding. The world is built so that the paper's four conditions hold exactly (or, in the control, "
        "condition 1 fails), so it tests whether the parameterisation delivers the advantage when the conditions hold "
        "and loses it when they fail; it cannot show how often real proxy feedback (e.g. a weaker annotator or "
        "an LLM judge) satisfies them, nor check the paper's bounds quantitatively (their constants are not "
        "computed). Every learner uses one fixed optimiser budget and prior, set before the claim checks and not "
        "tuned per method; the true-only baseline is also reported at other prior precisions as a sensitivity check."
    ),
)
