"""Runs exported as Hugging Face folders that carry their own model code.

Only vanilla GPT-2 has a layout transformers knows (GPT2LMHeadModel); every
other model (GPT-2 with MLA, RA or the output gate, HAMT) is exported with
the code that computes it: causal_lm.py is the transformers side (config,
PreTrainedModel, CausalLMOutput, generate), a family's remote.py
(gpt2/remote.py, hamt/remote.py) binds it to the family's model, and
source.py copies that file and every module it imports into the folder with
the imports made relative, which is what `trust_remote_code=True` loads.
folder.py writes the rest (config.json, weights, generation_config.json).
"""
