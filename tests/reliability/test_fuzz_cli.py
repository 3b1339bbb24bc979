"""No command line makes ``megaplug resolve`` crash, and no plugin hook raises.

A hypothesis-driven fuzz test runs ``megaplug.cli.main(["resolve", "--", *argv])`` in
process on generated argument lists: a valid base configuration (the minimal launch or
one of the shared parity cases Megatron accepted) with tokens removed, replaced or
duplicated, plus real flags from the kernel's flag table with well-typed, wrongly typed,
missing, huge, empty and unicode values, unknown flags, and malformed pattern
expressions. Every run must end in exit 0 (printing JSON) or exit 2 (printing at least
one readable problem) and never in an uncaught exception. A problem saying a plugin
"raised" an exception counts as a failure too: the kernel only catches it, it is a bug
in that plugin.

``MEGAPLUG_FUZZ_EXAMPLES`` raises the budget (default below keeps the file under a minute).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reliability_support import MINIMAL, ok_cases, resolve_environment

import megaplug
from megaplug.cli import main

DEFAULT_EXAMPLES = 1000
EXAMPLES = int(os.environ.get("MEGAPLUG_FUZZ_EXAMPLES", DEFAULT_EXAMPLES))

PATTERN_FLAGS = ("--moe-layer-freq", "--no-rope-freq", "--linear-attention-freq",
                 "--window-attn-skip-freq", "--pipeline-model-parallel-layout",
                 "--hybrid-layer-pattern")

_KERNEL, _ = megaplug.load([])
FLAG_SPECS = [spec for spec in _KERNEL.table if spec.kind == "flag"]
BASES = [MINIMAL, *(case["argv"] for _, case in ok_cases())]

#: Counts of what the fuzz test ran, written to the report by the last test.
RUNS: dict[str, int] = {"examples": 0, "exit_0": 0, "exit_2": 0}

# -- strategies ------------------------------------------------------------------------

SMALL_INTS = st.sampled_from(["0", "1", "2", "3", "4", "6", "8", "16", "64", "-1", "-8"])
HUGE_NUMBERS = st.sampled_from(["99999999999999999999999999", "1e400", "-1e400",
                                "18446744073709551617", "1e-400", "nan", "inf", "-inf"])
ODD_TEXT = st.one_of(
    st.sampled_from(["", " ", "None", "null", "true", "False", "ü", "日本語", "\u202e", "0x10",
                     "1_000", "١٢", "--", "=", "-"]),
    st.text(max_size=12).filter(lambda t: not t.startswith("-p")),
)
PATTERN_TEXT = st.one_of(
    st.sampled_from([
        "([1]*3+[0]*1)*3", "[1,0]*2", "1", "0", "4", "[1]*10**9", "[1]*99999999999", "(",
        "[1,", "[1]+1", "[[1]]", "[1]*[2]", "1+", "*3", "[-1]*2", "([0]*3)*", "E|(t|)*3,m|L",
        "Ett|(tt|)*2,L", "M*-M*-", "M-E*", "|||", "t" * 300, "__import__('os')",
        "[1]*2;import os", "lambda: 0", "[x for x in ()]", "1e3", "[1.5]", "()", "[]",
    ]),
    st.text(alphabet="[]()+*,0123456789 |EtLmM-*", max_size=24),
)


def _value_for(spec: Any) -> st.SearchStrategy[str]:
    """A value that often converts (so hooks run), sometimes not."""
    options: list[st.SearchStrategy[str]] = [SMALL_INTS, HUGE_NUMBERS, ODD_TEXT]
    if spec.choices:
        names = [str(getattr(c, "name", c)) for c in spec.choices]
        options += [st.sampled_from(names)] * 3
    type_name = spec.type_name or ""
    if "float" in type_name:
        options.append(st.sampled_from(["0.0", "0.5", "1.0", "1e-4", "-0.1", "2.5"]))
    if "freq" in type_name or spec.primary in PATTERN_FLAGS:
        options += [PATTERN_TEXT] * 3
    if spec.dest.endswith(("_path", "_dir", "_file")):
        options.append(st.sampled_from(["/nonexistent/x", "/tmp", "."]))
    return st.one_of(*options)


@st.composite
def flag_with_values(draw: Any) -> list[str]:
    spec = draw(st.sampled_from(FLAG_SPECS))
    tokens = [draw(st.sampled_from(spec.option_strings))]
    if spec.action in ("store", "append"):
        if spec.nargs in (None, "?"):
            count = draw(st.sampled_from([1, 1, 1, 1, 0, 2]))  # sometimes missing / extra
        else:
            count = draw(st.integers(0, 4))
        tokens += [draw(_value_for(spec)) for _ in range(count)]
    elif draw(st.booleans()) and draw(st.booleans()):
        tokens.append(draw(ODD_TEXT))  # a value after a switch
    return tokens


@st.composite
def pattern_flag(draw: Any) -> list[str]:
    return [draw(st.sampled_from(PATTERN_FLAGS)), draw(PATTERN_TEXT)]


@st.composite
def unknown_flag(draw: Any) -> list[str]:
    name = draw(st.text(alphabet="abcdefghijklmnopqrstuvwxyz-_üß0", min_size=1, max_size=20))
    tokens = ["--" + name]
    if draw(st.booleans()):
        tokens.append(draw(ODD_TEXT))
    return tokens


@st.composite
def equals_form(draw: Any) -> list[str]:
    spec = draw(st.sampled_from(FLAG_SPECS))
    return [f"{spec.option_strings[0]}={draw(_value_for(spec))}"]


MUTATION = st.one_of(flag_with_values(), flag_with_values(), flag_with_values(),
                     pattern_flag(), unknown_flag(), equals_form(),
                     st.lists(ODD_TEXT, min_size=1, max_size=2))


@st.composite
def command_lines(draw: Any) -> list[str]:
    argv = list(draw(st.sampled_from(BASES)))
    for _ in range(draw(st.integers(0, 3))):  # damage the base: drop, replace, repeat
        if not argv:
            break
        index = draw(st.integers(0, len(argv) - 1))
        action = draw(st.sampled_from(["drop", "replace", "repeat"]))
        if action == "drop":
            del argv[index]
        elif action == "replace" and not argv[index].startswith("-"):
            argv[index] = draw(st.one_of(SMALL_INTS, HUGE_NUMBERS, ODD_TEXT))
        else:
            argv.insert(index, argv[index])
    for tokens in draw(st.lists(MUTATION, min_size=1, max_size=5)):
        argv += tokens
    return argv


WORLD = st.sampled_from([None, "1", "2", "4", "8", "16", "64", "3"])
#: The target the resolve assumes (stated, so the local GPU probe never runs).
TARGETS = st.sampled_from([
    ["--assume-device-capability", "none"],
    ["--assume-device-capability", "9.0", "--assume", "transformer_engine=2.17.1"],
    ["--assume-device-capability", "8.0", "--assume", "transformer_engine=1.13",
     "--assume", "apex=0.1"],
    ["--assume-device-capability", "10.0", "--assume", "transformer_engine=2.9",
     "--assume", "flash_attn=2.7.4"],
])

# -- the check -------------------------------------------------------------------------


def run_resolve(argv: list[str], world: str | None,
                target: list[str] = ("--assume-device-capability", "none"),  # type: ignore[assignment]
                ) -> tuple[int, str, str]:
    """``megaplug resolve TARGET -- ARGV`` in process; (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with resolve_environment(world), contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err):
        code = main(["resolve", *target, "--", *argv])
    return code, out.getvalue(), err.getvalue()


def check_outcome(argv: list[str], code: int, out: str, err: str) -> None:
    """Exit 0 with JSON, or exit 2 with readable problems and no plugin exception."""
    assert code in (0, 2), f"exit {code} for {argv!r}: {err[-2000:]}"
    assert "Traceback" not in err
    if code == 0:
        assert isinstance(json.loads(out), dict)
        return
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines, f"exit 2 without a message for {argv!r}"
    raised = [line for line in lines if " raised " in line]
    assert not raised, f"a plugin raised for {argv!r}:\n" + "\n".join(raised)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(argv=command_lines(), world=WORLD, target=TARGETS)
def test_resolve_never_crashes_and_no_plugin_raises(argv: list[str], world: str | None,
                                                    target: list[str]) -> None:
    code, out, err = run_resolve(argv, world, target)
    RUNS["examples"] += 1
    RUNS[f"exit_{code}"] = RUNS.get(f"exit_{code}", 0) + 1
    check_outcome(argv, code, out, err)


CONFIG_EXAMPLES = max(EXAMPLES // 5, 20)
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-10, 10**30),
                    st.floats(allow_nan=True, allow_infinity=True), ODD_TEXT, PATTERN_TEXT)
CONFIG_VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=8)


@settings(max_examples=CONFIG_EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(settings_=st.dictionaries(st.sampled_from([s.dest for s in FLAG_SPECS]), CONFIG_VALUES,
                                 min_size=1, max_size=6),
       form=st.sampled_from(["yaml", "json"]))
def test_config_files_never_crash_and_no_plugin_raises(tmp_path_factory: Any, settings_: dict,
                                                       form: str) -> None:
    """The same promise for values arriving through ``--config FILE`` (any JSON-able value)."""
    import yaml

    path = tmp_path_factory.mktemp("fuzz") / f"settings.{form}"
    text = (yaml.safe_dump(settings_) if form == "yaml"
            else json.dumps(settings_, allow_nan=True))
    path.write_text(text)
    code, out, err = run_resolve(["--config", str(path), *MINIMAL], "8")
    RUNS["config_files"] = RUNS.get("config_files", 0) + 1
    check_outcome([text], code, out, err)


def test_fuzz_budget_was_spent() -> None:
    """The property above really ran (and reached both outcomes)."""
    if RUNS["examples"] == 0:
        pytest.skip("run together with the fuzz test")
    print(f"fuzz: {RUNS}")
    assert RUNS["examples"] >= min(EXAMPLES, DEFAULT_EXAMPLES) * 0.9
    assert RUNS["exit_0"] > 0 and RUNS["exit_2"] > 0


# Hand-picked lines that once were or easily could be crashes; run on every test run.
REGRESSIONS = [
    [],
    ["--"],
    ["--num-layers"],
    ["--num-layers", "--hidden-size"],
    [*MINIMAL, "--num-layers", "0"],
    [*MINIMAL, "--hidden-size", "0"],
    [*MINIMAL, "--num-attention-heads", "0"],
    [*MINIMAL, "--micro-batch-size", "0"],
    [*MINIMAL, "--tensor-model-parallel-size", "0"],
    [*MINIMAL, "--pipeline-model-parallel-size", "0"],
    [*MINIMAL, "--context-parallel-size", "0"],
    [*MINIMAL, "--num-experts", "0"],
    [*MINIMAL, "--num-experts", "-4"],
    [*MINIMAL, "--global-batch-size", "0"],
    [*MINIMAL, "--seq-length", "0"],
    [*MINIMAL, "--num-layers", "99999999999999999999999999"],
    [*MINIMAL, "--moe-layer-freq", "[1]*10**9"],
    [*MINIMAL, "--num-experts", "4", "--moe-layer-freq", "[1]*3"],
    [*MINIMAL, "--hybrid-layer-pattern", ""],
    [*MINIMAL, "--pipeline-model-parallel-layout", ""],
    [*MINIMAL, "--lr", "nan"],
    [*MINIMAL, "--lr", "1e400"],
    [*MINIMAL, "--bf16", "--fp16"],
    [*MINIMAL, "--\u202e", "ü"],
]


@pytest.mark.parametrize("argv", REGRESSIONS, ids=range(len(REGRESSIONS)))
@pytest.mark.parametrize("world", [None, "8"])
def test_regression_command_lines(argv: list[str], world: str | None) -> None:
    code, out, err = run_resolve(argv, world)
    check_outcome(argv, code, out, err)
