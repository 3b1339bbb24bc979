#!/usr/bin/env python3
"""Mutation-test one plugin's modules against that plugin's own tests (mutmut).

    .venv/bin/python scripts/mutation.py moe                  # one feature plugin
    .venv/bin/python scripts/mutation.py parallel --time-limit 1800
    .venv/bin/python scripts/mutation.py parallel --modules sizes.py pipeline.py
    .venv/bin/python scripts/mutation.py --list
    .venv/bin/python scripts/mutation.py path/to/megaplug-ema  # a third-party plugin's checkout
    .venv/bin/python scripts/mutation.py moe --again          # the survivors, after new tests
    .venv/bin/python scripts/mutation.py preflight --resume   # go on with a run stopped early
    .venv/bin/python scripts/mutation.py preflight --again --in-process --modules pipeline.py

A third-party plugin is named by its directory: one holding ``src/<package>/`` (or
``<package>/``) and ``tests/``, its package installed (``pip install -e``) in the environment
``--python`` names; its tests are copied from there and its whole package is mutated.

Not part of CI: a run takes minutes to an hour on a 2-core machine. The score per plugin
is recorded in docs/reliability.md ("Mutation testing").

Why a staging directory: mutmut mutates a copy of the code under ``mutants/`` and puts
``mutants/src`` first on ``sys.path``, so the package under test must sit at
``src/<package>``. A feature plugin's package lives at ``plugins/megaplug-NAME/src``, so
each run lays out a small project in a staging directory (``--work``, by default under the
system's temporary directory): ``src/`` holds the package under test (for a built-in, all
of ``megaplug``, of which only ``builtin/NAME`` is mutated), the plugin's tests keep their
paths from the repository, and ``shared`` links to the reference material the tests read
(``../shared`` beside the checkout). Everything else is imported from the checkout's
``.venv`` as installed.

Each mutant runs only the selected tests that call the mutated function, in a process
forked from one that has already imported everything, one mutant at a time by default
(``--jobs``) and at low priority (``nice``), so a run shares a small machine politely.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("MEGAPLUG_SHARED_DIR", REPO.parent / "shared"))
MUTMUT_VERSION = "3.8.1"

#: mutmut's exit-code meanings (mutmut.stats.status_by_exit_code), kept here so the report
#: does not import mutmut's internals.
STATUS_BY_EXIT_CODE = {1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests",
                       34: "skipped", 35: "suspicious", 36: "timeout", 37: "killed",
                       24: "timeout", -24: "timeout", 152: "timeout", 255: "timeout",
                       -11: "segfault", -9: "segfault", None: "not checked"}

#: Modules that declare flags or name things, not rules; reported apart from the rule score.
NOT_RULES = {"__init__.py", "options.py", "enums.py"}

#: pytest arguments a plugin's runs need. Tests that read a plugin's own source files (their
#: syntax tree) judge mutmut's rewrite of them into trampolines, not the mutant; pre-flight's
#: Megatron tier needs megatron-core (scripts/megatron-tier.sh) and is skipped without it.
PYTEST_ARGS = {
    "preflight": ["--deselect=plugins/megaplug-preflight/tests/test_preflight_plugin.py::"
                  "test_every_setting_read_is_declared_by_a_plugin",
                  "--ignore=plugins/megaplug-preflight/tests/megatron"],
}


@dataclass
class Target:
    """What one run mutates and which tests judge it."""

    name: str
    package_dir: Path            # the directory copied to <staging>/src/<package>
    package: str                 # its import name
    mutate: str                  # only_mutate pattern, relative to the staging directory
    tests: list[str] = field(default_factory=list)   # test paths, relative to the repository
    copy: list[str] = field(default_factory=list)    # directories copied with their paths
    base: Path = REPO            # where the test paths start (a third-party plugin's root)


def builtin_target(name: str) -> Target:
    tests = sorted(str(p.relative_to(REPO)) for p in (REPO / "tests" / "builtin").glob(
        f"test_{name}*.py"))
    boundaries = REPO / "tests" / "builtin" / "test_boundaries.py"
    if boundaries.exists():
        tests.append(str(boundaries.relative_to(REPO)))
    return Target(name, REPO / "src" / "megaplug", "megaplug",
                  f"src/megaplug/builtin/{name}/*", tests, ["tests/builtin"])


def feature_target(name: str) -> Target:
    root = REPO / "plugins" / f"megaplug-{name}"
    package = f"megaplug_{name}"
    tests = str((root / "tests").relative_to(REPO))
    return Target(name, root / "src" / package, package, f"src/{package}/*", [tests], [tests])


def directory_target(directory: str) -> Target | None:
    """A plugin outside the checkout, by its directory: ``src/<package>`` (or ``<package>``)
    with an ``__init__.py``, judged by ``tests/``; ``None`` when ``directory`` is not one."""
    root = Path(directory).resolve()
    packages = [p for where in (root / "src", root) if where.is_dir()
                for p in sorted(where.iterdir()) if (p / "__init__.py").is_file()
                and p.name != "tests"]
    if not packages or not (root / "tests").is_dir():
        return None
    package = packages[0]
    mutate = str(Path("src") / package.name / "*")
    return Target(root.name, package, package.name, mutate, ["tests"], ["tests"], base=root)


def targets() -> dict[str, Target]:
    found = {p.name: builtin_target(p.name) for p in sorted((REPO / "src/megaplug/builtin")
                                                               .iterdir())
             if (p / "__init__.py").exists()}
    for root in sorted((REPO / "plugins").glob("megaplug-*")):
        name = root.name.removeprefix("megaplug-")
        found[name] = feature_target(name)
    return found


def ensure_mutmut(python: str) -> None:
    probe = subprocess.run([python, "-c", "import mutmut; print(mutmut.__version__)"],
                           capture_output=True, text=True)
    if probe.returncode == 0:
        return
    print(f"installing mutmut=={MUTMUT_VERSION} into the checkout's environment")
    subprocess.run([python, "-m", "pip", "install", "--quiet", f"mutmut=={MUTMUT_VERSION}"],
                   check=True)


def _ignore(_directory: str, names: list[str]) -> set[str]:
    return {n for n in names if n in ("__pycache__", ".pytest_cache") or n.endswith(".egg-info")}


def stage(target: Target, work: Path, modules: list[str], extra_tests: list[str],
          jobs_note: str) -> None:
    """Lay out the staging project for ``target`` in ``work`` (emptied first)."""
    if work.exists():
        shutil.rmtree(work)
    (work / "src").mkdir(parents=True)
    shutil.copytree(target.package_dir, work / "src" / target.package, ignore=_ignore)
    copy_tests(target, work, extra_tests)
    # tests find ../shared from their own path: <work>/tests/x/y.py and, once copied under
    # mutants/, <work>/mutants/plugins/p/tests/y.py both look two levels above the checkout
    (work / "mutants").mkdir()
    for link in (work / "shared", work / "mutants" / "shared"):
        link.symlink_to(SHARED.resolve(), target_is_directory=True)
    write_config(target, work, modules, extra_tests, jobs_note)


def copy_tests(target: Target, work: Path, extra_tests: list[str],
               roots: tuple[str, ...] = ("",)) -> None:
    """Copy the target's tests, as they are now, under each of ``roots`` in ``work``."""
    for root in roots:
        for directory in {*target.copy, *(str(Path(t).parent) for t in extra_tests)}:
            shutil.copytree(target.base / directory, work / root / directory, ignore=_ignore,
                            dirs_exist_ok=True)
        for test in extra_tests:
            if (target.base / test).is_file():
                shutil.copy2(target.base / test, work / root / test)


def write_config(target: Target, work: Path, modules: list[str], extra_tests: list[str],
                 jobs_note: str) -> None:
    """Write the staging project's mutmut and pytest configuration."""
    if modules:
        patterns = [f"{target.mutate[:-1]}{m}" for m in modules]
    else:
        patterns = [target.mutate]
    tests = [*target.tests, *extra_tests]
    pyproject = "\n".join([
        f"# staged by scripts/mutation.py for plugin {target.name!r} ({jobs_note})",
        "[tool.mutmut]",
        'source_paths = ["src"]',
        f"only_mutate = {json.dumps(patterns)}",
        f"pytest_add_cli_args_test_selection = {json.dumps(tests)}",
        "pytest_add_cli_args = " + json.dumps(
            ["-p", "no:cacheprovider", "-W", "ignore::DeprecationWarning",
             *PYTEST_ARGS.get(target.name, ())]),
        f"also_copy = {json.dumps(sorted(target.copy))}",
        "use_git_change_detection = false",
        "",
        "[tool.pytest.ini_options]",
        'addopts = "--import-mode=importlib"',
        "",
    ])
    (work / "pyproject.toml").write_text(pyproject)


def run_mutmut(python: str, work: Path, jobs: int, time_limit: float,
               names: list[str] | None = None) -> tuple[int, bool]:
    """Run ``mutmut run`` in ``work`` (only the ``names`` mutants, when given); stop it (and
    its workers) after ``time_limit`` s."""
    env = dict(os.environ)
    env["MEGAPLUG_CACHE_DIR"] = str(work / "cache")
    env.pop("MEGAPLUG_PLUGINS", None)
    env["MEGAPLUG_PARITY_DIR"] = str(SHARED / "parity")
    command = ["nice", "-n", "10", python, "-m", "mutmut", "run", "--max-children", str(jobs),
               *(names or [])]
    log = (work / "mutmut.log").open("a" if names else "w")
    process = subprocess.Popen(command, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)
    # mutmut and its workers run in their own session: stop them with this script
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        return process.wait(timeout=time_limit), False
    except subprocess.TimeoutExpired:
        return _stop(process), True
    finally:
        if process.poll() is None:
            _stop(process)
        log.close()


def _stop(process: subprocess.Popen) -> int:
    os.killpg(process.pid, signal.SIGTERM)
    try:
        return process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        return process.wait()


def judge_again(target: Target, work: Path, python: str, extra_tests: list[str],
                time_limit: float, jobs: int = 1) -> tuple[int, bool]:
    """Judge the mutants the last run left alive again, against the tests as they are now.

    For a mutant that new tests should kill: the tests are copied again (mutmut collects
    which of them call each function), the test selection is written again (a built-in's
    new ``test_NAME_*.py`` file joins it), and only those mutants run.
    """
    config = (work / "pyproject.toml").read_text()
    (work / "pyproject.toml").write_text(config.replace(
        config.split("pytest_add_cli_args_test_selection = ", 1)[1].split("\n", 1)[0],
        json.dumps([*target.tests, *extra_tests])))
    copy_tests(target, work, extra_tests, roots=("", "mutants"))
    for cache in work.rglob("__pycache__"):
        shutil.rmtree(cache, ignore_errors=True)
    alive = [name for statuses in collect(work).values()
             for name, status in statuses.items() if status != "killed"]
    if not alive:
        return 0, False
    judged = _exit_codes(work)
    outcome = run_mutmut(python, work, jobs, time_limit, alive)
    # mutmut forgets what it did not run this time: the mutants killed before stay killed
    for meta, before in judged.items():
        if meta.exists():
            data = json.loads(meta.read_text())
            codes = data["exit_code_by_key"]
            for key, code in before.items():
                if key not in alive and codes.get(key) is None:
                    codes[key] = code
            meta.write_text(json.dumps(data))
    return outcome


#: Run in the staging project's ``mutants/`` directory by :func:`judge_in_process`: one
#: interpreter imports the mutated code once, then runs pytest per mutant with mutmut's
#: switch (``MUTANT_UNDER_TEST``, which the trampolines read on every call) set to it.
_IN_PROCESS_JUDGE = """
import contextlib, io, json, os, sys, time
import pytest
names, results, deadline = json.load(open(sys.argv[1])), sys.argv[2], float(sys.argv[3])
arguments = sys.argv[4:]
def judge(name):
    os.environ["MUTANT_UNDER_TEST"] = name
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return int(pytest.main(arguments))
if judge("none") != 0:
    sys.exit("the tests fail without any mutant: nothing can be judged")
with open(results, "w") as out:
    for name in names:
        if time.time() > deadline:
            break
        code = judge(name)
        out.write(json.dumps([name, code]) + "\\n")
        out.flush()
        print("killed " if code else "SURVIVED", name, flush=True)
"""


def judge_in_process(target: Target, work: Path, python: str, extra_tests: list[str],
                     time_limit: float, modules: list[str]) -> tuple[int, bool]:
    """Judge the survivors of the last run again in one process, without mutmut's runner.

    For a small machine: mutmut forks a worker per mutant and collects which tests call each
    function first, which for a plugin with a large suite costs more than judging a few
    hundred survivors with ``pytest -x`` over its tests. Each survivor runs the plugin's
    whole selection (stopping at the first failure); verdicts go into mutmut's ``.meta``
    files, so ``--report-only`` and the report count them like a mutmut run's.
    """
    copy_tests(target, work, extra_tests, roots=("", "mutants"))
    for cache in work.rglob("__pycache__"):
        shutil.rmtree(cache, ignore_errors=True)
    prefixes = tuple(f"{target.package}.{Path(m).stem}." for m in modules)
    alive = [name for statuses in collect(work).values()
             for name, status in statuses.items()
             if status != "killed" and (not prefixes or name.startswith(prefixes))]
    if not alive:
        return 0, False
    names, results = work / "in-process-names.json", work / "in-process-results.jsonl"
    names.write_text(json.dumps(alive))
    arguments = ["-p", "no:cacheprovider", "-x", "-q", "--import-mode=importlib",
                 "-W", "ignore::DeprecationWarning", *PYTEST_ARGS.get(target.name, ()),
                 *target.tests, *extra_tests]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(["src", os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run(["nice", python, "-c", _IN_PROCESS_JUDGE, str(names), str(results),
                           str(time.time() + time_limit), *arguments],
                          cwd=work / "mutants", env=env)
    verdicts = dict(json.loads(line) for line in results.read_text().splitlines()) \
        if results.exists() else {}
    for meta in (work / "mutants" / "src").rglob("*.py.meta"):
        data = json.loads(meta.read_text())
        codes = data["exit_code_by_key"]
        for name, code in verdicts.items():
            if name in codes:
                codes[name] = 0 if code in (0, 5) else 1  # pytest: 0 passed, 5 no tests
        meta.write_text(json.dumps(data))
    return done.returncode, len(verdicts) < len(alive)


def _exit_codes(work: Path) -> dict[Path, dict[str, int | None]]:
    return {meta: json.loads(meta.read_text())["exit_code_by_key"]
            for meta in (work / "mutants" / "src").rglob("*.py.meta")}


def collect(work: Path) -> dict[str, dict[str, str]]:
    """Mutant name -> status, per mutated module (from mutmut's ``.meta`` files)."""
    found: dict[str, dict[str, str]] = {}
    for meta in sorted((work / "mutants" / "src").rglob("*.py.meta")):
        data = json.loads(meta.read_text())
        module = str(meta.relative_to(work / "mutants"))[: -len(".meta")]
        found[module] = {key: STATUS_BY_EXIT_CODE.get(code, "suspicious")
                         for key, code in data["exit_code_by_key"].items()}
    return found


def score(statuses: Counter) -> str:
    judged = sum(n for s, n in statuses.items() if s != "not checked")
    if not judged:
        return "-"
    return f"{100 * statuses['killed'] / judged:.1f}%"


_DIFFS = """
import json, sys
from mutmut.mutation.diff_apply import get_diff_for_mutant
print(json.dumps({name: get_diff_for_mutant(name, path=path)
                  for name, path in json.load(sys.stdin)}))
"""


def diffs(python: str, work: Path, names: dict[str, str]) -> dict[str, str]:
    """mutmut's diff of each named mutant (name -> module path), from one process."""
    if not names:
        return {}
    done = subprocess.run([python, "-c", _DIFFS], cwd=work, capture_output=True, text=True,
                          input=json.dumps(sorted(names.items())))
    return json.loads(done.stdout) if done.returncode == 0 else {}


def _without_strings(line: str) -> list[str]:
    """The tokens of a line of code with every string literal's text blanked."""
    import io
    import tokenize

    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(line.strip() + "\n").readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return [line]
    return ["''" if t.type == tokenize.STRING or t.type in _FSTRING_TOKENS else t.string
            for t in tokens]


_FSTRING_TOKENS = {getattr(__import__("tokenize"), name, -1)
                   for name in ("FSTRING_START", "FSTRING_MIDDLE", "FSTRING_END")}


def is_text_only(diff: str) -> bool:
    """Whether a mutant only changes the text of string literals (a message, hint or
    reason), not what the code decides."""
    removed = [line[1:] for line in diff.splitlines()
               if line.startswith("-") and not line.startswith("---")]
    added = [line[1:] for line in diff.splitlines()
             if line.startswith("+") and not line.startswith("+++")]
    return bool(removed) and len(removed) == len(added) and all(
        _without_strings(a) == _without_strings(b) for a, b in zip(removed, added))


def compact(diff: str) -> str:
    return "\n".join(line for line in diff.splitlines()
                     if line[:1] in "-+" and not line.startswith(("---", "+++")))


def report(target: Target, work: Path, python: str, timed_out: bool,
           seconds: float | None, again: bool = False) -> str:
    results = collect(work)
    took = f"{seconds / 60:.1f} min" if seconds is not None else "the last run, reported again"
    if again:
        took = f"the survivors of the last run judged again in {took}"
    lines = [f"mutation run: plugin {target.name}, {took}"
             + (" (stopped at the time limit: partial)" if timed_out else "")]
    lines.append(f"{'module':44} {'mutants':>7} {'killed':>6} {'surv.':>5} {'other':>5} "
                 f"{'score':>6}  logic-only score")
    rule_total: Counter = Counter()
    rule_logic: Counter = Counter()
    not_killed = {name: module for module, statuses in results.items()
                  for name, status in statuses.items() if status != "killed"}
    shown = diffs(python, work, not_killed)
    text_only = {name for name, diff in shown.items() if is_text_only(diff)}
    for module, statuses in results.items():
        counts = Counter(statuses.values())
        logic = Counter(status for name, status in statuses.items() if name not in text_only)
        other = sum(n for s, n in counts.items() if s not in ("killed", "survived"))
        rule = Path(module).name not in NOT_RULES
        if rule:
            rule_total += counts
            rule_logic += logic
        lines.append(f"{module:44} {len(statuses):7} {counts['killed']:6} "
                     f"{counts['survived']:5} {other:5} {score(counts):>6}  {score(logic)}"
                     + ("" if rule else "  (not a rule module)"))
    lines.append(f"rule modules: {sum(rule_total.values())} mutants, {rule_total['killed']} "
                 f"killed: score {score(rule_total)}; without the "
                 f"{sum(rule_total.values()) - sum(rule_logic.values())} surviving text-only "
                 f"mutants (message, hint and reason wording): {score(rule_logic)}")
    for heading, names in (("not killed, changing what the code decides",
                            [n for n in not_killed if n not in text_only]),
                           ("not killed, changing only the text of a message, hint or reason",
                            [n for n in not_killed if n in text_only])):
        if names:
            lines += ["", f"{heading} ({len(names)}):"]
            for name in names:
                status = results[not_killed[name]][name]
                lines.append(f"# {name} ({status})")
                lines.append(compact(shown.get(name, "(no diff)")))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    known = targets()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("plugin", nargs="?", metavar="PLUGIN",
                        help="a built-in or feature plugin (--list shows them), or the "
                             "directory of a third-party plugin (src/PACKAGE and tests/)")
    parser.add_argument("--list", action="store_true", help="list the plugins and their tests")
    parser.add_argument("--modules", nargs="+", default=[], metavar="FILE",
                        help="mutate only these files of the plugin (e.g. sizes.py)")
    parser.add_argument("--tests", nargs="+", default=[], metavar="PATH",
                        help="more test files to judge mutants with (relative to the checkout)")
    parser.add_argument("--jobs", type=int, default=1, help="mutants run at once (default 1)")
    parser.add_argument("--time-limit", type=float, default=3600, metavar="SECONDS",
                        help="stop the run after this long and report what was judged")
    parser.add_argument("--work", type=Path, help="staging directory (emptied first)")
    parser.add_argument("--python", default=str(REPO / ".venv" / "bin" / "python"))
    parser.add_argument("--report-only", action="store_true",
                        help="report the last run in the staging directory again")
    parser.add_argument("--again", action="store_true",
                        help="judge the mutants the last run left alive again, against the "
                             "tests as they are now (after adding tests to kill them)")
    parser.add_argument("--in-process", action="store_true",
                        help="with --again: judge the survivors in one process, pytest per "
                             "mutant over the plugin's tests (no mutmut runner; for two "
                             "cores); --modules limits it to those files' mutants")
    parser.add_argument("--resume", action="store_true",
                        help="go on with the last run in the staging directory, judging only "
                             "the mutants it did not reach (a run stopped at its time limit)")
    args = parser.parse_args(argv)
    if args.list:
        for name, target in known.items():
            print(f"{name:14} mutates {target.mutate:34} tests: {' '.join(target.tests)}")
        return 0
    if args.plugin is None:
        parser.error("name a plugin (or --list)")
    target = known.get(args.plugin) or directory_target(args.plugin)
    if target is None:
        parser.error(f"{args.plugin!r} is neither a plugin of this checkout ({', '.join(known)})"
                     " nor a plugin directory with src/PACKAGE/__init__.py and tests/")
    work = args.work or Path(tempfile.gettempdir()) / "megaplug-mutation" / target.name
    ensure_mutmut(args.python)
    started = time.monotonic()
    timed_out = False
    if args.again:
        if not (work / "pyproject.toml").exists():
            parser.error(f"no earlier run in {work} to judge again")
        if args.in_process:
            code, timed_out = judge_in_process(target, work, args.python, args.tests,
                                               args.time_limit, args.modules)
        else:
            code, timed_out = judge_again(target, work, args.python, args.tests,
                                          args.time_limit, args.jobs)
    elif args.resume:
        if not (work / "pyproject.toml").exists():
            parser.error(f"no earlier run in {work} to go on with")
        # mutmut keeps each judged mutant's result and runs only those it has none for; tests
        # added since are copied in, and mutmut collects which functions they call
        copy_tests(target, work, args.tests, roots=("", "mutants"))
        code, timed_out = run_mutmut(args.python, work, args.jobs, args.time_limit)
    elif not args.report_only:
        stage(target, work, args.modules, args.tests, f"--jobs {args.jobs}")
        code, timed_out = run_mutmut(args.python, work, args.jobs, args.time_limit)
        if code not in (0, None) and not timed_out and not collect(work):
            sys.stderr.write((work / "mutmut.log").read_text()[-4000:])
            return code
    text = report(target, work, args.python, timed_out,
                  None if args.report_only else time.monotonic() - started, args.again)
    (work / "report.txt").write_text(text)
    print(text, end="")
    print(f"(report: {work / 'report.txt'}; mutmut's log: {work / 'mutmut.log'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
