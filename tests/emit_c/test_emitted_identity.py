"""The emitted C of every zoo model, float and int8, for three targets, is byte for byte the C that
tests/data/emitted_hashes.json records: a refactoring must not change it unnoticed. Where a change is meant,
regenerate the fixture (`python3 -m tests.emitted_hashes`) and say why in the commit."""
from __future__ import annotations

import json

import pytest

from cglow import zoo
from tests.emitted_hashes import FIXTURE, hashes


@pytest.mark.parametrize("name", list(zoo.MODELS))
def test_emitted_c_is_unchanged(name):
    assert hashes(name) == json.loads(FIXTURE.read_text())[name], \
        f"the C emitted for {name} changed: if that is meant, run python3 -m tests.emitted_hashes and say why"
