"""Tuning across many GPUs and hosts: `mgpu_lab.tune(..., gpus=...)` or `(..., cluster=client)`.

- `timers.py`     what a timing worker does with one candidate (CUDA events, or host time for plain callables)
- `timing_worker.py` the worker process: one per GPU, one context, many candidates
- `worker_pool.py`   the parent's handles on those workers: restart after a fault or a hang
- `pipeline.py`      compile -> time -> re-time the top k, journal and progress
- `dask_backend.py`  the same stages on a Dask distributed cluster (optional extra)
- `journal.py`, `cache_key.py`, `progress.py`, `results.py`
"""
