"""Deprecated: the exporter moved to `mgpu_lab.runtime.export` (0.2); `mgpu_lab.export` and
`Kernel.export` are the public ways in. Names read from here warn until mgpu_lab 0.3."""

from mgpu_lab.deprecation import moved_module

__getattr__ = moved_module("mgpu_lab.exporter", "mgpu_lab.runtime.export")
