"""What every test under tests/ shares: the plugins of this checkout and no others."""


def _only_this_checkouts_plugins() -> None:
    """Tests see the plugins of this checkout (the shipped ones and examples/'s) and no
    other installed one: a newcomer who has installed a tutorial's plugin (megaplug-ema)
    runs the same tests, with the same results, as CI. A plugin's own tests and the docs'
    tutorials are not under tests/: they see what is installed, as does a test that starts
    a process of its own or rescans the entry points."""
    from megaplug.cache import _entry_points
    from megaplug.sources._selection import SHIPPED_DISTRIBUTIONS

    ours = SHIPPED_DISTRIBUTIONS | {"megaplug-example-plugin"}
    _entry_points._MEMO = [entry for entry in _entry_points.entry_points()
                           if entry.distribution in ours]


_only_this_checkouts_plugins()
