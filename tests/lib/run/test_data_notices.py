"""Own data: a trained vocabulary smaller than configured and a run of many epochs are
said at the start of the run and recorded in metrics.json (lib/run/record.py)."""

from __future__ import annotations

from lib.run.record import data_notices, describe

# The issue's own text: 4,724 of 5,520 BPE tokens, 18k training tokens read 8.5 times.
META = {
    "dataset": "custom",
    "train_tokens": 18_000,
    "val_tokens": 2_000,
    "tokenizer": {"name": "bpe5520", "vocab_size": 4_724, "requested_vocab_size": 5_520},
}


def test_a_small_trained_vocabulary_and_many_epochs_are_both_said():
    vocab, epochs = data_notices(META, 153_000)  # 8.5 x 18,000
    assert vocab.startswith("the trained BPE has 4,724 tokens, not the 5,520 configured")
    assert "CONFIG_DATA_BPE_VOCAB_SIZE" in vocab
    assert epochs.startswith("the run reads 153,000 tokens, 8.5 epochs of its 18,000 training")


def test_a_full_vocabulary_and_few_epochs_say_nothing():
    full = {**META, "tokenizer": {**META["tokenizer"], "vocab_size": 5_520}}
    assert data_notices(full, 18_000 * 1.9) == []  # under 2 epochs: the default reads 1.1
    no_request = {**META, "tokenizer": {"name": "gpt2", "vocab_size": 50_257}}
    assert data_notices(no_request, 10) == []


def test_the_run_log_opens_with_the_notices():
    record = {
        "run_id": "r",
        "model": "gpt2",
        "params": 10,
        "params_non_embedding": 8,
        "dataset": "custom",
        "tokenizer": "bpe5520",
        "device_name": "CPU",
        "dtype": "fp32",
        "dtype_reason": "auto",
        "data_notices": data_notices(META, 153_000),
    }
    lines = describe(record, "cfg", META)
    notices = [line for line in lines if line.startswith("data notice: ")]
    assert len(notices) == 2 and "8.5 epochs" in notices[1]
    assert lines.index(notices[0]) == 3  # right after the data line
