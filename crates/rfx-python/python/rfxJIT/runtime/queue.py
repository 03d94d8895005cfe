"""A single-worker dispatch queue: kernels submitted from any thread run one at a time, in
submission order, on one worker thread; each submission returns a `concurrent.futures.Future`."""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor

from .executor import execute_lowered


class DispatchQueue:
    """`submit(fn, *args, **kwargs)` runs `fn` on the queue's worker; `submit_lowered(lowered,
    inputs, backend)` runs a lowered kernel. `drain()` waits for everything submitted so far;
    `close()` (or leaving a `with` block) drains and stops the worker."""

    def __init__(self):
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rfxJIT-queue")
        self._last: Future | None = None

    def submit(self, fn, *args, **kwargs) -> Future:
        future = self._pool.submit(fn, *args, **kwargs)
        self._last = future
        return future

    def submit_lowered(self, lowered, inputs: dict, backend: str = "cpu") -> Future:
        return self.submit(execute_lowered, lowered, inputs, backend)

    def drain(self) -> None:
        """Waits until everything submitted so far has run (the worker runs in order)."""
        last = self._last
        if last is not None:
            last.exception()

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


__all__ = ["DispatchQueue"]
