"""The layout holds: tasks/ is a library (imports neither flows/ nor paperflows/), no import circles,
and importing tasks changes no settings."""

import ast
import os
import subprocess
import sys

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


def test_tasks_imports_neither_flows_nor_paperflows_anywhere():
    for path in (ROOT / "tasks").rglob("*.py"):
        text = path.read_text()
        for name in ("flows", "paperflows"):
            assert f"import {name}" not in text and f"from {name}" not in text, f"{path.name} imports {name}"
        assert "importlib" not in text, f"{path.name} imports modules by name"


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
    assert top_level_imports(ROOT / "tasks" / "contract.py") == set()


def test_importing_tasks_sets_no_environment():
    code = "import os; before = dict(os.environ); import tasks, tasks.stats, tasks.experiment; print(dict(os.environ) == before)"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "MPLBACKEND"))}
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, env=env, check=True)
    assert result.stdout.strip() == "True"
