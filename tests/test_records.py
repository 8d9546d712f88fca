"""Per-seed records (paperflows.core.records) and the estimates read from them (paperflows.core.estimates)."""

import numpy as np
import pandas as pd
import pytest

from paperflows.core import estimates as est
from paperflows.core import stats
from paperflows.core.records import Records, check_tables, grow_plan, load_records, merge_records, save_records, select_seeds


def _records(seeds, meta=None):
    rows = [{"seed": s, "method": m, "acc": 0.5 + 0.1 * s + (0.2 if m == "new" else 0.0) + 0.01 * (s % 2),
             "curve": np.arange(3, dtype=np.float32) * s} for s in seeds for m in ("new", "old")]
    timing = pd.DataFrame({"seed": seeds, "seconds": [1.5 * s for s in seeds]})
    return Records({"acc": pd.DataFrame(rows), "timing": timing}, list(seeds), meta or {"key": {"a": 1}})


def test_records_round_trip_exactly_through_disk(tmp_path):
    records = _records([3, 4, 5])
    save_records(records, tmp_path / "records")
    back = load_records(tmp_path / "records")
    assert back.seeds == [3, 4, 5] and back.meta == {"key": {"a": 1}}
    pd.testing.assert_frame_equal(back["timing"], records["timing"])
    assert back["acc"]["acc"].tolist() == records["acc"]["acc"].tolist()  # float64 bits
    assert all(a.dtype == np.float32 and np.array_equal(a, b)
               for a, b in zip(back["acc"]["curve"], records["acc"]["curve"]))


def test_an_interrupted_save_leaves_the_previous_records(tmp_path, monkeypatch):
    save_records(_records([0, 1]), tmp_path / "records")
    broken = _records([0, 1, 2])
    broken.tables["bad"] = pd.DataFrame({"seed": [0], "x": [object()]})  # parquet cannot write it
    with pytest.raises(Exception):
        save_records(broken, tmp_path / "records")
    assert load_records(tmp_path / "records").seeds == [0, 1]
    assert [p.name for p in tmp_path.iterdir()] == ["records"], "no partial folder is left behind"


def test_missing_records_fail_with_the_command_to_run(tmp_path):
    with pytest.raises(FileNotFoundError, match="paperflows record"):
        load_records(tmp_path / "records" / "lapsum")


def test_tables_must_carry_the_seeds_that_were_run():
    check_tables(_records([0, 1]).tables, [0, 1], "toy")
    with pytest.raises(ValueError, match="seed"):
        check_tables({"t": pd.DataFrame({"x": [1.0]})}, [0], "toy")
    with pytest.raises(ValueError, match=r"\[7\]"):
        check_tables({"t": pd.DataFrame({"seed": [0, 7]})}, [0, 1], "toy")


def test_growing_runs_only_new_seeds_and_appends_them_in_seed_order():
    key = {"params": {"lr": 0.1}, "code": "abc"}
    stored = _records([0, 1, 2], {"key": key})
    assert grow_plan(stored, key, [0, 1, 2, 3, 4], seed_separable=True) == [3, 4]
    assert grow_plan(stored, key, [0, 1, 2, 3, 4], seed_separable=False) == [0, 1, 2, 3, 4]
    assert grow_plan(stored, key, [0, 1, 2], seed_separable=False) == [], "the same seeds and key: nothing to run"
    assert grow_plan(stored, key, [0, 1], seed_separable=False) == [0, 1], "a non-separable subset is rerun"
    assert grow_plan(stored, key, [0, 1], seed_separable=True) == []
    assert grow_plan(stored, {**key, "code": "changed"}, [0, 1, 2, 3], seed_separable=True) == [0, 1, 2, 3]
    assert grow_plan(None, key, [0, 1], seed_separable=True) == [0, 1]
    grown = merge_records(stored, _records([3, 4], {"key": key}), [0, 1, 2, 3, 4])
    fresh = _records([0, 1, 2, 3, 4])
    for name in fresh.tables:
        pd.testing.assert_frame_equal(grown[name].drop(columns=["curve"], errors="ignore"),
                                      fresh[name].drop(columns=["curve"], errors="ignore"))
    assert select_seeds(grown, [0, 1]).tables["timing"]["seed"].tolist() == [0, 1]


def test_estimates_pair_seed_s_with_seed_s_whatever_the_row_order():
    table = _records([0, 1, 2, 3])["acc"].sample(frac=1.0, random_state=0)  # rows shuffled
    new, old = est.per_seed(table, "acc", method="new"), est.per_seed(table, "acc", method="old")
    assert np.allclose(new - old, 0.2)
    assert est.paired(table, "acc", {"method": "new"}, {"method": "old"}) == stats.paired_difference(new, old)
    assert est.ratio(table, "acc", {"method": "new"}, {"method": "old"}) == stats.ratio_of_means(new, old)
    assert est.summary(table, "acc", method="new") == stats.summarize(new)


def test_estimates_refuse_unaligned_or_ambiguous_seeds():
    table = _records([0, 1, 2])["acc"]
    short = table[~((table["method"] == "old") & (table["seed"] == 2))]
    with pytest.raises(ValueError, match="seeds differ"):
        est.paired(short, "acc", {"method": "new"}, {"method": "old"})
    with pytest.raises(ValueError, match="several rows per seed"):
        est.per_seed(table, "acc")
    with pytest.raises(ValueError, match="no records match"):
        est.per_seed(table, "acc", method="absent")
    with pytest.raises(KeyError, match="no column"):
        est.per_seed(table, "acc", optimizer="sgd")


def test_by_setting_stacks_seed_aligned_rows_per_setting():
    table = pd.DataFrame([{"seed": s, "T": T, "regret": T * (s + 1)} for s in (2, 0, 1) for T in (10, 100)])
    assert est.by_setting(table, "regret", "T", [10, 100]).tolist() == [[10, 20, 30], [100, 200, 300]]


def test_check_claims_names_a_path_the_records_cannot_produce(monkeypatch):
    import flows.waitless_olp.claims as declared
    from paperflows.scoring import claim_problems

    assert claim_problems("waitless_olp") == []
    first = declared.PAPER.claims[0]
    typo = first.model_copy(update={"metric": first.metric.replace("ratio_Tmax", "ratio_Tmx")})
    monkeypatch.setattr(declared, "PAPER", declared.PAPER.model_copy(update={"claims": (typo, *declared.PAPER.claims[1:])}))
    assert claim_problems("waitless_olp") == ["waitless_olp: KeyError: \"metric 'regret.ratio_Tmx.ratio' not found "
                                              "(missing 'ratio_Tmx')\""]


def test_an_estimate_reads_as_value_and_interval_whatever_its_point_is_called():
    from paperflows.core.report import fmt_estimate

    assert fmt_estimate({"mean": 0.5, "ci_low": 0.25, "ci_high": 0.75}) == "0.5 [0.25, 0.75]"
    assert fmt_estimate({"ratio": 2.0, "ci_low": 1.5, "ci_high": 3.0}) == "2 [1.5, 3]"
    assert fmt_estimate({"mean": 1.0, "slope": -0.5, "ci_low": -1.0, "ci_high": 0.0}, "slope") == "-0.5 [-1, 0]"


def test_every_committed_record_was_made_by_the_committed_code_and_params():
    """A fresh clone's `make repro` reuses a paper's records only if their key is today's. An edit to a records
    stage's code recorded with `dvc commit` instead of a rerun leaves dvc.lock current and `dvc status` clean,
    but the records keep the old code digest, and that clone retrains the paper from scratch."""
    from conftest import ROOT

    from paperflows.params import configured_slugs
    from paperflows.repro import records_made_otherwise

    params_file = ROOT / "params.yaml"
    assert records_made_otherwise(configured_slugs(params_file), ROOT, params_file) == {}


def test_records_made_by_other_code_params_or_scale_are_named(tmp_path):
    import json
    import shutil

    import yaml
    from conftest import ROOT

    from paperflows.repro import records_made_otherwise

    slug, params_file = "lapsum", ROOT / "params.yaml"
    meta = tmp_path / "records" / slug / "meta.json"
    meta.parent.mkdir(parents=True)
    shutil.copy(ROOT / "records" / slug / "meta.json", meta)
    committed = json.loads(meta.read_text())
    assert records_made_otherwise([slug], tmp_path, params_file) == {}
    for part, changed in [("code", "0" * 16), ("smoke", True), ("base_seed", 1),
                          ("params", {**committed["key"]["params"], "tau": 2.5})]:
        meta.write_text(json.dumps({**committed, "key": {**committed["key"], part: changed}}))
        assert records_made_otherwise([slug], tmp_path, params_file) == {slug: [part]}
    # the seed counts are not part of the key: records of another count are grown or cut, not remade
    meta.write_text(json.dumps(committed))
    raw = yaml.safe_load(params_file.read_text())
    raw["papers"][slug]["seeds"] += 1
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    assert records_made_otherwise([slug], tmp_path, tmp_path / "params.yaml") == {}
    raw["papers"][slug]["tau"] = 2.5
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    assert records_made_otherwise([slug], tmp_path, tmp_path / "params.yaml") == {slug: ["params"]}
    meta.unlink()
    assert records_made_otherwise([slug], tmp_path, params_file) == {slug: ["no records"]}
