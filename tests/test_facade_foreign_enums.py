"""The facade takes Megatron's own enum members back as megaplug's stand-ins.

A caller (or Megatron's code between parse_args and validate_args) may set a member of
megatron.core's enum on the namespace; megaplug's plugins compare with their stand-in.
Megatron is faked here by a module of the name the stand-in declares.
"""

from __future__ import annotations

import enum
import sys
import types

import pytest

import megaplug
from megaplug.builtin.model.types import AttnBackend
from megaplug.megatron import parse_args, validate_args

BASE = ["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
        "--seq-length", "128", "--max-position-embeddings", "128", "--micro-batch-size", "2",
        "--train-iters", "10", "--lr", "1e-4", "-p", "no:lora"]
ENV = {"RANK": "0", "WORLD_SIZE": "4"}


@pytest.fixture
def megatron_enums(monkeypatch):
    """A stand-in for ``megatron.core.transformer.enums`` with Megatron's AttnBackend."""
    module_name, _, class_name = AttnBackend.__megatron_type__.partition(":")
    module = types.ModuleType(module_name)
    native = enum.Enum(class_name, [(member.name, member.value) for member in AttnBackend],
                       module=module_name)
    setattr(module, class_name, native)
    monkeypatch.setitem(sys.modules, module_name, module)
    return native


def validated(args):
    target = megaplug.TargetEnvironment(packages={"transformer_engine": "2.17.1"},
                                        device_capability=(9, 0))
    return validate_args(args, target=target, environ=ENV, torch_types=False)


def test_a_megatron_member_set_on_the_namespace_becomes_the_stand_in(megatron_enums):
    args = parse_args(argv=BASE, environ=ENV)
    args.attention_backend = megatron_enums.flash
    assert validated(args).attention_backend is AttnBackend.flash


def test_a_megatron_member_in_the_defaults_becomes_the_stand_in(megatron_enums):
    args = parse_args(argv=BASE, environ=ENV)
    args.attention_backend = None
    target = megaplug.TargetEnvironment(packages={"transformer_engine": "2.17.1"},
                                        device_capability=(9, 0))
    validate_args(args, {"attention_backend": megatron_enums.fused}, target=target,
                  environ=ENV, torch_types=False)
    assert args.attention_backend is AttnBackend.fused


def test_an_enum_nobody_stands_in_for_is_kept_as_it_is():
    Colour = enum.Enum("Colour", ["red"], module="somewhere_else")
    args = parse_args(argv=BASE, environ=ENV)
    args.not_a_setting_colour = Colour.red
    assert validated(args).not_a_setting_colour is Colour.red


def test_without_a_megatron_enum_the_declared_enum_types_are_not_gathered(monkeypatch):
    from megaplug.megatron import _checkpoint

    monkeypatch.setattr(_checkpoint, "declared_enum_types",
                        lambda kernel: pytest.fail("gathered the declared enum types"))
    args = parse_args(argv=BASE, environ=ENV)
    assert validated(args).exit_signal.name == "SIGTERM"  # signal.Signals: not Megatron's
