"""scripts/check_knlp.sh: every GPT-2 defconfig of a real knlp checkout,
resolved by knlp's own Kconfig tree and by ours, compared value by value
(check.py; mla.py, optim.py, prune.py and rgsa.py state each side of one
feature; record.py keeps the result under docs/bench-data/knlp/). It sits on
top of the layers: our side of a comparison is what the matrix expands, what
the pruning schedule does and what gpt2/ builds, read from those modules.
The loader of knlp files itself is lib/config/knlp/.
"""
