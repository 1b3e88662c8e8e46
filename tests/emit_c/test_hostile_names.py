"""Names are data: node, tensor and graph names, doc strings and metadata holding comment ends, line breaks,
quotes, #include lines, trigraphs, non-ASCII text and 10 000 characters compile to C that builds under the
strict flags, computes what onnxruntime computes, and holds no model text outside escaped comments."""
from __future__ import annotations

from pathlib import Path
import re
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto as T, helper, numpy_helper

import cglow
from cglow.tools.host import STRICT_FLAGS, check_warnings

from tests.util import need_tool, ort_run, random_feeds

HOSTILE = ["*/ int evil; /*", "\n#include <stdio.h>\n", '"); system("rm -rf /"); ("', "back\\slash ??/",
           "// rest of line", "ñandú 東京 \u2028 😀 \x85", "tab\tand\rreturn", "\x00nul", "A" * 10_000]


def hostile(k: int) -> str:
    """A different hostile name for each k, all carrying the marker EVIL."""
    return f"{HOSTILE[k % len(HOSTILE)]} EVIL{k} {HOSTILE[(k + 3) % len(HOSTILE)]}"


def hostile_model() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    x, w, b, c, r, p, f, m, y, z, two = (hostile(k) for k in range(11))
    inits = [numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), w),
             numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), b),
             numpy_helper.from_array(rng.standard_normal((4, 5)).astype(np.float32), m)]
    nodes = [helper.make_node("Conv", [x, w, b], [c], name=hostile(20), pads=[1, 1, 1, 1], doc_string=hostile(30)),
             helper.make_node("Relu", [c], [r], name=hostile(21)),
             helper.make_node("Constant", [], [two], name=hostile(22),
                              value=numpy_helper.from_array(np.array(2.0, np.float32))),
             helper.make_node("GlobalAveragePool", [r], [p], name=hostile(23)),
             helper.make_node("Flatten", [p], [f], name=hostile(24)),
             helper.make_node("MatMul", [f, m], [y], name=hostile(25)),
             helper.make_node("Mul", [r, two], [z], name=hostile(26))]
    graph = helper.make_graph(nodes, hostile(40), [helper.make_tensor_value_info(x, T.FLOAT, [1, 3, 6, 6])],
                              [helper.make_tensor_value_info(y, T.FLOAT, [1, 5]),
                               helper.make_tensor_value_info(z, T.FLOAT, [1, 4, 6, 6])], inits,
                              doc_string=hostile(41))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8,
                              producer_name=hostile(42), doc_string=hostile(43))
    helper.set_model_props(model, {hostile(44): hostile(45), "key": hostile(46)})
    return model


def test_hostile_names_stay_data(tmp_path):
    model = hostile_model()
    onnx.save(model, str(tmp_path / "model.onnx"))
    result = subprocess.run([sys.executable, "-m", "cglow", "emit", str(tmp_path / "model.onnx"), "-o",
                             str(tmp_path / "out" / "net-1.c"), "--report", str(tmp_path / "plan.html")],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    sources = {name: (tmp_path / "out" / name).read_text() for name in ("net-1.c", "net-1.h")}
    for text in sources.values():
        assert text.isascii()
        comments = re.findall(r"/\*.*?\*/", text, flags=re.S)
        code = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
        assert "EVIL" not in code and "/*" not in code and "*/" not in code and "//" not in code
        assert all("\n" not in c for c in comments if "EVIL" in c)
        assert sum("EVIL" in c for c in comments)  # the names are there, escaped: the C stays readable
    assert "#include <stdio.h>" not in "".join(sources.values())
    assert '#include "net-1.h"' in sources["net-1.c"]
    for cc in ("gcc", "clang"):
        check_warnings(sources, need_tool(cc), STRICT_FLAGS)
    html = (tmp_path / "plan.html").read_text()
    assert "EVIL" in html and "<stdio.h>" not in html and "&lt;stdio.h&gt;" in html


def test_hostile_names_compute_what_onnxruntime_computes():
    model = hostile_model()
    feeds = random_feeds(model)
    got = cglow.build(cglow.compile_model(model))(*feeds.values())
    for g, want in zip(got, ort_run(model, feeds), strict=True):
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-5)


def test_symbol_prefix_and_file_names(tmp_path):
    """--name is made an identifier; a file name that cannot be #included as is is refused."""
    onnx.save(hostile_model(), str(tmp_path / "model.onnx"))
    run = [sys.executable, "-m", "cglow", "emit", str(tmp_path / "model.onnx"), "-o"]
    named = subprocess.run(run + [str(tmp_path / "net.c"), "--name", '2 */ "x"'], capture_output=True, text=True)
    assert named.returncode == 0, named.stderr
    assert "int m_2_____x__run(" in Path(tmp_path / "net.h").read_text()
    bad = subprocess.run(run + [str(tmp_path / 'a "b".c')], capture_output=True, text=True)
    assert bad.returncode == 2 and len(bad.stderr.splitlines()) == 1 and "letters, digits" in bad.stderr
    assert not (tmp_path / 'a "b".c').exists()
