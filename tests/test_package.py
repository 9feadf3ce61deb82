"""The house the book lives in: ``mha`` as an installed package, honest pins, one linter setup.

- ``mha`` is installed (``pyproject.toml``) and the installed copy is the chapters' own.
- Every package is pinned exactly; the lock pins every package a fresh environment gets, at the
  versions the direct pins name; every third-party module the package, the chapters, the tests and
  ``.ci/`` import comes from a package pinned by name.
- No import cycle inside ``mha`` and no module over 600 lines.
- The modules the chapters show at 79 columns are listed alike wherever the linter is configured.
"""

import ast
import importlib.metadata
import json
import re
import sys
import tomllib

import pytest
import yaml

import mha
from conftest import CHAPTERS, ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
REQUIREMENT_FILES = ["requirements.txt", "requirements-book.txt", "requirements-dev.txt"]
LOCK = ROOT / "requirements-lock.txt"
PACKAGE = CHAPTERS / "mha"
PIN = re.compile(r"([A-Za-z0-9][\w.\-]*)==([\w.]+)")


def normalise(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def entries(path):
    """The lines of a requirements file that name packages (no comments, options or -r)."""
    lines = [line.split("#")[0].strip() for line in path.read_text().splitlines()]
    return [line for line in lines if line and not line.startswith("-")]


def pins(path):
    """``{normalised name: version}`` of a requirements file, following ``-r`` includes."""
    found = {}
    for line in path.read_text().splitlines():
        if line.startswith("-r "):
            found |= pins(path.parent / line.removeprefix("-r ").strip())
        elif match := PIN.fullmatch(line.split("#")[0].strip()):
            found[normalise(match.group(1))] = match.group(2)
    return found


def test_the_installed_mha_is_the_chapters_own_copy():
    assert (CHAPTERS / "mha" / "__init__.py").samefile(mha.__file__)
    assert importlib.metadata.version("mha") == PYPROJECT["project"]["version"]


@pytest.mark.parametrize("name", [*REQUIREMENT_FILES, LOCK.name])
def test_every_requirement_is_pinned_exactly(name):
    listed = entries(ROOT / name)
    unpinned = [line for line in listed if not PIN.fullmatch(line)]
    assert listed and not unpinned, f"{name}: not pinned with ==: {unpinned}"


def test_torch_is_pinned_at_2_13_0_everywhere():
    assert "torch==2.13.0" in entries(ROOT / "requirements.txt")
    assert "torch==2.13.0" in PYPROJECT["project"]["dependencies"]
    assert pins(LOCK)["torch"] == "2.13.0"  # no +cpu: the CPU and the default build both fit


def test_the_package_depends_on_exactly_what_the_chapters_pin():
    declared = {}
    for requirement in PYPROJECT["project"]["dependencies"]:
        name, version = PIN.fullmatch(requirement).groups()
        declared[normalise(name)] = version
    chapters = pins(ROOT / "requirements.txt")
    assert declared and {name: chapters.get(name) for name in declared} == declared


def test_the_lock_pins_every_direct_requirement_at_the_same_version():
    locked = pins(LOCK)
    direct = pins(ROOT / "requirements-dev.txt")
    assert {name: locked.get(name) for name in direct} == direct


def test_the_book_builds_from_its_own_short_list_without_torch():
    book = pins(ROOT / "requirements-book.txt")
    assert "jupyter-book" in book and "torch" not in book


def imported_modules(source):
    """Top-level names of the absolute imports in ``source``."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def notebook_code(path):
    cells = json.loads(path.read_text())["cells"]
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    return "\n".join(
        line for cell in code for line in cell.splitlines() if not line.lstrip().startswith("%")
    )


def test_every_third_party_module_imported_comes_from_a_package_pinned_by_name():
    sources = [
        *PACKAGE.rglob("*.py"),
        *(ROOT / "tests").rglob("*.py"),
        *(ROOT / ".ci").glob("*.py"),
    ]
    imported = set().union(*(imported_modules(p.read_text()) for p in sources))
    imported |= set().union(
        *(imported_modules(notebook_code(p)) for p in CHAPTERS.glob("[0-9]*.ipynb"))
    )
    ours = {"mha"} | {p.stem for p in (ROOT / ".ci").glob("*.py")}
    ours |= {p.stem for p in (ROOT / "tests").glob("*.py")}
    third_party = imported - set(sys.stdlib_module_names) - ours
    providers = importlib.metadata.packages_distributions()
    pinned = set(pins(ROOT / "requirements-dev.txt"))
    unpinned = {
        module: providers.get(module)
        for module in third_party
        if not {normalise(d) for d in providers.get(module, [])} & pinned
    }
    assert third_party and not unpinned, f"imported but not pinned by name: {unpinned}"


def package_imports(path):
    """The ``mha`` modules that ``path`` imports, at the top or inside a function."""
    package = path.relative_to(CHAPTERS).parts[:-1]  # a module's package, or an __init__'s own
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level > 0:
            base = package[: len(package) - node.level + 1]
            if node.module:
                found.add(".".join((*base, *node.module.split("."))))
            else:  # from . import plots
                found |= {".".join((*base, alias.name)) for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mha"):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("mha")}
    return found


def test_no_module_of_mha_imports_one_that_imports_it_back():
    modules = {
        ".".join(p.relative_to(CHAPTERS).with_suffix("").parts).removesuffix(".__init__"): p
        for p in PACKAGE.rglob("*.py")
    }
    graph = {name: package_imports(path) & modules.keys() for name, path in modules.items()}

    def reaches(start, goal, seen=()):
        return any(
            step == goal or (step not in seen and reaches(step, goal, (*seen, step)))
            for step in graph[start]
        )

    packages = {name for name, path in modules.items() if path.name == "__init__.py"}
    cycles = sorted(name for name in graph if name not in packages and reaches(name, name, (name,)))
    assert not cycles, f"modules in an import cycle: {cycles}"


def test_no_module_of_mha_is_longer_than_600_lines():
    lengths = {p.name: len(p.read_text().splitlines()) for p in PACKAGE.rglob("*.py")}
    assert max(lengths.values()) <= 600, lengths


def test_the_modules_the_chapters_show_are_listed_alike_wherever_ruff_is_set_up():
    excluded = set(PYPROJECT["tool"]["ruff"]["format"]["exclude"])
    makefile = (ROOT / "Makefile").read_text()
    shown = set(re.search(r"^SHOWN := (.*)$", makefile, re.M).group(1).split())
    hooks = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())["repos"][0]["hooks"]
    patterns = {hook["files"] for hook in hooks if "files" in hook}
    assert excluded == shown and len(patterns) == 1
    pattern = re.compile(patterns.pop())
    assert {
        str(p.relative_to(ROOT))
        for p in PACKAGE.glob("*.py")
        if pattern.search(str(p.relative_to(ROOT)))
    } == shown


def test_pre_commit_runs_the_ruff_version_the_requirements_pin():
    repo = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())["repos"][0]
    assert repo["repo"].endswith("/ruff-pre-commit")
    assert repo["rev"] == "v" + pins(ROOT / "requirements-dev.txt")["ruff"]
