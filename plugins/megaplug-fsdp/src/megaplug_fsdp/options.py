"""The settings of the fsdp plugin: Torch FSDP2 and Megatron-FSDP."""


from typing import Literal, Optional, Union


from megaplug import Computed, Flag, TorchDType, options

ShardingStrategy = Literal["no_shard", "optim", "optim_grads", "optim_grads_params"]
OuterShardingStrategy = Literal["no_shard", "optim"]

#: A dtype flag: a name from the command line, a torch dtype once derived, None for 'auto'.
DTypeSetting = Union[str, TorchDType, None]

_DTYPE_CHOICES = ("fp32", "bf16", "fp16", "auto")


@options
class FsdpOptions:
    """Flags that select and tune fully sharded data parallelism."""

    use_megatron_fsdp: bool = Flag(
        default=False,
        help="Shard parameters, gradients and optimizer state with Megatron-FSDP "
             "(not together with --use-torch-fsdp2).")
    use_torch_fsdp2: bool = Flag(
        default=False,
        help="Shard the model with PyTorch's FSDP2 (fully_shard).")
    megatron_fsdp_version: Literal[1, 2] = Flag(
        default=1,
        help="Which Megatron-FSDP implementation to use.")
    overlap_outer_communication: bool = Flag(
        default=False,
        help="Megatron-FSDP v2: overlap the outer and inner data-parallel gradient "
             "reductions.")
    fsdp_manual_registration: bool = Flag(
        default=False,
        help="Register the FSDP communication buffers with NCCL user buffers by hand "
             "(needs --use-megatron-fsdp and --use-nccl-ub).")
    create_all_gather_group: bool = Flag(
        default=False,
        help="Use a separate process group for all-gathers so they can overlap "
             "reduce-scatters.")
    data_parallel_sharding_strategy: ShardingStrategy = Flag(
        default="optim_grads_params",
        help="What data parallelism shards: nothing, optimizer state, plus gradients, "
             "plus parameters.")
    expert_data_parallel_sharding_strategy: Optional[ShardingStrategy] = Flag(
        default=None,
        help="Sharding strategy for expert (MoE) parameters; unset means the same as "
             "--data-parallel-sharding-strategy.")
    outer_dp_sharding_strategy: OuterShardingStrategy = Flag(
        default="no_shard",
        help="Sharding of the outer data-parallel group in hybrid sharded data parallel: "
             "replicate (no_shard) or shard optimizer state (optim).")
    expert_outer_dp_sharding_strategy: Optional[OuterShardingStrategy] = Flag(
        default=None,
        help="Megatron-FSDP v2: sharding of the outer expert data-parallel group; unset "
             "means the same as --outer-dp-sharding-strategy.")
    hfsdp_param_gather_overlap: bool = Flag(
        default=False,
        help="Prefetch outer data-parallel parameter all-gathers one FSDP unit ahead of the "
             "inner ones (with --outer-dp-sharding-strategy optim).")
    fsdp_double_buffer: bool = Flag(
        default=False,
        help="Reuse two preallocated buffers for Megatron-FSDP communication instead of "
             "allocating new ones.")
    suggested_communication_unit_size: Optional[int] = Flag(
        default=None,
        help="Elements per FSDP communication; larger values grow the buffer and enable "
             "all-gather prefetching.")
    keep_fp8_transpose_cache: bool = Flag(
        default=False,
        help="Keep the FP8 transpose cache when using Megatron-FSDP.")
    enable_full_sharding_in_hsdp: bool = Flag(
        default=False,
        help="Shard fully inside Megatron-FSDP's hybrid sharded data parallel mode.")
    torch_fsdp2_reshard_after_forward: bool = Flag(
        "--torch-fsdp2-no-reshard-after-forward", default=True,
        help="Keep FSDP2 weights gathered after the forward pass (ZeRO-2 style).")
    megatron_fsdp_main_params_dtype: DTypeSetting = Flag(
        default="fp32",
        choices=_DTYPE_CHOICES,
        help="Dtype of Megatron-FSDP's main weight buffer; auto keeps the model's "
             "parameter dtype.")
    megatron_fsdp_main_grads_dtype: DTypeSetting = Flag(
        default="auto",
        choices=_DTYPE_CHOICES,
        help="Dtype of Megatron-FSDP's main gradient buffer; auto keeps the model's "
             "gradient dtype.")
    megatron_fsdp_grad_comm_dtype: DTypeSetting = Flag(
        default="auto",
        choices=("fp32", "fp16", "bf16", "auto"),
        help="Dtype Megatron-FSDP communicates gradients in; auto uses the main gradient "
             "dtype.")
    megatron_fsdp_padded_shards: bool = Flag(
        "--no-megatron-fsdp-padded-shards", default=True,
        help="Megatron-FSDP v2: pack parameter groups without padding, giving ranks "
             "unequal shards.")
    megatron_fsdp_enable_fine_grained_param_gather: bool = Flag(
        default=False,
        help="Gather Megatron-FSDP parameters in finer pieces to overlap more with the "
             "forward pass, at the cost of more communication calls.")
    megatron_fsdp_max_pool_double_buffer: bool = Flag(
        default=False,
        help="Use the max-pool allocator for Megatron-FSDP double buffering, for FSDP units "
             "of unequal sizes (implies --fsdp-double-buffer).")
    fsdp_db_use_persist_buf_on_alloc_fail: bool = Flag(
        default=False,
        help="With Megatron-FSDP double buffering, keep modules outside the buffer pool in "
             "persistent buffers.")
    use_custom_fsdp: Optional[bool] = Computed(
        "Legacy alias set when Megatron-FSDP is used; absent otherwise.", default=None)
