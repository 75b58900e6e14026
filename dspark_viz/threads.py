"""Full speed from any thread: a thread that stops computing gives its OpenMP helper threads back.

Why a worker thread decoded at half speed. GNU OpenMP (libgomp, the runtime torch's Linux wheels and the native
kernels use) keeps one pool of helper threads *per thread that starts parallel regions*, and the pool lives as long
as that thread: the main thread that loaded the model keeps its idle helper after it has stopped computing. When a
second thread (a Gradio handler, a ``threading.Thread``) starts its own regions, libgomp counts more threads of
its own than the machine has CPUs and switches every barrier from spinning to its *throttled* spin of 100
iterations (``gomp_throttled_spin_count_var``; no environment variable raises it past 1,000), after which a
waiting thread sleeps in the kernel. A decode step has a few hundred parallel regions, so each token then pays a few
hundred futex sleeps and wake-ups: measured on a 2-core AMD EPYC, bf16 plain decoding, 128 tokens, about 35,000
voluntary context switches from a worker thread against fewer than 10 from the main thread
(``benchmarks/bench_worker_thread.py``), and half the tokens/s on a 2-vCPU Xeon, where a wake-up costs more.

The fix at that root: ``give_back()`` releases the calling thread's pool (OpenMP 5's
``omp_pause_resource_all(omp_pause_soft)``, which in libgomp frees only the caller's own pool and lowers the count),
and every entry point of the package that computes calls it when it returns (``gives_back``), so at any moment only
the threads that are computing hold helpers. The next parallel region of that thread starts a fresh helper (one
``pthread_create``, tens of microseconds, against a decode of tens of milliseconds). Where the runtime is not
libgomp (macOS's libomp, Intel's), or torch runs no OpenMP, it does nothing.
"""
from __future__ import annotations

import ctypes
import functools
import inspect
from typing import Callable, TypeVar

F = TypeVar("F", bound=Callable)

_OMP_PAUSE_SOFT = 1          # omp_pause_resource_t: omp_pause_soft
_runtime: list = []          # [the loaded libgomp's omp_pause_resource_all, or None], looked up once


def _loaded_libgomp() -> str | None:
    """The path of the libgomp this process has loaded (torch's own copy on Linux wheels), or None."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            for line in f:
                path = line.rstrip("\n").split(maxsplit=5)[-1]
                if "/libgomp" in path and ".so" in path:
                    return path
    except OSError:
        pass
    return None


def _pause_fn():
    if not _runtime:
        import torch  # noqa: F401  (loads the OpenMP runtime torch was built with)

        fn = None
        path = _loaded_libgomp()
        if path is not None:
            try:
                fn = ctypes.CDLL(path).omp_pause_resource_all
                fn.argtypes, fn.restype = [ctypes.c_int], ctypes.c_int
            except (OSError, AttributeError):
                fn = None
        _runtime.append(fn)
    return _runtime[0]


def available() -> bool:
    """Whether this process's OpenMP runtime is libgomp with ``omp_pause_resource_all`` (the fix applies)."""
    return _pause_fn() is not None


def give_back() -> bool:
    """Release the calling thread's OpenMP helper threads (none if it holds none). True when a pool was released
    or there was none to release; False where the runtime cannot (not libgomp) or the caller is inside a parallel
    region."""
    fn = _pause_fn()
    return fn is not None and fn(_OMP_PAUSE_SOFT) == 0


def gives_back(fn: F) -> F:
    """Decorate an entry point that computes: when it returns or raises, the thread that ran it gives its helpers
    back. A generator function gives them back before each ``yield`` too, since the consumer may resume it from
    another thread (Gradio runs each step of a streaming handler on whichever worker thread is free)."""
    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def gen(*a, **kw):
            it = fn(*a, **kw)
            try:
                while True:
                    try:
                        item = next(it)
                    except StopIteration as stop:
                        return stop.value
                    give_back()
                    yield item
            finally:
                it.close()
                give_back()
        gen.gives_back = True  # type: ignore[attr-defined]
        return gen  # type: ignore[return-value]

    @functools.wraps(fn)
    def call(*a, **kw):
        try:
            return fn(*a, **kw)
        finally:
            give_back()
    call.gives_back = True  # type: ignore[attr-defined]
    return call  # type: ignore[return-value]


__all__ = ["available", "give_back", "gives_back"]
