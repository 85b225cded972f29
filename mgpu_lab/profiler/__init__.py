"""On-device profiler: `ctx.named_region` recording (device.py) and Trace decoding/export."""
