# kconfig-llm: configure like the kernel, train, record. `make help` lists targets.
#
# Each target is thin: it bootstraps .venv when needed and calls one script.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
KCONFIGS := Kconfig $(wildcard */Kconfig */Kconfig.* */*/Kconfig)

# Command-line overrides, passed to scripts as NAME=VALUE words. Only values
# given on the make command line count, never ones inherited from the
# environment (TIME, for one, is also GNU time's format variable).
OVERRIDE_VARS := MAX_ITERS TIME BATCH_SIZE GRAD_ACCUM COMPILE DEVICE LR SEED RUN_NAME SET \
	DRY_RUN YES RESUME
OVERRIDES := $(foreach v,$(OVERRIDE_VARS),$(if $(filter command line,$(origin $(v))),'$(v)=$($(v))'))

.DEFAULT_GOAL := all
# `make sample` and `make bench` options (not configuration).
SAMPLE_ARGS := $(if $(RUN),--run '$(RUN)') $(if $(PROMPT),--prompt '$(PROMPT)') \
	$(if $(TOKENS),--tokens $(TOKENS)) $(if $(TEMPERATURE),--temperature $(TEMPERATURE)) \
	$(if $(TOP_K),--top-k $(TOP_K)) $(if $(CHECKPOINT),--checkpoint $(CHECKPOINT))
BENCH_ARGS := $(if $(BENCH_STEPS),--steps $(BENCH_STEPS)) $(if $(BENCH_VOCAB),--vocab $(BENCH_VOCAB))

.PHONY: all train prepare continue sample bench bench-optim bench-seqlen show help list-defconfigs menuconfig \
	olddefconfig alldefconfig savedefconfig test clean mrproper venv

all: train

$(STAMP): requirements.txt
	@PYTHON=$(PYTHON) bash scripts/bootstrap.sh $(VENV)

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
	@$(PY) scripts/train.py RESUME=1 $(OVERRIDES)

sample: | $(STAMP)
	@$(PY) scripts/sample.py $(SAMPLE_ARGS)

bench: config.py
	@$(PY) scripts/bench.py step $(BENCH_ARGS) $(OVERRIDES)

bench-optim: config.py
	@$(PY) scripts/bench.py optimizers $(BENCH_ARGS) $(OVERRIDES)

bench-seqlen: config.py
	@$(PY) scripts/bench.py seqlen $(BENCH_ARGS) $(OVERRIDES)

show: config.py
	@$(PY) scripts/kconfig.py show $(OVERRIDES)

defconfig-%: | $(STAMP)
	@$(PY) scripts/kconfig.py defconfig $*

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
	@echo "  DEVICE=auto|cuda|cpu|mps LR= SEED= RUN_NAME= SET=\"SYMBOL=value ...\" DRY_RUN=1 YES=1)"
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
	@echo "  continue          resume results/latest (or RUN_NAME=) from its last checkpoint"
	@echo "  sample            generate text: RUN= PROMPT= TOKENS= TEMPERATURE= TOP_K= CHECKPOINT="
	@echo "  bench             time the training step against a plain PyTorch loop [BENCH_STEPS=]"
	@echo "  bench-optim       cost of AdamWSPAM and AdamWPrune against AdamW [BENCH_STEPS=]"
	@echo "  bench-seqlen      attention variants and HAMT at 64..2048 tokens, JSON + PNG [BENCH_VOCAB=]"
	@echo ""
	@echo "Maintenance:"
	@echo "  venv              create .venv with the pinned requirements (automatic)"
	@echo "  test              run the test suite"
	@echo "  clean             remove caches and generated scratch files; keeps results/ and data/"
	@echo "  mrproper          clean, and remove .config, config.py and .venv"
	@echo "  help              this list"
