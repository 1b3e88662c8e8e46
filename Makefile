# The two commands of the README: `make example` (the main job) and `make test` (the test suite).
PYTHON ?= python3
PIP = $(PYTHON) -m pip --disable-pip-version-check -q

.PHONY: example test quick docs report bench bench-mcu bench-memory compilers size install install-test

example: install
	$(PYTHON) -m cglow example

test: install-test
	$(PYTHON) -m pytest -n 2 -q -p no:benchmark

quick: install-test  # without the slow suites (tests/conftest.py SLOW) and with a sample of each parametrized test: an edit-test loop
	$(PYTHON) -m pytest -n 2 -q -p no:benchmark -m "not slow"

docs: install-test  # the generated reference pages: docs/options.md, docs/ops.md and docs/coverage.md (the ONNX node suite)
	$(PYTHON) -m cglow.docs_gen docs
	$(PYTHON) -m cglow.tools.coverage docs/coverage.md

report: install-test
	$(PYTHON) scripts/zoo_report.py

bench: install-test
	$(PYTHON) scripts/bench.py

bench-mcu: install-test
	$(PYTHON) scripts/bench_mcu.py
	$(PYTHON) scripts/bench_mcu.py --int8
	$(PYTHON) scripts/bench_mcu.py --int8 onnxruntime
	$(PYTHON) scripts/bench_mcu.py --int8 --target cortex-m7 kws vww resnet8 autoencoder
	$(PYTHON) scripts/bench_mcu.py --target cortex-m4-clang --against cortex-m4 kws vww resnet8 autoencoder
	$(PYTHON) scripts/bench_mcu.py --int8 --target cortex-m4-clang --against cortex-m4 kws vww resnet8 autoencoder

bench-memory: install-test
	$(PYTHON) scripts/bench_memory.py

compilers: install-test  # the zoo under every compiler and level of cglow/tools/matrix.py
	$(PYTHON) scripts/compiler_matrix.py

size: install-test
	$(PYTHON) scripts/size_mcu.py

install:
	$(PIP) install -e .

install-test:
	$(PIP) install -e '.[test]'
	bash scripts/install-tools.sh
