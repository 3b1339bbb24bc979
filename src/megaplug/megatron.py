"""A Megatron-LM compatible facade: ``parse_args``, ``validate_args`` and friends.

A Megatron entry point switches with one import::

    from megaplug.megatron import parse_and_validate_args
    args = parse_and_validate_args(extra_args_provider, args_defaults={...})

and gets an ``argparse.Namespace`` with the keys and values Megatron's own functions
produce (torch dtypes included), except that every problem is reported at once through
:class:`megaplug.ConfigError` instead of the first failing ``assert``.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Callable, Mapping, Sequence

from ._api import collection_paused, load
from ._config import Draft, Provenance
from ._errors import ConfigError, Problem, ProblemSink
from ._kernel import Kernel
from ._plugins import PluginSelection, PluginSet
from ._sources import take_config_files
from ._target import TargetEnvironment

_PROVENANCE_ATTR = "_megaplug_provenance"
_KERNEL_ATTR = "_megaplug_kernel"
_WARNINGS_ATTR = "_megaplug_warnings"


def _kernel_for(argv: Sequence[str], environ: Mapping[str, str] | None,
                extra_args_provider: Callable[[Any], Any] | None) -> tuple[Kernel, list[str]]:
    if extra_args_provider is None:
        return load(argv, environ=environ)
    selection = PluginSelection.from_environment(environ)
    rest = selection.take_from_argv(argv)
    with collection_paused():
        kernel = Kernel(PluginSet(selection), extra_args_provider=extra_args_provider)
    return kernel, rest


def parse_args(
    extra_args_provider: Callable[[Any], Any] | None = None,
    ignore_unknown_args: bool = False,
    *,
    argv: Sequence[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> argparse.Namespace:
    """Parse the command line (``sys.argv`` by default) like Megatron's ``parse_args``.

    ``rank`` and ``world_size`` come from ``RANK`` / ``WORLD_SIZE``. The namespace is not
    yet validated; pass it to :func:`validate_args`. Parse problems raise ``ConfigError``.
    """
    namespace, sink = _parse(extra_args_provider, ignore_unknown_args, argv, environ)
    if sink.problems:
        raise ConfigError(sink.problems)
    return namespace


def _parse(extra_args_provider: Callable[[Any], Any] | None, ignore_unknown_args: bool,
           argv: Sequence[str] | None, environ: Mapping[str, str] | None,
           ) -> tuple[argparse.Namespace, ProblemSink]:
    tokens = list(sys.argv[1:] if argv is None else argv)
    env = os.environ if environ is None else environ
    kernel, rest = _kernel_for(tokens, env, extra_args_provider)
    files, rest = take_config_files(rest)
    if rest[:1] == ["--"]:
        rest = rest[1:]
    draft, sink = kernel.parse(rest, config_files=files, environ=env,
                               ignore_unknown=ignore_unknown_args)
    namespace = argparse.Namespace(**draft._values)
    namespace._is_global_batch_size_explicitly_specified = (
        getattr(namespace, "global_batch_size", None) is not None
    )
    setattr(namespace, _PROVENANCE_ATTR, dict(draft._provenance))
    setattr(namespace, _KERNEL_ATTR, kernel)
    return namespace, sink


def validate_args(
    args: argparse.Namespace,
    defaults: Mapping[str, Any] | None = None,
    *,
    target: TargetEnvironment | None = None,
    environ: Mapping[str, str] | None = None,
    torch_types: bool = True,
    _earlier: ProblemSink | None = None,
) -> argparse.Namespace:
    """Normalize, derive and validate ``args`` in place, like Megatron's ``validate_args``.

    ``defaults`` fill settings that are still ``None`` (Megatron's ``args_defaults``).
    Raises ``ConfigError`` with every problem found. Returns ``args``.
    """
    env = os.environ if environ is None else environ
    values = {k: v for k, v in vars(args).items() if not k.startswith("_megaplug")}
    kernel: Kernel = getattr(args, _KERNEL_ATTR, None) or load((), environ=env)[0]
    provenance: dict[str, Provenance] = dict(getattr(args, _PROVENANCE_ATTR, {}))
    for key in values:
        provenance.setdefault(key, Provenance("command-line", plugin=kernel.table.owner(key)))
    sink = _earlier or ProblemSink()
    if target is None:
        target = TargetEnvironment(environ=env)
    elif target.environ is None:
        # a copy: the caller's target may be reused with another environment
        target = target.with_environ(env)
    if defaults:
        kernel._apply_caller_defaults(defaults, values, provenance, sink)
    draft = Draft(values, provenance, kernel.table, sink, target)
    resolved = kernel.finish(draft, sink)
    final = resolved.to_namespace(torch_types=torch_types)
    for key in list(vars(args)):
        if not key.startswith("_") and key not in vars(final):
            delattr(args, key)
    for key, value in vars(final).items():
        setattr(args, key, value)
    setattr(args, _PROVENANCE_ATTR, dict(resolved.provenance()))
    setattr(args, _WARNINGS_ATTR, list(resolved.warnings))
    # Megatron prints its warnings on rank 0; so does the facade, on stderr.
    if getattr(args, "rank", 0) == 0:
        for warning in resolved.warnings:
            print(f"WARNING: {warning}", file=sys.stderr)
    return args


def parse_and_validate_args(
    extra_args_provider: Callable[[Any], Any] | None = None,
    ignore_unknown_args: bool = False,
    args_defaults: Mapping[str, Any] | None = None,
    *,
    argv: Sequence[str] | None = None,
    environ: Mapping[str, str] | None = None,
    target: TargetEnvironment | None = None,
    torch_types: bool = True,
) -> argparse.Namespace:
    """``parse_args`` then ``validate_args``, as Megatron's entry points call them.

    ``torch_types=False`` keeps dtypes as :class:`megaplug.TorchDType` (equal to, and
    printed like, the torch dtype) so a caller that only inspects values never imports torch.
    """
    # Parse problems do not stop here: validation runs too, so one report has everything.
    args, sink = _parse(extra_args_provider, ignore_unknown_args, argv, environ)
    defaults = dict(args_defaults or {})
    if getattr(args, "use_checkpoint_args", False) or defaults.get("use_checkpoint_args", False):
        _load_checkpoint_args(args, sink)
    return validate_args(args, defaults, target=target, environ=environ,
                         torch_types=torch_types, _earlier=sink)


def _load_checkpoint_args(args: argparse.Namespace, sink: ProblemSink) -> None:
    """Megatron's ``load_args_from_checkpoint``: architecture settings from the saved args.

    Like Megatron, ``--pretrained-checkpoint`` is read first and ``--load`` second (so it
    wins), and a directory without a checkpoint only warns unless
    ``--exit-on-missing-checkpoint`` is set.
    """
    from . import _checkpoint

    sink.current_plugin = "checkpointing"
    # The checkpointing plugin's validation reports these when the flag is given; only a
    # request made through args_defaults alone is reported here, so nothing is said twice.
    asked_by_caller_only = not getattr(args, "use_checkpoint_args", False)
    if getattr(args, "load", None) is None and getattr(args, "pretrained_checkpoint", None) is None:
        if asked_by_caller_only:
            sink.error("use_checkpoint_args (from the caller's defaults) needs a checkpoint to "
                       "read", flags=("--load",),
                       hint="add --load DIR (or --pretrained-checkpoint DIR)")
        return
    if getattr(args, "non_persistent_ckpt_type", None) == "local":
        if asked_by_caller_only:
            sink.error("use_checkpoint_args (from the caller's defaults) cannot read local "
                       "non-persistent checkpoints", flags=("--non-persistent-ckpt-type",),
                       hint="use --non-persistent-ckpt-type global, or pass the arguments "
                            "explicitly")
        return
    kernel: Kernel = getattr(args, _KERNEL_ATTR)
    allowed = _checkpoint.enum_types(
        [spec.default for spec in kernel.table] + [c for spec in kernel.table
                                                    for c in (spec.choices or ())])
    allowed += _checkpoint.plugin_enum_types(
        record.module for record in kernel.plugins.active() if record.module is not None)
    for load_arg in ("pretrained_checkpoint", "load"):
        load_dir = getattr(args, load_arg, None)
        if load_dir is not None:
            _apply_one_checkpoint(args, kernel, load_dir, load_arg, allowed, sink)
    sink.current_plugin = None


def _apply_one_checkpoint(args: argparse.Namespace, kernel: Kernel, load_dir: str,
                          load_arg: str, allowed: list[type], sink: ProblemSink) -> None:
    from . import _checkpoint

    flag = "--" + load_arg.replace("_", "-")
    try:
        path = _checkpoint.checkpoint_file(load_dir)
    except _checkpoint.CheckpointArgsError as exc:
        if getattr(args, "exit_on_missing_checkpoint", False):
            sink.error(str(exc),
                       flags=("--use-checkpoint-args", flag, "--exit-on-missing-checkpoint"),
                       hint=f"point {flag} at a checkpoint directory, "
                            "or drop --exit-on-missing-checkpoint")
        else:
            sink.warn(f"{exc}; keeping the arguments as given", flags=(flag,))
        return
    try:
        state = _checkpoint.load_saved_state(path, allowed)
    except _checkpoint.CheckpointArgsError as exc:
        sink.error(str(exc), flags=("--use-checkpoint-args", flag),
                   hint=f"point {flag} at a checkpoint directory written by a trusted run")
        return
    values = vars(args)
    changed = _checkpoint.apply_checkpoint_args(
        values, state["args"], float(state.get("checkpoint_version", 0) or 0),
        bool(getattr(args, "use_mp_args_from_checkpoint_args", False)))
    provenance = getattr(args, _PROVENANCE_ATTR)
    for name in changed:
        provenance[name] = Provenance("checkpoint", str(load_dir), kernel.table.owner(name),
                                      previous=provenance.get(name), value=changed[name])


def add_megatron_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add every flag of the active plugins to a caller's argparse parser, with plain types."""
    kernel, _ = load(())
    groups: dict[str, Any] = {}
    for spec in kernel.table:
        if spec.kind != "flag":
            continue
        group = groups.get(spec.plugin) or parser.add_argument_group(spec.plugin)
        groups[spec.plugin] = group
        kwargs: dict[str, Any] = {"dest": spec.dest, "default": spec.default,
                                  "help": argparse.SUPPRESS if spec.hidden else spec.help}
        if spec.action == "boolean_optional":
            kwargs["action"] = argparse.BooleanOptionalAction
            strings = tuple(o for o in spec.option_strings if not o.startswith("--no-"))
        else:
            kwargs["action"] = spec.action
            strings = spec.option_strings
        if spec.action in ("store", "append"):
            for key in ("type", "nargs", "metavar", "choices"):
                if getattr(spec, key) is not None:
                    kwargs[key] = getattr(spec, key)
        group.add_argument(*strings, **kwargs)
    return parser


__all__ = [
    "ConfigError",
    "Problem",
    "add_megatron_arguments",
    "parse_and_validate_args",
    "parse_args",
    "validate_args",
]
