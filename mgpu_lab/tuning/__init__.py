"""The tuner: `mgpu_lab.tune(make_kernel, space, args, reference)` on one GPU, many
(`gpus=`), or a Dask cluster (`cluster=client`). One candidate type (a Kernel), one timing
function (`CudaTimer.measure`, in a worker process per GPU), one result type (`TuneResult`).

- `pipeline.py`      `tune`: compile -> time -> re-time the top k, journal, cache, progress
- `candidates.py`    `Candidate`, `TuneResult`, building one candidate, the search space
- `timers.py`        what a timing worker does with one candidate (CUDA events, or host time for plain callables)
- `timing_worker.py` the worker process: one per GPU, one context, many candidates
- `worker_pool.py`   the parent's handles on those workers: restart after a fault or a hang
- `dask_backend.py`  the same stages on a Dask distributed cluster (optional extra)
- `journal.py`, `cache_key.py`, `progress.py`, `results.py`
"""

from .candidates import Candidate, TuneResult, compile_candidates
from .pipeline import tune
from .timers import CudaTimer, HostTimer

__all__ = ["Candidate", "CudaTimer", "HostTimer", "TuneResult", "compile_candidates", "tune"]
