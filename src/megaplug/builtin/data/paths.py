"""Dataset sources: the legacy default split, exclusive path options, phase transitions."""

from __future__ import annotations


from megaplug import Draft

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

#: Split proportions Megatron falls back to when --data-path comes without --split.
LEGACY_DEFAULT_SPLIT = "969, 30, 1"

_PER_SPLIT_PATHS = ("train_data_path", "valid_data_path", "test_data_path")


def default_split(config: Draft) -> None:
    """--data-path without --split falls back to Megatron's legacy 969/30/1 split."""
    if config.data_path is None or config.split is not None:
        return
    config.set("split", LEGACY_DEFAULT_SPLIT, reason="--data-path given without --split",
               inputs=("data_path",))
    config.warn(f"--data-path is given without --split; using the legacy split "
                f"{LEGACY_DEFAULT_SPLIT!r}", flags=("split", "data_path"))


def parse_phase_transitions(config: Draft) -> None:
    """'300, 100' -> [100, 300]: the iterations at which the data blend changes phase."""
    text = config.phase_transition_iterations
    if not text or not isinstance(text, str):
        return
    try:
        iterations = sorted(int(piece.strip()) for piece in text.split(","))
    except ValueError:
        config.error(f"--phase-transition-iterations {text!r} is not a comma-separated list "
                     "of iteration numbers", flags=("phase_transition_iterations",),
                     hint="write whole numbers separated by commas, e.g. 1000,5000")
        return
    config.set("phase_transition_iterations", iterations, reason="parsed and sorted",
               inputs=("phase_transition_iterations",))
    if config.env.megatron.between("0.16.0", "0.17.1") \
            and config.get("rampup_batch_size") is not None:
        config.error(f"multi-phase training (--phase-transition-iterations) does not support "
                     f"--rampup-batch-size in Megatron {config.env.megatron}",
                     flags=("phase_transition_iterations", "rampup_batch_size"),
                     hint="drop --rampup-batch-size")


def _uses_per_split_paths(config: Draft) -> bool:
    return any(config[name] is not None for name in _PER_SPLIT_PATHS)


def check_data_path_or_args_file(config: Draft) -> None:
    """--data-path and --data-args-path name the same thing; only one may be given."""
    if config.data_path is not None and config.data_args_path is not None:
        config.error("--data-path and --data-args-path cannot be used together",
                     flags=("data_path", "data_args_path"),
                     hint="list the datasets in one place: on the command line or in the file")


def check_per_split_paths_or_args_file(config: Draft) -> None:
    """--train/valid/test-data-path and --per-split-data-args-path are alternatives."""
    if _uses_per_split_paths(config) and config.per_split_data_args_path is not None:
        given = [config.spelling(n) for n in _PER_SPLIT_PATHS if config[n] is not None]
        config.error(f"{', '.join(given)} cannot be used together with "
                     "--per-split-data-args-path",
                     flags=(*[n for n in _PER_SPLIT_PATHS if config[n] is not None],
                            "per_split_data_args_path"),
                     hint="give the per-split paths either on the command line or in the file")


def check_single_data_source(config: Draft) -> None:
    """Mock data, a blended --data-path and per-split paths are three exclusive sources.

    Empty path lists (a bare ``--data-path``) do not count as a source, as in Megatron.
    """
    sources = {
        "--mock-data": ("mock_data",) if config.mock_data else (),
        "--data-path": ("data_path",) if config.data_path else (),
        "--train/valid/test-data-path": tuple(n for n in _PER_SPLIT_PATHS if config[n]),
    }
    chosen = {name: dests for name, dests in sources.items() if dests}
    if len(chosen) > 1:
        config.error(f"only one data source may be given, got {' and '.join(chosen)}",
                     flags=tuple(d for dests in chosen.values() for d in dests),
                     hint="keep one of --mock-data, --data-path or the per-split data paths")


def check_builder_threads(config: Draft) -> None:
    """The dataset builder needs at least one thread."""
    threads = config.num_dataset_builder_threads
    if threads is not None and threads <= 0:
        config.error(f"--num-dataset-builder-threads must be at least 1, got {threads}",
                     flags=("num_dataset_builder_threads",), hint="use 1 or more threads")


# the split first: the sequence length (sequences.NORMALIZE) comes between these two
NORMALIZE_SPLIT: tuple[Callable[[Draft], None], ...] = (default_split,)

NORMALIZE_PHASES: tuple[Callable[[Draft], None], ...] = (parse_phase_transitions,)

VALIDATE: tuple[Callable[[Draft], None], ...] = (
    check_data_path_or_args_file,
    check_per_split_paths_or_args_file,
    check_builder_threads,
)

# after the packing checks, where Megatron's validate_args makes it
VALIDATE_SOURCES: tuple[Callable[[Draft], None], ...] = (check_single_data_source,)
