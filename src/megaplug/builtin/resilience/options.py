"""The resilience plugin's settings: autoresume, in-process restart, fault tolerance,
straggler detection, workload inspector, fault injection and the multi-storage client."""


from typing import Literal, Optional


from megaplug import Flag, options


@options
class RestartOptions:
    """Autoresume and NVIDIA Resiliency Extension's in-process restart."""

    adlr_autoresume: bool = Flag(
        default=False,
        help="Checkpoint and exit when the ADLR cluster's autoresume asks to.")
    adlr_autoresume_interval: int = Flag(
        default=1000,
        help="Check for an autoresume request every this many iterations.")
    inprocess_restart: bool = Flag(
        default=False,
        help="Restart training inside the running processes after a fault (needs "
             "nvidia-resiliency-ext).")
    inprocess_max_iterations: Optional[int] = Flag(
        default=None,
        help="Most in-process restarts before the job gives up.")
    inprocess_monitor_thread_interval: float = Flag(
        default=1.0,
        help="Seconds between checks of the in-process monitoring thread.")
    inprocess_monitor_process_interval: float = Flag(
        default=1.0,
        help="Seconds between checks of the in-process monitoring process.")
    inprocess_progress_watchdog_interval: float = Flag(
        default=1.0,
        help="Seconds between automatic updates of the progress watchdog timestamp.")
    inprocess_heartbeat_interval: float = Flag(
        default=30,
        help="Seconds between heartbeats used to detect unresponsive ranks.")
    inprocess_soft_timeout: float = Flag(
        default=60,
        help="Seconds without progress before a soft timeout.")
    inprocess_hard_timeout: float = Flag(
        default=90,
        help="Seconds without progress before ranks are killed.")
    inprocess_heartbeat_timeout: float = Flag(
        default=60,
        help="Seconds without a heartbeat before a rank counts as missing.")
    inprocess_barrier_timeout: float = Flag(
        default=120,
        help="Seconds allowed for the restart's internal distributed barrier.")
    inprocess_completion_timeout: float = Flag(
        default=120,
        help="Seconds allowed for the completion barrier across all ranks.")
    inprocess_last_call_wait: float = Flag(
        default=1,
        help="Seconds to collect further terminal failures from other ranks.")
    inprocess_termination_grace_time: float = Flag(
        default=1,
        help="Seconds between SIGTERM and SIGKILL on a hard timeout.")
    inprocess_granularity: Literal["node", "rank"] = Flag(
        default="node",
        help="Whether a fault restarts the whole node or only the rank.")
    inprocess_active_world_size: int = Flag(
        default=1,
        help="Ranks that start the workload, the rest being warm spares (defaults to "
             "WORLD_SIZE).")
    inprocess_empty_cuda_cache: bool = Flag(
        default=False,
        help="Release the cached, unused GPU memory on every in-process restart.")


@options
class MonitoringOptions:
    """Fault tolerance, straggler detection and the workload inspector."""

    enable_ft_package: bool = Flag(
        default=False,
        help="Enable the fault tolerance package of nvidia-resiliency-ext (NVIDIA internal).")
    calc_ft_timeouts: bool = Flag(
        default=False,
        help="Let the fault tolerance package compute its timeouts (NVIDIA internal).")
    ft_num_warmup_iters: int = Flag(
        default=5,
        help="Iterations excluded from fault tolerance timeouts while the job warms up.")
    log_straggler: bool = Flag(
        default=False,
        help="Detect and log straggling ranks (GPU throughput and timing outliers).")
    straggler_ctrlr_port: int = Flag(
        default=65535,
        help="Port of the straggler detector's control server.")
    straggler_minmax_count: int = Flag(
        default=1,
        help="Number of slowest and fastest ranks reported by straggler detection.")
    disable_straggler_on_startup: bool = Flag(
        default=False,
        help="Start with straggler detection off (it can be switched on later).")
    run_workload_inspector_server: bool = Flag(
        default=False,
        help="Run the workload inspector server for on-demand profiling.")


@options
class FaultInjectorOptions:
    """Deliberate faults, to test the resilience machinery."""

    fault_injector_ranks: Optional[str] = Flag(
        default=None,
        help="Comma-separated ranks that may receive injected faults.")
    fault_injector_num_ranks: Optional[int] = Flag(
        default=None,
        help="Number of randomly chosen ranks that may receive injected faults.")
    fault_injector_fault_types: Optional[str] = Flag(
        default=None,
        help="Comma-separated kinds of fault to inject.")
    fault_injector_fault_probabilities: Optional[str] = Flag(
        default=None,
        help="Comma-separated probabilities of the fault kinds, in the same order.")
    fault_injector_fault_delay: Optional[float] = Flag(
        default=None,
        help="Seconds to wait before injecting a fault.")
    fault_injector_delay_start_iteration: Optional[int] = Flag(
        default=None,
        help="Iteration from which the fault delay starts counting.")
    fault_injector_mtti_seconds: Optional[float] = Flag(
        default=None,
        help="Mean time to a fault, in seconds, for randomly timed injection.")
    fault_injector_offset_seconds: Optional[float] = Flag(
        default=None,
        help="Seconds before randomly timed fault injection begins.")
    fault_injector_seed: Optional[int] = Flag(
        default=None,
        help="Random seed of the fault injector.")


@options
class StorageOptions:
    """The multi-storage client (MSC) for object-store paths."""

    enable_msc: bool = Flag(
        default=False,
        help="Read and write through the multi-storage client (needs "
             "multi-storage-client).")
    disable_msc_deprecated: bool = Flag(
        "--disable-msc", default=False,
        deprecated="MSC is off by default; pass --enable-msc to turn it on",
        help="Turn the multi-storage client off (deprecated: it is off by default).")


@options
class ResilienceOptions(RestartOptions, MonitoringOptions, FaultInjectorOptions, StorageOptions):
    """Every setting of the resilience plugin."""
