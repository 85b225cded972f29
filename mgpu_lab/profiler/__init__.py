"""On-device profiler: a `Trace` decoded from what `ctx.named_region` recorded, and its exports."""

from .trace import Trace

__all__ = ["Trace"]
