"""The house rules, checked on the source (ARCHITECTURE.md, STYLE.md, README's Layout section):

* arrows point one way: drift -> federation -> clusters -> fedportal (an app imports only itself
  and the apps to its right);
* only clusters/kube.py imports ``kubernetes``;
* no name starting with ``_`` crosses a module: not imported, not reached as ``module._x``, not
  patched by a dotted string (tests included: they use public seams);
* README's Layout section names every top-level directory and every package of the apps, and
  every path it names exists.
"""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
APPS = {"fedportal": 0, "clusters": 1, "federation": 2, "drift": 3}  # may import only rank <= own
PROJECT = (*APPS, "tests")


def python_files(*tops):
    for top in tops:
        for path in sorted((ROOT / top).rglob("*.py")):
            if "migrations" not in path.parts:
                yield path


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(tree):
    """(line, module, names) of every absolute import, at any depth."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module, [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, []


SOURCES = {path: ast.parse(path.read_text()) for path in python_files(*PROJECT)}
MODULES = {module_name(path) for path in SOURCES}


def test_arrows_point_one_way():
    wrong = []
    for path, tree in SOURCES.items():
        app = path.relative_to(ROOT).parts[0]
        if app not in APPS:
            continue
        for line, module, _ in imports(tree):
            top = module.split(".")[0]
            if top in APPS and APPS[top] > APPS[app]:
                wrong.append(f"{path.relative_to(ROOT)}:{line} {app} imports {module}")
    assert not wrong, "imports against the arrows (drift -> federation -> clusters -> fedportal):\n" + "\n".join(wrong)


def test_only_kube_imports_kubernetes():
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for path, tree in SOURCES.items()
        if path.relative_to(ROOT).parts[0] in APPS and path.relative_to(ROOT) != Path("clusters/kube.py")
        for line, module, _ in imports(tree)
        if module.split(".")[0] == "kubernetes"
    ]
    assert not found, f"kubernetes imported outside clusters/kube.py: {found}"


PRIVATE_PATH = re.compile(rf"(?:{'|'.join(PROJECT)})(?:\.\w+)*\._\w+")  # "clusters.kube._request"


def private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_no_private_name_crosses_a_module():
    found = []
    for path, tree in SOURCES.items():
        where = path.relative_to(ROOT)
        modules_here = {}
        for line, module, names in imports(tree):
            if module.split(".")[0] not in PROJECT:
                continue
            found += [f"{where}:{line} imports {module}.{name}" for name in names if private(name)]
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in PROJECT:
                for alias in node.names:
                    if f"{node.module}.{alias.name}" in MODULES:
                        modules_here[alias.asname or alias.name] = node.module
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] in PROJECT:
                        modules_here[alias.asname or alias.name.split(".")[0]] = alias.name
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and private(node.attr)
                and isinstance(node.value, ast.Name)
                and node.value.id in modules_here
            ):
                found.append(f"{where}:{node.lineno} reaches {node.value.id}.{node.attr}")
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and PRIVATE_PATH.fullmatch(node.value):
                found.append(f"{where}:{node.lineno} names {node.value}")
    assert not found, "private names used across modules (give them a public name):\n" + "\n".join(found)


def layout_paths() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Layout", 1)[1].split("\n## ", 1)[0]
    block = section.split("```", 2)[1]
    paths, parents = [], {}
    for line in block.splitlines():
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        for token in line.split():
            if not (token.endswith("/") or token.endswith(".py")):
                break
            parent = parents.get(indent - 2, "") if indent else ""
            path = parent + token
            paths.append(path)
            if token.endswith("/"):
                parents[indent] = path
    return paths


def test_readme_layout_names_paths_that_exist():
    paths = layout_paths()
    assert paths, "README.md has no Layout code block"
    missing = [path for path in paths if not (ROOT / path).exists()]
    assert not missing, f"README's Layout names paths that do not exist: {missing}"


@pytest.mark.parametrize("kind", ["top-level directories", "app packages"])
def test_readme_layout_names_every_directory_and_package(kind):
    named = set(layout_paths())
    if kind == "top-level directories":
        there = {
            f"{p.name}/"
            for p in ROOT.iterdir()
            if p.is_dir() and not p.name.startswith((".", "_")) and p.name not in ("var", "staticfiles")
        }
    else:
        there = {
            f"{p.parent.relative_to(ROOT)}/"
            for app in APPS
            for p in (ROOT / app).rglob("__init__.py")
            if not {"migrations", "management", "commands", "templatetags"} & set(p.parts)
        }
    assert there - named == set(), f"README's Layout does not name: {sorted(there - named)}"
