"""megaplug's version, imported by the package and by the modules that report it."""

__version__ = "0.1.0"
