"""``make test``: every check CI runs, scheduled to fit this machine's cores, and one table.

Usage: python .ci/run_checks.py [NAME ...]      (``make test`` runs them all; names pick some)
       python .ci/run_checks.py --reap COMMAND ...  (one check's command, see ``reap``)

Each check is a make target (``CHECKS`` below, the one list: a new check is one line here; a new
test file under tests/ or tests/browser/ joins ``unit`` or ``browser-pages`` by itself). Checks
start in the order listed, as many at a time as ``TEST_JOBS`` says (default: two more than the
number of cores, since every check also waits, on a browser, on pip or on a kernel); a check that
computes on two workers (``slots=2``) counts twice. The long serial ones come first and run at
normal priority, so they always get a core; the others, fillers, run under ``nice`` and take the
CPU time the long ones leave, so the cores stay busy and the long ones are not stretched. The
unit tests, on two workers, start at once and are the last to end, so the run ends on work that
fills both cores rather than on one serial check. A check listed ``after`` another starts once
that one has passed. Each check's output goes to ``_build/checks/NAME.log`` and is printed whole
when it ends. At the end: one table with each check's wall time, the CPU time it used (its
processes and their children, user + system), and whether it passed, then the machine it ran on.
Exits non-zero if any check failed or did not run. A check still running after
``CHECK_MINUTES`` (default 40: CI stops a run at 90, a whole run takes about 10) is ended with
everything it started and counts as failed ("TIMEOUT"), so a hang still leaves the table.

Each check's make runs under this script in ``--reap`` mode (``reap``): on Linux a child
subreaper, which the check's orphaned processes are handed to instead of init (Chromium's renderers
and zygote, whose parents exit without waiting for them) and which waits for every one of them, so
their CPU time counts in the check's column. Without it they showed only in the machine's busy
time.

The portable-code-path nbval pass runs inside ``binder-check``, on the environment Binder
installs (``.ci/binder_check.py``); ``nbval-native`` runs the other pass in ``.venv``.
"""

import contextlib
import ctypes
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOGS = ROOT / "_build" / "checks"
MAKE = shutil.which("make") or "make"
PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
#: How long a reaper waits for what a check left running once its make has exited, before it ends
#: those processes (a leftover is a leak: nothing of the check needs it any more).
LINGER_SECONDS = 10.0
#: How long one check may run before it is ended (``CHECK_MINUTES`` overrides it).
CHECK_MINUTES = 40.0
#: The checks' processes running now, each its own process group (see :func:`run`).
RUNNING = set()


@dataclass(frozen=True)
class Check:
    name: str  # the make target
    what: str  # the table's description
    after: str = ""  # a check that must pass first
    slots: int = 1  # how many of the TEST_JOBS places it takes (its processes that compute at once)
    filler: bool = False  # runs under nice, so the long serial checks keep their pace
    minutes: float = 0  # how long it may run (0: CHECK_MINUTES, see time_limit)


CHECKS = (
    Check("html", "the book built clean with -W -n"),
    # Two pytest workers, but mostly waiting on Chromium: one place.
    Check("browser-pages", "browser tests of the built pages (two workers)", after="html"),
    Check(
        "binder-check",
        "Binder rehearsal: fresh environment from binder/, strict nbval of every chapter "
        "on the portable code path, JupyterLab",
    ),
    Check("unit", "unit tests (two workers)", slots=2, filler=True),
    Check("nbval-native", "strict nbval, this CPU's code path", filler=True),
    Check("standalone-check", "a chapter alone in a fresh environment (Colab)", filler=True),
    Check("lint", "ruff: lint and format", filler=True),
    Check("lint-workflows", "actionlint on .github/workflows", filler=True),
)


@dataclass
class Result:
    check: Check
    status: str  # "pass", "FAIL", "TIMEOUT", "ERROR" (the runner's own) or "not run"
    seconds: float = 0.0
    cpu_seconds: float = 0.0


def jobs():
    """How many checks run at once: TEST_JOBS, else two more than the cores."""
    return int(os.environ.get("TEST_JOBS") or (os.cpu_count() or 1) + 2)


def machine():
    """The CPU's model name and how many cores this process may use, for the table's last line."""
    model = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        names = re.findall(r"^model name\s*:\s*(.+)$", cpuinfo.read_text(), re.M)
        model = names[0].strip() if names else model
    usable = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None  # not macOS
    return f"{model}, {len(usable) if usable else os.cpu_count()} cores"


def machine_busy_seconds():
    """CPU seconds the whole machine has spent busy since boot (Linux's /proc/stat), or None.

    The table's CPU column counts every process a check started, orphans too (``reap``); this
    line also counts the runner itself, the kernel's work for them, and every other program on
    the machine, so it means most on an otherwise idle machine."""
    stat = Path("/proc/stat")
    if not stat.exists():
        return None
    fields = stat.read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def become_subreaper():
    """Make this process the child subreaper of its descendants (Linux's prctl); whether it is."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def parents():
    """Each living process's parent, ``{pid: ppid}`` (/proc)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:  # it ended while we looked
                continue
            found[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    return found


def children():
    """The pids of this process's living children (/proc), the orphans handed to it included."""
    mine = os.getpid()
    return [pid for pid, parent in parents().items() if parent == mine]


def descendants():
    """The pids of every process below this one, in any session (a Jupyter kernel starts its
    own): its children, theirs, and so on."""
    tree, found, level = parents(), [], [os.getpid()]
    while level:
        level = [pid for pid, parent in tree.items() if parent in level]
        found += level
    return found


def end_below(*_):
    """SIGTERM every process below this one: the reaper's answer to the runner's SIGTERM (a
    check over its time, or Ctrl-C), so a kernel in its own session ends with its check."""
    for pid in descendants():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)


def reap(command):
    """Run ``command`` as a child subreaper and wait for every process it leaves behind: each
    orphan is handed to this process, and waiting for it adds its CPU time (and that of the
    children it waited for) to this process's children's rusage, which the runner's ``wait4``
    reads. Orphans are waited for as they end, so none stays a zombie while the check runs. What
    still runs ``LINGER_SECONDS`` after the command ended is sent SIGTERM, then SIGKILL. Returns
    the command's exit code."""
    become_subreaper()
    signal.signal(signal.SIGTERM, end_below)  # then waits, as ever, for what is left
    process = subprocess.Popen(command)
    deadline, signal_to_send = None, signal.SIGTERM
    while True:
        try:
            # Blocks while the command runs; once it has ended, only looks.
            pid, status = os.waitpid(-1, 0 if deadline is None else os.WNOHANG)
        except ChildProcessError:  # none left
            return process.returncode
        if pid == process.pid:
            process.returncode = os.waitstatus_to_exitcode(status)
            deadline = time.monotonic() + LINGER_SECONDS
        elif pid == 0 and time.monotonic() > deadline:
            for child in children():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child, signal_to_send)
            deadline, signal_to_send = time.monotonic() + 5, signal.SIGKILL
        elif pid == 0:
            time.sleep(0.05)


def time_limit(check):
    """How many seconds ``check`` may run: its own ``minutes``, else ``CHECK_MINUTES`` (the
    environment's, else the default), in seconds."""
    return float(check.minutes or os.environ.get("CHECK_MINUTES") or CHECK_MINUTES) * 60


def end_check(process, ended, finished):
    """End a check over its time: SIGTERM to its reaper, which ends all below it and waits for
    them (LINGER_SECONDS, then SIGKILL); SIGKILL to its whole group if the worker's wait4 has not
    ``finished`` in 30 s. Only the worker waits for the process: a poll here could reap it first,
    leaving that wait4 no child and the run waiting for ever (seen once, in a fresh clone)."""
    ended.set()
    with contextlib.suppress(ProcessLookupError):
        os.kill(process.pid, signal.SIGTERM)
    if not finished.wait(30):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)


def run(check):
    """Run one check's make target under a reaper, its output to its log; return its Result (a
    check past :func:`time_limit` is ended, "TIMEOUT")."""
    log = LOGS / f"{check.name}.log"
    started = time.perf_counter()
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                *(["nice", "-n", "10"] if check.filler else []),
                sys.executable,
                __file__,
                "--reap",
                MAKE,
                "--no-print-directory",
                check.name,
            ],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # one group, ended whole: over time, or on Ctrl-C (main)
        )
        RUNNING.add(process)
        ended, finished = threading.Event(), threading.Event()
        limit = threading.Timer(time_limit(check), end_check, (process, ended, finished))
        limit.daemon = True
        limit.start()
        # wait4: the exit status and the CPU time of the process and every descendant it waited for
        # (the reaper waits for all of them).
        _, status, usage = os.wait4(process.pid, 0)
        finished.set()
        process.returncode = os.waitstatus_to_exitcode(status)
        limit.cancel()
        RUNNING.discard(process)
    seconds = time.perf_counter() - started
    if ended.is_set():
        with log.open("a") as out:
            out.write(f"\nchecks: {check.name} ran over {minutes(time_limit(check))}: ended\n")
    return Result(
        check,
        "TIMEOUT" if ended.is_set() else "pass" if process.returncode == 0 else "FAIL",
        seconds,
        usage.ru_utime + usage.ru_stime,
    )


def minutes(seconds):
    return f"{int(seconds // 60)}:{seconds % 60:04.1f}"


def table(results, wall):
    """The closing table: one row per check, then the whole run."""
    width = max(len(r.check.name) for r in results)
    rows = [f"{'check':<{width}}  {'wall':>7}  {'CPU':>7}  result   what"]
    for r in results:
        rows.append(
            f"{r.check.name:<{width}}  {minutes(r.seconds):>7}  {minutes(r.cpu_seconds):>7}  "
            f"{r.status:<7}  {r.check.what}"
        )
    cpu = sum(r.cpu_seconds for r in results)
    rows.append(f"{'all':<{width}}  {minutes(wall):>7}  {minutes(cpu):>7}  ({jobs()} at a time)")
    rows.append(f"machine: {machine()}")
    return "\n".join(rows)


def schedule(checks):
    """Run ``checks``, ``jobs()`` at a time, in their order; return their Results in that order."""
    results, running, lock, done = {}, {}, threading.Lock(), threading.Condition()
    waiting = list(checks)
    names = {c.name for c in checks}

    def worker(check):
        try:
            result = run(check)
        except Exception as error:  # the runner's own failure: told, and the run goes on
            with (LOGS / f"{check.name}.log").open("a") as out:
                out.write(f"\nchecks: running {check.name} failed: {error!r}\n")
            result = Result(check, "ERROR")
        with lock:
            sys.stdout.write(
                f"\n===== {check.name}: {result.status} in {minutes(result.seconds)} =====\n"
            )
            sys.stdout.flush()
            sys.stdout.buffer.write((LOGS / f"{check.name}.log").read_bytes())
            sys.stdout.flush()
        with done:
            results[check.name] = result
            running.pop(check.name)
            done.notify()

    def ready(check):
        return not check.after or check.after not in names or check.after in results

    with done:
        while waiting or running:
            for check in [c for c in waiting if c.after in results]:
                if results[check.after].status != "pass":  # what it needs failed: it cannot run
                    waiting.remove(check)
                    results[check.name] = Result(check, "not run")
            free = jobs() - sum(running.values())
            # The first ready check that fits; one that needs more places than there are at all
            # runs once it is alone.
            startable = [c for c in waiting if ready(c) and min(c.slots, jobs()) <= free]
            if startable:
                check = startable[0]
                waiting.remove(check)
                running[check.name] = min(check.slots, jobs())
                print(f"checks: starting {check.name}", flush=True)
                threading.Thread(target=worker, args=(check,), daemon=True).start()
                continue
            # Nothing running: every check left has just been marked "not run" (else one would
            # be startable), and the loop ends. Waiting then would wait for a notify never sent.
            if running:
                done.wait()
    return [results[c.name] for c in checks]


def main(argv):
    if argv[:1] == ["--reap"]:
        return reap(argv[1:])
    unknown = set(argv) - {c.name for c in CHECKS}
    if unknown:
        sys.exit(f"checks: no check named {', '.join(sorted(unknown))}")
    checks = [c for c in CHECKS if not argv or c.name in argv]
    try:
        [time_limit(c) for c in checks]
    except ValueError:
        sys.exit(
            f"checks: CHECK_MINUTES must be a number of minutes: {os.environ['CHECK_MINUTES']!r}"
        )
    LOGS.mkdir(parents=True, exist_ok=True)
    started, busy_before = time.perf_counter(), machine_busy_seconds()
    try:
        results = schedule(checks)
    except KeyboardInterrupt:  # the checks run in groups of their own, which Ctrl-C misses
        for process in list(RUNNING):  # each reaper ends all below it (end_below)
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGTERM)
        raise
    wall = time.perf_counter() - started
    print("\n" + table(results, wall))
    if busy_before is not None:
        busy = machine_busy_seconds() - busy_before
        print(
            f"machine busy: {minutes(busy)} of CPU in {minutes(wall)} on "
            f"{os.cpu_count()} cores ({busy / (wall * (os.cpu_count() or 1)):.0%}), "
            "every process counted"
        )
    failed = [r for r in results if r.status != "pass"]
    print(f"checks: {len(results) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
