"""Binder rehearsal: can what Binder installs run every chapter, from a clean copy of the repo?

Usage: python .ci/binder_check.py      (``make binder-check``; ``make test`` runs it)

1. A fresh virtual environment, in a temporary folder, with the Python that
   ``binder/runtime.txt`` names, and exactly ``binder/requirements.txt`` installed, plus the two
   packages repo2docker itself provides to run notebooks: ipykernel and nbclient, at the versions
   ``requirements-lock.txt`` pins.
2. A copy of the repository's tracked files only (``git ls-files``): nothing untracked, no
   ``.venv``, no ``_build``, so a file a chapter needs but git does not have fails here as it
   would on Binder.
3. Every chapter runs top to bottom from its own folder, as Binder's kernel runs it, with the new
   environment's Python as the kernel; every cell must run without error.
4. Every chapter opens in JupyterLab, as Binder opens it, with each reveal and solution collapsed
   (``jupyterlab_check.py``). repo2docker provides JupyterLab on Binder; the rehearsal installs the
   version ``binder/jupyterlab.txt`` pins, in the same environment.

Exits non-zero if any step fails.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jupyterlab_check

ROOT = Path(__file__).resolve().parents[1]
BINDER = ROOT / "binder"
RUNNER_PACKAGES = ("ipykernel", "nbclient")  # what repo2docker adds to run notebooks
CELL_TIMEOUT = 600  # seconds
ANSI_COLOUR = re.compile(r"\x1b\[[0-9;]*m")


def step(message):
    print(f"binder-check: {message}", flush=True)


def runtime_python():
    """The interpreter binder/runtime.txt asks for (``python-3.11`` -> ``python3.11``)."""
    version = (BINDER / "runtime.txt").read_text().strip().removeprefix("python-")
    found = shutil.which(f"python{version}")
    if found is None and f"{sys.version_info.major}.{sys.version_info.minor}" == version:
        found = sys.executable
    if found is None:
        sys.exit(
            f"binder-check: binder/runtime.txt asks for Python {version}, "
            f"and python{version} is not on PATH"
        )
    return found


def pinned(names):
    """``name==version`` for each of ``names``, as requirements-lock.txt pins it."""
    text = (ROOT / "requirements-lock.txt").read_text()
    pins = []
    for name in names:
        match = re.search(rf"^{re.escape(name)}==(\S+)", text, re.M | re.I)
        if match is None:
            sys.exit(f"binder-check: requirements-lock.txt does not pin {name}")
        pins.append(f"{name}=={match.group(1)}")
    return pins


def pip_environment():
    """pip's settings for the install. pip's cache is reused (no --no-cache-dir): it is what keeps
    repeated rehearsals fast, and the environment is still fresh, since the cache only holds
    downloads.

    binder/requirements.txt names PyTorch's CPU wheel index. Where that index cannot be reached (the
    book's build machines have no internet beyond their package mirrors), pip would retry it, with
    back-off, for every package it looks up; with no retries and a short timeout it gives up on the
    index at once and takes torch from the mirror or local wheels it is configured with.
    """
    env = dict(
        os.environ,
        PIP_RETRIES="0",
        PIP_TIMEOUT="10",
        PIP_DEFAULT_TIMEOUT="10",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    for leak in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"):
        env.pop(leak, None)
    return env


def create_environment(venv):
    interpreter = runtime_python()
    step(f"fresh environment with {interpreter}")
    subprocess.run([interpreter, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    provided = [*pinned(RUNNER_PACKAGES), f"jupyterlab=={jupyterlab_check.pinned_version()}"]
    requirements = [*provided, "-r", str(BINDER / "requirements.txt")]
    step(f"pip install -r binder/requirements.txt {' '.join(provided)}")
    # --no-compile: skip byte-compiling all of torch up front (half the install time); Python
    # compiles the modules the chapters import when they are first imported.
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-compile", *requirements],
        check=True,
        env=pip_environment(),
    )
    # The kernel is this environment's own Python, found before any other "python3" kernel.
    subprocess.run(
        [str(python), "-m", "ipykernel", "install", "--prefix", str(venv), "--name", "python3"],
        check=True,
        capture_output=True,
    )
    return python


def copy_tracked_files(destination):
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    files = [f for f in listed.stdout.split("\0") if f and (ROOT / f).is_file()]
    for name in files:
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    step(f"copied {len(files)} tracked files")
    return sorted((destination / "chapters").glob("[0-9]*.ipynb"))


def kernel_environment(venv):
    env = dict(os.environ, JUPYTER_PATH=str(venv / "share" / "jupyter"), PYTHONNOUSERSITE="1")
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"
    for leak in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "JUPYTER_CONFIG_DIR"):
        env.pop(leak, None)
    return env


def check_kernel(venv, env):
    """The ``python3`` kernel that will run the chapters is the fresh environment's Python."""
    specs = subprocess.run(
        [str(venv / "bin" / "jupyter"), "kernelspec", "list", "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    argv = json.loads(specs.stdout)["kernelspecs"]["python3"]["spec"]["argv"]
    if Path(argv[0]) != venv / "bin" / "python":
        sys.exit(f"binder-check: the python3 kernel would run {argv[0]}, not the fresh environment")


def run_chapter(notebook, venv, env):
    """Run one chapter with ``jupyter execute`` (nbclient), from its own folder.

    Returns ``(ok, seconds, detail)``.
    """
    start = time.perf_counter()
    result = subprocess.run(
        [
            str(venv / "bin" / "jupyter"),
            "execute",
            "--kernel_name=python3",
            f"--timeout={CELL_TIMEOUT}",
            notebook.name,
        ],
        cwd=notebook.parent,
        env=env,
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - start
    plain = ANSI_COLOUR.sub("", result.stderr).strip()  # the kernel colours its tracebacks
    detail = "" if result.returncode == 0 else "\n".join(plain.splitlines()[-25:])
    return result.returncode == 0, seconds, detail


def code_cells(notebook):
    return sum(1 for c in json.loads(notebook.read_text())["cells"] if c["cell_type"] == "code")


def main():
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="binder-check-") as temporary:
        venv, repository = Path(temporary) / "venv", Path(temporary) / "repository"
        create_environment(venv)
        setup = time.perf_counter() - started
        chapters = copy_tracked_files(repository)
        if not chapters:
            sys.exit("binder-check: no chapters (chapters/[0-9]*.ipynb) among the tracked files")
        env = kernel_environment(venv)
        check_kernel(venv, env)
        results = []
        for notebook in chapters:
            step(f"running {notebook.relative_to(repository)}")
            results.append((notebook.name, code_cells(notebook), *run_chapter(notebook, venv, env)))
        step("opening every chapter in JupyterLab")
        lab_started = time.perf_counter()
        lab_results = jupyterlab_check.check_chapters(venv, repository, chapters, env)
        lab_seconds = time.perf_counter() - lab_started
    print(f"\nBinder rehearsal: environment ready in {setup:.0f} s")
    for name, cells, ok, seconds, detail in results:
        print(f"  {'ok  ' if ok else 'FAIL'}  {name}  ({cells} code cells, {seconds:.0f} s)")
        if detail:
            print("        " + detail.replace("\n", "\n        "))
    failed = [name for name, _, ok, *_ in results if not ok]
    version = jupyterlab_check.pinned_version()
    print(f"\nJupyterLab {version}: reveals and solutions collapsed? ({lab_seconds:.0f} s)")
    for what, problems in lab_results:
        print(f"  {'FAIL' if problems else 'ok  '}  {what}")
        for problem in problems:
            print(f"        {problem}")
    lab_failed = [what for what, problems in lab_results if problems]
    print(
        f"\n{len(results) - len(failed)} of {len(results)} chapters ran without error; "
        f"{len(lab_results) - len(lab_failed)} of {len(lab_results)} JupyterLab checks passed; "
        f"{time.perf_counter() - started:.0f} s in all."
    )
    return 1 if failed or lab_failed else 0


if __name__ == "__main__":
    sys.exit(main())
