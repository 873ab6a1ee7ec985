"""The package version, in one module that imports nothing (the root re-exports it)."""

__version__ = "0.1.0"
