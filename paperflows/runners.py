"""Task runners: where a flow's mapped tasks (seeds, configurations) run."""

from __future__ import annotations

from typing import Literal

from prefect.task_runners import ProcessPoolTaskRunner, ThreadPoolTaskRunner

RunnerName = Literal["threads", "processes", "dask"]
RUNNERS: tuple[str, ...] = ("threads", "processes", "dask")
# A Dask nanny exports MALLOC_TRIM_THRESHOLD_ to its worker, and into the environment of the process that starts it;
# glibc then stops raising its mmap threshold, so every array over 128 KB is mapped, unmapped and page-faulted anew
# (lmm_rank_unsup spent 42% of its CPU time in the kernel). A None in Dask's configuration unsets the variable.
NANNY_WITHOUT_MALLOC_TRIM = {"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}


def make_task_runner(name: str, max_workers: int, dask_address: str | None = None):
    """``threads`` (default; NumPy/torch release the GIL), ``processes`` (pure-Python hot loops),
    or ``dask``: a LocalCluster of ``max_workers`` processes, or the cluster at ``dask_address``."""
    if name == "threads":
        return ThreadPoolTaskRunner(max_workers=max_workers)
    if name == "processes":
        return ProcessPoolTaskRunner(max_workers=max_workers)
    if name == "dask":
        try:
            from prefect_dask import DaskTaskRunner
        except ImportError as err:
            raise RuntimeError("the dask runner needs the 'dask' extra: pip install -e '.[dask]'") from err
        if dask_address:
            return DaskTaskRunner(address=dask_address)
        import dask

        dask.config.set(NANNY_WITHOUT_MALLOC_TRIM)  # set for good: the runner starts its cluster inside the flow
        return DaskTaskRunner(cluster_kwargs={"n_workers": max_workers, "threads_per_worker": 1,
                                              "processes": True, "dashboard_address": None})
    raise ValueError(f"unknown runner '{name}'; choose one of {', '.join(RUNNERS)}")
