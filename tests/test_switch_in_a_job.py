"""The switch and the facade in a real job (issue 29), without Megatron: Megatron's argument
table, the pre-flight default under the switch, and the training process as its own target.
The Megatron tier (tests/megatron/test_argument_table.py, test_switch_in_a_job.py) holds the
table to Megatron's own printout and runs the switch on Megatron's code."""

from __future__ import annotations

import argparse
import importlib.util
import io

import pytest

import megaplug
from megaplug.megatron import _facade, _switch, parse_and_validate_args
from megaplug.megatron._table import argument_table, print_argument_table, process_rank

BASE = ["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
        "--seq-length", "128", "--max-position-embeddings", "128", "--micro-batch-size", "2",
        "--train-iters", "10", "--lr", "1e-4", "-p", "no:lora"]
ENV = {"RANK": "0", "WORLD_SIZE": "1"}
#: RoPE with its fusion on (the default): Megatron needs Transformer Engine >= 1.4 for it.
ROPE = [*BASE, "--position-embedding-type", "rope"]
ROPE_REFUSED = "RoPE fusion (on by default) requires transformer_engine >= 1.4, not installed"
TORCHRUN = {"TORCHELASTIC_RUN_ID": "none", "LOCAL_RANK": "0"}
no_transformer_engine = pytest.mark.skipif(
    importlib.util.find_spec("transformer_engine") is not None,
    reason="Transformer Engine is installed here")


def test_the_table_is_megatrons_format():
    args = argparse.Namespace(zeta=1, Alpha=[1, 2], beta=None, **{"n" * 50: "long"})
    assert argument_table(args) == (
        "------------------------ arguments ------------------------\n"
        f"  Alpha {'.' * 43} [1, 2]\n"
        f"  beta {'.' * 44} None\n"
        f"  {'n' * 50}  long\n"  # past the 48-wide column no dots, as Megatron's
        f"  zeta {'.' * 44} 1\n"
        "-------------------- end of arguments ---------------------\n")


@pytest.mark.parametrize(("environ", "rank"), [
    ({}, 0), ({"RANK": "3"}, 3), ({"SLURM_PROCID": "2", "SLURM_NTASKS": "4"}, 2),
    ({"SLURM_PROCID": "2"}, 0), ({"RANK": "1", "SLURM_PROCID": "0", "SLURM_NTASKS": "2"}, 1),
    ({"RANK": "x"}, 0), ({"SLURM_NTASKS": "4"}, 0)])
def test_the_rank_is_megatrons_is_rank0_reading(environ, rank):
    assert process_rank(environ) == rank


def test_only_rank_0_prints():
    args, out = argparse.Namespace(a=1), io.StringIO()
    print_argument_table(args, {"RANK": "1"}, out)
    assert out.getvalue() == ""
    print_argument_table(args, {"RANK": "0"}, out)
    assert out.getvalue() == argument_table(args)


def test_the_facade_prints_the_table_when_validation_passes(capsys):
    args = parse_and_validate_args(argv=BASE, environ=ENV, register=False)
    printed = capsys.readouterr().out
    assert printed == argument_table(args)
    assert f"  num_layers {'.' * 38} 2\n" in printed
    assert f"  params_dtype {'.' * 36} torch.float32\n" in printed


def test_the_release_in_force_is_named_on_stderr_before_the_table_on_rank_0_only():
    args, out, errors = argparse.Namespace(a=1), io.StringIO(), io.StringIO()
    print_argument_table(args, {"RANK": "1"}, out, release="0.17.0 (as stated)", errors=errors)
    assert out.getvalue() == errors.getvalue() == ""
    print_argument_table(args, {"RANK": "0"}, out, release="0.17.0 (as stated)", errors=errors)
    assert out.getvalue() == argument_table(args)
    assert errors.getvalue() == "megaplug: arguments for Megatron 0.17.0 (as stated)\n"


@pytest.mark.parametrize(("version", "said"), [
    ("0.17.0", "0.17.0 (as stated)"),
    ("0.17.3", "0.17.1 (megatron_core 0.17.3, as stated; 0.17.3 was not measured: resolved "
               "as 0.17.1, the nearest earlier measured release)")])
def test_the_facade_names_the_exact_release_of_its_table_on_stderr(version, said, capsys):
    target = megaplug.TargetEnvironment(packages={"megatron_core": version})
    for rank, printed in (("1", ""), ("0", f"megaplug: arguments for Megatron {said}\n")):
        args = parse_and_validate_args(argv=BASE, environ={**ENV, "RANK": rank},
                                       target=target, register=False)
        captured = capsys.readouterr()
        assert captured.err == printed
        assert captured.out == (argument_table(args) if rank == "0" else "")


@pytest.mark.parametrize("kwargs", [{"torch_types": False}, {"print_arguments": False}])
def test_the_table_is_left_out_when_asked_or_when_the_namespace_is_not_megatrons(kwargs, capsys):
    parse_and_validate_args(argv=BASE, environ=ENV, register=False, **kwargs)
    assert capsys.readouterr().out == ""


def test_no_table_when_validation_fails(capsys):
    with pytest.raises(_facade.ConfigError):
        parse_and_validate_args(argv=[*BASE, "--num-attention-heads", "5"], environ=ENV,
                                register=False)
    assert capsys.readouterr().out == ""


def test_the_training_process_knows_what_it_lacks():
    assert megaplug.TargetEnvironment(own_process=True).knows_package("transformer_engine")
    assert not megaplug.TargetEnvironment().knows_package("transformer_engine")
    assert megaplug.TargetEnvironment(packages={"transformer_engine": None}).knows_package(
        "transformer_engine")
    assert megaplug.TargetEnvironment(own_process=True).with_environ({}).own_process


def _resolves(argv, environ, **kwargs) -> list[str]:
    """The problems of a facade resolve ([] when it passes)."""
    try:
        parse_and_validate_args(argv=argv, environ=environ, register=False, torch_types=False,
                                **kwargs)
    except _facade.ConfigError as error:
        return [problem.message for problem in error.problems]
    return []


@no_transformer_engine
def test_under_torchrun_a_missing_transformer_engine_is_absent():
    refused = _resolves(ROPE, {**ENV, **TORCHRUN}, preflight=True)
    assert len(refused) == 1 and refused[0].startswith(ROPE_REFUSED)
    # a login node: Transformer Engine may well be on the cluster, so unknown, not checked
    assert _resolves(ROPE, ENV, preflight=True) == []
    # the Python API keeps Megatron's acceptance by default, under torchrun too
    assert _resolves(ROPE, {**ENV, **TORCHRUN}) == []


@no_transformer_engine
def test_under_the_switch_preflight_is_on_and_the_process_is_the_target(monkeypatch):
    monkeypatch.setattr(_facade, "UNDER_SWITCH", True)
    refused = _resolves(ROPE, ENV)
    assert len(refused) == 1 and refused[0].startswith(ROPE_REFUSED)
    assert _resolves([*ROPE, "--no-rope-fusion"], ENV) == []
    for off in ("0", "false", "off"):
        assert _resolves(ROPE, {**ENV, "MEGAPLUG_PREFLIGHT": off}) == []
    # every rank resolves the same command line on the same kind of node: the same verdict
    verdicts = {tuple(_resolves(ROPE, {"RANK": str(rank), "WORLD_SIZE": "4", **TORCHRUN}))
                for rank in range(4)}
    assert len(verdicts) == 1 and verdicts != {()}


@pytest.mark.parametrize(("environ", "said"), [
    ({"MEGAPLUG_PREFLIGHT": "0"}, True),
    ({"MEGAPLUG_PREFLIGHT": "0", "RANK": "1"}, False),
    ({}, False),
    ({"MEGAPLUG_PREFLIGHT": "1"}, False)])
def test_the_log_says_once_on_rank_0_that_preflight_is_off(environ, said, monkeypatch, capsys):
    for variable in ("MEGAPLUG_PREFLIGHT", "RANK", "SLURM_PROCID"):
        monkeypatch.delenv(variable, raising=False)
    for variable, value in environ.items():
        monkeypatch.setenv(variable, value)
    monkeypatch.setattr(_facade, "UNDER_SWITCH", True)  # as the switch's run sets it
    _switch._say_when_preflight_is_off()
    out = capsys.readouterr().out
    expected = ("megaplug: pre-flight checks are off (MEGAPLUG_PREFLIGHT=0): what Megatron "
                "refuses only when it builds the model is not checked before\n")
    assert out == (expected if said else "")
