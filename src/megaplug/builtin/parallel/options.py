"""The parallel plugin's settings: model-parallel sizes, pipeline layout, DDP and process groups."""


from dataclasses import field
from typing import Any, Literal, Optional

from typing_extensions import Annotated

from megaplug import Computed, Flag, FromEnv, options


@options
class ParallelOptions:
    """Every setting the parallel plugin declares, derives or reads from the environment."""

    # -- process identity (environment) -------------------------------------------------
    rank: Annotated[int, FromEnv("RANK", help="Global rank of this process.")] = 0
    world_size: Annotated[int, FromEnv("WORLD_SIZE", help="Number of processes in the job.")] = 1

    # -- model-parallel sizes -----------------------------------------------------------
    tensor_model_parallel_size: Annotated[int, Flag(
        help="Number of GPUs each layer's weights are split across (tensor parallelism).")] = 1
    pipeline_model_parallel_size: Annotated[int, Flag(
        help="Number of pipeline stages the layers are divided into.")] = 1
    pipeline_model_parallel_comm_backend: Annotated[Optional[Literal["nccl", "ucc"]], Flag(
        help="Communication backend for pipeline send/receive; none uses the default.")] = None
    context_parallel_size: Annotated[int, Flag(
        help="Number of GPUs each sequence is split across (context parallelism).")] = 1
    hierarchical_context_parallel_sizes: Annotated[Optional[list[int]], Flag(
        help="Sizes of the nested context-parallel groups used by the a2a+p2p "
             "communication type; their product must equal the context-parallel size.")] = None
    max_seqlen_per_dp_cp_rank: Annotated[Optional[int], Flag(
        help="Largest number of tokens one data/context-parallel rank holds when sequences "
             "are packed.")] = None
    hybrid_context_parallel: Annotated[bool, Flag(
        help="Deprecated spelling of --dynamic-context-parallel.")] = False
    dynamic_context_parallel: Annotated[bool, Flag(
        help="Choose a context-parallel group size per packed micro-batch at run time.")] = False
    min_dynamic_context_parallel_size: Annotated[int, Flag(
        help="Smallest context-parallel group size dynamic context parallelism may use.")] = 1
    model_parallel_size: Annotated[Optional[int], Flag(
        help="Retired; use --tensor-model-parallel-size.")] = None
    sequence_parallel: Annotated[bool, Flag(
        help="Split layer-norm and dropout activations along the sequence across the "
             "tensor-parallel group.")] = False

    # -- tensor-parallel communication overlap ------------------------------------------
    tp_comm_overlap: Annotated[bool, Flag(
        help="Overlap tensor-parallel communication with GEMMs (needs sequence "
             "parallelism).")] = False
    tp_comm_bulk_wgrad: Annotated[bool, Flag(
        "--no-tp-comm-bulk-wgrad", "--disable-tp-comm-bulk-wgrad",
        help="Do not overlap the bulk all-gather with the weight-gradient GEMM.")] = True
    tp_comm_bulk_dgrad: Annotated[bool, Flag(
        "--no-tp-comm-bulk-dgrad", "--disable-tp-comm-bulk-dgrad",
        help="Do not overlap the bulk reduce-scatter with the data-gradient GEMM.")] = True
    tp_comm_overlap_ag: Annotated[bool, Flag(
        "--no-tp-comm-overlap-ag", "--disable-tp-comm-overlap-ag",
        help="Do not overlap all-gathers with GEMMs.")] = True
    tp_comm_overlap_rs: Annotated[bool, Flag(
        "--no-tp-comm-overlap-rs", "--disable-tp-comm-overlap-rs",
        help="Do not overlap reduce-scatters with GEMMs.")] = True
    tp_comm_overlap_rs_dgrad: Annotated[bool, Flag(
        help="Overlap the reduce-scatter with the data-gradient GEMM.")] = False
    tp_comm_split_ag: Annotated[bool, Flag(
        "--no-tp-comm-split-ag", "--disable-tp-comm-split-ag",
        help="Use the pipelined instead of the split all-gather overlap.")] = True
    tp_comm_split_rs: Annotated[bool, Flag(
        "--no-tp-comm-split-rs", "--disable-tp-comm-split-rs",
        help="Use the pipelined instead of the split reduce-scatter overlap.")] = True
    tp_comm_bootstrap_backend: Annotated[Literal["nccl", "mpi", "gloo"], Flag(
        help="Backend that bootstraps the userbuffers used for tensor-parallel overlap.")] = "nccl"
    delay_wgrad_compute: Annotated[bool, Flag(
        help="Compute weight gradients later to overlap them with communication.")] = False
    use_ring_exchange_p2p: Annotated[bool, Flag(
        help="Use ring-exchange kernels instead of NCCL for pipeline send/receive.")] = False
    defer_embedding_wgrad_compute: Annotated[bool, Flag(
        help="Defer the output-embedding weight-gradient GEMM on the last pipeline stage.")] = False
    wgrad_deferral_limit: Annotated[int, Flag(
        help="How many micro-batches of embedding weight gradients to defer (0: all).")] = 0
    high_priority_a2a_comm_stream: Annotated[bool, Flag(
        help="Run expert-parallel all-to-all communication on a high-priority stream.")] = False

    # -- pipeline schedule ----------------------------------------------------------------
    overlap_p2p_comm_warmup_flush: Annotated[bool, Flag(
        "--overlap-p2p-communication-warmup-flush",
        help="Also overlap pipeline communication during warm-up and flush.")] = False
    microbatch_group_size_per_vp_stage: Annotated[Optional[int], Flag(
        "--microbatch-group-size-per-virtual-pipeline-stage",
        help="Consecutive micro-batches each virtual pipeline stage runs before switching.")] = None
    account_for_embedding_in_pipeline_split: Annotated[bool, Flag(
        help="Count the input embedding as a layer when splitting layers across stages.")] = False
    account_for_loss_in_pipeline_split: Annotated[bool, Flag(
        help="Count the loss computation as a layer when splitting layers across stages.")] = False
    decoder_first_pipeline_num_layers: Annotated[Optional[int], Flag(
        help="Layers on the first pipeline stage; none splits layers evenly.")] = None
    decoder_last_pipeline_num_layers: Annotated[Optional[int], Flag(
        help="Layers on the last pipeline stage; none splits layers evenly.")] = None
    pipeline_model_parallel_layout: Annotated[Optional[str], Flag(
        help="Explicit layer placement such as 'E|(t|)*3,m|m||L' (E embedding, t layer, "
             "m MTP layer, L loss; '|' ends a stage, '*N' repeats, commas are ignored).")] = None
    num_layers_per_virtual_pipeline_stage: Annotated[Optional[int], Flag(
        help="Layers in each virtual pipeline stage (interleaved schedule).")] = None
    num_virtual_stages_per_pipeline_rank: Annotated[Optional[int], Flag(
        help="Virtual pipeline stages each pipeline rank runs (interleaved schedule).")] = None
    overlap_p2p_comm: Annotated[bool, Flag(
        "--no-overlap-p2p-communication",
        help="Do not overlap pipeline send/receive with compute in the interleaved "
             "schedule.")] = True

    # -- distributed init -----------------------------------------------------------------
    distributed_backend: Annotated[Literal["nccl", "gloo"], Flag(
        help="torch.distributed backend.")] = "nccl"
    distributed_timeout_minutes: Annotated[int, Flag(
        help="Timeout of collective operations during start-up, in minutes.")] = 10
    distributed_timeout_seconds_after_init: Annotated[Optional[int], Flag(
        help="Timeout of collective operations once start-up is done, in seconds.")] = None
    align_grad_reduce: Annotated[bool, Flag(
        "--no-align-grad-reduce", "--disable-align-grad-reduce",
        help="Let each pipeline stage launch its gradient reduce-scatters on its own.")] = True
    local_rank: Annotated[int, Flag(
        env="LOCAL_RANK", help="Rank of this process on its node (defaults to $LOCAL_RANK).")] = 0
    lazy_mpu_init: Annotated[bool, Flag(
        help="Skip process-group creation at start-up; the caller initializes it later.")] = False
    nccl_communicator_config_path: Annotated[Optional[str], Flag(
        help="YAML file with NCCL communicator options per process group.")] = None
    use_tp_pp_dp_mapping: Annotated[bool, Flag(
        help="Order ranks tensor, pipeline, data instead of tensor, data, pipeline.")] = False
    use_gloo_process_groups: Annotated[bool, Flag(
        "--disable-gloo-process-groups",
        help="Do not create Gloo (CPU) process groups.")] = True
    use_sharp: Annotated[bool, Flag(
        help="Use SHARP in-network reductions for data-parallel collectives.")] = False
    sharp_enabled_group: Annotated[Optional[Literal["dp", "dp_replica"]], Flag(
        help="Process group that uses SHARP.")] = None
    high_priority_stream_groups: Annotated[list[str], Flag(
        help="Process groups whose communication runs on high-priority streams.")] = field(
        default_factory=list)
    flight_recorder_dump_path: Annotated[Optional[str], Flag(
        help="Directory for NCCL flight-recorder dumps; none disables them.")] = None
    flight_recorder_trace_buffer_size: Annotated[int, Flag(
        help="Number of collective entries the flight recorder keeps.")] = 2000
    flight_recorder_dump_on_timeout: Annotated[bool, Flag(
        "--no-flight-recorder-dump-on-timeout", "--disable-flight-recorder-dump-on-timeout",
        help="Do not dump the flight recorder when a collective times out.")] = True
    flight_recorder_include_stack_trace: Annotated[bool, Flag(
        help="Record a stack trace with each flight-recorder entry.")] = False
    flight_recorder_include_only_active: Annotated[bool, Flag(
        "--no-flight-recorder-include-only-active",
        "--disable-flight-recorder-include-only-active",
        help="Dump completed as well as in-flight collectives.")] = True
    flight_recorder_extra_dump_on_exec: Annotated[bool, Flag(
        "--no-flight-recorder-extra-dump-on-exec", "--disable-flight-recorder-extra-dump-on-exec",
        help="Do not dump the flight recorder again when an exception is raised.")] = True
    disable_jit_fuser: Annotated[bool, Flag(
        help="Turn off the TorchScript/nvFuser JIT fusion of small kernels.")] = False
    fake_process_group: Annotated[bool, Flag(
        help="Use a fake process group (single-process debugging; no communication).")] = False

    # -- data-parallel training (DDP and distributed optimizer) ---------------------------
    overlap_grad_reduce: Annotated[bool, Flag(
        help="Overlap the data-parallel gradient reduction with the backward pass.")] = False
    ddp_num_buckets: Annotated[Optional[int], Flag(
        help="Number of data-parallel communication buckets.")] = None
    ddp_bucket_size: Annotated[Optional[int], Flag(
        help="Elements per data-parallel communication bucket.")] = None
    ddp_pad_buckets_for_high_nccl_busbw: Annotated[bool, Flag(
        help="Pad buckets to a multiple of 2^16 elements for better NCCL bus bandwidth.")] = False
    ddp_reduce_scatter_with_fp32_accumulation: Annotated[bool, Flag(
        help="Reduce-scatter in low precision over the wire but accumulate locally in "
             "fp32.")] = False
    ddp_param_name_patterns_for_fp32_local_accumulation: Annotated[list[Any], Flag(
        help="fnmatch patterns of parameter names whose gradients accumulate locally in "
             "fp32 ('all' matches every parameter).")] = field(default_factory=list)
    ddp_average_in_collective: Annotated[bool, Flag(
        help="Average gradients inside the data-parallel collective.")] = False
    overlap_param_gather: Annotated[bool, Flag(
        help="Overlap the distributed optimizer's parameter all-gather with compute.")] = False
    overlap_param_gather_with_optimizer_step: Annotated[bool, Flag(
        help="Overlap the first bucket's parameter all-gather with the optimizer step.")] = False
    align_param_gather: Annotated[bool, Flag(
        "--no-align-param-gather",
        help="Let each pipeline stage launch its parameter all-gathers on its own.")] = True
    use_distributed_optimizer: Annotated[bool, Flag(
        help="Shard optimizer state across data-parallel ranks.")] = False
    use_layer_wise_param_layout: Annotated[bool, Flag(
        "--no-use-layer-wise-param-layout",
        help="Use the legacy layer-wise parameter buffer instead of the precomputed "
             "layout.")] = True
    nccl_ub: Annotated[bool, Flag(
        "--use-nccl-ub",
        help="Register data-parallel communication buffers as NCCL user buffers.")] = False
    disable_symmetric_registration: Annotated[bool, Flag(
        help="Register NCCL user buffers locally instead of as symmetric windows.")] = False
    gradient_reduce_div_fusion: Annotated[bool, Flag(
        "--no-gradient-reduce-div-fusion",
        help="Divide gradients separately instead of inside the reduction.")] = True
    num_distributed_optimizer_instances: Annotated[int, Flag(
        help="Number of distributed-optimizer replicas across the data-parallel group.")] = 1
    cp_comm_type: Annotated[list[str], Flag(
        help="Context-parallel communication: p2p, a2a, allgather or a2a+p2p; one value "
             "for all layers or one per layer.")] = field(default_factory=lambda: ["p2p"])

    # -- values derived by this plugin ----------------------------------------------------
    data_parallel_size: Annotated[Optional[int], Computed(
        "Number of model replicas: world size / (TP x PP x CP x GTP weight shards).")] = None
    transformer_pipeline_model_parallel_size: Annotated[Optional[int], Computed(
        "Pipeline stages that hold transformer layers.")] = None
    virtual_pipeline_model_parallel_size: Annotated[Optional[int], Computed(
        "Virtual pipeline stages per pipeline rank; none without the interleaved "
        "schedule.")] = None
