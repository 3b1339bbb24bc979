"""Pattern strings never reach ``eval``: code payloads through every pattern flag are refused.

Each payload would create a marker file if anything evaluated it. It goes through every
pattern flag on the command line, in a YAML config file and as a caller default, through
the library and the CLI; every resolve must fail with a problem naming the flag, and the
marker must never appear. A static check confirms no ``eval``/``exec`` in megaplug or its
plugins.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest
import yaml

from reliability_support import MINIMAL, resolve_environment

import megaplug
from megaplug.cli import main

PATTERN_FLAGS = ("--moe-layer-freq", "--no-rope-freq", "--linear-attention-freq",
                 "--window-attn-skip-freq", "--pipeline-model-parallel-layout",
                 "--hybrid-layer-pattern")
ROOT = Path(__file__).resolve().parents[2]
NO_GPU = megaplug.TargetEnvironment(device_capability=None)


def payloads(marker: Path) -> list[str]:
    command = f"touch {marker}"
    return [
        f"__import__('os').system('{command}')",
        f"[1]*2+__import__('os').system('{command}')",
        f"([1]*3+[0]*1)*3 if __import__('os').system('{command}') else 1",
        f"[__import__('subprocess').call(['touch', '{marker}'])]",
        f"exec(\"import os; os.system('{command}')\")",
        f"eval(\"__import__('os').system('{command}')\")",
        f"(lambda: __import__('os').system('{command}'))()",
        f"E|(t|)*3,m|L;__import__('os').system('{command}')",
        f"M*-{{__import__('os').system('{command}')}}",
        f"[x for x in [__import__('os').system('{command}')]]",
        "().__class__.__base__.__subclasses__()",
        f"open('{marker}', 'w')",
    ]


def _problems(argv: list[str], files: list[str] = (), defaults: dict | None = None):
    kernel, rest = megaplug.load([])
    with pytest.raises(megaplug.ConfigError) as info:
        kernel.resolve([*rest, *argv], config_files=list(files), defaults=defaults, environ={},
                       target=NO_GPU)
    return info.value.problems


def _names(problems, flag: str) -> bool:
    dest = flag.lstrip("-").replace("-", "_")
    return any(flag in p.message or flag in p.flags or dest in p.flags for p in problems)


@pytest.mark.parametrize("flag", PATTERN_FLAGS)
def test_payloads_on_the_command_line_are_refused_without_running(tmp_path: Path, flag: str):
    marker = tmp_path / "pwned"
    for payload in payloads(marker):
        problems = _problems([*MINIMAL, "--num-experts", "4", flag, payload])
        assert _names(problems, flag), (payload, problems)
        assert not any(" raised " in p.message for p in problems), problems
    assert not marker.exists()


@pytest.mark.parametrize("flag", PATTERN_FLAGS)
def test_payloads_in_a_config_file_are_refused_without_running(tmp_path: Path, flag: str):
    marker = tmp_path / "pwned"
    dest = flag.lstrip("-").replace("-", "_")
    for index, payload in enumerate(payloads(marker)):
        path = tmp_path / f"payload{index}.yaml"
        path.write_text(yaml.safe_dump({dest: payload, "num_experts": 4}))
        problems = _problems(MINIMAL, [str(path)])
        assert _names(problems, flag), (payload, problems)
    assert not marker.exists()


@pytest.mark.parametrize("flag", PATTERN_FLAGS)
def test_payloads_as_caller_defaults_never_run(tmp_path: Path, flag: str):
    """Caller defaults are trusted code's values, yet a string there is still never evaluated."""
    marker = tmp_path / "pwned"
    dest = flag.lstrip("-").replace("-", "_")
    for payload in payloads(marker):
        kernel, rest = megaplug.load([])
        try:
            kernel.resolve([*MINIMAL, "--num-experts", "4"], defaults={dest: payload},
                           environ={}, target=NO_GPU)
        except megaplug.ConfigError as exc:
            assert not any(" raised " in p.message for p in exc.problems), exc
    assert not marker.exists()


@pytest.mark.parametrize("flag", PATTERN_FLAGS)
def test_payloads_through_the_cli(tmp_path: Path, flag: str):
    marker = tmp_path / "pwned"
    payload = payloads(marker)[0]
    err = io.StringIO()
    with resolve_environment(), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(err):
        code = main(["resolve", "--assume-device-capability", "none", "--", *MINIMAL,
                     "--num-experts", "4", flag, payload])
    assert code == 2 and flag in err.getvalue() and "Traceback" not in err.getvalue()
    assert not marker.exists()


def test_valid_patterns_still_work():
    kernel, rest = megaplug.load([])
    argv = [*MINIMAL, "--num-layers", "12", "--num-experts", "4",
            "--moe-layer-freq", "([1]*3+[0]*1)*3"]
    resolved = kernel.resolve(argv, environ={}, target=NO_GPU)
    assert resolved.moe_layer_freq == [1, 1, 1, 0] * 3


def test_no_eval_or_exec_in_megaplug_or_its_plugins():
    sources = list((ROOT / "src" / "megaplug").rglob("*.py"))
    sources += list((ROOT / "plugins").glob("*/src/**/*.py"))
    call = re.compile(r"(?<![\w.])(eval|exec)\s*\(|__import__\s*\(|compile\s*\([^)]*['\"]eval")
    offenders = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
                 for path in sources
                 for number, line in enumerate(path.read_text().splitlines(), 1)
                 if call.search(line.split("#", 1)[0])]
    assert len(sources) > 50
    assert not offenders, offenders
