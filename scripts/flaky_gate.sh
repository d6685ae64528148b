#!/usr/bin/env bash
# The flakiness gate (`make test-flaky`, run by CI after `make test`): the tests
# marked `stochastic` again, twice, each time under another seed, thread count
# and set of CPU kernels than `make test` used, so that a threshold that holds
# only for one host's float rounding fails here and not on a user's machine.
#   1. TEST_SEED=<seed>,   1 thread,  the other CPU kernel set (avx2 on an AVX-512
#      host, avx512 on an AVX2 host that has it, else the portable "default")
#   2. TEST_SEED=<seed+1>, 4 threads, the host's own kernels (one worker)
# TEST_SEED= picks the seed (a random one otherwise; it is printed either way).
# A failure prints the line that reproduces it (tests/conftest.py).
set -u
py=${PY:-.venv/bin/python}
seed=${TEST_SEED:-$((RANDOM % 9000 + 1000))}
# Checked before any arithmetic: bash runs a command in x[$(...)] when it evaluates it.
case $seed in
'' | *[!0-9]*)
	echo "error: TEST_SEED must be a whole number (make test-flaky TEST_SEED=1234), not '$seed'." >&2
	exit 2
	;;
esac
host=$("$py" -c 'import torch; print(torch.backends.cpu.get_cpu_capability().lower())')
case "$host" in
avx512) other=avx2 ;;
*) other=default ;;
esac

# A set of CPU kernels is torch's own vectorised kernels (ATEN_CPU_CAPABILITY)
# and the instruction sets oneDNN (bf16 and some fp32 matmuls) and MKL (fp32
# matmuls) may use: together they round as a host of that kind would.
kernels() {
	case "$1" in
	avx512) echo ATEN_CPU_CAPABILITY=avx512 ;;
	avx2) echo ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 ;;
	*) echo ATEN_CPU_CAPABILITY=default ONEDNN_MAX_CPU_ISA=SSE41 MKL_ENABLE_INSTRUCTIONS=SSE4_2 ;;
	esac
}

# The files to collect are the arguments: `make test-flaky` passes those that say
# `mark.stochastic` (the Makefile's `marked`, as for test-slow), since collecting all of
# tests/ to pick them would take most of each run (every worker imports and rewrites
# some 290 modules, about 25 s on 2 cores); tests/conftest.py refuses a stochastic test
# whose file does not say so, so none is left out. Without arguments, all of tests/.
files=("$@")
[ "${#files[@]}" -gt 0 ] || files=(tests)

run() { # seed threads kernels workers
	echo ">> stochastic tests: TEST_SEED=$1 TEST_THREADS=$2 $(kernels "$3")"
	# Passive OpenMP waits: 4 threads on 2 cores would otherwise spin against each other.
	# shellcheck disable=SC2046  # the kernel set is several NAME=VALUE words
	env TEST_SEED="$1" TEST_THREADS="$2" OMP_WAIT_POLICY=PASSIVE $(kernels "$3") "$py" -m pytest \
		-q -p no:randomly -n "$4" -m "stochastic and not slow and not engine and not gpu" "${files[@]}"
}
status=0
run "$seed" 1 "$other" "${TEST_JOBS:-auto}" || status=1
run "$((10#$seed + 1))" 4 "$host" 1 || status=1
if [ "$status" != 0 ]; then
	echo "flakiness gate failed (seed $seed): each failure above names the line that reproduces it." >&2
fi
exit "$status"
