"""Scoria's central scheduler: gang and queue scheduling in Volcano's model, on NumPy arrays."""

__version__ = "0.1.0"
