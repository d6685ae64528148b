# kconfig-llm: configure like the kernel, train, record. `make help` lists targets.
#
# Each target is thin: it bootstraps .venv when needed and calls one script.
# `make help` is read from this file: a `##@ Section` line starts a section, the
# `## text` lines just above a rule describe it (the first next to its name, the
# others below), and `##: text` lines open the list. A rule without `## ` is
# internal and stays out of the list. README.md's "Make targets" table lists the
# same targets; test_make_help.py checks the rules, the list and the table agree.

# Every value a target hands to a script. Only values typed on the make
# command line count, never the same names inherited from the environment
# (TIME, for one, is also GNU time's format variable).
OVERRIDE_VARS := MAX_ITERS TIME BATCH_SIZE GRAD_ACCUM COMPILE DEVICE LR SEED RUN_NAME SET TRACKER \
	PARALLEL_JOBS EXECUTOR SEEDS RUNS_PER_GPU REUSE DRY_RUN YES RETRY_FAILED WARMUP TUNE \
	TUNE_TRIALS TUNE_FRACTION TUNE_METRIC SCALE_ITERS
OPTION_VARS := RUN PROMPT TOKENS TEMPERATURE TOP_K CHECKPOINT BENCH_STEPS BENCH_VOCAB BENCH_VARIANTS \
	BENCH_SEEDS TARGET MATRIX \
	SWEEP SWEEP_FILE SWEEP_MODE SWEEP_TRIALS SWEEP_SEED RESULTS BASELINE RUNS OUT INTERVAL ONCE \
	EXPORT_DIR BASELINE_MODEL GPU PYTHON V TASKS TRUST_CHECKPOINT STAGES GPU_CHECK_BUDGET_S \
	GPU_WHEELS_PYTHON PLAN
GIVEN := $(foreach v,$(OVERRIDE_VARS) $(OPTION_VARS),$(if $(filter command line,$(origin $(v))),$(v)))
# The others the recipes read, typed or from the environment: import-knlp's FILE and
# NAME, the test targets' settings, the .venv paths, defconfig-<name>'s name.
OTHER_VARS := FILE NAME TEST_JOBS TEST_ORDER TEST_SEED TEST_THREADS VENV PY DEFCONFIG_NAME
MAKE_OWN_VARS := SHELL .SHELLFLAGS MAKEFLAGS MFLAGS GNUMAKEFLAGS MAKEFILES VPATH .RECIPEPREFIX

# Values reach the scripts byte for byte, whatever they hold: quotes, $(...),
# backticks, newlines, `;`, `#`, make syntax. Quoting them into the recipe
# cannot do that: make splits a recipe line at a newline inside a value, even
# within quotes, so the rest runs as a command of its own. Instead each given
# value is frozen as its raw text (:= of $(value), so make never expands it;
# make expands a command-line variable whenever it exports it, even for targets
# that do not use it), exported, and named in the recipe as "$${NAME}": the
# shell substitutes it as one word and never parses its bytes. Keep this block
# above any $(shell ...), which would export (so expand) the originals first.
# Frozen so: every variable typed (CUDA_VISIBLE_DEVICES=$(shell ...) would run at
# the export too), and OTHER_VARS and PYTHON from the environment as well, since
# the recipes read them from there too. A typed value takes `override`, so the
# defaults below cannot replace it; an environment one does not, so VENV := .venv
# still wins over an exported VENV, as before.
LETTERS := a b c d e f g h i j k l m n o p q r s t u v w x y z A B C D E F G H I J K L M N O P Q R S T U V W X Y Z
DIGITS := 0 1 2 3 4 5 6 7 8 9
# $(call without,TEXT,CHARS): TEXT less each character listed in CHARS (never expanded).
without = $(if $(2),$(call without,$(subst $(firstword $(2)),,$(1)),$(wordlist 2,99,$(2))),$(1))
TYPED := $(foreach v,$(.VARIABLES),$(if $(filter command line,$(origin $(v))),$(v)))
LISTED := $(OVERRIDE_VARS) $(OPTION_VARS) $(OTHER_VARS)
# make exports only names of letters, digits and _, and only those can be frozen
# (a $ in a name would run in the $(eval)); any other name is refused below.
PLAIN_TYPED := $(filter $(LISTED),$(TYPED)) $(foreach v,$(filter-out $(LISTED) $(MAKE_OWN_VARS),$(TYPED)),$(if \
	$(call without,$(v),$(LETTERS) $(DIGITS) _),,$(v)))
FROM_ENV := $(foreach v,$(OTHER_VARS) PYTHON,$(if $(filter environment%,$(origin $(v))),$(v)))
freeze = $(eval $(if $(filter environment,$(origin $(1))),,override )$(1) := $$(value $(1)))$(eval export $(1))
$(foreach v,$(PLAIN_TYPED) $(FROM_ENV),$(call freeze,$(v)))

PYTHON ?= python3
export PYTHON
VENV := .venv
PY := $(VENV)/bin/python
# VENV and PY are make targets, prerequisites and commands, which no quoting
# reaches: a value with another character than a plain path's is refused, read
# from its frozen text so that nothing in it runs.
PATH_CHARS := $(LETTERS) $(DIGITS) _ . / + - @
$(foreach v,VENV PY,$(if $(value $(v)),,$(error $(v) is empty: leave it out for the default \
	($(v)=.venv$(if $(filter PY,$(v)),/bin/python)))))
$(foreach v,VENV PY,$(if $(call without,$(value $(v)),$(PATH_CHARS))$(filter-out 1,$(words \
	x$(value $(v))x)),$(error $(v) may hold only letters, digits and _ . / + - @ (no spaces, \
	quotes or $$): it names a file make builds and runs, where it cannot be quoted. Give a \
	plain path, or a symbolic link with a plain name to the real one)))
STAMP := $(VENV)/.installed
KCONFIGS := Kconfig $(wildcard */Kconfig* */*/Kconfig* */*/*/Kconfig*)

# The scripts import lib/, gpt2/ and hamt/ from this checkout, not from the one
# .venv's editable install names: a .venv linked from another checkout would
# run that checkout's code on its own .config (lib/paths.py places the root
# where the code is).
override PYTHONPATH := $(CURDIR)$(if $(value PYTHONPATH),:$(value PYTHONPATH))
export PYTHONPATH

# $(call arg,NAME,--flag): --flag "$${NAME}" when NAME was given non-empty.
arg = $(if $(filter $(1),$(GIVEN)),$(if $(value $(1)),$(2) "$${$(1)}"))
# Overrides go as NAME=VALUE words, an empty value included (MAX_ITERS= and the like).
OVERRIDES := $(foreach v,$(OVERRIDE_VARS),$(if $(filter $(v),$(GIVEN)),"$(v)=$${$(v)}"))

# RESUME=1 is how `make continue` tells train.py to resume; typed here it would
# bypass continue's checks, so it is refused rather than ignored (ignored, `make`
# would start a new run instead of resuming the old one).
ifneq ($(filter RESUME,$(TYPED)),)
$(error RESUME is internal: `make continue` resumes results/latest, `make continue RUN_NAME=<id>` a named run)
endif

# Any other variable typed on the command line is refused: make would export it
# and go on, so `make LRR=1e-3` would train at the default LR without a word.
# Known: the lists above, GNU make's own, and the environment variables of the
# programs make starts (CUDA_VISIBLE_DEVICES=1, HF_HUB_OFFLINE=1...), which reach
# them as typed.
PROGRAM_ENV := CUDA_% HIP_% ATEN_% ONEDNN_% DNNL_% ROCR_% NCCL_% TORCH% PYTORCH_% TRITON_% OMP_% MKL_% HF_% \
	HUGGINGFACE_% TRANSFORMERS_% TOKENIZERS_% TIKTOKEN_% WANDB_% TRACKIO_% GPU_CHECK_% \
	PYTHON% LD_% TMPDIR XDG_%
UNKNOWN_VARS := $(filter-out $(LISTED) $(MAKE_OWN_VARS) $(PROGRAM_ENV),$(TYPED))
ifneq ($(UNKNOWN_VARS),)
$(error $(if $(realpath $(VENV)/bin/python),$(shell MAKE_KNOWN_VARS="$(OVERRIDE_VARS) \
	$(OPTION_VARS) FILE NAME TEST_JOBS TEST_ORDER TEST_SEED TEST_THREADS" $(VENV)/bin/python scripts/kconfig.py make-vars \
	$(foreach v,$(UNKNOWN_VARS),'$(subst ','\'',$(v))') 2>&1),unknown variable(s) \
	$(UNKNOWN_VARS): `make help` lists the variables make reads))
endif

# V=1 shows the commands make runs, as in Kbuild: work recipes start with $(Q),
# `@` unless V=1 was typed (V is frozen above like every given value). Recipes
# that only print a message keep a plain `@`.
Q := $(if $(filter 1,$(if $(filter V,$(GIVEN)),$(V))),,@)

##: kconfig-llm targets (overrides: MAX_ITERS= SCALE_ITERS= TIME= BATCH_SIZE= GRAD_ACCUM= COMPILE=y|n
##:   DEVICE=auto|cuda|cpu|mps LR= SEED= SEEDS= RUN_NAME= SET="SYMBOL=value ..." DRY_RUN=1 YES=1
##:   TRACKER=tensorboard,wandb,trackio|none REUSE=n; V=1 shows the commands make runs)

.DEFAULT_GOAL := all
# `make sample` and `make bench` options (not configuration).
SAMPLE_ARGS := $(call arg,RUN,--run) $(call arg,PROMPT,--prompt) $(call arg,TOKENS,--tokens) \
	$(call arg,TEMPERATURE,--temperature) $(call arg,TOP_K,--top-k) $(call arg,CHECKPOINT,--checkpoint)
BENCH_ARGS := $(call arg,BENCH_STEPS,--steps) $(call arg,BENCH_VOCAB,--vocab)
# bench-seqlen's and bench-precision's models, e.g. BENCH_VARIANTS=vanilla,hamt
VARIANT_ARGS := $(call arg,BENCH_VARIANTS,--variants)
# The test matrix: the grid the multiple-selection menus enable, one process per run.
MATRIX_ARGS := $(call arg,TARGET,--target) $(call arg,MATRIX,--matrix)
# A sweep is a matrix over SWEEP's values: SWEEP="SYM=a,b SYM2=lo..hi:log" or SWEEP_FILE=<name>
SWEEP_ARGS := $(call arg,SWEEP,--sweep) $(call arg,SWEEP_FILE,--sweep-file) \
	$(call arg,SWEEP_MODE,--mode) $(call arg,SWEEP_TRIALS,--trials) $(call arg,SWEEP_SEED,--seed)
# Tables, plots and index.html of a matrix (or any folder of runs): RESULTS=<dir> BASELINE=<run-id>
RESULTS_ARGS := $(call arg,RESULTS,--dir) $(call arg,BASELINE,--baseline)
# `make eval`, `make eval-baseline` and `make export` options (RUN=, CHECKPOINT=).
RUN_ARGS := $(call arg,RUN,--run) $(call arg,CHECKPOINT,--checkpoint)

# Internal rules: the virtual environment, the configuration files.
# An interpreter gone under an intact stamp (its base Python removed or upgraded)
# makes the stamp out of date too: bootstrap.sh rebuilds .venv rather than every
# target failing with "Error 127". realpath, unlike wildcard, drops a dangling link.
$(STAMP): requirements.txt requirements-dev.txt requirements-lock.txt \
	$(if $(realpath $(VENV)/bin/python),,$(VENV)/bin/python)
	$(Q)bash scripts/bootstrap.sh $(VENV)

$(VENV)/bin/python: ;

.config:
	@echo "No .config yet: start from a defconfig, for example"
	@echo "  make defconfig-gpt2-tiny-shakespeare   (CPU, embedded Shakespeare, minutes)"
	@echo "The defconfigs (make list-defconfigs):"
	@for f in defconfigs/*; do printf "  defconfig-%-34s %s\n" "$${f#defconfigs/}" "$$(sed -n '1s/^# *//p' $$f)"; done
	@exit 1

config.py: .config lib/config/symbols.py | $(STAMP)
	$(Q)$(PY) scripts/kconfig.py genconfig

# The typed schema every script reads (one field per symbol), rebuilt when a
# Kconfig file or a package's off values change, as Kbuild rebuilds its generated headers.
lib/config/symbols.py: $(KCONFIGS) $(wildcard */off_values.toml */*/off_values.toml */*/*/off_values.toml) | $(STAMP)
	$(Q)$(PY) scripts/kconfig.py schema

##@ Configuration

## load defconfigs/<name> into .config and config.py
# The name comes from the goal itself, so it travels like the values above.
# (A pattern rule cannot be .PHONY; no file is named defconfig-<name>.)
defconfig-%: override export DEFCONFIG_NAME = $*
defconfig-%: | $(STAMP) lib/config/symbols.py
	$(Q)$(PY) scripts/kconfig.py defconfig "$${DEFCONFIG_NAME}"

## list the defconfigs with their descriptions
.PHONY: list-defconfigs
list-defconfigs: | $(STAMP)
	$(Q)$(PY) scripts/kconfig.py list

## edit .config in a terminal menu; regenerates config.py
.PHONY: menuconfig
menuconfig: | $(STAMP) lib/config/symbols.py
	$(PY) scripts/kconfig.py menuconfig

## update .config to the current Kconfig, new options at defaults
.PHONY: olddefconfig
olddefconfig: .config | $(STAMP) lib/config/symbols.py
	$(Q)$(PY) scripts/kconfig.py olddefconfig

## .config with every option at its default
.PHONY: alldefconfig
alldefconfig: | $(STAMP) lib/config/symbols.py
	$(Q)$(PY) scripts/kconfig.py alldefconfig

## load a knlp-format file: FILE=<path> [NAME=<name>: write defconfigs/<name> instead
## of .config], with knlp's defaults for what it leaves unset and a report
.PHONY: import-knlp
import-knlp: | $(STAMP) lib/config/symbols.py
	$(Q)$(if $(FILE),,$(error FILE=<knlp defconfig> is required))$(PY) scripts/kconfig.py import-knlp "$${FILE}" "$${NAME}"

## write a minimal ./defconfig that reproduces .config
.PHONY: savedefconfig
savedefconfig: .config | $(STAMP)
	$(Q)$(PY) scripts/kconfig.py savedefconfig

## print the resolved configuration and derived values
.PHONY: show
show: config.py
	$(Q)$(PY) scripts/kconfig.py show $(OVERRIDES)

##@ Running

## same as train
.PHONY: all
all: train

# Long runs `exec` their script: make passes a SIGTERM it gets on to its command,
# which is then the script itself, not a shell that would die and orphan it
# (lib/run/signals.py: follow_make passes on the SIGINT make does not).
## prepare the dataset if needed, then train (results/<run-id>/)
.PHONY: train
train: config.py prepare
	$(Q)exec $(PY) scripts/train.py $(OVERRIDES)

## tokenize the configured dataset into data/ (once)
.PHONY: prepare
prepare: config.py
	$(Q)exec $(PY) scripts/prepare.py $(OVERRIDES)

## resume results/latest (or RUN_NAME=, or RUN=<dir>): a run from its last checkpoint,
## a matrix's pending/interrupted runs [RETRY_FAILED=1 retries failed]
.PHONY: continue
continue: | $(STAMP)
	$(Q)exec $(PY) scripts/continue.py $(call arg,RUN,--run) $(OVERRIDES)

## train every run the multiple-selection menus enable [YES=1 PARALLEL_JOBS= REUSE=n]
.PHONY: test-matrix
test-matrix: config.py prepare
	$(Q)exec $(PY) scripts/matrix.py run $(OVERRIDES)

## tune the configuration in .config (an Optuna study), then train it at the best
## values [TUNE="LR WARMUP" TUNE_TRIALS= TUNE_FRACTION= TUNE_METRIC= DRY_RUN=1 YES=1]
.PHONY: tune
tune: config.py prepare
	$(Q)exec $(PY) scripts/matrix.py tune $(OVERRIDES)

## print the matrix's runs with memory and time estimates; runs nothing [GPU=H100]
.PHONY: test-matrix-dry-run
test-matrix-dry-run: config.py
	$(Q)$(PY) scripts/matrix.py run DRY_RUN=1 $(call arg,GPU,--gpu) $(OVERRIDES)

## train one matrix run again from scratch: TARGET=<run-id> [MATRIX=<dir>]
.PHONY: test-rerun
test-rerun: config.py
	$(Q)exec $(PY) scripts/matrix.py rerun $(MATRIX_ARGS) $(OVERRIDES)

## a matrix over SWEEP="SYM=a,b SYM2=lo..hi:log" or SWEEP_FILE=<name>
## [SWEEP_MODE=grid|random SWEEP_TRIALS=N SWEEP_SEED=] (DRY_RUN=1 plans only)
.PHONY: sweep
sweep: config.py prepare
	$(Q)exec $(PY) scripts/matrix.py sweep $(SWEEP_ARGS) $(OVERRIDES)

## summary.md/.csv/.tex (seed statistics when runs share a configuration) and plots
## for results/latest [RESULTS=<dir> BASELINE=<run>]
.PHONY: results
results: | $(STAMP)
	$(Q)$(PY) scripts/results.py summary $(RESULTS_ARGS)

## index.html for results/latest: tables, plots, config diffs, logs [RESULTS= BASELINE=]
.PHONY: report
report: | $(STAMP)
	$(Q)$(PY) scripts/results.py report $(RESULTS_ARGS)

## compare runs from anywhere under results/: RUNS="a b" [OUT=<dir> BASELINE=]
# RUNS is a list: the shell splits it at blanks, with globbing off (set -f).
.PHONY: compare
compare: | $(STAMP)
	$(Q)set -f; $(PY) scripts/results.py compare $(if $(call arg,RUNS),$${RUNS}) $(call arg,OUT,--out) \
		$(call arg,BASELINE,--baseline)

## generate text: RUN= PROMPT= TOKENS= TEMPERATURE= TOP_K= CHECKPOINT=
.PHONY: sample
sample: | $(STAMP)
	$(Q)$(PY) scripts/sample.py $(SAMPLE_ARGS)

## live view of the latest run or matrix: iteration, loss, ETA [RUN= INTERVAL= ONCE=1]
.PHONY: watch
watch: | $(STAMP)
	$(Q)$(PY) scripts/watch.py $(call arg,RUN) $(call arg,INTERVAL,--interval) \
		$(if $(call arg,ONCE),--once)

## perplexity / LAMBADA on the EVAL_* sets -> <run>/eval.json [RUN= CHECKPOINT=]
.PHONY: eval
eval: | $(STAMP)
	$(Q)$(PY) scripts/eval.py $(RUN_ARGS) $(OVERRIDES)

## the same for a Hugging Face causal LM folder: BASELINE_MODEL=<dir>
.PHONY: eval-baseline
eval-baseline: config.py
	$(Q)$(PY) scripts/eval.py --baseline $(or $(call arg,BASELINE_MODEL),'') $(OVERRIDES)

## the same for every folder of CONFIG_EVAL_BASELINES (baselines/hamt-plan); says how to fetch missing ones
.PHONY: eval-baselines
eval-baselines: config.py
	$(Q)$(PY) scripts/eval.py --baselines $(OVERRIDES)

## lm-evaluation-harness tasks -> <run>/eval.json "lm_eval" [RUN= CHECKPOINT= TASKS= BASELINE_MODEL=]
.PHONY: lm-eval
lm-eval: | $(STAMP)
	$(Q)$(PY) scripts/downstream.py $(RUN_ARGS) $(call arg,TASKS,--tasks) \
		$(call arg,BASELINE_MODEL,--baseline) $(OVERRIDES)

## any run as a Hugging Face folder + model card (MLA, RA, HAMT: with their code) [RUN= CHECKPOINT= EXPORT_DIR=]
.PHONY: export
export: | $(STAMP)
	$(Q)$(PY) scripts/export.py $(RUN_ARGS) $(call arg,EXPORT_DIR,--out)

## time the training step against a plain PyTorch loop [BENCH_STEPS=]
.PHONY: bench
bench: config.py
	$(Q)$(PY) scripts/bench.py step $(BENCH_ARGS) $(OVERRIDES)

## cost of AdamWSPAM and AdamWPrune against AdamW [BENCH_STEPS=]
.PHONY: bench-optim
bench-optim: config.py
	$(Q)$(PY) scripts/bench.py optimizers $(BENCH_ARGS) $(OVERRIDES)

## attention variants and HAMT across lengths (CPU 64..2048, CUDA 1024..16384), JSON + PNG [BENCH_VOCAB= BENCH_VARIANTS=]
.PHONY: bench-seqlen
bench-seqlen: config.py
	$(Q)$(PY) scripts/bench.py seqlen $(BENCH_ARGS) $(VARIANT_ARGS) $(OVERRIDES)

## the model's linear layers on this CPU: PyTorch's kernel against oneDNN's, GFLOP/s (JSON)
.PHONY: bench-linear
bench-linear: config.py
	$(Q)$(PY) scripts/bench.py linear $(BENCH_ARGS) $(OVERRIDES)

## how far bf16 autocast moves vanilla's and HAMT's gradients from float32's (JSON) [BENCH_SEEDS=0,1,2 BENCH_VARIANTS=]
.PHONY: bench-precision
bench-precision: config.py
	$(Q)$(PY) scripts/bench.py precision $(call arg,BENCH_VOCAB,--vocab) $(VARIANT_ARGS) \
		$(call arg,BENCH_SEEDS,--seeds) $(OVERRIDES)

## a run's prefill ms, decode tokens/s, cache bytes -> metrics.json [RUN= CHECKPOINT=]
.PHONY: bench-inference
bench-inference: | $(STAMP)
	$(Q)$(PY) scripts/bench.py inference $(RUN_ARGS) $(OVERRIDES)

## a run's K/V feature circuit (MECHINT_KV_*) -> kv_circuit/, metrics.json [RUN= CHECKPOINT=]
.PHONY: kv-circuit
kv-circuit: | $(STAMP)
	$(Q)$(PY) scripts/kv_circuit.py $(RUN_ARGS) $(OVERRIDES)

## memory per GPU by component, which GPUs it fits, time [GPU=H100]
.PHONY: estimate
estimate: config.py
	$(Q)$(PY) scripts/estimate.py $(call arg,GPU,--device) $(OVERRIDES)

# The GPU node's own Python (its torch) when there is no .venv: both targets
# run without bootstrapping one, which a node without network could not do (the
# project is on PYTHONPATH, above, in place of the .venv's editable install).
GPU_PY = $(if $(realpath $(PY)),$(PY),"$${PYTHON}")

## download into .whl/ the wheels a GPU node without network lacks (cp312 by
## default: GPU_WHEELS_PYTHON=311); copy .whl/ along with the tree
.PHONY: gpu-wheels
gpu-wheels:
	$(Q)$(GPU_PY) scripts/gpu_wheels.py

## test and time everything GPU-side in one time-boxed run -> OUT/gpu_check.json
## [STAGES=abcdef OUT=<dir> DEVICE=cpu (tiny shapes) GPU_CHECK_BUDGET_S=540
## PLAN=h200 (print the order and what it expects to reach; run nothing)]
.PHONY: gpu-check
gpu-check:
	$(Q)$(GPU_PY) scripts/gpu_check.py $(call arg,DEVICE,--device) $(call arg,OUT,--out) \
		$(call arg,STAGES,--stages) $(call arg,PLAN,--plan)

##@ Maintenance

## create .venv with the pinned requirements (automatic)
.PHONY: venv
venv: $(STAMP)

## regenerate lib/config/symbols.py from the Kconfig files (automatic)
.PHONY: schema
schema: | $(STAMP)
	$(Q)$(PY) scripts/kconfig.py schema

# The slow end-to-end tests run in `make test-slow`, a CI step of their own.
# TEST_JOBS= sets pytest-xdist's workers, which take tests one at a time (worksteal).
# The fast suite runs in a random order (pytest-randomly); TEST_ORDER=<seed> replays one.
TEST_JOBS ?= auto
export TEST_JOBS
TEST_ORDER_ARG = $(if $(TEST_ORDER),"--randomly-seed=$${TEST_ORDER}")
# The test files that say mark.<marker>: `make test-slow` and `make test-engines` collect
# only those, since collecting all of tests/ costs each worker some 25 s (tests/conftest.py
# refuses a marked test whose file does not say so). All of tests/ where none does.
marked = $(or $(shell grep -rl --include='test_*.py' -e 'mark.$(1)' tests 2>/dev/null | sort),tests)

## lint and format-check the tree (ruff), type-check (mypy), then run the test suite in a random order [TEST_JOBS= TEST_ORDER=<seed>]
.PHONY: test
test: | $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy
	$(PY) -m pytest -q -n "$${TEST_JOBS}" --dist worksteal $(TEST_ORDER_ARG) \
		--junitxml=.pytest_cache/junit.xml -m "not engine and not slow" tests

## the flakiness gate: the stochastic tests under another seed, thread count and set
## of CPU kernels (CI runs it after `make test`) [TEST_SEED=]
.PHONY: test-flaky
test-flaky: | $(STAMP)
	$(Q)PY=$(PY) bash scripts/flaky_gate.sh $(call marked,stochastic)

## reformat the tree and apply ruff's safe fixes (what `make test` checks)
.PHONY: format
format: | $(STAMP)
	$(PY) -m ruff check --fix .
	$(PY) -m ruff format .

## the slow tests: torch.compile, runs stopped and resumed, end-to-end make runs
.PHONY: test-slow
test-slow: | $(STAMP)
	$(PY) -m pytest -q -n "$${TEST_JOBS}" --dist worksteal -m "slow and not engine" \
		--junitxml=.pytest_cache/junit-slow.xml $(call marked,slow)

## record the last `make test`'s slowest tests (docs/bench-data/tests/durations.json)
## and write them into docs/development.md
.PHONY: test-durations
test-durations: | $(STAMP)
	$(Q)$(PY) scripts/slowest_tests.py record

## the GPU tests, the full HAMT kernel matrix included (`make gpu-check` runs a
## shorter one); each skips without CUDA
.PHONY: test-gpu
test-gpu: | $(STAMP)
	$(PY) -m pytest -q -p no:randomly -m gpu tests

## the tests that drive real engines: a one-node Slurm cluster, headless Chromium
.PHONY: test-engines
test-engines: | $(STAMP)
	$(PY) -m pytest -q -m engine $(call marked,engine)

# NO_MKDOCS_2_WARNING: mkdocs-material prints a banner about MkDocs 2.0 on every build.
## build the documentation site from docs/ into site/ (strict: a broken link fails)
.PHONY: docs
docs: | $(STAMP)
	$(Q)NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir site

## serve the documentation site on http://127.0.0.1:8000, rebuilt on every edit
.PHONY: docs-serve
docs-serve: | $(STAMP)
	$(Q)NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs serve --strict

## remove caches and generated scratch files; keeps results/ and data/
.PHONY: clean
clean:
	rm -rf .pytest_cache defconfig .config.old site
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -exec rm -rf {} +

## clean, and remove .config, config.py and .venv
.PHONY: mrproper
mrproper: clean
	rm -rf .config config.py $(VENV)

# The list, read from this file at run time (see the top): `##:` lines verbatim,
# `##@` a section, `## ` lines then the rule they describe.
define HELP_PROGRAM
/^##: / { print substr($$0, 5); next }
/^##:$$/ { print ""; next }
/^##@ / { printf "\n%s:\n", substr($$0, 5); next }
/^## / { text[n++] = substr($$0, 4); next }
/^\.PHONY:/ || /^#/ { next }
n && /^[a-zA-Z0-9_%][^:=[:space:]]*:/ {
	name = substr($$0, 1, index($$0, ":") - 1)
	gsub(/%/, "<name>", name)
	if (name == goal) name = name " (default)"
	printf "  %-16s  %s\n", name, text[0]
	for (i = 1; i < n; i++) printf "  %-16s  %s\n", "", text[i]
}
{ n = 0 }
endef

## this list
.PHONY: help
help: export HELP_PROGRAM := $(HELP_PROGRAM)
help:
	@awk -v goal='$(.DEFAULT_GOAL)' "$${HELP_PROGRAM}" $(MAKEFILE_LIST)
