"""The machine's own ceiling for process-parallel CPU work: one pure-Python CPU burn vs two at once.

    .venv/bin/python bench/cpu_scaling.py

Prints the speed-up of two spawn processes over one (2.0 = perfect). Vectorized-env scaling
(bench/env_throughput.py) cannot beat this on the same machine.
"""

import multiprocessing as mp
import time


def burn(n: int) -> float:
    t = time.perf_counter()
    x = 0
    for i in range(n):
        x += i * i
    return time.perf_counter() - t


if __name__ == "__main__":
    n = 20_000_000
    t = time.perf_counter()
    burn(n)
    single = time.perf_counter() - t
    with mp.get_context("spawn").Pool(2) as pool:
        t = time.perf_counter()
        pool.map(burn, [n, n])
        two = time.perf_counter() - t
    print(f"one process {single:.2f} s; two processes (same work each) {two:.2f} s; "
          f"scaling {2 * single / two:.2f}x of 2.0 (ratio {single / two:.2f})")
