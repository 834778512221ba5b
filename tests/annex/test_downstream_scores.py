"""lm-evaluation-harness's requests scored by ReproLM are the model's own log-probabilities,
checked against a direct computation: batched or one at a time, a context longer than the block,
rolling windows, the authors' checkpoint through the same path; lm-eval's entry point names
ReproLM."""

import pytest
import torch
import torch.nn.functional as F
from authors_helpers import write_authors_checkpoint
from config_helpers import pyproject
from model_helpers import small

from repro.config import load_run
from repro.data.tokenizer import EOT_TOKEN, gpt2_encoding
from repro.model import GPT

# Not on a GPU node (no lm-eval there): `pytest -m gpu` still collects this module.
pytest.importorskip("lm_eval")
from lm_eval.api.instance import Instance  # noqa: E402 (after the skip above)
from lm_eval.api.registry import Registry  # noqa: E402

from repro.annex.downstream.model import ReproLM  # noqa: E402


def direct_logprob(model: GPT, context: list[int], continuation: list[int]) -> float:
    tokens = torch.tensor([context + continuation])
    with torch.no_grad():
        logprobs = F.log_softmax(model(tokens[:, :-1]).float(), dim=-1)[0]
    targets = tokens[0, len(context) :]
    return logprobs[len(context) - 1 :].gather(1, targets[:, None]).sum().item()


def requests(kind, *args):
    return [Instance(kind, {}, a, i) for i, a in enumerate(args)]


def test_loglikelihood_is_the_models_own(tmp_path):
    model, encode = small("linear").eval(), gpt2_encoding().encode_ordinary
    pairs = [("The cat sat on the", " mat"), ("One, two,", " three, four"), ("", "Hello there")]
    scores = ReproLM(model=model, batch_size=2).loglikelihood(requests("loglikelihood", *pairs))
    for (context, continuation), (score, _) in zip(pairs, scores):
        whole = encode(context + continuation)
        context_tokens = encode(context) if context else [EOT_TOKEN]
        expected = direct_logprob(model, context_tokens, whole[len(encode(context)) :])
        assert score == pytest.approx(expected, abs=1e-4)
    # one at a time (no padding) gives the same numbers as batches of two
    alone = ReproLM(model=model, batch_size=1).loglikelihood(requests("loglikelihood", *pairs))
    assert [s for s, _ in alone] == pytest.approx([s for s, _ in scores], abs=1e-4)


def test_a_context_longer_than_the_block_keeps_its_last_tokens():
    model, encode = small("linear").eval(), gpt2_encoding().encode_ordinary
    context = " ".join(str(i) for i in range(40))  # far more than 16 tokens
    ((score, _),) = ReproLM(model=model).loglikelihood(requests("loglikelihood", (context, " 40")))
    tokens = encode(context + " 40")
    kept = tokens[-(model.config.block_size + 1) :]
    assert score == pytest.approx(direct_logprob(model, kept[:-1], kept[-1:]), abs=1e-4)


def test_loglikelihood_rolling_predicts_every_token_once():
    model, encode = small("linear").eval(), gpt2_encoding().encode_ordinary
    short = "A short text."
    long = "word " * 50  # several windows of 16 tokens
    lm = ReproLM(model=model, batch_size=3)
    short_score, long_score = lm.loglikelihood_rolling(
        requests("loglikelihood_rolling", (short,), (long,))
    )
    assert short_score == pytest.approx(direct_logprob(model, [EOT_TOKEN], encode(short)), abs=1e-4)
    # lm-eval's rolling windows: each token scored once, from the tokens before it in its block
    # (the first block after the end-of-text token; the last block filled from the one before)
    tokens, block = [EOT_TOKEN] + encode(long), model.config.block_size
    last = len(tokens) - 1 - block
    full_blocks = (len(tokens) - 1) // block * block
    expected = sum(
        direct_logprob(
            model,
            tokens[(i - 1) // block * block if i <= full_blocks else last : i],
            [tokens[i]],
        )
        for i in range(1, len(tokens))
    )
    assert long_score == pytest.approx(expected, rel=1e-3)


def test_lm_eval_s_entry_point_for_models_names_repro_lm():
    """pyproject.toml's lm_eval.models entry point, resolved as lm-eval's registry resolves one."""
    target = pyproject()["project"]["entry-points"]
    registry = Registry("model")
    registry.register("repro", target=target["lm_eval.models"]["repro"])
    assert registry.get("repro") is ReproLM


def test_the_authors_checkpoint_through_the_same_path(tmp_path):
    run = load_run("tiny", "resgelu-lr3e-3")
    torch.manual_seed(1)
    model = GPT(run.model).eval()
    write_authors_checkpoint(tmp_path / "ckpt.pt", model, run, iter_num=12)
    lm = ReproLM(checkpoint=tmp_path / "ckpt.pt")
    pair = ("Count: 3, then", " 4")
    ((score, _),) = lm.loglikelihood(requests("loglikelihood", pair))
    encode = gpt2_encoding().encode_ordinary
    assert score == pytest.approx(
        direct_logprob(model, encode(pair[0]), encode(pair[0] + pair[1])[len(encode(pair[0])) :]),
        abs=1e-4,
    )
