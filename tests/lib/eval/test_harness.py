"""lm-eval's model interface over our models, scored against the model's own
log-probabilities, and the tasks of tests/assets/lm_eval_task evaluated offline."""

from __future__ import annotations

import math
import re
import statistics
from pathlib import Path

import pytest
import torch
from lm_eval.api.instance import Instance

from gpt2.config import ATTENTIONS, GPT2Config
from lib.data import DataError
from lib.data.sources import HUB_TIMEOUT_S
from lib.data.tokenizers import CharTokenizer, GPT2Tokenizer
from lib.data.tokenizers.gpt2 import GPT2_VOCAB_SIZE
from lib.eval import downstream
from lib.eval.harness import KconfigLM
from lib.model.registry import family

ROOT = Path(__file__).resolve().parents[3]
TASKS = ROOT / "tests" / "assets" / "lm_eval_task"
BLOCK = 32
OFFLINE_VARS = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")


def read_jsonl(name: str) -> list[dict]:
    import json

    return [json.loads(line) for line in (TASKS / name).read_text().splitlines()]


def next_token_logprobs(model, ids: list[int]) -> torch.Tensor:
    """log p(ids[i + 1] | ids[:i + 1]) for each i, in float64: the model's own figures."""
    x, y = torch.tensor([ids[:-1]]), torch.tensor([ids[1:]])
    with torch.no_grad():
        logits, _ = model(x, y)
    return torch.log_softmax(logits[0].double(), -1).gather(1, y[0, :, None])[:, 0]


def continuation_logprob(model, context: list[int], continuation: list[int]) -> float:
    return next_token_logprobs(model, context + continuation)[-len(continuation) :].sum().item()


def rolling_logprob(model, full: list[int], block: int) -> float:
    """full[1:] scored in chunks of `block` tokens; each chunk reads the `block`
    tokens before its last one (the first chunk fewer): lm-eval's rolling windows."""
    total = 0.0
    for start in range(1, len(full), block):
        end = min(start + block, len(full))  # this chunk predicts full[start:end]
        low = max(0, end - 1 - block)
        total += next_token_logprobs(model, full[low:end])[start - low - 1 :].sum().item()
    return total


def hand_multiple_choice(model, tokenizer) -> dict[str, float]:
    """acc and acc_norm of kconfig_llm_mc: each choice's summed token log-probs
    after its context, the argmax (acc_norm: per character of the choice)."""
    correct, correct_norm = [], []
    for doc in read_jsonl("kconfig_llm_mc.jsonl"):
        ctx = tokenizer.encode(doc["context"])
        lls = [continuation_logprob(model, ctx, tokenizer.encode(" " + c)) for c in doc["choices"]]
        norm = [ll / len(" " + c) for ll, c in zip(lls, doc["choices"])]
        correct.append(float(lls.index(max(lls)) == doc["label"]))
        correct_norm.append(float(norm.index(max(norm)) == doc["label"]))
    n = len(correct)
    return {
        "acc": sum(correct) / n,
        "acc_norm": sum(correct_norm) / n,
        "acc_stderr": statistics.stdev(correct) / math.sqrt(n),
    }


def hand_rolling(model, tokenizer, block: int) -> dict[str, float]:
    """word/byte perplexity and bits per byte of kconfig_llm_rolling."""
    ll = words = n_bytes = 0.0
    prefix = [] if tokenizer.eot_token is None else [tokenizer.eot_token]
    for doc in read_jsonl("kconfig_llm_rolling.jsonl"):
        ll += rolling_logprob(model, prefix + tokenizer.encode(doc["text"]), block)
        words += len(re.split(r"\s+", doc["text"]))
        n_bytes += len(doc["text"].encode("utf-8"))
    return {
        "word_perplexity": math.exp(-ll / words),
        "byte_perplexity": math.exp(-ll / n_bytes),
        "bits_per_byte": -ll / n_bytes / math.log(2),
    }


@pytest.fixture(autouse=True)
def local_data(monkeypatch, tmp_path):
    """The tasks' data paths start at the project root; datasets' cache goes to
    tmp_path; whatever the shell sets, no hub is asked (offline)."""
    import datasets

    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-datasets")
    for name in OFFLINE_VARS:
        monkeypatch.setenv(name, "1")


@pytest.fixture(scope="module")
def lm() -> KconfigLM:
    """A fixed 2-layer GPT-2 with GPT-2's BPE; weight matrices drawn wide
    (seeded) so that its choices differ by more than rounding and its greedy
    text does not repeat one token."""
    torch.manual_seed(0)
    gpt2 = family("gpt2")
    model = gpt2.build(
        GPT2Config(vocab_size=GPT2_VOCAB_SIZE, block_size=BLOCK, n_layer=2, n_head=2, n_embd=32)
    )
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.5)
    return KconfigLM(model=model, tokenizer=GPT2Tokenizer(), batch_size=4)


# The folders of lm-eval's own tasks the hub tests name (lm-eval's whole tree,
# thousands of YAML files, takes half a minute to index on a busy host).
OWN_TASKS = ("arc", "hellaswag", "mmlu")


@pytest.fixture(scope="module")
def own_index():
    """lm-eval's own tasks of OWN_TASKS, indexed by lm-eval from its own YAML files."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    tasks = Path(lm_eval.__file__).parent / "tasks"
    return TaskManager(include_path=[str(tasks / f) for f in OWN_TASKS], include_defaults=False)


@pytest.fixture
def own_tasks(monkeypatch, own_index):
    """downstream's index of lm-eval's own tasks (no include path, defaults) holds
    those of OWN_TASKS; an include folder is indexed as ever."""
    index = downstream._index

    def own_or_folder(folder: str, defaults: bool):
        return own_index if (folder, defaults) == ("", True) else index(folder, defaults)

    monkeypatch.setattr(downstream, "_index", own_or_folder)


def request(kind: str, *args) -> Instance:
    return Instance(request_type=kind, doc={}, arguments=args, idx=0)


def test_multiple_choice_task_matches_the_models_own_log_probs(lm):
    doc = read_jsonl("kconfig_llm_mc.jsonl")[0]
    got = lm.loglikelihood(
        [request("loglikelihood", doc["context"], " " + c) for c in doc["choices"]]
    )
    ctx = lm.tokenizer.encode(doc["context"])
    for (ll, _), choice in zip(got, doc["choices"]):
        assert ll == pytest.approx(
            continuation_logprob(lm.model, ctx, lm.tokenizer.encode(" " + choice)), rel=1e-5
        )
    lls = sorted(ll for ll, _ in got)
    assert min(b - a for a, b in zip(lls, lls[1:])) > 1e-3  # no near-tie decides acc

    manager, loaded = downstream.load_tasks(["kconfig_llm_mc"], str(TASKS))
    section = downstream.evaluate(lm, manager, loaded)
    metrics, hand = section["tasks"]["kconfig_llm_mc"], hand_multiple_choice(lm.model, lm.tokenizer)
    assert metrics["acc"]["value"] == pytest.approx(hand["acc"], abs=1e-12)
    assert metrics["acc_norm"]["value"] == pytest.approx(hand["acc_norm"], abs=1e-12)
    assert metrics["acc"]["stderr"] == pytest.approx(hand["acc_stderr"], rel=1e-9)
    assert section["samples"] == {"kconfig_llm_mc": 6} and section["settings"]["limit"] == 0


def test_rolling_task_scores_every_token_once_in_block_windows(lm):
    texts = [d["text"] for d in read_jsonl("kconfig_llm_rolling.jsonl")]
    assert max(len(lm.tokenizer.encode(t)) for t in texts) > 2 * BLOCK  # several windows
    manager, loaded = downstream.load_tasks(["kconfig_llm_rolling"], str(TASKS))
    metrics = downstream.evaluate(lm, manager, loaded)["tasks"]["kconfig_llm_rolling"]
    hand = hand_rolling(lm.model, lm.tokenizer, BLOCK)
    for name in ("word_perplexity", "byte_perplexity"):  # exp of -ll per unit: compare the logs
        assert math.log(metrics[name]["value"]) == pytest.approx(math.log(hand[name]), rel=1e-6)
    assert metrics["bits_per_byte"]["value"] == pytest.approx(hand["bits_per_byte"], rel=1e-6)
    assert all(m["stderr"] is None for m in metrics.values())  # lm-eval gives none for these


def test_loglikelihood_drops_the_start_of_a_context_longer_than_the_block(lm):
    tok = lm.tokenizer
    text = " ".join(d["text"] for d in read_jsonl("kconfig_llm_rolling.jsonl"))
    ctx, cont = tok.encode(text), tok.encode(" the moon.")
    keep = BLOCK + 1 - len(cont)  # the model reads BLOCK tokens: the last is the continuation's
    assert len(ctx) > keep
    [(got, _)] = lm.score([(ctx, cont)])
    assert got == pytest.approx(continuation_logprob(lm.model, ctx[-keep:], cont), rel=1e-5)
    assert got != pytest.approx(continuation_logprob(lm.model, ctx[-keep + 1 :], cont), rel=1e-5)


def test_context_spaces_and_an_empty_context_follow_lm_evals_convention(lm):
    tok = lm.tokenizer
    moved = lm.loglikelihood(
        [
            request("loglikelihood", "ROMEO: juliet loves ", "the moon."),
            request("loglikelihood", "ROMEO: juliet loves", " the moon."),
        ]
    )
    assert moved[0][0] == pytest.approx(moved[1][0], rel=1e-6)
    [(empty, _)] = lm.loglikelihood([request("loglikelihood", "", "ROMEO: juliet")])
    expected = continuation_logprob(lm.model, [tok.eot_token], tok.encode("ROMEO: juliet"))
    assert empty == pytest.approx(expected, rel=1e-5)


def test_generate_until_is_the_greedy_continuation_through_the_cache(lm, monkeypatch):
    tok, prompt, n = lm.tokenizer, "JULIET: romeo sees", 40
    ids = tok.encode(prompt)
    assert len(ids) + n > BLOCK  # runs past the block, where GPT-2 recomputes
    greedy = lm.model.generate(torch.tensor([ids]), n, temperature=0.0)[0, len(ids) :].tolist()
    assert tok.eot_token not in greedy
    expected = tok.decode(greedy)

    starts = []
    start = lm.model.start_generation
    monkeypatch.setattr(lm.model, "start_generation", lambda x: starts.append(x.shape) or start(x))
    [text] = lm.generate_until(
        [request("generate_until", prompt, {"until": ["<never>"], "max_gen_toks": n})]
    )
    assert text == expected
    # One prefill, then the cache up to the block; past it one prefill per token.
    assert len(starts) == 1 + sum(len(ids) + s + 1 > BLOCK for s in range(n - 1))

    stop = tok.decode(greedy[6:8])
    cut = expected.find(stop)
    assert cut > 0
    [text] = lm.generate_until(
        [request("generate_until", prompt, {"until": [stop], "max_gen_toks": n})]
    )
    assert text == expected[:cut]


def test_unknown_task_names_a_close_match():
    with pytest.raises(ValueError, match=r"kconfig_llm_mcq \(did you mean kconfig_llm_mc"):
        downstream.load_tasks(["kconfig_llm_mcq"], str(TASKS), defaults=False)


def test_groups_and_tags_expand_to_their_hub_datasets(own_tasks):
    manager = downstream.task_manager()
    assert downstream.hub_sources(manager, ["ai2_arc", "hellaswag"]) == {
        "arc_challenge": "allenai/ai2_arc",
        "arc_easy": "allenai/ai2_arc",
        "hellaswag": "Rowan/hellaswag",
    }
    mmlu = downstream.hub_sources(manager, ["mmlu"])
    assert len(mmlu) == 57 and set(mmlu.values()) == {"cais/mmlu"}
    local = downstream.task_manager(str(TASKS), defaults=False)
    assert downstream.hub_sources(local, ["kconfig_llm_mc", "kconfig_llm_rolling"]) == {}


@pytest.mark.parametrize(
    "switches,named",
    [
        (OFFLINE_VARS, "HF_HUB_OFFLINE, HF_DATASETS_OFFLINE and TRANSFORMERS_OFFLINE are set"),
        (("HF_DATASETS_OFFLINE",), "HF_DATASETS_OFFLINE is set"),  # a cluster's usual one
        (("TRANSFORMERS_OFFLINE",), "TRANSFORMERS_OFFLINE is set"),
    ],
)
def test_hub_task_offline_fails_at_once_with_what_to_do(own_tasks, monkeypatch, switches, named):
    import datasets
    import huggingface_hub

    for name in OFFLINE_VARS:
        monkeypatch.setenv(name, "1" if name in switches else "0")  # "0" is off
    asked = []

    def no_network(*args, **kwargs):
        raise AssertionError("the hub must not be asked when HF_HUB_OFFLINE is set")

    def uncached(**kwargs):  # what datasets answers offline for a set it has not cached
        asked.append(kwargs["path"])
        raise ConnectionError(
            f"Couldn't reach '{kwargs['path']}' on the Hub (OfflineModeIsEnabled)"
        )

    monkeypatch.setattr(huggingface_hub.HfApi, "dataset_info", no_network)
    monkeypatch.setattr(datasets, "load_dataset", uncached)
    with pytest.raises(DataError) as err:
        downstream.load_tasks(["hellaswag"])
    message = str(err.value)
    assert asked == ["Rowan/hellaswag"]
    for part in (
        "hellaswag read Rowan/hellaswag from the Hugging Face hub",
        f"{named} and the datasets cache does not hold them",
        f"Connect to the network (and unset {' '.join(switches)}): once fetched",
        "CONFIG_LM_EVAL_INCLUDE_PATH",
    ):
        assert part in message
    assert [n for n in OFFLINE_VARS if n in message] == list(switches)  # only those set


def test_unreachable_hub_fails_after_one_short_request(own_tasks, monkeypatch):
    import datasets
    import huggingface_hub

    for name in OFFLINE_VARS:
        monkeypatch.delenv(name)
    asked = []

    def unreachable(self, repo_id, *, timeout=None, **kwargs):
        asked.append((repo_id, timeout))
        raise ConnectionError("[Errno -2] Name or service not known")

    def never(**kwargs):
        raise AssertionError("no download may start before the hub answered")

    monkeypatch.setattr(huggingface_hub.HfApi, "dataset_info", unreachable)
    monkeypatch.setattr(datasets, "load_dataset", never)
    with pytest.raises(
        DataError,
        match="hellaswag read Rowan/hellaswag from the Hugging Face "
        "hub, which cannot be used here: ConnectionError",
    ) as err:
        downstream.load_tasks(["arc_easy", "hellaswag"])
    assert "unset" not in str(err.value)  # the network failed, no offline switch to blame
    assert asked == [("Rowan/hellaswag", HUB_TIMEOUT_S)]  # the first failure ends it
    assert 0 < HUB_TIMEOUT_S <= 30  # seconds, not the client's minutes of retries


FAMILIES = {  # every attention variant of GPT-2 (the reciprocal ones switched on), and HAMT
    **{
        f"gpt2-{a}": (
            "gpt2",
            {
                "attention": a,
                "latent_dim": 16,
                "ra_alpha": 0.5,
                "ra_gated_layers": 1,
                "kvsplice_layers": 1,
            },
        )
        for a in ATTENTIONS
    },
    "hamt": ("hamt", {"num_slots": 4}),
}


@pytest.mark.parametrize("variant", FAMILIES)
def test_every_family_scores_and_generates_as_its_own_model(variant):
    name, fields = FAMILIES[variant]
    text = "\n".join(d["text"] for d in read_jsonl("kconfig_llm_rolling.jsonl"))
    tok = CharTokenizer.from_text(text)  # no end-of-text token
    torch.manual_seed(0)
    fam, block = family(name), 16
    model = fam.build(
        fam.config_cls(
            vocab_size=tok.vocab_size, block_size=block, n_layer=2, n_head=2, n_embd=32, **fields
        )
    )
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.3)
    lm = KconfigLM(model=model.eval(), tokenizer=tok, batch_size=3)

    ctx, cont = tok.encode(text[:40]), tok.encode(" the moon.")
    pairs = [(ctx, cont), (ctx[:5], cont), (ctx[:2], cont[:1])]
    for (got, _), (c, k) in zip(lm.score(pairs), pairs):
        keep = c[-(block + 1 - len(k)) :]
        assert got == pytest.approx(continuation_logprob(model, keep, k), rel=1e-5)
    [rolled] = lm.loglikelihood_rolling([request("loglikelihood_rolling", text)])
    assert rolled == pytest.approx(rolling_logprob(model, tok.encode(text), block), rel=1e-5)

    prompt, n = "NURSE: romeo", 2 * block
    ids = tok.encode(prompt)
    greedy = model.generate(torch.tensor([ids]), n, temperature=0.0)[0, len(ids) :].tolist()
    [out] = lm.generate_until([request("generate_until", prompt, {"until": [], "max_gen_toks": n})])
    assert out == tok.decode(greedy)
