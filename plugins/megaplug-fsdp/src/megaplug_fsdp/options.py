"""The settings of the fsdp plugin: Torch FSDP2 and Megatron-FSDP."""


from typing import Literal, Optional, Union

from typing_extensions import Annotated

from megaplug import Computed, Flag, TorchDType, options

ShardingStrategy = Literal["no_shard", "optim", "optim_grads", "optim_grads_params"]
OuterShardingStrategy = Literal["no_shard", "optim"]

#: A dtype flag: a name from the command line, a torch dtype once derived, None for 'auto'.
DTypeSetting = Union[str, TorchDType, None]

_DTYPE_CHOICES = ("fp32", "bf16", "fp16", "auto")


@options
class FsdpOptions:
    """Flags that select and tune fully sharded data parallelism."""

    use_megatron_fsdp: Annotated[bool, Flag(
        help="Shard parameters, gradients and optimizer state with Megatron-FSDP "
             "(not together with --use-torch-fsdp2).")] = False
    use_torch_fsdp2: Annotated[bool, Flag(
        help="Shard the model with PyTorch's FSDP2 (fully_shard).")] = False
    megatron_fsdp_version: Annotated[Literal[1, 2], Flag(
        help="Which Megatron-FSDP implementation to use.")] = 1
    overlap_outer_communication: Annotated[bool, Flag(
        help="Megatron-FSDP v2: overlap the outer and inner data-parallel gradient "
             "reductions.")] = False
    fsdp_manual_registration: Annotated[bool, Flag(
        help="Register the FSDP communication buffers with NCCL user buffers by hand "
             "(needs --use-megatron-fsdp and --use-nccl-ub).")] = False
    create_all_gather_group: Annotated[bool, Flag(
        help="Use a separate process group for all-gathers so they can overlap "
             "reduce-scatters.")] = False
    data_parallel_sharding_strategy: Annotated[ShardingStrategy, Flag(
        help="What data parallelism shards: nothing, optimizer state, plus gradients, "
             "plus parameters.")] = "optim_grads_params"
    expert_data_parallel_sharding_strategy: Annotated[Optional[ShardingStrategy], Flag(
        help="Sharding strategy for expert (MoE) parameters; unset means the same as "
             "--data-parallel-sharding-strategy.")] = None
    outer_dp_sharding_strategy: Annotated[OuterShardingStrategy, Flag(
        help="Sharding of the outer data-parallel group in hybrid sharded data parallel: "
             "replicate (no_shard) or shard optimizer state (optim).")] = "no_shard"
    expert_outer_dp_sharding_strategy: Annotated[Optional[OuterShardingStrategy], Flag(
        help="Megatron-FSDP v2: sharding of the outer expert data-parallel group; unset "
             "means the same as --outer-dp-sharding-strategy.")] = None
    hfsdp_param_gather_overlap: Annotated[bool, Flag(
        help="Prefetch outer data-parallel parameter all-gathers one FSDP unit ahead of the "
             "inner ones (with --outer-dp-sharding-strategy optim).")] = False
    fsdp_double_buffer: Annotated[bool, Flag(
        help="Reuse two preallocated buffers for Megatron-FSDP communication instead of "
             "allocating new ones.")] = False
    suggested_communication_unit_size: Annotated[Optional[int], Flag(
        help="Elements per FSDP communication; larger values grow the buffer and enable "
             "all-gather prefetching.")] = None
    keep_fp8_transpose_cache: Annotated[bool, Flag(
        help="Keep the FP8 transpose cache when using Megatron-FSDP.")] = False
    enable_full_sharding_in_hsdp: Annotated[bool, Flag(
        help="Shard fully inside Megatron-FSDP's hybrid sharded data parallel mode.")] = False
    torch_fsdp2_reshard_after_forward: Annotated[bool, Flag(
        "--torch-fsdp2-no-reshard-after-forward",
        help="Keep FSDP2 weights gathered after the forward pass (ZeRO-2 style).")] = True
    megatron_fsdp_main_params_dtype: Annotated[DTypeSetting, Flag(
        choices=_DTYPE_CHOICES,
        help="Dtype of Megatron-FSDP's main weight buffer; auto keeps the model's "
             "parameter dtype.")] = "fp32"
    megatron_fsdp_main_grads_dtype: Annotated[DTypeSetting, Flag(
        choices=_DTYPE_CHOICES,
        help="Dtype of Megatron-FSDP's main gradient buffer; auto keeps the model's "
             "gradient dtype.")] = "auto"
    megatron_fsdp_grad_comm_dtype: Annotated[DTypeSetting, Flag(
        choices=("fp32", "fp16", "bf16", "auto"),
        help="Dtype Megatron-FSDP communicates gradients in; auto uses the main gradient "
             "dtype.")] = "auto"
    megatron_fsdp_padded_shards: Annotated[bool, Flag(
        "--no-megatron-fsdp-padded-shards",
        help="Megatron-FSDP v2: pack parameter groups without padding, giving ranks "
             "unequal shards.")] = True
    megatron_fsdp_enable_fine_grained_param_gather: Annotated[bool, Flag(
        help="Gather Megatron-FSDP parameters in finer pieces to overlap more with the "
             "forward pass, at the cost of more communication calls.")] = False
    megatron_fsdp_max_pool_double_buffer: Annotated[bool, Flag(
        help="Use the max-pool allocator for Megatron-FSDP double buffering, for FSDP units "
             "of unequal sizes (implies --fsdp-double-buffer).")] = False
    fsdp_db_use_persist_buf_on_alloc_fail: Annotated[bool, Flag(
        help="With Megatron-FSDP double buffering, keep modules outside the buffer pool in "
             "persistent buffers.")] = False
    use_custom_fsdp: Annotated[Optional[bool], Computed(
        "Legacy alias set when Megatron-FSDP is used; absent otherwise.")] = None
