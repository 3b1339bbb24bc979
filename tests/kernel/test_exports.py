"""The package's lazily imported names: ``__all__`` lists exactly what ``__getattr__`` serves."""

from __future__ import annotations

import megaplug


def test_all_lists_the_lazy_exports_sorted():
    assert megaplug.__all__ == sorted([*megaplug._EXPORTS, "__version__"])


def test_every_name_in_all_resolves():
    for name in megaplug.__all__:
        assert getattr(megaplug, name) is not None
