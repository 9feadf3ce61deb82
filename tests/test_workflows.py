"""CI on GitHub: the checks run in parallel jobs, a deploy waits for them and links the book to the
repository it is built from, and the Binder rehearsal runs when binder/ changes and weekly.

``make lint-workflows`` (actionlint) checks that the workflows are valid; these tests check that
they do what the book relies on.
"""

import re

import pytest
import yaml

from conftest import ROOT

WORKFLOWS = ROOT / ".github" / "workflows"


def workflow(name):
    loaded = yaml.safe_load((WORKFLOWS / name).read_text())
    loaded["on"] = loaded.pop(True, loaded.get("on"))  # YAML 1.1 reads a bare `on` as True
    return loaded


def runs(job):
    return "\n".join(step.get("run", "") for step in job["steps"])


def test_the_test_workflow_runs_every_check_in_parallel_jobs():
    jobs = workflow("test.yml")["jobs"]
    assert len(jobs) >= 3 and not any("needs" in job for job in jobs.values())
    commands = {name: runs(job) for name, job in jobs.items()}
    for make in (
        "make lint",
        "make unit",
        "make lint-workflows",
        "make browser",
        "make standalone-check",
    ):
        assert sum(make in run.splitlines() for run in commands.values()) == 1, make


def test_ci_runs_strict_nbval_on_the_native_and_on_the_portable_cpu_code_path():
    job = next(j for j in workflow("test.yml")["jobs"].values() if "nbval" in runs(j))
    assert runs(job).strip() == "make nbval-${{ matrix.code-path }}"
    assert sorted(job["strategy"]["matrix"]["code-path"]) == ["native", "portable"]
    assert job["strategy"]["fail-fast"] is False  # one path's failure must not hide the other's
    makefile = (ROOT / "Makefile").read_text()
    portable = re.search(r"^nbval-portable:.*\n\t(.*)$", makefile, re.M).group(1)
    assert portable.startswith("$(SECOND_CPU_PATH) $(NBVAL)")
    assert "SECOND_CPU_PATH := ATEN_CPU_CAPABILITY=default MKL_CBWR=COMPATIBLE" in makefile
    nbval = re.search(r"^nbval:.*\n\t(.*)$", makefile, re.M).group(1)
    assert "nbval-native" in nbval and "nbval-portable" in nbval


def test_deploy_publishes_only_what_the_test_workflow_passed_on_a_push_to_main():
    deploy = workflow("deploy.yml")
    assert deploy["on"] == {
        "workflow_run": {"workflows": ["test"], "types": ["completed"], "branches": ["main"]}
    }
    build = deploy["jobs"]["build"]
    assert "conclusion == 'success'" in build["if"] and "event == 'push'" in build["if"]
    checkout = next(s for s in build["steps"] if s.get("uses", "").startswith("actions/checkout"))
    assert checkout["with"]["ref"] == "${{ github.event.workflow_run.head_sha }}"
    assert deploy["jobs"]["deploy"]["needs"] == "build"


def test_deploy_installs_only_what_building_the_html_needs():
    build = workflow("deploy.yml")["jobs"]["build"]
    installs = [line for line in runs(build).splitlines() if "pip install" in line]
    assert installs == ["python -m pip install -r requirements-book.txt -c requirements-lock.txt"]
    # The Makefile's venv would install everything; `make thebe` only unpacks an npm package.
    assert "make" not in runs(build).replace("make thebe", "").split()


def test_deploy_points_the_books_repository_url_at_the_repository_it_builds():
    step = next(
        s
        for s in workflow("deploy.yml")["jobs"]["build"]["steps"]
        if "_config.yml" in s.get("run", "")
    )
    assert step["env"]["REPOSITORY_URL"] == "https://github.com/${{ github.repository }}"
    sed = re.search(r'sed -i -E "s\|(.+?)\|(.+?)\|" _config\.yml', step["run"])
    pattern, replacement = sed.groups()
    url = "https://github.com/someone/fork"
    config = (ROOT / "_config.yml").read_text()
    assert len(re.findall(pattern, config, re.M)) == 1
    rewritten = re.sub(pattern, replacement.replace("${REPOSITORY_URL}", url), config, flags=re.M)
    assert yaml.safe_load(rewritten)["repository"]["url"] == url


def test_deploy_points_each_chapters_install_cell_at_the_commit_it_builds():
    steps = workflow("deploy.yml")["jobs"]["build"]["steps"]
    names = [s.get("run", "") for s in steps]
    (index,) = [i for i, run in enumerate(names) if ".ci/point_install_cells.py" in run]
    step = steps[index]
    assert step["run"] == 'python .ci/point_install_cells.py "${REPOSITORY_URL}" "${COMMIT}"'
    assert step["env"] == {
        "REPOSITORY_URL": "https://github.com/${{ github.repository }}",
        "COMMIT": "${{ github.event.workflow_run.head_sha }}",
    }
    build = next(i for i, run in enumerate(names) if run.startswith("jupyter-book build"))
    assert index < build


def test_deploy_fetches_thebe_before_it_builds():
    """The build copies thebe into the site (_ext/live_code.py); without it -W fails the build."""
    names = [s.get("run", "") for s in workflow("deploy.yml")["jobs"]["build"]["steps"]]
    build = next(i for i, run in enumerate(names) if run.startswith("jupyter-book build"))
    assert "make thebe" in names[:build]


@pytest.mark.parametrize("event", ["push", "pull_request"])
def test_the_binder_rehearsal_runs_when_binder_changes(event):
    binder = workflow("binder.yml")
    assert "binder/**" in binder["on"][event]["paths"]
    assert "make binder-check" in runs(binder["jobs"]["binder"]).splitlines()


def test_the_binder_rehearsal_runs_at_least_weekly():
    (schedule,) = workflow("binder.yml")["on"]["schedule"]
    minute, hour, day_of_month, month, day_of_week = schedule["cron"].split()
    assert (day_of_month, month) == ("*", "*") and day_of_week != "*"


def test_ci_runs_everything_through_make_test():
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert lines[-1] == "make test"
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^test:.*\n\t(.*)$", makefile, re.M).group(1) == "$(PY) .ci/run_checks.py"
