"""The plugin is a cheap declaration: importing its package loads only its ``__init__``, and
every name its ``PluginInfo`` gives (options, groups of rules, superseded rules, ordering)
names something."""

from megaplug.testing import check_plugin


def test_the_plugin_is_a_cheap_declaration():
    assert check_plugin("megaplug_memory") == []
