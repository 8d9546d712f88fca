"""Seed robustness: papers rerun at shifted seeds, verdicts compared claim by claim, never over results/."""

import json

import yaml
from conftest import ROOT

from paperflows.params import load_params_model
from paperflows.pipeline import run_paper
from paperflows.robustness import robustness, robustness_markdown
from paperflows.summary import summary_markdown

SLUG = "quantum_reuploading"


def test_robustness_reruns_at_shifted_seeds_and_marks_flips(tmp_path):
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    raw["papers"][SLUG].update(load_params_model(SLUG)[1])  # smoke values in the file: seconds, same code path
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    run_paper(SLUG, params_file=tmp_path / "params.yaml", out_root=tmp_path)  # the "committed" results
    committed_file = tmp_path / "results" / SLUG / "metrics.json"
    committed = committed_file.read_bytes()

    record = robustness([SLUG], offset=7, root=tmp_path, echo=lambda _: None)
    fresh = json.loads((tmp_path / ".paperflows/robustness/offset-7/results" / SLUG / "metrics.json").read_text())
    assert fresh["seeds"][0] == raw["common"]["seed"] + 7
    assert committed_file.read_bytes() == committed, "the robustness run never writes into results/"
    document = json.loads(committed)
    claims = record["papers"][SLUG]
    assert set(claims) == set(document["claims"])
    for cid, entry in claims.items():
        assert entry["committed"] == document["claims"][cid]["verdict"] and entry["now"] == fresh["claims"][cid]["verdict"]
        assert entry["changed"] == (entry["committed"] != entry["now"])
    assert (tmp_path / "results" / "ROBUSTNESS.md").is_file()
    assert json.loads((tmp_path / "results" / "robustness.json").read_text()) == record


def test_flipped_claims_are_marked_in_the_summary_and_counted_in_the_report(tmp_path):
    record = {"offset": 100, "papers": {"p": {
        "a": {"committed": "reproduced", "now": "inconclusive", "changed": True, "role": "claim"},
        "b": {"committed": "reproduced", "now": "reproduced", "changed": False, "role": "claim"},
        "s": {"committed": "reproduced", "now": "reproduced", "changed": False, "role": "sanity"}}}}
    text = robustness_markdown(record, ["p"])
    assert "| `p` | 1/2 | 1/1 | `a`: reproduced → inconclusive |" in text and "claims 1/2 (50%)" in text
    results = tmp_path / "results"
    (results / "p").mkdir(parents=True)
    claim = {"role": "claim", "verdict": "reproduced", "observed": 1.0, "comparison": ">", "threshold": 0.0,
             "text": "t", "kind": "direction", "control": None, "control_reason": "r"}
    (results / "p" / "metrics.json").write_text(json.dumps({
        "title": "P", "method": "m", "paper_class": "A", "claims": {"a": claim, "b": claim},
        "verdicts": {"reproduced": 2, "not reproduced": 0, "inconclusive": 0},
        "sanity": {"reproduced": 0, "not reproduced": 0, "inconclusive": 0}}))
    (results / "robustness.json").write_text(json.dumps(record))
    summary = summary_markdown(results, ["p"])
    line_a = next(line for line in summary.splitlines() if line.startswith("| a |"))
    line_b = next(line for line in summary.splitlines() if line.startswith("| b |"))
    assert "flips to inconclusive at seed offset 100" in line_a and "flips" not in line_b
