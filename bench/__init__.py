"""Benchmarks: `make bench` (`python -m bench`) runs every `bench/bench_*.py` module's `run()`.

Each `run()` returns rows `{name, baseline_s, measured_s, ratio, goal, note?}`. The baseline is
measured in the same run on the same machine, so the ratio is what to read; absolute seconds vary
from machine to machine. Goals are checked here, never in tests.
"""
