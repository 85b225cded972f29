"""The tuner's own exception: the backend that builds and times candidates went away."""

from __future__ import annotations


class TuneBackendLost(RuntimeError):
    """The cluster's scheduler (or another backend the whole tune depends on) was lost mid-tune.

    The message is one line: what was lost, how many candidates had finished, and where the
    journal keeps them (the same tune run again resumes with only the rest)."""
