"""The timing the CPU benchmarks that call kernels directly share."""
import time


def best_seconds(call, reps=1, batches=5, before=None):
    """Best mean time of `reps` calls over `batches` timed batches, after one
    untimed call; `before` runs untimed ahead of each batch (a cache flush)."""
    call()
    best = float("inf")
    for _ in range(batches):
        if before:
            before()
        start = time.perf_counter()
        for _ in range(reps):
            call()
        best = min(best, (time.perf_counter() - start) / reps)
    return best
