"""Small plugins the kernel tests are written against (nothing Megatron-specific)."""

from __future__ import annotations

import argparse
import enum
from dataclasses import dataclass
from typing import Optional

from typing_extensions import Annotated

from megaplug import Computed, Flag, FromEnv, PluginInfo, Problem, Requirement, hookimpl


class Backend(enum.Enum):
    flash = 1
    fused = 2
    auto = 3


def even_int(text: str) -> int:
    value = int(text)
    if value % 2:
        raise ValueError("must be even")
    return value


@dataclass
class CoreOptions:
    hidden_size: Annotated[Optional[int], Flag(help="Width of the model.")] = None
    num_layers: Annotated[int, Flag("--num-layers", "--layers", help="Depth.")] = 2
    lr: Annotated[float, Flag(help="Learning rate.")] = 1e-3
    fusion: Annotated[bool, Flag("--no-fusion", help="Disable fusion.")] = True
    verbose: Annotated[bool, Flag(help="Talk more.")] = False
    backend: Annotated[Backend, Flag(help="Attention backend.")] = Backend.auto
    sizes: Annotated[Optional[list[int]], Flag(help="Some sizes.")] = None
    pair: Annotated[Optional[list[int]], Flag(nargs=2, help="Exactly two.")] = None
    paths: Annotated[Optional[list[str]], Flag(nargs="*", help="Zero or more paths.")] = None
    partial: Annotated[bool, Flag(action="boolean_optional", help="Partial rollouts.")] = False
    block: Annotated[int, Flag(type=even_int, help="An even number.")] = 2
    secret_knob: Annotated[int, Flag(hidden=True, help="Hidden.")] = 0
    old_lr: Annotated[Optional[float],
                      Flag("--old-lr", deprecated="use --lr", help="Old spelling.")] = None
    mode: Annotated[str, Flag(choices=("a", "b"), help="A mode.")] = "a"
    rank: Annotated[int, FromEnv("RANK", help="Process rank.")] = 0
    world_size: Annotated[int, FromEnv("WORLD_SIZE", help="Process count.")] = 1
    ffn_hidden_size: Annotated[Optional[int], Computed("4 x hidden.")] = None
    data_parallel_size: Annotated[Optional[int], Computed("world / 1.")] = None


class Core:
    """A core-like plugin: flags of every kind, one derivation, checks."""

    megaplug_plugin = PluginInfo(name="core", description="Toy core.")

    @hookimpl
    def add_args(self, flags):
        flags.add_options(CoreOptions)

    @hookimpl
    def normalize(self, config):
        if config.old_lr is not None:
            if config.given("lr"):
                config.error("--old-lr and --lr cannot both be given", flags=("old_lr", "lr"),
                             hint="drop --old-lr")
            else:
                config.set("lr", config.old_lr, reason="--old-lr is deprecated", inputs=("old_lr",))
            config.discard("old_lr")

    @hookimpl
    def derive(self, config):
        if config.hidden_size is not None:
            config.set("ffn_hidden_size", 4 * config.hidden_size, inputs=("hidden_size",))
        config.set("data_parallel_size", config.world_size, inputs=("world_size",))

    @hookimpl
    def validate(self, config):
        if config.num_layers < 1:
            config.error(f"--num-layers must be at least 1, got {config.num_layers}",
                         flags=("num_layers",), hint="use 1 or more layers")
        if config.rank >= config.world_size:
            yield Problem(f"RANK {config.rank} is not below WORLD_SIZE {config.world_size}",
                          ("RANK", "WORLD_SIZE"), "check the launcher")


class Argparsey:
    """Flags declared through plain argparse calls, including a mutually exclusive pair."""

    megaplug_plugin = PluginInfo(name="argparsey", after=("core",))

    @hookimpl
    def add_args(self, flags):
        group = flags.add_argument_group("argparsey")
        group.add_argument("--seed", type=int, default=1234, help="Random seed.")
        group.add_argument("--no-shuffle", action="store_false", dest="shuffle", help="Keep order.")
        group.add_argument("--tag", action="append", help="Tags.")
        group.add_argument("--flip", action=argparse.BooleanOptionalAction, default=True,
                           help="Flip.")
        exclusive = flags.add_mutually_exclusive_group()
        exclusive.add_argument("--recipe", type=int, help="Recipe number.")
        exclusive.add_argument("--recipe-file", type=str, help="Recipe file.")


class Feature:
    """A feature plugin that reads core's derived value and checks it."""

    megaplug_plugin = PluginInfo(name="feature", after=("core",))

    @hookimpl
    def add_args(self, flags):
        flags.add_argument("--experts", type=int, default=None, help="Experts.")

    @hookimpl
    def validate(self, config):
        experts = config.experts
        if experts is not None and experts % config.data_parallel_size:
            config.error(f"--experts {experts} is not a multiple of the data-parallel size "
                         f"{config.data_parallel_size}", flags=("experts",),
                         hint="use a multiple of the data-parallel size")


class NeedsMissingPackage:
    megaplug_plugin = PluginInfo(name="needy",
                                 requires=(Requirement("surely_not_installed_pkg_xyz"),))

    @hookimpl
    def add_args(self, flags):
        flags.add_argument("--needy-level", type=int, default=0, help="Level.")


class Clash:
    megaplug_plugin = PluginInfo(name="clash")

    @hookimpl
    def add_args(self, flags):
        flags.add_argument("--lr", type=float, default=0.1, help="Clashes with core.")


class Mutator:
    megaplug_plugin = PluginInfo(name="mutator", after=("core",))

    @hookimpl
    def validate(self, config):
        config.set("lr", 5.0)


class InPlaceMutator:
    megaplug_plugin = PluginInfo(name="inplace", after=("core",))

    @hookimpl
    def validate(self, config):
        if config.sizes is not None:
            config.sizes.append(99)


def raising_plugin(hook: str):
    """A plugin whose ``hook`` raises RuntimeError."""

    class Raiser:
        megaplug_plugin = PluginInfo(name=f"raises_in_{hook}", after=("core",))

    def boom(self, *args):
        raise RuntimeError(f"boom in {hook}")

    boom.__name__ = hook
    if hook == "add_args":
        setattr(Raiser, hook, hookimpl(lambda self, flags: boom(self)))
    else:
        setattr(Raiser, hook, hookimpl(lambda self, config: boom(self)))
    return Raiser()


class Tracer:
    """Appends its name to a shared trace so tests can see the phase and plugin order."""

    def __init__(self, name, after=(), before=()):
        self.megaplug_plugin = PluginInfo(name=name, after=after, before=before)
        self.name = name

    @hookimpl
    def add_args(self, flags):
        if self.name == "t0":
            @dataclass
            class TraceOptions:
                trace: Annotated[list, Computed("the order hooks ran in")] = None  # type: ignore[assignment]

            flags.add_options(TraceOptions)

    @hookimpl
    def normalize(self, config):
        self._append(config, "normalize")

    @hookimpl
    def derive(self, config):
        self._append(config, "derive")

    def _append(self, config, phase):
        config.set("trace", [*(config.trace or []), f"{phase}:{self.name}"])
