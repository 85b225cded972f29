"""The tuner: `mgpu_lab.tune(make_kernel, space, args, reference)` on one GPU, many
(`gpus=`), or a Dask cluster (`cluster=client`). One candidate type (a Kernel), one timing
function (`CudaTimer.measure`, in a worker process per GPU), one result type (`TuneResult`).

- `pipeline.py`      `tune`: compile -> time -> re-time the top k, journal, cache, progress
- `candidates.py`    `Candidate`, `TuneResult`, building one candidate, the search space
- `timers.py`        what a timing worker does with one candidate (CUDA events, or host time for plain callables)
- `timing_worker.py` the worker process: one per GPU, one context, many candidates
- `build_pool.py`    the build processes: each build within a time limit, a dead one replaced alone
- `worker_pool.py`   the parent's handles on those workers: restart after a fault or a hang
- `dask_backend.py`  the same stages on a Dask distributed cluster (optional extra)
- `checked_files.py` a cached answer or journal record is read only when safe and well-formed
- `cached_answer.py` a cached answer is built, checked and timed once more before its first use
- `journal.py`, `cache_key.py`, `progress.py`, `results.py`, `errors.py`
"""

from .candidates import Candidate, TuneResult, compile_candidates
from .errors import TuneBackendLost
from .pipeline import tune
from .timers import CudaTimer, HostTimer

__all__ = ["Candidate", "CudaTimer", "HostTimer", "TuneBackendLost", "TuneResult", "compile_candidates", "tune"]
