"""`make bench`: what one job costs, how the worker overlaps calls, cold starts, pipeline latency.

Benchmarks report numbers; tests assert behaviour. Each module measures one thing and returns a
JSON-ready section; `python -m outlast.bench` runs them and writes docs/benchmarks.{json,md}.
"""
