"""``make test``'s runner (.ci/run_checks.py): every check it ran before, each a make target, run at
most ``TEST_JOBS`` at a time in the listed order, a check's ``after`` first, and a failure fails
the run and is named in the closing table."""

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import binder_check  # .ci/binder_check.py
import run_checks as checks  # .ci/run_checks.py (pytest pythonpath)
from conftest import ROOT

#: What `make test` checked before it had a runner: none may be dropped. The second strict nbval
#: pass (nbval-portable) runs inside binder-check, on the environment Binder installs: see
#: test_make_test_runs_strict_nbval_on_the_portable_code_path_in_the_binder_rehearsal.
EVERY_CHECK = {
    "lint",
    "unit",
    "nbval-native",
    "html",
    "lint-workflows",
    "browser-pages",
    "binder-check",
    "standalone-check",
}


def test_every_check_make_test_ran_is_listed_once_and_is_a_make_target():
    names = [c.name for c in checks.CHECKS]
    assert len(names) == len(set(names)) and EVERY_CHECK <= set(names)
    makefile = (ROOT / "Makefile").read_text()
    for name in names:
        assert re.search(rf"^{re.escape(name)}:", makefile, re.M), name
    assert all(c.after in names for c in checks.CHECKS if c.after)


def test_the_browser_tests_run_on_the_book_the_html_check_built():
    (browser,) = [c for c in checks.CHECKS if c.name == "browser-pages"]
    assert browser.after == "html"


def test_the_html_check_builds_the_book_from_clean():
    """An incremental build keeps files the sources no longer have; the browser tests would pass on
    them."""
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^html:.*\n((?:\t.*\n)+)", makefile, re.M).group(1).split("\n\t")
    assert recipe[0].strip() == "rm -rf _build/html"
    assert "$(BUILD_BOOK)" in recipe[1] and "-W -n" in makefile.split("BUILD_BOOK :=")[1]


def test_make_test_runs_strict_nbval_on_the_portable_code_path_in_the_binder_rehearsal(
    monkeypatch, tmp_path
):
    makefile = (ROOT / "Makefile").read_text()
    second = re.search(r"^SECOND_CPU_PATH := (.*)$", makefile, re.M).group(1)
    assert dict(v.split("=") for v in second.split()) == binder_check.SECOND_CPU_PATH
    assert "nbval-portable" not in {c.name for c in checks.CHECKS}  # not twice
    chapters = [tmp_path / "chapters" / f"0{n}_x.ipynb" for n in (1, 2)]
    runs = []
    monkeypatch.setattr(
        binder_check.subprocess,
        "run",
        lambda command, **kw: runs.append((command, kw)) or type("Done", (), {"returncode": 0}),
    )
    assert binder_check.run_chapters(tmp_path, chapters, {"PATH": "/fresh/bin"}) == 0
    ((command, options),) = runs
    assert command[1:3] == ["-m", "pytest"] and "--nbval" in command  # strict, not --nbval-lax
    assert not any(a.startswith("--nbval-lax") or a == "--nbval-current-env" for a in command)
    assert f"--nbval-kernel-name={binder_check.NBVAL_KERNEL}" in command
    assert command[-2:] == ["chapters/01_x.ipynb", "chapters/02_x.ipynb"]
    assert options["cwd"] == tmp_path
    assert binder_check.SECOND_CPU_PATH.items() <= options["env"].items()


class FakeRuns:
    """Stands in for running a make target: a short sleep. Records when each check ran and the most
    that ran at once.

    A run first waits (10 s at most) until ``together`` checks have been running at once: how many
    the scheduler starts together is then decided by the scheduler, not by how soon a busy machine
    gets round to its threads (CI once saw a third check start 4 ms after the first two ended)."""

    def __init__(self, monkeypatch, failing=(), seconds=0.05, together=1):
        self.spans, self.most_at_once, self.running = {}, 0, 0
        self.failing, self.seconds, self.together = failing, seconds, together
        self.changed = threading.Condition()
        monkeypatch.setattr(checks, "run", self.run)
        monkeypatch.setattr(checks, "LOGS", ROOT / "_build" / "checks-test")
        checks.LOGS.mkdir(parents=True, exist_ok=True)
        for name in "abcd":
            (checks.LOGS / f"{name}.log").write_text(f"output of {name}\n")

    def run(self, check):
        start = time.perf_counter()
        with self.changed:
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
            self.changed.notify_all()
            self.changed.wait_for(lambda: self.most_at_once >= self.together, timeout=10)
        time.sleep(self.seconds)
        with self.changed:
            self.running -= 1
            self.spans[check.name] = (start, time.perf_counter())
        return checks.Result(check, "FAIL" if check.name in self.failing else "pass", 0.0, 0.0)


@pytest.mark.parametrize("jobs", [1, 2, 3])
def test_no_more_than_test_jobs_checks_run_at_once(monkeypatch, jobs):
    fake = FakeRuns(monkeypatch, together=jobs)
    monkeypatch.setenv("TEST_JOBS", str(jobs))
    results = checks.schedule([checks.Check(n, n) for n in "abcd"])
    assert [r.status for r in results] == ["pass"] * 4
    assert fake.most_at_once == jobs


def test_the_test_of_test_jobs_can_fail(monkeypatch):
    """A scheduler that ignored TEST_JOBS would run all four at once."""
    fake = FakeRuns(monkeypatch, together=4)
    monkeypatch.setenv("TEST_JOBS", "2")
    monkeypatch.setattr(checks, "jobs", lambda: 4)
    checks.schedule([checks.Check(n, n) for n in "abcd"])
    assert fake.most_at_once == 4


def test_a_check_starts_after_the_one_it_needs_and_not_at_all_when_that_one_failed(monkeypatch):
    spans = FakeRuns(monkeypatch, failing={"c"}).spans
    monkeypatch.setenv("TEST_JOBS", "4")
    results = checks.schedule(
        [
            checks.Check("a", "a"),
            checks.Check("b", "b", after="a"),
            checks.Check("c", "c"),
            checks.Check("d", "d", after="c"),
        ]
    )
    assert [r.status for r in results] == ["pass", "pass", "FAIL", "not run"]
    assert spans["b"][0] >= spans["a"][1] and "d" not in spans


def test_the_run_ends_when_the_last_check_to_end_failed_and_the_one_after_it_cannot_run(
    monkeypatch,
):
    """Once c has failed, d is "not run" and nothing is left: the run must end, not wait for a
    check to finish (it once waited forever when c was the last to end)."""
    FakeRuns(monkeypatch, failing={"c"})
    found = []
    pair = [checks.Check("c", "c"), checks.Check("d", "d", after="c")]
    run = threading.Thread(target=lambda: found.extend(checks.schedule(pair)), daemon=True)
    run.start()
    run.join(timeout=10)
    assert [r.status for r in found] == ["FAIL", "not run"]


def test_a_failed_check_fails_the_run_and_the_table_names_it(monkeypatch, capsys):
    FakeRuns(monkeypatch, failing={"b"})
    monkeypatch.setattr(checks, "CHECKS", tuple(checks.Check(n, f"check {n}") for n in "ab"))
    assert checks.main([]) == 1
    out = capsys.readouterr().out
    assert re.search(r"^b +\S+ +\S+ +FAIL +check b$", out, re.M)
    assert re.search(r"^a +\S+ +\S+ +pass +check a$", out, re.M)
    assert "output of b" in out  # the failing check's log is printed whole
    assert re.search(r"^machine: .+, \d+ cores$", out, re.M)  # where the times were taken
    assert out.rstrip().endswith("checks: 1 passed, 1 failed")


def test_on_two_cores_the_long_checks_and_the_unit_tests_start_first(monkeypatch):
    """The browser tests start once the book is built, the Binder rehearsal and the unit tests at
    once; the run ends on fillers, not on one serial check started late."""
    seconds = {"html": 0.2, "browser-pages": 0.8, "binder-check": 0.6, "unit": 0.6}
    spans, started = {}, threading.Condition()

    def run(check):
        start = time.perf_counter()
        with started:
            spans[check.name] = (start, None)
            started.notify_all()
            if check.name == "html":  # the book builds until the two (10 s at most: a busy machine)
                started.wait_for(lambda: {"binder-check", "unit"} <= spans.keys(), timeout=10)
        time.sleep(seconds.get(check.name, 0.05))
        with started:
            spans[check.name] = (start, time.perf_counter())
        return checks.Result(check, "pass", 0.0, 0.0)

    monkeypatch.setattr(checks, "run", run)
    monkeypatch.setattr(checks, "LOGS", ROOT / "_build" / "checks-test")
    checks.LOGS.mkdir(parents=True, exist_ok=True)
    for c in checks.CHECKS:
        (checks.LOGS / f"{c.name}.log").write_text("")
    monkeypatch.delenv("TEST_JOBS", raising=False)
    monkeypatch.setattr(checks.os, "cpu_count", lambda: 2)
    checks.schedule(list(checks.CHECKS))
    html_done = spans["html"][1]
    assert spans["binder-check"][0] < html_done and spans["unit"][0] < html_done
    fillers = [n for n in spans if n not in seconds]
    assert spans["browser-pages"][0] < min(spans[n][0] for n in fillers)
    long = {"browser-pages", "binder-check"}
    assert all(not c.filler for c in checks.CHECKS if c.name in long)
    assert all(c.filler for c in checks.CHECKS if c.name not in long | {"html"})


def test_a_run_of_one_real_check_records_its_output_wall_and_cpu_time(monkeypatch, tmp_path):
    fake_make = tmp_path / "make"  # called as `make --no-print-directory NAME`
    fake_make.write_text(
        '#!/bin/sh\ni=0; while [ $i -lt 100000 ]; do i=$((i+1)); done; echo "$2"\n'
    )
    fake_make.chmod(0o755)
    monkeypatch.setattr(checks, "MAKE", str(fake_make))
    monkeypatch.setattr(checks, "LOGS", tmp_path)
    (result,) = checks.schedule([checks.Check("busy", "a busy loop")])
    assert result.status == "pass" and (tmp_path / "busy.log").read_text() == "busy\n"
    assert 0 < result.cpu_seconds <= result.seconds * 1.1


BUSY_ORPHAN = """#!/bin/sh
{python} -c 'import time
end = time.process_time() + 0.5
while time.process_time() < end:
    pass' &
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a subreaper is Linux's")
def test_a_process_a_check_leaves_running_is_waited_for_and_its_cpu_time_counted(
    monkeypatch, tmp_path
):
    """As Chromium's renderers are: orphaned (the shell exits without waiting for its busy child),
    handed to the check's reaper, waited for, and counted in the check's CPU column."""
    fake_make = tmp_path / "make"
    fake_make.write_text(BUSY_ORPHAN.format(python=sys.executable))
    fake_make.chmod(0o755)
    monkeypatch.setattr(checks, "MAKE", str(fake_make))
    monkeypatch.setattr(checks, "LOGS", tmp_path)
    (result,) = checks.schedule([checks.Check("orphan", "leaves a busy child")])
    assert result.status == "pass" and result.cpu_seconds >= 0.5


def test_a_check_on_two_workers_takes_two_places(monkeypatch):
    spans = FakeRuns(monkeypatch).spans
    monkeypatch.setenv("TEST_JOBS", "2")
    wide = [checks.Check("a", "a", slots=2), checks.Check("b", "b"), checks.Check("c", "c")]
    assert [r.status for r in checks.schedule(wide)] == ["pass"] * 3
    assert spans["a"][1] <= min(spans["b"][0], spans["c"][0])  # a ran alone
    monkeypatch.setenv("TEST_JOBS", "1")  # fewer places than it takes: it still runs, alone
    assert [r.status for r in checks.schedule(wide)] == ["pass"] * 3


def test_fillers_run_under_nice_and_the_long_checks_do_not(monkeypatch, tmp_path):
    fake_make = tmp_path / "make"
    fake_make.write_text("#!/bin/sh\nnice\n")  # prints its own niceness
    fake_make.chmod(0o755)
    monkeypatch.setattr(checks, "MAKE", str(fake_make))
    monkeypatch.setattr(checks, "LOGS", tmp_path)
    checks.schedule([checks.Check("long", "long"), checks.Check("filler", "f", filler=True)])
    long, filler = (int((tmp_path / f"{n}.log").read_text()) for n in ("long", "filler"))
    assert filler > long or filler == 19


def test_the_machine_busy_line_counts_cpu_time_the_rusage_of_a_check_misses():
    """A process the runner never waits for (here: this test's own busy loop) still shows in the
    machine's busy seconds."""
    before = checks.machine_busy_seconds()
    if before is None:
        pytest.skip("no /proc/stat on this system")
    end = time.process_time() + 0.3
    while time.process_time() < end:
        pass
    assert checks.machine_busy_seconds() - before >= 0.25


def test_a_check_over_its_time_is_ended_with_what_it_started_and_the_run_goes_on(
    monkeypatch, tmp_path
):
    """A hang must not take CI's whole 90 minutes and its table: the check is ended, a child it
    started too, and the next check still runs."""
    fake_make = tmp_path / "make"
    hang_when_asked = (
        'if [ "$2" = hang ]; then sleep 60 & echo $! > child; setsid sleep 60 & '
        "echo $! > kernel; wait; fi"
    )  # a kernel starts a session of its own
    fake_make.write_text(f"#!/bin/sh\n{hang_when_asked}\n")
    fake_make.chmod(0o755)
    monkeypatch.setattr(checks, "MAKE", str(fake_make))
    monkeypatch.setattr(checks, "LOGS", tmp_path)
    monkeypatch.setattr(checks, "ROOT", tmp_path)
    hang, quick = checks.Check("hang", "sleeps", minutes=0.02), checks.Check("quick", "ends")
    started = time.monotonic()
    results = checks.schedule([hang, quick])
    assert [r.status for r in results] == ["TIMEOUT", "pass"] and time.monotonic() - started < 30
    assert "ran over" in (tmp_path / "hang.log").read_text()
    for name in ("child", "kernel"):
        stat = Path(f"/proc/{int((tmp_path / name).read_text())}/stat")
        gone = time.monotonic() + 20  # SIGTERM now, SIGKILL later: it may still be ending
        while stat.exists() and ") Z " not in stat.read_text() and time.monotonic() < gone:
            time.sleep(0.1)
        assert not stat.exists() or ") Z " in stat.read_text(), name


def test_ending_a_check_leaves_its_exit_to_the_workers_wait():
    """end_check must not wait for the check itself (Popen.poll reaps it): the worker's wait4
    would find no child, its thread end in an exception and the run wait for it for ever (seen
    once, in a fresh clone). Here a poll fails the test; the worker's wait4 is this test's."""

    class Unpolled(subprocess.Popen):
        def poll(self, *args):
            raise AssertionError("end_check waited for the check")

    process, finished, errors = Unpolled(["true"], start_new_session=True), threading.Event(), []

    def ender():
        try:
            checks.end_check(process, threading.Event(), finished)
        except Exception as error:
            errors.append(error)

    thread = threading.Thread(target=ender)
    thread.start()
    time.sleep(0.3)  # the check has ended: an end_check that polls reaps it now
    os.wait4(process.pid, 0)  # ChildProcessError if it was reaped
    finished.set()
    thread.join(5)
    assert not errors and not thread.is_alive()
