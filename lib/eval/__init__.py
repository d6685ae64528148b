"""Evaluation: sliding-window perplexity, LAMBADA last-word accuracy, the
evaluation sets, eval.json, and generation samples during training.

perplexity.py  sliding-window perplexity of a token stream
lambada.py     last-word accuracy
sets.py        WikiText / LAMBADA (hub), the run's validation split, a text file
suite.py       `make eval` / `make eval-baseline`: sets -> eval.json
record.py      eval.json schema, writer and tolerant reader (load_eval)
samples.py     greedy continuation of a fixed prompt at each evaluation

Nothing heavy is imported here: lib.eval.record is read by `make results`.
"""
