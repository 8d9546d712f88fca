"""A scheduled run is a re-check: through the same function the deployment's flow calls, it writes
outside results/, compares verdicts claim by claim, and fails when one changed."""

import json
import shutil

import pytest
from conftest import ROOT

from paperflows.pipeline import run_paper
from paperflows.recheck import RECHECK_DIR, VerdictDrift, compare_verdicts, recheck_paper

SLUG = "quantum_reuploading"  # seconds at smoke scale, and no claim on runtimes (those may flip by load)


def test_recheck_leaves_results_alone_and_fails_when_a_verdict_changed(tmp_path):
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    run_paper(SLUG, params_file=tmp_path / "params.yaml", out_root=tmp_path, smoke=True)  # "committed" results
    committed_file = tmp_path / "results" / SLUG / "metrics.json"
    committed = committed_file.read_bytes()

    report = recheck_paper(SLUG, root=tmp_path, stamp="first", smoke=True)
    assert report["changed"] == [] and all(not row["changed"] for row in report["rows"])
    assert (tmp_path / RECHECK_DIR / "first" / "results" / SLUG / "drift.json").is_file()
    assert committed_file.read_bytes() == committed, "a re-check never writes into results/"

    document = json.loads(committed)
    claim = next(iter(document["claims"]))
    flipped = "inconclusive" if document["claims"][claim]["verdict"] != "inconclusive" else "reproduced"
    document["claims"][claim]["verdict"] = flipped
    committed_file.write_text(json.dumps(document))
    with pytest.raises(VerdictDrift, match=claim):
        recheck_paper(SLUG, root=tmp_path, stamp="second", smoke=True)
    drift = json.loads((tmp_path / RECHECK_DIR / "second" / "results" / SLUG / "drift.json").read_text())
    assert drift["changed"] == [claim]


def test_compare_verdicts_lists_claims_added_or_dropped():
    rows = compare_verdicts({"claims": {"a": {"verdict": "reproduced", "observed": 1.0}}},
                            {"claims": {"b": {"verdict": "reproduced", "observed": 2.0}}})
    assert [(r["claim"], r["committed"], r["now"], r["changed"]) for r in rows] == [
        ("a", "reproduced", "absent", True), ("b", "absent", "reproduced", True)]
