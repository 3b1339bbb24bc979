"""Shell completion: what real bash, fish and zsh complete with the generated scripts.

bash: the script is sourced in a bash process, COMP_WORDS / COMP_CWORD / COMP_LINE are set
the way readline sets them (split at COMP_WORDBREAKS, so ``no:moe`` is three words), the
function ``complete -p megaplug`` names is called, and COMPREPLY is read back.
fish: ``complete -C LINE``. zsh: an interactive zsh in a pseudo-terminal, TAB pressed.
"""

from __future__ import annotations

import os
import re
import select
import shlex
import shutil
import subprocess
import sys
import time

import pytest

from cli_support import run

#: Characters readline splits words at (bash's default COMP_WORDBREAKS, less whitespace).
WORDBREAKS = set("\"'><=;|&(:")


@pytest.fixture(scope="module")
def scripts(tmp_path_factory):
    """The three scripts, generated once from every installed plugin."""
    from megaplug import load
    from megaplug.cli._completion import completion_script

    kernel, _ = load([], environ={})
    directory = tmp_path_factory.mktemp("completion")
    paths = {}
    for shell in ("bash", "zsh", "fish"):
        paths[shell] = directory / f"megaplug.{shell}"
        paths[shell].write_text(completion_script(kernel, shell))
    return paths


def readline_words(line: str) -> list[str]:
    """COMP_WORDS as readline builds them: whitespace separates, break characters are words."""
    words, current = [], ""
    for char in line:
        if char.isspace():
            if current:
                words.append(current)
            current = ""
        elif (char in WORDBREAKS) != (current[-1:] in WORDBREAKS) and current:
            words.append(current)
            current = char
        else:
            current += char
    return [*words, current]


def bash_complete(script, *lines: str, cwd=None) -> list[list[str]]:
    """COMPREPLY for each command line, completed at its end, in one real bash."""
    program = [f"source {shlex.quote(str(script))}",
               'function=$(complete -p megaplug | sed -E "s/.*-F ([^ ]+).*/\\1/")']
    for line in lines:
        words = readline_words(line)
        program += [
            "COMP_WORDS=(" + " ".join(shlex.quote(w) for w in words) + ")",
            f"COMP_CWORD={len(words) - 1}; COMP_LINE={shlex.quote(line)}; "
            f"COMP_POINT={len(line)}; COMP_TYPE=9; COMPREPLY=()",
            f'"$function" megaplug {shlex.quote(words[-1])} '
            f'{shlex.quote(words[-2] if len(words) > 1 else "")}',
            'printf "%s\\n" "${COMPREPLY[@]}"; echo "@@"',
        ]
    result = subprocess.run(["bash", "--norc", "--noprofile", "-c", "\n".join(program)],
                            capture_output=True, text=True, cwd=cwd, check=True)
    assert result.stderr == ""
    return [sorted(filter(None, chunk.splitlines()))
            for chunk in result.stdout.split("@@\n")[:-1]]


def test_command_prints_a_script_per_shell_and_refuses_others(clean_env, capsys):
    for shell, marker in (("bash", "complete -o bashdefault -F _megaplug megaplug"),
                          ("zsh", "compdef _shtab_megaplug"), ("fish", "complete -c megaplug")):
        code, out, _ = run(capsys, "completion", shell)
        assert code == 0 and marker in out and "--num-layers" in out
    code, _, err = run(capsys, "completion", "tcsh")
    assert code == 2 and "invalid choice: 'tcsh'" in err


def test_bash_completes_commands_options_and_their_choices(scripts):
    found = bash_complete(scripts["bash"], "megaplug ", "megaplug ex", "megaplug resolve --fo",
                          "megaplug resolve --format ", "megaplug list --", "megaplug completion ",
                          "megaplug flags --plugin mo")
    assert found == [
        ["completion", "diff", "docs", "explain", "export", "flags", "import", "list",
         "memory", "plan", "resolve", "schema", "upgrade"],
        ["explain", "export"], ["--format"], ["json", "yaml"],
        ["--assume", "--help", "--json", "--no-autoload", "--order"], ["bash", "fish", "zsh"],
        ["model", "moe"],
    ]


def test_bash_completes_training_flags_after_the_separator_only(scripts):
    before, after, later, explained = bash_complete(
        scripts["bash"], "megaplug resolve --num-la", "megaplug resolve -- --num-la",
        "megaplug resolve -- --num-layers 2 --hidden-s",
        "megaplug explain ffn_hidden_size -- --swi")
    assert before == []  # before `--` only megaplug's own options complete
    assert after == ["--num-layers", "--num-layers-at-end-in-bf16",
                     "--num-layers-at-start-in-bf16", "--num-layers-per-virtual-pipeline-stage"]
    assert later == ["--hidden-size"]
    assert explained == ["--swiglu", "--swin-backbone-type"]


def test_bash_completes_a_choice_flags_choices(scripts):
    every, started = bash_complete(scripts["bash"], "megaplug resolve -- --attention-backend ",
                                   "megaplug resolve -- --attention-backend fl")
    assert every == ["auto", "flash", "fused", "local", "unfused"]
    assert started == ["flash"]


def test_bash_completes_plugin_names_after_p_and_p_no(scripts):
    from megaplug import load

    names = sorted(load([], environ={})[0].plugins.records)
    own, among_args, blocked, blocked_among_args = bash_complete(
        scripts["bash"], "megaplug resolve -p mo", "megaplug resolve -- -p ",
        "megaplug resolve -p no:m", "megaplug resolve -- -p no:mo")
    assert own == ["model", "moe"]
    assert among_args == sorted([*names, *(f"no:{n}" for n in names)])
    # readline replaces only what follows the ':', so the candidates are what follows it
    assert blocked == ["memory", "mla", "model", "moe"]
    assert blocked_among_args == ["model", "moe"]


def test_bash_completes_settings_and_files(scripts, tmp_path):
    (tmp_path / "run.yaml").write_text("num_layers: 2\n")
    found = bash_complete(scripts["bash"], "megaplug explain ffn_h", "megaplug diff ru",
                          "megaplug resolve --config ru", "megaplug resolve -- --config ru",
                          cwd=tmp_path)
    assert found == [["ffn_hidden_size"], ["run.yaml"], ["run.yaml"], ["run.yaml"]]


def test_bash_completes_a_third_party_plugins_flags(scripts):
    from importlib import metadata

    # scripts/setup.sh installs it: a missing plugin is a failure, not a skip
    assert metadata.distribution("megaplug-example-plugin")
    assert bash_complete(scripts["bash"], "megaplug resolve -- --lora-a") == [["--lora-alpha"]]


def test_the_script_follows_the_plugin_selection(clean_env, capsys, tmp_path):
    code, out, _ = run(capsys, "completion", "bash", "-p", "no:moe")
    assert code == 0
    script = tmp_path / "no-moe.bash"
    script.write_text(out)
    without, kept = bash_complete(script, "megaplug resolve -- --num-exp",
                                  "megaplug resolve -- --num-lay")
    assert without == [] and kept


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
def test_fish_completes_the_same(scripts):
    def complete(line: str) -> list[str]:
        result = subprocess.run(
            ["fish", "--no-config", "-c", f"source {scripts['fish']}; complete -C {line!r}"],
            capture_output=True, text=True, check=True)
        return sorted(entry.split("\t")[0] for entry in result.stdout.splitlines())

    assert complete("megaplug ex") == ["explain"]
    assert complete("megaplug resolve --format ") == ["json", "yaml"]
    assert complete("megaplug resolve -- --swig") == ["--swiglu"]
    assert complete("megaplug resolve -- --attention-backend fl") == ["flash"]
    assert complete("megaplug resolve -- -p no:ml") == ["no:mla"]
    assert complete("megaplug explain ffn_h") == ["ffn_hidden_size"]


def _zsh_completed(script, lines: list[str]) -> list[str | None]:
    """Type each line into an interactive zsh, press TAB, and read the edited line back."""
    import pty

    pid, terminal = pty.fork()
    if pid == 0:  # pragma: no cover - the child becomes zsh
        os.environ["TERM"] = "dumb"
        os.execvp("zsh", ["zsh", "-f", "-i"])

    def read(seconds: float) -> str:
        out, deadline = b"", time.monotonic() + seconds
        while time.monotonic() < deadline:
            if select.select([terminal], [], [], 0.05)[0]:
                try:
                    out += os.read(terminal, 65536)
                except OSError:
                    break
        return out.decode(errors="replace")

    def send(text: str) -> None:
        os.write(terminal, text.encode())

    try:
        send(f"bindkey -e; autoload -Uz compinit; compinit -u; eval \"$(<{script})\"; "
             "PS1='> '\r")
        read(3.0)
        completed = []
        for line in lines:
            send(line + "\t")
            read(1.0)
            send("\x01print -r -- @@ \r")  # Ctrl-A, then print whatever the line now is
            shown = re.findall(r"^@@ (.*?)\s*$", read(1.0), re.M)
            completed.append(shown[-1] if shown else None)
        return completed
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        os.close(terminal)


@pytest.mark.skipif(shutil.which("zsh") is None or sys.platform == "win32",
                    reason="zsh is not installed")
def test_zsh_completes_the_same(scripts):
    lines = ["megaplug ex", "megaplug resolve --format y", "megaplug resolve -- --swig",
             "megaplug resolve -- --attention-backend fl", "megaplug resolve -p no:ml",
             "megaplug explain ffn_h"]
    assert _zsh_completed(scripts["zsh"], lines) == [
        "megaplug explain", "megaplug resolve --format yaml", "megaplug resolve -- --swiglu",
        "megaplug resolve -- --attention-backend flash", "megaplug resolve -p no:mla",
        "megaplug explain ffn_hidden_size"]
