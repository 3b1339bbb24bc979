"""``--to mlm-config``: Megatron-LM's own config container YAML, both ways.

Export resolves the launch with megaplug (every problem at once, the target's packages
assumed) and hands the namespace to the release's own builders --
``gpt_config_from_args`` and ``pretrain_cfg_container_from_args`` -- then writes the YAML
as ``ConfigContainerBase.to_yaml`` does. So the file is the one that release writes for
that launch, by construction of the code that reads it; what megaplug adds is the launch
itself (flags, config files, saved resolve outputs, checkpoints), validation before
anything is built, and the flags the container has no home for, named with the reason.
It needs the release's code (megatron-core 0.18 or later importable), imported only here.

Import and the config-format reader are torch-free: :mod:`._container` reads the YAML back
as settings, and the flag table of the target release says which are flags.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util

from ._container import (LEFT_OUT_BY_YAML, ContainerError, apply_overrides, is_container,
                         read_settings)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Iterator, Mapping

_NEEDS_MEGATRON = ("--to mlm-config builds the container with Megatron's own classes: it needs "
                   "megatron-core 0.18 or later importable here (pip install "
                   "'megatron-core>=0.18')")

#: Why a given flag has no home in the container, by the plugin that owns it; anything
#: else is read by Megatron's training code from the namespace, never by the builders.
NO_HOME_REASONS = {
    "data": "the container has no dataset section in Megatron 0.18/0.19 (container.py: "
            "'dataset: GPTDatasetConfig # TODO'); the entry script builds datasets from args",
}
NO_HOME_DEFAULT = ("no field of the container holds it: Megatron's builders never read it "
                   "(the training code reads it from args)")
#: Settings Megatron's builders read and then throw away unless a switch is on: dest ->
#: (the switch, why). Given without the switch, no field holds them (named as no home).
READ_ONLY_WITH = {
    "num_query_groups": ("group_query_attention", "without --group-query-attention "
                         "Megatron's builder sets num_query_groups to None (the head count): "
                         "core_transformer_config_from_args"),
}
NO_MODEL = ("the model section needs the vocabulary size, which Megatron learns by building "
            "the tokenizer; give --vocab-size (NullTokenizer) or a tokenizer whose files are "
            "readable here")


_REFUSED_HERE = ("a check of a package or kernel this machine lacks passes where the job "
                 "runs; export there, or assume the package with --assume")


class Exported:
    """An export: the text to write and every given setting left out, with its reason."""

    def __init__(self, text: str, not_exported: list[dict[str, Any]]) -> None:
        self.text = text
        self.not_exported = not_exported


class Imported:
    """An import: the command line, and the container fields no flag reproduces (they are
    the release's own, computed again from the flags)."""

    def __init__(self, argv: list[str], one_way: dict[str, str]) -> None:
        self.argv = argv
        self.one_way = one_way


# -- export ------------------------------------------------------------------------------

def export(launch: Mapping[str, Any], output_format: str) -> Exported:
    """The launch as ``PretrainConfigContainer`` YAML (``output_format`` ``yaml``) or as JSON
    holding it and what was left out (``json``). ``launch`` holds ``argv``, ``environ``,
    ``args_defaults``, ``target`` and ``preflight``, as ``megaplug export`` builds them.
    Raises ``ValueError`` saying why the container cannot be built (megaplug's problems
    come as ``megaplug.megatron.ConfigError``)."""
    require_megatron("mlm-config")
    from megaplug.megatron import provenance

    namespace = resolved_namespace(launch)
    container, read, left_out = build_container(namespace, launch["target"])
    not_exported = _not_exported(provenance(namespace), read, left_out)
    text = container_yaml(container)
    if output_format == "json":
        import yaml

        from megaplug.values._encoding import to_json

        text = to_json({"format": "mlm-config", "config": yaml.safe_load(text),
                        "not_exported": not_exported}) + "\n"
    return Exported(text, not_exported)


def require_megatron(target_format: str) -> None:
    """Raise ``ValueError`` unless Megatron's container builders (0.18 and later) import
    here: both ``--to`` formats build Megatron's own container first."""
    if importlib.util.find_spec("megatron") is None or \
            importlib.util.find_spec("megatron.training.argument_utils") is None:
        raise ValueError(_NEEDS_MEGATRON.replace("mlm-config", target_format))


def resolved_namespace(launch: Mapping[str, Any]) -> argparse.Namespace:
    """The launch resolved by megaplug's facade, in Megatron's types, as export reads it."""
    from megaplug.megatron import parse_and_validate_args

    return parse_and_validate_args(
        argv=list(launch["argv"]), environ=launch["environ"],
        args_defaults=dict(launch.get("args_defaults") or {}), target=launch["target"],
        torch_types=True, register=False, preflight=launch.get("preflight"),
        print_arguments=False)


def build_container(namespace: argparse.Namespace, target: Any = None,
                    ) -> tuple[Any, set[str], list[dict[str, Any]]]:
    """Megatron's ``PretrainConfigContainer`` for a resolved namespace, as ``pretrain_gpt.py``
    (``pretrain_hybrid.py`` for a hybrid layer pattern) builds it: (the container, the
    namespace attributes the builders read, what was left out). The vocabulary comes from
    the tokenizer when no size is given, as ``parse_and_validate_args`` builds it; without
    one the model section is left out (and named)."""
    import warnings

    from megatron.training.argument_utils import gpt_config_from_args, hybrid_config_from_args
    from megatron.training.argument_utils import pretrain_cfg_container_from_args

    recorded = _Recording(**vars(namespace))
    left_out = []
    with _targeting(target), warnings.catch_warnings():
        # "It is recommended to use a ModelConfig": given one, or named as left out
        warnings.simplefilter("ignore", UserWarning)
        model = None
        try:
            if _vocabulary_known(recorded):
                # pretrain_hybrid.py's model for a hybrid layer pattern, else pretrain_gpt.py's
                model = (hybrid_config_from_args if recorded.hybrid_layer_pattern is not None
                         else gpt_config_from_args)(recorded)
            else:
                left_out.append({"section": "model", "reason": NO_MODEL})
            container = pretrain_cfg_container_from_args(recorded, model)
        except (AssertionError, ValueError) as exc:
            # the config classes' own checks, some of which look for Transformer Engine's
            # fused kernels in this process
            raise ValueError(f"{exc} (raised by Megatron's config classes as they were "
                             "built: " + _REFUSED_HERE + ")") from None
    unused = {dest for dest, (switch, _) in READ_ONLY_WITH.items()
              if not getattr(namespace, switch, False)}
    return container, recorded._read - unused, left_out


def container_yaml(container: Any) -> str:
    """The YAML ``ConfigContainerBase.to_yaml`` writes for ``container`` (its dictionary,
    dumped by ``yaml.safe_dump`` under Megatron's own representers)."""
    import yaml
    from megatron.training.config.yaml_utils import safe_yaml_representers

    with safe_yaml_representers():
        return str(yaml.safe_dump(container.to_dict(), default_flow_style=False))


class _Recording(argparse.Namespace):
    """A namespace that remembers which attributes were read (``hasattr`` included)."""

    def __init__(self, **values: Any) -> None:
        object.__setattr__(self, "_read", set())
        super().__init__(**values)

    def __getattribute__(self, name: str) -> Any:
        if not name.startswith("_"):
            object.__getattribute__(self, "_read").add(name)
        return object.__getattribute__(self, name)


def _vocabulary_known(args: Any) -> bool:
    """Whether the vocabulary size is known; a buildable tokenizer sets it, as Megatron's
    ``set_global_variables`` does."""
    if getattr(args, "padded_vocab_size", None) is not None or args.vocab_size is not None:
        return True
    try:
        from megatron.training import global_vars

        with contextlib.redirect_stdout(None):
            global_vars.build_tokenizer(args)
    except Exception:  # the tokenizer's own failure (missing files, no package): no model
        return False
    return getattr(args, "padded_vocab_size", None) is not None


@contextlib.contextmanager
def _targeting(target: Any) -> Iterator[None]:
    """Megatron's Transformer Engine probe answering with the target's version (the
    config classes check it as they are built): ``--assume transformer_engine=2.17.1``
    exports for that cluster from a machine without it."""
    import megatron.core.utils as core_utils

    version = target.package_version("transformer_engine") if target is not None else None
    saved = core_utils._te_version
    if version is not None:
        from packaging.version import Version

        core_utils._te_version = Version(version)
    try:
        yield
    finally:
        core_utils._te_version = saved


def given(record: Any) -> bool:
    """Whether a setting's provenance ``record`` says the launch itself gave it (a flag, a
    config file, the environment): what export must place, or name."""
    return record is not None and record.source in ("command-line", "config-file",
                                                    "environment")


def given_as(record: Any, dest: str) -> str:
    """How the launch gave the setting ``dest``: its flag as typed, else its name."""
    return str(record.detail) if record.source == "command-line" else dest


def _not_exported(provenance: Mapping[str, Any], read: set[str],
                  left_out: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every setting the launch gives that no builder read, with its flag and reason."""
    rows = list(left_out)
    for dest, record in sorted(provenance.items()):
        if not given(record):
            continue
        if dest in read and dest not in LEFT_OUT_BY_YAML:
            continue
        flag = given_as(record, dest)
        reason = (LEFT_OUT_BY_YAML.get(dest) or READ_ONLY_WITH.get(dest, ("", ""))[1]
                  or NO_HOME_REASONS.get(record.plugin or "", NO_HOME_DEFAULT))
        rows.append({"flag": flag, "dest": dest, "plugin": record.plugin, "reason": reason})
    return rows


# -- import ------------------------------------------------------------------------------

def import_config(path: str, overrides: list[str], target: Any,
                  environ: Mapping[str, str] | None = None) -> Imported:
    """The Megatron-LM command line reproducing the container YAML at ``path`` (with
    Hydra-style ``overrides`` applied) on the ``target`` release, for a job of
    ``environ``'s ``WORLD_SIZE`` (the container holds none; default: the product of its
    parallel sizes). Raises ``ValueError`` naming every mistake."""
    data = read_container_file(path, "config container", is_container,
                               "Megatron-LM config container", "mlm-config")
    mistakes = apply_overrides(data, overrides)
    if mistakes:
        raise ContainerError("\n".join(mistakes))
    return imported_from(data, path, target, environ)


def imported_from(data: dict[str, Any], path: str, target: Any,
                  environ: Mapping[str, str] | None = None) -> Imported:
    """:func:`import_config` of a container already read (``data``, overrides applied):
    also Megatron-Bridge's, in this container's shape (:mod:`.bridge`)."""
    import megaplug

    kernel, _ = megaplug.load(target=target)
    settings = read_settings(data, lambda dest: _settable(kernel.table, dest))
    if settings.problems:
        raise ContainerError("\n".join(f"{path}: {problem}" for problem in settings.problems))
    flags, unexpressed = command_line(kernel, settings.values, settings.one_way)
    if unexpressed:
        raise ContainerError("\n".join(f"{path}: {line}" for line in unexpressed))
    job = _job_of(flags, environ or {})
    return Imported(minimal(flags, target, job, settings.one_way), settings.one_way)


def read_container_file(path: str, label: str, accepts: Callable[[Any], bool],
                        expected: str, target: str) -> dict[str, Any]:
    """The YAML file at ``path`` (a ``label``, for messages), refused as a
    :class:`ContainerError` unless ``accepts`` takes it as the ``expected`` kind of container,
    which ``megaplug export --to target`` writes."""
    from megaplug.sources._files import UntrustedInputError, parse_yaml, read_text_file

    try:
        data = parse_yaml(read_text_file(path, label), f"{label} {path}")
    except (UntrustedInputError, OSError) as exc:
        raise ContainerError(str(exc)) from None
    if not accepts(data):
        found = data.get("_target_") if isinstance(data, dict) else type(data).__name__
        raise ContainerError(f"{path} is no {expected} (its _target_ is {found!r}; "
                             f"`megaplug export --to {target}` writes one)")
    return data


def _settable(table: Any, dest: str) -> bool:
    specs = table.by_dest.get(dest, ())
    return any(spec.kind == "flag" for spec in specs)


def minimal(flags: dict[str, tuple[list[str], Any]], target: Any, job: Mapping[str, str],
            one_way: dict[str, str]) -> list[str]:
    """The command line of ``flags`` (dest -> (tokens, value)) without the flags whose value
    the release derives anyway from the others: the container holds derived values too
    (``start_weight_decay`` beside ``weight_decay``), and giving one the user never gave
    changes what the release checks. Built up from nothing: each round adds the flags whose
    value a resolve of those kept so far does not reach, until none is missing; then the
    kept ones a rule was seen deriving (or a problem names) are left out where the others
    reach their value.
    Those left out are noted in ``one_way``."""
    kept: dict[str, tuple[list[str], Any]] = {}
    derivable: set[str] = set()
    for _round in range(len(flags) + 1):
        outcome = _Outcome(kept, target, job)
        derivable |= outcome.derived
        missing = {dest: entry for dest, entry in flags.items()
                   if dest not in kept and not outcome.reaches(dest, entry[1])}
        if not missing:
            break
        kept.update(missing)
    # a flag a problem names may be one the release derives too (given twice, refused)
    kept = _pruned(kept, (derivable | outcome.blamed) & set(kept), outcome, target, job)
    for dest in flags:
        if dest not in kept:
            one_way[dest] = "derived by the release from the other flags"
    return [token for dest, (tokens, _) in flags.items() if dest in kept for token in tokens]


def _pruned(kept: dict[str, tuple[list[str], Any]], derivable: set[str], outcome: _Outcome,
            target: Any, job: Mapping[str, str]) -> dict[str, tuple[list[str], Any]]:
    """``kept`` less the ``derivable`` flags the others now reach: each left out alone, or
    two together where the resolve of ``kept`` (``outcome``) blames both
    (``--start-weight-decay`` and ``--end-weight-decay`` given at ``--weight-decay``'s
    value are refused only together)."""
    import itertools

    def without(dests: tuple[str, ...]) -> dict[str, tuple[list[str], Any]]:
        return {other: entry for other, entry in kept.items() if other not in dests}

    for dest in [dest for dest in reversed(list(kept)) if dest in derivable]:
        if _Outcome(without((dest,)), target, job).reaches(dest, kept[dest][1]):
            kept = without((dest,))
    for pair in itertools.combinations(sorted(outcome.blamed & derivable), 2):
        if all(dest in kept for dest in pair):
            trial = _Outcome(without(pair), target, job)
            if not trial.blamed & set(pair) and all(trial.reaches(dest, kept[dest][1])
                                                    for dest in pair):
                kept = without(pair)
    return kept


class _Outcome:
    """A resolve of some flags, as far as it gets: the values, the settings a rule derived
    (or normalized), and those whose flags a problem names."""

    def __init__(self, flags: dict[str, tuple[list[str], Any]], target: Any,
                 job: Mapping[str, str]) -> None:
        from megaplug.megatron import ConfigError, parse_and_validate_args, provenance

        argv = [token for tokens, _ in flags.values() for token in tokens]
        self.blamed: set[str] = set()
        try:
            namespace = parse_and_validate_args(argv=argv, environ=job, target=target,
                                                torch_types=False, register=False,
                                                preflight=False, print_arguments=False)
        except ConfigError as exc:
            named = {flag for problem in exc.problems for flag in problem.flags}
            self.blamed = {dest for dest, (tokens, _) in flags.items() if tokens[0] in named}
            self.values = {} if exc.partial is None else exc.partial.to_dict()
            records = {} if exc.partial is None else exc.partial.provenance()
        else:
            self.values, records = vars(namespace), provenance(namespace)
        self.derived = {dest for dest, record in records.items()
                        if record is not None and record.source in ("derived", "normalized")}

    def reaches(self, dest: str, value: Any) -> bool:
        from megaplug.values._encoding import encode

        return dest in self.values and encode(self.values[dest]) == encode(value)


#: The parallel sizes whose product is a job size every parallel layout of the flags fits.
_PARALLEL_SIZES = ("tensor_model_parallel_size", "pipeline_model_parallel_size",
                   "context_parallel_size", "expert_model_parallel_size",
                   "expert_tensor_parallel_size")


def _job_of(flags: dict[str, tuple[list[str], Any]], environ: Mapping[str, str],
            ) -> dict[str, str]:
    """The job the flags are resolved for: ``environ``'s ``WORLD_SIZE`` (and rank), else
    one the flags' parallel layout fits. The container holds no job size (torchrun gives
    it), and what the release derives -- the data-parallel size, the batch sizes -- depends
    on it."""
    if environ.get("WORLD_SIZE"):
        return {key: environ[key] for key in ("WORLD_SIZE", "RANK", "LOCAL_RANK")
                if key in environ}
    world = 1
    for dest in _PARALLEL_SIZES:
        if dest in flags and isinstance(flags[dest][1], int):
            world *= max(flags[dest][1], 1)
    return {"WORLD_SIZE": str(world), "RANK": "0", "LOCAL_RANK": "0"}


def command_line(kernel: Any, values: Mapping[str, Any], one_way: dict[str, str],
                 ) -> tuple[dict[str, tuple[list[str], Any]], list[str]]:
    """The flags giving ``values`` (settings at their declared default left out):
    ({dest: (tokens, value)}, what no flag can say). A switch that is off (``false`` for a
    flag that only turns it on) and a ``null`` are what giving no flag means; a ``null``
    the release then fills is noted in ``one_way``."""
    from megaplug._errors import Problem
    from megaplug.values._encoding import encode

    flags: dict[str, tuple[list[str], Any]] = {}
    unexpressed: list[str] = []
    for dest, raw in values.items():
        specs = [spec for spec in kernel.table.by_dest[dest] if spec.kind == "flag"]
        if raw == [] and not specs[0].default:  # an empty list is what giving no flag means
            continue
        value = kernel.convert(specs[0], raw, source="config-file", detail="container")
        if isinstance(value, Problem):
            unexpressed.append(value.message)
            continue
        if encode(value) == encode(specs[0].default):
            continue
        if value is False and all(spec.action == "store_true" for spec in specs):
            continue
        if value is None:
            one_way[dest] = "null in the container: the release's own value for no flag"
            continue
        spelled = _spelled(specs, value)
        if spelled is None:
            unexpressed.append(f"no flag sets {dest} to {raw!r}")
        else:
            flags[dest] = (spelled, value)
    return flags, unexpressed


def _spelled(specs: list[Any], value: Any) -> list[str] | None:
    """The tokens of one flag giving ``value``, or None when none can."""
    for spec in specs:
        spelling = spec.option_strings[0]
        if spec.action == "store_true" and value is True:
            return [spelling]
        if spec.action == "store_false" and value is False:
            return [spelling]
        if spec.action == "store" and value is not None:
            if isinstance(value, (list, tuple)) and spec.nargs is None:
                # one token in the flag's own syntax: "511,0" (--window-size),
                # "[0,1,1]" (--moe-layer-freq); separate tokens would be stray arguments
                joined = ",".join(_token(item) for item in value)
                return [spelling, f"[{joined}]" if isinstance(value, list) else joined]
            items = value if isinstance(value, (list, tuple)) else [value]
            return [spelling, *(_token(item) for item in items)]
    return None


def _token(value: Any) -> str:
    import enum

    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, float):
        return repr(value)
    return str(value)


# -- the config-format reader ------------------------------------------------------------

def read_as_settings(data: Mapping[str, Any], where: str) -> dict[str, Any] | None:
    """A config container's settings where megaplug reads a config file (``--config``, a
    SOURCE), ``None`` for a mapping that is not one. Settings at their declared default are
    left out, so only what the launch chose counts as given."""
    if not is_container(data):
        return None
    import megaplug
    from megaplug.values._encoding import encode

    kernel, _ = megaplug.load()
    settings = read_settings(data, lambda dest: _settable(kernel.table, dest))
    if settings.problems:
        raise ContainerError("; ".join(f"{where}: {problem}" for problem in settings.problems))
    chosen = {}
    for dest, raw in settings.values.items():
        spec = next(spec for spec in kernel.table.by_dest[dest] if spec.kind == "flag")
        value = kernel.convert(spec, raw, source="config-file", detail=where)
        if encode(value) != encode(spec.default):
            chosen[dest] = raw
    return chosen
