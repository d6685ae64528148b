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

import re
from collections import defaultdict
from dataclasses import dataclass, field

import kconfiglib

from lib.config.knlp.names import MARKERS, ROWS, gate_of
from lib.config.knlp.names_attention import GATED_ATTENTION
from lib.config.knlp.row import Row
from lib.config.knlp.table import COMMIT, SYMBOLS
from lib.config.knlp.translate_mla import MlaRules
from lib.config.knlp.translate_optim import OptimizerRules, unquote
from lib.config.knlp.translate_optim import knlp_value as _value
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


class _Translation(OptimizerRules, MlaRules):
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
        self.unknown: list[tuple[int, str, str, str | None]] = []  # file_lines: no knlp name

    def assign(self, ours: str, value: str, knlp_name: str, where: str = "") -> None:
        sym = self.ours.syms.get(ours)
        if sym is None or not sym.nodes:
            self.out.problems.append(
                f"{self.shown}: knlp's {knlp_name} maps to CONFIG_{ours}, "
                f"which this project lacks (lib/config/knlp/names.py)"
            )
            return
        if sym.orig_type == kconfiglib.STRING:
            value = '"' + unquote(value).replace('"', '\\"') + '"'
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
        return unquote(want) == (_value(sym) or "")

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
            target = dict(row.values).get(unquote(value))
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
        # knlp's trainer builds MLA, then RGSA, before looking at GPT2_KNLP (names.py)
        mla = self.knlp_mla()
        if not mla and knlp["ENABLE_RA_MLA"].tri_value != 2 and knlp["ENABLE_RGSA"].tri_value != 2:
            gated = knlp["GPT2_KNLP"].tri_value == 2
            pair = (
                gated and knlp["GPT2_KNLP_SDPA_GATE"].tri_value == 2,
                gated and knlp["GPT2_KNLP_RA"].tri_value == 2,
            )
            self.assign(GATED_ATTENTION[pair], "y", "GPT2_KNLP_SDPA_GATE/GPT2_KNLP_RA")
        if knlp["GPT2_VANILLA_ABLATION_MODE"].tri_value == 2:
            self.vanilla_steps()
        self.optimizer_rules()

    def vanilla_steps(self) -> None:
        """knlp's vanilla ablation steps: its runner (scripts/run_test_matrix.py) trains
        one run per step of GPT2_VANILLA_ABLATION_STEPS, for each unpruned combination,
        and skips a baseline step ("0", "V0") when BASELINE_RUN_ID names a run. At its
        commit every step trains the same GPT-2 (gpt2/trainers/vanilla.py configures no
        step since KV tying left), and its GPT-2 runs set no seed: N steps are N runs of
        one configuration from N random starts, which MATRIX_SEEDS gives here, one seed
        per step (its number where every step has a distinct one)."""
        knlp = self.knlp.syms
        steps = [
            s.strip() for s in unquote(_value(knlp["GPT2_VANILLA_ABLATION_STEPS"]) or "").split(",")
        ]
        if steps == [""]:  # an empty list: knlp trains its plain runs
            return
        origin = self._origin("GPT2_VANILLA_ABLATION_STEPS")
        if knlp["PRUNING_MODE_NONE"].tri_value != 2:
            if knlp["PRUNING_MODE_MULTIPLE"].tri_value == 2:
                self.features[
                    "knlp's vanilla ablation steps in a matrix with pruning (its runner "
                    "repeats only the unpruned runs)"
                ].append("GPT2_VANILLA_ABLATION_STEPS")
            else:
                self.notes["knlp's runner repeats only unpruned runs: ignored"].append(
                    "GPT2_VANILLA_ABLATION_STEPS"
                )
            return
        baseline = unquote(_value(knlp["BASELINE_RUN_ID"]) or "").strip()
        skipped = [s for s in steps if baseline and re.fullmatch(r"[A-Za-z]?0", s)]
        steps = [s for s in steps if s not in skipped]
        if skipped:
            self.notes[
                f"knlp's baseline step, replaced by BASELINE_RUN_ID {baseline!r}: not trained"
            ] += skipped
        if not steps:
            self.features[
                "knlp's vanilla ablation with only a skipped baseline step (nothing to train)"
            ].append("GPT2_VANILLA_ABLATION_STEPS")
            return
        numbers = [m.group(1) for s in steps if (m := re.fullmatch(r"[A-Za-z]*(\d{1,9})", s))]
        seeds = (
            numbers
            if len(numbers) == len(steps) and len(set(map(int, numbers))) == len(steps)
            else [str(n) for n in range(1, len(steps) + 1)]
        )
        if len(steps) > 1:
            self.assign(
                "MATRIX_SEEDS",
                " ".join(str(int(n)) for n in seeds),
                "GPT2_VANILLA_ABLATION_STEPS",
                origin,
            )
        else:  # one step: no MATRIX_SEEDS (several: `make test-matrix` runs them)
            self.notes[
                f"knlp's one vanilla ablation step ({steps[0]}) trains the plain GPT-2 at "
                f"{COMMIT[:8]}: the run itself"
            ].append("GPT2_VANILLA_ABLATION_MODE")

    def file_lines(self, suggest) -> None:
        """Each assignment in the file: translated, derived and checked, noted, or refused."""
        for no, name, value in self.lines:
            at = f"{self.shown}:{no}"
            row = ROWS.get(name)
            if name in SYMBOLS:
                sym = self.knlp.syms[name]
                if not any(node.prompt for node in sym.nodes):
                    resolved = _value(sym) or ""
                    if unquote(value) != resolved:
                        derivable = {unquote(v) for v, _ in SYMBOLS[name][3]}
                        never = (
                            f" (no selection of knlp's Kconfig derives {value}, so knlp "
                            f'dropped this line and trained what "{resolved}" names)'
                            if unquote(value) not in derivable
                            else ""
                        )
                        self.out.problems.append(
                            f"{at}: CONFIG_{name}={value} contradicts the file's selection: "
                            f'knlp derives {name}="{resolved}" from it{never}; remove the line '
                            f"to run what knlp ran, or select what the line meant"
                        )
                    continue
                if not self._applied(name) and (row is None or row.kind != "feature"):
                    self.notes[
                        "ignored, as knlp ignores them (their dependencies are unmet there)"
                    ].append(f"{name}={value} (line {no})")
                elif row is not None and row.when and self.knlp.eval_string(row.when) == 0:
                    self.notes[
                        "not read by knlp's run with this file's other settings (its code "
                        f"reads it only when {row.when})"
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
                gate_row = ROWS.get(gate)
                if self.knlp.syms[gate].tri_value != 2:
                    self.notes["settings of knlp features that are off"].append(name)
                elif gate_row is not None and gate_row.kind == "runtime":
                    self.notes[gate_row.why].append(name)  # the feature's knobs, no effect
                elif gate_row is not None and gate_row.kind == "special":
                    self.notes[  # a feature here whose knlp Kconfig lacks this name
                        "not symbols of knlp at " + COMMIT[:8] + ", so its .config drops "
                        "them and its run did not use them; ignored here too"
                    ].append(f"{name}={value} (line {no})")
                else:
                    self.features[
                        gate_row.why
                        if gate_row and gate_row.kind == "feature"
                        else f"knlp's {gate} settings"
                    ].append(name)
            elif name in self.ours.syms and self.ours.syms[name].nodes:
                theirs = [k for k, r in ROWS.items() if r.ours == name and k in SYMBOLS]
                self.out.problems.append(
                    f"{at}: CONFIG_{name}={value} is this project's name, not knlp's: a "
                    f"knlp-format file takes knlp's names only"
                    + (f" (knlp's is CONFIG_{theirs[0]})" if theirs else "")
                    + "; write the file in one format"
                )
            else:
                self.unknown.append((no, name, value, suggest(name)))

    def unknown_problems(self) -> list[str]:
        """One line per unknown name (with a did-you-mean: most are typos), but one
        per family of three or more sharing a two-word prefix (RA_MLA_*): the
        settings of a feature an older knlp had, not typos."""
        families: dict[str, list[tuple[int, str, str, str | None]]] = defaultdict(list)
        for entry in self.unknown:
            families["_".join(entry[1].split("_")[:2])].append(entry)
        lines = []
        for family, entries in families.items():
            if len(entries) >= 3:
                lines.append(
                    f"{self.shown}: lines {', '.join(str(e[0]) for e in entries)}: "
                    f"{len(entries)} {family}_* settings neither knlp at {COMMIT[:8]} nor this "
                    f"project has ({', '.join(e[1] for e in entries)}): a feature of an "
                    f"earlier knlp, so what they meant is not known here; refused"
                )
                continue
            for no, name, value, near in entries:
                lines.append(
                    f"{self.shown}:{no}: CONFIG_{name}={value}: unknown symbol (neither "
                    f"knlp at {COMMIT[:8]} nor this project has it)"
                    + (f"; did you mean CONFIG_{near}?" if near else "")
                )
        return lines

    def finish(self) -> Imported:
        out = self.out
        out.problems += self.unknown_problems()
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
