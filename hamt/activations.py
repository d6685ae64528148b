"""HAMT's activation formula for the memory estimate (lib/model/activations.py
describes the method)."""

from __future__ import annotations

from typing import Any

from lib.model.activations import Activations, R, Shape


def activations(cfg: Any, s: Shape) -> Activations:
    n, c, a = s.tokens, cfg.n_embd, s.act
    dim, slots, chunk = cfg.hcm_dim, cfg.num_slots, min(cfg.chunk_size, s.seq)
    parts = {
        "block_input": R * n * c,
        "mid_stream": R * n * c,
        # c_in runs as two Linears (spectra, gate logits) over ln_1's output.
        "ln_1_out": (2 if a < 4 else 1) * a * n * c,
        # fp32 spectra of value, write and read keys; unit keys, two key-sized
        # buffers of the binding and the keys' per-bin magnitudes (hamt/spectral.py).
        "hamt_spectra": 4 * 3 * n * dim + 2 * 4 * 2 * n * dim + 4 * 2 * n * (dim // 2 - 1),
        "hamt_bound_reads": 2 * 4 * n * dim + a * n * dim,  # bound, reads, c_proj input
        # The C x C mixing matrix per chunk and six N x S gate/read/decay factors.
        "hamt_chunk_mixing": 4 * n * chunk + 6 * 4 * n * slots,
        "hamt_slot_states": 2 * 4 * -(-s.seq // chunk) * s.batch * slots * dim,
        "hamt_folded_weights": a * 4 * dim * c,
        "ln_2_out": a * n * c,
        "gelu_in_out": 8 * a * n * c,
        "layernorm_stats": 16 * n,
    }
    if s.mask:
        parts["dropout_masks"] = 2 * s.mask * n * c
    base = R * n * c + a * n * c + 24 * n + s.mask * n * c
    return Activations(parts, base, R * n * c, True)
