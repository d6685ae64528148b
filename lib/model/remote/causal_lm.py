"""The transformers side of an exported folder (`make export` copies this file
into it with the other model code, lib/model/remote/source.py).

A family's template (gpt2/remote.py, hamt/remote.py) subclasses both
classes. The config holds the family's own config as a dict (model_config,
as the checkpoint recorded it); the model wraps the family's model
unchanged as `self.model`, so the weights keep the names the trainer saved,
with a "model." prefix, and the LM head stays tied to the token embedding
(unless the model_config says tie_head false: then it is saved and loaded
as a weight of its own).

forward returns CausalLMOutput: logits for every position and, with labels,
transformers' loss (position t predicts labels[t + 1], -100 ignored; the
cross-entropy alone, without a family's auxiliary training term). generate
recomputes the whole context at every step (use_cache false): the families'
caches (keys and values, MLA latents, RA queries, HAMT slots) are not
transformers Cache objects. Padded batches are refused: the models have no
notion of padding (GPT-2's positions would shift under left padding).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformers import GenerationMixin, PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import CausalLMOutput

from lib.model.interface import LanguageModel

IGNORE_INDEX = -100  # transformers' label for "no loss at this position"
# Names tools look for in config.json (lm-eval reads the context length from
# max_position_embeddings) -> the model_config field holding the value.
STANDARD_NAMES = {
    "vocab_size": "vocab_size",
    "hidden_size": "n_embd",
    "num_hidden_layers": "n_layer",
    "num_attention_heads": "n_head",
    "max_position_embeddings": "block_size",
}


class RemoteConfig(PretrainedConfig):
    """config.json of an exported run: the family, its config fields, and
    the standard names derived from them."""

    model_type = "kconfig_llm"  # one for every family: config.json also says which (family)

    def __init__(
        self, family: str = "", model_config: dict[str, Any] | None = None, **kwargs: Any
    ) -> None:
        self.family = family
        self.model_config = dict(model_config or {})
        for name, field in STANDARD_NAMES.items():
            kwargs.pop(name, None)  # derived, so a saved copy never disagrees
            setattr(self, name, self.model_config.get(field))
        # GPT-2's tie_head (False: the head has its own weights); other families tie
        kwargs["tie_word_embeddings"] = bool(self.model_config.get("tie_head", True))
        kwargs["use_cache"] = False
        super().__init__(**kwargs)


class RemoteCausalLM(PreTrainedModel, GenerationMixin):
    """A family's model (a lib.model.interface.LanguageModel) as a
    transformers causal LM; a family's template supplies build_model and,
    where needed, generation_window and reset_buffers."""

    config_class = RemoteConfig
    base_model_prefix = "model"
    main_input_name = "input_ids"
    _no_split_modules: list[str] = []
    model: LanguageModel

    def __init__(self, config: RemoteConfig, model: LanguageModel | None = None) -> None:
        super().__init__(config)
        # model: an existing instance to wrap (the exporter's, already trained)
        self.model = model if model is not None else self.build_model(config.model_config)
        # The head shares the embedding's weight, wherever the family keeps it.
        embedding = next(
            name for name, m in self.model.named_modules() if m is self.model.embedding()
        )
        self._tied_weights_keys = {"model.lm_head.weight": f"model.{embedding}.weight"}
        self.post_init()

    # ------------------------------------------------------- family hooks

    def build_model(self, fields: dict[str, Any]) -> LanguageModel:
        """The family's model from its config fields."""
        raise NotImplementedError

    def generation_window(self) -> int | None:
        """The most tokens generate feeds the model per step (the newest
        ones); None: the whole sequence."""
        return None

    def reset_buffers(self, module: nn.Module) -> None:
        """Recompute `module`'s buffers that the weights file does not hold."""

    # --------------------------------------------------------- transformers

    def get_input_embeddings(self) -> nn.Module:
        return self.model.embedding()

    def get_output_embeddings(self) -> nn.Module:
        return self.model.lm_head

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        # The family's model initialises itself when built, and from_pretrained
        # then loads every parameter. It builds on the meta device, though, so
        # buffers computed from the config and not saved need their values.
        self.reset_buffers(module)

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        labels: Tensor | None = None,
        **kwargs: Any,
    ) -> CausalLMOutput:
        if attention_mask is not None and not bool(attention_mask.bool().all()):
            raise ValueError(
                "attention_mask has zeros: padded batches are not supported by "
                "this model (it has no padding mask); pass unpadded sequences"
            )
        logits = self.model.lm_head(self.model.hidden_states(input_ids))
        loss = None
        if labels is not None:
            loss = F.cross_entropy(
                logits[:, :-1].flatten(0, 1).float(),
                labels[:, 1:].flatten().to(logits.device),
                ignore_index=IGNORE_INDEX,
            )
        return CausalLMOutput(loss=loss, logits=logits)

    def prepare_inputs_for_generation(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """The whole sequence each step (no cache), cut to generation_window."""
        window = self.generation_window()
        if window is not None:
            input_ids = input_ids[:, -window:]
            attention_mask = None if attention_mask is None else attention_mask[:, -window:]
        return {"input_ids": input_ids, "attention_mask": attention_mask}
