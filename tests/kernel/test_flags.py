"""Declaring flags: dataclass markers and argparse calls, and single ownership."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Literal, Optional

import pytest
from toy_plugins import Argparsey, Backend, Clash, Core

from typing_extensions import Annotated

from megaplug import Computed, ConfigError, Flag, FromEnv, PluginInfo, hookimpl, options


def specs(kernel, dest):
    return kernel.table.by_dest[dest]


def test_dataclass_fields_become_flags_with_inferred_actions(make_kernel):
    kernel = make_kernel(Core())
    assert specs(kernel, "hidden_size")[0].type is int
    assert specs(kernel, "hidden_size")[0].option_strings == ("--hidden-size",)
    assert specs(kernel, "num_layers")[0].option_strings == ("--num-layers", "--layers")
    assert specs(kernel, "fusion")[0].action == "store_false"
    assert specs(kernel, "fusion")[0].option_strings == ("--no-fusion",)
    assert specs(kernel, "verbose")[0].action == "store_true"
    assert specs(kernel, "sizes")[0].nargs == "+"
    assert specs(kernel, "partial")[0].option_strings == ("--partial", "--no-partial")
    strings, kwargs = specs(kernel, "partial")[0].argparse_call()
    added = argparse.ArgumentParser().add_argument(*strings, **kwargs)
    assert isinstance(added, argparse.BooleanOptionalAction)
    assert specs(kernel, "backend")[0].choices == tuple(Backend)
    assert specs(kernel, "rank")[0].kind == "env"
    assert specs(kernel, "ffn_hidden_size")[0].kind == "computed"


def test_every_kind_of_flag_parses(make_kernel):
    kernel = make_kernel(Core(), Argparsey())
    resolved = kernel.resolve([
        "--hidden-size", "8", "--layers", "3", "--no-fusion", "--verbose", "--backend", "flash",
        "--sizes", "1", "2", "3", "--pair", "4", "5", "--paths", "--no-partial", "--block", "6",
        "--secret-knob", "7", "--mode", "b", "--seed", "9", "--no-shuffle", "--tag", "x",
        "--tag", "y", "--no-flip", "--recipe", "3",
    ], environ={})
    assert resolved.hidden_size == 8 and resolved.num_layers == 3
    assert resolved.fusion is False and resolved.verbose is True
    assert resolved.backend is Backend.flash
    assert resolved.sizes == [1, 2, 3] and resolved.pair == [4, 5] and resolved.paths == []
    assert resolved.partial is False and resolved.block == 6 and resolved.secret_knob == 7
    assert resolved.mode == "b" and resolved.seed == 9 and resolved.shuffle is False
    assert resolved.tag == ["x", "y"] and resolved.flip is False and resolved.recipe == 3
    assert resolved.source("num_layers").detail == "--layers"


def test_hidden_flags_are_left_out_of_help(make_kernel):
    help_text = make_kernel(Core(), Argparsey()).parser().format_help()
    assert "--hidden-size" in help_text and "--secret-knob" not in help_text
    assert "plugin core" in help_text and "plugin argparsey" in help_text


def test_two_plugins_declaring_one_flag_is_an_error_naming_both(make_kernel):
    kernel = make_kernel(Core(), Clash())
    with pytest.raises(ConfigError) as info:
        kernel.resolve([], environ={})
    messages = [str(p) for p in info.value.problems]
    assert any("'core'" in m and "'clash'" in m and "lr" in m for m in messages), messages


def test_type_errors_are_all_collected(make_kernel):
    kernel = make_kernel(Core())
    with pytest.raises(ConfigError) as info:
        kernel.resolve(["--hidden-size", "wide", "--block", "3", "--backend", "fast",
                        "--mode", "c"], environ={})
    text = str(info.value)
    assert "--hidden-size: invalid int value 'wide'" in text
    assert "--block: invalid even_int value '3' (must be even)" in text
    assert "--backend: invalid Backend value 'fast'" in text and "flash, fused, auto" in text
    assert "--mode: invalid choice 'c'" in text
    assert len(info.value.problems) == 4


def test_unknown_flag_gets_a_suggestion(make_kernel):
    with pytest.raises(ConfigError) as info:
        make_kernel(Core()).resolve(["--hiden-size", "3"], environ={})
    problem = info.value.problems[0]
    assert problem.message == "unrecognized argument --hiden-size in command line"
    assert problem.hint == "did you mean --hidden-size?"


def test_mutually_exclusive_flags(make_kernel):
    with pytest.raises(ConfigError, match="--recipe and --recipe-file cannot be used together"):
        make_kernel(Core(), Argparsey()).resolve(["--recipe", "1", "--recipe-file", "x"],
                                                 environ={})


def test_deprecated_spelling_warns_and_migrates_with_provenance(make_kernel):
    resolved = make_kernel(Core()).resolve(["--old-lr", "0.5"], environ={})
    assert resolved.lr == 0.5 and "old_lr" not in resolved
    assert any("--old-lr is deprecated: use --lr" in str(w) for w in resolved.warnings)
    assert (resolved.source("lr").describe()
            == "normalized by core from old_lr (--old-lr is deprecated)")


@dataclass
class OtherRankReader:
    my_rank: Annotated[int, FromEnv("RANK")] = 0


def test_two_plugins_reading_one_environment_variable_is_an_error(make_kernel):
    class Reader:
        megaplug_plugin = PluginInfo(name="reader")

        @hookimpl
        def add_args(self, flags):
            flags.add_options(OtherRankReader)

    with pytest.raises(ConfigError, match="plugins 'core' and 'reader' both read the "
                                          "environment variable RANK"):
        make_kernel(Core(), Reader()).resolve([], environ={})


def test_options_decorator_makes_a_cheap_dataclass():
    import dataclasses

    from megaplug import options

    @options
    class Small:
        width: Annotated[int, Flag(help="Width.")] = 4
        names: Annotated[list, Flag(nargs="+", help="Names.")] = dataclasses.field(
            default_factory=list)

    assert dataclasses.is_dataclass(Small)
    made = Small(width=8)
    assert made.width == 8 and made.names == [] and made == Small(width=8) and made != Small()
    assert repr(made) == "Small(width=8, names=[])"
    with pytest.raises(TypeError, match="unknown settings: depth"):
        Small(depth=3)


def test_an_options_class_becomes_a_dataclass_when_dataclasses_first_looks_at_it():
    import dataclasses

    from megaplug import options

    @options
    class Base:
        width: int = Flag(default=4, help="Width.")
        names: list = Flag(nargs="+", default=["a"], help="Names.")

    @options
    class Child(Base):
        depth: int = Flag(default=2, help="Depth.")
        width: int = Flag(default=8, help="Width.")  # redeclared: keeps its place

    first, second = Child(), Child()
    first.names.append("b")  # a list default is copied for each instance
    assert second.names == ["a"] and Child().width == 8
    assert [f.name for f in dataclasses.fields(Child)] == ["width", "names", "depth"]
    assert dataclasses.is_dataclass(Base) and dataclasses.asdict(second) == {
        "width": 8, "names": ["a"], "depth": 2}
    assert [field.name for field in dataclasses.fields(Child())] == ["width", "names", "depth"]


# -- markers written as the field's default ------------------------------------------------

@options
class AnnotatedForm:
    width: Annotated[Optional[int], Flag(help="Width.")] = None
    depth: Annotated[int, Flag("--depth", "--layers", help="Depth.")] = 2
    fused: Annotated[bool, Flag("--no-fused", help="Unfuse.")] = True
    loud: Annotated[bool, Flag(help="Talk.")] = False
    backend: Annotated[Backend, Flag(help="Backend.")] = Backend.auto
    sizes: Annotated[Optional[list[int]], Flag(help="Sizes.")] = None
    mode: Annotated[Literal["a", "b"], Flag(help="Mode.")] = "a"
    rank: Annotated[int, FromEnv("RANK", help="Rank.")] = 0
    twice: Annotated[Optional[int], Computed("2 x width.")] = None


@options
class DefaultForm:
    width: Optional[int] = Flag(default=None, help="Width.")
    depth: int = Flag("--depth", "--layers", default=2, help="Depth.")
    fused: bool = Flag("--no-fused", default=True, help="Unfuse.")
    loud: bool = Flag(default=False, help="Talk.")
    backend: Backend = Flag(default=Backend.auto, help="Backend.")
    sizes: Optional[list[int]] = Flag(default=None, help="Sizes.")
    mode: Literal["a", "b"] = Flag(default="a", help="Mode.")
    rank: int = FromEnv("RANK", help="Rank.", default=0)
    twice: Optional[int] = Computed("2 x width.", default=None)


def _comparable(spec):
    fields = {name: getattr(spec, name) for name in spec.__slots__}
    if spec.choices and isinstance(spec.choices[0], Backend):
        fields["type"] = spec.type.__name__  # enum parsers are made per declaration
    return fields


def test_markers_as_defaults_declare_exactly_what_annotated_markers_declare():
    from megaplug._options import specs_from_options

    annotated = specs_from_options(AnnotatedForm, "p")
    as_defaults = specs_from_options(DefaultForm, "p")
    assert [_comparable(s) for s in as_defaults] == [_comparable(s) for s in annotated]
    assert DefaultForm() == DefaultForm(width=None, depth=2, fused=True, loud=False,
                                        backend=Backend.auto, sizes=None, mode="a", rank=0,
                                        twice=None)
    assert DefaultForm.depth == 2  # the class keeps the plain default, not the marker


def test_a_marker_without_default_defaults_like_argparse():
    from megaplug._options import specs_from_options

    @options
    class Implicit:
        count: Optional[int] = Flag(help="Unset unless given.")
        loud: bool = Flag(help="A store_true flag.")
        quiet: bool = Flag("--no-quiet", action="store_false", help="A store_false flag.")
        counted: int = Computed("derived")

    by_dest = {s.dest: s for s in specs_from_options(Implicit, "p")}
    assert by_dest["count"].default is None and by_dest["count"].action == "store"
    assert by_dest["loud"].default is False and by_dest["loud"].action == "store_true"
    assert by_dest["quiet"].default is True and by_dest["quiet"].action == "store_false"
    assert by_dest["counted"].default is None
    assert Implicit() == Implicit(count=None, loud=False, quiet=True, counted=None)


def test_a_mutable_marker_default_is_copied_per_instance():
    @options
    class Lists:
        names: list[str] = Flag(default=["a"], help="Names.")

    first, second = Lists(), Lists()
    first.names.append("b")
    assert second.names == ["a"] and Lists().names == ["a"]


def test_a_field_cannot_carry_markers_both_ways():
    with pytest.raises(TypeError, match="Both.width: declare its markers either in Annotated"):
        @options
        class Both:
            width: Annotated[int, Flag(help="x")] = Flag(default=1, help="y")


def test_a_plain_dataclass_may_write_markers_as_defaults(make_kernel):
    @dataclass
    class Plain:
        width: int = Flag(default=3, help="Width.")
        loud: bool = Flag(help="Talk.")

    class Uses:
        megaplug_plugin = PluginInfo(name="uses")

        @hookimpl
        def add_args(self, flags):
            flags.add_options(Plain)

    kernel = make_kernel(Uses())
    assert kernel.resolve([], environ={}).width == 3
    resolved = kernel.resolve(["--width", "5", "--loud"], environ={})
    assert resolved.width == 5 and resolved.loud is True


def test_markers_compare_hash_and_show_by_value():
    assert Flag("--x", help="X.") == Flag("--x", help="X.")
    assert Flag("--x", help="X.") != Flag("--y", help="X.")
    assert hash(FromEnv("RANK")) == hash(FromEnv("RANK"))
    assert Computed("a") != FromEnv("a")
    assert (repr(Flag("--x", help="X.", default=3))
            == "Flag(option_strings=('--x',), help='X.', default=3)")
    with pytest.raises(ValueError, match="unknown action 'stor'"):
        Flag(action="stor")


def test_an_options_class_needs_its_settings_without_defaults():
    @options
    class Required:
        width: int

    assert Required(width=3).width == 3
    with pytest.raises(TypeError, match="Required\\(\\) missing setting 'width'"):
        Required()


class _BadArgparse:
    megaplug_plugin = PluginInfo(name="bad")

    def __init__(self, **kwargs):
        self.kwargs = kwargs

    @hookimpl
    def add_args(self, flags):
        flags.add_argument("--odd", **self.kwargs)


@pytest.mark.parametrize("kwargs, message", [
    ({"action": "extend"}, "unsupported action 'extend' for \\('--odd',\\)"),
    ({"version": "1.0"}, "unsupported add_argument options \\['version'\\] for"),
])
def test_an_argparse_call_megaplug_cannot_honour_is_refused(make_kernel, kwargs, message):
    kernel = make_kernel(_BadArgparse(**kwargs))
    with pytest.raises(ConfigError, match=message):
        kernel.resolve([], environ={})
