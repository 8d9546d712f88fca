"""Two looks (paperflows.core.sequential): the error a claim states holds over both looks, and only a split rule keeps it."""

import difflib
import json

import numpy as np
import pytest

from paperflows.core import stats
from paperflows.core.claims import check_claims
from paperflows.core.contract import Claim, Control, Paper, ci
from paperflows.core.sequential import LOOK_CONFIDENCE, combine_looks, undecided

CLAIM = Claim(id="gain_positive", text="the method gains", source="test", metric="gain.mean", comparison=">",
              threshold=0.0, kind="direction", role="claim", interval=ci("gain"),
              control=Control(name="A/A", metric="aa.mean", interval=ci("aa")))
PAPER = Paper(slug="toy", title="toy", method="toy", paper_class="B", source="test", official_code=None,
              claims=(CLAIM,), limitations="none")
N_FIRST, CAP = 5, 10


def look(gains: np.ndarray, confidence: float):
    """One look: the claim checked on ``gains`` (per seed) with its control clearly failing."""
    with stats.confidence_level(confidence):
        metrics = {"gain": stats.summarize(gains), "aa": stats.summarize(np.full(gains.size, -1.0) + gains * 1e-3)}
    return check_claims(PAPER, metrics, gains.size)


def verdict(gains: np.ndarray, confidence: float) -> str:
    """The claim's verdict under two looks at ``confidence`` each: look 2 only when look 1 is undecided."""
    first = look(gains[:N_FIRST], confidence)
    second = look(gains, confidence) if undecided(first) else None
    return combine_looks(first, second, CAP)[0].verdict


def rate(effect: float, confidence: float, reps: int = 4000) -> float:
    rng = np.random.default_rng(7)
    draws = rng.normal(effect, 1.0, size=(reps, CAP))
    return float(np.mean([verdict(g, confidence) == "reproduced" for g in draws]))


def test_two_looks_keep_the_one_sided_error_at_2_5_percent_and_95_percent_at_both_looks_does_not():
    # a true gain exactly at the threshold: every "reproduced" is a false claim
    assert rate(0.0, LOOK_CONFIDENCE) <= 0.025
    assert rate(0.0, 0.95) > 0.03  # reading both looks as if each were the only one inflates the error


def test_the_second_look_buys_power_over_the_first_seeds_alone():
    rng = np.random.default_rng(3)
    draws = rng.normal(0.8, 1.0, size=(2000, CAP))
    one_look = np.mean([look(g[:N_FIRST], 0.95)[0].verdict == "reproduced" for g in draws])
    two_looks = np.mean([verdict(g, LOOK_CONFIDENCE) == "reproduced" for g in draws])
    assert two_looks > one_look + 0.1


def test_each_claim_records_the_look_that_decided_it():
    decided = look(np.array([1.0, 1.1, 0.9, 1.2, 1.0]), LOOK_CONFIDENCE)
    open_ = look(np.array([1.0, -1.0, 0.5, -0.2, 0.1]), LOOK_CONFIDENCE)
    assert undecided(decided) == [] and undecided(open_) == ["gain_positive"]
    assert combine_looks(decided, None, CAP)[0].seeds_reason.startswith("decided at look 1 (5 seeds")
    assert "no look 2 yet" in combine_looks(open_, None, CAP)[0].seeds_reason
    # a sanity check left open does not ask `paperflows extend` for seeds, so its reason must not promise them
    open_check = [open_[0].model_copy(update={"role": "sanity"})]
    assert undecided(open_check) == []
    assert "opens no look 2" in combine_looks(open_check, None, CAP)[0].seeds_reason
    more = look(np.array([1.0, -1.0, 0.5, -0.2, 0.1, 2.0, 2.0, 2.0, 2.0, 2.0]), LOOK_CONFIDENCE)
    final = combine_looks(open_, more, CAP)[0]
    assert final.seeds == 10 and final.seeds_reason.startswith("decided at look 2")
    stuck = combine_looks(open_, look(np.array([1.0, -1.0] * 5), LOOK_CONFIDENCE), CAP)[0]
    assert stuck.verdict == "inconclusive" and "the seed cap" in stuck.seeds_reason
    # a claim decided at look 1 keeps that verdict whatever the later seeds say
    assert combine_looks(decided, open_, CAP)[0].verdict == "reproduced"


def test_a_look_level_applies_to_every_interval_built_inside_it_and_only_there():
    x = [1.0, 2.0, 4.0]
    with stats.confidence_level(0.99):
        wide = stats.summarize(x)
        assert stats.ratio_of_means(x, [1.0, 1.0, 1.5])["ci_high"] > stats.ratio_of_means(x, [1.0, 1.0, 1.5], 0.95)["ci_high"]
    assert wide["ci_high"] > stats.summarize(x)["ci_high"]
    assert stats.mean_ci(x) == stats.mean_ci(x, 0.95)


def test_a_seed_cap_must_exceed_the_first_look_and_bound_the_extra_seeds():
    from paperflows.core.contract import PaperParams

    assert PaperParams(seeds=5, seed_cap=10, extra_seeds=5).all_seeds == 10
    for bad in ({"seed_cap": 5}, {"extra_seeds": 2}, {"seed_cap": 8, "extra_seeds": 4}):
        with pytest.raises(ValueError):
            PaperParams(seeds=5, **bad)


def test_extend_edits_one_line_of_params_yaml_and_refuses_an_invalid_value(tmp_path):
    from conftest import ROOT

    from paperflows.params import ParamsError, read_params_file, resolve_params, set_paper_value

    path = tmp_path / "params.yaml"
    original = (ROOT / "params.yaml").read_text()
    path.write_text(original)
    set_paper_value(path, "lapsum", "seed_cap", 6)
    set_paper_value(path, "lapsum", "extra_seeds", 3)
    set_paper_value(path, "lapsum", "extra_seeds", 2)  # an existing key is replaced, not repeated
    added = [line[2:] for line in difflib.ndiff(original.splitlines(), path.read_text().splitlines())
             if line.startswith("+ ")]
    assert sorted(added) == ["    extra_seeds: 2", "    seed_cap: 6"]
    assert resolve_params("lapsum", read_params_file(path))[0].all_seeds == 5
    before = path.read_text()
    with pytest.raises(ParamsError, match="extra_seeds"):
        set_paper_value(path, "lapsum", "extra_seeds", 9)  # beyond the cap
    assert path.read_text() == before, "a refused value leaves the file as it was"


def test_extend_sizes_look_2_by_the_budget_once_and_keeps_it_under_another_load(tmp_path):
    """tgcl_ltf's committed look 1 (5 seeds) leaves a claim open. Opening look 2 buys as many seeds as
    ``extension_budget_s`` (120 s) pays at the records' time per seed, up to the cap (10); once look 2 is open,
    extend returns its size whatever the seeds cost now (else a rerun under load would shrink it)."""
    import shutil

    from conftest import ROOT

    from paperflows.params import set_paper_value
    from paperflows.scoring import extension

    slug = "tgcl_ltf"
    params = tmp_path / "params.yaml"
    params.write_text((ROOT / "params.yaml").read_text())
    shutil.copytree(ROOT / "records" / slug, tmp_path / "records" / slug)
    meta_path = tmp_path / "records" / slug / "meta.json"
    meta = json.loads(meta_path.read_text())

    def at_seconds_per_seed(seconds: float) -> None:
        # the seeds the records' run made (all of them when it reused stored records), as extend divides by
        meta_path.write_text(json.dumps({**meta, "experiment_s": seconds * len(meta["seeds_run"] or meta["seeds"])}))

    set_paper_value(params, slug, "extra_seeds", 0)   # look 1 only
    at_seconds_per_seed(40.0)
    assert extension(slug, root=tmp_path, params_file=params) == 3       # 120 s // 40 s, under the cap
    at_seconds_per_seed(1.0)
    assert extension(slug, root=tmp_path, params_file=params) == 5       # the cap: 10 - 5
    set_paper_value(params, slug, "extra_seeds", 3)   # look 2 opened at 3 seeds
    assert extension(slug, root=tmp_path, params_file=params) == 3
