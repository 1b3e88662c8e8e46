"""The documentation against the code: the generated pages (docs/options.md, docs/ops.md) are current, the C API
reference names everything a generated header holds, the tutorial's main.c builds with the strict flags and
classifies as the model does, and every link between the Markdown files leads somewhere."""
from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import numpy as np
import onnx
import pytest

import cglow
from cglow import cli
from cglow import docs_gen
from cglow.graph.control_flow import CONTROL_FLOW
from cglow.graph.quant.qoperator import QOPERATORS
from cglow.graph.registry import onnx_ops
from cglow.graph.tflite.build import TRANSLATORS
from cglow.tools.host import STRICT_FLAGS
from cglow.options import Options
from cglow.quantize import load_calibration, quantize_model

from tests.small_cnn import calibration, small_cnn
from tests.util import ROOT, need_target, need_tool, nonzero_model

DOCS = ROOT / "docs"


def fenced(text: str, language: str) -> list[str]:
    """The bodies of the text's ``` blocks in that language."""
    return re.findall(rf"^```{language}\n(.*?)^```", text, re.DOTALL | re.MULTILINE)


@pytest.mark.parametrize("page", sorted(docs_gen.PAGES))
def test_generated_page_is_current(page):
    committed = (DOCS / page).read_text() if (DOCS / page).exists() else ""
    assert committed == docs_gen.PAGES[page](), f"docs/{page} is out of date: run {docs_gen.REGENERATE}"


def test_ops_page_rows():
    onnx_part, tflite_part = docs_gen.render_ops().split("## TFLite builtins")
    rows = {line.split(" | ")[0][2:]: line.split(" | ")[1:] for line in onnx_part.splitlines()
            if re.match(r"\| [A-Z]", line)}
    assert set(rows) == set(onnx_ops()) | set(QOPERATORS) | set(CONTROL_FLOW)
    builtins = {line.split(" | ")[0][2:] for line in tflite_part.splitlines() if re.match(r"\| [A-Z]", line)}
    assert builtins == set(TRANSLATORS) and "CONV_2D" in builtins
    assert rows["Conv"][:3] == ["ai.onnx", "11-28", "float32"] and rows["Conv"][3].startswith("integer kernel")
    assert rows["Gelu"][1] == "20-28" and "table" in rows["Gelu"][3]
    assert rows["Add"][2] == "as ONNX"
    assert rows["MaxPool"][2] == rows["Resize"][2] == "float32, 8-bit"  # quantized models pool and resize int8
    assert rows["QLinearAdd"][:2] == ["com.microsoft", "any"]
    assert "compile time" in rows["Shape"][4]
    assert "constant inputs: k" in rows["TopK"][4] and "constant inputs: roi, scales, sizes" in rows["Resize"][4]
    assert "with a non-zero ratio (random) is not supported" in rows["Dropout"][4]
    assert "unrolled, up to 4096 copied nodes" in rows["Loop"][4] and "both branches" in rows["If"][4]


def test_options_page_has_every_option():
    text = docs_gen.render_options()
    parser = cli.build_parser()
    (commands,) = [a for a in parser._actions if a.dest == "command"]
    for name, sub in commands.choices.items():
        section = text.split(f"\n## cglow {name}\n", 1)[1].split("\n## ", 1)[0]
        for action in sub._actions:
            for flag in action.option_strings if action.dest != "help" else ():
                assert f"`{flag}`" in section, (name, flag)
    assert "| `--align` | `BYTES` | alignment of every buffer in the arena, NET_ARENA_ALIGN (default: 16;" in text
    assert "(required)" in text.split("`-o`, `--output`", 1)[1].splitlines()[0]


@pytest.fixture(scope="module")
def model_files(tmp_path_factory) -> Path:
    """The tutorial's network and calibration inputs, as model.onnx and calib.npz in a folder of their own."""
    folder = tmp_path_factory.mktemp("tutorial")
    onnx.save(small_cnn(), folder / "model.onnx")
    np.savez(folder / "calib.npz", **calibration())
    return folder


def header_names(header: str, prefix: str) -> set[str]:
    """The macros and functions a header defines or declares, with the prefix as NET_/net_ and indices as i."""
    code = re.sub(r"/\*.*?\*/", "", header, flags=re.DOTALL)
    names = set(re.findall(r"#define (\w+)", code)) | set(re.findall(r"(\w+)\([^()]*\);", code))
    names = {re.sub(rf"^{prefix.upper()}_", "NET_", re.sub(rf"^{prefix}_", "net_", n)) for n in names}
    return {re.sub(r"_\d+(?=_|$)", "_i", n) for n in names}


def test_c_api_documents_every_header_name(model_files, monkeypatch):
    monkeypatch.chdir(model_files)
    variants = [[], ["--int8", "--calib", "calib.npz"], ["--caller-arena"], ["--io-in-arena"],
                ["--io-in-arena", "--caller-arena"], ["--weights-file", "out/w.bin"]]
    names = set()
    onnx.save(nonzero_model(), "nonzero.onnx")  # an output of run-time length
    variants += [["nonzero.onnx"], ["nonzero.onnx", "--io-in-arena"]]
    for n, options in enumerate(variants):
        model = [] if options and options[0] == "nonzero.onnx" else ["model.onnx"]
        assert cli.main(["emit", *model, *options, "-o", f"out/kws{n}.c"]) == 0
        names |= header_names(Path(f"out/kws{n}.h").read_text(), f"kws{n}")
    expected = {"NET_H", "NET_INPUT_i_SCALE", "NET_OUTPUT_i_ZERO_POINT", "NET_WEIGHTS_ALIGN", "NET_INPUT_i_OFFSET",
                "net_input_i", "net_output_i", "net_run", "NET_OUTPUT_i_CAPACITY", "net_output_i_count"}
    assert expected <= names
    documented = set(re.findall(r"\w+", (DOCS / "c-api.md").read_text()))
    assert not names - documented, f"docs/c-api.md does not document {sorted(names - documented)}"


@pytest.fixture(scope="module")
def tutorial_project(model_files, tmp_path_factory) -> Path:
    """The tutorial's `cglow emit` command run in a folder with its model.onnx and calib.npz, and its main.c
    written to Core/Src/main.c."""
    tutorial = (DOCS / "tutorial.md").read_text()
    assert all(layer in fenced(tutorial, "python")[0] for layer in
               ("nn.Conv2d(1, 8, 3, padding=1)", "nn.Conv2d(8, 16, 3, padding=1)", "nn.Linear(16 * 7 * 7, 10)",
                "torch.zeros(1, 1, 28, 28)"))  # the network tests/small_cnn.py builds
    (emit,) = [line for block in fenced(tutorial, "sh") for line in block.splitlines()
               if line.startswith("cglow emit model.onnx -o Core/Net/net.c")]
    (main_c,) = [block for block in fenced(tutorial, "c") if block.startswith("/* Core/Src/main.c")]
    folder = tmp_path_factory.mktemp("project")
    for name in ("model.onnx", "calib.npz"):
        (folder / name).write_bytes((model_files / name).read_bytes())
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        assert cli.main(shlex.split(emit)[1:]) == 0
    (folder / "Core" / "Src").mkdir(parents=True)
    (folder / "Core" / "Src" / "main.c").write_text(main_c)
    return folder


def expected_class(folder: Path) -> int:
    """The class of the highest score of the int8 model on main.c's test pattern, through Python: the image
    quantized as main.c does it, and the same C (the header compared) built as a shared library."""
    model = quantize_model(onnx.load(folder / "model.onnx"),
                           load_calibration(folder / "calib.npz", onnx.load(folder / "model.onnx")))
    compiled = cglow.compile_model(model, name="net", options=Options(target="cortex-m4", align=4))
    header = (folder / "Core" / "Net" / "net.h").read_text()
    assert compiled.h_source.split("\n", 1)[1] == header.split("\n", 1)[1]  # line 1 names the source
    scale, zero = (re.search(rf"#define NET_INPUT_0_{m} (\S+)", header).group(1) for m in ("SCALE", "ZERO_POINT"))
    image = (np.arange(28 * 28) % 28).astype(np.float32) / np.float32(27)
    q = np.clip(np.rint(image / np.float32(scale.rstrip("f"))) + int(zero), -128, 127).astype(np.int8)
    (scores,) = cglow.build(compiled)(q.reshape(1, 1, 28, 28))
    assert scores.dtype == np.int8 and scores.max() > scores.min()
    return int(np.argmax(scores))


def build_and_run(folder: Path, cc: str, flags: list[str], image: str, run_command: list[str]) -> int:
    """main.c and net.c built with the strict flags (no message at all), run: main's exit status."""
    sources = ["-ICore/Net", "Core/Src/main.c", "Core/Net/net.c"]
    build = subprocess.run([cc, "-O2", *STRICT_FLAGS, *flags, *sources, "-lm", "-o", image], check=False,
                           cwd=folder, capture_output=True, text=True)
    assert build.returncode == 0 and not build.stderr, build.stderr
    return subprocess.run(run_command, check=False, cwd=folder, capture_output=True, timeout=120).returncode


def test_tutorial_main_classifies_on_the_host(tutorial_project):
    cc = need_tool("cc")
    got = build_and_run(tutorial_project, cc, [], "classify", ["./classify"])
    assert got == expected_class(tutorial_project)


def test_tutorial_main_classifies_on_cortex_m4(tutorial_project):
    """The same main.c and net.c for a Cortex-M4F (picolibc, semihosting) under QEMU: main's return value
    comes back as QEMU's exit status."""
    m4 = need_target("cortex-m4")
    got = build_and_run(tutorial_project, m4.cc, [*m4.cflags, *m4.ldflags], "classify.elf", m4.command("classify.elf"))
    assert got == expected_class(tutorial_project)


def slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_links_lead_somewhere():
    pages = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted(DOCS.glob("*.md"))]
    checked = 0
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if re.match(r"\w+:", target):
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            assert linked.exists(), f"{page.name}: link to {target}: no such file"
            if anchor:
                headings = re.findall(r"^#+ (.*)$", linked.read_text(), re.MULTILINE)
                assert anchor in {slug(h) for h in headings}, f"{page.name}: link to {target}: no such heading"
            checked += 1
    assert checked >= 10
