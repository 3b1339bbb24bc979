"""The training plugin's settings, one dataclass per topic, joined in :class:`TrainingOptions`."""


from dataclasses import field
from typing import Literal, Optional

from typing_extensions import Annotated

from megaplug import Computed, Flag, options

from .enums import (
    EXIT_SIGNAL_CHOICES,
    CudaGraphModuleArg,
    parse_cuda_graph_module,
    parse_exit_signal,
)


@options
class BatchOptions:
    """Micro and global batch sizes, and how the global batch grows over training."""

    micro_batch_size: Annotated[Optional[int], Flag(
        help="Samples per GPU per forward/backward pass.")] = None
    global_batch_size: Annotated[Optional[int], Flag(
        help="Samples per optimizer step across all data-parallel ranks; defaults to "
             "micro batch size times the data-parallel size.")] = None
    rampup_batch_size: Annotated[Optional[list[int]], Flag(
        nargs=3,
        help="Grow the global batch from START by INCREMENT over SAMPLES samples.")] = None
    step_batch_size_schedule: Annotated[Optional[str], Flag(
        help="Piecewise-constant global batch schedule such as '0:384 200B:768' "
             "(start token or sample count : batch size).")] = None
    decrease_batch_size_if_needed: Annotated[bool, Flag(
        help="Shrink the global batch to a multiple of micro batch times data-parallel "
             "size when ranks drop out.")] = False
    batch_size: Annotated[Optional[int], Flag(
        help="Retired; use --micro-batch-size.")] = None


@options
class IterationOptions:
    """How long to train, and when to stop early."""

    train_iters: Annotated[Optional[int], Flag(
        help="Total optimizer steps to train for (iteration-based training).")] = None
    train_samples: Annotated[Optional[int], Flag(
        help="Total samples to train on (sample-based training).")] = None
    exit_interval: Annotated[Optional[int], Flag(
        help="Stop after the iteration that is a multiple of this number.")] = None
    exit_duration_in_mins: Annotated[Optional[int], Flag(
        help="Stop after this many minutes of wall-clock time.")] = None
    exit_signal_handler: Annotated[bool, Flag(
        help="Save a checkpoint and stop when the exit signal arrives.")] = False
    exit_signal: Annotated[int, Flag(
        type=parse_exit_signal, choices=EXIT_SIGNAL_CHOICES,
        help="Signal that asks training to save and stop, by name such as SIGTERM or SIGUSR1.")] = 15
    exit_signal_handler_for_dataloader: Annotated[bool, Flag(
        help="Also install the exit-signal handler in data-loader worker processes.")] = False
    exit_signal_handler_for_training: Annotated[bool, Flag(
        help="Install the exit-signal handler in the training process.")] = False
    iterations_to_skip: Annotated[list[int], Flag(
        help="Iterations whose batches are skipped entirely.")] = field(default_factory=list)
    consumed_train_samples: Annotated[int, Computed(
        "Training samples consumed so far (zero until a checkpoint says otherwise).")] = 0
    skipped_train_samples: Annotated[int, Computed(
        "Training samples skipped so far.")] = 0
    consumed_valid_samples: Annotated[int, Computed(
        "Validation samples consumed so far.")] = 0


@options
class HousekeepingOptions:
    """Memory, garbage collection and periodic health checks during training."""

    empty_unused_memory_level: Annotated[Literal[0, 1, 2], Flag(
        help="How eagerly to release cached GPU memory each iteration (0 never, 2 most).")] = 0
    check_weight_hash_across_dp_replicas_interval: Annotated[Optional[int], Flag(
        help="Every this many iterations, check that data-parallel replicas hold equal "
             "weights.")] = None
    gpu_sniff_test_interval: Annotated[Optional[int], Flag(
        help="Every this many iterations, run a short GPU health test.")] = None
    train_sync_interval: Annotated[Optional[int], Flag(
        help="Synchronize the GPU with the host every this many iterations.")] = None
    manual_gc: Annotated[bool, Flag(
        help="Run Python's garbage collector on a fixed schedule instead of automatically.")] = False
    manual_gc_interval: Annotated[int, Flag(
        help="Iterations between manual garbage collections (0 collects only at "
             "checkpoints and evaluation).")] = 0
    manual_gc_eval: Annotated[bool, Flag(
        "--no-manual-gc-eval", "--disable-manual-gc-eval",
        help="Do not collect garbage around evaluation when --manual-gc is on.")] = True
    check_for_nan_in_loss_and_grad: Annotated[bool, Flag(
        "--no-check-for-nan-in-loss-and-grad",
        help="Skip the check for NaN in the loss and gradients.")] = True
    dataloader_type: Annotated[Optional[Literal["single", "cyclic", "external"]], Flag(
        help="Data loader kind: one pass over the data ('single', the default), repeated "
             "shuffled passes ('cyclic'), or supplied by the caller ('external').")] = None
    check_for_large_grads: Annotated[bool, Flag(
        help="Check for unexpectedly large gradients.")] = False
    result_rejected_tracker_filename: Annotated[Optional[str], Flag(
        help="File that records rejected results; its iterations are added to "
             "--iterations-to-skip.")] = None
    cpu_offloading: Annotated[bool, Computed(
        "Whether layer activations are offloaded to CPU (set by --cpu-offloading-num-layers).")] = False


@options
class RecomputeOptions:
    """Activation recomputation and offloading."""

    recompute_granularity: Annotated[Optional[Literal["full", "selective"]], Flag(
        help="Recompute whole layers ('full') or only memory-heavy parts ('selective') in "
             "the backward pass.")] = None
    recompute_method: Annotated[Optional[Literal["uniform", "block"]], Flag(
        help="With full recomputation, recompute evenly spaced groups of layers ('uniform') "
             "or the first layers of each pipeline stage ('block').")] = None
    recompute_num_layers: Annotated[Optional[int], Flag(
        help="Layers per recomputation group (uniform) or per stage (block).")] = None
    distribute_saved_activations: Annotated[bool, Flag(
        help="Shard the activations saved for recomputation across tensor-parallel ranks.")] = False
    recompute_modules: Annotated[Optional[list[str]], Flag(
        help="Submodules to recompute with selective recomputation, such as core_attn, "
             "mlp, moe_act, layernorm.")] = None
    recompute_activations: Annotated[bool, Flag(
        help="Shorthand for --recompute-granularity selective.")] = False
    checkpoint_activations: Annotated[bool, Flag(
        help="Retired; use --recompute-activations or --recompute-granularity.")] = False
    cpu_offloading_num_layers: Annotated[int, Flag(
        help="Number of transformer layers whose activations are offloaded to CPU.")] = 0
    cpu_offloading_retain_pinned_cpu_buffers: Annotated[bool, Flag(
        help="Keep the pinned CPU buffers of offloaded activations between iterations.")] = False
    fine_grained_activation_offloading: Annotated[bool, Flag(
        help="Offload the activations of selected submodules to CPU.")] = False
    offload_modules: Annotated[list[str], Flag(
        help="Submodules whose activations fine-grained offloading moves to CPU.")] = field(
        default_factory=list)
    min_offloaded_tensor_size: Annotated[int, Flag(
        help="Smallest tensor, in elements, that fine-grained offloading moves to CPU.")] = 1048576
    delay_offload_until_cuda_graph: Annotated[bool, Flag(
        help="Start offloading only after CUDA graphs have been captured.")] = False
    delta_offload_bytes_across_pp_ranks: Annotated[int, Flag(
        help="Bytes by which the offload budget changes from one pipeline stage to the "
             "next.")] = 0
    activation_offload_fraction: Annotated[float, Flag(
        help="Fraction of eligible activations that fine-grained offloading moves to CPU.")] = 1.0
    fine_grained_offloading_max_inflight_offloads: Annotated[Optional[int], Flag(
        help="Upper bound on offload copies in flight at once.")] = None


@options
class CudaGraphOptions:
    """CUDA graph capture."""

    enable_cuda_graph: Annotated[bool, Flag(
        help="Retired; use --cuda-graph-impl local.")] = False
    external_cuda_graph: Annotated[bool, Flag(
        help="Retired; use --cuda-graph-impl transformer_engine.")] = False
    cuda_graph_impl: Annotated[Literal["none", "local", "transformer_engine", "full_iteration"], Flag(
        help="How to capture CUDA graphs: not at all, with Megatron's own capture, with "
             "Transformer Engine, or the whole iteration.")] = "none"
    cuda_graph_warmup_steps: Annotated[int, Flag(
        help="Eager iterations to run before capturing CUDA graphs.")] = 3
    cuda_graph_modules: Annotated[list[CudaGraphModuleArg], Flag(
        type=parse_cuda_graph_module, nargs="+",
        help="Parts of each layer to capture (attn, mlp, moe, moe_router, moe_preprocess, "
             "mamba); empty captures the whole layer.")] = field(default_factory=list)
    cuda_graph_scope_deprecated: Annotated[Optional[list[CudaGraphModuleArg]], Flag(
        "--cuda-graph-scope", type=parse_cuda_graph_module, nargs="+", hidden=True,
        help="Retired spelling of --cuda-graph-modules.")] = None


@options
class OptimizerOptions:
    """Which optimizer, its hyperparameters, and where its state lives."""

    optimizer: Annotated[Literal["adam", "sgd", "muon", "dist_muon", "lion", "soap", "adaptive_muon"], Flag(
        help="Optimizer algorithm (dist_muon is retired: use muon with "
             "--use-distributed-optimizer).")] = "adam"
    optimizer_cpu_offload: Annotated[bool, Flag(
        help="Keep optimizer state on the CPU and step it there.")] = False
    optimizer_cuda_graph: Annotated[bool, Flag(
        help="Capture the optimizer step in a CUDA graph.")] = False
    optimizer_offload_fraction: Annotated[float, Flag(
        help="Fraction of the optimizer state to offload to the CPU.")] = 1.0
    use_torch_optimizer_for_cpu_offload: Annotated[bool, Flag(
        help="Step offloaded optimizer state with torch.optim instead of Megatron's optimizer.")] = False
    overlap_cpu_optimizer_d2h_h2d: Annotated[bool, Flag(
        help="Overlap the CPU optimizer step with gradient and parameter copies.")] = False
    use_layer_wise_distributed_optimizer: Annotated[bool, Computed(
        "Whether optimizer state is sharded layer by layer, as the distributed optimizer does "
        "for emerging optimizers such as Muon.")] = False
    dump_param_to_param_group_map: Annotated[Optional[str], Flag(
        help="JSON file that maps parameters to parameter groups.")] = None
    pin_cpu_grads: Annotated[bool, Flag(
        "--no-pin-cpu-grads", help="Do not pin the CPU memory that holds offloaded gradients.")] = True
    pin_cpu_params: Annotated[bool, Flag(
        "--no-pin-cpu-params", help="Do not pin the CPU memory that holds offloaded parameters.")] = True
    weight_decay: Annotated[float, Flag(
        help="L2 weight-decay coefficient.")] = 0.01
    apply_wd_to_qk_layernorm: Annotated[bool, Flag(
        help="Apply weight decay to the query/key layernorm weights too.")] = False
    rmsnorm_weight_decay_mult: Annotated[Optional[float], Flag(
        help="Multiplier on the scheduled weight decay for RMSNorm weights only.")] = None
    clip_grad: Annotated[float, Flag(
        help="Clip gradients to this global L2 norm.")] = 1.0
    adam_beta1: Annotated[float, Flag(help="Adam's first-moment decay rate.")] = 0.9
    adam_beta2: Annotated[float, Flag(help="Adam's second-moment decay rate.")] = 0.999
    adam_eps: Annotated[float, Flag(
        help="Adam's denominator term for numerical stability.")] = 1e-08
    sgd_momentum: Annotated[float, Flag(help="SGD momentum factor.")] = 0.9
    muon_momentum: Annotated[float, Flag(help="Muon momentum factor.")] = 0.9
    muon_split_qkv: Annotated[bool, Flag(
        "--muon-no-split-qkv",
        help="Orthogonalize the fused QKV weight as one matrix in Muon.")] = True
    muon_nesterov: Annotated[bool, Flag(
        help="Use Nesterov momentum in Muon's inner SGD.")] = False
    muon_scale_mode: Annotated[Literal["spectral", "unit_rms_norm", "shape_scaling"], Flag(
        help="How Muon scales its orthogonalized update.")] = "spectral"
    muon_fp32_matmul_prec: Annotated[Literal["low", "medium", "high"], Flag(
        help="FP32 matmul precision for the Newton-Schulz iteration.")] = "medium"
    muon_coefficient_type: Annotated[str, Flag(
        help="Newton-Schulz coefficient set (for example quintic or polar_express).")] = "quintic"
    muon_num_ns_steps: Annotated[int, Flag(
        help="Newton-Schulz steps per Muon update.")] = 5
    muon_tp_mode: Annotated[Literal["blockwise", "duplicated", "distributed"], Flag(
        help="How Muon orthogonalizes tensor-parallel weights.")] = "duplicated"
    muon_ns_batch_size: Annotated[int, Flag(
        help="Largest number of same-shape matrices fused into one Newton-Schulz batch.")] = 1
    muon_use_syrk: Annotated[bool, Flag(
        help="Use the Triton SYRK kernel for Muon's symmetric Newton-Schulz products.")] = False
    muon_concurrent_groups: Annotated[bool, Flag(
        "--muon-no-concurrent-groups",
        help="Run Muon's parameter groups one after another on one CUDA stream.")] = True
    muon_extra_scale_factor: Annotated[float, Flag(
        help="Extra factor applied to the Muon update.")] = 1.0
    muon_scalar_optimizer: Annotated[Literal["adam", "lion"], Flag(
        help="Optimizer for the non-matrix parameters when using Muon.")] = "adam"
    lion_beta1: Annotated[float, Flag(help="Lion's update interpolation factor.")] = 0.95
    lion_beta2: Annotated[float, Flag(help="Lion's momentum decay rate.")] = 0.98
    no_weight_decay_cond_type: Annotated[Optional[Literal["apply_wd_to_qk_layernorm"]], Flag(
        help="Rule that decides which parameters are exempt from weight decay.")] = None


@options
class ScheduleOptions:
    """Learning-rate and weight-decay schedules."""

    lr: Annotated[Optional[float], Flag(
        help="Peak learning rate, reached after warmup.")] = None
    min_lr: Annotated[float, Flag(
        help="Floor the learning-rate schedule never goes below.")] = 0.0
    decoupled_lr: Annotated[Optional[float], Flag(
        help="Separate learning rate for the input embedding and output layer.")] = None
    decoupled_min_lr: Annotated[Optional[float], Flag(
        help="Floor of the decoupled learning rate.")] = None
    warmup: Annotated[Optional[int], Flag(
        help="Retired; use --lr-warmup-fraction, --lr-warmup-iters or --lr-warmup-samples.")] = None
    lr_decay_style: Annotated[Literal["constant", "linear", "cosine", "inverse-square-root", "WSD"], Flag(
        help="Shape of the learning-rate decay after warmup.")] = "linear"
    lr_wsd_decay_style: Annotated[Literal["exponential", "linear", "cosine", "minus_sqrt"], Flag(
        help="Shape of the final decay phase of the WSD schedule.")] = "exponential"
    lr_decay_iters: Annotated[Optional[int], Flag(
        help="Iterations over which the learning rate decays (defaults to --train-iters).")] = None
    lr_decay_samples: Annotated[Optional[int], Flag(
        help="Samples over which the learning rate decays (defaults to --train-samples).")] = None
    lr_wsd_decay_iters: Annotated[Optional[int], Flag(
        help="Iterations in the final decay phase of the WSD schedule.")] = None
    lr_wsd_decay_samples: Annotated[Optional[int], Flag(
        help="Samples in the final decay phase of the WSD schedule.")] = None
    lr_warmup_fraction: Annotated[Optional[float], Flag(
        help="Warm up over this fraction of the decay period.")] = None
    lr_warmup_iters: Annotated[int, Flag(
        help="Iterations of linear learning-rate warmup.")] = 0
    lr_warmup_samples: Annotated[int, Flag(
        help="Samples of linear learning-rate warmup.")] = 0
    lr_warmup_init: Annotated[float, Flag(
        help="Learning rate at the start of warmup.")] = 0.0
    override_opt_param_scheduler: Annotated[bool, Flag(
        "--override-opt_param-scheduler", "--override-opt-param-scheduler",
        help="Use the scheduler settings of this command line, ignoring the checkpoint's.")] = False
    use_checkpoint_opt_param_scheduler: Annotated[bool, Flag(
        "--use-checkpoint-opt_param-scheduler", "--use-checkpoint-opt-param-scheduler",
        help="Use the scheduler settings stored in the checkpoint.")] = False
    start_weight_decay: Annotated[Optional[float], Flag(
        help="Weight decay at the start of a non-constant weight-decay schedule.")] = None
    end_weight_decay: Annotated[Optional[float], Flag(
        help="Weight decay at the end of a non-constant weight-decay schedule.")] = None
    weight_decay_incr_style: Annotated[Literal["constant", "linear", "cosine"], Flag(
        help="How weight decay moves from its start to its end value.")] = "constant"
    freeze_all_layers: Annotated[bool, Flag(
        help="Freeze every layer, so no weight is updated.")] = False


@options
class InitializationOptions:
    """Random seeds and parameter initialization."""

    seed: Annotated[int, Flag(help="Seed for Python, NumPy and torch random generators.")] = 1234
    te_rng_tracker: Annotated[bool, Flag(
        help="Use Transformer Engine's CUDA RNG tracker.")] = False
    data_parallel_random_init: Annotated[bool, Flag(
        help="Initialize each data-parallel replica with different random weights.")] = False
    init_method_xavier_uniform: Annotated[bool, Flag(
        help="Initialize weights with Xavier uniform initialization.")] = False
    perform_initialization: Annotated[bool, Flag(
        "--no-initialization",
        help="Skip weight initialization (for example when a checkpoint is loaded).")] = True
    use_cpu_initialization: Annotated[Optional[bool], Flag(
        action="store_true", help="Initialize weights on the CPU.")] = None
    init_method_std: Annotated[float, Flag(
        help="Standard deviation of the normal weight initialization.")] = 0.02
    embedding_init_method_std: Annotated[Optional[float], Flag(
        help="Standard deviation for embedding initialization (defaults to "
             "--init-method-std).")] = None
    init_model_with_meta_device: Annotated[bool, Flag(
        help="Build the model on the meta device and materialize it later.")] = False


@options
class KernelOptions:
    """Fused kernels, attention implementations and numerics."""

    deterministic_mode: Annotated[bool, Flag(
        help="Use only deterministic algorithms, so reruns give bitwise-equal results.")] = False
    batch_invariant_mode: Annotated[bool, Flag(
        help="Use kernels whose results do not depend on the batch composition.")] = False
    batch_invariant_backend: Annotated[Literal["te_native", "deepgemm", "triton"], Flag(
        help="Kernel library used for batch-invariant mode.")] = "te_native"
    cross_entropy_loss_fusion: Annotated[bool, Flag(
        help="Fuse the cross-entropy loss computation.")] = False
    cross_entropy_fusion_impl: Annotated[Literal["native", "te"], Flag(
        help="Implementation of the fused cross-entropy loss.")] = "native"
    calculate_per_token_loss: Annotated[bool, Flag(
        help="Average the loss over tokens rather than over microbatches.")] = False
    clone_scatter_output_in_embedding: Annotated[bool, Flag(
        "--no-clone-scatter-output-in-embedding", "--disable-clone-scatter-output-in-embedding",
        help="Do not clone the sequence-parallel scatter output in the embedding.")] = True
    mlp_chunks_for_training: Annotated[int, Flag(
        help="Split the MLP computation into this many chunks to save memory.")] = 1
    masked_softmax_fusion: Annotated[bool, Flag(
        "--no-masked-softmax-fusion",
        help="Do not fuse query-key scaling, masking and softmax.")] = True
    bias_gelu_fusion: Annotated[bool, Flag(
        "--no-bias-gelu-fusion", help="Do not fuse bias addition with GeLU.")] = True
    bias_swiglu_fusion: Annotated[bool, Flag(
        "--no-bias-swiglu-fusion", help="Do not fuse bias addition with SwiGLU.")] = True
    bias_dropout_fusion: Annotated[bool, Flag(
        "--no-bias-dropout-fusion", help="Do not fuse bias addition with dropout.")] = True
    apply_rope_fusion: Annotated[bool, Flag(
        "--no-rope-fusion", help="Do not use the fused rotary position embedding kernel.")] = True
    rope_type: Annotated[Optional[Literal["rope", "yarn"]], Flag(
        help="Rotary embedding variant (multi-latent attention defaults to yarn, other "
             "attention to rope).")] = None
    use_flash_attn: Annotated[bool, Flag(
        help="Use the FlashAttention implementation of attention.")] = False
    no_persist_layer_norm: Annotated[bool, Flag(
        help="Do not use the persistent fused layer-norm kernel.")] = False
    gradient_accumulation_fusion: Annotated[bool, Flag(
        "--no-gradient-accumulation-fusion",
        help="Do not fuse gradient accumulation into the weight-gradient GEMM.")] = True
    deprecated_use_mcore_models: Annotated[bool, Flag(
        "--use-mcore-models", deprecated="Megatron Core models are always used; drop the flag",
        help="Ignored: Megatron Core models are the only implementation.")] = False
    tp_comm_overlap_cfg: Annotated[Optional[str], Flag(
        help="YAML file that tunes tensor-parallel communication overlap.")] = None
    config_logger_dir: Annotated[str, Flag(
        help="Directory to dump the configuration objects built at start-up into; empty "
             "disables it.")] = ""


@options
class ProfilingOptions:
    """Profilers and memory snapshots."""

    profile: Annotated[bool, Flag(
        help="Turn on Nsight Systems profiling for the selected steps.")] = False
    profile_step_start: Annotated[int, Flag(help="First iteration to profile.")] = 10
    profile_step_end: Annotated[int, Flag(help="Iteration at which profiling stops.")] = 12
    use_pytorch_profiler: Annotated[bool, Flag(
        help="Profile with the PyTorch profiler instead of Nsight Systems.")] = False
    pytorch_profiler_collect_shapes: Annotated[bool, Flag(
        help="Record tensor shapes in the PyTorch profiler.")] = False
    pytorch_profiler_collect_callstack: Annotated[bool, Flag(
        help="Record Python call stacks in the PyTorch profiler.")] = False
    pytorch_profiler_collect_chakra: Annotated[bool, Flag(
        help="Collect Chakra execution traces with the PyTorch profiler.")] = False
    profile_ranks: Annotated[list[int], Flag(
        help="Global ranks to profile.")] = field(default_factory=list)
    record_memory_history: Annotated[bool, Flag(
        help="Record the CUDA allocator's history for memory snapshots.")] = False
    memory_snapshot_path: Annotated[str, Flag(
        help="File the memory snapshot is written to.")] = "snapshot.pickle"
    record_shapes: Annotated[bool, Flag(
        help="Record operator input shapes while profiling.")] = False
    nvtx_ranges: Annotated[bool, Flag(
        help="Mark model regions with NVTX ranges.")] = False


@options
class RerunOptions:
    """The rerun state machine that checks results for transient faults."""

    rerun_mode: Annotated[Literal["disabled", "validate_results", "report_stats"], Flag(
        help="Whether to rerun suspicious iterations to tell faults from real results.")] = (
        "validate_results")
    error_injection_rate: Annotated[int, Flag(
        help="Inject a fault on average once every this many checks (0 never).")] = 0
    error_injection_type: Annotated[Literal["correct_result", "transient_error", "persistent_error"], Flag(
        help="Kind of fault to inject when testing the rerun engine.")] = "transient_error"
    check_for_spiky_loss: Annotated[bool, Flag(
        help="Check for unexpectedly large loss values.")] = False


@options
class TrainingOptions(
    RerunOptions,
    ProfilingOptions,
    KernelOptions,
    InitializationOptions,
    ScheduleOptions,
    OptimizerOptions,
    CudaGraphOptions,
    RecomputeOptions,
    HousekeepingOptions,
    IterationOptions,
    BatchOptions,
):
    """Every setting of the training plugin."""
