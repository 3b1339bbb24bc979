"""What each checkpointing rule reports, whole: the message, every flag it names and the
hint; every warning with its flags; and each derivation's value, why and from what."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from model_ckpt_support import BASE, problems, resolve  # noqa: E402

import megaplug  # noqa: E402
from megaplug import PluginInfo, hookimpl  # noqa: E402
from megaplug.builtin import checkpointing  # noqa: E402

SAVE = ["--save", "/c", "--save-interval", "100"]
NVRX = {"nvidia_resiliency_ext": "0.4.1"}
LOCAL = ["--non-persistent-ckpt-type", "local", "--non-persistent-local-ckpt-dir", "/x"]


def whole(*argv: str, **packages) -> list[tuple]:
    return [(p.message, tuple(p.flags), p.hint) for p in problems([*BASE, *argv], **packages)]


def warned(*argv: str) -> list[tuple]:
    return [(w.message, tuple(w.flags)) for w in resolve([*BASE, *argv]).warnings]


def provenance(dest: str, *argv: str) -> tuple:
    resolved = resolve([*BASE, *argv])
    record = resolved.source(dest)
    return resolved[dest], record.source, record.reason, tuple(record.inputs)


def retain(value: int, hint: int) -> tuple:
    return (f"--save-retain-interval {value} must be a positive multiple of --save-interval 100",
            ("--save-retain-interval", "--save-interval"),
            f"use e.g. --save-retain-interval {hint}")


@pytest.mark.parametrize("argv, packages, expected", [
    (["--ckpt-convert-format", "torch"], {},
     [("--ckpt-convert-format needs --ckpt-convert-save",
       ("--ckpt-convert-format", "--ckpt-convert-save"),
       "add --ckpt-convert-save DIR with the directory for the converted checkpoint"),
      ("--ckpt-convert-format needs --load", ("--ckpt-convert-format", "--load"),
       "add --load DIR with the checkpoint to convert")]),
    (["--non-persistent-ckpt-type", "in_memory"], {},
     [("--non-persistent-ckpt-type in_memory is not supported yet",
       ("--non-persistent-ckpt-type",), "use global or local")]),
    (["--non-persistent-ckpt-type", "local"], {},
     [("--non-persistent-ckpt-type local requires nvidia_resiliency_ext, not installed",
       ("--non-persistent-ckpt-type",),
       "install nvidia-resiliency-ext, or use --non-persistent-ckpt-type global"),
      ("--non-persistent-ckpt-type local needs --non-persistent-local-ckpt-dir",
       ("--non-persistent-ckpt-type", "--non-persistent-local-ckpt-dir"),
       "add --non-persistent-local-ckpt-dir DIR on node-local storage")]),
    (["--use-checkpoint-args"], {},
     [("--use-checkpoint-args needs --load or --pretrained-checkpoint",
       ("--use-checkpoint-args", "--load", "--pretrained-checkpoint"),
       "add --load DIR with the checkpoint whose arguments to use")]),
    (["--use-checkpoint-args", "--load", "/l", *LOCAL], NVRX,
     [("--use-checkpoint-args cannot be used with --non-persistent-ckpt-type local",
       ("--use-checkpoint-args", "--non-persistent-ckpt-type"),
       "local checkpoints need every argument before they load; use "
       "--non-persistent-ckpt-type global or drop --use-checkpoint-args")]),
    (["--save", "/c"], {},
     [("--save needs a positive --save-interval (it is missing)", ("--save", "--save-interval"),
       "add e.g. --save-interval 1000")]),
    (["--save", "/c", "--save-interval", "0"], {},
     [("--save needs a positive --save-interval (it is 0)", ("--save", "--save-interval"),
       "add e.g. --save-interval 1000")]),
    ([*SAVE, "--save-retain-interval", "50"], {}, [retain(50, 100)]),
    ([*SAVE, "--save-retain-interval", "150"], {}, [retain(150, 100)]),
    ([*SAVE, "--save-retain-interval", "250"], {}, [retain(250, 200)]),
    ([*SAVE, "--save-retain-interval", "0"], {}, [retain(0, 100)]),
    (["--ckpt-format", "torch_dcp", "--tensor-model-parallel-size", "2",
      "--pipeline-model-parallel-size", "2"], {},
     [("--ckpt-format torch_dcp is not supported with --tensor-model-parallel-size 2",
       ("--ckpt-format", "--tensor-model-parallel-size"),
       "use --ckpt-format torch_dist, or --tensor-model-parallel-size 1"),
      ("--ckpt-format torch_dcp is not supported with --pipeline-model-parallel-size 2",
       ("--ckpt-format", "--pipeline-model-parallel-size"),
       "use --ckpt-format torch_dist, or --pipeline-model-parallel-size 1")]),
    (["--optimizer", "muon", "--ckpt-format", "fsdp_dtensor"], {},
     [("--optimizer muon cannot save in --ckpt-format fsdp_dtensor",
       ("--ckpt-format", "--optimizer"), "use --ckpt-format torch_dist")]),
    (["--ckpt-pg-tensors-cache-path", "/p", "--ckpt-fully-parallel-save-process-group", "dp",
      "--ckpt-fully-parallel-load-process-group", "ep_dp"], {},
     [("--ckpt-pg-tensors-cache-path needs the same save and load process group, got "
       "--ckpt-fully-parallel-save-process-group dp and "
       "--ckpt-fully-parallel-load-process-group ep_dp",
       ("--ckpt-pg-tensors-cache-path", "--ckpt-fully-parallel-save-process-group",
        "--ckpt-fully-parallel-load-process-group"), "set both to dp (or both to ep_dp)")]),
    (["--override-ckpt-iteration", "5", "--finetune"], {},
     [("--override-ckpt-iteration cannot be used with --finetune",
       ("--override-ckpt-iteration", "--finetune"), "drop one of them")]),
    (["--replication"], {},
     [("--replication needs --replication-jump", ("--replication", "--replication-jump"),
       "add --replication-jump N (ranks between a node and its replica)"),
      ("--replication needs --non-persistent-ckpt-type local (got None)",
       ("--replication", "--non-persistent-ckpt-type"), "add --non-persistent-ckpt-type local")]),
    (["--load-main-params-from-ckpt"], {},
     [("--load-main-params-from-ckpt must be used with --no-load-optim",
       ("--load-main-params-from-ckpt", "--no-load-optim"), "add --no-load-optim")]),
    (["--save-params-interval", "5", "--overlap-param-gather"], {},
     [("--save-params-interval cannot be used with --overlap-param-gather",
       ("--save-params-interval", "--overlap-param-gather"),
       "drop --overlap-param-gather while dumping parameters")]),
    (["--disable-gloo-process-groups", "--use-distributed-optimizer", "--ckpt-format",
      "torch"], {},
     [("--disable-gloo-process-groups with the distributed optimizer needs a distributed "
       "checkpoint format, not --ckpt-format torch",
       ("--disable-gloo-process-groups", "--use-distributed-optimizer", "--ckpt-format"),
       "use --ckpt-format torch_dist, or keep the Gloo process groups")]),
    (["--disable-gloo-process-groups", "--dist-ckpt-optim-fully-reshardable",
      "--distrib-optim-fully-reshardable-mem-efficient"], {},
     [("--distrib-optim-fully-reshardable-mem-efficient needs Gloo process groups",
       ("--distrib-optim-fully-reshardable-mem-efficient", "--disable-gloo-process-groups"),
       "drop --disable-gloo-process-groups or --distrib-optim-fully-reshardable-mem-efficient")]),
])
def test_each_problem_whole(argv, packages, expected):
    assert whole(*argv, **packages) == expected


@pytest.mark.parametrize("argv, packages", [
    ([*SAVE, "--save-retain-interval", "100"], {}),
    ([*SAVE, "--save-retain-interval", "200"], {}),
    (["--save", "/c", "--save-interval", "1"], {}),
    (["--use-checkpoint-args", "--pretrained-checkpoint", "/p"], {}),
    (LOCAL, NVRX),
    (["--non-persistent-ckpt-type", "global"], {}),
    (["--ckpt-format", "torch_dcp"], {}),
    (["--optimizer", "muon", "--ckpt-format", "torch"], {}),
    (["--optimizer", "sgd", "--ckpt-format", "fsdp_dtensor"], {}),
    (["--ckpt-pg-tensors-cache-path", "/p"], {}),
    (["--override-ckpt-iteration", "5"], {}),
    (["--replication", "--replication-jump", "2", *LOCAL], NVRX),
    (["--load-main-params-from-ckpt", "--no-load-optim"], {}),
    (["--disable-gloo-process-groups", "--use-distributed-optimizer"], {}),
    (["--disable-gloo-process-groups", "--use-distributed-optimizer", "--optimizer", "muon",
      "--ckpt-format", "torch"], {}),
    (["--disable-gloo-process-groups", "--distrib-optim-fully-reshardable-mem-efficient"], {}),
    (["--dist-ckpt-optim-fully-reshardable", "--distrib-optim-fully-reshardable-mem-efficient"],
     {}),
])
def test_near_misses_pass(argv, packages):
    assert resolve([*BASE, *argv], **packages).ckpt_format in (
        "torch", "torch_dist", "torch_dcp", "fsdp_dtensor")


@pytest.mark.parametrize("argv, expected", [
    (["--ckpt-fully-parallel-save", "--use-dist-ckpt", "--dist-ckpt-format", "torch_dist"],
     [("--ckpt-fully-parallel-save is deprecated and has no effect",
       ("--ckpt-fully-parallel-save",)),
      ("--use-dist-ckpt is deprecated and has no effect", ("--use-dist-ckpt",)),
      ("--dist-ckpt-format is deprecated and has no effect", ("--dist-ckpt-format",))]),
    (["--no-ckpt-fully-parallel-save", "--use-distributed-optimizer"],
     [("with --no-ckpt-fully-parallel-save and the distributed optimizer, training cannot "
       "resume with a different parallelism", ("--no-ckpt-fully-parallel-save",))]),
    (["--ckpt-fully-parallel-load", "--ckpt-fully-parallel-load-exchange-algo", "gather_rounds"],
     [("only the broadcast exchange algorithm is numerically reliable for fully parallel loads",
       ("--ckpt-fully-parallel-load-exchange-algo",))]),
    (["--async-save"],
     [("--async-save needs --use-persistent-ckpt-worker; saving synchronously",
       ("--async-save", "--use-persistent-ckpt-worker"))]),
    (["--skip-train"], [("--skip-train turns on --no-load-optim", ("--no-load-optim",))]),
    (["--replication-jump", "2"],
     [("--replication-jump is ignored without --replication",
       ("--replication-jump", "--replication"))]),
])
def test_each_warning_whole(argv, expected):
    assert warned(*argv) == expected


@pytest.mark.parametrize("argv", [
    ["--no-ckpt-fully-parallel-save"],
    ["--no-ckpt-fully-parallel-save", "--use-distributed-optimizer", "--ckpt-format", "torch"],
    ["--ckpt-fully-parallel-load"],
    ["--ckpt-fully-parallel-load", "--ckpt-fully-parallel-load-exchange-algo", "gather_rounds",
     "--ckpt-format", "torch"],
    ["--async-save", "--use-persistent-ckpt-worker"],
    ["--async-save", "--ckpt-format", "torch"],
    ["--skip-train", "--no-load-optim"],
])
def test_quiet_near_misses(argv):
    assert warned(*argv) == []


def test_a_replication_jump_with_replication_is_kept_quietly():
    resolved = resolve([*BASE, "--replication-jump", "2", "--replication", *LOCAL], **NVRX)
    assert resolved.warnings == ()
    assert resolved.replication_jump == 2


@pytest.mark.parametrize("dest, argv, expected", [
    ("exit_on_missing_checkpoint",
     ["--ckpt-convert-format", "torch", "--ckpt-convert-save", "/s", "--load", "/l"],
     (True, "derived", "converting a checkpoint", ("ckpt_convert_format",))),
    ("async_save", ["--async-save"],
     (False, "derived", "no persistent checkpoint worker",
      ("async_save", "use_persistent_ckpt_worker"))),
    ("async_strategy", ["--async-strategy", "nvrx"],
     ("mcore", "derived", "checkpoints are saved synchronously", ("async_save",))),
    ("no_load_optim", ["--skip-train"],
     (True, "derived", "training is skipped", ("skip_train",))),
    ("replication_jump", ["--replication-jump", "2"],
     (None, "derived", "replication is off", ("replication",))),
    ("use_dist_ckpt", ["--ckpt-format", "torch"], (False, "derived", "", ("ckpt_format",))),
])
def test_each_derivation_provenance(dest, argv, expected):
    assert provenance(dest, *argv) == expected


def test_the_nvrx_strategy_stays_with_asynchronous_saves():
    resolved = resolve([*BASE, "--async-save", "--use-persistent-ckpt-worker",
                        "--async-strategy", "nvrx"])
    assert (resolved.async_save, resolved.async_strategy) == (True, "nvrx")
    assert resolved.source("async_strategy").source == "command-line"


def test_a_given_exit_on_missing_checkpoint_is_kept():
    resolved = resolve([*BASE, "--ckpt-convert-format", "torch", "--ckpt-convert-save", "/s",
                        "--load", "/l", "--exit-on-missing-checkpoint"])
    assert resolved.source("exit_on_missing_checkpoint").source == "command-line"


# -- without the plugins owning the settings the rules read: Megatron's defaults ----------


def alone(*extra):
    return megaplug.load([], environ={"MEGAPLUG_DISABLE_PLUGIN_AUTOLOAD": "1"},
                         builtins=[checkpointing, *extra])[0]


@pytest.mark.parametrize("argv", [
    ["--ckpt-format", "torch_dcp"],  # no parallel plugin: no model parallelism
    ["--ckpt-format", "fsdp_dtensor"],  # no training plugin: the adam optimizer
    # no parallel plugin: its Gloo process groups are on
    ["--dist-ckpt-optim-fully-reshardable", "--distrib-optim-fully-reshardable-mem-efficient"],
])
def test_alone_the_other_plugins_settings_take_megatrons_defaults(argv):
    resolved = alone().resolve(argv, environ={})
    assert resolved.ckpt_format in ("torch_dcp", "fsdp_dtensor", "torch_dist")


class _GlooAndDistributedOptimizer:
    """The parallel plugin's Gloo and distributed-optimizer switches, without training."""

    megaplug_plugin = PluginInfo(name="parallel", description="test stand-in",
                                 before=("checkpointing",))

    @hookimpl
    def add_args(self, flags) -> None:
        flags.add_argument("--disable-gloo-process-groups", dest="use_gloo_process_groups",
                           action="store_false")
        flags.add_argument("--use-distributed-optimizer", action="store_true")


def test_without_the_training_plugin_the_optimizer_is_adam():
    with pytest.raises(megaplug.ConfigError) as info:
        alone(_GlooAndDistributedOptimizer()).resolve(
            ["--disable-gloo-process-groups", "--use-distributed-optimizer", "--ckpt-format",
             "torch"], environ={})
    assert [p.flags for p in info.value.problems] == [
        ("--disable-gloo-process-groups", "--use-distributed-optimizer", "--ckpt-format")]


def test_overlapping_the_parameter_gather_alone_is_fine():
    assert resolve([*BASE, "--overlap-param-gather"]).overlap_param_gather is True
