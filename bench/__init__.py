"""The benchmarks (`python bench/run.py`, docs/benchmarks.md) and their shared harness."""
