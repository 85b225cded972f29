"""The package version, importable from every layer (the package root re-exports it)."""

__version__ = "0.2.0"
