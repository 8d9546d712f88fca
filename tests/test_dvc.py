"""DVC in a temporary copy of the repo: the generated dvc.yaml, repro at smoke scale, a clean status,
a params change that reruns only its own paper, and a tasks/ edit that reruns only its importers."""

import json
import os
import re

import yaml
from conftest import BIN, GIT_IDENTITY, ROOT, sh

from paperflows.dvcgen import dvc_yaml_text
from paperflows.params import (STAGE_PARAMS_DIR, configured_slugs, load_params_model, paper_slugs, read_params_file,
                               stage_params_text, write_stage_params)


# Two of the cheapest papers at smoke scale (seconds each), for the tests that run stages under DVC; the first is
# seed-separable, so adding a seed takes the append path
CHEAP_PAPERS = ("feddp_kmeans", "pred_equiv_trees")


def set_smoke(params_file, slugs):
    raw = yaml.safe_load(params_file.read_text())
    for slug in slugs:
        raw["papers"][slug].update(load_params_model(slug)[1])
    params_file.write_text(yaml.safe_dump(raw, sort_keys=False))
    return raw


def status(repo, env) -> dict:
    return json.loads(sh([str(BIN / "dvc"), "status", "--json"], repo, env) or "{}")


def code_changes(repo, env) -> dict[str, set[str]]:
    """{stage: the deps of its code or params that changed}, for each stage with any. A fresh copy lacks the
    DVC-cached data/ (each paper's datasets, and the converted language models some papers depend on): a missing data
    dep is not a code change."""
    def code_change(path: str, state: str) -> bool:
        return not (path.startswith("data/") and state == "deleted")

    changes = {stage: {path for c in stage_changes if isinstance(c, dict)
                       for path, state in c.get("changed deps", {}).items() if code_change(path, state)}
               for stage, stage_changes in status(repo, env).items()}
    return {stage: paths for stage, paths in changes.items() if paths}


def changed_since(before: dict[str, set[str]], repo, env) -> set[str]:
    """Stages whose changed deps differ from ``before``'s: what the edits since then made stale."""
    return {stage for stage, paths in code_changes(repo, env).items() if paths != before.get(stage, set())}


def test_committed_dvc_yaml_is_the_generated_one():
    assert (ROOT / "dvc.yaml").read_text() == dvc_yaml_text(ROOT / "params.yaml"), "run `paperflows dvc-yaml`"


def test_committed_stage_params_are_the_sections_of_params_yaml(tmp_path):
    raw = read_params_file(ROOT / "params.yaml")
    for slug in configured_slugs(ROOT / "params.yaml"):
        assert (ROOT / STAGE_PARAMS_DIR / f"{slug}.yaml").read_text() == stage_params_text(raw, slug), "run `paperflows split-params`"
    # a change to one paper's section rewrites only that paper's file
    (tmp_path / "params.yaml").write_text((ROOT / "params.yaml").read_text())
    assert write_stage_params(tmp_path) == configured_slugs(ROOT / "params.yaml")
    first = configured_slugs(ROOT / "params.yaml")[0]
    raw["papers"][first]["seeds"] += 1
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    assert write_stage_params(tmp_path) == [first]
    assert yaml.safe_load((tmp_path / STAGE_PARAMS_DIR / f"{first}.yaml").read_text())["papers"][first] == raw["papers"][first]
    raw["common"]["seed"] += 1
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    assert write_stage_params(tmp_path) == configured_slugs(ROOT / "params.yaml")  # common is in every file


EVALUATION_FILES = ("claims.py", "evaluate.py")
SCORING_MODULES = {f"paperflows/core/{name}.py" for name in ("stats", "estimates", "claims", "report", "evaluation")}


def committed_stages() -> dict[str, dict]:
    """The stages of the committed dvc.yaml, by name."""
    return yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]


def stage_sources() -> dict[str, str]:
    """Each paper stage's own source: the experiment files (stage ``<slug>``) and the evaluation files
    (``<slug>-eval``)."""
    sources = {}
    for slug in paper_slugs():
        files = sorted((ROOT / "flows" / slug).glob("*.py"))
        evaluation = "\n".join(p.read_text() for p in files if p.name in EVALUATION_FILES)
        # the evaluation runs what it imports from its own folder too (method.py's helpers, params.py)
        own = [p for p in files if p.name not in EVALUATION_FILES and re.search(
            rf"from flows\.{slug}(\.{p.stem} import| import [^\n]*\b{p.stem}\b)", evaluation)]
        sources[slug] = "\n".join(p.read_text() for p in files if p.name not in EVALUATION_FILES)
        sources[f"{slug}-eval"] = "\n".join([evaluation, *(p.read_text() for p in own)])
    return sources


def test_each_paper_depends_on_exactly_the_tasks_and_core_modules_it_imports():
    stages = committed_stages()
    for stage, source in stage_sources().items():
        for package in ("tasks", "paperflows.core"):
            folder = package.replace(".", "/") + "/"
            direct = set(re.findall(rf"from {re.escape(package)}\.(\w+) import", source)) | {
                name.split(" as ")[0] for group in re.findall(rf"from {re.escape(package)} import ([\w, ]+)", source)
                for name in group.split(", ")}
            deps = {d.removeprefix(folder).removesuffix(".py") for d in stages[stage]["deps"] if d.startswith(folder)}
            assert direct <= deps, f"{stage}: imports {direct - deps} of {package} but does not depend on it"
        assert "tasks" not in stages[stage]["deps"] and "paperflows" not in stages[stage]["deps"]
        assert "paperflows/cli.py" not in stages[stage]["deps"] and "paperflows/summary.py" not in stages[stage]["deps"]
        # the converted language models come from stage `pretrained`, and only the records stages that load one wait for it
        uses_models = stage in paper_slugs() and "tasks/pretrained.py" in stages[stage]["deps"]
        assert ("data/_pretrained" in stages[stage]["deps"]) == uses_models
    assert stages["summary"]["cmd"] == "paperflows report"
    assert {f"results/{s}/metrics.json" for s in paper_slugs()} <= set(stages["summary"]["deps"])
    users = [s for s in paper_slugs() if "data/_pretrained" in stages[s]["deps"]]
    assert ("pretrained" in stages) == bool(users)
    if users:
        assert stages["pretrained"]["outs"] == ["data/_pretrained"] and "tasks/pretrained.py" in stages["pretrained"]["deps"]


def test_the_records_code_digest_is_the_digest_of_exactly_the_stage_code_dvc_tracks():
    """The digest that keys stored records names the same files as the records stage's deps, whatever else the
    process has imported (it once hashed the loaded modules: a Dask worker or a robustness run differed)."""
    import subprocess
    import sys

    from paperflows.imports import files_digest
    from paperflows.stages import code_digest

    stages = committed_stages()
    for slug in CHEAP_PAPERS:
        code = sorted((ROOT / dep).resolve() for dep in stages[slug]["deps"] if dep.endswith(".py"))
        assert code_digest(slug) == files_digest(code)
        probe = (f"import sys; from paperflows.stages import code_digest; import tasks.diffusion, tasks.lm, "
                 f"paperflows.core.stats; print(code_digest({slug!r}))")
        other = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
        assert other.stdout.strip() == code_digest(slug)


def test_a_split_papers_training_never_depends_on_its_scoring():
    stages = committed_stages()
    for slug in paper_slugs():
        records, evaluation = stages[slug], stages[f"{slug}-eval"]
        scoring = SCORING_MODULES & set(records["deps"])
        assert not scoring, f"{slug}: its training would rerun on a scoring edit"
        assert not {f"flows/{slug}/{name}" for name in EVALUATION_FILES} & set(records["deps"])
        assert {f"flows/{slug}/claims.py", f"flows/{slug}/evaluate.py", f"flows/{slug}/NOTES.md",
                f"records/{slug}"} <= set(evaluation["deps"])
        assert {f"records/{slug}": {"cache": False, "persist": True}} in records["outs"], "records are kept, in git"
        assert {f"data/{slug}": {"persist": True}} in records["outs"]


def test_the_committed_dvc_lock_matches_the_committed_code(repo_copy):
    repo, env = repo_copy
    assert not code_changes(repo, env), "the committed dvc.lock must match the committed code: run `paperflows repro`"


def test_editing_a_tasks_module_reruns_exactly_the_stages_that_import_it(repo_copy):
    repo, env = repo_copy
    before = code_changes(repo, env)
    importers = {stage for stage, source in stage_sources().items()
                 if re.search(r"from tasks(\.diffusion)? import[^\n]*\bdiffusion\b|from tasks\.diffusion import", source)}
    assert importers, "some paper imports tasks.diffusion"
    with open(repo / "tasks" / "diffusion.py", "a") as handle:
        handle.write("\n# an edit\n")
    assert changed_since(before, repo, env) == importers
    (repo / "paperflows" / "cli.py").write_text((repo / "paperflows" / "cli.py").read_text() + "\n# an edit\n")
    (repo / "paperflows" / "summary.py").write_text((repo / "paperflows" / "summary.py").read_text() + "\n# an edit\n")
    assert changed_since(before, repo, env) == importers | {"summary"}


def test_editing_the_statistics_reruns_evaluation_stages_only(repo_copy):
    """... and `paperflows repro --rescore` re-scores in one process, recording the stages with `dvc commit`: the
    papers it re-scored then read up to date, the others still stale, and no records stage ran."""
    repo, env = repo_copy
    before = code_changes(repo, env)
    with open(repo / "paperflows" / "core" / "stats.py", "a") as handle:
        handle.write("\n# an edit\n")
    changed = changed_since(before, repo, env)
    papers = set(paper_slugs())
    assert {f"{s}-eval" for s in papers} <= changed
    assert not papers & changed, "a statistics edit must not retrain a paper"

    first, second, third = paper_slugs()[:3]
    records = {slug: (repo / "records" / slug / "meta.json").read_bytes() for slug in (first, second)}
    out = sh([str(BIN / "paperflows"), "repro", "--rescore", "--papers", f"{first},{second}"], repo, env)
    assert "re-scored 2 papers" in out
    changed = set(code_changes(repo, env))
    assert not {f"{first}-eval", f"{second}-eval", "summary"} & changed and f"{third}-eval" in changed
    assert all((repo / "records" / slug / "meta.json").read_bytes() == meta for slug, meta in records.items())


def tiny_pipeline(root, commands: dict[str, str], env) -> None:
    """A git and DVC repo in ``root`` whose papers' two stages run ``commands`` ({stage: shell command}) on one code
    file each (``flows/<slug>/method.py`` -> ``records/<slug>`` -> ``results/<slug>``): the bookkeeping of `paperflows
    repro` without any paper's imports or training."""
    slugs = [name for name in commands if not name.endswith("-eval")]
    (root / "params.yaml").write_text(yaml.safe_dump({"common": {"seed": 0}, "papers": {s: {"seeds": 1} for s in slugs}}))
    stages = {}
    for slug in slugs:
        (root / "flows" / slug).mkdir(parents=True)
        (root / "flows" / slug / "method.py").write_text("x = 1\n")
        stages[slug] = {"cmd": commands[slug], "deps": [f"flows/{slug}/method.py"],
                        "outs": [{f"records/{slug}": {"cache": False}}]}
        stages[f"{slug}-eval"] = {"cmd": commands[f"{slug}-eval"], "deps": [f"records/{slug}"],
                                  "outs": [{f"results/{slug}": {"cache": False}}]}
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}))
    sh(["git", "init", "-q"], root, env)
    sh([str(BIN / "dvc"), "init", "-q"], root, env)
    sh(["git", "add", "-A"], root, env)
    sh(["git", "commit", "-qm", "tiny"], root, env)


def copy_command(source: str, folder: str) -> str:
    """A stage command for :func:`tiny_pipeline`: copy ``source`` into ``folder``."""
    return f"mkdir -p {folder} && cp {source} {folder}/"


def test_serial_repro_records_the_stages_that_finished_and_not_a_paper_edited_while_it_ran(tmp_path, monkeypatch):
    """`paperflows repro` runs the stages' commands itself and records them with one `dvc commit`: a stage that fails
    stops the run but loses none that finished before it, and a paper whose code changed during its run is left
    out (DVC would pair its outputs with the new code)."""
    from paperflows.repro import run_stages

    env = {**os.environ, **GIT_IDENTITY}

    tiny_pipeline(tmp_path, {"a": copy_command("flows/a/method.py", "records/a"),
                             "a-eval": copy_command("records/a/method.py", "results/a"),
                             "b": "echo 'y = 2' >> flows/b/method.py && " + copy_command("flows/b/method.py", "records/b"),
                             "b-eval": copy_command("records/b/method.py", "results/b"),
                             "c": copy_command("flows/c/method.py", "records/c"), "c-eval": "exit 3"}, env)
    lines = []
    monkeypatch.chdir(tmp_path)   # where repro runs: the repository's root
    assert run_stages(["a", "a-eval", "b", "b-eval", "c", "c-eval"], echo=lines.append) == 3
    assert set(status(tmp_path, env)) == {"b", "b-eval", "c-eval"}
    assert [line.split()[1] for line in lines if " done in " in line] == ["a", "a-eval", "b", "b-eval", "c"]
    assert any(line.startswith("b: its code or params changed here while it ran") for line in lines)
    assert (tmp_path / "results" / "b" / "method.py").is_file(), "an edited paper's outputs stay in place"


def test_serial_repro_first_makes_what_a_paper_depends_on_outside_the_papers(tmp_path, monkeypatch):
    """On a fresh clone `data/_pretrained` (stage `pretrained`) is missing, and a language-model paper whose records
    are reused never loads a model: its stages run, but `dvc commit` refuses a stage whose dependency does not
    exist. `paperflows repro` therefore brings such upstream stages up to date first, and only where a queued
    paper depends on them."""
    import pytest
    from dvc.dependency.base import DependencyDoesNotExistError

    from paperflows.repro import bring_up_to_date, run_stages, upstream_stages

    env = {**os.environ, **GIT_IDENTITY}
    tiny_pipeline(tmp_path, {"a": copy_command("flows/a/method.py", "records/a"),
                             "a-eval": copy_command("records/a/method.py", "results/a"),
                             "b": copy_command("flows/b/method.py", "records/b"),
                             "b-eval": copy_command("records/b/method.py", "results/b")}, env)
    pipeline = yaml.safe_load((tmp_path / "dvc.yaml").read_text())
    pipeline["stages"]["models"] = {"cmd": "mkdir -p data/models && echo weights > data/models/w", "outs": ["data/models"]}
    pipeline["stages"]["a"]["deps"].append("data/models")
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump(pipeline))
    monkeypatch.chdir(tmp_path)
    assert upstream_stages(["a", "a-eval"]) == ["models"] and upstream_stages(["b", "b-eval", "a-eval"]) == []
    with pytest.raises(DependencyDoesNotExistError):
        run_stages(["a", "a-eval"], echo=lambda line: None)
    assert bring_up_to_date(upstream_stages(["a", "a-eval"]), echo=print) == 0
    assert run_stages(["a", "a-eval"], echo=lambda line: None) == 0
    assert not {"models", "a", "a-eval"} & set(status(tmp_path, env))


def test_repro_status_and_a_params_change_rerun_only_that_paper(repo_copy):
    from paperflows.stages import load_experiment

    repo, env = repo_copy
    before = code_changes(repo, env)
    first, second = CHEAP_PAPERS
    assert load_experiment(first).seed_separable
    stages = [first, f"{first}-eval", second, f"{second}-eval"]
    committed = (ROOT / "results" / first / "metrics.json").read_bytes()
    raw = set_smoke(repo / "params.yaml", [first, second])
    # the stages' commands one after the other, recorded with one `dvc commit`; DVC's own repro takes the second run
    out = sh([str(BIN / "paperflows"), "repro", "--papers", f"{first},{second}"], repo, env)
    done = [line.split()[1] for line in out.splitlines() if line.startswith("[") and " done in " in line]
    assert sorted(done) == sorted(stages) and all(done.index(s) < done.index(f"{s}-eval") for s in (first, second))
    assert not set(stages) & set(status(repo, env))
    written = json.loads((repo / "results" / first / "metrics.json").read_text())
    section = raw["papers"][first]
    assert {k: written["params"][k] for k in section} == section and written["smoke"] is False  # params decide
    assert (ROOT / "results" / first / "metrics.json").read_bytes() == committed, "the copy's stage wrote outside the copy"
    claims = json.loads((repo / "results" / first / "claims.json").read_text())
    assert set(claims) == set(written["claims"]) and all(set(c) == {"observed", "verdict"} for c in claims.values())

    section["seeds"] += 1
    (repo / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    # the split stage first (the papers read params/<slug>.yaml); `paperflows repro` brought the summary up to date
    assert changed_since(before, repo, env) == {"params"}
    out = sh([str(BIN / "dvc"), "repro", f"{first}-eval", f"{second}-eval"], repo, env)
    assert f"Running stage '{first}'" in out and f"Running stage '{first}-eval'" in out
    assert f"Stage '{second}' didn't change" in out and f"Stage '{second}-eval' didn't change" in out
    meta = json.loads((repo / "records" / first / "meta.json").read_text())
    new_seed = meta["seeds"][-1]
    assert meta["seeds_run"] == [new_seed], "only the added seed ran; the others' records were kept"


def test_serial_repro_killed_outright_keeps_what_its_last_periodic_commit_recorded(tmp_path):
    """A run killed with no chance to clean up (``kill -9``: no ``finally``) has still recorded the stages that
    finished before its last periodic commit (every stage, at ``commit_every_s=0``)."""
    import subprocess
    import sys

    env = {**os.environ, **GIT_IDENTITY}

    tiny_pipeline(tmp_path, {"a": copy_command("flows/a/method.py", "records/a"),
                             "a-eval": copy_command("records/a/method.py", "results/a"),
                             "b": copy_command("flows/b/method.py", "records/b"), "b-eval": "kill -9 $PPID"}, env)
    run = ("from paperflows.repro import run_stages; "
           "run_stages(['a', 'a-eval', 'b', 'b-eval'], echo=print, commit_every_s=0)")
    killed = subprocess.run([sys.executable, "-c", run], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert killed.returncode == -9, killed.stdout + killed.stderr
    assert set(status(tmp_path, env)) == {"b-eval"}
