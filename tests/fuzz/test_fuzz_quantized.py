"""Differential fuzzing of quantized layers (tests/fuzz/quantized.py): random QDQ MatMul, Gemm and Conv layers of
8-bit activations and 8-bit or 4-bit weights, which cglow folds into its integer kernels, compiled for each target's
kernel layouts in turn, their C built and run under AddressSanitizer and UBSan and with one gcc and one clang level
of the compiler matrix, against onnxruntime within a quantization step per layer (quantized.py output_steps). GRAPHS
graphs of the fixed seed and GRAPHS of the rotating one, in BATCHES that the test workers share. CGLOW_FUZZ_SEED=N
replays a rotating seed; a failure names its graph and saves the model."""
from __future__ import annotations

import pytest

from tests.fuzz.differential import check_quantized, failed_graphs, reference_case
from tests.fuzz.quantized import LAYERS, random_quantized_graph
from tests.fuzz.seeds import FIXED_SEED, seed
from tests.qdq import folded_ops

GRAPHS = 32  # per seed: 64 a run, about 25 s on two idle cores with a cold cache (46 CPU-seconds)
BATCHES = 4


@pytest.mark.parametrize("batch", range(BATCHES))
@pytest.mark.parametrize("kind", ["fixed", "rotating"])
def test_random_quantized_layers_match_onnxruntime(kind, batch, tmp_path):
    chosen = seed(kind)
    print(f"{kind} seed {chosen}: replay with CGLOW_FUZZ_SEED={chosen}")
    failures = failed_graphs(chosen, range(batch, GRAPHS, BATCHES), lambda index: check_quantized(chosen, index),
                             lambda index: reference_case(chosen, index, random_quantized_graph)[0], tmp_path,
                             "quantized")
    assert not failures, "\n".join(failures) + \
        "\none alone: python -c 'from tests.fuzz.differential import *; print(check_quantized(SEED, INDEX))'"


def test_random_quantized_layers_fold_into_integer_kernels():
    """The fuzzing tests the integer kernels, not the float ops between a dequantize and a quantize map: every layer
    of the fixed seed's graphs folds into IntConv or IntGemm."""
    layers = folded = 0
    for index in range(GRAPHS):
        model, _ = random_quantized_graph(FIXED_SEED, index)
        layers += sum(node.op_type in LAYERS for node in model.graph.node)
        folded += sum(op in ("IntConv", "IntGemm") for op in folded_ops(model))
    assert folded == layers
