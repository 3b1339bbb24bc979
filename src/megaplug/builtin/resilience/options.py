"""The resilience plugin's settings: autoresume, in-process restart, fault tolerance,
straggler detection, workload inspector, fault injection and the multi-storage client."""


from typing import Literal, Optional

from typing_extensions import Annotated

from megaplug import Flag, options


@options
class RestartOptions:
    """Autoresume and NVIDIA Resiliency Extension's in-process restart."""

    adlr_autoresume: Annotated[bool, Flag(
        help="Checkpoint and exit when the ADLR cluster's autoresume asks to.")] = False
    adlr_autoresume_interval: Annotated[int, Flag(
        help="Check for an autoresume request every this many iterations.")] = 1000
    inprocess_restart: Annotated[bool, Flag(
        help="Restart training inside the running processes after a fault (needs "
             "nvidia-resiliency-ext).")] = False
    inprocess_max_iterations: Annotated[Optional[int], Flag(
        help="Most in-process restarts before the job gives up.")] = None
    inprocess_monitor_thread_interval: Annotated[float, Flag(
        help="Seconds between checks of the in-process monitoring thread.")] = 1.0
    inprocess_monitor_process_interval: Annotated[float, Flag(
        help="Seconds between checks of the in-process monitoring process.")] = 1.0
    inprocess_progress_watchdog_interval: Annotated[float, Flag(
        help="Seconds between automatic updates of the progress watchdog timestamp.")] = 1.0
    inprocess_heartbeat_interval: Annotated[float, Flag(
        help="Seconds between heartbeats used to detect unresponsive ranks.")] = 30
    inprocess_soft_timeout: Annotated[float, Flag(
        help="Seconds without progress before a soft timeout.")] = 60
    inprocess_hard_timeout: Annotated[float, Flag(
        help="Seconds without progress before ranks are killed.")] = 90
    inprocess_heartbeat_timeout: Annotated[float, Flag(
        help="Seconds without a heartbeat before a rank counts as missing.")] = 60
    inprocess_barrier_timeout: Annotated[float, Flag(
        help="Seconds allowed for the restart's internal distributed barrier.")] = 120
    inprocess_completion_timeout: Annotated[float, Flag(
        help="Seconds allowed for the completion barrier across all ranks.")] = 120
    inprocess_last_call_wait: Annotated[float, Flag(
        help="Seconds to collect further terminal failures from other ranks.")] = 1
    inprocess_termination_grace_time: Annotated[float, Flag(
        help="Seconds between SIGTERM and SIGKILL on a hard timeout.")] = 1
    inprocess_granularity: Annotated[Literal["node", "rank"], Flag(
        help="Whether a fault restarts the whole node or only the rank.")] = "node"
    inprocess_active_world_size: Annotated[int, Flag(
        help="Ranks that start the workload, the rest being warm spares (defaults to "
             "WORLD_SIZE).")] = 1
    inprocess_empty_cuda_cache: Annotated[bool, Flag(
        help="Release the cached, unused GPU memory on every in-process restart.")] = False


@options
class MonitoringOptions:
    """Fault tolerance, straggler detection and the workload inspector."""

    enable_ft_package: Annotated[bool, Flag(
        help="Enable the fault tolerance package of nvidia-resiliency-ext (NVIDIA internal).")] = False
    calc_ft_timeouts: Annotated[bool, Flag(
        help="Let the fault tolerance package compute its timeouts (NVIDIA internal).")] = False
    ft_num_warmup_iters: Annotated[int, Flag(
        help="Iterations excluded from fault tolerance timeouts while the job warms up.")] = 5
    log_straggler: Annotated[bool, Flag(
        help="Detect and log straggling ranks (GPU throughput and timing outliers).")] = False
    straggler_ctrlr_port: Annotated[int, Flag(
        help="Port of the straggler detector's control server.")] = 65535
    straggler_minmax_count: Annotated[int, Flag(
        help="Number of slowest and fastest ranks reported by straggler detection.")] = 1
    disable_straggler_on_startup: Annotated[bool, Flag(
        help="Start with straggler detection off (it can be switched on later).")] = False
    run_workload_inspector_server: Annotated[bool, Flag(
        help="Run the workload inspector server for on-demand profiling.")] = False


@options
class FaultInjectorOptions:
    """Deliberate faults, to test the resilience machinery."""

    fault_injector_ranks: Annotated[Optional[str], Flag(
        help="Comma-separated ranks that may receive injected faults.")] = None
    fault_injector_num_ranks: Annotated[Optional[int], Flag(
        help="Number of randomly chosen ranks that may receive injected faults.")] = None
    fault_injector_fault_types: Annotated[Optional[str], Flag(
        help="Comma-separated kinds of fault to inject.")] = None
    fault_injector_fault_probabilities: Annotated[Optional[str], Flag(
        help="Comma-separated probabilities of the fault kinds, in the same order.")] = None
    fault_injector_fault_delay: Annotated[Optional[float], Flag(
        help="Seconds to wait before injecting a fault.")] = None
    fault_injector_delay_start_iteration: Annotated[Optional[int], Flag(
        help="Iteration from which the fault delay starts counting.")] = None
    fault_injector_mtti_seconds: Annotated[Optional[float], Flag(
        help="Mean time to a fault, in seconds, for randomly timed injection.")] = None
    fault_injector_offset_seconds: Annotated[Optional[float], Flag(
        help="Seconds before randomly timed fault injection begins.")] = None
    fault_injector_seed: Annotated[Optional[int], Flag(
        help="Random seed of the fault injector.")] = None


@options
class StorageOptions:
    """The multi-storage client (MSC) for object-store paths."""

    enable_msc: Annotated[bool, Flag(
        help="Read and write through the multi-storage client (needs "
             "multi-storage-client).")] = False
    disable_msc_deprecated: Annotated[bool, Flag(
        "--disable-msc", deprecated="MSC is off by default; pass --enable-msc to turn it on",
        help="Turn the multi-storage client off (deprecated: it is off by default).")] = False


@options
class ResilienceOptions(RestartOptions, MonitoringOptions, FaultInjectorOptions, StorageOptions):
    """Every setting of the resilience plugin."""
