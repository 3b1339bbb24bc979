"""What each inference rule reports, whole: the message, every flag it names and the hint;
every warning with its flags; and each derivation's value, why and from what."""

from __future__ import annotations

import enum

import pytest

import megaplug
import megaplug_inference
from megaplug import PluginInfo, TargetEnvironment, TorchDType, hookimpl
from megaplug._kernel import Kernel
from megaplug._plugins import PluginSet
from megaplug.sources._selection import PluginSelection
from megaplug_inference.enums import InferenceCudaGraphScope as Scope

LOCAL = ("--cuda-graph-impl", "local")
THRESHOLD = "--inference-batch-times-seqlen-threshold"
MIGRATION_FLAGS = ("--cuda-graph-modules", "--inference-cuda-graph-scope")


@pytest.fixture
def reported(resolve):
    """(message, flags, hint) of every problem of a command line that must fail."""

    def run(*argv: str) -> list[tuple]:
        with pytest.raises(megaplug.ConfigError) as info:
            resolve(*argv)
        return [(p.message, tuple(p.flags), p.hint) for p in info.value.problems]

    return run


def warned(resolved: megaplug.Resolved) -> list[tuple]:
    return [(w.message, tuple(w.flags)) for w in resolved.warnings]


def provenance(resolved: megaplug.Resolved, dest: str) -> tuple:
    record = resolved.source(dest)
    return resolved[dest], record.source, record.reason, tuple(record.inputs)


@pytest.mark.parametrize("argv, expected", [
    (LOCAL, (Scope.layer, "normalized", "default for --cuda-graph-impl local",
             ("inference_cuda_graph_scope", "cuda_graph_impl"))),
    ((), (Scope.none, "normalized", "default for --cuda-graph-impl none",
          ("inference_cuda_graph_scope", "cuda_graph_impl"))),
    ((*LOCAL, "--inference-cuda-graph-scope", "block"),
     (Scope.block, "normalized", "scope name",
      ("inference_cuda_graph_scope", "cuda_graph_impl"))),
])
def test_the_scope_provenance(resolve, argv, expected):
    assert provenance(resolve(*argv), "inference_cuda_graph_scope") == expected


@pytest.mark.parametrize("argv, expected", [
    ((*LOCAL, "--inference-cuda-graph-scope", "none"),
     ("--inference-cuda-graph-scope none is not supported with --cuda-graph-impl local "
      "(supported: layer, block)", ("--inference-cuda-graph-scope", "--cuda-graph-impl"),
      "choose layer or block, or leave the scope unset (local graphs capture each layer)")),
    (("--cuda-graph-impl", "none", "--inference-cuda-graph-scope", "layer"),
     ("--inference-cuda-graph-scope layer is not supported with --cuda-graph-impl none "
      "(supported: none)", ("--inference-cuda-graph-scope", "--cuda-graph-impl"),
      "use --cuda-graph-impl local for inference CUDA graphs")),
    ((*LOCAL, "--inference-dynamic-batching-num-cuda-graphs", "0"),
     ("--inference-dynamic-batching-num-cuda-graphs must be a positive number or -1 with "
      "--cuda-graph-impl local, got 0",
      ("--inference-dynamic-batching-num-cuda-graphs", "--cuda-graph-impl"),
      "give a positive count, or -1 to derive it from the request limit")),
    ((*LOCAL, "--cuda-graph-modules", "full_iteration_inference",
      "--inference-cuda-graph-scope", "layer"),
     ("--cuda-graph-modules full_iteration_inference cannot be combined with "
      "--inference-cuda-graph-scope layer", MIGRATION_FLAGS,
      "drop full_iteration_inference, or use --inference-cuda-graph-scope block")),
    ((*LOCAL, "--cuda-graph-modules", "full_iteration", "--inference-cuda-graph-scope", "block"),
     ("--cuda-graph-modules full_iteration cannot be combined with "
      "--inference-cuda-graph-scope block", MIGRATION_FLAGS,
      "drop full_iteration, or use --inference-cuda-graph-scope none")),
])
def test_each_scope_problem_whole(reported, argv, expected):
    assert reported(*argv) == [expected]


BLOCK_FP8 = ("--fp8-format", "e4m3", *LOCAL, "--inference-cuda-graph-scope", "block")
OPTIMIZED = ("fp8 with --inference-cuda-graph-scope block needs --transformer-impl "
             "inference_optimized", ("--fp8-format", "--inference-cuda-graph-scope",
                                     "--transformer-impl"),
             "use --transformer-impl inference_optimized")
MXFP8 = ("fp8 with --inference-cuda-graph-scope block supports only --fp8-recipe mxfp8, got "
         "delayed", ("--fp8-format", "--inference-cuda-graph-scope", "--fp8-recipe"),
         "use --fp8-recipe mxfp8")


@pytest.mark.parametrize("extra, expected", [
    ((), [OPTIMIZED, MXFP8]),
    (("--transformer-impl", "inference_optimized"), [MXFP8]),
    (("--fp8-recipe", "mxfp8"), [OPTIMIZED]),
])
def test_fp8_with_block_scoped_graphs_whole(reported, extra, expected):
    assert reported(*BLOCK_FP8, *extra) == expected


def test_fp8_with_block_scoped_graphs_done_right(resolve):
    resolved = resolve(*BLOCK_FP8, "--transformer-impl", "inference_optimized",
                       "--fp8-recipe", "mxfp8")
    assert resolved.inference_cuda_graph_scope is Scope.block


def test_fp8_with_a_block_scope_from_the_retired_spelling(reported):
    assert reported("--fp8-format", "e4m3", *LOCAL, "--cuda-graph-modules",
                    "full_iteration_inference", "--fp8-recipe", "mxfp8") == [OPTIMIZED]


def test_the_retired_spelling_becomes_the_block_scope_whole(resolve):
    resolved = resolve(*LOCAL, "--cuda-graph-modules", "full_iteration_inference")
    assert resolved.inference_cuda_graph_scope is Scope.block
    migrated = resolved.source("inference_cuda_graph_scope").previous
    assert (migrated.source, migrated.reason, tuple(migrated.inputs)) == (
        "normalized", "retired --cuda-graph-modules full_iteration_inference",
        ("cuda_graph_modules",))
    assert warned(resolved) == [
        ("--cuda-graph-modules full_iteration_inference is deprecated; setting "
         "--inference-cuda-graph-scope=block instead",
         ("--cuda-graph-modules", "--inference-cuda-graph-scope"))]


def test_the_retired_spelling_without_graphs_whole(resolve):
    resolved = resolve("--cuda-graph-modules", "full_iteration_inference")
    assert resolved.inference_cuda_graph_scope is Scope.none
    assert warned(resolved) == [
        ("--cuda-graph-modules full_iteration_inference is deprecated and has no effect with "
         "--cuda-graph-impl none; use --cuda-graph-impl local with --inference-cuda-graph-scope "
         "block for inference CUDA graphs", ("--cuda-graph-modules",))]


@pytest.mark.parametrize("argv", [
    ("--cuda-graph-impl", "transformer_engine", "--cuda-graph-modules", "full_iteration_inference"),
    ("--cuda-graph-modules", "full_iteration"),
    (*LOCAL, "--cuda-graph-modules", "full_iteration_inference", "full_iteration"),
])
def test_the_retired_spellings_the_training_plugin_handles_change_no_scope(resolve, argv):
    resolved = resolve(*argv)
    assert warned(resolved) == []
    assert resolved.source("inference_cuda_graph_scope").reason.startswith("default for")


@pytest.mark.parametrize("argv, expected", [
    ((THRESHOLD, "4"),
     [("--inference-batch-times-seqlen-threshold 4 needs pipeline parallelism "
       "(--pipeline-model-parallel-size 1)",
       ("--inference-batch-times-seqlen-threshold", "--pipeline-model-parallel-size"),
       "set --pipeline-model-parallel-size above 1, or the threshold to -1")]),
    ((THRESHOLD, "0", "--pipeline-model-parallel-size", "2", *LOCAL),
     [("--inference-batch-times-seqlen-threshold 0 (pipelined micro-batched inference) cannot "
       "be used with --cuda-graph-impl local",
       ("--inference-batch-times-seqlen-threshold", "--cuda-graph-impl"),
       "use --cuda-graph-impl none, or set the threshold to -1")]),
])
def test_each_batch_split_problem_whole(reported, argv, expected):
    assert reported(*argv) == expected


@pytest.mark.parametrize("pp, threshold, rejected", [
    ("1", "-1", False), ("1", "0", True), ("2", "0", False), ("2", "-1", False),
    ("2", "-2", False),
])
def test_the_batch_split_threshold_at_its_boundaries(resolve, pp, threshold, rejected):
    argv = ("--pipeline-model-parallel-size", pp, THRESHOLD, threshold)
    if rejected:
        with pytest.raises(megaplug.ConfigError):
            resolve(*argv)
    else:
        assert resolve(*argv)[THRESHOLD[2:].replace("-", "_")] == int(threshold)


@pytest.mark.parametrize("count, rejected", [("-2", True), ("-1", False), ("0", True),
                                             ("1", False), ("2", False)])
def test_the_local_graph_count_at_its_boundaries(resolve, count, rejected):
    argv = (*LOCAL, "--inference-dynamic-batching-num-cuda-graphs", count)
    if rejected:
        with pytest.raises(megaplug.ConfigError):
            resolve(*argv)
    else:
        assert resolve(*argv).inference_dynamic_batching_num_cuda_graphs == int(count)


def test_the_graph_count_is_free_without_local_graphs(resolve):
    resolved = resolve("--inference-dynamic-batching-num-cuda-graphs", "0")
    assert resolved.inference_dynamic_batching_num_cuda_graphs == 0


def test_mamba_state_dtypes_provenance(resolve):
    resolved = resolve("--mamba-inference-conv-states-dtype", "fp16")
    assert provenance(resolved, "mamba_inference_conv_states_dtype") == (
        TorchDType("float16"), "derived", "dtype name to torch dtype",
        ("mamba_inference_conv_states_dtype",))
    assert provenance(resolved, "mamba_inference_ssm_states_dtype") == (
        TorchDType("bfloat16"), "derived", "dtype name to torch dtype",
        ("mamba_inference_ssm_states_dtype",))


class _TrainingOnly:
    """Stands in for the training plugin alone: no parallel plugin declares the pipeline
    size, which then is Megatron's default of 1."""

    megaplug_plugin = PluginInfo(name="training", description="Stand-in without parallel.")

    @hookimpl
    def add_args(self, flags):
        flags.add_argument("--cuda-graph-impl", default="none")


def test_without_the_parallel_plugin_there_is_no_pipeline():
    kernel = Kernel(PluginSet(PluginSelection(autoload=False),
                              builtins=[_TrainingOnly(), megaplug_inference]))
    with pytest.raises(megaplug.ConfigError) as info:
        kernel.resolve([THRESHOLD, "4"], environ={},
                       target=TargetEnvironment(device_capability=(9, 0), environ={}))
    assert [(p.message, tuple(p.flags), p.hint) for p in info.value.problems] == [
        ("--inference-batch-times-seqlen-threshold 4 needs pipeline parallelism "
         "(--pipeline-model-parallel-size 1)",
         ("--inference-batch-times-seqlen-threshold", "pipeline_model_parallel_size"),
         "set --pipeline-model-parallel-size above 1, or the threshold to -1")]


# -- a scope set on a Megatron namespace (megaplug.megatron), where no choice check applies --


class InferenceCudaGraphScope(enum.IntEnum):
    """Another enum of the scope's name (an IntEnum's str() is its number, not its name)."""

    none = 0
    layer = 1
    block = 2


FACADE = ["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
          "--seq-length", "128", "--max-position-embeddings", "128", "--micro-batch-size", "2",
          "--train-iters", "10", "--lr", "1e-4", *LOCAL]


def scope_on_namespace(value, *argv: str):
    """The scope validate_args gives ``value`` set on the namespace (or its problems)."""
    from megaplug.megatron import ConfigError, parse_args, validate_args

    environ = {"RANK": "0", "WORLD_SIZE": "1"}
    args = parse_args(argv=[*FACADE, *argv], environ=environ)
    args.inference_cuda_graph_scope = value
    try:
        validate_args(args, environ=environ, torch_types=False,
                      target=TargetEnvironment(device_capability=(9, 0),
                                               packages={"transformer_engine": "2.17.1"}))
    except ConfigError as error:
        return [(p.message, tuple(p.flags), p.hint) for p in error.problems]
    return args.inference_cuda_graph_scope


@pytest.mark.parametrize("value", [InferenceCudaGraphScope.block, "block",
                                   "InferenceCudaGraphScope.block", "a.b.block"])
@pytest.mark.parametrize("retired", [(), ("--cuda-graph-modules", "full_iteration_inference")])
def test_a_scope_is_read_by_its_last_dotted_name(value, retired):
    assert scope_on_namespace(value, *retired) is Scope.block


def test_a_scope_of_no_known_name_is_a_problem():
    assert scope_on_namespace("bogus") == [
        ("--inference-cuda-graph-scope 'bogus' is not a scope", ("--inference-cuda-graph-scope",),
         "choose none, layer or block")]


def test_the_retired_scope_flag_spelling_migrates_too():
    # --cuda-graph-scope is the training plugin's retired alias of --cuda-graph-modules
    from megaplug.testing import resolve as resolve_all

    resolved = resolve_all("--cuda-graph-impl", "local", "--cuda-graph-scope",
                           "full_iteration_inference", environ={"WORLD_SIZE": "1"},
                           target=TargetEnvironment(device_capability=(9, 0),
                                                    packages={"transformer_engine": "2.17.1"}))
    assert resolved.inference_cuda_graph_scope is Scope.block
    assert [(w.message, tuple(w.flags)) for w in resolved.warnings if w.plugin == "inference"] == [
        ("--cuda-graph-modules full_iteration_inference is deprecated; setting "
         "--inference-cuda-graph-scope=block instead", MIGRATION_FLAGS)]
