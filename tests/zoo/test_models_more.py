"""The larger and recurrent zoo models (MobileNetV2, U-Net, GRU, bidirectional GRU and LSTM keyword spotters,
Inception, GoogLeNet, the EfficientNet-style network) are valid, deterministic ONNX, and cglow's C matches
onnxruntime on them."""
from __future__ import annotations

import onnx
import pytest

from cglow import zoo

from tests.util import assert_shapes_agree_with_onnx, cglow_run, ort_run, random_feeds, rel_error

TOLERANCE = 1e-4  # of the output's scale

# MobileNetV2's C is 55 MB (3.5M weights): emitting and building it takes ~25 s with a cold cache, so its run
# against onnxruntime is marked slow: `make test` runs it, `make quick` does not.
MODELS = ["mobilenetv2", "unet", "gru_kws", "bigru_kws", "lstm_kws", "inception", "googlenet", "efficientnet"]


@pytest.mark.parametrize("name", MODELS)
def test_builder_is_valid_and_deterministic(name):
    model = zoo.build(name)
    onnx.checker.check_model(model, full_check=True)
    assert model.SerializeToString() == zoo.build(name).SerializeToString()
    assert [v.name for v in model.graph.input] == ["input"]
    assert [v.name for v in model.graph.output] == ["output"]


@pytest.mark.parametrize("name", [pytest.param(m, marks=pytest.mark.slow) if m == "mobilenetv2" else m for m in MODELS])
def test_matches_onnxruntime(name):
    model = zoo.build(name)
    feeds = random_feeds(model, seed=1)
    got = cglow_run(model, feeds)
    want = ort_run(model, feeds)
    assert len(got) == len(want) == 1
    assert rel_error(got[0], want[0]) <= TOLERANCE
    assert_shapes_agree_with_onnx(model)
