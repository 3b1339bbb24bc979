"""Communication inside model-parallel groups: sequence parallelism, TP overlap, context
parallelism, stream priorities and the CUDA connection setting they depend on."""

from __future__ import annotations


from megaplug import Draft

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

CP_COMM_TYPES = ("p2p", "a2a", "allgather", "a2a+p2p")


def _arch_major(config: Draft) -> int:
    """Major compute capability of the target GPU; 0 when unknown (no GPU)."""
    capability = config.env.capability()
    return capability[0] if capability else 0


def derive_sequence_parallel(config: Draft) -> None:
    """Sequence parallelism means nothing without tensor parallelism; turn it off."""
    if config.tensor_model_parallel_size == 1 and config.sequence_parallel:
        config.warn("turning off --sequence-parallel: tensor parallelism is off "
                    "(--tensor-model-parallel-size 1)", flags=("sequence_parallel",))
        config.set("sequence_parallel", False, inputs=("tensor_model_parallel_size",),
                   reason="tensor parallelism is off")


def check_tp_comm_overlap(config: Draft) -> None:
    """Tensor-parallel communication overlap works on sequence-parallel activations only."""
    if config.tp_comm_overlap and not config.sequence_parallel:
        detail = (" (it was turned off because --tensor-model-parallel-size is 1)"
                  if config.tensor_model_parallel_size == 1 else "")
        config.error(f"--tp-comm-overlap needs --sequence-parallel{detail}",
                     flags=("tp_comm_overlap", "sequence_parallel"),
                     hint="add --sequence-parallel with a tensor-parallel size above 1, or drop "
                          "--tp-comm-overlap")


def check_cp_comm_type(config: Draft) -> None:
    """Each context-parallel communication type is one that exists."""
    types = config.cp_comm_type or []
    if isinstance(types, str):  # Megatron code may set one type for every layer, bare
        types = [types]
    unknown = [value for value in types if value not in CP_COMM_TYPES]
    if unknown:
        config.error(f"--cp-comm-type {' '.join(unknown)}: unknown communication type",
                     flags=("cp_comm_type",), hint="choose from " + ", ".join(CP_COMM_TYPES))


def normalize_dynamic_context_parallel(config: Draft) -> None:
    """``--hybrid-context-parallel`` is the old name of ``--dynamic-context-parallel``."""
    if not config.hybrid_context_parallel:
        return
    if config.dynamic_context_parallel:
        config.error("--hybrid-context-parallel and --dynamic-context-parallel are the same "
                     "option under two names; give only one",
                     flags=("hybrid_context_parallel", "dynamic_context_parallel"),
                     hint="keep --dynamic-context-parallel")
    config.warn("--hybrid-context-parallel is deprecated; use --dynamic-context-parallel",
                flags=("hybrid_context_parallel",))
    # The measured Megatron parser has only --hybrid-context-parallel and keeps it set;
    # the newer seed renames it. Keep the value Megatron users see and turn on the new name.
    config.set("dynamic_context_parallel", True, inputs=("hybrid_context_parallel",),
               reason="deprecated spelling")


def derive_dynamic_context_parallel_scheduler(config: Draft) -> None:
    """Dynamic context parallelism packs sequences with its own scheduler by default."""
    if (config.dynamic_context_parallel and "sequence_packing_scheduler" in config
            and config.sequence_packing_scheduler is None):
        config.set("sequence_packing_scheduler", "default_dynamic_cp",
                   inputs=("dynamic_context_parallel",))


def valid_dynamic_cp_sizes(dp_cp_size: int) -> list[int]:
    """Group sizes dynamic CP may use over ``dp_cp_size`` ranks: powers of two dividing it."""
    sizes, size = [], 1
    while size <= dp_cp_size:
        if dp_cp_size % size == 0:
            sizes.append(size)
        size *= 2
    return sizes


def check_dynamic_context_parallel(config: Draft) -> None:
    """Dynamic CP needs the single data loader and its own packing scheduler."""
    if not config.dynamic_context_parallel:
        return
    if config.get("dataloader_type") not in (None, "single"):
        config.error(f"--dynamic-context-parallel needs --dataloader-type single, got "
                     f"{config.get('dataloader_type')}",
                     flags=("dynamic_context_parallel", "dataloader_type"),
                     hint="use --dataloader-type single")
    scheduler = config.get("sequence_packing_scheduler")
    if scheduler not in (None, "default_dynamic_cp"):
        config.error(f"--dynamic-context-parallel needs --sequence-packing-scheduler "
                     f"default_dynamic_cp, got {scheduler}",
                     flags=("dynamic_context_parallel", "sequence_packing_scheduler"),
                     hint="drop --sequence-packing-scheduler or set it to default_dynamic_cp")
    _check_min_dynamic_cp_size(config)


def _check_min_dynamic_cp_size(config: Draft) -> None:
    dp = config.data_parallel_size
    if dp is None:
        return
    dp_cp = dp * config.context_parallel_size
    valid = valid_dynamic_cp_sizes(dp_cp)
    minimum = config.min_dynamic_context_parallel_size
    if minimum not in valid:
        config.error(f"--min-dynamic-context-parallel-size {minimum} is not a valid group size "
                     f"over {dp_cp} data x context-parallel ranks",
                     flags=("min_dynamic_context_parallel_size",),
                     hint="choose one of " + ", ".join(map(str, valid)))


def check_packed_sequence_buffer(config: Draft) -> None:
    """Packed sequences must fit: CP ranks x tokens per rank covers one full sequence."""
    per_rank, seq_length = config.max_seqlen_per_dp_cp_rank, config.get("seq_length")
    scheduler = config.get("sequence_packing_scheduler")
    if per_rank is None or scheduler is None or seq_length is None:
        return
    ranks = config.context_parallel_size
    if scheduler == "default_dynamic_cp" and config.data_parallel_size is not None:
        ranks *= config.data_parallel_size
    if ranks * per_rank < seq_length:
        config.error(f"packed-sequence buffer of {ranks} ranks x --max-seqlen-per-dp-cp-rank "
                     f"{per_rank} = {ranks * per_rank} tokens cannot hold one sequence of "
                     f"--seq-length {seq_length}",
                     flags=("max_seqlen_per_dp_cp_rank", "seq_length"),
                     hint=f"raise --max-seqlen-per-dp-cp-rank to at least "
                          f"{-(-seq_length // ranks)}")


def check_cuda_device_max_connections(config: Draft) -> None:
    """Before Blackwell, TP/CP kernels need CUDA_DEVICE_MAX_CONNECTIONS=1 to order comms.

    A feature that wants more connections takes this rule over while it is in use.
    """
    if config.tensor_model_parallel_size <= 1 and config.context_parallel_size <= 1:
        return
    if config.env.capability() is None or _arch_major(config) >= 10:
        return
    found = config.env.getenv("CUDA_DEVICE_MAX_CONNECTIONS")
    if found != "1":
        config.error(
            "tensor or context parallelism needs the environment variable "
            f"CUDA_DEVICE_MAX_CONNECTIONS=1 on this GPU generation (found "
            f"{'unset' if found is None else repr(found)})",
            flags=("CUDA_DEVICE_MAX_CONNECTIONS", "tensor_model_parallel_size",
                   "context_parallel_size"),
            hint="export CUDA_DEVICE_MAX_CONNECTIONS=1 in the launch script")


def check_deterministic_parallelism(config: Draft) -> None:
    """Deterministic mode rules out the nondeterministic TP communication overlap kernels
    (Megatron 0.19 and later: its determinism set-up; earlier releases take both)."""
    if config.env.megatron.before("0.19.0"):
        return
    if config.get("deterministic_mode") and config.tp_comm_overlap:
        config.error("--deterministic-mode cannot be used with --tp-comm-overlap: the overlapped "
                     "tensor-parallel kernels do not give reproducible results",
                     flags=("deterministic_mode", "tp_comm_overlap"),
                     hint="drop --tp-comm-overlap for deterministic runs")


NORMALIZE: tuple[Callable[[Draft], None], ...] = (normalize_dynamic_context_parallel,)

DERIVE: tuple[Callable[[Draft], None], ...] = (
    derive_sequence_parallel,
    derive_dynamic_context_parallel_scheduler,
)

VALIDATE: tuple[Callable[[Draft], None], ...] = (
    check_tp_comm_overlap,
    check_cp_comm_type,
    check_dynamic_context_parallel,
    check_packed_sequence_buffer,
    check_cuda_device_max_connections,
    check_deterministic_parallelism,
)
