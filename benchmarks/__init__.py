"""hermes' benchmarks: each module is a command, run from the repository's top as ``python -m benchmarks.<name>``.

The modules import what they share from each other as a package (``from benchmarks.partition_compare import
run_hermes``). A benchmark whose figures appear in ``results/`` writes them to its cache there; the pages are
rendered from the caches by :mod:`benchmarks.pages` (``make results``).
"""
