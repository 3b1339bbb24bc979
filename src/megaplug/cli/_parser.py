"""megaplug's own command line, as argparse sees it: the commands, their options, exit codes.

Exit codes: 0 success; 2 an invalid configuration or usage (every problem on stderr);
1 an internal failure, ``diff --exit-code`` finding differences or ``upgrade`` finding
changes; 120 when the output could not be written (a full disk, a closed stdout: said on
stderr); 130 when interrupted (Ctrl-C); 141 when the reader of stdout went away
(``megaplug flags | head``), as a tool stopped by SIGPIPE reports.
"""

from __future__ import annotations

import argparse

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

EXIT_OK, EXIT_INTERNAL, EXIT_INVALID = 0, 1, 2
EXIT_PIPE_CLOSED = 128 + 13  # 128 + SIGPIPE, what the shell reports for `yes | head`
EXIT_FLUSH_FAILED = 120  # the interpreter's own code when flushing stdout at exit fails
EXIT_OUTPUT_FAILED = EXIT_FLUSH_FAILED  # however the write failed, the same answer
EXIT_INTERRUPTED = 128 + 2  # 128 + SIGINT, what the shell reports for a tool stopped by Ctrl-C

COMMANDS = ("list", "flags", "resolve", "explain", "diff", "upgrade", "memory", "plan",
            "export", "import", "schema", "completion", "docs")

_TRAINING_FLAGS_EPILOG = """\
ARGS are the training flags, after `--`, exactly as a training script takes them:
  megaplug {command} -- --num-layers 2 --hidden-size 64 --num-attention-heads 4 ...
Find them with `megaplug flags WORD` or `megaplug flags --plugin NAME`; `-p NAME`,
`-p no:NAME` and `--config FILE` work among ARGS too. `megaplug resolve -- --help` prints
them argparse-style, grouped by plugin."""


class UsageError(Exception):
    """A command line megaplug cannot act on; printed as it is, exit 2."""


class _ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def build_parser(completing: bool = False, only: str | None = None) -> argparse.ArgumentParser:
    """The parser of megaplug's own options; training flags are not in it (they follow ``--``).

    ``completing`` leaves out diff's positionals: the completion script completes them,
    with the training flags, as one list of words. ``only`` builds that command's options
    alone (the one being run: building all of them is a noticeable part of a resolve).
    """
    parser = _ArgumentParser(
        prog="megaplug",
        description="Inspect megaplug plugins and flags, and resolve training configurations.",
        epilog="Training flags follow `--`: megaplug resolve -- --num-layers 2 ... "
               "Find them with `megaplug flags WORD`. Shell completion: `megaplug completion "
               "bash|zsh|fish`.",
    )
    parser.add_argument("--version", action="store_true",
                        help="print megaplug's version and the plugins' (as megaplug list does)")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    adders: dict[str, Callable[[Any], None]] = {
        "list": _add_list, "flags": _add_flags, "resolve": _add_resolve,
        "explain": _add_explain, "diff": lambda c: _add_diff(c, with_sides=not completing),
        "upgrade": _add_upgrade, "memory": _add_memory, "plan": _add_plan,
        "export": _add_export, "import": _add_import, "schema": _add_schema,
        "completion": _add_completion,
        "docs": _add_docs}
    for name, add in adders.items():
        if only is None or name == only:
            add(commands)
    return parser


def _command(commands: Any, name: str, help: str, **kwargs: Any) -> argparse.ArgumentParser:
    """A subcommand whose description is its help line."""
    return commands.add_parser(name, help=help, description=help[:1].upper() + help[1:] + ".",
                               formatter_class=argparse.RawDescriptionHelpFormatter, **kwargs)


def _add_list(commands: Any) -> None:
    """``megaplug list``."""
    listing = _command(commands, "list",
                       "every plugin: status (and why), version, flags, hooks, ordering")
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.add_argument("--order", action="store_true",
                         help="list in the order the plugins' hooks run (default: by name)")
    _plugin_options(listing)
    _target_option(listing)


def _add_flags(commands: Any) -> None:
    """``megaplug flags``."""
    flags = _command(commands, "flags",
                     "every flag with its help line; filter by plugin or a word")
    flags.add_argument("word", nargs="?", metavar="WORD",
                       help="only flags whose spelling, setting name or help mentions WORD")
    flags.add_argument("--plugin", metavar="NAME", help="only this plugin's flags")
    flags.add_argument("--json", action="store_true", help="print JSON")
    _plugin_options(flags)
    _target_option(flags)


def _add_resolve(commands: Any) -> None:
    """``megaplug resolve``."""
    resolve = _command(commands, "resolve",
                       "resolve ARGS and print every value",
                       usage="megaplug resolve [options] [--] ARGS...",
                       epilog=_TRAINING_FLAGS_EPILOG.format(command="resolve"))
    _resolve_options(resolve)
    resolve.add_argument("--format", choices=("json", "yaml"), default="json",
                         help="output format (default: json)")
    shown = resolve.add_mutually_exclusive_group()
    shown.add_argument("--provenance", action="store_true",
                       help="print where each value came from instead of the values")
    shown.add_argument("--given", action="store_true",
                       help="print only the settings as given (a config file that reproduces "
                            "this resolve with --config)")
    _plugin_options(resolve)


def _add_explain(commands: Any) -> None:
    """``megaplug explain``."""
    explain = _command(commands, "explain",
                       "one setting: owner, type, value, provenance and its problems",
                       usage="megaplug explain DEST_OR_FLAG [options] [--] ARGS...",
                       epilog="DEST_OR_FLAG is a setting (ffn_hidden_size) or one of its flags "
                              "(--ffn-hidden-size).\n"
                              + _TRAINING_FLAGS_EPILOG.format(command="explain ffn_hidden_size"))
    _resolve_options(explain)
    _plugin_options(explain)


def _add_diff(commands: Any, with_sides: bool) -> None:
    """``megaplug diff``; ``with_sides`` adds its positionals."""
    diff = _command(commands, "diff",
                    "the settings whose resolved values differ between two runs",
                    usage="megaplug diff A [B] [options] [--] [ARGS...]",
                    epilog="A and B are each a config file, a saved `megaplug resolve` output "
                           "(JSON or YAML) or a\ncheckpoint directory (its saved arguments). "
                           "With A and B, ARGS are resolved on top of each config\nfile; with "
                           "A alone, the other side is ARGS: `megaplug diff CHECKPOINT_DIR -- "
                           "--num-layers 24 ...`\nshows what this command line changes against "
                           "the checkpoint it resumes from.")
    if with_sides:
        diff.add_argument("sides", nargs="+", metavar="A [B]", help="what to compare")
    diff.add_argument("--json", action="store_true", help="print JSON")
    diff.add_argument("--exit-code", action="store_true",
                      help="exit 1 when something differs (like git diff --exit-code)")
    _resolve_options(diff, config=False)
    _plugin_options(diff)


def _add_upgrade(commands: Any) -> None:
    """``megaplug upgrade`` (cli/_upgrade.py)."""
    upgrade = _command(commands, "upgrade",
                       "what changes for a launch moving from one Megatron release to another",
                       usage="megaplug upgrade --from VERSION --to VERSION [SOURCE] [options] "
                             "[--] [ARGS...]",
                       epilog="The launch is ARGS (with any --config files) or SOURCE: a config "
                              "file, a saved `megaplug resolve`\noutput or a checkpoint "
                              "directory. Exit status: 1 when anything changes, 0 when nothing "
                              "does.\n  megaplug upgrade --from 0.15.0 --to 0.19.2 -- "
                              "--num-layers 24 ...")
    upgrade.add_argument("source", nargs="?", metavar="SOURCE",
                         help="a config file, saved resolve output or checkpoint directory")
    upgrade.add_argument("--from", dest="from_version", required=True, metavar="VERSION",
                         help="the megatron-core release the launch runs on now (e.g. 0.15.0)")
    upgrade.add_argument("--to", dest="to_version", required=True, metavar="VERSION",
                         help="the megatron-core release it moves to (e.g. 0.19.2, main)")
    upgrade.add_argument("--format", choices=("text", "json"), default="text",
                         help="output format (default: text)")
    upgrade.add_argument("--rewrite", action="store_true",
                         help="print the command line for the target release instead")
    _resolve_options(upgrade)
    _plugin_options(upgrade)


def _add_memory(commands: Any) -> None:
    """``megaplug memory`` (cli/_memory.py; the estimate is the megaplug-memory plugin's)."""
    memory = _command(commands, "memory",
                      "each rank's predicted peak GPU memory, and whether it fits",
                      usage="megaplug memory [--rank R] [--format text|json] "
                            "[--assume-device-memory SIZE] [options] [--] ARGS...",
                      epilog="WORLD_SIZE is the job's number of ranks (as torchrun sets it):\n"
                             "  WORLD_SIZE=64 megaplug memory --assume-device-memory 79.2GiB -- "
                             "--num-layers 32 ...\n" + _TRAINING_FLAGS_EPILOG.format(
                                 command="memory"))
    memory.add_argument("--rank", type=int, metavar="R", help="only this rank")
    memory.add_argument("--format", choices=("text", "json"), default="text",
                        help="output format (default: text)")
    _estimate_options(memory)
    _resolve_options(memory)
    _plugin_options(memory)


def _add_plan(commands: Any) -> None:
    """``megaplug plan`` (cli/_plan.py; the search is the megaplug-memory plugin's)."""
    plan = _command(commands, "plan",
                    "every parallel layout of a model on N GPUs that fits, ranked by cost",
                    usage="megaplug plan --gpus N [--gpus-per-node 8] [--device-memory SIZE] "
                          "[--global-batch-size B] [--top K] [--format text|json] [--explain] "
                          "[options] -- MODEL FLAGS...",
                    epilog="MODEL FLAGS are the model's training flags without a layout:\n"
                           "  megaplug plan --gpus 1024 --device-memory 79.2GiB "
                           "--global-batch-size 1024 -- --num-layers 80 ...\n"
                           "Each row is a command line `megaplug resolve` accepts; "
                           "docs/plan.md explains the cost model.")
    plan.add_argument("--gpus", type=int, required=True, metavar="N",
                      help="GPUs of the job (its WORLD_SIZE)")
    plan.add_argument("--gpus-per-node", type=int, default=8, metavar="G",
                      help="GPUs a node holds, joined by NVLink (default: 8)")
    plan.add_argument("--device-memory", metavar="SIZE",
                      help="each GPU's memory (79.2GiB for an 80 GB H100); default: "
                           "--assume-device-memory, else the GPU here")
    plan.add_argument("--global-batch-size", type=int, metavar="B",
                      help="sequences per iteration (default: the flags', else N)")
    plan.add_argument("--top", type=int, default=10, metavar="K",
                      help="how many layouts to print (default: 10)")
    plan.add_argument("--format", choices=("text", "json"), default="text",
                      help="output format (default: text)")
    plan.add_argument("--explain", action="store_true",
                      help="also say why each family of layouts that was dropped was dropped")
    for name, default in (("peak-tflops", "989"), ("nvlink-gbps", "360"),
                          ("network-gbps", "40")):
        plan.add_argument(f"--{name}", type=float, metavar="X",
                          help=f"the cost model's {name.replace('-', ' ')} (default: {default}; "
                               "docs/plan.md)")
    _estimate_options(plan)
    _resolve_options(plan)
    _plugin_options(plan)


def _estimate_options(sub: argparse.ArgumentParser) -> None:
    """What a memory estimate assumes of the run (``memory`` and ``plan``)."""
    sub.add_argument("--assume-moe-imbalance", metavar="X",
                     help="a dropless MoE layer's bound: an expert rank receives up to X times "
                          "its balanced tokens (default: MEGAPLUG_ASSUME_MOE_IMBALANCE, else 2)")
    sub.add_argument("--assume-alloc-conf", metavar="CONF",
                     help="the job's PYTORCH_CUDA_ALLOC_CONF (e.g. expandable_segments:True); "
                          "default: this environment's")


def _add_export(commands: Any) -> None:
    """``megaplug export`` (cli/_interop.py; the formats are plugin distributions')."""
    export = _command(commands, "export",
                      "the launch in another config dialect (a format a plugin provides)",
                      usage="megaplug export --to FORMAT [--format yaml|json] [-o FILE] "
                            "[SOURCE] [options] [--] ARGS...",
                      epilog="SOURCE is a config file (in any format an installed reader knows) "
                             "or a checkpoint directory.\n  megaplug export --to mlm-config -- "
                             "--num-layers 24 ...\n" + _TRAINING_FLAGS_EPILOG.format(
                                 command="export --to mlm-config"))
    export.add_argument("source", nargs="?", metavar="SOURCE",
                        help="a config file or checkpoint directory")
    export.add_argument("--to", required=True, metavar="FORMAT",
                        help="the format (mlm-config: Megatron-LM's config container YAML)")
    export.add_argument("--format", choices=("yaml", "json"), default="yaml",
                        help="yaml: the file as the format's own program writes it; json: it "
                             "and the settings it has no home for (default: yaml)")
    export.add_argument("-o", "--output", metavar="FILE", help="write to FILE, not stdout")
    _resolve_options(export)
    _plugin_options(export)


def _add_import(commands: Any) -> None:
    """``megaplug import`` (cli/_interop.py; the formats are plugin distributions')."""
    imported = _command(commands, "import",
                        "the training flags that reproduce a config in another dialect",
                        usage="megaplug import FORMAT FILE [--to VERSION] [OVERRIDES...]",
                        epilog="OVERRIDES change FILE first, as Megatron-Bridge's launcher "
                               "takes them: key=value,\n+key=value (a new key), ~key (remove "
                               "it); keys are dotted paths (train.train_iters=10).\n"
                               "  megaplug import mlm-config run.yaml train.train_iters=10")
    imported.add_argument("format_name", metavar="FORMAT",
                          help="the file's format (mlm-config: Megatron-LM's config container)")
    imported.add_argument("file", metavar="FILE", help="the config file")
    imported.add_argument("overrides", nargs="*", metavar="OVERRIDES",
                          help="Hydra-style overrides applied to FILE first")
    imported.add_argument("--to", dest="to_version", metavar="VERSION",
                          help="the megatron-core release the flags are for (default: the "
                               "installed one, else the newest supported)")
    imported.add_argument("--format", choices=("text", "json"), default="text",
                          help="text: a command line; json: the flags and the fields no "
                               "flag sets (default: text)")
    imported.add_argument("--assume", action="append", default=[], metavar="NAME=VERSION",
                          help="assume package NAME is installed at VERSION on the target")


def _add_schema(commands: Any) -> None:
    """``megaplug schema``."""
    schema = _command(commands, "schema",
                      "a JSON Schema (draft 2020-12) of config files, for editors",
                      epilog="VS Code (YAML extension) and other editors complete and check a "
                             "config file that starts with\n  # yaml-language-server: "
                             "$schema=megaplug.schema.json\nafter `megaplug schema > "
                             "megaplug.schema.json`.")
    schema.add_argument("--plugin", metavar="NAME",
                        help="only this plugin's settings (for a file that holds only those)")
    _plugin_options(schema)
    _target_option(schema)


def _add_completion(commands: Any) -> None:
    """``megaplug completion``."""
    completion = _command(commands, "completion",
                          "print a shell completion script",
                          epilog="bash: eval \"$(megaplug completion bash)\" (in ~/.bashrc)\n"
                                 "zsh:  eval \"$(megaplug completion zsh)\" (in ~/.zshrc, after "
                                 "compinit)\nfish: megaplug completion fish > "
                                 "~/.config/fish/completions/megaplug.fish\n"
                                 "The script carries the flags of the plugins installed now; "
                                 "generate it again after installing one.")
    completion.add_argument("shell", choices=("bash", "zsh", "fish"), help="the shell")
    _plugin_options(completion)
    _target_option(completion)


def _add_docs(commands: Any) -> None:
    """``megaplug docs``."""
    docs = _command(commands, "docs",
                    "write the per-plugin flag reference (Markdown)")
    docs.add_argument("--out", default="docs/flags", metavar="DIR",
                      help="output directory (default: docs/flags, under the current directory)")
    docs.add_argument("--shipped", action="store_true",
                      help="only the plugins megaplug ships (the built-ins and plugins/"
                           "megaplug-*), whatever else is installed: the committed docs/flags "
                           "is `megaplug docs --shipped --assume megatron_core=seed`")
    _plugin_options(docs)
    _target_option(docs)


def _plugin_options(sub: argparse.ArgumentParser) -> None:
    group = sub.add_argument_group("plugin selection")
    group.add_argument("-p", dest="plugin_controls", action="append", default=[],
                       metavar="NAME", help="load plugin NAME (an entry point or module); "
                                            "-p no:NAME blocks it (repeatable)")
    group.add_argument("--no-autoload", action="store_true",
                       help="do not load plugins from installed entry points")


def _target_option(sub: argparse.ArgumentParser) -> None:
    """``--assume megatron_core=VERSION``: the Megatron release whose flags to show."""
    sub.add_argument("--assume", action="append", default=[], metavar="megatron_core=VERSION",
                     help="the Megatron release to target (default: the installed "
                          "megatron-core, else the newest supported)")


def _resolve_options(sub: argparse.ArgumentParser, config: bool = True) -> None:
    if config:
        sub.add_argument("--config", action="append", default=[], metavar="FILE",
                         help="YAML or JSON file of settings (repeatable; later files win)")
    sub.add_argument("--defaults", metavar="JSON",
                     help="caller defaults as a JSON object (or @file), like args_defaults")
    sub.add_argument("--assume", action="append", default=[], metavar="NAME=VERSION",
                     help="assume package NAME is installed at VERSION on the target "
                          "(NAME=none: not installed)")
    sub.add_argument("--assume-device-capability", metavar="MAJOR.MINOR",
                     help="assume the target GPU's compute capability ('none': no GPU)")
    sub.add_argument("--assume-device-memory", metavar="SIZE",
                     help="assume the target GPU's memory (80GB, 139.8GiB; 'none': unknown); "
                          "default: read from the GPU here, if any")
