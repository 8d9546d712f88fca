"""The layers hold: the framework core (paperflows/core) imports nothing else of ours, the toolkits (tasks/)
only the core, no import circles, and importing either sets nothing but the kernel pins."""

import ast
import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT

PACKAGES = ("tasks", "paperflows", "flows")


def module_name(path):
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def top_level_imports(path):
    """Our modules that ``path`` imports when it is imported (module level, outside TYPE_CHECKING)."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        for sub in ast.walk(node):
            if isinstance(sub, ast.Import):
                names |= {a.name for a in sub.names}
            elif isinstance(sub, ast.ImportFrom) and sub.module and not sub.level:
                names |= {sub.module} | {f"{sub.module}.{a.name}" for a in sub.names}
            elif isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                break
    return {n for n in names if n.split(".")[0] in PACKAGES}


def graph():
    files = [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")]
    modules = {module_name(p): p for p in files}
    return {m: {n for n in top_level_imports(p) if n in modules and n != m} for m, p in modules.items()}


def imports_anywhere(path):
    """Our modules ``path`` imports anywhere (function-local and relative imports too)."""
    from paperflows.imports import imported_modules

    return {n for n in imported_modules(path) if n.split(".")[0] in PACKAGES}


def outside(names, allowed):
    return {n for n in names if not any(n == a or n.startswith(a + ".") for a in allowed)}


def test_core_imports_nothing_of_ours_and_tasks_only_the_core_anywhere():
    for path in (ROOT / "paperflows" / "core").rglob("*.py"):
        assert not outside(imports_anywhere(path), ["paperflows.core"]), path.name
    for path in (ROOT / "tasks").rglob("*.py"):
        assert not outside(imports_anywhere(path), ["tasks", "paperflows.core"]), path.name
    for path in [*(ROOT / "tasks").rglob("*.py"), *(ROOT / "paperflows" / "core").rglob("*.py")]:
        assert "importlib" not in path.read_text(), f"{path.name} imports modules by name"


def test_the_layer_rules_are_enforced_where_dvc_yaml_is_made(tmp_path, monkeypatch):
    from paperflows import imports

    monkeypatch.setattr(imports, "REPO", tmp_path)
    (tmp_path / "paperflows" / "core").mkdir(parents=True)
    (tmp_path / "tasks").mkdir()
    (tmp_path / "paperflows" / "core" / "stats.py").write_text("import numpy\n")
    (tmp_path / "paperflows" / "stages.py").write_text("")
    (tmp_path / "tasks" / "train.py").write_text("from paperflows.core import stats\n")
    assert imports.import_closure([tmp_path / "tasks" / "train.py"]) == {
        tmp_path / "tasks" / "train.py", tmp_path / "paperflows" / "core" / "stats.py"}
    (tmp_path / "tasks" / "train.py").write_text("def f():\n    from paperflows import stages\n")
    with pytest.raises(ValueError, match="tasks/train.py imports paperflows.stages"):
        imports.import_closure([tmp_path / "tasks" / "train.py"])
    (tmp_path / "paperflows" / "core" / "stats.py").write_text("from tasks.train import f\n")
    with pytest.raises(ValueError, match="the core must not import tasks/"):
        imports.import_closure([tmp_path / "paperflows" / "core" / "stats.py"])


def test_no_import_circles():
    edges = graph()
    state = {}

    def visit(module, stack):
        state[module] = "open"
        for target in edges[module]:
            assert state.get(target) != "open", f"import circle: {' -> '.join([*stack, module, target])}"
            if target not in state:
                visit(target, [*stack, module])
        state[module] = "done"

    for module in sorted(edges):
        if module not in state:
            visit(module, [])


def test_contract_imports_nothing_of_ours_but_pydantic():
    assert top_level_imports(ROOT / "paperflows" / "core" / "contract.py") == set()


def test_importing_tasks_or_the_core_sets_nothing_but_the_kernel_pins():
    """... in time: a toolkit that imports torch first still gets the pinned kernels (tasks/__init__.py pins)."""
    from paperflows.settings import PINNED, UNPIN_VARIABLE

    code = ("import json, os; before = dict(os.environ); import tasks.train, tasks.data, paperflows.core.stats, "
            "paperflows.core.experiment; print(json.dumps(sorted(k for k, v in os.environ.items() if before.get(k) != v)))")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "MPLBACKEND")) and k not in PINNED}

    def changed(**extra):
        result = subprocess.run([sys.executable, "-W", "error", "-c", code], cwd=ROOT, capture_output=True,
                                text=True, env=env | extra, check=True)
        return set(json.loads(result.stdout))

    by_the_libraries = changed(**{UNPIN_VARIABLE: "1"})   # torch sets a few variables of its own on import
    assert changed() == set(PINNED) | by_the_libraries
