"""Megatron-Bridge imported in the Megatron tier, with no GPU and no Transformer Engine.

Bridge's LoRA module (imported by ``megatron.bridge.models`` and so by
``megatron.bridge.training.config``) imports ``transformer_engine.pytorch`` unconditionally
and names ``te.ops.Sequential`` in an annotation; nothing else in its config modules needs
TE. So a stub module stands in for TE while Bridge is imported, and only then: megatron-core
is imported first and keeps its own finding that TE is absent, and the stub is gone from
``sys.modules`` afterwards. The one place the tier does this (``load_megatron_bridge``).
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import importlib.util
import logging
import sys
import types
import warnings
from typing import Any, Iterator

import pytest

#: The stub's modules: the package, its PyTorch half, and the ops module Bridge names.
_TE_MODULES = ("transformer_engine", "transformer_engine.pytorch",
               "transformer_engine.pytorch.ops")


class _Stub(types.ModuleType):
    """A module whose every attribute is an empty class (what an import or an annotation
    needs of it; nothing here calls TE)."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        value = type(name, (), {})
        setattr(self, name, value)
        return value


@contextlib.contextmanager
def _transformer_engine_stub() -> Iterator[None]:
    """``transformer_engine.pytorch`` as empty classes, for the length of an import."""
    for name in _TE_MODULES:
        module = _Stub(name)
        module.__path__ = []
        module.__spec__ = importlib.machinery.ModuleSpec(name, None)
        sys.modules[name] = module
    sys.modules[_TE_MODULES[0]].pytorch = sys.modules[_TE_MODULES[1]]  # type: ignore[attr-defined]
    sys.modules[_TE_MODULES[1]].ops = sys.modules[_TE_MODULES[2]]  # type: ignore[attr-defined]
    try:
        yield
    finally:
        for name in _TE_MODULES:
            sys.modules.pop(name, None)


def load_megatron_bridge() -> types.SimpleNamespace:
    """Megatron-Bridge's config container, its runtime update and AutoBridge, imported
    (TE stubbed while they are); the calling test is skipped where Bridge or transformers
    is not importable (the main suite; an interop directory not built yet)."""
    pytest.importorskip("transformers", reason="Megatron-Bridge's models import transformers "
                        "(installed beside the environment by scripts/megatron-env.sh)")
    if importlib.util.find_spec("megatron.bridge") is None:  # (its import needs the stub)
        pytest.skip("Megatron-Bridge is installed beside the environment by "
                    "scripts/megatron-env.sh")
    import megatron.training.arguments  # noqa: F401  (megatron-core's TE finding first)

    with _transformer_engine_stub(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.bridge.models.conversion.auto_bridge import AutoBridge
        from megatron.bridge.training import config
    logging.getLogger("megatron.bridge").setLevel(logging.ERROR)
    return types.SimpleNamespace(AutoBridge=AutoBridge, ConfigContainer=config.ConfigContainer,
                                 runtime_config_update=config.runtime_config_update,
                                 config=config)
