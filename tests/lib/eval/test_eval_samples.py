"""Generation samples at each evaluation: logged, reproducible, harmless."""

from __future__ import annotations

import json

import torch

from lib.data import load_meta, tokenizer_from_meta
from lib.data.prepared import data_dir
from lib.train.naming import create_run_dir
from lib.train.trainer import Trainer


def train(tiny_run, name: str, **settings):
    run = tiny_run(GPT2_MAX_ITERS=6, GPT2_EVAL_INTERVAL=3, RUN_NAME=name, **settings)
    run_dir, lines = create_run_dir(run), []
    trainer = Trainer(run, run_dir, log=lines.append)
    return trainer, trainer.train(), run_dir, lines


def test_samples_are_the_greedy_continuation_at_each_evaluation(tiny_run):
    trainer, summary, run_dir, lines = train(
        tiny_run, "s", EVAL_SAMPLES="y", EVAL_SAMPLE_PROMPT="ROMEO:", EVAL_SAMPLE_TOKENS=12
    )
    samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert [s["step"] for s in samples] == [3, 6]
    tok = tokenizer_from_meta(load_meta(data_dir(trainer.run.data)))
    prompt = torch.tensor([tok.encode("ROMEO:")])
    greedy = trainer.training.model.generate(prompt, 12, temperature=0.0)[
        0, prompt.size(1) :
    ].tolist()
    assert samples[-1]["tokens"] == greedy and samples[-1]["text"] == tok.decode(greedy)
    assert f"sample step 6: 'ROMEO:' -> {samples[-1]['text']!r}" in lines
    _, plain, _, _ = train(tiny_run, "plain")
    assert summary["train_loss"] == plain["train_loss"] and summary["val_loss"] == plain["val_loss"]


def test_prompt_outside_the_vocabulary_warns_and_training_goes_on(tiny_run):
    _, summary, run_dir, lines = train(tiny_run, "z", EVAL_SAMPLES="y", EVAL_SAMPLE_PROMPT="ZEBRA")
    assert summary["status"] == "completed" and not (run_dir / "samples.jsonl").exists()
    warned = [line for line in lines if "generation samples are off" in line]
    assert len(warned) == 1 and "'Z'" in warned[0]


def test_a_samples_file_that_is_a_link_is_not_written_through(tiny_run, tmp_path):
    """In a results folder a group shares, a link must not lead the samples elsewhere."""
    run = tiny_run(GPT2_MAX_ITERS=3, GPT2_EVAL_INTERVAL=3, RUN_NAME="l", EVAL_SAMPLES="y")
    run_dir, lines = create_run_dir(run), []
    someones = tmp_path / "someones.txt"
    someones.write_text("mine\n")
    (run_dir / "samples.jsonl").symlink_to(someones)
    summary = Trainer(run, run_dir, log=lines.append).train()
    assert summary["status"] == "completed" and someones.read_text() == "mine\n"
    warned = [line for line in lines if "generation samples are off" in line]
    assert len(warned) == 1
    assert f"{run_dir / 'samples.jsonl'} is a symbolic link to {someones}" in warned[0]
