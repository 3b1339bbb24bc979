import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

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
