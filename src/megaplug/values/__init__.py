"""What a setting's value can be beyond Python's own types, and how values are written.

``_types``: :class:`TorchDType` (a dtype without importing torch) and
:func:`float_or_infinity`; ``_patterns``: the ``eval``-free layer-pattern language
(``([1]*3+[0])*2``); ``_encoding``: the JSON form of resolved values. Plugins use them as
``type=`` converters; the kernel only infers types with them.
"""
