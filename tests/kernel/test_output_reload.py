"""Issue 31, class 4: what megaplug writes reloads to the same values.

* ``resolve --given`` output, YAML and JSON, resolved again with ``--config``, gives the
  same resolved configuration -- for the issue's flags (``--exit-signal SIGUSR1``,
  ``--window-size 128,0``, ``--triton-autotune-block-sizes BLOCK_SIZE=128``,
  ``--onnx-safe ''``) and for a random set of given flags of every kind (hypothesis).
* In every resolved output of every shared parity case, each flag's value that no plugin
  rewrote (a default, or as given) reads back, through the conversion every source uses,
  as the value written.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import megaplug
from megaplug._errors import Problem
from megaplug.cli import main
from megaplug.values._encoding import encode
from megaplug.values._loaded import same_json

from reliability_support import MINIMAL, ok_cases, resolve_environment, target_for
from reliability_support import third_party_blocks
from test_convert_sources import FLAGS, texts_for

EXAMPLES = int(os.environ.get("MEGAPLUG_ROUND3_EXAMPLES", 300)) // 5
KERNEL, _ = megaplug.load([])


def cli(*argv: str, capsys: Any) -> tuple[int, str, str]:
    with resolve_environment():
        code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def given_output_reloads(tmp_path: Path, form: str, launch: list[str], capsys: Any,
                         controls: tuple[str, ...] = ()) -> str:
    """Resolve ``launch``, save its ``--given`` output, resolve that file (with the same
    plugin selection, ``controls``): the same JSON. Returns the saved output."""
    code, direct, err = cli("resolve", "--", *controls, *launch, capsys=capsys)
    assert code == 0, err
    code, saved, err = cli("resolve", "--given", "--format", form, "--", *controls, *launch,
                           capsys=capsys)
    assert code == 0, err
    path = tmp_path / f"given.{form}"
    path.write_text(saved)
    code, again, err = cli("resolve", "--config", str(path), "--", *controls, capsys=capsys)
    assert code == 0, (saved, err)
    assert json.loads(again) == json.loads(direct)
    return saved


ISSUE_FLAGS = [["--exit-signal", "SIGUSR1"], ["--window-size", "128,0"],
               ["--triton-autotune-block-sizes", "BLOCK_SIZE=128", "BLOCK_M=64"],
               ["--onnx-safe", ""], ["--onnx-safe", "x"]]


@pytest.mark.parametrize("form", ["yaml", "json"])
@pytest.mark.parametrize("flag", ISSUE_FLAGS, ids=lambda flag: flag[0])
def test_the_issue_flags_given_output_reloads(tmp_path, capsys, form, flag):
    given_output_reloads(tmp_path, form, [*MINIMAL, *flag], capsys)


def test_onnx_safe_given_empty_stays_false(tmp_path, capsys):
    saved = given_output_reloads(tmp_path, "yaml", [*MINIMAL, "--onnx-safe", ""], capsys)
    assert "onnx_safe: false" in saved.splitlines()
    code, out, _ = cli("resolve", "--config", str(tmp_path / "given.yaml"), capsys=capsys)
    assert json.loads(out)["onnx_safe"] is False


@st.composite
def accepted_flags(draw: Any) -> list[str]:
    """1-4 flags of the table with texts the command line accepts on its own."""
    tokens: list[str] = []
    for spec in draw(st.lists(st.sampled_from(FLAGS), min_size=1, max_size=4,
                              unique_by=lambda spec: spec.dest)):
        count = draw(st.integers(1, 3)) if spec.nargs is not None else 1
        if isinstance(spec.nargs, int):
            count = spec.nargs
        texts = [draw(st.sampled_from(texts_for(spec))) for _ in range(count)]
        _, sink = KERNEL.parse([spec.primary, *texts], environ={})
        if not sink.problems:
            tokens += [spec.primary, *texts]
    return tokens


@settings(deadline=None, derandomize=True, database=None, max_examples=EXAMPLES,
          suppress_health_check=list(HealthCheck))
@given(accepted_flags(), st.sampled_from(["yaml", "json"]))
def test_given_output_of_any_flags_reloads(tmp_path_factory, capsys, flags, form):
    controls = (*third_party_blocks(), "-p", "no:preflight")
    with resolve_environment():
        try:
            megaplug.resolve([*controls, *MINIMAL, *flags], environ={})
        except megaplug.ConfigError:
            return  # the plugins refuse this combination: nothing is written
    given_output_reloads(tmp_path_factory.mktemp("given"), form, [*MINIMAL, *flags], capsys,
                         controls)


def reload_problems(resolved: Any) -> list[str]:
    """Each flag value no plugin rewrote that does not read back as written.

    Left out: Megatron's scalar defaults of two list flags (``moe_router_load_balancing_type``
    ``'aux_loss'``, ``moe_aux_loss_coeff`` ``0.0``), which a source, like the command line,
    can only give as a list (``['aux_loss']``); and the empty defaults of ``nargs='+'``
    flags (``triton_autotune_block_sizes``), which no source, like the command line, can
    give: it takes at least one value (one conversion, one check)."""
    wrong = []
    for dest in resolved:
        specs = KERNEL.table.by_dest.get(dest)
        record = resolved.source(dest)
        if not specs or specs[0].kind != "flag" or record.source in ("normalized", "derived"):
            continue
        if specs[0].nargs is not None and not isinstance(resolved[dest], (list, tuple)) \
                and resolved[dest] is not None and record.source == "default":
            continue
        if specs[0].nargs == "+" and resolved[dest] in ([], ()) and record.source == "default":
            continue
        written = encode(resolved[dest])
        read = KERNEL.convert(specs[0], json.loads(json.dumps(written)), source="config-file")
        if isinstance(read, Problem) or not same_json(encode(read), written):
            wrong.append(f"{dest}: wrote {written!r}, read {read}")
    return wrong


@pytest.mark.parametrize("name, case", ok_cases(), ids=[name for name, _ in ok_cases()])
def test_every_flag_of_every_resolved_output_reads_back(name, case):
    with resolve_environment():
        resolved = megaplug.resolve([*third_party_blocks(), *case["argv"]],
                                    environ=dict(case.get("env") or {}),
                                    defaults=case.get("args_defaults") or {},
                                    target=target_for(case))
    assert reload_problems(resolved) == []
