"""Seed robustness: papers rerun at shifted seeds, verdicts compared claim by claim, never over results/."""

import json

import pytest
import yaml
from conftest import ROOT

from paperflows.params import load_params_model
from paperflows.pipeline import run_paper
from paperflows.robustness import robustness
from paperflows.summary import robustness_markdown, summary_markdown

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
    claims = record["papers"][SLUG]["claims"]
    assert record["papers"][SLUG]["fingerprint"] == fresh["fingerprint"] == document["fingerprint"]
    assert record["papers"][SLUG]["params"] == fresh["params"] == document["params"]
    assert claims == {cid: {"verdict": c["verdict"], "role": c["role"]} for cid, c in fresh["claims"].items()}
    assert json.loads((tmp_path / "results" / "robustness.json").read_text()) == record
    flips = [cid for cid, c in claims.items() if c["verdict"] != document["claims"][cid]["verdict"]]
    report = (tmp_path / "results" / "ROBUSTNESS.md").read_text()
    row = next(line for line in report.splitlines() if line.startswith(f"| `{SLUG}` |"))
    assert all(f"`{cid}`:" in row for cid in flips) and (flips or row.endswith("| – |"))

    # re-scoring the stored shifted records with today's evaluation trains nothing and gives the same verdicts
    meta = tmp_path / ".paperflows/robustness/offset-7/records" / SLUG / "meta.json"
    stored = meta.read_bytes()
    assert robustness([SLUG], offset=7, root=tmp_path, echo=lambda _: None, rescore=True) == record
    assert meta.read_bytes() == stored

def _write_results(results, verdicts: dict[str, str]) -> None:
    """A minimal committed metrics.json for paper `p`: claims a and b, sanity check s, with these verdicts."""
    (results / "p").mkdir(parents=True, exist_ok=True)
    claim = {"role": "claim", "observed": 1.0, "comparison": ">", "threshold": 0.0, "text": "t",
             "kind": "direction", "control": None, "control_reason": "r"}
    claims = {cid: {**claim, "role": "sanity" if cid == "s" else "claim", "verdict": v} for cid, v in verdicts.items()}
    count = lambda role: {v: sum(c["verdict"] == v for c in claims.values() if c["role"] == role)  # noqa: E731
                          for v in ("reproduced", "not reproduced", "inconclusive")}
    (results / "p" / "metrics.json").write_text(json.dumps({
        "title": "P", "method": "m", "paper_class": "A", "claims": claims, "fingerprint": "f1",
        "verdicts": count("claim"), "sanity": count("sanity")}))


def test_flips_are_derived_from_the_committed_verdicts_as_they_are_now(tmp_path):
    record = {"offset": 100, "papers": {"p": {"fingerprint": "f1", "claims": {
        "a": {"verdict": "inconclusive", "role": "claim"},
        "b": {"verdict": "reproduced", "role": "claim"},
        "s": {"verdict": "reproduced", "role": "sanity"}}}}}
    results = tmp_path / "results"
    _write_results(results, {"a": "reproduced", "b": "reproduced", "s": "reproduced"})
    text = robustness_markdown(record, results, ["p"])
    assert "| `p` | 1/2 | 1/1 | `a`: reproduced → inconclusive |" in text and "offset 100: 1/2 (50%)" in text
    (results / "robustness.json").write_text(json.dumps(record))
    summary = summary_markdown(results, ["p"])
    line_a = next(line for line in summary.splitlines() if line.startswith("| a |"))
    line_b = next(line for line in summary.splitlines() if line.startswith("| b |"))
    assert "flips to inconclusive at seed offset 100" in line_a and "flips" not in line_b

    # the paper is rerun and `a` now commits as inconclusive, `b` as not reproduced: the same robustness
    # record now says `a` holds and `b` flips, with no robustness rerun
    _write_results(results, {"a": "inconclusive", "b": "not reproduced", "s": "reproduced"})
    text = robustness_markdown(record, results, ["p"])
    assert "| `p` | 1/2 | 1/1 | `b`: not reproduced → reproduced |" in text and "with 1 hard flips" in text
    summary = summary_markdown(results, ["p"])
    line_a = next(line for line in summary.splitlines() if line.startswith("| a |"))
    line_b = next(line for line in summary.splitlines() if line.startswith("| b |"))
    assert "flips" not in line_a and "flips to reproduced at seed offset 100" in line_b


def test_the_command_counts_flips_against_the_committed_verdicts(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    import paperflows.robustness
    from paperflows.cli import app

    record = {"offset": 100, "papers": {"p": {"fingerprint": "f1", "claims": {
        "a": {"verdict": "inconclusive", "role": "claim"},
        "b": {"verdict": "reproduced", "role": "claim"},
        "s": {"verdict": "not reproduced", "role": "sanity"}}}}}
    _write_results(tmp_path / "results", {"a": "reproduced", "b": "reproduced", "s": "reproduced"})
    monkeypatch.setattr(paperflows.robustness, "robustness", lambda *args, **kwargs: record)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["robustness", "p"])
    assert result.exit_code == 0 and "2 verdicts flip at seed offset 100" in result.output


def test_a_record_from_other_kernels_or_rules_is_stale_not_a_flip(tmp_path):
    """A robustness record without the committed results' fingerprint digest (older layout, or other kernels)
    or params (the experiment changed since) would compare two setups: the paper reads stale, and no claim is
    marked as flipping."""
    results = tmp_path / "results"
    _write_results(results, {"a": "reproduced", "b": "reproduced", "s": "reproduced"})
    old_layout = {"offset": 100, "papers": {"p": {"a": {"verdict": "inconclusive", "role": "claim"}}}}
    other_kernels = {"offset": 100, "papers": {"p": {"fingerprint": "f2", "claims": {
        "a": {"verdict": "inconclusive", "role": "claim"}}}}}
    # the paper's experiment changed since (its params differ from the committed ones): another setup too
    other_params = {"offset": 100, "papers": {"p": {"fingerprint": "f1", "params": {"model": "old"}, "claims": {
        "a": {"verdict": "inconclusive", "role": "claim"}}}}}
    for record in (old_layout, other_kernels, other_params):
        assert "| `p` | stale | | |" in robustness_markdown(record, results, ["p"])
        (results / "robustness.json").write_text(json.dumps(record))
        assert "flips" not in next(line for line in summary_markdown(results, ["p"]).splitlines()
                                   if line.startswith("| a |"))


def test_papers_run_longest_first_and_one_that_fails_loses_no_other(tmp_path, monkeypatch):
    """With two at a time, the longest paper (committed runtime) starts first; a paper that fails is named after
    the others' verdicts are recorded."""
    import paperflows.robustness

    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"common": {"seed": 0}, "papers": {"p": {}, "q": {}, "r": {}}}))
    for slug, seconds in (("p", 5.0), ("q", 50.0), ("r", 20.0)):
        (tmp_path / "results" / slug).mkdir(parents=True)
        (tmp_path / "results" / slug / "metrics.json").write_text(json.dumps(
            {"claims": {}, "metrics": {"timings": {"flow_body_s": seconds}}}))
    started = []

    def fake_run(slug, params_file, out_root, seed, rescore):
        started.append(slug)
        if slug == "q":
            raise RuntimeError("paperflows run q failed")
        (out_root / "results" / slug).mkdir(parents=True, exist_ok=True)
        (out_root / "results" / slug / "metrics.json").write_text(json.dumps(
            {"fingerprint": "f1", "params": {}, "claims": {"a": {"verdict": "reproduced", "role": "claim"}}}))

    monkeypatch.setattr(paperflows.robustness, "shifted_run", fake_run)
    with pytest.raises(RuntimeError, match="1 papers failed at shifted seeds .*: q"):
        robustness(root=tmp_path, offset=100, echo=lambda _: None, workers=2)
    assert started[0] == "q" and set(started) == {"p", "q", "r"}
    record = json.loads((tmp_path / "results" / "robustness.json").read_text())
    assert sorted(record["papers"]) == ["p", "r"]
    assert record["papers"]["p"]["claims"] == {"a": {"verdict": "reproduced", "role": "claim"}}
    assert (tmp_path / "results" / "ROBUSTNESS.md").is_file()
