"""The claims of AutoAdvExBench, fixed before any run: each names a metric of ``evaluate.py`` and its threshold."""

from __future__ import annotations

from paperflows.core.contract import Claim, Control, Paper, ci

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
