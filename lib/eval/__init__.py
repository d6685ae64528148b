"""Evaluation: sliding-window perplexity, LAMBADA last-word accuracy, the
evaluation sets, and generation samples during training. eval.json, the
record they write into a run folder, is lib/run/eval_record.py's (read by
`make results` and by a family's export, which sit beside or below this).

perplexity.py  sliding-window perplexity of a token stream
lambada.py     last-word accuracy
sets.py        WikiText / LAMBADA (hub), the run's validation split, a text file
suite.py       `make eval` / `make eval-baseline`: sets -> eval.json
baseline.py    a Hugging Face causal LM folder as a baseline (safetensors, its tokenizer)
baseline_list.py  `make eval-baselines`: CONFIG_EVAL_BASELINES's list
throughput.py  tokens/s, peak memory and machine of an evaluation
samples.py     greedy continuation of a fixed prompt at each evaluation
"""
