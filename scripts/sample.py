"""Generate text from a run's checkpoint: `make sample PROMPT="ROMEO:" TOKENS=200`."""

from __future__ import annotations

import argparse

import torch

from lib.cli import run_script
from lib.data import tokenizer_from_meta
from lib.model import registry
from lib.run.checkpoint import CheckpointError, load_checkpoint
from lib.run.rundir import RunDirError, run_folder


def positive(kind):
    def parse(text: str):
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{text}: must be > 0")
        return value

    return parse


def non_negative(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text}: must be >= 0 (0 = greedy)")
    return value


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--run", help="run folder (default: the latest run)")
    p.add_argument("--checkpoint", choices=["best", "latest"], default="best")
    p.add_argument("--prompt", default="", help="start text (empty: start of a document)")
    p.add_argument("--tokens", type=positive(int), default=200, help="tokens to generate")
    p.add_argument("--temperature", type=non_negative, default=0.8)
    p.add_argument("--top-k", type=positive(int), default=200)
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--samples", type=positive(int), default=1)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    return p.parse_args(argv)


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    run_dir = run_folder(args.run)
    state = load_checkpoint(run_dir / f"ckpt_{args.checkpoint}.pt", args.device)
    model = registry.model_from_state(state)
    model.to(args.device).eval()
    tokenizer = tokenizer_from_meta(state["tokenizer"])
    ids = (
        tokenizer.encode(args.prompt)
        if args.prompt
        else [tokenizer.eot_token if tokenizer.eot_token is not None else tokenizer.encode("\n")[0]]
    )
    torch.manual_seed(args.seed)
    idx = torch.tensor([ids], dtype=torch.long, device=args.device)
    for i in range(args.samples):
        out = model.generate(idx, args.tokens, temperature=args.temperature, top_k=args.top_k)
        text = tokenizer.decode(out[0].tolist()[0 if args.prompt else 1 :])
        print(f"--- sample {i + 1} (step {state['step']}, {args.checkpoint} checkpoint)\n{text}")


if __name__ == "__main__":
    run_script(main, (CheckpointError, RunDirError, ValueError))
