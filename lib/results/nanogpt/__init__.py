"""kconfig-llm beside karpathy/nanoGPT on nanoGPT's own work (scripts/nanogpt_compare.py).

work.py: the work both sides do, each side's command and the data nanoGPT reads;
pairs.py: the two sides run back to back, alternating, and the record of the pairs;
scoring.py: both final models scored by one estimator on every validation token;
table.py: the records as docs/benchmarks.md's tables, and the losses across seeds.

nanoGPT runs from its own checkout, outside this repository: none of its code is here.
"""
