"""Benchmarks: `make bench` (training step, then the whole loop, vs a plain PyTorch loop),
`make bench-optim` (AdamWSPAM and AdamWPrune vs AdamW), `make bench-seqlen`
(attention variants and HAMT from 64 to 2048 tokens) [BENCH_STEPS=N], `make
bench-linear` (the model's linear layers on this CPU: PyTorch's kernel against
oneDNN's, GFLOP/s), and
`make bench-inference [RUN=] [CHECKPOINT=]` (a finished run's prefill, decode
and cache figures into its metrics.json)."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from lib.atomic import write_json_atomic
from lib.cli import run_script
from lib.config.run_config import load_run_config
from lib.run.checkpoint import CheckpointError
from lib.run.rundir import RunDirError, claim_run, results_root, run_folder


def print_loops(r: dict, last: str, shown: Callable[[dict], str]) -> None:
    """Ours and the plain loop: ms/iter, tokens/s and one more column."""
    print(f"{'loop':<8}{'ms/iter':>12}{'tokens/s':>14}  {last}")
    for name in ("ours", "plain"):
        m = r[name]
        print(f"{name:<8}{m['ms_per_iter']:>12.1f}{m['tokens_per_sec']:>14,.0f}  {shown(m)}")


def print_step(r: dict) -> None:
    print(
        f"{r['params']:,} parameters, batch {r['batch_size']} x accumulation "
        f"{r['gradient_accumulation']} x block {r['model_config']['block_size']}, "
        f"{r['dtype']}, compile {'on' if r['compiled'] else 'off'}, {r['device']}"
    )
    print_loops(r, "MFU", lambda m: f"{100 * m['mfu']:.1f}%" if m["mfu"] is not None else "n/a")
    rounds = ", ".join(f"{x:.3f}" for x in r["speed_vs_plain_rounds"])
    print(
        f"ours runs at {r['speed_vs_plain']:.3f}x the plain loop's speed "
        f"(>1 is faster; per round {rounds}); peak memory {r['peak_memory_mb']:.0f} MiB "
        f"({r['peak_memory_measure']})"
    )
    for name in ("ours", "plain"):
        pruning = f", pruning {r[name]['pruning']}" if r[name]["pruning"] else ", no pruning"
        speed = r[name].get("speed", {})
        linear = (
            f", linear layers {speed['cpu_linear']} ({speed['cpu_linear_reason']})"
            if speed
            else ", PyTorch's default kernels"
        )
        print(f"  {name}: {r[name]['optimizer']}{pruning}{linear}")
    print_breakdown(r["breakdown"])


def print_loop(r: dict) -> None:
    print(
        f"the whole loop on the prepared data, {r['steps_per_round']} steps after "
        f"{r['warmup_steps']} per round: the trainer (loader, loss reads, log lines every "
        f"{r['log_interval']}, progress bar, records, monitor {'on' if r['monitor'] else 'off'}) "
        f"against a plain loop (nanoGPT's):"
    )
    print_loops(r, "optimizer", lambda m: m["optimizer"])
    rounds = ", ".join(f"{x:.3f}" for x in r["ours_vs_plain_time_rounds"])
    print(
        f"the trainer's step takes {r['ours_vs_plain_time']:.3f}x the plain loop's time "
        f"(<1 is faster; per round {rounds})"
    )


def print_breakdown(b: dict) -> None:
    print(
        f"where our step's time goes (torch.profiler, {b['steps']} steps, "
        f"{b['step_ms']:.1f} ms/step under the profiler):"
    )
    for name, ms in b["parts_ms"].items():
        print(f"  {name.replace('_', ' '):<14}{ms:>9.2f} ms{100 * b['shares'][name]:>7.1f}%")


def print_optimizers(r: dict) -> None:
    print(
        f"{r['params']:,} parameters ({r['prunable']:,} prunable), {r['dtype']} on "
        f"{r['device']}; masks updated every {r['frequency']} steps"
    )
    speed = r["speed"]
    print(
        f"speed options: head loss {speed['loss_impl']}, attention {speed['sdpa_backend']}, "
        f"linear layers {speed['cpu_linear']}, float8 {speed['float8']}"
    )
    print(f"{'optimizer':<16}{'step ms':>10}{'vs AdamW':>10}{'opt.step ms':>13}{'vs AdamW':>10}")
    for name in [n for n in r if isinstance(r[n], dict) and "full_step_ms" in r[n]]:
        m = r[name]
        full = f"{m.get('full_step_vs_adamw', 1):.3f}x"
        opt = f"{m.get('optimizer_step_vs_adamw', 1):.3f}x"
        print(
            f"{name:<16}{m['full_step_ms']:>10.1f}{full:>10}{m['optimizer_step_ms']:>13.2f}{opt:>10}"
            f"  {m['impl']}"
        )
    m = r["adamwprune"]
    print(
        f"AdamWPrune masks: apply {m['mask_apply_ms']:.2f} ms/step, update {m['mask_update_ms']:.1f}"
        f" ms every {r['frequency']} steps = {100 * m['mask_update_share_of_step']:.2f}% of an "
        f"AdamW step; all mask work {100 * m['mask_share_of_step']:.2f}% amortised"
    )


def print_seqlen(r: dict) -> None:
    print(
        f"{r['n_layer']} layers x {r['n_embd']} wide x {r['n_head']} heads, vocab "
        f"{r['vocab_size']}, {r['device']}; parameters: "
        + ", ".join(f"{k} {v:,}" for k, v in r["params"].items())
    )
    print(
        f"{'variant':<9}{'T':>6}{'train tok/s':>13}{'train MiB':>11}{'gen ms/tok':>12}"
        f"{'state bytes':>14}"
    )
    for row in r["rows"]:
        if "error" in row:
            print(f"{row['variant']:<9}{row['seq_len']:>6}  {row['error']}")
            continue
        print(
            f"{row['variant']:<9}{row['seq_len']:>6}{row['train_tokens_per_sec']:>13,.0f}"
            f"{row['peak_memory_mb']:>11.1f}{row['gen_ms_per_token']:>12.2f}"
            f"{row['state_bytes']:>14,}"
        )


def bench_inference(args: argparse.Namespace) -> None:
    """A finished run's inference figures, with its config.txt and the overrides."""
    from lib.bench.inference import bench_run, describe

    run_dir = run_folder(args.run)
    claim_run(run_dir)  # not while it trains: both would write its metrics.json
    section = bench_run(
        run_dir, args.checkpoint, load_run_config(args.overrides, path=run_dir / "config.txt")
    )
    print(describe(section))
    print(f"saved in {run_dir / 'metrics.json'}")


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument(
        "what", choices=["step", "optimizers", "seqlen", "linear", "precision", "inference"]
    )
    p.add_argument(
        "--vocab",
        type=int,
        default=0,
        help="seqlen: vocabulary of the synthetic tokens (default: the dataset's)",
    )
    p.add_argument("--steps", type=int, default=10, help="timed steps per round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument(
        "--lengths",
        type=lambda v: tuple(int(x) for x in v.split(",")),
        help="seqlen: sequence lengths, e.g. 1024,2048 (default: by device)",
    )
    p.add_argument(
        "--tokens",
        type=int,
        help="seqlen: training tokens per step (default: 2048 on a CPU, 65536 on CUDA)",
    )
    p.add_argument(
        "--variants",
        type=lambda v: tuple(v.split(",")),
        help="seqlen, precision: e.g. vanilla,hamt (seqlen's default: all on a CPU, those "
        "two on CUDA; precision's: those two)",
    )
    p.add_argument(
        "--seeds",
        type=lambda v: tuple(int(x) for x in v.split(",")),
        default=(0, 1, 2),
        help="precision: the seeds of the models and batches, e.g. 0,1,2",
    )
    p.add_argument("--run", help="inference: run folder (default: results/latest)")
    p.add_argument("--checkpoint", choices=["best", "latest"], default="best")
    p.add_argument("overrides", nargs="*", help="NAME=VALUE configuration overrides")
    args = p.parse_intermixed_args(argv)
    if args.steps < 1 or args.rounds < 1:
        p.error("--steps and --rounds must be at least 1")
    if args.what == "inference":
        return bench_inference(args)
    run = load_run_config(args.overrides)
    if args.what == "step":
        from lib.bench.loop import run_loop_bench
        from lib.bench.step import run_bench

        result = run_bench(run, steps=args.steps, rounds=args.rounds)
        print_step(result)
        result["loop"] = run_loop_bench(run, steps=args.steps, rounds=args.rounds)
        print_loop(result["loop"])
    elif args.what == "linear":
        from lib.bench.linear import describe, run_linear_bench

        result = run_linear_bench(run, calls=args.steps, rounds=args.rounds)
        print(describe(result))
    elif args.what == "precision":
        from lib.bench.precision import describe as describe_precision
        from lib.bench.precision import run_precision_bench
        from lib.data.vocab import configured_vocab

        result = run_precision_bench(
            run, args.vocab or configured_vocab(run.data), seeds=args.seeds, variants=args.variants
        )
        print(describe_precision(result))
    elif args.what == "optimizers":
        from lib.bench.optimizers import run_optimizer_bench

        result = run_optimizer_bench(run, steps=args.steps, rounds=args.rounds)
        print_optimizers(result)
    else:
        from lib.bench.seqlen import plot_seqlen, run_seqlen_bench
        from lib.data.vocab import configured_vocab

        result = run_seqlen_bench(
            run,
            args.vocab or configured_vocab(run.data),
            args.lengths,
            steps=args.steps,
            tokens=args.tokens,
            variants=args.variants,
        )
        print_seqlen(result)
    out = results_root(run.run) / "bench" / f"{args.what}_{time.strftime('%Y%m%d-%H%M%S')}.json"
    write_json_atomic(out, result)
    print(f"saved {out}")
    if args.what == "seqlen":
        plot_seqlen(result, str(out.with_suffix(".png")))
        print(f"saved {out.with_suffix('.png')}")


if __name__ == "__main__":
    run_script(main, (RunDirError, CheckpointError, ValueError, RuntimeError))
