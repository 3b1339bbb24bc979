"""megaplug as Megatron-LM's ``megatron.training.arguments``.

An entry point switches with one import::

    from megaplug.megatron import parse_and_validate_args
    args = parse_and_validate_args(extra_args_provider, args_defaults={...})

or, leaving Megatron-LM's files untouched, runs through the switch
(``python -m megaplug.megatron pretrain_gpt.py ARGS...``), which puts this module's
functions in place of Megatron's. The namespace has Megatron's keys, values and value
types and pickles into checkpoints like Megatron's; every problem is reported at once
through :class:`ConfigError` (an ``AssertionError``, like Megatron's checks) instead of the
first failing ``assert``. :func:`provenance` says where each value came from.
"""

from ._arguments import (
    _add_autoresume_args,
    _add_biencoder_args,
    _add_checkpointing_args,
    _add_data_args,
    _add_distributed_args,
    _add_experimental_args,
    _add_experimental_attention_variant_args,
    _add_fault_injector_args,
    _add_ft_package_args,
    _add_heterogeneous_args,
    _add_inference_args,
    _add_initialization_args,
    _add_inprocess_restart_args,
    _add_kitchen_quantization_arguments,
    _add_learning_rate_args,
    _add_logging_args,
    _add_logits_distillation_args,
    _add_mixed_precision_args,
    _add_mla_args,
    _add_moe_args,
    _add_msc_args,
    _add_network_size_args,
    _add_one_logger_args,
    _add_regularization_args,
    _add_rerun_machine_args,
    _add_rl_args,
    _add_sft_args,
    _add_straggler_detector_args,
    _add_tokenizer_args,
    _add_training_args,
    _add_transformer_engine_args,
    _add_triton_autotune_args,
    _add_validation_args,
    _add_varlen_dataset_args,
    _add_vision_args,
    _add_wide_residual_args,
    _add_workload_inspector_server_args,
    add_megatron_arguments,
)
from ._facade import (
    ConfigError,
    parse_and_validate_args,
    parse_args,
    provenance,
    resolution_warnings,
    validate_args,
)
from ._helpers import (
    compress_ratios_type,
    la_freq_type,
    moe_freq_type,
    no_rope_freq_type,
    tuple_type,
    validate_model_config_args_from_heterogeneous_config,
)
from ._switch import install
from .._errors import Problem

#: The group adders, by name (what ``megatron.training.arguments`` exports under them).
GROUP_ADDERS = tuple(name for name in dir() if name.startswith("_add_"))

__all__ = [
    "ConfigError",
    "GROUP_ADDERS",
    "Problem",
    "add_megatron_arguments",
    "install",
    "compress_ratios_type",
    "la_freq_type",
    "moe_freq_type",
    "no_rope_freq_type",
    "parse_and_validate_args",
    "parse_args",
    "provenance",
    "resolution_warnings",
    "tuple_type",
    "validate_args",
    "validate_model_config_args_from_heterogeneous_config",
]
