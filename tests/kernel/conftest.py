import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
# the shared parity cases and launch helpers, for the tests that run real launches
for _shared in ("reliability", "parity"):
    if str(Path(__file__).resolve().parents[1] / _shared) not in sys.path:
        sys.path.append(str(Path(__file__).resolve().parents[1] / _shared))

NO_AUTOLOAD = {"MEGAPLUG_DISABLE_PLUGIN_AUTOLOAD": "1"}


@pytest.fixture
def make_kernel():
    """Build a kernel from the given plugin objects only (no built-ins, no entry points)."""
    from megaplug._kernel import Kernel
    from megaplug._plugins import PluginSet
    from megaplug.sources._selection import PluginSelection
    def build(*plugins, block=(), load=()):
        selection = PluginSelection(load=list(load), block=set(block), autoload=False)
        return Kernel(PluginSet(selection, builtins=plugins))

    return build
