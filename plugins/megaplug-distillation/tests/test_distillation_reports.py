"""What each distillation check reports, whole: the message, every flag it names and the hint;
and what the checks assume when the plugins owning the settings they read are absent."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence

import pytest
from typing_extensions import Annotated

import megaplug
import megaplug_distillation
from megaplug import Flag, PluginInfo, hookimpl

NO_AUTOLOAD = {"MEGAPLUG_DISABLE_PLUGIN_AUTOLOAD": "1"}
SAVING = ["--logits-save-dir", "/tmp/logits", "--logits-save-top-k", "64", "--async-save",
          "--freeze-all-layers"]


@dataclass
class PeerOptions:
    """The checkpointing and training settings the distillation checks read."""

    async_save: Annotated[bool, Flag()] = False
    freeze_all_layers: Annotated[bool, Flag()] = False
    rampup_batch_size: Annotated[Optional[list[int]], Flag(nargs=3)] = None


class Peers:
    """Stands in for the checkpointing and training plugins."""

    megaplug_plugin = PluginInfo(name="peers", description="Test stand-in.")

    @hookimpl
    def add_args(self, flags: Any) -> None:
        flags.add_options(PeerOptions)


PEERS = Peers()


def reports(argv: Sequence[str], *, peers: bool = True) -> tuple[list[tuple], list[tuple]]:
    """(problems, warnings) as (message, flags, hint) and (message, flags)."""
    builtins: list[Any] = [PEERS, megaplug_distillation] if peers else [megaplug_distillation]
    kernel = megaplug.load(builtins=builtins, environ=NO_AUTOLOAD)[0]
    try:
        resolved = kernel.resolve(list(argv), environ={})
    except megaplug.ConfigError as error:
        return [(p.message, tuple(p.flags), p.hint) for p in error.problems], []
    return [], [(w.message, tuple(w.flags)) for w in resolved.warnings]


def without(*dropped: str) -> list[str]:
    return [a for a in SAVING if a not in dropped]


ASYNC = ("--logits-save-dir requires --async-save: logits are written through the asynchronous "
         "checkpoint queue", ("--logits-save-dir", "--async-save"),
         "add --async-save and --use-persistent-ckpt-worker (async saving is turned off "
         "without the persistent worker)")
FROZEN = ("--logits-save-dir without --freeze-all-layers: the model keeps training while its "
          "logits are saved; add --freeze-all-layers for a frozen-teacher dump",
          ("--logits-save-dir", "--freeze-all-layers"))


@pytest.mark.parametrize("argv, expected", [
    (without("--logits-save-top-k", "64"),
     [("--logits-save-dir requires --logits-save-top-k",
       ("--logits-save-dir", "--logits-save-top-k"), "add --logits-save-top-k (e.g. 128)")]),
    (without("--async-save"), [ASYNC]),
    ([*SAVING, "--rampup-batch-size", "16", "16", "1000"],
     [("--logits-save-dir cannot be combined with --rampup-batch-size: saved logits map "
       "samples to iterations assuming a fixed global batch size",
       ("--logits-save-dir", "--rampup-batch-size"),
       "drop --rampup-batch-size while saving logits")]),
])
def test_each_problem_whole(argv, expected):
    assert reports(argv) == (expected, [])


@pytest.mark.parametrize("argv, expected", [
    (without("--freeze-all-layers"), [FROZEN]),
    ([*SAVING, "--logits-save-top-p", "1.5"],
     [("--logits-save-top-p 1.5 is outside (0, 1], the range of a probability mass",
       ("--logits-save-top-p",))]),
])
def test_each_warning_whole(argv, expected):
    assert reports(argv) == ([], expected)


def test_without_the_owning_plugins_saving_is_neither_async_nor_frozen():
    # --async-save and --freeze-all-layers belong to the checkpointing and training
    # plugins: where they are absent, logits are saved synchronously from a training model
    assert reports(["--logits-save-dir", "/tmp/logits", "--logits-save-top-k", "8"],
                   peers=False) == ([ASYNC], [])


@dataclass
class CheckpointingOptions:
    async_save: Annotated[bool, Flag()] = False


class Checkpointing:
    """Stands in for the checkpointing plugin alone (no training plugin)."""

    megaplug_plugin = PluginInfo(name="checkpointing", description="Test stand-in.")

    @hookimpl
    def add_args(self, flags: Any) -> None:
        flags.add_options(CheckpointingOptions)


def test_without_the_training_plugin_the_saved_model_is_not_frozen():
    kernel = megaplug.load(builtins=[Checkpointing(), megaplug_distillation],
                           environ=NO_AUTOLOAD)[0]
    resolved = kernel.resolve(["--logits-save-dir", "/tmp/logits", "--logits-save-top-k", "8",
                               "--async-save"], environ={})
    assert [(w.message, tuple(w.flags)) for w in resolved.warnings] == [FROZEN]
