"""A model folder is checked before anything is built from it (repro.annex.models.folder): sizes
beyond bounds, values of the wrong type, a pipe for weights, a tensor of another shape, NaN weights
and a GPT-2 of settings the package's model does not compute are each one line naming the file and
the field; nothing is allocated for sizes the weights do not have."""

import json
import os
import re
import time

import pytest
import safetensors.torch
import torch

from repro.annex.models.hub import load_model, save_model
from repro.config import load_run
from repro.errors import ReproError
from repro.model import GPT

pytest.importorskip("transformers")  # the `hf` extra


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """A GPT-2 folder (the baseline) and one carrying the model's code (residual_gelu), as the
    package writes them."""
    torch.manual_seed(0)
    root = tmp_path_factory.mktemp("folders")
    for name in ("baseline", "resgelu-lr3e-3"):
        save_model(GPT(load_run("tiny", name).model), root / name)
    return root


@pytest.fixture(params=["baseline", "resgelu-lr3e-3"])
def folder(request, folders, tmp_path):
    copy = tmp_path / request.param
    copy.mkdir()
    for path in (folders / request.param).iterdir():
        os.link(path, copy / path.name)
    return copy


def edit_config(folder, **values):
    path = folder / "config.json"
    config = json.loads(path.read_text())
    gpt2 = config["model_type"] == "gpt2"
    names = {"d_model": "n_embd", "block_size": "n_positions"} if gpt2 else {}
    for key, value in values.items():
        if value is None:
            config.pop(names.get(key, key))
        else:
            config[names.get(key, key)] = value
    path.unlink()  # a link to the module's folder
    path.write_text(json.dumps(config))
    return names


def refused(folder, pattern: str) -> str:
    began = time.perf_counter()
    with pytest.raises(ReproError, match=pattern) as caught:
        load_model(folder)
    assert time.perf_counter() - began < 20  # nothing allocated for the sizes stated
    message = str(caught.value)
    assert "\n" not in message and str(folder) in message
    return message


@pytest.mark.parametrize(
    "sizes,field",
    [
        ({"d_model": 65536, "n_layer": 64}, "model.safetensors: weights do not match"),
        ({"vocab_size": 1e9}, "vocab_size: 1000000000.0 is not of type 'integer'"),
        ({"vocab_size": 10**9}, "vocab_size: 1000000000 is greater than the maximum"),
        ({"block_size": 10**12}, "is greater than the maximum of 1048576"),
        ({"n_layer": 10**6}, "n_layer: 1000000 is greater than the maximum of 1024"),
        ({"n_layer": -2}, "n_layer: -2 is less than the minimum of 1"),
        ({"n_head": "2"}, "n_head: '2' is not of type 'integer'"),
        ({"n_layer": None}, "'n_layer' is a required property"),
    ],
)
def test_sizes_are_checked_before_the_model_is_built(folder, sizes, field):
    edit_config(folder, **sizes)
    refused(folder, f"{field}")


def test_a_config_that_is_not_an_object_is_one_line(folder):
    (folder / "config.json").unlink()
    (folder / "config.json").write_text("[1, 2]")
    refused(folder, r"config\.json: \(top level\): \[1, 2\] is not of type 'object'")


def test_weights_that_are_a_named_pipe_are_refused_unread(folder):
    (folder / "model.safetensors").unlink()
    os.mkfifo(folder / "model.safetensors")
    refused(folder, r"model\.safetensors: not a regular file")


def rewrite_weights(folder, edit):
    path = folder / "model.safetensors"
    weights = safetensors.torch.load_file(path)
    edit(weights)
    path.unlink()
    safetensors.torch.save_file(weights, path, metadata={"format": "pt"})


def test_a_tensor_of_another_shape_is_one_line(folder):
    def shorter(weights):
        name = next(n for n in weights if n.endswith("ln_f.weight"))
        weights[name] = weights[name][:-1].clone()

    rewrite_weights(folder, shorter)
    refused(folder, r"model\.safetensors: weight transformer\.ln_f\.weight has shape \(31,\)")


def test_a_tensor_of_integers_is_one_line(folder):
    def integers(weights):
        name = next(n for n in weights if n.endswith("ln_f.weight"))
        weights[name] = weights[name].to(torch.int32)

    rewrite_weights(folder, integers)
    refused(folder, r"ln_f\.weight is I32, not floating-point")


def test_nan_weights_are_refused_as_a_checkpoint_s(folder):
    def nan(weights):
        for name, tensor in weights.items():
            if not name.endswith(".bias"):  # a GPT-2's, zero
                tensor.fill_(torch.nan)

    rewrite_weights(folder, nan)
    refused(folder, r"model\.safetensors: weight \S+ holds NaN or infinite values")


@pytest.mark.parametrize(
    "setting,value",
    [
        ("activation_function", "gelu_new"),
        ("activation_function", None),  # transformers' default: gelu_new
        ("layer_norm_epsilon", 0.5),
        ("scale_attn_by_inverse_layer_idx", True),
        ("scale_attn_weights", False),
        ("reorder_and_upcast_attn", True),
    ],
)
def test_a_gpt2_of_settings_the_package_does_not_compute_is_refused(
    folders, tmp_path, setting, value
):
    folder = tmp_path / "gpt2"
    folder.mkdir()
    for path in (folders / "baseline").iterdir():
        os.link(path, folder / path.name)
    edit_config(folder, **{setting: value})
    message = refused(folder, f"config\\.json: {setting} ")
    assert "the package's model implements only" in message


def test_the_folders_as_written_load(folder):
    assert isinstance(load_model(folder), GPT)


def tied_pair(weights) -> tuple[str, str]:
    """The file's names of the tied embedding and of the output layer it also is."""
    (embedding,) = [name for name in weights if name.endswith("transformer.wte.weight")]
    return embedding, embedding.replace("transformer.wte.weight", "lm_head.weight")


def test_two_halves_of_a_tied_pair_that_differ_are_refused(folder):
    """transformers keeps a file's two halves apart; one tensor cannot be both."""

    def both(weights):
        embedding, head = tied_pair(weights)
        weights[head] = torch.randn_like(weights[embedding])

    rewrite_weights(folder, both)
    message = refused(
        folder, r"model\.safetensors: transformer\.wte\.weight and lm_head\.weight differ"
    )
    assert "ties them" in message


def test_two_equal_halves_of_a_tied_pair_load(folder):
    written = load_model(folder)

    def both(weights):
        embedding, head = tied_pair(weights)
        weights[head] = weights[embedding].clone()

    rewrite_weights(folder, both)
    model = load_model(folder)
    assert model.lm_head.weight is model.transformer.wte.weight
    tokens = torch.arange(16)[None]
    assert torch.equal(model(tokens), written(tokens))


@pytest.mark.parametrize("name", ["lm_head.bias", "transformer.h.0.attn.q_proj.bias"])
def test_a_bias_gpt2_has_not_is_refused_naming_it(folders, tmp_path, name):
    """transformers warns of an unexpected key and leaves it unused; the package refuses it, as
    it refuses any weight the model has not: a file of other names is another model."""
    folder = tmp_path / "gpt2"
    folder.mkdir()
    for path in (folders / "baseline").iterdir():
        os.link(path, folder / path.name)

    def extra(weights):
        weights[name] = torch.zeros(8)

    rewrite_weights(folder, extra)
    refused(folder, rf"model\.safetensors: weights do not match .*unexpected: {re.escape(name)}")


@pytest.mark.parametrize("file", ["config.json", "model.safetensors"])
def test_a_file_that_is_a_link_to_itself_is_one_line_saying_so(folder, file):
    (folder / file).unlink()
    (folder / file).symlink_to(file)
    refused(folder, rf"{re.escape(file)}: a symbolic link loop")


def test_weights_that_are_a_dangling_link_are_one_line_naming_its_target(folder):
    (folder / "model.safetensors").unlink()
    (folder / "model.safetensors").symlink_to("elsewhere.safetensors")
    refused(folder, r"model\.safetensors: no such file \(a symbolic link to elsewhere\.")
