"""GridToM, the experiment: text false-belief stories in a grid world, a real pretrained LM (SmolLM2-135M-Instruct
by default), per-head probes for false vs true belief and training-free ITI-style steering of the best heads.

Records: ``accuracy`` (one row per seed, intervention and question split: accuracy and mean log-probability margin
of the correct room), ``probes`` (one row per seed and head), ``validation_grid`` (one row per seed and (K, alpha)
setting) and ``chosen`` (one row per seed: the steering chosen on validation, the answers it changes, the own-code
checks). Scored by ``evaluate.py`` against the claims in ``claims.py``.
"""

from __future__ import annotations

import pandas as pd

from flows.gridtom import method
from flows.gridtom.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import over_seeds, paper_experiment
from tasks.data import save_parquet


@paper_experiment("gridtom", Params, smoke=SMOKE, seed_separable=True)
def gridtom_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """Probing and steering a pretrained LM on text GridToM stories, per seed."""
    rows = over_seeds(method.run_seed, ctx.seeds, p=params)
    stories = [{"seed": seed, "split": split, "false_belief_text": story.text(True),
                "true_belief_text": story.text(False), "first_room": story.first, "last_room": story.last}
               for seed in ctx.seeds
               for split, drawn in zip(("probe", "validation", "test"), method.seed_stories(params, seed))
               for story in drawn]
    save_parquet(pd.DataFrame(stories), ctx.data_dir / "stories.parquet")   # the dataset: every seed's stories
    return {
        "accuracy": pd.DataFrame([{"seed": r["seed"], "condition": c, "split": s, "accuracy": v,
                                   "margin": r["margin"][c][s]}
                                  for r in rows for c, by_split in r["accuracy"].items() for s, v in by_split.items()]),
        "probes": pd.DataFrame([{"seed": r["seed"], "layer": h // r["n_heads"], "head": h % r["n_heads"],
                                 "false_belief": r["head_accuracy"][h], "permuted": r["head_accuracy_permuted"][h],
                                 "question": r["head_accuracy_question"][h]}
                                for r in rows for h in range(len(r["head_accuracy"]))]),
        "validation_grid": pd.DataFrame([{"seed": r["seed"], "setting": name, "val_balanced_accuracy": v["balanced"],
                                          "val_false_belief_accuracy": v["false"],
                                          "val_true_belief_accuracy": v["true"]}
                                         for r in rows for name, v in r["val_grid"].items()]),
        "chosen": pd.DataFrame([{"seed": r["seed"], "k": r["chosen_k"], "alpha": r["chosen_alpha"],
                                 "top_heads": " ".join(map(str, r["top_heads"])),
                                 "random_heads": " ".join(map(str, r["random_heads"])),
                                 "false_belief_answers_changed": r["false_belief_answers_changed"],
                                 "probe_set_false_belief": r["probe_set_accuracy"]["false_belief"],
                                 "probe_set_true_belief": r["probe_set_accuracy"]["true_belief"],
                                 "probe_set_reality": r["probe_set_accuracy"]["reality"],
                                 "cache_path_max_abs": r["cache_path_max_abs"],
                                 "hook_identity_max_abs": r["hook_identity_max_abs"]} for r in rows]),
    }
