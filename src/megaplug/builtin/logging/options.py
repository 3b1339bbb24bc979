"""The logging plugin's settings: logging, TensorBoard and W&B, timers, validation, one logger
and OpenTelemetry."""


from typing import List, Literal, Optional

from typing_extensions import Annotated

from megaplug import Flag, options


@options
class ValidationOptions:
    """When and how much to evaluate."""

    eval_iters: Annotated[int, Flag(
        help="Iterations of each evaluation on the validation (and test) set.")] = 100
    eval_interval: Annotated[Optional[int], Flag(
        help="Evaluate on the validation set every this many iterations.")] = None
    start_eval_at_iter: Annotated[Optional[int], Flag(
        help="Do not evaluate before this iteration.")] = None
    eval_global_batch_size: Annotated[Optional[int], Flag(
        help="Global batch size of evaluation (defaults to --global-batch-size).")] = None
    eval_micro_batch_size: Annotated[Optional[int], Flag(
        help="Micro batch size of evaluation (defaults to --micro-batch-size).")] = None
    skip_train: Annotated[bool, Flag(
        help="Only evaluate: skip training (and do not load the optimizer state).")] = False
    test_mode: Annotated[bool, Flag(help="Run the short functional-test mode.")] = False
    full_validation: Annotated[bool, Flag(
        help="Evaluate on the whole validation set instead of --eval-iters batches.")] = False
    multiple_validation_sets: Annotated[bool, Flag(
        help="Evaluate each validation dataset separately.")] = False
    validation_set_names: Annotated[Optional[List[str]], Flag(
        help="Names reported for the validation sets, in order.")] = None


@options
class LogOptions:
    """Console logging, timers, TensorBoard and Weights & Biases."""

    log_interval: Annotated[int, Flag(help="Log progress every this many iterations.")] = 100
    log_params_norm: Annotated[bool, Flag(help="Log the norm of the parameters.")] = False
    log_throughput: Annotated[bool, Flag(help="Log the throughput per GPU.")] = False
    log_progress: Annotated[bool, Flag(
        help="Write job progress (tokens, floating-point operations) to progress.txt in the "
             "checkpoint directory.")] = False
    timing_log_level: Annotated[Literal[0, 1, 2], Flag(
        help="Granularity of the timers logged: 0 the iteration only, up to 2 every "
             "operation.")] = 0
    timing_log_option: Annotated[Literal["max", "minmax", "all"], Flag(
        help="How timer values are reduced across ranks: the maximum, the range, or every "
             "rank.")] = "minmax"
    tensorboard_dir: Annotated[Optional[str], Flag(
        help="Directory for TensorBoard logs.")] = None
    tensorboard_log_interval: Annotated[int, Flag(
        help="Write TensorBoard scalars every this many iterations.")] = 1
    tensorboard_queue_size: Annotated[int, Flag(
        help="Pending TensorBoard events held in memory before they are flushed.")] = 1000
    log_timers_to_tensorboard: Annotated[bool, Flag(help="Write timers to TensorBoard.")] = False
    log_loss_scale_to_tensorboard: Annotated[bool, Flag(
        "--no-log-loss-scale-to-tensorboard", "--disable-log-loss-scale-to-tensorboard",
        help="Do not write the loss scale to TensorBoard.")] = True
    log_validation_ppl_to_tensorboard: Annotated[bool, Flag(
        help="Write validation perplexity to TensorBoard.")] = False
    log_memory_to_tensorboard: Annotated[bool, Flag(
        help="Write memory usage to TensorBoard.")] = False
    log_memory_interval: Annotated[Optional[int], Flag(
        help="Log memory usage every this many iterations.")] = None
    log_device_memory_used: Annotated[bool, Flag(
        help="Log the device memory in use as the driver reports it.")] = False
    log_num_zeros_in_grad: Annotated[bool, Flag(
        help="Log the number of zeros in the gradients.")] = False
    log_max_attention_logit: Annotated[bool, Flag(
        help="Log the largest attention logit (needs Transformer Engine 2.9 or newer).")] = False
    barrier_with_L1_time: Annotated[bool, Flag(
        "--no-barrier-with-level-1-timing",
        help="Do not synchronize ranks before level-1 timers (faster, less accurate).")] = True
    log_world_size_to_tensorboard: Annotated[bool, Flag(
        help="Write the world size to TensorBoard.")] = False
    wandb_project: Annotated[Optional[str], Flag(
        help="Weights & Biases project; setting it turns W&B logging on.")] = None
    wandb_exp_name: Annotated[Optional[str], Flag(help="Weights & Biases run name.")] = None
    wandb_save_dir: Annotated[Optional[str], Flag(
        help="Local directory for Weights & Biases files.")] = None
    wandb_entity: Annotated[Optional[str], Flag(
        help="Weights & Biases team or user owning the project.")] = None
    logging_level: Annotated[Optional[int], Flag(
        help="Python logging level of Megatron's loggers (e.g. 20 for INFO).")] = None
    log_energy: Annotated[bool, Flag(help="Log the energy used by the GPUs.")] = False


@options
class TelemetryOptions:
    """NVIDIA one logger and OpenTelemetry tracing."""

    enable_one_logger: Annotated[bool, Flag(
        "--no-one-logger", help="Do not report run metrics to NVIDIA's one logger.")] = True
    one_logger_project: Annotated[str, Flag(help="One logger project name.")] = "megatron-lm"
    one_logger_run_name: Annotated[Optional[str], Flag(help="One logger run name.")] = None
    one_logger_async: Annotated[bool, Flag(
        help="Send one logger metrics asynchronously.")] = False
    app_tag_run_name: Annotated[Optional[str], Flag(
        help="Job name used to group runs in one logger's application tags.")] = None
    app_tag_run_version: Annotated[str, Flag(
        help="Version reported in one logger's application tags.")] = "0.0.0"
    otel_enabled: Annotated[bool, Flag(help="Emit OpenTelemetry traces.")] = False
    otel_service_name: Annotated[Optional[str], Flag(
        help="Service name attached to the OpenTelemetry traces.")] = None
    otel_span_groups: Annotated[Optional[str], Flag(
        help="Comma-separated groups of spans to trace.")] = None


@options
class LoggingOptions(ValidationOptions, LogOptions, TelemetryOptions):
    """Every setting of the logging plugin."""
