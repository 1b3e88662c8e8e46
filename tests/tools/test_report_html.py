"""The HTML report (`emit --report`): rendered by headless Chromium, its elements counted in the DOM it
builds, a screenshot that is a picture; the graph layout and the kernel table checked without a browser."""
from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path
import re
import struct
import subprocess
import zlib

import onnx
from onnx import TensorProto, helper
import pytest

import cglow
from cglow import zoo
from cglow.graph.onnx_import import import_model
from cglow.tools.graph_svg import BOX_H, COL_W, PAD, ROW_H, draw_graph
from cglow.tools.macs import macs
from cglow.tools.memory import analyze_model
from cglow.tools.report import layers

from tests.util import cglow_cmd, need_tool, save


class Elements(HTMLParser):
    """Every start tag with its attributes and the ids of the elements around it."""

    def __init__(self, page: str):
        super().__init__()
        self.found: list[tuple[str, dict, tuple[str, ...]]] = []
        self.open: list[tuple[str, str]] = []
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.found.append((tag, attrs, tuple(i for _, i in self.open if i)))
        self.open.append((tag, attrs.get("id", "")))

    def handle_startendtag(self, tag, attrs):
        self.found.append((tag, dict(attrs), tuple(i for _, i in self.open if i)))

    def handle_endtag(self, tag):
        while self.open and self.open.pop()[0] != tag:
            pass

    def count(self, tag: str, inside: str = "", cls: str = "") -> int:
        return sum(1 for t, attrs, ids in self.found
                   if t == tag and (not inside or inside in ids) and (not cls or attrs.get("class") == cls))


def png_pixels(path: Path) -> tuple[int, int, bytes]:
    """Width, height and the decompressed (still filtered) scanlines of a PNG file."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height = 8, b"", 0, 0
    while pos < len(data):
        (length,), kind = struct.unpack(">I", data[pos:pos + 4]), data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    return width, height, zlib.decompress(idat)


@pytest.fixture(scope="module")
def kws_report(tmp_path_factory):
    folder = tmp_path_factory.mktemp("report")
    path = save(zoo.build("kws"), folder / "kws.onnx")
    result = cglow_cmd("emit", path, "-o", str(folder / "kws.c"), "--report", str(folder / "kws.html"))
    assert result.returncode == 0, result.stderr
    compiled = cglow.compile_model(zoo.build("kws"))
    return folder, compiled, compiled.graph


def chromium(folder: Path, *args: str) -> subprocess.CompletedProcess:
    browser = need_tool("chromium")
    return subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={folder}",
                           *args], capture_output=True, text=True, check=False)


def test_chromium_renders_every_element(kws_report, tmp_path):
    folder, compiled, graph = kws_report
    result = chromium(tmp_path / "profile", "--dump-dom", (folder / "kws.html").as_uri())
    assert result.returncode == 0, result.stderr
    dom = Elements(result.stdout)
    assert dom.count("rect", inside="arena-svg", cls="buffer") == len(compiled.plan.offsets) > 5
    assert dom.count("line", inside="peak") == 1 and re.search(r"peak: \d+ bytes alive", result.stdout)
    assert dom.count("tr", inside="layers-table") == 1 + len(compiled.program.instrs)
    assert dom.count("g", inside="graph-svg", cls="node") == len(graph.nodes) > 10
    assert dom.count("g", inside="graph-svg", cls="input") == 1 and dom.count("path", inside="graph-svg", cls="edge")
    assert dom.count("tr", inside="summary") == 6


def test_chromium_screenshot_is_a_picture(kws_report, tmp_path):
    folder, _, _ = kws_report
    png = tmp_path / "kws.png"
    result = chromium(tmp_path / "profile", f"--screenshot={png}", "--window-size=1400,2000",
                      (folder / "kws.html").as_uri())
    assert result.returncode == 0, result.stderr
    assert png.stat().st_size > 10_000
    width, height, pixels = png_pixels(png)
    assert (width, height) == (1400, 2000)
    assert len(set(pixels)) > 50  # text, boxes and bars in several colours, not one flat colour


def test_page_is_self_contained(kws_report):
    page = (kws_report[0] / "kws.html").read_text()
    assert "<script" not in page and "<link" not in page and "<img" not in page and "@import" not in page
    assert set(re.findall(r"https?://[^\s\"']*", page)) == {"http://www.w3.org/2000/svg"}


def diamond() -> onnx.ModelProto:
    """x -> a -> {b, c} -> d (Add) -> y, and a skip edge a -> d over c's extra step."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="a"),
             helper.make_node("Neg", ["a"], ["b"], name="b"),
             helper.make_node("Exp", ["a"], ["c0"], name="c0"),
             helper.make_node("Abs", ["c0"], ["c"], name="c"),
             helper.make_node("Sum", ["a", "b", "c"], ["y"], name="d")]
    return helper.make_model(helper.make_graph(nodes, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])


def test_layout_rows_and_columns():
    picture = draw_graph(import_model(diamond()))
    where = {b.name: ((b.y - PAD) / ROW_H, (b.x - PAD) / COL_W) for b in picture.boxes if b.kind != "output"}
    assert where == {"x": (0, 0), "a": (1, 0), "b": (2, 0), "c0": (2, 1), "c": (3, 1), "d": (4, 0)}
    (out,) = [b for b in picture.boxes if b.kind == "output"]
    assert (out.name, out.type, (out.y - PAD) / ROW_H) == ("y", "float32[2,3]", 5)
    assert len(picture.edges) == 8
    assert sum("V" in d for d in picture.edges) == 2  # a -> d and b -> d skip a row


def test_layout_of_a_long_chain_grows_linearly():
    n = 400
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])
    names = ["x"] + [f"t{i}" for i in range(n - 1)] + ["y"]
    nodes = [helper.make_node("Add", [names[i], "x"], [names[i + 1]], name=f"n{i}") for i in range(n)]
    graph = import_model(helper.make_model(helper.make_graph(nodes, "g", [x], [y]),
                                           opset_imports=[helper.make_opsetid("", 17)]))
    picture = draw_graph(graph)
    assert len(picture.boxes) == n + 2 and len(picture.edges) == 2 * n
    assert picture.height == 2 * PAD + (n + 1) * ROW_H + BOX_H and picture.width == 2 * PAD + COL_W


def test_kernel_table_counts_macs_and_buffers():
    compiled, report = analyze_model(zoo.build("kws"))
    rows = layers(compiled, report)
    assert [r.index for r in rows] == list(range(len(compiled.program.instrs)))
    assert sum(r.macs for r in rows) == macs(compiled.program) > 0
    conv = rows[0]
    assert (conv.kernel, conv.op, conv.node, conv.out_shape) == ("conv", "Conv", "stem/conv", "[1,64,25,5]")
    assert conv.macs == conv.cost == 64 * 25 * 5 * 10 * 4
    assert conv.offset == str(compiled.plan.offsets[compiled.program.instrs[0].out.buf])
    assert rows[-1].offset == "output (caller)" and rows[-1].nbytes == 12 * 4
    pool = next(r for r in rows if r.kernel == "pool")
    assert (pool.op, pool.macs, pool.cost) == ("AveragePool", 0, 64 * 25 * 5)
