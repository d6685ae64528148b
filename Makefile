# kconfig-llm: configure like the kernel, train, record. `make help` lists targets.
#
# Each target is thin: it bootstraps .venv when needed and calls one script.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
KCONFIGS := Kconfig $(wildcard */Kconfig */Kconfig.* */*/Kconfig)

# Every value a target hands to a script. Only values typed on the make
# command line count, never the same names inherited from the environment
# (TIME, for one, is also GNU time's format variable).
OVERRIDE_VARS := MAX_ITERS TIME BATCH_SIZE GRAD_ACCUM COMPILE DEVICE LR SEED RUN_NAME SET TRACKER \
	PARALLEL_JOBS EXECUTOR DRY_RUN YES RESUME RETRY_FAILED
OPTION_VARS := RUN PROMPT TOKENS TEMPERATURE TOP_K CHECKPOINT BENCH_STEPS BENCH_VOCAB TARGET MATRIX \
	SWEEP SWEEP_FILE SWEEP_MODE SWEEP_TRIALS SWEEP_SEED RESULTS BASELINE RUNS OUT INTERVAL ONCE \
	EXPORT_DIR BASELINE_MODEL GPU PYTHON
GIVEN := $(foreach v,$(OVERRIDE_VARS) $(OPTION_VARS),$(if $(filter command line,$(origin $(v))),$(v)))

# Values reach the scripts byte for byte, whatever they hold: quotes, $(...),
# backticks, newlines, `;`, `#`, make syntax. Quoting them into the recipe
# cannot do that: make splits a recipe line at a newline inside a value, even
# within quotes, so the rest runs as a command of its own. Instead each given
# value is frozen as its raw text (:= of $(value), so make never expands it;
# make expands a command-line variable whenever it exports it, even for targets
# that do not use it), exported, and named in the recipe as "$${NAME}": the
# shell substitutes it as one word and never parses its bytes. Keep this block
# above any $(shell ...), which would export (so expand) the originals first.
$(foreach v,$(GIVEN),$(eval override $(v) := $$(value $(v)))$(eval export $(v)))
export PYTHON

# $(call arg,NAME,--flag): --flag "$${NAME}" when NAME was given non-empty.
arg = $(if $(filter $(1),$(GIVEN)),$(if $(value $(1)),$(2) "$${$(1)}"))
# Overrides go as NAME=VALUE words, an empty value included (MAX_ITERS= and the like).
OVERRIDES := $(foreach v,$(OVERRIDE_VARS),$(if $(filter $(v),$(GIVEN)),"$(v)=$${$(v)}"))

.DEFAULT_GOAL := all
# `make sample` and `make bench` options (not configuration).
SAMPLE_ARGS := $(call arg,RUN,--run) $(call arg,PROMPT,--prompt) $(call arg,TOKENS,--tokens) \
	$(call arg,TEMPERATURE,--temperature) $(call arg,TOP_K,--top-k) $(call arg,CHECKPOINT,--checkpoint)
BENCH_ARGS := $(call arg,BENCH_STEPS,--steps) $(call arg,BENCH_VOCAB,--vocab)

.PHONY: all train prepare continue test-matrix test-matrix-dry-run test-rerun sweep results report compare sample watch eval eval-baseline export bench bench-optim bench-seqlen estimate show help list-defconfigs menuconfig \
	olddefconfig alldefconfig savedefconfig test clean mrproper venv

all: train

$(STAMP): requirements.txt
	@bash scripts/bootstrap.sh $(VENV)

venv: $(STAMP)

.config:
	@echo "No .config yet: start from a defconfig, for example"
	@echo "  make defconfig-gpt2-tiny-shakespeare   (CPU, embedded Shakespeare, minutes)"
	@echo "The defconfigs (make list-defconfigs):"
	@for f in defconfigs/*; do printf "  defconfig-%-34s %s\n" "$${f#defconfigs/}" "$$(sed -n '1s/^# *//p' $$f)"; done
	@exit 1

config.py: .config $(KCONFIGS) | $(STAMP)
	@$(PY) scripts/kconfig.py genconfig

prepare: config.py
	@$(PY) scripts/prepare.py $(OVERRIDES)

train: config.py prepare
	@$(PY) scripts/train.py $(OVERRIDES)

continue: | $(STAMP)
	@$(PY) scripts/continue.py $(OVERRIDES)

# The test matrix: the grid the multiple-selection menus enable, one process per run.
MATRIX_ARGS := $(call arg,TARGET,--target) $(call arg,MATRIX,--matrix)

test-matrix: config.py prepare
	@$(PY) scripts/test_matrix.py run $(OVERRIDES)

test-matrix-dry-run: config.py
	@$(PY) scripts/test_matrix.py run DRY_RUN=1 $(OVERRIDES)

test-rerun: config.py
	@$(PY) scripts/test_matrix.py rerun $(MATRIX_ARGS) $(OVERRIDES)

# A sweep is a matrix over SWEEP's values: SWEEP="SYM=a,b SYM2=lo..hi:log" or SWEEP_FILE=<name>
SWEEP_ARGS := $(call arg,SWEEP,--sweep) $(call arg,SWEEP_FILE,--sweep-file) \
	$(call arg,SWEEP_MODE,--mode) $(call arg,SWEEP_TRIALS,--trials) $(call arg,SWEEP_SEED,--seed)

sweep: config.py prepare
	@$(PY) scripts/test_matrix.py sweep $(SWEEP_ARGS) $(OVERRIDES)

# Tables, plots and index.html of a matrix (or any folder of runs): RESULTS=<dir> BASELINE=<run-id>
RESULTS_ARGS := $(call arg,RESULTS,--dir) $(call arg,BASELINE,--baseline)

results: | $(STAMP)
	@$(PY) scripts/results.py summary $(RESULTS_ARGS)

report: | $(STAMP)
	@$(PY) scripts/results.py report $(RESULTS_ARGS)

# RUNS is a list: the shell splits it at blanks, with globbing off (set -f).
compare: | $(STAMP)
	@set -f; $(PY) scripts/results.py compare $(if $(call arg,RUNS),$${RUNS}) $(call arg,OUT,--out)

sample: | $(STAMP)
	@$(PY) scripts/sample.py $(SAMPLE_ARGS)

watch: | $(STAMP)
	@$(PY) scripts/watch.py $(call arg,RUN) $(call arg,INTERVAL,--interval) \
		$(if $(call arg,ONCE),--once)

# `make eval`, `make eval-baseline` and `make export` options (RUN=, CHECKPOINT=).
RUN_ARGS := $(call arg,RUN,--run) $(call arg,CHECKPOINT,--checkpoint)

eval: | $(STAMP)
	@$(PY) scripts/eval.py $(RUN_ARGS) $(OVERRIDES)

eval-baseline: config.py
	@$(PY) scripts/eval.py --baseline $(or $(call arg,BASELINE_MODEL),'') $(OVERRIDES)

export: | $(STAMP)
	@$(PY) scripts/export.py $(RUN_ARGS) $(call arg,EXPORT_DIR,--out)

bench: config.py
	@$(PY) scripts/bench.py step $(BENCH_ARGS) $(OVERRIDES)

bench-optim: config.py
	@$(PY) scripts/bench.py optimizers $(BENCH_ARGS) $(OVERRIDES)

bench-seqlen: config.py
	@$(PY) scripts/bench.py seqlen $(BENCH_ARGS) $(OVERRIDES)

# Memory and time estimate of the configuration; GPU=<name> for a known GPU (H100, L4, ...).
estimate: config.py
	@$(PY) scripts/estimate.py $(call arg,GPU,--device) $(OVERRIDES)

show: config.py
	@$(PY) scripts/kconfig.py show $(OVERRIDES)

# The name comes from the goal itself, so it travels like the values above.
defconfig-%: override export DEFCONFIG_NAME = $*
defconfig-%: | $(STAMP)
	@$(PY) scripts/kconfig.py defconfig "$${DEFCONFIG_NAME}"

list-defconfigs: | $(STAMP)
	@$(PY) scripts/kconfig.py list

menuconfig: | $(STAMP)
	$(PY) scripts/kconfig.py menuconfig

olddefconfig: .config | $(STAMP)
	@$(PY) scripts/kconfig.py olddefconfig

alldefconfig: | $(STAMP)
	@$(PY) scripts/kconfig.py alldefconfig

savedefconfig: .config | $(STAMP)
	@$(PY) scripts/kconfig.py savedefconfig

test: | $(STAMP)
	$(PY) -m pytest -q tests

clean:
	rm -rf .pytest_cache defconfig .config.old
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -exec rm -rf {} +

mrproper: clean
	rm -rf .config config.py $(VENV)

help:
	@echo "kconfig-llm targets (overrides: MAX_ITERS= TIME= BATCH_SIZE= GRAD_ACCUM= COMPILE=y|n"
	@echo "  DEVICE=auto|cuda|cpu|mps LR= SEED= RUN_NAME= SET=\"SYMBOL=value ...\" DRY_RUN=1 YES=1"
	@echo "  TRACKER=tensorboard,wandb|none)"
	@echo ""
	@echo "Configuration:"
	@echo "  defconfig-<name>  load defconfigs/<name> into .config and config.py"
	@echo "  list-defconfigs   list the defconfigs with their descriptions"
	@echo "  menuconfig        edit .config in a terminal menu; regenerates config.py"
	@echo "  olddefconfig      update .config to the current Kconfig, new options at defaults"
	@echo "  alldefconfig      .config with every option at its default"
	@echo "  savedefconfig     write a minimal ./defconfig that reproduces .config"
	@echo "  show              print the resolved configuration and derived values"
	@echo ""
	@echo "Running:"
	@echo "  all (default)     same as train"
	@echo "  train             prepare the dataset if needed, then train (results/<run-id>/)"
	@echo "  prepare           tokenize the configured dataset into data/ (once)"
	@echo "  continue          resume results/latest (or RUN_NAME=): a run from its last checkpoint,"
	@echo "                    a matrix's pending/interrupted runs [RETRY_FAILED=1 retries failed]"
	@echo "  test-matrix       train every run the multiple-selection menus enable [YES=1 PARALLEL_JOBS=]"
	@echo "  test-matrix-dry-run  print the matrix's runs with memory and time estimates; runs nothing"
	@echo "  test-rerun        train one matrix run again from scratch: TARGET=<run-id> [MATRIX=<dir>]"
	@echo "  sweep             a matrix over SWEEP=\"SYM=a,b SYM2=lo..hi:log\" or SWEEP_FILE=<name>"
	@echo "                    [SWEEP_MODE=grid|random SWEEP_TRIALS=N SWEEP_SEED=] (DRY_RUN=1 plans only)"
	@echo "  results           summary.md/.csv/.tex and plots for results/latest [RESULTS=<dir> BASELINE=<run>]"
	@echo "  report            index.html for results/latest: tables, plots, config diffs, logs [RESULTS= BASELINE=]"
	@echo "  compare           compare runs from anywhere under results/: RUNS=\"a b\" [OUT=<dir>]"
	@echo "  sample            generate text: RUN= PROMPT= TOKENS= TEMPERATURE= TOP_K= CHECKPOINT="
	@echo "  watch             live view of the latest run or matrix: iteration, loss, ETA [RUN= INTERVAL= ONCE=1]"
	@echo "  eval              perplexity / LAMBADA on the EVAL_* sets -> <run>/eval.json [RUN= CHECKPOINT=]"
	@echo "  eval-baseline     the same for a Hugging Face GPT-2 folder: BASELINE_MODEL=<dir>"
	@echo "  export            a GPT-2 run as a Hugging Face folder + model card [RUN= CHECKPOINT= EXPORT_DIR=]"
	@echo "  bench             time the training step against a plain PyTorch loop [BENCH_STEPS=]"
	@echo "  bench-optim       cost of AdamWSPAM and AdamWPrune against AdamW [BENCH_STEPS=]"
	@echo "  bench-seqlen      attention variants and HAMT at 64..2048 tokens, JSON + PNG [BENCH_VOCAB=]"
	@echo "  estimate          memory per GPU by component, which GPUs it fits, time [GPU=H100]"
	@echo ""
	@echo "Maintenance:"
	@echo "  venv              create .venv with the pinned requirements (automatic)"
	@echo "  test              run the test suite"
	@echo "  clean             remove caches and generated scratch files; keeps results/ and data/"
	@echo "  mrproper          clean, and remove .config, config.py and .venv"
	@echo "  help              this list"
