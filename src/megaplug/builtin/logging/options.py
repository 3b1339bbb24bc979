"""The logging plugin's settings: logging, TensorBoard and W&B, timers, validation, one logger
and OpenTelemetry."""


from typing import List, Literal, Optional


from megaplug import Flag, options


@options
class ValidationOptions:
    """When and how much to evaluate."""

    eval_iters: int = Flag(
        default=100,
        help="Iterations of each evaluation on the validation (and test) set.")
    eval_interval: Optional[int] = Flag(
        default=None,
        help="Evaluate on the validation set every this many iterations.")
    start_eval_at_iter: Optional[int] = Flag(
        default=None,
        help="Do not evaluate before this iteration.")
    eval_global_batch_size: Optional[int] = Flag(
        default=None,
        help="Global batch size of evaluation (defaults to --global-batch-size).")
    eval_micro_batch_size: Optional[int] = Flag(
        default=None,
        help="Micro batch size of evaluation (defaults to --micro-batch-size).")
    skip_train: bool = Flag(
        default=False,
        help="Only evaluate: skip training (and do not load the optimizer state).")
    test_mode: bool = Flag(default=False, help="Run the short functional-test mode.")
    full_validation: bool = Flag(
        default=False,
        help="Evaluate on the whole validation set instead of --eval-iters batches.")
    multiple_validation_sets: bool = Flag(
        default=False,
        help="Evaluate each validation dataset separately.")
    validation_set_names: Optional[List[str]] = Flag(
        default=None,
        help="Names reported for the validation sets, in order.")


@options
class LogOptions:
    """Console logging, timers, TensorBoard and Weights & Biases."""

    log_interval: int = Flag(default=100, help="Log progress every this many iterations.")
    log_params_norm: bool = Flag(default=False, help="Log the norm of the parameters.")
    log_throughput: bool = Flag(default=False, help="Log the throughput per GPU.")
    log_progress: bool = Flag(
        default=False,
        help="Write job progress (tokens, floating-point operations) to progress.txt in the "
             "checkpoint directory.")
    timing_log_level: Literal[0, 1, 2] = Flag(
        default=0,
        help="Granularity of the timers logged: 0 the iteration only, up to 2 every "
             "operation.")
    timing_log_option: Literal["max", "minmax", "all"] = Flag(
        default="minmax",
        help="How timer values are reduced across ranks: the maximum, the range, or every "
             "rank.")
    tensorboard_dir: Optional[str] = Flag(default=None, help="Directory for TensorBoard logs.")
    tensorboard_log_interval: int = Flag(
        default=1,
        help="Write TensorBoard scalars every this many iterations.")
    tensorboard_queue_size: int = Flag(
        default=1000,
        help="Pending TensorBoard events held in memory before they are flushed.")
    log_timers_to_tensorboard: bool = Flag(default=False, help="Write timers to TensorBoard.")
    log_loss_scale_to_tensorboard: bool = Flag(
        "--no-log-loss-scale-to-tensorboard", "--disable-log-loss-scale-to-tensorboard",
        default=True,
        help="Do not write the loss scale to TensorBoard.")
    log_validation_ppl_to_tensorboard: bool = Flag(
        default=False,
        help="Write validation perplexity to TensorBoard.")
    log_memory_to_tensorboard: bool = Flag(default=False, help="Write memory usage to TensorBoard.")
    log_memory_interval: Optional[int] = Flag(
        default=None,
        help="Log memory usage every this many iterations.")
    log_device_memory_used: bool = Flag(
        default=False,
        help="Log the device memory in use as the driver reports it.")
    log_num_zeros_in_grad: bool = Flag(
        default=False,
        help="Log the number of zeros in the gradients.")
    log_max_attention_logit: bool = Flag(
        default=False,
        help="Log the largest attention logit (needs Transformer Engine 2.9 or newer).")
    barrier_with_L1_time: bool = Flag(
        "--no-barrier-with-level-1-timing", default=True,
        help="Do not synchronize ranks before level-1 timers (faster, less accurate).")
    log_world_size_to_tensorboard: bool = Flag(
        default=False,
        help="Write the world size to TensorBoard.")
    wandb_project: Optional[str] = Flag(
        default=None,
        help="Weights & Biases project; setting it turns W&B logging on.")
    wandb_exp_name: Optional[str] = Flag(default=None, help="Weights & Biases run name.")
    wandb_save_dir: Optional[str] = Flag(
        default=None,
        help="Local directory for Weights & Biases files.")
    wandb_entity: Optional[str] = Flag(
        default=None,
        help="Weights & Biases team or user owning the project.")
    logging_level: Optional[int] = Flag(
        default=None,
        help="Python logging level of Megatron's loggers (e.g. 20 for INFO).")
    log_energy: bool = Flag(default=False, help="Log the energy used by the GPUs.")


@options
class TelemetryOptions:
    """NVIDIA one logger and OpenTelemetry tracing."""

    enable_one_logger: bool = Flag(
        "--no-one-logger", default=True, help="Do not report run metrics to NVIDIA's one logger.")
    one_logger_project: str = Flag(default="megatron-lm", help="One logger project name.")
    one_logger_run_name: Optional[str] = Flag(default=None, help="One logger run name.")
    one_logger_async: bool = Flag(default=False, help="Send one logger metrics asynchronously.")
    app_tag_run_name: Optional[str] = Flag(
        default=None,
        help="Job name used to group runs in one logger's application tags.")
    app_tag_run_version: str = Flag(
        default="0.0.0",
        help="Version reported in one logger's application tags.")
    otel_enabled: bool = Flag(default=False, help="Emit OpenTelemetry traces.")
    otel_service_name: Optional[str] = Flag(
        default=None,
        help="Service name attached to the OpenTelemetry traces.")
    otel_span_groups: Optional[str] = Flag(
        default=None,
        help="Comma-separated groups of spans to trace.")


@options
class LoggingOptions(ValidationOptions, LogOptions, TelemetryOptions):
    """Every setting of the logging plugin."""
