"""The package hands out its options class on first use (importing it is not free)."""

from __future__ import annotations

import pytest


def test_the_options_class_is_reachable_from_the_package():
    import megaplug_mla
    from megaplug_mla.options import MlaOptions

    assert megaplug_mla.MlaOptions is MlaOptions
    with pytest.raises(AttributeError, match="module 'megaplug_mla' has no attribute 'Nope'"):
        megaplug_mla.Nope  # noqa: B018
