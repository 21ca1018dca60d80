"""Benchmark: target-only autoregressive vs speculative decoding (and Hugging Face
assisted generation) on one pair, greedy by default. Used by ``python -m specdec_core
bench``, ``benchmarks/bench_pairs.py`` and the speed page (which calls the pieces one at a
time, through ``server/jobs.py``, so it can show progress and stop between them).

- ``results``: the frozen result types, and their JSON form (``to_json``);
- ``runs``: timed runs (:func:`measure_pair`, :func:`hf_generate`);
- ``summary``: figures from runs (:func:`summarize`);
- ``report``: Hugging Face's figures next to ours (:func:`compare_hf`) and
  :func:`run_bench`, the whole benchmark;
- ``curve``: the verify-cost curve ``t(k)`` and the draft step (:func:`measure_forward_curve`);
- ``timing``: the spread of repeats, how a timing was measured, and whether the timings
  support a conclusion (:func:`judge`: "this machine is too busy to measure this now");
- ``sweeps``: the γ and batch-size sweeps.
"""
