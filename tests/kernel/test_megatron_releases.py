"""The target Megatron release (issues 27, 36): which measured release a version selects,
where it came from, and each release's flag surface against the facts measured off that
release's own parser (``data/megatron-releases/parsers/RELEASE.json``, written by
scripts/gen_megatron_releases.py)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import megaplug
from megaplug import ConfigError, TargetEnvironment
from megaplug.environment import _releases
from megaplug.environment._environment import parse_assumed_package
from megaplug.environment._releases import RELEASES
from megaplug.values._encoding import encode

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data" / "megatron-releases"
MEASURED_LINES = [release for release in RELEASES
                  if (DATA / "parsers" / f"{release}.json").exists()]


def _generator():
    """scripts/gen_megatron_releases.py, whose reader gives a release's stored parser back."""
    spec = importlib.util.spec_from_file_location(
        "gen_megatron_releases", ROOT / "scripts" / "gen_megatron_releases.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GENERATOR = _generator()
#: Plugins that carry no Megatron flag (a third party's, the example ones).
NOT_MEGATRON = ("kitchen", "lora", "preflight", "memory")

_ACTIONS = {"_StoreAction": "store", "_StoreTrueAction": "store_true",
            "_StoreFalseAction": "store_false", "BooleanOptionalAction": "boolean_optional",
            "_StoreConstAction": "store_const", "_AppendAction": "append"}

CORE = ["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
        "--seq-length", "64", "--max-position-embeddings", "64", "--micro-batch-size", "1"]


def _target(version: str) -> TargetEnvironment:
    return TargetEnvironment(packages={"megatron_core": version})


def _table(version: str):
    return megaplug.load([], target=_target(version))[0].table


# -- which line a version selects ------------------------------------------------------------

def test_every_published_release_is_its_own_target():
    assert RELEASES == ("0.13.0", "0.13.1", "0.14.0", "0.15.0", "0.15.1", "0.15.2", "0.15.3",
                        "0.16.0", "0.16.1", "0.17.0", "0.17.1", "0.18.0", "0.18.2", "0.19.0",
                        "0.19.2", "main", "seed")
    for release in RELEASES:
        choice = _target(release).line_choice()
        assert (choice.line, choice.note, choice.warning, choice.problem) == (
            release, None, None, None)


@pytest.mark.parametrize("version, release, note", [
    ("0.17", "0.17.0", None), ("0.20.0", "main", None),
    ("0.17.0rc0", "0.17.0", "a pre-release of 0.17.0, resolved as that release"),
    ("0.19.0rc3", "0.19.0", "a pre-release of 0.19.0, resolved as that release"),
    ("0.19.1", "0.19.0", "0.19.1 was not measured: resolved as 0.19.0, the nearest earlier "
                         "measured release"),
    ("0.18.1", "0.18.0", "0.18.1 was not measured: resolved as 0.18.0, the nearest earlier "
                         "measured release"),
    ("0.19.7", "0.19.2", "0.19.7 was not measured: resolved as 0.19.2, the nearest earlier "
                         "measured release"),
    ("0.20.3", "main", "0.20.3 was not measured: resolved as main, the nearest earlier "
                       "measured release")])
def test_a_version_not_measured_is_the_nearest_earlier_release_and_says_so(
        version, release, note):
    choice = _target(version).line_choice()
    assert (choice.line, choice.note, choice.warning, choice.problem) == (
        release, note, None, None)
    if note:
        assert choice.describe() == f"{release} (megatron_core {version}, as stated; {note})"


def test_0_17_0_is_not_0_17_1():
    """The patch release's own flags and defaults (issue 36)."""
    old, new = _table("0.17.0"), _table("0.17.1")
    for flag in ("--verify-integrity", "--moe-hybridep-num-blocks-permute",
                 "--moe-hybridep-num-blocks-unpermute", "--moe-permute-fusion-into-hybridep"):
        assert flag in new.by_option and flag not in old.by_option
    assert old.by_option["--fp4-param-gather"].dest == "fp4_param"
    assert new.by_option["--fp4-param-gather"].dest == "fp4_param_gather"
    assert old.by_option["--moe-hybridep-num-sms"].default == 16
    assert new.by_option["--moe-hybridep-num-sms"].default is None
    assert megaplug.resolve(CORE, target=_target("0.17.0")).async_strategy == "nvrx"
    assert megaplug.resolve(CORE, target=_target("0.17.1")).async_strategy == "mcore"


def test_a_newer_version_is_the_newest_release_with_a_warning():
    choice = _target("0.23.1").line_choice()
    assert choice.line == "seed" and choice.problem is None
    assert "megatron_core 0.23.1 (as stated) is newer than any release megaplug knows" in (
        choice.warning)
    resolved = megaplug.resolve(CORE, target=_target("0.23.1"))
    assert any("newer than any release" in str(warning) for warning in resolved.warnings)


@pytest.mark.parametrize("version, says", [
    ("0.12.0", "is older than megaplug supports"), ("0.9", "is older than megaplug supports"),
    ("banana", "is not a version"), ("1", "is not a version")])
def test_an_older_or_unparseable_version_is_a_problem_naming_the_range(version, says):
    with pytest.raises(ConfigError) as caught:
        megaplug.resolve(CORE, target=_target(version))
    messages = [str(problem) for problem in caught.value.problems]
    mine = [m for m in messages if says in m]
    assert len(mine) == 1, messages
    assert "supported: megatron_core 0.13.0 to 0.19.2, main (0.20.0) or seed" in mine[0]


def test_assume_takes_megatron_core_versions_and_line_names():
    assert parse_assumed_package("megatron_core=0.17.1") == ("megatron_core", "0.17.1")
    assert parse_assumed_package("megatron-core=main") == ("megatron_core", "main")
    assert parse_assumed_package("megatron_core=seed") == ("megatron_core", "seed")
    with pytest.raises(ValueError, match="is not a version"):
        parse_assumed_package("megatron_core=latest")


def test_rules_compare_releases_in_release_order():
    megatron = _target("0.17.1").megatron
    assert megatron.at_least("0.16.0") and megatron.at_least("0.17.1")
    assert not megatron.at_least("0.18.0") and megatron.before("0.18.0")
    assert megatron.between("0.16.0", "0.17.1") and not megatron.between("0.13.0", "0.17.0")
    assert _target("0.19.1").megatron.between("0.19.0", "0.19.0")  # the release in force
    assert _target("main").megatron.before("seed")
    with pytest.raises(ValueError, match="'0.17' is not a measured megatron_core release"):
        megatron.at_least("0.17")  # a condition names an exact release
    with pytest.raises(ValueError, match="not a measured megatron_core release"):
        megatron.before("0.99.0")


# -- where the version comes from --------------------------------------------------------------

@pytest.fixture()
def fresh_lookup(monkeypatch):
    _releases.forget_local_megatron()
    monkeypatch.delitem(sys.modules, "megatron.core", raising=False)
    monkeypatch.delitem(sys.modules, "megatron.core.package_info", raising=False)
    yield monkeypatch
    _releases.forget_local_megatron()


def _fake_megatron(site: Path, major: int, minor: int, patch: int) -> None:
    core = site / "megatron" / "core"
    core.mkdir(parents=True)
    (site / "megatron" / "__init__.py").write_text("")
    (core / "__init__.py").write_text("")
    (core / "package_info.py").write_text(
        f"MAJOR = {major}\nMINOR = {minor}\nPATCH = {patch}\nPRE_RELEASE = ''\n")


def test_the_installed_distribution_says_the_version(fresh_lookup, tmp_path):
    _fake_megatron(tmp_path, 0, 17, 1)
    (tmp_path / "megatron_core-0.17.1.dist-info").mkdir()
    fresh_lookup.setattr(sys, "path", [str(tmp_path), *sys.path])
    target = TargetEnvironment()
    assert target.release_line() == "0.17.1"
    assert target.release_source() == "0.17.1 (installed megatron-core)"


def test_a_source_checkout_is_read_from_its_package_info(fresh_lookup, tmp_path):
    _fake_megatron(tmp_path, 0, 20, 0)  # Megatron-LM main says 0.20.0
    fresh_lookup.setattr(sys, "path", [str(tmp_path), *sys.path])
    choice = TargetEnvironment().line_choice()
    assert (choice.line, choice.version) == ("main", "0.20.0")
    assert choice.source == f"megatron.core's package_info in {tmp_path / 'megatron'}"


def test_an_imported_megatron_core_says_its_version(fresh_lookup):
    info = type(sys)("megatron.core.package_info")
    info.__version__ = "0.15.2"
    fresh_lookup.setitem(sys.modules, "megatron.core", type(sys)("megatron.core"))
    fresh_lookup.setitem(sys.modules, "megatron.core.package_info", info)
    assert TargetEnvironment().release_source() == (
        "0.15.2 (imported megatron.core)")


def test_a_stated_version_wins_and_nothing_known_is_the_newest(fresh_lookup, tmp_path):
    _fake_megatron(tmp_path, 0, 17, 1)
    (tmp_path / "megatron_core-0.17.1.dist-info").mkdir()
    fresh_lookup.setattr(sys, "path", [str(tmp_path), *sys.path])
    assert _target("0.19.2").release_line() == "0.19.2"
    # nothing named megatron on the path: not the fake, nor a test folder another
    # module's conftest put there (plugins/*/tests holds a megatron/ folder of tier tests)
    fresh_lookup.setattr(sys, "path", [p for p in sys.path if p != str(tmp_path)
                                       and not os.path.isdir(os.path.join(p, "megatron"))])
    _releases.forget_local_megatron()
    assert TargetEnvironment().release_source() == (
        "seed (no megatron-core installed or stated: the newest, seed)")


# -- each line's flag surface against its own parser --------------------------------------------

def _measured(line: str) -> dict[str, dict]:
    return {fact["option_strings"][0]: fact for fact in GENERATOR.read_parser(line)}


def test_a_release_is_stored_as_edits_of_the_one_before():
    """Identical facts are stored once: a patch with the parser of the release before it
    stores no flag, and every release reads back whole."""
    for release in ("0.13.1", "0.15.1", "0.18.2", "0.19.2"):
        stored = json.loads((DATA / "parsers" / f"{release}.json").read_text())
        assert stored["edits"] == [{"keep": len(GENERATOR.read_parser(release))}]
    assert len(GENERATOR.read_parser("0.17.0")) == 700
    assert len(GENERATOR.read_parser("0.17.1")) == 704
    before, after = GENERATOR.read_parser("0.16.1"), GENERATOR.read_parser("0.17.0")
    assert GENERATOR.apply_edits(before, GENERATOR.parser_edits(before, after)) == after


def _facts_of(spec) -> dict:
    takes_value = spec.action in ("store", "append")
    return {"option_strings": list(spec.option_strings), "dest": spec.dest,
            "action": spec.action, "default": encode(spec.default),
            "choices": encode(list(spec.choices)) if spec.choices is not None else None,
            "nargs": spec.nargs if takes_value else 0,
            "const": encode(spec.const) if spec.action == "store_const" else None}


def _expected(fact: dict) -> dict:
    action = _ACTIONS[fact["action"]]
    return {"option_strings": fact["option_strings"], "dest": fact["dest"], "action": action,
            "default": fact["default"], "choices": fact["choices"],
            "nargs": fact["nargs"] if action in ("store", "append") else 0,
            "const": fact["const"] if action == "store_const" else None}


@pytest.mark.parametrize("line", MEASURED_LINES)
def test_each_line_has_exactly_its_releases_flags(line):
    measured = _measured(line)
    flags = {spec.primary: spec for spec in _table(line) if spec.kind == "flag" and (
        spec.plugin not in NOT_MEGATRON or spec.primary in measured)}
    assert sorted(set(flags) - set(measured)) == [], "flags the release does not have"
    assert sorted(set(measured) - set(flags)) == [], "flags of the release megaplug lacks"


@pytest.mark.parametrize("line", MEASURED_LINES)
def test_each_lines_flags_have_its_releases_facts(line):
    flags = {spec.primary: spec for spec in _table(line) if spec.kind == "flag"}
    differences = [(option, field, expected, _facts_of(flags[option])[field])
                   for option, fact in _measured(line).items()
                   for field, expected in _expected(fact).items()
                   if _facts_of(flags[option])[field] != expected]
    assert differences == []


def test_the_newest_line_is_megaplugs_own_declaration():
    seed = {spec.primary for spec in _table("seed") if spec.kind == "flag"}
    main = set(_measured("main"))
    seed_only = {line.strip() for line in (ROOT.parent / "shared" / "megatron" /
                                            "seed_only_flags.txt").read_text().split()}
    assert main <= seed
    assert seed - main - {"--kitchen-attention-backend"} <= seed_only | {
        spec.primary for spec in _table("seed") if spec.plugin in NOT_MEGATRON}


# -- the settings a resolve hands on ------------------------------------------------------------

def test_a_flag_the_target_lacks_is_unrecognized_and_says_where_it_exists():
    with pytest.raises(ConfigError) as caught:
        megaplug.resolve([*CORE, "--use-legacy-models"], target=_target("0.19.2"))
    (problem,) = [p for p in caught.value.problems if "--use-legacy-models" in str(p)]
    assert problem.message == "unrecognized argument --use-legacy-models in command line"
    assert problem.hint == ("it exists only in megatron_core 0.13.0, 0.13.1, 0.14.0, 0.15.0, "
                            "0.15.1, 0.15.2, 0.15.3, 0.16.0, 0.16.1, 0.17.0, 0.17.1, not in the "
                            "target's release")


def test_a_flag_only_an_older_release_has_resolves_there():
    resolved = megaplug.resolve([*CORE, "--use-legacy-models", "--ckpt-format", "torch"],
                                target=_target("0.15.3"))
    assert resolved.use_legacy_models is True


@pytest.mark.parametrize("line, missing, present", [
    ("main", "original_max_position_embeddings", "moe_router_topk"),
    ("0.19.0", "original_max_position_embeddings", "stream_ckpt_dequant"),
    ("0.17.1", "stream_ckpt_dequant", "tokenizer_metadata"),
    ("0.17.0", "verify_integrity", "fp4_param"),
])
def test_the_result_holds_the_target_lines_settings(line, missing, present):
    resolved = megaplug.resolve(CORE, target=_target(line))
    assert missing not in resolved and present in resolved


@pytest.mark.parametrize("line, dest, value", [
    ("0.19.0", "muon_tp_mode", "blockwise"), ("seed", "muon_tp_mode", "duplicated"),
    ("0.19.2", "rl_generation_lag", 0), ("0.15.0", "eval_interval", 1000),
    ("seed", "eval_interval", None), ("0.17.1", "data_parallel_sharding_strategy", "no_shard"),
    ("0.17.0", "moe_hybridep_num_sms", 16), ("0.17.1", "moe_hybridep_num_sms", None),
])
def test_defaults_are_the_target_lines(line, dest, value):
    resolved = megaplug.resolve(CORE, target=_target(line))
    assert resolved[dest] == value
    assert resolved.source(dest).source == "default"


def test_the_facade_hands_megatron_only_the_target_lines_keys():
    from megaplug.megatron import parse_and_validate_args

    args = parse_and_validate_args(argv=CORE, target=_target("main"), torch_types=False,
                                   register=False, print_arguments=False)
    assert not hasattr(args, "original_max_position_embeddings")  # a seed-only setting
    seed = parse_and_validate_args(argv=CORE, target=_target("seed"), torch_types=False,
                                   register=False, print_arguments=False)
    assert seed.original_max_position_embeddings is None


def test_the_cli_states_the_line_and_takes_assume_everywhere():
    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "megaplug", *args], capture_output=True,
                              text=True)

    listed = run("list", "--assume", "megatron_core=0.15.2")
    assert "target Megatron: 0.15.2 (as stated)" in listed.stdout
    rows = json.loads(run("list", "--json", "--assume", "megatron_core=0.19.1").stdout)
    note = "0.19.1 was not measured: resolved as 0.19.0, the nearest earlier measured release"
    assert {json.dumps(row["target_megatron"]) for row in rows} == {json.dumps({
        "line": "0.19.0", "version": "0.19.1", "source": "as stated", "note": note,
        "described": f"0.19.0 (megatron_core 0.19.1, as stated; {note})", "warning": None,
        "problem": None})}
    newer = json.loads(run("list", "--json", "--assume", "megatron_core=0.31").stdout)
    assert newer[0]["target_megatron"]["line"] == "seed"
    assert "0.31" in newer[0]["target_megatron"]["warning"]
    flags = run("flags", "legacy-models", "--assume", "megatron_core=0.15")
    assert flags.stdout.startswith("[model] --use-legacy-models -> use_legacy_models")
    assert run("flags", "legacy-models").stdout == ""  # the newest line has no such flag
    schema = json.loads(run("schema", "--assume", "megatron_core=0.17.1").stdout)
    assert "use_legacy_models" in json.dumps(schema)
    explained = run("explain", "muon_tp_mode", "--assume", "megatron_core=0.19.2", "--", *CORE)
    assert "megatron:  0.19.2 (as stated)" in explained.stdout
    assert 'value:     "blockwise"' in explained.stdout
    elsewhere = run("explain", "original_max_position_embeddings", "--assume",
                    "megatron_core=main", "--", *CORE)
    assert elsewhere.returncode == 2
    assert elsewhere.stderr == (
        "megaplug explain: original_max_position_embeddings exists only in megatron_core seed, "
        "not in the target's release (main (as stated))\n")


def test_019_dequantizes_tensorwise_fp8_checkpoints_upfront():
    fp8 = [*CORE, "--bf16", "--fp8-format", "hybrid", "--fp8-recipe", "tensorwise"]
    resolved = megaplug.resolve(fp8, target=_target("0.19.2"))
    assert resolved.stream_ckpt_dequant is False
    assert resolved.source("stream_ckpt_dequant").source == "derived"
    assert any("upfront dequantize pass" in str(w) for w in resolved.warnings)
    assert megaplug.resolve([*fp8[:-1], "delayed"], target=_target("0.19.2")).stream_ckpt_dequant
    newest = megaplug.resolve(fp8, target=_target("seed"))
    assert "stream_ckpt_dequant" not in newest
    assert not any("dequantize" in str(w) for w in newest.warnings)


@pytest.mark.parametrize("line, given, value", [
    ("0.19.0", ["--rl-generation-lag", "2"], 2), ("seed", ["--rl-generation-lag", "2"], 2.0),
    ("0.15.3", ["--rampup-batch-size", "4", "4", "100"], ["4", "4", "100"]),  # untyped then
    ("0.16.0", ["--rampup-batch-size", "4", "4", "100"], [4, 4, 100]),
])
def test_a_flags_type_is_the_target_lines(line, given, value):
    resolved = megaplug.resolve([*CORE, *given, "--global-batch-size", "8"],
                                target=_target(line))
    dest = given[0][2:].replace("-", "_")
    assert resolved[dest] == value
    assert [type(item) for item in resolved[dest]] == [type(item) for item in value] if (
        isinstance(value, list)) else type(resolved[dest]) is type(value)


PLAIN = {"int", "float", "str", "bool", None}


@pytest.mark.parametrize("line", MEASURED_LINES)
def test_each_lines_plain_types_are_its_releases(line):
    """A builtin ``type=`` (or none) is the release's; megaplug's own converters (enums,
    dtypes, patterns) stand for the release's custom ones and are judged by the tier."""
    flags = {spec.primary: spec for spec in _table(line) if spec.kind == "flag"}
    differences = [(option, fact["type"], flags[option].type_name)
                   for option, fact in _measured(line).items()
                   if fact["type"] in PLAIN and flags[option].type_name in PLAIN
                   and fact["type"] != flags[option].type_name]
    assert differences == []


@pytest.mark.parametrize("line", MEASURED_LINES)
def test_each_settings_default_is_its_releases_first_declaration(line):
    """Several flags may set one setting (0.16's --enable- / --disable-chunked-prefill); as
    in argparse, the first one declared gives its default."""
    facts = GENERATOR.read_parser(line)
    expected: dict[str, object] = {}
    for fact in facts:
        expected.setdefault(fact["dest"], fact["default"])
    table = _table(line)
    found = {dest: encode(table.by_dest[dest][0].default) for dest in expected}
    assert {dest: (found[dest], value) for dest, value in expected.items()
            if found[dest] != value} == {}


def test_a_releases_flag_another_active_plugin_declares_stays_that_plugins():
    """An extra flag of a release's is added only where no active plugin declares it."""
    from megaplug._options import FlagSpec
    from megaplug._registry import FlagTable
    from megaplug.environment import ReleaseData
    from megaplug.environment._narrow import narrow

    extra = {"option_strings": ["--kitchen-config-file"], "dest": "kitchen_config_file",
             "action": "store", "type": "str", "default": None, "choices": None, "nargs": None,
             "const": None, "releases": [["0.13.0", "0.13.1"]]}
    data = {"package": "megatron_core", "releases": ["0.13.0", "0.13.1", "seed"],
            "extra": [extra]}
    table = FlagTable.assemble(
        [FlagSpec("kitchen_config_file", "kitchen", option_strings=("--kitchen-config-file",),
                  type=str, help="kitchen's own")],
        release_data={"precision": ReleaseData(data)})
    narrowed = narrow(table, {"megatron_core": "0.13.1"})
    assert [spec.help for spec in narrowed.by_dest["kitchen_config_file"]] == ["kitchen's own"]
    bare = FlagTable.assemble(
        [FlagSpec("num_layers", "model", option_strings=("--num-layers",), type=int)],
        release_data={"kitchen": ReleaseData(data)})
    narrowed = narrow(bare, {"megatron_core": "0.13.0"})
    assert [spec.help for spec in narrowed.by_dest["kitchen_config_file"]] == [
        "(only in 0.13.0 to 0.13.1)"]
    assert "kitchen_config_file" not in bare.by_dest  # the declared table is left as it was


def test_narrowing_returns_a_new_table_and_leaves_the_declared_specs_alone():
    from megaplug._kernel import Kernel
    from megaplug._plugins import PluginSet
    from megaplug.environment._narrow import narrow
    from megaplug.sources._selection import PluginSelection

    declared = Kernel(PluginSet(PluginSelection.from_environment({})),
                      lines={"megatron_core": "(none)"}).table
    sms = declared.by_option["--moe-hybridep-num-sms"]
    at_0170 = narrow(declared, {"megatron_core": "0.17.0"})
    assert at_0170 is not declared and at_0170.by_option["--moe-hybridep-num-sms"].default == 16
    assert sms.default is None and declared.by_option["--moe-hybridep-num-sms"] is sms
    assert "--verify-integrity" in declared.by_option
    assert "--verify-integrity" not in at_0170.by_option
    assert at_0170.elsewhere["--verify-integrity"].startswith("megatron_core 0.17.1, 0.18.0")
    assert at_0170.renamed["fp4_param_gather"] == ("fp4_param", False)


def test_kitchens_flags_before_0_16_need_no_kitchen_package_and_no_built_in_names_them():
    """0.13-0.15 declare --kitchen-config-file with or without the kitchen package: the
    kitchen plugin's release data says so, and the precision built-in's data names none."""
    precision = json.loads((ROOT / "src" / "megaplug" / "builtin" / "precision" /
                            "megatron_releases.json").read_text())
    text = json.dumps(precision)
    assert not [name for name in ("kitchen_config_file", "kitchen_recipe_number",
                                  "--kitchen-config-file", "--kitchen-recipe-number")
                if name in text]
    old, new = _table("0.15.3"), _table("0.16.0")
    assert old.by_option["--kitchen-recipe-number"].plugin == "kitchen"
    assert "--kitchen-recipe-number" not in new.by_option  # (kitchen not installed here)
    resolved = megaplug.resolve([*CORE, "--kitchen-recipe-number", "3"], target=_target("0.15.3"))
    assert resolved.kitchen_recipe_number == 3


@pytest.mark.parametrize("line", list(RELEASES))
def test_a_plain_launch_resolves_in_every_line(line):
    """Pre-flight included: 0.16's two separate SM counts (20, 16) are no disagreement."""
    resolved = megaplug.resolve(CORE, target=_target(line))
    assert resolved.num_layers == 2 and "preflight" in resolved.plugins


# -- a rule changing a setting the line names differently ------------------------------------

@pytest.mark.parametrize("version, key", [("0.16.1", "enable_gloo_process_groups"),
                                          ("0.19.2", "use_gloo_process_groups")])
def test_a_rules_change_reaches_the_lines_own_name_for_the_setting(version, key):
    """A fake process group turns Gloo groups off: in 0.16, whose flag sets
    enable_gloo_process_groups, that is the key the release's own rule sets."""
    environ = {"RANK": "0", "WORLD_SIZE": "1", "CUDA_DEVICE_MAX_CONNECTIONS": "1"}
    plain = megaplug.resolve(CORE, environ=environ, target=_target(version))
    faked = megaplug.resolve([*CORE, "--fake-process-group"], environ=environ,
                             target=_target(version))
    assert getattr(plain, key) is True and getattr(faked, key) is False
    assert faked.source(key).source == "derived"
    assert faked.source(key).rule == "derive_fake_process_group"
    other = {"enable_gloo_process_groups", "use_gloo_process_groups"} - {key}
    assert not other & set(faked.to_dict())
