"""The training plugin's settings, one dataclass per topic, joined in :class:`TrainingOptions`."""

import signal
from typing import Annotated, Literal, Optional

from megaplug import Computed, Flag, float_or_infinity, options

from .enums import (
    EXIT_SIGNAL_CHOICES,
    CudaGraphModuleArg,
    parse_cuda_graph_module,
    parse_exit_signal,
)


@options
class BatchOptions:
    """Micro and global batch sizes, and how the global batch grows over training."""

    micro_batch_size: Optional[int] = Flag(
        default=None,
        help="Samples per GPU per forward/backward pass.")
    global_batch_size: Optional[int] = Flag(
        default=None,
        help="Samples per optimizer step across all data-parallel ranks; defaults to "
             "micro batch size times the data-parallel size.")
    rampup_batch_size: Optional[list[int]] = Flag(
        default=None,
        nargs=3,
        help="Grow the global batch from START by INCREMENT over SAMPLES samples.")
    step_batch_size_schedule: Optional[str] = Flag(
        default=None,
        help="Piecewise-constant global batch schedule such as '0:384 200B:768' "
             "(start token or sample count : batch size).")
    decrease_batch_size_if_needed: bool = Flag(
        default=False,
        help="Shrink the global batch to a multiple of micro batch times data-parallel "
             "size when ranks drop out.")
    batch_size: Optional[int] = Flag(default=None, help="Retired; use --micro-batch-size.")


@options
class IterationOptions:
    """How long to train, and when to stop early."""

    train_iters: Optional[int] = Flag(
        default=None,
        help="Total optimizer steps to train for (iteration-based training).")
    train_samples: Optional[int] = Flag(
        default=None,
        help="Total samples to train on (sample-based training).")
    exit_interval: Optional[int] = Flag(
        default=None,
        help="Stop after the iteration that is a multiple of this number.")
    exit_duration_in_mins: Optional[int] = Flag(
        default=None,
        help="Stop after this many minutes of wall-clock time.")
    exit_signal_handler: bool = Flag(
        default=False,
        help="Save a checkpoint and stop when the exit signal arrives.")
    exit_signal: int = Flag(
        default=signal.SIGTERM,
        type=parse_exit_signal, choices=EXIT_SIGNAL_CHOICES,
        help="Signal that asks training to save and stop, by name such as SIGTERM or SIGUSR1.")
    exit_signal_handler_for_dataloader: bool = Flag(
        default=False,
        help="Also install the exit-signal handler in data-loader worker processes.")
    exit_signal_handler_for_training: bool = Flag(
        default=False,
        help="Install the exit-signal handler in the training process.")
    iterations_to_skip: Annotated[list[int], Flag(
        help="Iterations whose batches are skipped entirely.")] = []
    consumed_train_samples: int = Computed(
        "Training samples consumed so far (zero until a checkpoint says otherwise).", default=0)
    skipped_train_samples: int = Computed(
        "Training samples skipped so far.", default=0)
    consumed_valid_samples: int = Computed(
        "Validation samples consumed so far.", default=0)


@options
class HousekeepingOptions:
    """Memory, garbage collection and periodic health checks during training."""

    empty_unused_memory_level: Literal[0, 1, 2] = Flag(
        default=0,
        help="How eagerly to release cached GPU memory each iteration (0 never, 2 most).")
    check_weight_hash_across_dp_replicas_interval: Optional[int] = Flag(
        default=None,
        help="Every this many iterations, check that data-parallel replicas hold equal "
             "weights.")
    gpu_sniff_test_interval: Optional[int] = Flag(
        default=None,
        help="Every this many iterations, run a short GPU health test.")
    train_sync_interval: Optional[int] = Flag(
        default=None,
        help="Synchronize the GPU with the host every this many iterations.")
    manual_gc: bool = Flag(
        default=False,
        help="Run Python's garbage collector on a fixed schedule instead of automatically.")
    manual_gc_interval: int = Flag(
        default=0,
        help="Iterations between manual garbage collections (0 collects only at "
             "checkpoints and evaluation).")
    manual_gc_eval: bool = Flag(
        "--no-manual-gc-eval", "--disable-manual-gc-eval", default=True,
        help="Do not collect garbage around evaluation when --manual-gc is on.")
    check_for_nan_in_loss_and_grad: bool = Flag(
        "--no-check-for-nan-in-loss-and-grad", default=True,
        help="Skip the check for NaN in the loss and gradients.")
    dataloader_type: Optional[Literal["single", "cyclic", "external"]] = Flag(
        default=None,
        help="Data loader kind: one pass over the data ('single', the default), repeated "
             "shuffled passes ('cyclic'), or supplied by the caller ('external').")
    check_for_large_grads: bool = Flag(
        default=False,
        help="Check for unexpectedly large gradients.")
    result_rejected_tracker_filename: Optional[str] = Flag(
        default=None,
        help="File that records rejected results; its iterations are added to "
             "--iterations-to-skip.")
    cpu_offloading: bool = Computed(
        "Whether layer activations are offloaded to CPU (set by --cpu-offloading-num-layers).",
        default=False)


@options
class RecomputeOptions:
    """Activation recomputation and offloading."""

    recompute_granularity: Optional[Literal["full", "selective"]] = Flag(
        default=None,
        help="Recompute whole layers ('full') or only memory-heavy parts ('selective') in "
             "the backward pass.")
    recompute_method: Optional[Literal["uniform", "block"]] = Flag(
        default=None,
        help="With full recomputation, recompute evenly spaced groups of layers ('uniform') "
             "or the first layers of each pipeline stage ('block').")
    recompute_num_layers: Optional[int] = Flag(
        default=None,
        help="Layers per recomputation group (uniform) or per stage (block).")
    distribute_saved_activations: bool = Flag(
        default=False,
        help="Shard the activations saved for recomputation across tensor-parallel ranks.")
    recompute_modules: Optional[list[str]] = Flag(
        default=None,
        help="Submodules to recompute with selective recomputation, such as core_attn, "
             "mlp, moe_act, layernorm.")
    recompute_activations: bool = Flag(
        default=False,
        help="Shorthand for --recompute-granularity selective.")
    checkpoint_activations: bool = Flag(
        default=False,
        help="Retired; use --recompute-activations or --recompute-granularity.")
    cpu_offloading_num_layers: int = Flag(
        default=0,
        help="Number of transformer layers whose activations are offloaded to CPU.")
    cpu_offloading_retain_pinned_cpu_buffers: bool = Flag(
        default=False,
        help="Keep the pinned CPU buffers of offloaded activations between iterations.")
    fine_grained_activation_offloading: bool = Flag(
        default=False,
        help="Offload the activations of selected submodules to CPU.")
    offload_modules: Annotated[list[str], Flag(
        help="Submodules whose activations fine-grained offloading moves to CPU.")] = []
    min_offloaded_tensor_size: int = Flag(
        default=1048576,
        help="Smallest tensor, in elements, that fine-grained offloading moves to CPU.")
    delay_offload_until_cuda_graph: bool = Flag(
        default=False,
        help="Start offloading only after CUDA graphs have been captured.")
    delta_offload_bytes_across_pp_ranks: int = Flag(
        default=0,
        help="Bytes by which the offload budget changes from one pipeline stage to the "
             "next.")
    activation_offload_fraction: float = Flag(
        default=1.0,
        help="Fraction of eligible activations that fine-grained offloading moves to CPU.")
    fine_grained_offloading_max_inflight_offloads: Optional[int] = Flag(
        default=None,
        help="Upper bound on offload copies in flight at once.")


@options
class CudaGraphOptions:
    """CUDA graph capture."""

    enable_cuda_graph: bool = Flag(default=False, help="Retired; use --cuda-graph-impl local.")
    external_cuda_graph: bool = Flag(
        default=False,
        help="Retired; use --cuda-graph-impl transformer_engine.")
    cuda_graph_impl: Literal["none", "local", "transformer_engine", "full_iteration"] = Flag(
        default="none",
        help="How to capture CUDA graphs: not at all, with Megatron's own capture, with "
             "Transformer Engine, or the whole iteration.")
    cuda_graph_warmup_steps: int = Flag(
        default=3,
        help="Eager iterations to run before capturing CUDA graphs.")
    cuda_graph_modules: Annotated[list[CudaGraphModuleArg], Flag(
        type=parse_cuda_graph_module, nargs="+",
        help="Parts of each layer to capture (attn, mlp, moe, moe_router, moe_preprocess, "
             "mamba); empty captures the whole layer.")] = []
    cuda_graph_scope_deprecated: Optional[list[CudaGraphModuleArg]] = Flag(
        "--cuda-graph-scope", default=None, type=parse_cuda_graph_module, nargs="+", hidden=True,
        help="Retired spelling of --cuda-graph-modules.")


@options
class OptimizerOptions:
    """Which optimizer, its hyperparameters, and where its state lives."""

    optimizer: Literal["adam", "sgd", "muon", "dist_muon", "lion", "soap", "adaptive_muon"] = Flag(
        default="adam",
        help="Optimizer algorithm (dist_muon is retired: use muon with "
             "--use-distributed-optimizer).")
    optimizer_cpu_offload: bool = Flag(
        default=False,
        help="Keep optimizer state on the CPU and step it there.")
    optimizer_cuda_graph: bool = Flag(
        default=False,
        help="Capture the optimizer step in a CUDA graph.")
    optimizer_offload_fraction: float = Flag(
        default=1.0,
        help="Fraction of the optimizer state to offload to the CPU.")
    use_torch_optimizer_for_cpu_offload: bool = Flag(
        default=False,
        help="Step offloaded optimizer state with torch.optim instead of Megatron's optimizer.")
    overlap_cpu_optimizer_d2h_h2d: bool = Flag(
        default=False,
        help="Overlap the CPU optimizer step with gradient and parameter copies.")
    use_layer_wise_distributed_optimizer: bool = Computed(
        "Whether optimizer state is sharded layer by layer, as the distributed optimizer does "
        "for emerging optimizers such as Muon.", default=False)
    dump_param_to_param_group_map: Optional[str] = Flag(
        default=None,
        help="JSON file that maps parameters to parameter groups.")
    pin_cpu_grads: bool = Flag(
        "--no-pin-cpu-grads", default=True,
        help="Do not pin the CPU memory that holds offloaded gradients.")
    pin_cpu_params: bool = Flag(
        "--no-pin-cpu-params", default=True,
        help="Do not pin the CPU memory that holds offloaded parameters.")
    weight_decay: float = Flag(default=0.01, help="L2 weight-decay coefficient.")
    apply_wd_to_qk_layernorm: bool = Flag(
        default=False,
        help="Apply weight decay to the query/key layernorm weights too.")
    rmsnorm_weight_decay_mult: Optional[float] = Flag(
        default=None,
        help="Multiplier on the scheduled weight decay for RMSNorm weights only.")
    clip_grad: float = Flag(default=1.0, type=float_or_infinity,
                            help="Clip gradients to this global L2 norm (inf: measure the "
                                 "norm, never clip).")
    adam_beta1: float = Flag(default=0.9, help="Adam's first-moment decay rate.")
    adam_beta2: float = Flag(default=0.999, help="Adam's second-moment decay rate.")
    adam_eps: float = Flag(default=1e-08, help="Adam's denominator term for numerical stability.")
    sgd_momentum: float = Flag(default=0.9, help="SGD momentum factor.")
    muon_momentum: float = Flag(default=0.9, help="Muon momentum factor.")
    muon_split_qkv: bool = Flag(
        "--muon-no-split-qkv", default=True,
        help="Orthogonalize the fused QKV weight as one matrix in Muon.")
    muon_nesterov: bool = Flag(default=False, help="Use Nesterov momentum in Muon's inner SGD.")
    muon_scale_mode: Literal["spectral", "unit_rms_norm", "shape_scaling"] = Flag(
        default="spectral",
        help="How Muon scales its orthogonalized update.")
    muon_fp32_matmul_prec: Literal["low", "medium", "high"] = Flag(
        default="medium",
        help="FP32 matmul precision for the Newton-Schulz iteration.")
    muon_coefficient_type: str = Flag(
        default="quintic",
        help="Newton-Schulz coefficient set (for example quintic or polar_express).")
    muon_num_ns_steps: int = Flag(default=5, help="Newton-Schulz steps per Muon update.")
    muon_tp_mode: Literal["blockwise", "duplicated", "distributed"] = Flag(
        default="duplicated",
        help="How Muon orthogonalizes tensor-parallel weights.")
    muon_ns_batch_size: int = Flag(
        default=1,
        help="Largest number of same-shape matrices fused into one Newton-Schulz batch.")
    muon_use_syrk: bool = Flag(
        default=False,
        help="Use the Triton SYRK kernel for Muon's symmetric Newton-Schulz products.")
    muon_concurrent_groups: bool = Flag(
        "--muon-no-concurrent-groups", default=True,
        help="Run Muon's parameter groups one after another on one CUDA stream.")
    muon_extra_scale_factor: float = Flag(
        default=1.0,
        help="Extra factor applied to the Muon update.")
    muon_scalar_optimizer: Literal["adam", "lion"] = Flag(
        default="adam",
        help="Optimizer for the non-matrix parameters when using Muon.")
    lion_beta1: float = Flag(default=0.95, help="Lion's update interpolation factor.")
    lion_beta2: float = Flag(default=0.98, help="Lion's momentum decay rate.")
    no_weight_decay_cond_type: Optional[Literal["apply_wd_to_qk_layernorm"]] = Flag(
        default=None,
        help="Rule that decides which parameters are exempt from weight decay.")


@options
class ScheduleOptions:
    """Learning-rate and weight-decay schedules."""

    lr: Optional[float] = Flag(default=None, help="Peak learning rate, reached after warmup.")
    min_lr: float = Flag(default=0.0, help="Floor the learning-rate schedule never goes below.")
    decoupled_lr: Optional[float] = Flag(
        default=None,
        help="Separate learning rate for the input embedding and output layer.")
    decoupled_min_lr: Optional[float] = Flag(
        default=None,
        help="Floor of the decoupled learning rate.")
    warmup: Optional[int] = Flag(
        default=None,
        help="Retired; use --lr-warmup-fraction, --lr-warmup-iters or --lr-warmup-samples.")
    lr_decay_style: Literal["constant", "linear", "cosine", "inverse-square-root", "WSD"] = Flag(
        default="linear",
        help="Shape of the learning-rate decay after warmup.")
    lr_wsd_decay_style: Literal["exponential", "linear", "cosine", "minus_sqrt"] = Flag(
        default="exponential",
        help="Shape of the final decay phase of the WSD schedule.")
    lr_decay_iters: Optional[int] = Flag(
        default=None,
        help="Iterations over which the learning rate decays (defaults to --train-iters).")
    lr_decay_samples: Optional[int] = Flag(
        default=None,
        help="Samples over which the learning rate decays (defaults to --train-samples).")
    lr_wsd_decay_iters: Optional[int] = Flag(
        default=None,
        help="Iterations in the final decay phase of the WSD schedule.")
    lr_wsd_decay_samples: Optional[int] = Flag(
        default=None,
        help="Samples in the final decay phase of the WSD schedule.")
    lr_warmup_fraction: Optional[float] = Flag(
        default=None,
        help="Warm up over this fraction of the decay period.")
    lr_warmup_iters: int = Flag(default=0, help="Iterations of linear learning-rate warmup.")
    lr_warmup_samples: int = Flag(default=0, help="Samples of linear learning-rate warmup.")
    lr_warmup_init: float = Flag(default=0.0, help="Learning rate at the start of warmup.")
    override_opt_param_scheduler: bool = Flag(
        "--override-opt_param-scheduler", "--override-opt-param-scheduler", default=False,
        help="Use the scheduler settings of this command line, ignoring the checkpoint's.")
    use_checkpoint_opt_param_scheduler: bool = Flag(
        "--use-checkpoint-opt_param-scheduler", "--use-checkpoint-opt-param-scheduler",
        default=False,
        help="Use the scheduler settings stored in the checkpoint.")
    start_weight_decay: Optional[float] = Flag(
        default=None,
        help="Weight decay at the start of a non-constant weight-decay schedule.")
    end_weight_decay: Optional[float] = Flag(
        default=None,
        help="Weight decay at the end of a non-constant weight-decay schedule.")
    weight_decay_incr_style: Literal["constant", "linear", "cosine"] = Flag(
        default="constant",
        help="How weight decay moves from its start to its end value.")
    freeze_all_layers: bool = Flag(
        default=False,
        help="Freeze every layer, so no weight is updated.")


@options
class InitializationOptions:
    """Random seeds and parameter initialization."""

    seed: int = Flag(default=1234, help="Seed for Python, NumPy and torch random generators.")
    te_rng_tracker: bool = Flag(default=False, help="Use Transformer Engine's CUDA RNG tracker.")
    data_parallel_random_init: bool = Flag(
        default=False,
        help="Initialize each data-parallel replica with different random weights.")
    init_method_xavier_uniform: bool = Flag(
        default=False,
        help="Initialize weights with Xavier uniform initialization.")
    perform_initialization: bool = Flag(
        "--no-initialization", default=True,
        help="Skip weight initialization (for example when a checkpoint is loaded).")
    use_cpu_initialization: Optional[bool] = Flag(
        default=None,
        action="store_true", help="Initialize weights on the CPU.")
    init_method_std: float = Flag(
        default=0.02,
        help="Standard deviation of the normal weight initialization.")
    embedding_init_method_std: Optional[float] = Flag(
        default=None,
        help="Standard deviation for embedding initialization (defaults to "
             "--init-method-std).")
    init_model_with_meta_device: bool = Flag(
        default=False,
        help="Build the model on the meta device and materialize it later.")


@options
class KernelOptions:
    """Fused kernels, attention implementations and numerics."""

    deterministic_mode: bool = Flag(
        default=False,
        help="Use only deterministic algorithms, so reruns give bitwise-equal results.")
    batch_invariant_mode: bool = Flag(
        default=False,
        help="Use kernels whose results do not depend on the batch composition.")
    batch_invariant_backend: Literal["te_native", "deepgemm", "triton"] = Flag(
        default="te_native",
        help="Kernel library used for batch-invariant mode.")
    cross_entropy_loss_fusion: bool = Flag(
        default=False,
        help="Fuse the cross-entropy loss computation.")
    cross_entropy_fusion_impl: Literal["native", "te"] = Flag(
        default="native",
        help="Implementation of the fused cross-entropy loss.")
    calculate_per_token_loss: bool = Flag(
        default=False,
        help="Average the loss over tokens rather than over microbatches.")
    clone_scatter_output_in_embedding: bool = Flag(
        "--no-clone-scatter-output-in-embedding", "--disable-clone-scatter-output-in-embedding",
        default=True,
        help="Do not clone the sequence-parallel scatter output in the embedding.")
    mlp_chunks_for_training: int = Flag(
        default=1,
        help="Split the MLP computation into this many chunks to save memory.")
    masked_softmax_fusion: bool = Flag(
        "--no-masked-softmax-fusion", default=True,
        help="Do not fuse query-key scaling, masking and softmax.")
    bias_gelu_fusion: bool = Flag(
        "--no-bias-gelu-fusion", default=True, help="Do not fuse bias addition with GeLU.")
    bias_swiglu_fusion: bool = Flag(
        "--no-bias-swiglu-fusion", default=True, help="Do not fuse bias addition with SwiGLU.")
    bias_dropout_fusion: bool = Flag(
        "--no-bias-dropout-fusion", default=True, help="Do not fuse bias addition with dropout.")
    apply_rope_fusion: bool = Flag(
        "--no-rope-fusion", default=True,
        help="Do not use the fused rotary position embedding kernel.")
    rope_type: Optional[Literal["rope", "yarn"]] = Flag(
        default=None,
        help="Rotary embedding variant (multi-latent attention defaults to yarn, other "
             "attention to rope).")
    use_flash_attn: bool = Flag(
        default=False,
        help="Use the FlashAttention implementation of attention.")
    no_persist_layer_norm: bool = Flag(
        default=False,
        help="Do not use the persistent fused layer-norm kernel.")
    gradient_accumulation_fusion: bool = Flag(
        "--no-gradient-accumulation-fusion", default=True,
        help="Do not fuse gradient accumulation into the weight-gradient GEMM.")
    deprecated_use_mcore_models: bool = Flag(
        "--use-mcore-models", default=False,
        deprecated="Megatron Core models are always used; drop the flag",
        help="Ignored: Megatron Core models are the only implementation.")
    tp_comm_overlap_cfg: Optional[str] = Flag(
        default=None,
        help="YAML file that tunes tensor-parallel communication overlap.")
    config_logger_dir: str = Flag(
        default="",
        help="Directory to dump the configuration objects built at start-up into; empty "
             "disables it.")


@options
class ProfilingOptions:
    """Profilers and memory snapshots."""

    profile: bool = Flag(
        default=False,
        help="Turn on Nsight Systems profiling for the selected steps.")
    profile_step_start: int = Flag(default=10, help="First iteration to profile.")
    profile_step_end: int = Flag(default=12, help="Iteration at which profiling stops.")
    use_pytorch_profiler: bool = Flag(
        default=False,
        help="Profile with the PyTorch profiler instead of Nsight Systems.")
    pytorch_profiler_collect_shapes: bool = Flag(
        default=False,
        help="Record tensor shapes in the PyTorch profiler.")
    pytorch_profiler_collect_callstack: bool = Flag(
        default=False,
        help="Record Python call stacks in the PyTorch profiler.")
    pytorch_profiler_collect_chakra: bool = Flag(
        default=False,
        help="Collect Chakra execution traces with the PyTorch profiler.")
    profile_ranks: Annotated[list[int], Flag(
        help="Global ranks to profile.")] = []
    record_memory_history: bool = Flag(
        default=False,
        help="Record the CUDA allocator's history for memory snapshots.")
    memory_snapshot_path: str = Flag(
        default="snapshot.pickle",
        help="File the memory snapshot is written to.")
    record_shapes: bool = Flag(default=False, help="Record operator input shapes while profiling.")
    nvtx_ranges: bool = Flag(default=False, help="Mark model regions with NVTX ranges.")


@options
class RerunOptions:
    """The rerun state machine that checks results for transient faults."""

    rerun_mode: Literal["disabled", "validate_results", "report_stats"] = Flag(
        default="validate_results",
        help="Whether to rerun suspicious iterations to tell faults from real results.")
    error_injection_rate: int = Flag(
        default=0,
        help="Inject a fault on average once every this many checks (0 never).")
    error_injection_type: Literal["correct_result", "transient_error", "persistent_error"] = Flag(
        default="transient_error",
        help="Kind of fault to inject when testing the rerun engine.")
    check_for_spiky_loss: bool = Flag(
        default=False,
        help="Check for unexpectedly large loss values.")


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
