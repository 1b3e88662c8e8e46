"""Whole models (the MLPerf Tiny shapes and a transformer encoder) against onnxruntime through the cffi build
(tests/tools/test_compilers.py builds every zoo model with a plain C main under each compiler and level)."""
from __future__ import annotations

from functools import lru_cache

import pytest

import cglow
from cglow import zoo

from tests.util import assert_shapes_agree_with_onnx, ort_run, random_feeds, rel_error

MODELS = ["autoencoder", "kws", "resnet8", "transformer", "vww"]  # the spine's five; more in test_models_more
TOLERANCE = 1e-4  # of the output's scale


@lru_cache(maxsize=None)
def compiled(name: str):
    model = zoo.build(name)
    feeds = random_feeds(model, seed=1)
    return model, feeds, cglow.compile_model(model)


@pytest.mark.parametrize("name", MODELS)
def test_matches_onnxruntime(name):
    model, feeds, c = compiled(name)
    assert_shapes_agree_with_onnx(model)
    got = cglow.build(c)(*(feeds[t.name] for t in c.inputs))
    want = ort_run(model, feeds)
    for g, w in zip(got, want):
        assert rel_error(g, w) <= TOLERANCE


@pytest.mark.parametrize("name", MODELS)
def test_emission_is_deterministic(name):
    model, _, c = compiled(name)
    again = cglow.compile_model(zoo.build(name))
    assert (again.c_source, again.h_source) == (c.c_source, c.h_source)
