"""Megatron-LM's config container (``PretrainConfigContainer``) read back as settings.

The container is built from the argument namespace by Megatron's own code
(``megatron/training/argument_utils.py``: ``pretrain_cfg_container_from_args``,
``gpt_config_from_args``, ``core_transformer_config_from_args``; ``training.py``:
``get_megatron_ddp_config``). Most fields copy the namespace attribute of the same name;
the rest are the renamings below, the container's own values (constants and what the
config classes' ``__post_init__`` computes), and a few values several flags make. This
module knows those and nothing else: it imports neither torch nor Megatron.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Iterator, Mapping

#: Container fields that hold a namespace attribute of another name (release 0.18 on):
#: field path -> (the attribute, whether the field holds its negation).
RENAMED: dict[str, tuple[str, bool]] = {
    "checkpoint.save_optim": ("no_save_optim", True),
    "checkpoint.save_rng": ("no_save_rng", True),
    "checkpoint.load_optim": ("no_load_optim", True),
    "checkpoint.load_rng": ("no_load_rng", True),
    "checkpoint.fully_parallel_save": ("ckpt_fully_parallel_save", False),
    "checkpoint.fully_parallel_load": ("ckpt_fully_parallel_load", False),
    "profiling.use_nsys_profiler": ("profile", False),
    "rerun_state_machine.check_for_nan_in_loss": ("check_for_nan_in_loss_and_grad", False),
    "ddp.grad_reduce_in_fp32": ("accumulate_allreduce_grads_in_fp32", False),
    "ddp.check_for_nan_in_grad": ("check_for_nan_in_loss_and_grad", False),
    "ddp.num_buckets": ("ddp_num_buckets", False),
    "ddp.bucket_size": ("ddp_bucket_size", False),
    "ddp.pad_buckets_for_high_nccl_busbw": ("ddp_pad_buckets_for_high_nccl_busbw", False),
    "ddp.reduce_scatter_with_fp32_accumulation":
        ("ddp_reduce_scatter_with_fp32_accumulation", False),
    "ddp.param_name_patterns_for_fp32_local_accumulation":
        ("ddp_param_name_patterns_for_fp32_local_accumulation", False),
    "ddp.average_in_collective": ("ddp_average_in_collective", False),
    "ddp.megatron_fsdp_use_decoupled_grad": ("use_precision_aware_optimizer", False),
    "model.transformer.persist_layer_norm": ("no_persist_layer_norm", True),
    "model.transformer.batch_p2p_comm": ("overlap_p2p_comm", True),
    "model.transformer.num_moe_experts": ("num_experts", False),
    "model.transformer.num_layers_in_first_pipeline_stage":
        ("decoder_first_pipeline_num_layers", False),
    "model.transformer.num_layers_in_last_pipeline_stage":
        ("decoder_last_pipeline_num_layers", False),
    "model.transformer.fp8_param": ("fp8_param_gather", False),
    "model.transformer.fp4_param": ("fp4_param_gather", False),
    "model.transformer.inference_sampling_seed": ("seed", False),
    "model.rope_scaling": ("use_rope_scaling", False),
    "model.seq_len_interpolation_factor": ("rotary_seq_len_interpolation_factor", False),
    "model.seq_length": ("max_position_embeddings", False),
    "model.share_embeddings_and_output_weights": ("untie_embeddings_and_output_weights", True),
}

#: Container fields holding a value megaplug computes (no flag of that name) that one flag
#: gives directly: field path -> that flag's setting.
GIVEN_BY: dict[str, str] = {
    # --num-layers-per-virtual-pipeline-stage makes it too; the stage count says it plainly
    "model.transformer.virtual_pipeline_model_parallel_size":
        "num_virtual_stages_per_pipeline_rank",
}

#: Container fields no flag sets, and why: import leaves them to the release, which
#: computes them again from the flags (the round trip in the Megatron tier checks it).
CONTAINER_OWN: dict[str, str] = {
    "model.transformer.deallocate_pipeline_outputs": "always true in the container",
    "model.transformer.pipeline_dtype": "the parameters' dtype (--bf16 / --fp16)",
    "model.transformer.bias_activation_fusion":
        "--bias-swiglu-fusion with --swiglu, else --bias-gelu-fusion (both read back)",
    "model.transformer.gated_linear_unit": "--swiglu or --quick-geglu (read back as --swiglu)",
    "model.transformer.is_hybrid_model": "a hybrid layer pattern makes it",
    "model.should_pad_vocab": "whether the vocabulary size is the tokenizer's padded one",
    "ddp.megatron_fsdp_cuda_graph_mode": "Megatron-FSDP with CUDA graphs makes it",
    "ddp.fsdp_all_gather_in_start_param_sync": "whole-iteration CUDA graphs turn it off",
}

#: Container fields a config class's ``__post_init__`` fills when no flag gives them
#: (``None`` in the namespace): field path -> (the field of the same section whose value
#: it copies, or ``None``, and then the constant). Import leaves such a field out where it
#: holds exactly that fill, so the release fills it again (a flag given at that very
#: value is read back as not given: the same launch).
FILLED_FROM_NONE: dict[str, tuple[str | None, Any]] = {
    # TransformerConfig: "By default, use the same init std as ... every other layer"
    "model.transformer.embedding_init_method_std": ("init_method_std", None),
    # ModelParallelConfig: one microbatch group per pipeline stage
    "model.transformer.microbatch_group_size_per_vp_stage":
        ("pipeline_model_parallel_size", None),
    # TransformerConfig: selective recomputation's default module
    "model.transformer.recompute_modules": (None, ["core_attn"]),
}

#: Flags Megatron's builders read into values its YAML then leaves out: functions and spec
#: objects (``ModelConfig.as_dict`` skips what is callable), so no such file carries them.
LEFT_OUT_BY_YAML: dict[str, str] = {
    "spec": "the layer spec becomes a spec object, which to_yaml leaves out "
            "(ModelConfig.as_dict skips callables)",
    "init_method_xavier_uniform": "it makes the init methods functions, which to_yaml "
                                  "leaves out (ModelConfig.as_dict skips callables)",
    "squared_relu": "it picks the activation function, which to_yaml leaves out "
                    "(ModelConfig.as_dict skips callables)",
    "quick_geglu": "it picks the activation function, which to_yaml leaves out (the gated "
                   "linear unit remains, and reads back as --swiglu)",
}

#: What a round trip through a container (flags -> export -> import -> resolve) changes
#: in the namespace, with the no-home flags given again: a setting given -> {a setting
#: that then differs: why}. docs/interop.md ("What the container has no home for, and
#: what is one-way") lists them; the Megatron tier's test_roundtrip_namespace.py leaves
#: exactly these out of its comparison, and only where the given setting is on.
ONE_WAY_SETTINGS: dict[str, dict[str, str]] = {
    "quick_geglu": {"swiglu": "the file holds --quick-geglu's gated linear unit, not its "
                              "activation function: it reads back as --swiglu"},
    # GIVEN_BY: the container holds the stage count the layer count per stage makes
    "num_layers_per_virtual_pipeline_stage": {
        name: "the container holds the virtual stage count: "
              "--num-layers-per-virtual-pipeline-stage reads back as "
              "--num-virtual-stages-per-pipeline-rank (the same layout)"
        for name in ("num_layers_per_virtual_pipeline_stage",
                     "num_virtual_stages_per_pipeline_rank")},
}

#: Megatron's dtype names in the YAML (``{_target_: torch.bfloat16, _call_: false}``) as
#: the flag spellings that choose them.
DTYPE_FLAG_VALUES = {"torch.float32": "fp32", "torch.float": "fp32", "torch.bfloat16": "bf16",
                     "torch.float16": "fp16", "torch.half": "fp16", "torch.uint8": "uint8",
                     "torch.float8_e4m3fn": "e4m3", "torch.float8_e5m2": "e5m2"}

#: The container classes whose YAML this module reads (``_target_`` of the top mapping).
CONTAINER_TARGETS = ("megatron.training.config.container.PretrainConfigContainer",)


class ContainerError(ValueError):
    """A YAML that is not a config container, or an override that does not apply."""


def is_container(data: Any) -> bool:
    """Whether ``data`` (a parsed YAML mapping) is a Megatron config container's."""
    return isinstance(data, dict) and data.get("_target_") in CONTAINER_TARGETS


def fields(data: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Every field of the container, nested configs walked: (dotted path, value). A nested
    config is a mapping with a ``_target_`` that is a class (not a value such as a dtype,
    an enum member or a function)."""
    for name, value in data.items():
        if name.startswith("_"):
            continue
        path = f"{prefix}{name}"
        if isinstance(value, dict) and "_target_" in value and not _is_value(value):
            yield from fields(value, path + ".")
        else:
            yield path, value


def _is_value(node: Mapping[str, Any]) -> bool:
    """A ``_target_`` mapping standing for one value: a dtype, enum member or function
    (Megatron's YAML representers write these with ``_call_``)."""
    return "_call_" in node or "_partial_" in node


def plain(value: Any) -> Any:
    """A YAML value as a flag would give it: a dtype as its flag spelling, an enum member
    as its name, lists element by element."""
    if isinstance(value, list):
        return [plain(item) for item in value]
    if isinstance(value, dict) and "_target_" in value:
        if "_name_" in value:
            return value["_name_"]
        target = str(value["_target_"])
        if target in DTYPE_FLAG_VALUES:
            return DTYPE_FLAG_VALUES[target]
    return value


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> list[str]:
    """Apply Hydra-style overrides, as Bridge's launcher takes them, to ``data`` in place:
    ``a.b=value`` (an existing key), ``+a.b=value`` (a new one), ``~a.b`` (remove it).
    A value is read as a YAML scalar or flow collection (``4``, ``true``, ``null``,
    ``[1, 2]``). Returns the mistakes, one line each (nothing is applied for those)."""
    from megaplug.sources._files import UntrustedInputError, parse_yaml

    mistakes = []
    for override in overrides:
        adding, removing = override.startswith("+"), override.startswith("~")
        body = override[1:] if adding or removing else override
        path, equals, text = body.partition("=")
        if not path or (not removing and not equals) or (removing and equals):
            mistakes.append(f"{override!r} is no override: write key=value, +key=value or ~key")
            continue
        *parents, leaf = path.split(".")
        node: Any = data
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            mistakes.append(f"{override!r}: the container has no section {'.'.join(parents)}")
            continue
        if not adding and leaf not in node:
            mistakes.append(f"{override!r}: {path} is no key of the container"
                            + (_close(leaf, node) or " (+key=value adds one)"))
            continue
        if removing:
            del node[leaf]
            continue
        try:
            node[leaf] = parse_yaml(f"value: {text}", f"override {override!r}")["value"]
        except (UntrustedInputError, TypeError) as exc:
            mistakes.append(str(exc))
    return mistakes


def _close(word: str, node: Mapping[str, Any]) -> str:
    from megaplug._errors import did_you_mean

    return did_you_mean(word, [key for key in node if not key.startswith("_")])


class Settings:
    """A container read back as settings: what each flag-backed field sets, and what was
    left out (``one_way``: field path -> why) or is wrong (``problems``)."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self.origin: dict[str, str] = {}
        self.one_way: dict[str, str] = {}
        self.problems: list[str] = []

    def give(self, dest: str, value: Any, path: str) -> None:
        """``dest`` at ``value``, from the field ``path``; two fields that hold one setting
        (``barrier_with_L1_time`` is in three sections) must agree."""
        if dest in self.values and self.values[dest] != value:
            self.problems.append(f"{path} is {value!r} but {self.origin[dest]} is "
                                 f"{self.values[dest]!r}; both hold {dest}")
            return
        self.values.setdefault(dest, value)
        self.origin.setdefault(dest, path)


def read_settings(data: Mapping[str, Any], settable: Callable[[str], bool]) -> Settings:
    """The settings a container holds. ``settable(dest)`` says whether a setting of that
    name is one a flag sets (the flag table's answer for the target release)."""
    found = Settings()
    model = data.get("model")
    for path, value in fields(data):
        section, _, name = path.rpartition(".")
        if path in RENAMED:
            dest, negated = RENAMED[path]
            found.give(dest, (not value) if negated and isinstance(value, bool) else
                       plain(value), path)
        elif path in GIVEN_BY:
            if value is not None:
                found.give(GIVEN_BY[path], plain(value), path)
        elif path in CONTAINER_OWN:
            found.one_way[path] = CONTAINER_OWN[path]
        elif _filled(data, path, value):
            found.one_way[path] = "the config class fills it from no flag, as here"
        elif section == "model" and name == "vocab_size":
            _vocabulary(found, model, value, path)
        elif settable(name):
            found.give(name, plain(value), path)
        else:
            found.one_way[path] = "no flag of this name; the container computes it"
    if isinstance(model, dict):
        _model_switches(found, model)
    optimizer = data.get("optimizer")
    if isinstance(optimizer, dict) and optimizer.get("use_layer_wise_distributed_optimizer"):
        # --use-distributed-optimizer with an emerging optimizer (muon): the release
        # replaces it by the layer-wise one and turns the element-wise one off
        found.values["use_distributed_optimizer"] = True
        found.origin["use_distributed_optimizer"] = "optimizer.use_layer_wise_distributed_optimizer"
    return found


def _filled(data: Mapping[str, Any], path: str, value: Any) -> bool:
    """Whether the field at ``path`` holds what its config class fills in for no flag."""
    if path not in FILLED_FROM_NONE:
        return False
    source, constant = FILLED_FROM_NONE[path]
    if source is None:
        return bool(value == constant)
    section: Any = data
    for part in path.split(".")[:-1]:
        section = section.get(part) if isinstance(section, dict) else None
    return isinstance(section, dict) and source in section and section[source] == value


def _vocabulary(found: Settings, model: Any, value: Any, path: str) -> None:
    """``model.vocab_size`` is --vocab-size when the container pads it, else the
    tokenizer's padded size (which the tokenizer reproduces)."""
    if isinstance(model, dict) and model.get("should_pad_vocab", True):
        found.give("vocab_size", value, path)
    else:
        found.one_way[path] = "the tokenizer's padded vocabulary size"


def _model_switches(found: Settings, model: Mapping[str, Any]) -> None:
    """The flags the model config holds only through what they make: multi-latent
    attention (its config class), grouped-query attention (a group count other than the
    head count), a gated linear unit (--swiglu: Megatron's YAML leaves out the activation
    function itself, so --quick-geglu reads back as --swiglu)."""
    transformer = model.get("transformer")
    if not isinstance(transformer, dict):
        return
    target = str(transformer.get("_target_", ""))
    if target.endswith(".MLATransformerConfig"):
        found.give("multi_latent_attention", True, "model.transformer._target_")
    groups, heads = transformer.get("num_query_groups"), transformer.get("num_attention_heads")
    if groups is not None and groups != heads:
        found.give("group_query_attention", True, "model.transformer.num_query_groups")
    elif "num_query_groups" in found.values:
        del found.values["num_query_groups"]  # the head count: no groups
        found.one_way["model.transformer.num_query_groups"] = "the head count without GQA"
    if transformer.get("gated_linear_unit"):
        found.give("swiglu", True, "model.transformer.gated_linear_unit")
        if "bias_activation_fusion" in transformer:
            found.give("bias_swiglu_fusion", bool(transformer["bias_activation_fusion"]),
                       "model.transformer.bias_activation_fusion")
    elif "bias_activation_fusion" in transformer:
        found.give("bias_gelu_fusion", bool(transformer["bias_activation_fusion"]),
                   "model.transformer.bias_activation_fusion")
