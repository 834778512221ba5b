"""`repro generate`: text sampled with the key/value cache from our checkpoints and the authors'."""

import json
import re
from dataclasses import replace

import pytest
import torch
from authors_helpers import write_authors_checkpoint
from conftest import one_line_error

from repro.cli.assembly import main
from repro.config import load_run
from repro.model import next_token
from repro.training.checkpoints import save_checkpoint
from repro.training.loop import make_model, make_optimizer

RUN = load_run("tiny", "resgelu-lr3e-3")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A checkpoint of ours of the tiny residual_gelu model (block size 32), as training writes."""
    model = make_model(RUN, torch.device("cpu"))
    path = tmp_path_factory.mktemp("run") / "ckpt.pt"
    config = {"identity": RUN.identity(), "model": RUN.identity()["model"]}
    save_checkpoint(path, model, make_optimizer(model, RUN, False), 7, config)
    return path


def generate(capsys, *args):
    assert main(["generate", "--device", "cpu", "--json", *map(str, args)]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_same_seed_gives_the_same_text(checkpoint, capsys):
    args = ("--checkpoint", checkpoint, "--prompt", "def main():", "--max-new-tokens", 8)
    first = generate(capsys, *args, "--seed", 3)
    assert first == generate(capsys, *args, "--seed", 3)
    assert (first["format"], first["step"], len(first["tokens"])) == ("repro", 7, 8)
    assert first["tokens"] != generate(capsys, *args, "--seed", 4)["tokens"]
    assert all(t < 50257 for t in first["tokens"])  # never the embedding's padding ids
    # top-k 1 is the most likely token, as temperature 0 is
    greedy = generate(capsys, *args, "--temperature", 0)
    assert greedy["tokens"] == generate(capsys, *args, "--top-k", 1, "--seed", 9)["tokens"]
    assert main(["generate", "--checkpoint", str(checkpoint), "--max-new-tokens", "30"]) == 0
    assert capsys.readouterr().out.strip()  # the text, from <|endoftext|> without a prompt


def varied_model():
    """The tiny model in float64, its weights spread so that its next tokens are not all alike."""
    torch.manual_seed(0)
    model = make_model(RUN, torch.device("cpu")).double().eval()
    for p in model.parameters():
        p.data += 0.3 * torch.randn_like(p)
    return model


@pytest.mark.parametrize("temperature,top_k", [(1.0, None), (0.7, 5), (0, None)])
def test_sampling_with_the_cache_gives_the_tokens_of_full_forwards(temperature, top_k):
    model = varied_model()
    prompt = torch.randint(0, 50257, (2, 5), generator=torch.Generator().manual_seed(1))
    cached = model.generate(
        prompt, 20, temperature, top_k, torch.Generator().manual_seed(5), vocab=50257
    )
    generator, seq = torch.Generator().manual_seed(5), prompt
    with torch.no_grad():
        for _ in range(20):  # no cache: the whole sequence through the model at every token
            token = next_token(model(seq)[:, -1], temperature, top_k, generator, 50257)
            seq = torch.cat([seq, token], dim=1)
    assert torch.equal(cached, seq[:, 5:])
    assert len(set(cached[0].tolist())) > 1


@pytest.mark.parametrize("prompt_tokens", [20, 40])
@pytest.mark.parametrize("temperature", [1.0, 0])
def test_past_the_block_size_the_window_is_the_last_block_size_tokens(prompt_tokens, temperature):
    model, block = varied_model(), RUN.model.block_size  # 32
    prompt = torch.randint(0, 50257, (2, prompt_tokens), generator=torch.Generator().manual_seed(1))
    cached = model.generate(
        prompt, 60, temperature, None, torch.Generator().manual_seed(5), vocab=50257
    )
    generator, seq = torch.Generator().manual_seed(5), prompt
    with torch.no_grad():
        for _ in range(60):  # nanoGPT's sampler: a fresh forward of the last block_size tokens
            token = next_token(model(seq[:, -block:])[:, -1], temperature, None, generator, 50257)
            seq = torch.cat([seq, token], dim=1)
    assert torch.equal(cached, seq[:, prompt_tokens:])


def test_repro_generate_goes_on_past_the_block_size(checkpoint, capsys):
    args = ("--checkpoint", checkpoint, "--prompt", "one two three", "--max-new-tokens", 60)
    assert len(generate(capsys, *args)["tokens"]) == 60  # block size 32


def test_the_authors_checkpoint_generates_too(tmp_path, capsys):
    run = load_run("tiny", "baseline")
    model = make_model(run, torch.device("cpu"))
    write_authors_checkpoint(tmp_path / "ckpt.pt", model, run, 12)
    result = generate(capsys, "--checkpoint", tmp_path / "ckpt.pt", "--max-new-tokens", 32)
    assert (result["format"], result["step"], len(result["tokens"])) == ("authors", 12, 32)


@pytest.mark.parametrize(
    "args,message",
    [
        (("--max-new-tokens", 0), r"--max-new-tokens: 0, from 1 to 100,000"),
        (("--max-new-tokens", 10**9), r"--max-new-tokens: 1000000000, from 1 to 100,000"),
        (("--temperature", -1), r"--temperature: -1.0, a finite number from 0"),
        (("--temperature", "nan"), r"--temperature: nan, a finite number from 0"),
        (("--temperature", "inf"), r"--temperature: inf, a finite number from 0"),
        (("--top-k", 0), r"--top-k: 0, at least 1"),
    ],
)
def test_impossible_requests_are_one_line_errors(checkpoint, capsys, args, message):
    argv = ["generate", "--checkpoint", str(checkpoint), "--prompt", "one two three"]
    one_line_error(capsys, [*argv, "--device", "cpu", *args], message)


def test_a_checkpoint_with_nan_weights_is_one_line_naming_it(tmp_path, capsys):
    model = make_model(RUN, torch.device("cpu"))
    with torch.no_grad():
        model.transformer.h[1].mlp.c_fc.weight[3, 4] = float("nan")
    path = tmp_path / "ckpt.pt"
    config = {"identity": RUN.identity(), "model": RUN.identity()["model"]}
    save_checkpoint(path, model, make_optimizer(model, RUN, False), 7, config)
    message = (
        rf"^repro: error: {re.escape(str(path))}: .*transformer\.h\.1\.mlp\.c_fc\.weight holds NaN"
    )
    one_line_error(capsys, ["generate", "--checkpoint", path, "--device", "cpu"], message)


def test_an_authors_checkpoint_whose_scale_is_nan_is_refused(tmp_path, capsys):
    run = load_run("tiny", "resgelu-lr3e-3")
    path = tmp_path / "ckpt.pt"
    write_authors_checkpoint(path, make_model(run, torch.device("cpu")), run, 12)
    state = torch.load(path, weights_only=True)
    state["model_args"]["scale"] = float("nan")
    torch.save(state, path)
    assert main(["generate", "--checkpoint", str(path), "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert err == f"repro: error: {path}: model_args scale is nan, not a positive number\n"


def test_a_checkpoint_whose_model_configuration_is_not_its_runs_is_refused(tmp_path, capsys):
    """qk_norm turned on in the configuration the model is built from, and weights to match:
    the run's identity, written beside it, says the model had none."""
    run = replace(RUN, model=replace(RUN.model, qk_norm=True))
    model = make_model(run, torch.device("cpu"))
    path = tmp_path / "ckpt.pt"
    config = {"identity": RUN.identity(), "model": run.identity()["model"]}
    save_checkpoint(path, model, make_optimizer(model, RUN, False), 7, config)
    assert main(["generate", "--checkpoint", str(path), "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"repro: error: {path}: ")
    assert "differs from the run's identity in qk_norm" in err, err
