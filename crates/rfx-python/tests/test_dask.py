"""A bound kernel shipped to the worker processes of a Dask `LocalCluster` and mapped over
chunks of 10⁷ rows, against NumPy. Needs `dask[distributed]` (installed by `cargo xtask test`)."""

import numpy as np
import pytest

import rfxjit as rj

distributed = pytest.importorskip("dask.distributed")


def pid_clip(e, i, d):
    return np.clip(1.2 * e + 0.3 * i + 0.05 * d, -1.0, 1.0)


def run_chunk(kernel, seed, rows):
    """Runs in a worker: makes its chunk of inputs and returns a checksum of the outputs and the
    inputs' seed (the chunk's data never crosses the network)."""
    rng = np.random.default_rng(seed)
    e, i, d = (rng.normal(size=rows).astype(np.float32) for _ in range(3))
    out = np.empty(rows, np.float32)
    kernel(e, i, d, out=out)
    expected = pid_clip(e, i, d)
    return float(np.max(np.abs(out - expected))), float(out.astype(np.float64).sum())


def test_a_bound_kernel_mapped_over_chunks_on_a_local_cluster():
    rows, chunks = 2_500_000, 4  # 10⁷ rows in all
    example = np.zeros(rows, np.float32)
    kernel = rj.jit(pid_clip).bind(example, example, example)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            futures = client.map(run_chunk, [kernel] * chunks, range(chunks), [rows] * chunks)
            results = client.gather(futures)
    for seed, (max_error, total) in enumerate(results):
        assert max_error <= 1e-6
        rng = np.random.default_rng(seed)
        e, i, d = (rng.normal(size=rows).astype(np.float32) for _ in range(3))
        assert total == pytest.approx(float(pid_clip(e, i, d).astype(np.float64).sum()), rel=1e-9)
