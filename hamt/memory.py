"""Holographic binding (Plate 1995; Ganesan et al. 2021) and the slot memory layer.

Two bindings, both exactly invertible for unit keys:

* circular: real vectors of width D, a (*) v = irfft(rfft(a) * rfft(v)),
  unbound by circular correlation irfft(conj(rfft(a)) * rfft(c)). A key is
  made unitary by giving every Fourier coefficient magnitude 1; then
  correlation inverts convolution exactly.
* elementwise: the D real coordinates are read as D/2 complex numbers
  (coordinate k is the real part, k + D/2 the imaginary part) and a key is
  a phasor vector, every coordinate exp(i theta), obtained by dividing each
  complex number by its modulus; binding multiplies, unbinding multiplies
  by the conjugate. The same algebra as circular without the FFT.

The layer keeps its memory as spectra, where either binding is an
elementwise product (hamt/spectral.py), so no transform is paid per slot.
Its retrieval auxiliary loss is defined in hamt/retrieval.py; the chunked
scan that trains it, and its hierarchical slow bank's ticks, in
hamt/scan.py; the same scan as a gated-linear-attention kernel on CUDA
(HAMT_SCAN_BACKEND) in hamt/kernel.py.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hamt.config import HAMTConfig
from hamt.kernel import Backend, gla_scan, load_chunk_gla, resolve_backend
from hamt.retrieval import retrieval_cosine_loss, retrieval_loss, retrieval_queries, sample_sources
from hamt.routing import balance_loss, route
from hamt.scan import chunk_end_reads, chunked_scan
from hamt.spectral import Unbind, UnitBind, complex_bins, from_spectrum, to_spectrum

_EPS = 1e-12  # keeps a zero coefficient's division finite; far below any real magnitude


def _phasors(x: Tensor) -> Tensor:
    """Real [..., D] -> complex [..., D/2]: coordinate k + i * coordinate k + D/2."""
    half = x.size(-1) // 2
    return torch.complex(x[..., :half], x[..., half:])


def _unphasors(z: Tensor) -> Tensor:
    return torch.cat((z.real, z.imag), dim=-1)


def _fourier(x: Tensor, binding: str) -> Tensor:
    """The complex coefficients binding multiplies: rfft bins or phasor pairs."""
    return torch.fft.rfft(x) if binding == "circular" else _phasors(x)


def _inverse(z: Tensor, binding: str, dim: int) -> Tensor:
    return torch.fft.irfft(z, n=dim) if binding == "circular" else _unphasors(z)


def make_key(x: Tensor, binding: str = "circular") -> Tensor:
    """Project real vectors [..., D] onto unit keys: every coefficient of
    _fourier(key) gets magnitude 1 (eps-safe division by the magnitude)."""
    z = _fourier(x, binding)
    z = z * torch.rsqrt(z.real.square() + z.imag.square() + _EPS)
    return _inverse(z, binding, x.size(-1))


def unitary(x: Tensor) -> Tensor:
    """Real key whose rfft has magnitude 1 in every bin (circular binding)."""
    return make_key(x, "circular")


def bind(key: Tensor, value: Tensor, binding: str = "circular") -> Tensor:
    """Circular convolution irfft(rfft(a) rfft(v)), or the phasor product."""
    product = _fourier(key, binding) * _fourier(value, binding)
    return _inverse(product, binding, value.size(-1))


def unbind(key: Tensor, trace: Tensor, binding: str = "circular") -> Tensor:
    """Circular correlation irfft(conj(rfft(a)) rfft(c)), or the conjugate
    phasor product: the exact inverse of bind when key is unit."""
    product = _fourier(key, binding).conj() * _fourier(trace, binding)
    return _inverse(product, binding, trace.size(-1))


def parseval_weights(binding: str, dim: int) -> Tensor:
    """Weights w [D] with sum w p^2 = |x|^2 for the packed p = to_spectrum(x).

    An ortho rfft stores each conjugate pair of bins once, so the Re and Im
    entries of a complex bin count twice, the real DC and Nyquist once.
    """
    if binding == "circular":
        w = torch.full((dim,), 2.0)
        w[2 * complex_bins(binding, dim) :] = 1.0
        return w
    return torch.ones(dim)


def initial_decay_logits(config: HAMTConfig) -> Tensor:
    """Per-slot decay logits (per tick), spread around decay_init (and a slow bank).

    Spreading in logit space gives each slot its own time scale while
    staying inside (0, 1) for any decay_init. The hierarchical slow bank
    starts with ten times the fast bank's memory horizon: a per-token decay
    of 1 - (1 - decay_init) / 10, i.e. that to the power slow_every per tick
    (with slow_every = 1 exactly the per-token value). The decays stay
    learnable; the slow bank's slowness in ticks does not (slot_periods).
    """

    def band(centre: float, n: int, width: float) -> Tensor:
        return math.log(centre / (1 - centre)) + torch.linspace(-width, width, n)

    slots = config.num_slots
    if not config.hierarchical:
        return band(config.decay_init, slots, 1.0)
    slow = (1 - (1 - config.decay_init) / 10) ** config.slow_every
    return torch.cat(
        (band(config.decay_init, slots - slots // 2, 0.5), band(slow, slots // 2, 0.5))
    )


def slot_periods(config: HAMTConfig) -> Tensor:
    """Tokens per tick of each slot [S]: 1 for the fast bank (the first
    num_slots - num_slots // 2, or all without HAMT_HIERARCHICAL),
    slow_every for the slow bank."""
    periods = torch.ones(config.num_slots, dtype=torch.long)
    if config.hierarchical:
        periods[config.num_slots - config.num_slots // 2 :] = config.slow_every
    return periods


class HolographicMemory(nn.Module):
    """A fixed set of decaying holographic slots in place of attention.

    Per token x_t (the LayerNormed stream): value v_t = W_v x_t, write key
    a_t = unitary(W_a x_t), read key q_t = unitary(W_q x_t), write gates
    g_t = sigmoid(W_g x_t) and read weights w_t = softmax(W_r x_t).
    M_s(t) = lambda_s M_s(t-1) + g_{t,s} bind(a_t, v_t);
    r_t = sum_s w_{t,s} unbind(q_t, M_s(t)); output c_proj(r_t).
    Unbinding is linear and q_t is shared by the slots, so the slot sum is
    taken before the single unbind.

    With HAMT_ADAPTIVE_SLOTS the gate logits W_g x_t are a router instead:
    g_t = softmax(W_g x_t), or its top-k renormalised (hamt/routing.py), a
    distribution of one unit of write over the slots, and the stats carry
    its load-balancing loss.

    With HAMT_HIERARCHICAL the slow bank ticks once every slow_every tokens,
    at the tokens t with (t + 1) % slow_every == 0 (t counted from the start
    of the stream, across generation calls): there it decays once and takes
    t's write, M_s(t) = lambda_s M_s(t-1) + g_{t,s} bind(a_t, v_t); at every
    other token it holds still, M_s(t) = M_s(t-1), and its gate is 0. It is
    read at every token. So its state changes only every slow_every tokens,
    whatever the decays learn, and lambda_s is a decay per tick.

    The slots hold packed spectra (hamt/spectral.py: D reals per slot).
    c_in and c_proj hold the vector-domain weights. The DFT is linear, so
    the parallel path multiplies it into them once per call (a cost
    independent of T) instead of transforming every token; the one-token
    recurrent path runs the FFT as written.
    """

    def __init__(self, config: HAMTConfig) -> None:
        super().__init__()
        self.binding, self.dim, self.slots = config.binding, config.hcm_dim, config.num_slots
        self.bins = complex_bins(config.binding, self.dim)
        self.key_eps = config.key_eps
        self.chunk, self.aux_max_lag = config.chunk_size, config.aux_max_lag
        # One projection for value, write key, read key, gates and read
        # logits, so pruning and weight decay see a single matrix.
        self.c_in = nn.Linear(config.n_embd, 3 * self.dim + 2 * self.slots, bias=config.bias)
        self.c_proj = nn.Linear(self.dim, config.n_embd, bias=config.bias)
        self.decay_logit = nn.Parameter(initial_decay_logits(config))
        self.register_buffer(
            "parseval", parseval_weights(config.binding, self.dim), persistent=False
        )
        # Else every slot ticks at every token. From the config, not the
        # buffer: a model may be built on the meta device (lib/train/resolved.py).
        self.ticking = config.hierarchical and config.slow_every > 1
        self.register_buffer("periods", slot_periods(config), persistent=False)
        self.dropout = nn.Dropout(config.dropout)
        self.scan_backend, self.kernel_pin = config.scan_backend, config.kernel_pin
        self.adaptive, self.topk = config.adaptive_slots, config.adaptive_slots_topk

    def backend(self, device: torch.device) -> Backend:
        """The scan that runs on device (HAMT_SCAN_BACKEND resolved, hamt/kernel.py)."""
        return resolve_backend(self.scan_backend, device)

    def log_decay(self) -> Tensor:
        """log lambda_s, computed stably from the logits."""
        return F.logsigmoid(self.decay_logit.float())

    def _folded(self) -> tuple[Tensor, Tensor | None, Tensor]:
        """x -> packed spectra weights [3D, C] (and bias), and c_proj's weight
        taking a packed spectrum back [C, D]: the DFT multiplied into c_in's
        value/key rows and into c_proj, in fp32.

        With to_spectrum(x) = x F and from_spectrum(p) = p F^-1, the folded
        c_in rows are F^T W: to_spectrum of W's columns. Parseval makes
        F^-1 = diag(w) F^T, so c_proj's folded weight W_out F^-T is
        to_spectrum(W_out) scaled by the Parseval weights w. Both are FFTs
        of the weights (O(D log D) per column) rather than D x D matmuls.
        """
        vec, width = 3 * self.dim, self.c_in.in_features  # width: the stream's C
        w_in, b_in, w_out = self.c_in.weight[:vec], self.c_in.bias, self.c_proj.weight
        b_in = None if b_in is None else b_in[:vec]
        if self.binding != "circular":
            return w_in, b_in, w_out
        # c_in's columns are transformed where they lie (along dim 1 of
        # [3, D, C]); c_proj's rows and the bias, D-long rows, in one more call.
        # Under torch.compile as a real D x D matmul: inductor generates no
        # code for complex FFTs, and the matmul costs well under 1 % of a step.
        matrix = torch.compiler.is_compiling()
        w_spec = to_spectrum(
            w_in.float().view(3, self.dim, width), self.binding, dim=1, matrix=matrix
        )
        rows = (
            w_out.float()
            if b_in is None
            else torch.cat((w_out.float(), b_in.float().view(3, self.dim)))
        )
        spectra = to_spectrum(rows, self.binding, matrix=matrix)
        w_folded = spectra[:width] * self.parseval
        if b_in is not None:
            b_in = spectra[width:].flatten().to(b_in.dtype)
        return w_spec.flatten(0, 1).to(w_in.dtype), b_in, w_folded.to(w_out.dtype)

    def _split(
        self, spec: Tensor, logits: Tensor
    ) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor | None]:
        """Packed spectra [..., 3D] and logits [..., 2S] -> bound spectrum,
        unit read key (both [..., D]), write gates, read weights, and the
        adaptive router's top-k choice (routing.route; None otherwise)."""
        spec = spec.float().unflatten(-1, (3, self.dim))
        bound, read_key = UnitBind.apply(spec, self.bins, self.key_eps)
        gate_logits, read_logits = logits.float().chunk(2, dim=-1)
        chosen = None
        if self.adaptive:
            gates, chosen = route(gate_logits, self.topk)
        else:
            gates = torch.sigmoid(gate_logits)
        return bound, read_key, gates, read_logits.softmax(-1), chosen

    def clock(self, offset: int, length: int) -> tuple[Tensor, Tensor]:
        """Ticks of each slot from before token `offset` of the stream through
        each of the next `length` tokens, [T, S], and whether it ticks at
        each, [T, S] bool."""
        upto = torch.arange(offset + 1, offset + length + 1, device=self.periods.device)
        upto = upto.unsqueeze(-1)  # tokens seen through each position
        return upto // self.periods - offset // self.periods, upto % self.periods == 0

    def forward(
        self,
        x: Tensor,
        state: Tensor | None = None,
        need_state: bool = False,
        need_aux: bool = False,
        offset: int = 0,
    ) -> tuple[Tensor, Tensor | None, dict[str, Tensor]]:
        """x [B, T, C] -> (output [B, T, C], final slots or None, stats).

        state: slot spectra [B, S, D] before x (None: empty memory).
        offset: tokens of the stream before x (the slow bank's clock).
        need_aux adds the retrieval loss and mean write gates to stats (and,
        with adaptive slots, the router's balance loss).
        """
        # The spectral maths stays in fp32: a 64-token decay product or a
        # unit-key normalisation in bf16 loses most of its bits.
        with torch.autocast(device_type=x.device.type, enabled=False):
            w_spec, b_spec, w_out = self._folded()
        vec, bias = 3 * self.dim, self.c_in.bias
        # Two matmuls rather than one split: each output then is contiguous
        # and its gradient needs no concatenation (a T x 3D copy).
        spec = F.linear(x, w_spec, b_spec)
        logits = F.linear(x, self.c_in.weight[vec:], None if bias is None else bias[vec:])
        # The kernel's q, k and v in the run's autocast dtype (bf16 or fp16);
        # its gates, state and accumulators stay float32.
        device = x.device.type
        kernel_dtype = (
            torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else torch.float32
        )
        with torch.autocast(device_type=x.device.type, enabled=False):
            bound, read_key, gates, read_w, chosen = self._split(spec, logits)
            balance = {}
            if need_aux and self.adaptive:
                # Of the router as it chose, before the slow bank's ticks drop writes.
                router = logits.float()[..., : self.slots]
                balance["balance_loss"] = balance_loss(router, chosen, self.topk)
            clock = ticks = None
            if self.ticking:
                clock, ticks = self.clock(offset, x.size(1))
                gates = gates * ticks
            if resolve_backend(self.scan_backend, x.device, record=False).name == "torch":
                reads, afters = chunked_scan(
                    bound, gates, read_w, self.log_decay(), self.chunk, state, clock
                )
                final: Tensor | None = afters[:, -1]
                stats = self._aux(afters, bound, gates) if need_aux else {}
            else:
                reads, final, stats = self._kernel_scan(
                    bound, gates, read_w, state, (clock, ticks), need_state, need_aux, kernel_dtype
                )
            read = Unbind.apply(read_key, reads, self.bins)
        y = self.dropout(F.linear(read.to(w_out.dtype), w_out, self.c_proj.bias))
        return y, (final if need_state else None), stats | balance

    def _kernel_scan(
        self,
        bound: Tensor,
        gates: Tensor,
        read_w: Tensor,
        state: Tensor | None,
        clock_ticks: tuple[Tensor | None, Tensor | None],
        need_state: bool,
        need_aux: bool,
        dtype: torch.dtype,
    ) -> tuple[Tensor, Tensor | None, dict[str, Tensor]]:
        """The scan as gated linear attention (fla-core's chunk_gla,
        hamt/kernel.py) with q, k, v in dtype; the retrieval loss's reads at
        the chunk ends from hamt/scan.py's chunk_end_reads (the kernel keeps
        no chunk states). Draws the same lags as the torch path."""
        clock, ticks = clock_ticks
        reads, final = gla_scan(
            bound,
            gates,
            read_w,
            self.log_decay(),
            load_chunk_gla(self.kernel_pin),
            state,
            ticks,
            final=need_state,
            dtype=dtype,
        )
        if not need_aux:
            return reads, final, {}
        batch, length, _ = bound.shape
        sources = sample_sources(
            length, self.chunk, batch, self.aux_max_lag, self.training, bound.device
        )
        target, aux_w, valid = retrieval_queries(bound, gates, sources)
        retrieved = chunk_end_reads(bound, gates, aux_w, self.log_decay(), self.chunk, state, clock)
        loss = retrieval_cosine_loss(retrieved, target, valid, self.parseval)
        return reads, final, {"aux_loss": loss, "gate_mean": gates.mean(dim=(0, 1))}

    def _aux(self, afters: Tensor, bound: Tensor, gates: Tensor) -> dict[str, Tensor]:
        """Retrieval loss (hamt/retrieval.py: an item written a random lag
        earlier, unbound from the memory at each chunk's end) and the mean
        write gates."""
        batch, length, _ = bound.shape
        sources = sample_sources(
            length, self.chunk, batch, self.aux_max_lag, self.training, bound.device
        )
        loss = retrieval_loss(afters, bound, gates, sources, self.parseval)
        return {"aux_loss": loss, "gate_mean": gates.mean(dim=(0, 1))}

    def new_state(self, batch: int, device=None) -> Tensor:
        """Empty slots: packed spectra [B, S, D], float32."""
        return torch.zeros(batch, self.slots, self.dim, device=device)

    def step(self, x: Tensor, state: Tensor, position: int = 0) -> tuple[Tensor, Tensor]:
        """Recurrent form for one token: x [B, C], state [B, S, D] -> (y [B, C], new state).

        position: the token's place in the stream (0 = first), for the slow
        bank's ticks.

        Uses c_in, the FFT and c_proj as written (nothing folded), so the
        test that this matches the parallel form also checks the folding.
        """
        h = self.c_in(x)
        with torch.autocast(device_type=x.device.type, enabled=False):
            vecs, logits = h.float().split((3 * self.dim, 2 * self.slots), -1)
            spec = to_spectrum(vecs.unflatten(-1, (3, self.dim)), self.binding).flatten(-2)
            bound, read_key, gates, read_w, _ = self._split(spec, logits)
            log_decay = self.log_decay()
            if self.ticking:  # a slow slot that does not tick neither decays nor writes
                ticks = (position + 1) % self.periods == 0
                log_decay, gates = log_decay * ticks, gates * ticks
            decay = torch.exp(log_decay).unsqueeze(-1)
            state = decay * state + gates.unsqueeze(-1) * bound.unsqueeze(1)
            mixed = (read_w.unsqueeze(-1) * state).sum(1)
            read = from_spectrum(Unbind.apply(read_key, mixed, self.bins), self.binding)
        return self.dropout(self.c_proj(read.to(self.c_proj.weight.dtype))), state
