"""An exported model in transformers, offline, for each query mode and option at the tiny preset:
transformers' logits are repro's (fp32, 1e-5 relative), its tokenizer is the GPT-2 encoding, its
greedy text is `repro generate`'s and its loss on the evaluation sequences is `repro evaluate`'s.
GPT-2's own query (the baseline, the MLP-widened controls) loads as a plain GPT2LMHeadModel, every
other model through the code it carries (trust_remote_code)."""

import json

import pytest
import torch
import torch.nn.functional as F
from conftest import write_our_checkpoint

from repro.annex.models.hub import load_model, save_model
from repro.cli.assembly import main
from repro.config import load_preset, load_run
from repro.data.batches import Batches
from repro.data.tokenizer import EOT_TOKEN, gpt2_encoding
from repro.model import GPT
from repro.training.evaluation import evaluate

pytest.importorskip("transformers")  # the `hf` extra
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402 (after the skip)

GPT2 = ("baseline", "mlp4.75", "untied-mlp3.5")
OTHERS = (
    "identity",
    "resgelu-lr3e-3",
    "residual-linear",
    "bottleneck-linear-lr3e-3",
    "baseline-qknorm",
    "baseline-gate-headwise",
    "baseline-gate-elementwise",
    "untied-identity-mlp4.5",  # query_scale 0.5, untied embeddings
)
TEXT = "The nonlinear query of each head attends"


@pytest.fixture(scope="module", params=GPT2 + OTHERS)
def exported(request, tmp_path_factory):
    """(experiment, repro's model, its checkpoint, the folder it is exported to, transformers'
    model loaded from that folder)."""
    name = request.param
    torch.manual_seed(0)
    model = GPT(load_run("tiny", name).model).eval()
    root = tmp_path_factory.mktemp(name)
    checkpoint = write_our_checkpoint(root / "ckpt.pt", model, step=0)
    save_model(model, root / "model")  # what `repro export` writes, its card aside
    hf = AutoModelForCausalLM.from_pretrained(root / "model", trust_remote_code=name not in GPT2)
    return name, model, checkpoint, root / "model", hf


def test_transformers_computes_repro_s_logits(exported):
    name, model, _, folder, hf = exported
    assert type(hf).__name__ == ("GPT2LMHeadModel" if name in GPT2 else "ReproForCausalLM")
    assert (folder / "modeling_repro.py").exists() == (name not in GPT2)
    tied = hf.get_output_embeddings().weight is hf.get_input_embeddings().weight
    assert tied == model.config.tie_embeddings
    ids = torch.tensor([gpt2_encoding().encode_ordinary(TEXT) * 3])
    with torch.no_grad():
        ours, theirs = model(ids), hf(ids).logits
    torch.testing.assert_close(theirs, ours, rtol=1e-5, atol=1e-5 * ours.abs().max().item())
    back = load_model(folder)  # and repro reads the folder back, bit for bit
    assert all(torch.equal(back.state_dict()[k], t) for k, t in model.state_dict().items())


@pytest.mark.parametrize("exported", ["baseline", "identity"], indirect=True)
def test_the_folder_s_tokenizer_is_the_gpt2_encoding(exported):
    """Every model's tokenizer files are the same but for the block size (save_tokenizer): read
    where the folder is GPT-2's own and where it carries code (its config names the code)."""
    name, _, _, folder, _ = exported
    tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=name not in GPT2)
    text = TEXT + " <|endoftext|> é\n\n  x"
    assert tokenizer(text).input_ids == gpt2_encoding().encode(text, allowed_special="all")
    assert tokenizer.eos_token_id == EOT_TOKEN


def test_greedy_generate_is_repro_generate_s(exported, capsys):
    _, _, checkpoint, folder, hf = exported
    argv = ["generate", "--checkpoint", str(checkpoint), "--prompt", TEXT, "--temperature", "0"]
    assert main([*argv, "--max-new-tokens", "12", "--json"]) == 0
    ours = json.loads(capsys.readouterr().out)["tokens"]
    ids = torch.tensor([gpt2_encoding().encode_ordinary(TEXT)])
    theirs = hf.generate(ids, max_new_tokens=12, do_sample=False)[0, ids.shape[1] :].tolist()
    # transformers stops at the end-of-text token (generation_config.json), repro samples on
    assert theirs == ours[: len(theirs)] and (len(theirs) == 12 or theirs[-1] == EOT_TOKEN)


def test_repro_evaluate_s_loss_from_the_transformers_model(exported, token_dir, tiny_indices):
    _, _, checkpoint, _, hf = exported
    preset = load_preset("tiny")
    result = evaluate(checkpoint, preset, token_dir, tiny_indices, device="cpu")
    batches = Batches.open(token_dir, tiny_indices, preset)
    for stream in ("eval_train", "eval_val"):
        losses = []
        for k in range(preset.train.eval_batches):
            x, y = batches.get(stream, result["row"], k)
            with torch.no_grad():
                logits = hf(x).logits
            losses.append(F.cross_entropy(logits.flatten(0, 1), y.flatten()).item())
        mean = sum(losses) / len(losses)
        assert mean == pytest.approx(result[f"{stream}_loss"], rel=1e-5), stream
