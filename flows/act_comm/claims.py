"""The claims of activation communication, fixed before any run: each names a metric of ``evaluate.py`` and its
threshold."""

from __future__ import annotations

from paperflows.core.contract import Claim, Control, Paper, ci

ON_REAL_MODELS = ("between real pretrained models (A = SmolLM2-135M-Instruct is told '<name> is in <city>.', "
                  "B = Gemma-3-270M is asked 'Which country is <name> in?' and answers among 25 countries)")
GATES = ("b_reads_fact", "map_generalises")
MISMATCHED = "AC fed another test episode's A activation (a derangement), same map, depth and f"

PAPER = Paper(
    slug="act_comm",
    title="Communicating Activations Between Language Model Agents",
    method=("Activation communication (AC): A's last-token block-k activation, mapped into B's residual space by a "
            "least-squares linear map, combined into B's last token after block j by f"),
    paper_class="B",
    source="abstracts-004.txt #9",
    official_code=None,
    claims=(
        Claim(id="ac_beats_b_alone",
              text=("[AC] scales up LMs on new tasks with zero additional parameters and data: test accuracy of AC "
                    f"(depth and f chosen on validation) - accuracy of B alone > 0 {ON_REAL_MODELS}"),
              source="abstract; plan claim check 1 (direction)", metric="diff.ac_minus_b_alone.mean",
              comparison=">", threshold=0.0, kind="direction", role="claim", interval=ci("diff.ac_minus_b_alone"),
              # a map fitted on pairs shuffled across positions carries no correspondence between the two models:
              # if it also beat B alone, AC's gain would be the perturbation, not A's information
              control=Control(name="AC through the shuffled-pair map - B alone",
                              metric="diff.shuffled_minus_b_alone.mean", interval=ci("diff.shuffled_minus_b_alone")),
              requires=GATES),
        Claim(id="ac_beats_nl",
              text=("[AC] achieves up to 27% improvement over natural language communication: test accuracy of AC "
                    f"(depth and f chosen on validation) - accuracy of NL communication > 0 {ON_REAL_MODELS}; NL: A "
                    "greedily writes a message (to eos, at most 32 tokens), B reads it before its question"),
              source="abstract; plan claim check 2 (direction)", metric="diff.ac_minus_nl.mean",
              comparison=">", threshold=0.0, kind="direction", role="claim", interval=ci("diff.ac_minus_nl"),
              # a graft that carries nothing about this episode must not beat NL: otherwise AC's edge is NL's failure
              control=Control(name=f"{MISMATCHED} - NL", metric="diff.mismatched_minus_nl.mean",
                              interval=ci("diff.mismatched_minus_nl")),
              requires=GATES),
        Claim(id="ac_flops_quarter_of_nl",
              text=("[AC] saves a substantial amount of compute over natural language communication ... with <1/4 "
                    "the compute: mean FLOPs of AC / mean FLOPs of NL communication <= 0.25 "
                    f"{ON_REAL_MODELS}; analytic matmul FLOPs of what each protocol runs (A up to block k, the map "
                    "and B's question for AC; A's prompt, its greedy decoding with a key/value cache and B reading "
                    "message + question for NL)"),
              source="abstract; plan claim check 3 (magnitude)", metric="flops.ac_over_nl.ratio",
              comparison="<=", threshold=0.25, kind="magnitude", role="claim", interval=ci("flops.ac_over_nl"),
              control_reason=("an analytic count of the matmuls each protocol runs on the same episodes (checked "
                              "against torch's FLOP counter, sanity flops_match_torch_counter); nothing in it can "
                              "pass by chance, and no protocol of the run is one that must cost more than 1/4 of NL "
                              "(full information and B alone skip A altogether)")),
        Claim(id="b_reads_fact",
              text=("capability gate: B (Gemma-3-270M) answers which country the person is in when told the fact "
                    "in plain text ('Agent A says: <name> is in <city>.' before the question): test accuracy "
                    ">= 0.5 among 25 countries (chance 0.04); without it no protocol can transmit anything B uses"),
              source="ours (plan: full-info upper bound)", metric="accuracy.full_info.mean", comparison=">=",
              threshold=0.5, kind="magnitude", role="sanity", interval=ci("accuracy.full_info")),
        Claim(id="map_generalises",
              text=("the least-squares map W from A's block-k residual to B's block-j residual (chosen depth) "
                    "explains variance of B's activations on held-out shared-text paragraphs: held-out R^2 > 0"),
              source="ours (the paper's map is fitted on generic text)", metric="map.r2_heldout.mean",
              comparison=">", threshold=0.0, kind="magnitude", role="sanity", interval=ci("map.r2_heldout")),
        Claim(id="hook_write_back_is_identity",
              text=("grafting B's own last-token state after block j back into B with f = replace leaves B's logits "
                    "unchanged (max abs difference over seeds < 1e-6): the grafting hook has no side effect"),
              source="ours", metric="sanity.hook_identity_max_abs", comparison="<", threshold=1e-6,
              kind="exact", role="sanity"),
        Claim(id="flops_match_torch_counter",
              text=("the analytic dense FLOPs of a full forward of each model equal torch's FlopCounterMode count "
                    "(relative difference < 1e-12)"),
              source="ours", metric="sanity.dense_flops_rel_error", comparison="<", threshold=1e-12,
              kind="exact", role="sanity"),
    ),
    limitations=(
        "Two real but small pretrained models (135M and 270M parameters, against the paper's LLaMA 3B-8B pairs) "
        "play the agents on one game built here (the Countries game with 50 real cities in 25 countries), at "
        "reduced scale (80 test episodes per seed). The paper's reasoning benchmarks (GSM8k, Biographies, ...) "
        "and its Tip Sheets game are not run: 135M/270M models cannot do them. The map W is fitted on a small "
        "templated generic text (100 paragraphs, half wrapped in SmolLM2's chat template), not on the paper's "
        "corpus; (k, j) are restricted to matched relative depths (3 of them, one the paper's 26/32). The NL "
        "baseline is one message from A, not the paper's multi-round debate, and B's answer is read as the most "
        "likely of the 25 countries' first tokens (multiple choice), not free decoding. No official code exists; "
        "the protocol is written from the paper's description (last-token grafting, f in {replace, sum, mean}, "
        "least-squares map between models, FLOP accounting)."
    ),
)
