"""A setting means the same from every source: command line, YAML, JSON, caller defaults,
a checkpoint's saved arguments and the environment.

Property-based (hypothesis, ``derandomize=True``, no example database): random well-typed
values for random settings of the real flag table are given once on the command line and
once through another source, on top of the same minimal launch, and the two resolves
(the Megatron facade's ``parse_and_validate_args``, which ``megaplug resolve`` runs) must
end alike: the same resolved value for every setting, or the same problems. The YAML and
JSON files are written by megaplug's own writers (``to_yaml`` / ``to_json`` of the encoded
values, as ``megaplug resolve --given`` prints them), so the output formats round-trip too.

Each source takes what it can carry, as in Megatron: caller defaults fill only settings
that are still unset (declared default None); a checkpoint gives only the architecture
settings ``--use-checkpoint-args`` copies; the environment feeds ``RANK``, ``WORLD_SIZE``
and ``LOCAL_RANK``.

``MEGAPLUG_ROUND_TRIP_EXAMPLES`` scales the budget (examples of the first property; the
others run a fraction of it). The default keeps the file under ~30 s on a 2-core machine.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from reliability_support import MINIMAL, resolve_environment

import megaplug
from megaplug.megatron import _checkpoint
from megaplug._options import choice_name
from megaplug.values._encoding import encode, to_json
from megaplug.values._types import float_or_infinity
from megaplug.sources._files import to_yaml
from megaplug.megatron import ConfigError, parse_and_validate_args

DEFAULT_EXAMPLES = 80
EXAMPLES = int(os.environ.get("MEGAPLUG_ROUND_TRIP_EXAMPLES", DEFAULT_EXAMPLES))
#: No shrinking: each example resolves several times, and shrinking one that fails would
#: take many minutes; the failure is reported as drawn.
SETTINGS = dict(deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck),
                phases=(Phase.explicit, Phase.reuse, Phase.generate))

_KERNEL, _ = megaplug.load([])
_TABLE = _KERNEL.table
#: Read a checkpoint, or change what the run reads: not settings to give at random.
_LEFT_OUT = {"load", "pretrained_checkpoint", "use_checkpoint_args", "yaml_cfg",
             "use_mp_args_from_checkpoint_args"}
_SIMPLE_TYPES = (int, float, str, None, float_or_infinity)

#: Counts of what ran, by source, for docs/reliability.md.
RUNS: dict[str, int] = {}


def _enum_of(spec: Any) -> Any:
    return getattr(spec.type, "__megaplug_enum__", None)


def _simple(spec: Any) -> bool:
    """A setting whose values this test can draw: a plain type, choices, or a switch."""
    if spec.kind != "flag" or spec.dest in _LEFT_OUT or len(_TABLE.by_dest[spec.dest]) > 1 \
            and spec.action not in ("store_true", "store_false", "boolean_optional"):
        return False
    if spec.action in ("store_true", "store_false", "boolean_optional"):
        return True
    if spec.action != "store" or spec.nargs not in (None, "+", "*"):
        return False
    return spec.type in _SIMPLE_TYPES or _enum_of(spec) is not None


_POOL = sorted({spec.dest for spec in _TABLE if _simple(spec)})
#: Settings caller defaults can set: unset (None) unless given.
_UNSET_POOL = [dest for dest in _POOL if _TABLE.by_dest[dest][0].default is None]
_MINIMAL_DESTS = {_TABLE.lookup(token).dest for token in MINIMAL if token.startswith("--")}
_CHECKPOINT_POOL = [name for name in (*_checkpoint.FILL_IF_UNSET, *_checkpoint.FORCED)
                    if name in _POOL]

#: Text a command line, YAML or JSON could each read differently (a number, a boolean,
#: null, an octal, a time) -- a str setting keeps it as text from every source.
TRICKY_TEXT = st.sampled_from(["x", "1e3", "010", "0o17", "true", "null", "~", "inf", "nan",
                               "1:20", "a b", "ünï", "", "-5", "0x1F", ".5", "Yes"])


def _values_for(spec: Any) -> st.SearchStrategy[Any]:
    """Well-typed values of one setting (lists for a setting taking several)."""
    if spec.action == "boolean_optional":
        return st.booleans()
    if spec.action in ("store_true", "store_false"):  # what its spellings can set
        return st.sampled_from(sorted({s.const for s in _TABLE.by_dest[spec.dest]}))
    if spec.choices is not None:
        one: st.SearchStrategy[Any] = st.sampled_from(spec.choices)
    elif spec.type is int:
        one = st.one_of(st.integers(0, 8), st.integers(-(2**40), 2**40))
    elif spec.type is float:
        one = st.one_of(st.integers(-4, 4).map(float),
                        st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False))
    elif spec.type is float_or_infinity:
        one = st.one_of(st.integers(0, 4).map(float), st.floats(0, 1e6),
                        st.just(float("inf")))
    else:
        one = TRICKY_TEXT
    if spec.nargs in ("+", "*"):
        listed = st.lists(one, min_size=1, max_size=3)
        if spec.choices is None and spec.type in (str, None):  # a list item is never a flag
            listed = st.lists(one.filter(lambda text: not text.startswith("-")),
                              min_size=1, max_size=3)
        return listed
    return one


def configurations(pool: list[str], max_size: int = 3) -> st.SearchStrategy[dict[str, Any]]:
    return st.lists(st.sampled_from(pool), min_size=1, max_size=max_size, unique=True).flatmap(
        lambda dests: st.fixed_dictionaries(
            {dest: _values_for(_TABLE.by_dest[dest][0]) for dest in dests}))


# -- giving a configuration through each source -------------------------------------------

def _text(value: Any) -> str:
    """A value as typed on a command line (Python's float repr reads back exactly)."""
    return choice_name(value) if not isinstance(value, (bool, int, float)) else repr(value)


def command_line(config: dict[str, Any]) -> list[str]:
    """``config`` as flags; a switch at its default value is left out."""
    argv: list[str] = []
    for dest, value in config.items():
        specs = _TABLE.by_dest[dest]
        spec = specs[0]
        if spec.action in ("store_true", "store_false"):
            argv.append(next(s for s in specs if s.const == value).option_strings[0])
        elif spec.action == "boolean_optional":
            option = spec.option_strings[0]
            argv.append(option if value else "--no-" + option[2:])
        elif isinstance(value, list):
            argv += [spec.option_strings[0], *map(_text, value)]
        else:
            argv.append(f"{spec.option_strings[0]}={_text(value)}")
    return argv


def _without(argv: list[str], dests: set[str]) -> list[str]:
    """``argv`` (flag, value pairs) without the flags of ``dests``."""
    kept: list[str] = []
    for flag, value in zip(argv[::2], argv[1::2]):
        if _TABLE.lookup(flag).dest not in dests:
            kept += [flag, value]
    return kept


def loosened(config: dict[str, Any], loose: bool) -> dict[str, Any]:
    """With ``loose``, each whole float as an int (``lr: 1``): a file, a caller or a
    checkpoint may hold one, and the setting's type makes it the float again."""
    def one(value: Any) -> Any:
        if isinstance(value, list):
            return [one(item) for item in value]
        return int(value) if loose and isinstance(value, float) and value.is_integer() else value

    return {dest: one(value) for dest, value in config.items()}


def outcome(argv: list[str], *, defaults: dict[str, Any] | None = None,
            environ: dict[str, str] | None = None, ignore: tuple[str, ...] = ()) -> Any:
    """How a resolve ends: ("ok", every value as strict JSON text, so that types count:
    ``1`` is not ``1.0``) or ("problems", the messages)."""
    try:
        namespace = parse_and_validate_args(argv=argv, args_defaults=defaults,
                                            environ=environ or {}, torch_types=False,
                                            register=False)
    except ConfigError as error:
        return "problems", sorted({(p.plugin, p.message) for p in error.problems})
    return "ok", to_json({key: encode(value) for key, value in vars(namespace).items()
                          if key not in ignore}, sort_keys=True)


def _count(source: str, result: Any) -> None:
    RUNS[f"{source} {result[0]}"] = RUNS.get(f"{source} {result[0]}", 0) + 1


@pytest.fixture(autouse=True, scope="module")
def _clean_environment() -> Any:
    with resolve_environment():
        yield


# -- the properties ---------------------------------------------------------------------

@settings(max_examples=EXAMPLES, **SETTINGS)
@given(config=configurations(_POOL), loose=st.booleans())
def test_command_line_yaml_and_json_agree(tmp_path_factory: Any, config: dict[str, Any],
                                          loose: bool) -> None:
    base = _without(MINIMAL, set(config))
    expected = outcome([*base, *command_line(config)])
    _count("command line", expected)
    directory = tmp_path_factory.mktemp("round-trip")
    encoded = {dest: encode(value) for dest, value in loosened(config, loose).items()}
    for form, text in (("yaml", to_yaml(encoded)), ("json", to_json(encoded))):
        path = directory / f"settings.{form}"
        path.write_text(text)
        got = outcome(["--config", str(path), *base])
        _count(form, got)
        assert got == expected, (form, text)


@settings(max_examples=max(EXAMPLES // 2, 10), **SETTINGS)
@given(config=configurations(_UNSET_POOL), loose=st.booleans())
def test_caller_defaults_agree_with_the_command_line(config: dict[str, Any], loose: bool) -> None:
    """Megatron's ``args_defaults`` (``megaplug resolve --defaults``) fill unset settings."""
    base = _without(MINIMAL, set(config))
    # whether --global-batch-size was on the command line is what Megatron records there
    given_on_command_line = ("_is_global_batch_size_explicitly_specified",)
    expected = outcome([*base, *command_line(config)], ignore=given_on_command_line)
    _count("command line", expected)
    # as --defaults carries them: JSON values (enums by name, non-finite floats as text)
    got = outcome(base, defaults={dest: encode(value)
                                  for dest, value in loosened(config, loose).items()},
                  ignore=given_on_command_line)
    _count("defaults", got)
    assert got == expected


@settings(max_examples=max(EXAMPLES // 4, 10), **SETTINGS)
@given(rank=st.integers(0, 7), world=st.sampled_from([1, 2, 4, 8]),
       local_rank=st.one_of(st.none(), st.integers(0, 7)))
def test_the_environment_agrees_with_files_and_the_command_line(
        tmp_path_factory: Any, rank: int, world: int, local_rank: int | None) -> None:
    environ = {"RANK": str(rank), "WORLD_SIZE": str(world)}
    config: dict[str, Any] = {"rank": rank, "world_size": world}
    if local_rank is not None:
        environ["LOCAL_RANK"] = str(local_rank)
        config["local_rank"] = local_rank
    expected = outcome(MINIMAL, environ=environ)
    _count("environment", expected)
    path = tmp_path_factory.mktemp("round-trip") / "settings.yaml"
    path.write_text(to_yaml(config))
    got = outcome(["--config", str(path), *MINIMAL])
    _count("yaml", got)
    assert got == expected
    if local_rank is not None:
        got = outcome([*MINIMAL, f"--local-rank={local_rank}"], environ={
            "RANK": str(rank), "WORLD_SIZE": str(world)})
        _count("command line", got)
        assert got == expected


torch = pytest.importorskip("torch")


def _write_checkpoint(root: Path, saved: argparse.Namespace) -> None:
    path = root / "iter_0000010" / "mp_rank_00"
    path.mkdir(parents=True)
    torch.save({"args": saved, "iteration": 10, "checkpoint_version": 3.0},
               path / "model_optim_rng.pt")
    (root / _checkpoint.TRACKER_FILENAME).write_text("10")


@settings(max_examples=EXAMPLES, **SETTINGS)
@given(config=configurations(_CHECKPOINT_POOL, max_size=4), loose=st.booleans())
def test_a_checkpoints_saved_arguments_agree_with_the_command_line(
        tmp_path_factory: Any, config: dict[str, Any], loose: bool) -> None:
    """``--use-checkpoint-args``: the saved value, as Megatron's run pickled it."""
    root = tmp_path_factory.mktemp("checkpoint")
    _write_checkpoint(root, argparse.Namespace(**loosened(config, loose)))
    base = [*_without(MINIMAL, set(config)), "--load", str(root)]
    expected = outcome([*base, *command_line(config)], ignore=("use_checkpoint_args",))
    _count("command line", expected)
    got = outcome([*base, "--use-checkpoint-args"], ignore=("use_checkpoint_args",))
    _count("checkpoint", got)
    assert got == expected


def test_report_counts() -> None:
    """Print what ran (``-s`` shows it), for docs/reliability.md."""
    print("\nsource round trip:", ", ".join(f"{k}: {v}" for k, v in sorted(RUNS.items())))
    assert RUNS
