"""The tools around the compiler, for its users and its developers: running the generated C on the host
(host, harness) and on cross targets under QEMU (cross, targets, tb_profile, m4_cycles, thumb), checking it
against a reference runtime (check, reference, trace), timing it (bench), the model's facts and memory (info,
memory, macs, code_size, report, graph_svg), the IR dumps and progress of `cglow emit`, the bundled example,
the compiler matrix and the ONNX backend of the conformance tests. The compiler's packages never import them
(tests/cli/test_layers.py)."""
