"""MECHINT_KV_* must parse (lib/eval/Kconfig), checked on load rather than
after a run has trained: the check is lib/eval/kv_circuit.py's."""

from lib.config.rules import rule
from lib.eval.kv_circuit_settings import check_settings

rule(check_settings)
