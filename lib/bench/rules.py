"""INFERENCE_BENCH_LENGTHS must parse (lib/bench/Kconfig), checked on load
rather than after a run has trained: the check itself is lib/bench/inference.py's,
which imports torch only inside the functions that measure.
"""

from lib.bench.inference import check_lengths
from lib.config.rules import rule

rule(check_lengths)
