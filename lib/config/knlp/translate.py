"""A knlp-format file -> the same experiment in this project's names.

knlp resolves a file through its own Kconfig tree: what the file leaves
unset takes knlp's defaults (10,000 iterations, block 1024, ...), values
whose dependencies are unmet are ignored, derived strings (OPTIMIZER,
GPT2_MODEL_NAME...) follow the selection. translate() resolves the file the
same way (lib/config/knlp/tree.py), maps every resolved symbol to ours
(lib/config/knlp/names.py) and returns our-names .config text for the strict
loader, the file:line (or "knlp default") behind each value, the problems,
and a short report. The rule: what changes what is trained or measured is
carried exactly or the file is refused naming the feature; what only tunes
knlp's own runtime is accepted with a notice.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import kconfiglib

from lib.config.knlp.names import (
    CODE_VALUES,
    GATED_ATTENTION,
    KNLP_PRUNE_FREQUENCY,
    KNLP_PRUNE_RAMP_END,
    KNLP_PRUNE_SPARSITY,
    KNLP_PRUNE_WARMUP,
    KNLP_SPAM_RUNNER_DEFAULT,
    KNLP_VARIANT_ITERS,
    MARKERS,
    ROWS,
    Row,
    gate_of,
)
from lib.config.knlp.table import COMMIT, SYMBOLS
from lib.config.knlp.tree import resolve
from lib.config.renames import parse_lines

KNLP_AUTO_BATCH = "256"  # knlp lib/hyperparams.py: GPT-2 AUTO aims at 256 sequences per GPU


@dataclass
class Imported:
    """Our-names text of a knlp file, where each value came from, problems, report."""

    text: str = ""
    where: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    report: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # features refused
    # Our symbols set from a knlp default of a runtime-only setting: applied where
    # our tree shows them (a CUDA allocator setting is hidden on a CPU run).
    optional: set[str] = field(default_factory=set)


def is_knlp(text: str) -> bool:
    """Whether a .config-style text is in knlp's format (names only knlp uses)."""
    for _, name, value in parse_lines(text)[0]:
        if name.startswith(MARKERS) or (name == "MODEL" and value.startswith('"')):
            return True
    return False


def _value(sym: kconfiglib.Symbol) -> str | None:
    """knlp's resolved value as .config text; None when the symbol is inactive."""
    if sym.orig_type in (kconfiglib.BOOL, kconfiglib.TRISTATE):
        return kconfiglib.TRI_TO_STR[sym.tri_value]
    return sym.str_value if sym.config_string else None


def _unquote(value: str) -> str:
    return value[1:-1] if len(value) > 1 and value[0] == value[-1] == '"' else value


class _Translation:
    def __init__(self, ours: kconfiglib.Kconfig, shown: str, text: str):
        self.ours, self.shown = ours, shown
        self.out = Imported()
        self.lines, problems = parse_lines(text, shown)
        self.out.problems += problems
        self.set_at = {name: no for no, name, _ in self.lines}
        self.knlp = resolve(text)
        self.assigned: dict[str, tuple[str, str, str]] = {}  # ours -> (value, where, knlp name)
        self.notes: dict[str, list[str]] = defaultdict(list)
        self.features: dict[str, list[str]] = defaultdict(list)
        self.translated = 0

    def assign(self, ours: str, value: str, knlp_name: str, where: str = "") -> None:
        sym = self.ours.syms.get(ours)
        if sym is None or not sym.nodes:
            self.out.problems.append(
                f"{self.shown}: knlp's {knlp_name} maps to CONFIG_{ours}, "
                f"which this project lacks (lib/config/knlp/names.py)"
            )
            return
        if sym.orig_type == kconfiglib.STRING:
            value = '"' + _unquote(value).replace('"', '\\"') + '"'
        where = where or self._origin(knlp_name)
        earlier = self.assigned.get(ours)
        if earlier is not None and earlier[0] != value:
            self.out.problems.append(
                f"{where}: {knlp_name}={value} and {earlier[1]}: "
                f"{earlier[2]}={earlier[0]} both set CONFIG_{ours}; keep one"
            )
            return
        self.assigned[ours] = (value, where, knlp_name)

    def _origin(self, name: str) -> str:
        no = self.set_at.get(name)
        return (
            f"{self.shown}:{no}"
            if no is not None and self._applied(name)
            else f"knlp default {name}"
        )

    def _applied(self, name: str) -> bool:
        sym = self.knlp.syms.get(name)
        if sym is None or sym.user_value is None:
            return False
        want = [v for _, n, v in self.lines if n == name][-1]
        return _unquote(want) == (_value(sym) or "")

    def row(self, name: str) -> Row | None:
        if name in ROWS:
            return ROWS[name]
        sym = self.ours.syms.get(name)
        if sym is None or not sym.nodes:
            return None
        return Row("member" if sym.choice is not None else "same", name)

    def resolved(self) -> None:
        """Every knlp symbol's resolved value, carried to ours (or refused, or noted)."""
        for name in SYMBOLS:
            row, sym = self.row(name), self.knlp.syms[name]
            value = _value(sym)
            if row is None or value is None:
                continue
            if row.when and self.knlp.eval_string(row.when) == 0:
                continue
            if row.file_only and name not in self.set_at:
                continue
            self._apply(name, row, value)

    def _apply(self, name: str, row: Row, value: str) -> None:
        on = value not in ("n", "", '""')
        if row.kind == "same" or (
            row.kind == "pending" and row.ours in self.ours.syms and self.ours.syms[row.ours].nodes
        ):
            self.assign(row.ours, value, name)
            if row.kind == "pending" and not row.trains and name not in self.set_at:
                self.out.optional.add(row.ours)
        elif row.kind == "member" and value == "y":
            self.assign(row.ours, "y", name)
        elif row.kind == "values":
            target = dict(row.values).get(_unquote(value))
            if target is None:
                self.out.problems.append(
                    f"{self._origin(name)}: CONFIG_{name}={value} has no counterpart here; "
                    f"allowed: {', '.join(k for k, _ in row.values)}"
                )
            else:
                self.assign(target, "y", name)
        elif row.kind == "feature" and on:
            self.features[row.why].append(name)
        elif row.kind == "pending" and on:
            if row.trains:
                self.features[row.why].append(name)
            else:
                self.notes[
                    f"{row.why} is not in this project yet (it will be CONFIG_{row.ours}); "
                    f"it changes only runtime and records"
                ].append(f"{name}={value}")

    def special(self) -> None:
        """knlp semantics no single row states: compile, AUTO batch, attention, SPAM schedule."""
        knlp = self.knlp.syms
        auto = knlp["HYPER_PARAM_AUTO"].tri_value == 2
        cuda = knlp["DEVICE"].str_value == "cuda"
        if knlp["COMPILE_AUTO"].tri_value == 2:
            # lib/hyperparams.py: AUTO compiles on every GPU (MI210 aside), in AUTO mode only
            self.assign("COMPILE_MODEL", "y" if auto and cuda else "n", "COMPILE_AUTO")
        if auto:
            self.assign(
                "TARGET_EFFECTIVE_BATCH",
                KNLP_AUTO_BATCH,
                "HYPER_PARAM_AUTO",
                "knlp's AUTO batch (256 sequences per GPU)",
            )
        if knlp["ENABLE_RA_MLA"].tri_value != 2:
            gated = knlp["GPT2_KNLP"].tri_value == 2
            pair = (
                gated and knlp["GPT2_KNLP_SDPA_GATE"].tri_value == 2,
                gated and knlp["GPT2_KNLP_RA"].tri_value == 2,
            )
            self.assign(GATED_ATTENTION[pair], "y", "GPT2_KNLP_SDPA_GATE/GPT2_KNLP_RA")
        if knlp["OPTIMIZER_ENABLED_ADAMWSPAM"].tri_value == 2:
            self.spam_schedule()
        if self.knlp.eval_string("OPTIMIZER_ENABLED_ADAMWPRUNE && OPTIMIZER_MODE_SINGLE") == 2:
            if self.knlp.eval_string("PRUNING_MODE_SINGLE && PRUNING_SELECT_STATE") == 2:
                self.prune_schedule()
            elif knlp["PRUNING_MODE_NONE"].tri_value == 2:
                self.features[
                    "AdamWPrune without pruning (knlp's runner then trains it dense; "
                    "AdamWPrune here always prunes: use AdamW with WEIGHT_DECAY=0)"
                ].append("PRUNING_MODE_NONE")
        for when, label, pairs in CODE_VALUES:  # what knlp's code uses, not its Kconfig
            if self.knlp.eval_string(when) == 2:
                for ours_name, value in pairs:
                    self.assign(ours_name, value, label, "knlp code")

    def spam_schedule(self) -> None:
        """knlp's reset interval and LR re-warmup, in steps. Its counter moves twice per
        step: it resets at step k when 2k is a multiple of SPAM_INTERVAL, and re-warms
        the LR over the steps j with 2j < SPAM_WARMUP_STEPS, by (1 - cos(pi 2j / W)) / 2
        (lib/optim/knlp_spam.py uses pi j / N): exact when W is even."""
        knlp = self.knlp.syms
        value = {}
        for name in ("SPAM_INTERVAL", "SPAM_WARMUP_STEPS"):  # absent from its .config:
            raw = _value(knlp[name])  # gpt2/train.py's default
            value[name] = int(raw) if raw else KNLP_SPAM_RUNNER_DEFAULT
        interval, warmup = value["SPAM_INTERVAL"], value["SPAM_WARMUP_STEPS"]
        if interval % 2:  # reset when 2k is a multiple of an odd interval: every interval
            self.assign(
                "SPAM_INTERVAL", str(interval), "SPAM_INTERVAL", self._origin("SPAM_INTERVAL")
            )
        else:
            self.assign(
                "SPAM_INTERVAL",
                str(interval // 2),
                "SPAM_INTERVAL/2",
                self._origin("SPAM_INTERVAL"),
            )
        if warmup % 2:
            self.features[
                "knlp's LR re-warmup over an odd SPAM_WARMUP_STEPS (it ends mid-step in "
                "knlp's half-step count; this project's is whole steps)"
            ].append(f"SPAM_WARMUP_STEPS={warmup}")
        else:
            self.assign(
                "SPAM_WARMUP_STEPS",
                str(warmup // 2),
                "SPAM_WARMUP_STEPS/2",
                self._origin("SPAM_WARMUP_STEPS"),
            )

    def prune_schedule(self) -> None:
        """AdamWPrune's pruning as knlp's runner runs it (names.py, above KNLP_PRUNE_*).
        Its update after 0-based iteration i is ours after step i + 1, so our warmup
        and ramp end are knlp's + 1 and our progress equals its; our updates fall at
        warmup + 1 + k*50, its at multiples of 50: the same steps when its warmup is a
        multiple of 50. After the ramp it re-chooses masks at the target; a pruned
        weight scores 0 there, below every live score (bitter5 aside), so that keeps
        every mask: this project's stop at the ramp end is the same run."""
        knlp = self.knlp.syms
        variants = [
            f"bitter{n}"
            for n in range(10)
            if knlp[f"GPT2_ADAMWPRUNE_VARIANT_BITTER{n}"].tri_value == 2
        ] or ["bitter0"]
        names = [f"GPT2_ADAMWPRUNE_VARIANT_{v.upper()}" for v in variants]
        if len(variants) > 1:
            self.features[
                "several AdamWPrune variants in one file (knlp's runner trains one run each)"
            ] += names
            return
        variant = variants[0]
        if variant == "bitter5":
            self.features[
                "knlp's bitter5 masks, chosen afresh at each update (its scores go negative, "
                "so pruned weights can return; masks here only grow)"
            ] += names
            return
        warmup = int(_value(knlp["PRUNING_WARMUP"]) or KNLP_PRUNE_WARMUP)
        if warmup % KNLP_PRUNE_FREQUENCY or warmup >= KNLP_PRUNE_RAMP_END:
            self.features[
                f"knlp's AdamWPrune updates at multiples of {KNLP_PRUNE_FREQUENCY} with a "
                f"PRUNING_WARMUP that is not one below {KNLP_PRUNE_RAMP_END}"
            ].append(f"PRUNING_WARMUP={warmup}")
            return
        iters = int(_value(knlp["GPT2_MAX_ITERS"]) or 0)
        if iters == 10000 and variant in KNLP_VARIANT_ITERS:  # knlp's trainer lengthens it
            iters = KNLP_VARIANT_ITERS[variant]
            self.assigned["GPT2_MAX_ITERS"] = (str(iters), "knlp code", f"{variant} max_iters")
        if iters <= KNLP_PRUNE_RAMP_END:
            self.features[
                f"knlp's AdamWPrune ramp to step {KNLP_PRUNE_RAMP_END} in a run that ends "
                "before it (below the target sparsity)"
            ].append(f"GPT2_MAX_ITERS={iters}")
            return
        sparsity = _value(knlp["TARGET_SPARSITY"]) or KNLP_PRUNE_SPARSITY
        self.assign(
            "PRUNING_TARGET_SPARSITY", sparsity, "TARGET_SPARSITY", self._origin("TARGET_SPARSITY")
        )
        self.assign(
            "PRUNING_WARMUP", str(warmup + 1), "PRUNING_WARMUP+1", self._origin("PRUNING_WARMUP")
        )
        self.assign(f"ADAMWPRUNE_VARIANT_{variant.upper()}", "y", names[0], "knlp runner")
        label = "knlp's AdamWPrune schedule (lib/optimizers.py, gpt2/train.py)"
        for ours, value in (
            ("PRUNING_RAMP_END", str(KNLP_PRUNE_RAMP_END + 1)),
            ("PRUNING_FREQUENCY", str(KNLP_PRUNE_FREQUENCY)),
            ("PRUNING_SCHEDULE_CUBIC_LATE", "y"),
            ("PRUNING_SCOPE_GLOBAL", "y"),
            ("PRUNING_HEAD", "y"),
        ):
            self.assign(ours, value, label, "knlp code")

    def file_lines(self, suggest) -> None:
        """Each assignment in the file: translated, derived and checked, noted, or refused."""
        for no, name, value in self.lines:
            at = f"{self.shown}:{no}"
            row = ROWS.get(name)
            if name in SYMBOLS:
                sym = self.knlp.syms[name]
                if not any(node.prompt for node in sym.nodes):
                    resolved = _value(sym) or ""
                    if _unquote(value) != resolved:
                        self.out.problems.append(
                            f"{at}: CONFIG_{name}={value} contradicts the file's selection: "
                            f'knlp derives {name}="{resolved}" from it; remove the line or fix '
                            f"the selection"
                        )
                    continue
                if not self._applied(name) and (row is None or row.kind != "feature"):
                    self.notes[
                        "ignored, as knlp ignores them (their dependencies are unmet there)"
                    ].append(f"{name}={value} (line {no})")
                elif row is not None and row.kind == "runtime":
                    self.notes[f"{row.why}"].append(name)
                else:
                    self.translated += 1
            elif row is not None and row.kind == "absent":
                self.notes[
                    "not symbols of knlp at " + COMMIT[:8] + ", so knlp's run did not use "
                    "them; ignored here too"
                ].append(f"{name}={value} (line {no}: {row.why})")
            elif (gate := gate_of(name)) is not None and gate in self.knlp.syms:
                if self.knlp.syms[gate].tri_value != 2:
                    self.notes["settings of knlp features that are off"].append(name)
                else:
                    gate_row = ROWS.get(gate)
                    self.features[
                        gate_row.why
                        if gate_row and gate_row.kind == "feature"
                        else f"knlp's {gate} settings"
                    ].append(name)
            else:
                near = suggest(name)
                self.out.problems.append(
                    f"{at}: CONFIG_{name}={value}: unknown symbol (neither "
                    f"knlp at {COMMIT[:8]} nor this project has it)"
                    + (f"; did you mean CONFIG_{near}?" if near else "")
                )

    def finish(self) -> Imported:
        out = self.out
        out.missing = sorted(self.features)
        for feat, names in self.features.items():
            out.problems.append(
                f"{self.shown}: uses {feat}, which this project does not have "
                f"({', '.join(sorted(set(names)))}); refused"
            )
        out.text = "".join(f"CONFIG_{o}={v}\n" for o, (v, _, _) in self.assigned.items())
        out.where = {o: w for o, (_, w, _) in self.assigned.items()}
        defaults = [
            f"{k}={v}" if k == o else f"{k}={v} (as {o})"
            for o, (v, w, k) in self.assigned.items()
            if w.startswith("knlp") and v not in ("n", '""')
        ]  # off or empty: no news
        out.report = [
            f"{self.shown}: knlp format (knlp {COMMIT[:8]}): {self.translated} "
            f"names translated to this project's"
        ]
        if defaults:
            out.report.append(f"knlp defaults applied ({len(defaults)}): " + ", ".join(defaults))
        out.report += [
            f"accepted without effect: {', '.join(dict.fromkeys(names))}: {why}"
            for why, names in self.notes.items()
        ]
        return out


def translate(text: str, shown: str, ours: kconfiglib.Kconfig, suggest) -> Imported:
    """Translate a knlp-format text (see the module docstring); `suggest(name)`
    names the symbol a misspelt name most likely meant."""
    t = _Translation(ours, shown, text)
    t.file_lines(suggest)
    t.resolved()
    t.special()
    return t.finish()
