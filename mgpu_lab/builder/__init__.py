"""The DSL builder. Importing any part of it imports `values` first, which registers the MLIR
bindings' value casters: every index/int/float/vector op result and block argument then comes
back as a typed value with Python operators."""

from . import values as _typed_values  # noqa: F401
