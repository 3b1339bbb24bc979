"""Shell completion scripts for bash, zsh and fish (``megaplug completion SHELL``).

shtab turns megaplug's own argparse parser into each shell's script: commands, options,
choices (plugin names for ``-p`` and ``--plugin``, settings for ``explain``). The training
flags after ``--`` are not options of that parser -- they are the flag table -- so each
script also carries them as data, with a small completer per shell that offers the flags,
a choice flag's choices, plugin names after ``-p`` and files after ``--config``. The
script is generated from the plugins installed now, so it completes their flags too, and
each TAB costs the shell no Python start-up.
"""

from __future__ import annotations

import argparse
import shlex

from ._parser import build_parser

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

SHELLS = ("bash", "zsh", "fish")

#: The shell function completing the ARGS of resolve / explain / diff, in each shell.
_ARGS_COMPLETER = {"bash": "_megaplug_args", "zsh": "_megaplug_args",
                   "fish": "(_megaplug_args)"}


def completion_script(kernel: Any, shell: str) -> str:
    """The completion script of ``shell`` for this kernel's plugins and flags."""
    import shtab

    if shell not in SHELLS:
        raise ValueError(f"no completion for {shell!r}; choose from {', '.join(SHELLS)}")
    data = _CompletionData(kernel)
    parser = completion_parser(kernel, shell)
    preamble = {"bash": _bash_preamble, "zsh": _zsh_preamble, "fish": _fish_preamble}[shell](data)
    script = shtab.complete(parser, shell=shell, preamble={shell: preamble})
    if shell == "bash":
        script += _BASH_WRAPPER
    return script


class _CompletionData:
    """What the ARGS completers need: flags with help, choices, plugin names."""

    def __init__(self, kernel: Any) -> None:
        from .._options import choice_name

        self.flags: dict[str, str] = {}
        self.choices: dict[str, list[str]] = {}
        for spec in kernel.table:
            if spec.kind != "flag" or spec.hidden:
                continue
            for option in spec.option_strings:
                self.flags[option] = _one_line(spec.help)
                if spec.choices is not None:
                    self.choices[option] = [choice_name(c) for c in spec.choices]
        self.flags.update({"--config": "YAML or JSON file of settings",
                           "-p": "load plugin NAME, or block it with no:NAME",
                           "--no-autoload": "do not load plugins from entry points"})
        self.plugins = sorted(kernel.plugins.records)
        self.controls = [*self.plugins, *(f"no:{name}" for name in self.plugins)]


def _one_line(text: str) -> str:
    line = " ".join((text or "").split())
    return line if len(line) <= 70 else line[:67].rstrip() + "..."


def completion_parser(kernel: Any, shell: str = "bash") -> argparse.ArgumentParser:
    """megaplug's parser with what shtab needs to complete it: choices and positionals."""
    import shtab

    parser = build_parser(completing=True)
    subcommands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    dests = sorted(kernel.table.by_dest)
    for name, sub in subcommands.choices.items():
        for action in sub._actions:
            if "-p" in action.option_strings:
                # a ':' would end zsh's option spec early (shtab does not escape it)
                action.choices = [c.replace(":", "\\:") if shell == "zsh" else c
                                  for c in _controls(kernel)]
            elif action.dest == "plugin":
                action.choices = sorted(kernel.plugins.records)
            elif action.dest == "config":
                action.complete = shtab.FILE  # type: ignore[attr-defined]
            elif action.dest == "out":
                action.complete = shtab.DIRECTORY  # type: ignore[attr-defined]
        if name == "explain":
            sub.add_argument("setting", choices=dests, help="the setting to explain")
        if name in ("resolve", "explain", "diff"):
            args = sub.add_argument("args", nargs=argparse.REMAINDER,
                                    help="training flags, after --")
            args.complete = _ARGS_COMPLETER  # type: ignore[attr-defined]
    return parser


def _controls(kernel: Any) -> list[str]:
    names = sorted(kernel.plugins.records)
    return [*names, *(f"no:{name}" for name in names)]


# -- bash ------------------------------------------------------------------------------

def _bash_preamble(data: _CompletionData) -> str:
    words = " ".join(shlex.quote(flag) for flag in data.flags)
    choices = "\n".join(f"  [{shlex.quote(flag)}]={shlex.quote(' '.join(values))}"
                        for flag, values in data.choices.items())
    controls = " ".join(shlex.quote(c) for c in data.controls)
    return f"""\
_megaplug_flags=({words})
declare -gA _megaplug_choices=(
{choices}
)
_megaplug_controls=({controls})

# ARGS of resolve / explain / diff: files before `--`; after it the training flags, a choice
# flag's choices, plugin names after -p and files after --config
_megaplug_args() {{
  local word="${{COMP_WORDS[COMP_CWORD]}}" previous="${{COMP_WORDS[COMP_CWORD-1]}}" i
  for ((i = 1; i < COMP_CWORD; i++)); do
    [[ "${{COMP_WORDS[i]}}" == -- ]] && break
  done
  if ((i == COMP_CWORD)); then
    compopt -o filenames 2>/dev/null
    compgen -f -- "$word"
  elif [[ -n "${{_megaplug_choices[$previous]+set}}" ]]; then
    compgen -W "${{_megaplug_choices[$previous]}}" -- "$word"
  elif [[ "$previous" == -p ]]; then
    compgen -W "${{_megaplug_controls[*]}}" -- "$word"
  elif [[ "$previous" == --config ]]; then
    compopt -o filenames 2>/dev/null
    compgen -f -- "$word"
  elif [[ "$word" == -* ]]; then
    compgen -W "${{_megaplug_flags[*]}}" -- "$word"
  fi
}}
"""


_BASH_WRAPPER = r"""
# readline splits "-p no:moe" at ':' (a COMP_WORDBREAKS character): join the pieces, let
# the generated completer see whole words, then offer only the part after the last ':'
_megaplug() {
  local -a joined=()
  local i piece joined_cword=0 glue=0
  for ((i = 0; i < ${#COMP_WORDS[@]}; i++)); do
    piece="${COMP_WORDS[i]}"
    if ((i > 0)) && [[ "$piece" == : || $glue == 1 ]]; then
      joined[${#joined[@]}-1]+="$piece"
    else
      joined+=("$piece")
    fi
    [[ "$piece" == : ]] && glue=1 || glue=0
    ((i == COMP_CWORD)) && joined_cword=$((${#joined[@]} - 1))
  done
  local COMP_WORDS=("${joined[@]}") COMP_CWORD=$joined_cword
  _shtab_megaplug
  local current="${COMP_WORDS[COMP_CWORD]}"
  if [[ "$current" == *:* ]]; then
    local colon_prefix="${current%"${current##*:}"}"
    COMPREPLY=("${COMPREPLY[@]#"$colon_prefix"}")
  fi
}
complete -o bashdefault -F _megaplug megaplug
"""


# -- zsh -------------------------------------------------------------------------------

def _zsh_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _zsh_preamble(data: _CompletionData) -> str:
    described = "\n".join("  " + _zsh_quote(f"{flag}:{help}".replace("\\", "\\\\"))
                          for flag, help in data.flags.items())
    choices = "\n".join(f"  {_zsh_quote(flag)} {_zsh_quote(' '.join(values))}"
                        for flag, values in data.choices.items())
    controls = " ".join(_zsh_quote(c) for c in data.controls)
    return f"""\
_megaplug_flags=(
{described}
)
typeset -gA _megaplug_choices
_megaplug_choices=(
{choices}
)
_megaplug_controls=({controls})

# ARGS of resolve / explain / diff: files before `--`; after it the training flags, a choice
# flag's choices, plugin names after -p and files after --config
_megaplug_args() {{
  local previous=${{words[CURRENT-1]}}
  if (( ! ${{words[(I)--]}} || ${{words[(I)--]}} >= CURRENT )); then
    _files
  elif (( ${{+_megaplug_choices[$previous]}} )); then
    compadd -- ${{=_megaplug_choices[$previous]}}
  elif [[ $previous == -p ]]; then
    compadd -- $_megaplug_controls
  elif [[ $previous == --config ]]; then
    _files
  else
    _describe -t flags 'training flag' _megaplug_flags
  fi
}}
"""


# -- fish ------------------------------------------------------------------------------

def _fish_quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _fish_preamble(data: _CompletionData) -> str:
    flags = " \\\n  ".join(_fish_quote(f"{flag}\t{help}") for flag, help in data.flags.items())
    cases = "\n".join(f"    case {_fish_quote(flag)}\n      printf '%s\\n' "
                      + " ".join(_fish_quote(f"{v}\t{flag} choice") for v in values)
                      for flag, values in data.choices.items())
    controls = " ".join(_fish_quote(f"{c}\tplugin") for c in data.controls)
    return f"""\
set -g _megaplug_flags \\
  {flags}
set -g _megaplug_controls {controls}

# ARGS of resolve / explain / diff: files before `--`; after it the training flags, a choice
# flag's choices, plugin names after -p and files after --config
function _megaplug_args
  set -l tokens (commandline -opc)
  set -l word (commandline -ct)
  if not contains -- -- $tokens
    __fish_complete_path $word
    return
  end
  switch $tokens[-1]
{cases}
    case -p
      printf '%s\\n' $_megaplug_controls
    case --config
      __fish_complete_path $word
    case '*'
      printf '%s\\n' $_megaplug_flags
  end
end
"""
