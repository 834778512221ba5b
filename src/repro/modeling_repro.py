"""The package's model as a transformers model (trust_remote_code), for exports (docs/models.md)."""

import torch.nn.functional as F
from transformers import GenerationMixin, PreTrainedConfig, PreTrainedModel
from transformers.modeling_outputs import CausalLMOutput

from .model import GPT
from .sizes import ModelSizes


class ReproConfig(ModelSizes, PreTrainedConfig):
    """repro.config.ModelConfig's fields and defaults, as a transformers configuration."""

    model_type = "repro"
    # The names other tools read (lm-eval's context length, transformers' generation).
    attribute_map = {
        "hidden_size": "d_model",
        "num_hidden_layers": "n_layer",
        "num_attention_heads": "n_head",
        "max_position_embeddings": "block_size",
    }

    def __init__(
        self,
        n_layer: int = 12,
        n_head: int = 12,
        d_model: int = 768,
        block_size: int = 1024,
        vocab_size: int = 50304,
        mlp_hidden: int = 3072,
        query_mode: str = "linear",
        tie_embeddings: bool = True,
        query_scale: float | None = None,
        qk_norm: bool = False,
        attention_gate: str | None = None,
        **kwargs,
    ):
        self.n_layer, self.n_head, self.d_model = n_layer, n_head, d_model
        self.block_size, self.vocab_size, self.mlp_hidden = block_size, vocab_size, mlp_hidden
        self.query_mode, self.tie_embeddings, self.query_scale = (
            query_mode,
            tie_embeddings,
            query_scale,
        )
        self.qk_norm, self.attention_gate = qk_norm, attention_gate
        kwargs["tie_word_embeddings"] = tie_embeddings
        super().__init__(**kwargs)


class ReproForCausalLM(PreTrainedModel, GenerationMixin):
    """GPT under `model`: its weights are the package's, each name prefixed with "model."."""

    config_class = ReproConfig
    base_model_prefix = "model"
    _tied_weights_keys = {"model.lm_head.weight": "model.transformer.wte.weight"}

    def __init__(self, config: ReproConfig):
        super().__init__(config)
        self.model = GPT(config)
        self.post_init()

    def _init_weights(self, module):
        GPT._init_weights(module)

    def get_input_embeddings(self):
        return self.model.transformer.wte

    def get_output_embeddings(self):
        return self.model.lm_head

    def forward(self, input_ids, attention_mask=None, labels=None, **kwargs):
        """Logits; with labels, also the mean next-token cross-entropy (-100: not scored)."""
        if attention_mask is not None and not bool(attention_mask.all()):
            raise ValueError(
                "attention_mask masks tokens: the model attends to every earlier position, so "
                "give sequences without padding (one at a time)"
            )
        logits = self.model(input_ids)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(
                logits[:, :-1].flatten(0, 1).float(), labels[:, 1:].flatten(), ignore_index=-100
            )
        return CausalLMOutput(loss=loss, logits=logits)

    def prepare_inputs_for_generation(self, input_ids, **kwargs):
        # No key/value cache through transformers: each new token reads the whole sequence.
        return {"input_ids": input_ids}
