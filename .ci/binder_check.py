"""Binder rehearsal: can what Binder installs run every chapter, from a clean copy of the repo?

Usage: python .ci/binder_check.py      (``make binder-check``; ``make test`` runs it)

1. A fresh virtual environment, in a temporary folder, with the Python that
   ``binder/runtime.txt`` names, and exactly ``binder/requirements.txt`` installed, plus the two
   packages repo2docker itself provides to run notebooks: ipykernel and nbclient, at the versions
   ``requirements-lock.txt`` pins.
   Then ``binder/postBuild``, from the copy's root (step 2), as repo2docker runs it: it installs
   ``mha`` editable, and ``import mha`` must then work from outside ``chapters/``.
2. A copy of the repository's tracked files only (``git ls-files``): nothing untracked, no
   ``.venv``, no ``_build``, so a file a chapter needs but git does not have fails here as it
   would on Binder.
3. Every chapter runs top to bottom from its own folder, as Binder's kernel runs it, with the new
   environment's Python as the kernel, under strict nbval on the portable CPU code path
   (``SECOND_CPU_PATH``, as ``make nbval-portable``): every cell must run without error and print
   what the chapter stores. This is ``make test``'s portable nbval pass, run once, here: in the
   environment Binder's readers get, from the tracked files alone. ``make test`` runs the native
   pass (``make nbval-native``) in ``.venv``; ``make nbval`` still runs both there.
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
#: The kernel strict nbval runs the chapters on: the fresh environment's Python, by a name no other
#: environment has, so it cannot fall back on the Python that runs pytest.
NBVAL_KERNEL = "binder-rehearsal"
#: The Makefile's SECOND_CPU_PATH: PyTorch's portable kernels and MKL's common x86-64 code path.
SECOND_CPU_PATH = {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE"}


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


def pip_environment_overrides():
    """The settings ``pip_environment`` adds to this process's environment."""
    return dict(
        PIP_RETRIES="0",
        PIP_TIMEOUT="10",
        PIP_DEFAULT_TIMEOUT="10",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )


def pip_environment():
    """pip's settings for the install. pip's cache is reused (no --no-cache-dir): it is what keeps
    repeated rehearsals fast, and the environment is still fresh, since the cache only holds
    downloads.

    binder/requirements.txt names PyTorch's CPU wheel index. Where that index cannot be reached (the
    book's build machines have no internet beyond their package mirrors), pip would retry it, with
    back-off, for every package it looks up; with no retries and a short timeout it gives up on the
    index at once and takes torch from the mirror or local wheels it is configured with.
    """
    env = dict(os.environ, **pip_environment_overrides())
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
    # The kernel is this environment's own Python, found before any other "python3" kernel; nbval's
    # is the same Python under a name of its own.
    for name in ("python3", NBVAL_KERNEL):
        subprocess.run(
            [str(python), "-m", "ipykernel", "install", "--prefix", str(venv), "--name", name],
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


def run_post_build(venv, repository, env):
    """``binder/postBuild`` from the copy's root, with the fresh environment first on PATH (as in
    Binder's image); then ``import mha`` from the root must find the copy's ``chapters/mha``."""
    step("binder/postBuild")
    subprocess.run(
        [str(repository / "binder" / "postBuild")],
        cwd=repository,
        env=dict(env, **pip_environment_overrides()),
        check=True,
    )
    found = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import mha; print(mha.__file__)"],
        cwd=repository,
        env=env,
        capture_output=True,
        text=True,
    )
    expected = repository / "chapters" / "mha" / "__init__.py"
    if found.returncode != 0 or Path(found.stdout.strip()) != expected:
        sys.exit(
            "binder-check: after binder/postBuild, `import mha` from the repository's root gave "
            f"{found.stdout.strip() or found.stderr.strip()[-300:]}, not {expected}"
        )


def kernel_environment(venv):
    env = dict(os.environ, JUPYTER_PATH=str(venv / "share" / "jupyter"), PYTHONNOUSERSITE="1")
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"
    for leak in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "JUPYTER_CONFIG_DIR"):
        env.pop(leak, None)
    return env


def check_kernels(venv, env):
    """The kernels that will run the chapters (JupyterLab's ``python3``, nbval's) are the fresh
    environment's Python."""
    specs = subprocess.run(
        [str(venv / "bin" / "jupyter"), "kernelspec", "list", "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    for name in ("python3", NBVAL_KERNEL):
        argv = json.loads(specs.stdout)["kernelspecs"][name]["spec"]["argv"]
        if Path(argv[0]) != venv / "bin" / "python":
            sys.exit(
                f"binder-check: the {name} kernel would run {argv[0]}, not the fresh environment"
            )


def nbval_command(repository, chapters):
    """pytest's strict nbval of ``chapters`` (in the copy at ``repository``) on ``NBVAL_KERNEL``."""
    return [
        *(sys.executable, "-m", "pytest", "--nbval", f"--nbval-kernel-name={NBVAL_KERNEL}"),
        *("-p", "no:cacheprovider", "-q"),
        *(str(c.relative_to(repository)) for c in chapters),
    ]


def run_chapters(repository, chapters, env):
    """Strict nbval of ``chapters`` on the fresh environment's kernel, on the portable code path.

    pytest and nbval are the test environment's (this Python's): only the kernel, started in each
    chapter's own folder, runs in the fresh one, so nothing the tests need leaks into what Binder
    installs. pytest runs from the copy, with the copy's pyproject.toml (nbval's sanitizer).
    Returns pytest's exit code; its output goes to this script's.
    """
    command = nbval_command(repository, chapters)
    return subprocess.run(command, cwd=repository, env=dict(env, **SECOND_CPU_PATH)).returncode


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
        run_post_build(venv, repository, env)
        check_kernels(venv, env)
        step(
            f"strict nbval of {len(chapters)} chapters on its kernel, "
            + " ".join(f"{k}={v}" for k, v in SECOND_CPU_PATH.items())
        )
        nbval_started = time.perf_counter()
        nbval_failed = run_chapters(repository, chapters, env) != 0
        nbval_seconds = time.perf_counter() - nbval_started
        step("opening every chapter in JupyterLab")
        lab_started = time.perf_counter()
        lab_results = jupyterlab_check.check_chapters(venv, repository, chapters, env)
        lab_seconds = time.perf_counter() - lab_started
    print(f"\nBinder rehearsal: environment ready in {setup:.0f} s")
    print(
        f"  {'FAIL' if nbval_failed else 'ok  '}  strict nbval of {len(chapters)} chapters, "
        f"portable code path ({nbval_seconds:.0f} s)"
    )
    version = jupyterlab_check.pinned_version()
    print(f"\nJupyterLab {version}: reveals and solutions collapsed? ({lab_seconds:.0f} s)")
    for what, problems in lab_results:
        print(f"  {'FAIL' if problems else 'ok  '}  {what}")
        for problem in problems:
            print(f"        {problem}")
    lab_failed = [what for what, problems in lab_results if problems]
    print(
        f"\nstrict nbval {'FAILED (its output above names the cells)' if nbval_failed else 'ok'}; "
        f"{len(lab_results) - len(lab_failed)} of {len(lab_results)} JupyterLab checks passed; "
        f"{time.perf_counter() - started:.0f} s in all."
    )
    return 1 if nbval_failed or lab_failed else 0


if __name__ == "__main__":
    sys.exit(main())
