"""Standalone rehearsal: does a chapter run alone, as Colab, Kaggle or a download runs it?

Usage: python .ci/standalone_check.py [chapters/NN_name.ipynb ...]
       (``make standalone-check``; ``make test`` runs it on the first chapter, a fast one;
       ``make standalone-check CHAPTER="chapters/0*.ipynb"`` on several, one after another)

Offline, on this machine:

1. A wheel of ``mha``, built from the repository's tracked files (``pip wheel --no-deps``).
2. A fresh virtual environment with exactly ``requirements.txt``, pinned by
   ``requirements-lock.txt``: what a reader installs to run the chapters, and no ``mha``. Colab and
   Kaggle come with their own PyTorch; here torch==2.13.0 installs from local disk. pip's cache is
   reused (it only holds downloads, so the environment is still fresh).
3. The chapter alone in an empty folder, nothing beside it, run top to bottom with nbclient on a
   kernel of that environment, with ``MHA_PACKAGE`` pointing at the wheel. Its first cell must
   install ``mha``, and every cell must run without error. Outputs are not compared: Colab's
   versions differ from the pins, so there a chapter must run, not reproduce byte for byte.
4. Afterwards ``mha`` is importable in the environment, installed from the wheel. With several
   chapters, ``mha`` is uninstalled again before the next one, so each chapter installs it.

Exits non-zero if any step fails.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parents[1]
KERNEL = "mha-standalone"
CELL_TIMEOUT = 600  # seconds
ANSI_COLOUR = re.compile(r"\x1b\[[0-9;]*m")
#: The chapter ``make test`` rehearses: the first, which runs in seconds.
DEFAULT_CHAPTER = sorted((ROOT / "chapters").glob("[0-9]*.ipynb"))[0]


def step(message):
    print(f"standalone-check: {message}", flush=True)


def clean_environment(**extra):
    """This process's environment without what would leak another Python's packages in."""
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", **extra)
    for leak in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "JUPYTER_CONFIG_DIR"):
        env.pop(leak, None)
    return env


def build_wheel(destination):
    """A wheel of ``mha`` from the tracked files only: what the repository publishes."""
    source = destination / "source"
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--", "pyproject.toml", "chapters/mha"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    for name in filter(None, listed.stdout.split("\0")):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    wheels = destination / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", wheels, source],
        check=True,
        env=clean_environment(),
    )
    (wheel,) = wheels.glob("mha-*.whl")
    return wheel


def create_environment(venv):
    """A fresh environment with what requirements.txt gives a reader, and a kernel for it."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    # --no-compile: Python compiles the modules the chapter imports when it first imports them.
    subprocess.run(
        [
            *(str(python), "-m", "pip", "install", "--quiet", "--no-compile"),
            *("-r", str(ROOT / "requirements.txt"), "-c", str(ROOT / "requirements-lock.txt")),
        ],
        check=True,
        env=clean_environment(PIP_RETRIES="0", PIP_TIMEOUT="10"),
    )
    subprocess.run(
        [str(python), "-m", "ipykernel", "install", "--prefix", str(venv), "--name", KERNEL],
        check=True,
        capture_output=True,
    )
    return python


def has_mha(python):
    """Where ``python`` imports mha from, or None when it cannot."""
    where = "import importlib.util as u; s = u.find_spec('mha'); print(s and s.origin)"
    found = subprocess.run(
        [str(python), "-c", where],
        capture_output=True,
        text=True,
        check=True,
        cwd=python.parent,
        env=clean_environment(PYTHONNOUSERSITE="1"),
    ).stdout.strip()
    return None if found == "None" else found


def run_alone(chapter, folder, venv, wheel):
    """Run ``chapter`` from ``folder`` on the fresh environment's kernel. Returns an error or ''."""
    nb = nbformat.read(chapter, as_version=4)
    os.environ["JUPYTER_PATH"] = str(venv / "share" / "jupyter")  # where KERNEL's spec lives
    kernel_env = clean_environment(
        MHA_PACKAGE=str(wheel),
        PIP_NO_INDEX="1",  # offline: the wheel is all the first cell may install
        PYTHONNOUSERSITE="1",
        PATH=f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
    )
    kernel_env.pop("JUPYTER_PATH")
    client = NotebookClient(
        nb,
        kernel_name=KERNEL,
        timeout=CELL_TIMEOUT,
        resources={"metadata": {"path": str(folder)}},
    )
    try:
        client.execute(env=kernel_env)
    except CellExecutionError as error:
        return ANSI_COLOUR.sub("", str(error))[-3000:]
    return ""


def rehearse(chapter, temporary, python, wheel):
    """Run one chapter alone; return a line that starts with "ok" or "FAIL"."""
    if has_mha(python) is not None:
        subprocess.run(
            [str(python), "-m", "pip", "uninstall", "--quiet", "--yes", "mha"],
            check=True,
            env=clean_environment(),
        )
    before = has_mha(python)
    if before is not None:
        return f"FAIL  {chapter.name}: the fresh environment imports mha already ({before})"
    folder = temporary / f"alone-{chapter.stem}"
    folder.mkdir()
    shutil.copy2(chapter, folder / chapter.name)
    step(f"running {chapter.name} alone in an empty folder, MHA_PACKAGE={wheel.name}")
    started = time.perf_counter()
    error = run_alone(folder / chapter.name, folder, temporary / "venv", wheel)
    seconds = time.perf_counter() - started
    installed = has_mha(python)
    if error:
        return f"FAIL  {chapter.name} did not run on its own ({seconds:.0f} s):\n{error}"
    if installed is None or "site-packages" not in installed:
        return f"FAIL  {chapter.name} ran, but its first cell did not install mha ({installed})"
    return (
        f"ok    {chapter.name} ran alone, top to bottom, after its first cell installed mha "
        f"from the wheel ({seconds:.0f} s)"
    )


def main():
    chapters = [Path(a).resolve() for a in sys.argv[1:]] or [DEFAULT_CHAPTER]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="standalone-check-") as temporary:
        temporary = Path(temporary)
        wheel = build_wheel(temporary)
        step(f"built {wheel.name}")
        python = create_environment(temporary / "venv")
        step(f"fresh environment from requirements.txt ({time.perf_counter() - started:.0f} s)")
        results = [rehearse(chapter, temporary, python, wheel) for chapter in chapters]
    print("\n".join(results))
    failed = [r for r in results if not r.startswith("ok")]
    print(
        f"{len(results) - len(failed)} of {len(results)} chapters ran on their own; "
        f"{time.perf_counter() - started:.0f} s in all."
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
