"""The parallel plugin's settings: model-parallel sizes, pipeline layout, DDP and process groups."""


from typing import Annotated, Any, Literal, Optional

from megaplug import Computed, Flag, FromEnv, options


@options
class ParallelOptions:
    """Every setting the parallel plugin declares, derives or reads from the environment."""

    # -- process identity (environment) -------------------------------------------------
    rank: int = FromEnv("RANK", help="Global rank of this process.", default=0)
    world_size: int = FromEnv("WORLD_SIZE", help="Number of processes in the job.", default=1)

    # -- model-parallel sizes -----------------------------------------------------------
    tensor_model_parallel_size: int = Flag(
        default=1,
        help="Number of GPUs each layer's weights are split across (tensor parallelism).")
    pipeline_model_parallel_size: int = Flag(
        default=1,
        help="Number of pipeline stages the layers are divided into.")
    pipeline_model_parallel_comm_backend: Optional[Literal["nccl", "ucc"]] = Flag(
        default=None,
        help="Communication backend for pipeline send/receive; none uses the default.")
    context_parallel_size: int = Flag(
        default=1,
        help="Number of GPUs each sequence is split across (context parallelism).")
    hierarchical_context_parallel_sizes: Optional[list[int]] = Flag(
        default=None,
        help="Sizes of the nested context-parallel groups used by the a2a+p2p "
             "communication type; their product must equal the context-parallel size.")
    max_seqlen_per_dp_cp_rank: Optional[int] = Flag(
        default=None,
        help="Largest number of tokens one data/context-parallel rank holds when sequences "
             "are packed.")
    hybrid_context_parallel: bool = Flag(
        default=False,
        help="Deprecated spelling of --dynamic-context-parallel.")
    dynamic_context_parallel: bool = Flag(
        default=False,
        help="Choose a context-parallel group size per packed micro-batch at run time.")
    min_dynamic_context_parallel_size: int = Flag(
        default=1,
        help="Smallest context-parallel group size dynamic context parallelism may use.")
    model_parallel_size: Optional[int] = Flag(
        default=None,
        help="Retired; use --tensor-model-parallel-size.")
    sequence_parallel: bool = Flag(
        default=False,
        help="Split layer-norm and dropout activations along the sequence across the "
             "tensor-parallel group.")

    # -- tensor-parallel communication overlap ------------------------------------------
    tp_comm_overlap: bool = Flag(
        default=False,
        help="Overlap tensor-parallel communication with GEMMs (needs sequence "
             "parallelism).")
    tp_comm_bulk_wgrad: bool = Flag(
        "--no-tp-comm-bulk-wgrad", "--disable-tp-comm-bulk-wgrad", default=True,
        help="Do not overlap the bulk all-gather with the weight-gradient GEMM.")
    tp_comm_bulk_dgrad: bool = Flag(
        "--no-tp-comm-bulk-dgrad", "--disable-tp-comm-bulk-dgrad", default=True,
        help="Do not overlap the bulk reduce-scatter with the data-gradient GEMM.")
    tp_comm_overlap_ag: bool = Flag(
        "--no-tp-comm-overlap-ag", "--disable-tp-comm-overlap-ag", default=True,
        help="Do not overlap all-gathers with GEMMs.")
    tp_comm_overlap_rs: bool = Flag(
        "--no-tp-comm-overlap-rs", "--disable-tp-comm-overlap-rs", default=True,
        help="Do not overlap reduce-scatters with GEMMs.")
    tp_comm_overlap_rs_dgrad: bool = Flag(
        default=False,
        help="Overlap the reduce-scatter with the data-gradient GEMM.")
    tp_comm_split_ag: bool = Flag(
        "--no-tp-comm-split-ag", "--disable-tp-comm-split-ag", default=True,
        help="Use the pipelined instead of the split all-gather overlap.")
    tp_comm_split_rs: bool = Flag(
        "--no-tp-comm-split-rs", "--disable-tp-comm-split-rs", default=True,
        help="Use the pipelined instead of the split reduce-scatter overlap.")
    tp_comm_bootstrap_backend: Literal["nccl", "mpi", "gloo"] = Flag(
        default="nccl",
        help="Backend that bootstraps the userbuffers used for tensor-parallel overlap.")
    delay_wgrad_compute: bool = Flag(
        default=False,
        help="Compute weight gradients later to overlap them with communication.")
    use_ring_exchange_p2p: bool = Flag(
        default=False,
        help="Use ring-exchange kernels instead of NCCL for pipeline send/receive.")
    defer_embedding_wgrad_compute: bool = Flag(
        default=False,
        help="Defer the output-embedding weight-gradient GEMM on the last pipeline stage.")
    wgrad_deferral_limit: int = Flag(
        default=0,
        help="How many micro-batches of embedding weight gradients to defer (0: all).")
    high_priority_a2a_comm_stream: bool = Flag(
        default=False,
        help="Run expert-parallel all-to-all communication on a high-priority stream.")

    # -- pipeline schedule ----------------------------------------------------------------
    overlap_p2p_comm_warmup_flush: bool = Flag(
        "--overlap-p2p-communication-warmup-flush", default=False,
        help="Also overlap pipeline communication during warm-up and flush.")
    microbatch_group_size_per_vp_stage: Optional[int] = Flag(
        "--microbatch-group-size-per-virtual-pipeline-stage", default=None,
        help="Consecutive micro-batches each virtual pipeline stage runs before switching.")
    account_for_embedding_in_pipeline_split: bool = Flag(
        default=False,
        help="Count the input embedding as a layer when splitting layers across stages.")
    account_for_loss_in_pipeline_split: bool = Flag(
        default=False,
        help="Count the loss computation as a layer when splitting layers across stages.")
    decoder_first_pipeline_num_layers: Optional[int] = Flag(
        default=None,
        help="Layers on the first pipeline stage; none splits layers evenly.")
    decoder_last_pipeline_num_layers: Optional[int] = Flag(
        default=None,
        help="Layers on the last pipeline stage; none splits layers evenly.")
    pipeline_model_parallel_layout: Optional[str] = Flag(
        default=None,
        help="Explicit layer placement such as 'E|(t|)*3,m|m||L' (E embedding, t layer, "
             "m MTP layer, L loss; '|' ends a stage, '*N' repeats, commas are ignored).")
    num_layers_per_virtual_pipeline_stage: Optional[int] = Flag(
        default=None,
        help="Layers in each virtual pipeline stage (interleaved schedule).")
    num_virtual_stages_per_pipeline_rank: Optional[int] = Flag(
        default=None,
        help="Virtual pipeline stages each pipeline rank runs (interleaved schedule).")
    overlap_p2p_comm: bool = Flag(
        "--no-overlap-p2p-communication", default=True,
        help="Do not overlap pipeline send/receive with compute in the interleaved "
             "schedule.")

    # -- distributed init -----------------------------------------------------------------
    distributed_backend: Literal["nccl", "gloo"] = Flag(
        default="nccl",
        help="torch.distributed backend.")
    distributed_timeout_minutes: int = Flag(
        default=10,
        help="Timeout of collective operations during start-up, in minutes.")
    distributed_timeout_seconds_after_init: Optional[int] = Flag(
        default=None,
        help="Timeout of collective operations once start-up is done, in seconds.")
    align_grad_reduce: bool = Flag(
        "--no-align-grad-reduce", "--disable-align-grad-reduce", default=True,
        help="Let each pipeline stage launch its gradient reduce-scatters on its own.")
    local_rank: int = Flag(
        default=0,
        env="LOCAL_RANK", help="Rank of this process on its node (defaults to $LOCAL_RANK).")
    lazy_mpu_init: bool = Flag(
        default=False,
        help="Skip process-group creation at start-up; the caller initializes it later.")
    nccl_communicator_config_path: Optional[str] = Flag(
        default=None,
        help="YAML file with NCCL communicator options per process group.")
    use_tp_pp_dp_mapping: bool = Flag(
        default=False,
        help="Order ranks tensor, pipeline, data instead of tensor, data, pipeline.")
    use_gloo_process_groups: bool = Flag(
        "--disable-gloo-process-groups", default=True,
        help="Do not create Gloo (CPU) process groups.")
    use_sharp: bool = Flag(
        default=False,
        help="Use SHARP in-network reductions for data-parallel collectives.")
    sharp_enabled_group: Optional[Literal["dp", "dp_replica"]] = Flag(
        default=None,
        help="Process group that uses SHARP.")
    high_priority_stream_groups: Annotated[list[str], Flag(
        help="Process groups whose communication runs on high-priority streams.")] = []
    flight_recorder_dump_path: Optional[str] = Flag(
        default=None,
        help="Directory for NCCL flight-recorder dumps; none disables them.")
    flight_recorder_trace_buffer_size: int = Flag(
        default=2000,
        help="Number of collective entries the flight recorder keeps.")
    flight_recorder_dump_on_timeout: bool = Flag(
        "--no-flight-recorder-dump-on-timeout", "--disable-flight-recorder-dump-on-timeout",
        default=True,
        help="Do not dump the flight recorder when a collective times out.")
    flight_recorder_include_stack_trace: bool = Flag(
        default=False,
        help="Record a stack trace with each flight-recorder entry.")
    flight_recorder_include_only_active: bool = Flag(
        "--no-flight-recorder-include-only-active",
        "--disable-flight-recorder-include-only-active", default=True,
        help="Dump completed as well as in-flight collectives.")
    flight_recorder_extra_dump_on_exec: bool = Flag(
        "--no-flight-recorder-extra-dump-on-exec", "--disable-flight-recorder-extra-dump-on-exec",
        default=True,
        help="Do not dump the flight recorder again when an exception is raised.")
    disable_jit_fuser: bool = Flag(
        default=False,
        help="Turn off the TorchScript/nvFuser JIT fusion of small kernels.")
    fake_process_group: bool = Flag(
        default=False,
        help="Use a fake process group (single-process debugging; no communication).")

    # -- data-parallel training (DDP and distributed optimizer) ---------------------------
    overlap_grad_reduce: bool = Flag(
        default=False,
        help="Overlap the data-parallel gradient reduction with the backward pass.")
    ddp_num_buckets: Optional[int] = Flag(
        default=None,
        help="Number of data-parallel communication buckets.")
    ddp_bucket_size: Optional[int] = Flag(
        default=None,
        help="Elements per data-parallel communication bucket.")
    ddp_pad_buckets_for_high_nccl_busbw: bool = Flag(
        default=False,
        help="Pad buckets to a multiple of 2^16 elements for better NCCL bus bandwidth.")
    ddp_reduce_scatter_with_fp32_accumulation: bool = Flag(
        default=False,
        help="Reduce-scatter in low precision over the wire but accumulate locally in "
             "fp32.")
    ddp_param_name_patterns_for_fp32_local_accumulation: Annotated[list[Any], Flag(
        help="fnmatch patterns of parameter names whose gradients accumulate locally in "
             "fp32 ('all' matches every parameter).")] = []
    ddp_average_in_collective: bool = Flag(
        default=False,
        help="Average gradients inside the data-parallel collective.")
    overlap_param_gather: bool = Flag(
        default=False,
        help="Overlap the distributed optimizer's parameter all-gather with compute.")
    overlap_param_gather_with_optimizer_step: bool = Flag(
        default=False,
        help="Overlap the first bucket's parameter all-gather with the optimizer step.")
    align_param_gather: bool = Flag(
        "--no-align-param-gather", default=True,
        help="Let each pipeline stage launch its parameter all-gathers on its own.")
    use_distributed_optimizer: bool = Flag(
        default=False,
        help="Shard optimizer state across data-parallel ranks.")
    use_layer_wise_param_layout: bool = Flag(
        "--no-use-layer-wise-param-layout", default=True,
        help="Use the legacy layer-wise parameter buffer instead of the precomputed "
             "layout.")
    nccl_ub: bool = Flag(
        "--use-nccl-ub", default=False,
        help="Register data-parallel communication buffers as NCCL user buffers.")
    disable_symmetric_registration: bool = Flag(
        default=False,
        help="Register NCCL user buffers locally instead of as symmetric windows.")
    gradient_reduce_div_fusion: bool = Flag(
        "--no-gradient-reduce-div-fusion", default=True,
        help="Divide gradients separately instead of inside the reduction.")
    num_distributed_optimizer_instances: int = Flag(
        default=1,
        help="Number of distributed-optimizer replicas across the data-parallel group.")
    cp_comm_type: Annotated[list[str], Flag(
        help="Context-parallel communication: p2p, a2a, allgather or a2a+p2p; one value "
             "for all layers or one per layer.")] = ["p2p"]

    # -- values derived by this plugin ----------------------------------------------------
    data_parallel_size: Optional[int] = Computed(
        "Number of model replicas: world size / (TP x PP x CP x GTP weight shards).", default=None)
    transformer_pipeline_model_parallel_size: Optional[int] = Computed(
        "Pipeline stages that hold transformer layers.", default=None)
    virtual_pipeline_model_parallel_size: Optional[int] = Computed(
        "Virtual pipeline stages per pipeline rank; none without the interleaved "
        "schedule.", default=None)
