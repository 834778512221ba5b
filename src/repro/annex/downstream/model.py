"""Our GPT as an lm-evaluation-harness model, registered as "repro" (docs/annex/downstream.md)."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from lm_eval.api.model import TemplateLM
from lm_eval.api.registry import register_model
from lm_eval.utils import get_rolling_token_windows, make_disjoint_window

from repro.data.tokenizer import EOT_TOKEN, gpt2_encoding
from repro.errors import ReproError
from repro.model import GPT
from repro.runtime.device import precision, resolve_device

N_VOCAB = EOT_TOKEN + 1  # the GPT-2 encoding's tokens: 0..50256


class DownstreamError(ReproError):
    """A task or an option `repro downstream` cannot run."""


@register_model("repro")
class ReproLM(TemplateLM):
    """A GPT, or a checkpoint (ours or the authors'), for lm-eval."""

    def __init__(
        self,
        model: GPT | None = None,
        checkpoint: str | Path | None = None,
        device: str = "auto",
        batch_size: int | str = 16,
    ):
        super().__init__()
        if (model is None) == (checkpoint is None):
            raise DownstreamError("give a model or a checkpoint, not both or neither")
        if model is None:
            from repro.annex.authors.checkpoint import load_any_checkpoint

            model, _, _ = load_any_checkpoint(Path(checkpoint))
        if model.config.vocab_size < N_VOCAB:
            raise DownstreamError(
                f"the model's vocabulary ({model.config.vocab_size}) is smaller than the GPT-2 "
                f"encoding's ({N_VOCAB}): it cannot read text"
            )
        self._device = resolve_device(str(device))
        self.model = model.to(self._device).eval()
        self.batch_size = int(batch_size)
        if self.batch_size < 1:
            raise DownstreamError(f"batch size {batch_size}: must be at least 1")
        self.encoding = gpt2_encoding()

    @property
    def eot_token_id(self) -> int:
        return EOT_TOKEN

    @property
    def max_length(self) -> int:
        return self.model.config.block_size

    def tok_encode(self, string: str, add_special_tokens=None, **kwargs) -> list[int]:
        return self.encoding.encode_ordinary(string)

    def tok_decode(self, tokens: list[int]) -> str:
        return self.encoding.decode(tokens)

    def _loglikelihood_tokens(self, requests, disable_tqdm: bool = False, **kwargs):
        """(log P(continuation | context), is greedy) per request; longest first: less padding."""
        order = sorted(range(len(requests)), key=lambda i: -len(requests[i][1] + requests[i][2]))
        answers = [None] * len(requests)
        for start in range(0, len(order), self.batch_size):
            batch = [requests[i] for i in order[start : start + self.batch_size]]
            for i, answer in zip(order[start : start + self.batch_size], self._score(batch)):
                answers[i] = answer
                if requests[i][0] is not None:
                    self.cache_hook.add_partial("loglikelihood", requests[i][0], answer)
        return answers

    @torch.no_grad()
    def _score(self, batch) -> list[tuple[float, bool]]:
        """One forward pass over a right-padded batch: each continuation's log-probability."""
        inputs = [
            (context + continuation)[-(self.max_length + 1) :][:-1]
            for _, context, continuation in batch
        ]
        width = max(map(len, inputs))
        idx = torch.full((len(batch), width), EOT_TOKEN, dtype=torch.long)
        for row, tokens in enumerate(inputs):
            idx[row, : len(tokens)] = torch.tensor(tokens)
        with precision(self._device):
            logits = self.model(idx.to(self._device))
        logprobs = F.log_softmax(logits.float(), dim=-1).cpu()
        answers = []
        for row, ((_, _, continuation), tokens) in enumerate(zip(batch, inputs)):
            n = min(len(continuation), len(tokens))
            scored = logprobs[row, len(tokens) - n : len(tokens)]
            target = torch.tensor(continuation[-n:])
            logprob = scored.gather(1, target[:, None]).sum().item()
            answers.append((logprob, bool((scored.argmax(-1) == target).all())))
        return answers

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        """log P(text) per request, each token predicted once in lm-eval's rolling windows."""
        windows, owner = [], []
        for i, (text,) in enumerate(request.args for request in requests):
            for window in get_rolling_token_windows(
                self.tok_encode(text), self.prefix_token_id, self.max_length, context_len=1
            ):
                windows.append((None, *make_disjoint_window(window)))
                owner.append(i)
        totals = [0.0] * len(requests)
        for i, (logprob, _) in zip(owner, self._loglikelihood_tokens(windows)):
            totals[i] += logprob
        for request, total in zip(requests, totals):
            self.cache_hook.add_partial("loglikelihood_rolling", request.args, total)
        return totals

    def generate_until(self, requests, disable_tqdm: bool = False):
        raise DownstreamError(
            "generative tasks (output_type generate_until) are not supported: repro downstream "
            "scores log-likelihoods (multiple_choice, loglikelihood, loglikelihood_rolling)"
        )
