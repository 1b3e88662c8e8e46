"""Ops that cglow has no lowering of, but whose ONNX schema defines them as a function of other ops (a function
body: NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss, Swish, RMSNormalization, ...): before import, each such
node is replaced by its body, its attributes substituted and its inner values renamed apart, at the model's opset
(onnx.version_converter converts a body written for another), so that the ops it is made of compile it. A body
that uses another such op is expanded in turn, up to DEPTH times."""
from __future__ import annotations

import onnx
from onnx import helper, version_converter

from .inferred import value_types

DEPTH = 4
DOMAINS = ("", "ai.onnx", "ai.onnx.preview")  # the default domain and the preview one (FlexAttention)
SHAPE_INPUTS = {"CenterCropPad": (1,)}  # the inputs their bodies need as constants (a shape)


def expand_functions(model: onnx.ModelProto, known: set[str], opset: int) -> onnx.ModelProto:
    """The model with every node of the default domain whose op is not in `known` and whose schema has a function
    body at `opset` replaced by that body; and every node of the preview domain whose schema has one at the
    model's version of that domain."""
    versions = {o.domain or "": o.version for o in model.opset_import}
    versions[""] = versions["ai.onnx"] = opset
    for _ in range(DEPTH):
        types = None
        nodes, changed = [], False
        for i, node in enumerate(model.graph.node):
            at = versions.get(node.domain, 1)
            if node.domain not in DOMAINS or node.domain in ("", "ai.onnx") and node.op_type in known or \
                    not _has_body(node, at):
                nodes.append(node)
                continue
            types = types if types is not None else value_types(model)
            body = _body(node, at, opset, types, f"{node.name or node.op_type}.{i}/")
            if body is None:
                nodes.append(node)
                continue
            nodes += body
            changed = True
        if not changed:
            return model
        expanded = onnx.ModelProto()
        expanded.CopyFrom(model)
        del expanded.graph.node[:]
        expanded.graph.node.extend(nodes)
        model = expanded
    return model


def function_ops() -> set[str]:
    """The ops of the default and preview domains whose newest schema defines a function body (static or
    context-dependent)."""
    return {s.name for s in onnx.defs.get_all_schemas() if s.domain in DOMAINS and
            (s.function_opset_versions or s.context_dependent_function_opset_versions)}


def _schema(node: onnx.NodeProto, version: int):
    """The node's schema at `version` of its domain."""
    try:
        return onnx.defs.get_schema(node.op_type, version, "" if node.domain == "ai.onnx" else node.domain)
    except onnx.defs.SchemaError:
        return None


def _versions(schema, opset: int) -> tuple[list[int], list[int]]:
    """The opsets at or below `opset` for which the schema defines a function body, and a context-dependent one."""
    return ([v for v in schema.function_opset_versions if v <= opset],
            [v for v in schema.context_dependent_function_opset_versions if v <= opset])


def _has_body(node: onnx.NodeProto, version: int) -> bool:
    schema = _schema(node, version)
    return schema is not None and any(_versions(schema, version))


def _body(node: onnx.NodeProto, version: int, opset: int, types: dict[str, onnx.TypeProto],
          prefix: str) -> list[onnx.NodeProto] | None:
    """The nodes of the newest function body of the node's op at `version` of its domain (_inlined, its inner
    values' names after `prefix`), at the default domain's `opset`; None when it cannot be had (a
    context-dependent body whose inputs' types are unknown, a body the converter cannot take)."""
    schema = _schema(node, version)
    static, dependent = _versions(schema, version)
    full = onnx.NodeProto()
    full.CopyFrom(node)
    given = {a.name for a in node.attribute}
    full.attribute.extend(a.default_value for name, a in schema.attributes.items()
                          if name not in given and a.default_value.name)
    fn = onnx.FunctionProto()
    if static and (not dependent or max(static) >= max(dependent)):
        fn.ParseFromString(schema.get_function_with_opset_version(max(static)))
    else:
        if any(name and name not in types for name in node.input):
            return None
        fn.ParseFromString(schema.get_context_dependent_function_with_opset_version(
            max(dependent), full.SerializeToString(),
            [(types[name] if name else onnx.TypeProto()).SerializeToString() for name in node.input]))
    nodes = _inlined(full, fn, prefix)
    fn_opset = next((o.version for o in fn.opset_import if o.domain in ("", "ai.onnx")), opset)
    return nodes if fn_opset == opset else _at_opset(nodes, node, fn_opset, opset)


def _at_opset(nodes: list[onnx.NodeProto], node: onnx.NodeProto, fn_opset: int,
              opset: int) -> list[onnx.NodeProto] | None:
    """A body's nodes, their attributes substituted, written for fn_opset, converted to `opset` (as a model from
    the node's inputs to its outputs, untyped)."""
    untyped = onnx.TypeProto()
    graph = helper.make_graph(nodes, "body", [helper.make_value_info(n, untyped) for n in node.input if n],
                              [helper.make_value_info(n, untyped) for n in node.output if n])
    try:
        converted = version_converter.convert_version(
            helper.make_model(graph, opset_imports=[helper.make_opsetid("", fn_opset)]), opset)
    except Exception:  # noqa: BLE001  (a body the converter cannot take: the op stays unsupported)
        return None
    return list(converted.graph.node)


def scoped(graph: onnx.GraphProto, renamed) -> onnx.GraphProto:
    """A subgraph (an If's branch) of a body, the values it reads from around it renamed as the body's are."""
    out = onnx.GraphProto()
    out.CopyFrom(graph)
    inner = {v.name for v in graph.input} | {t.name for t in graph.initializer} | \
        {o for n in graph.node for o in n.output}
    for n in out.node:
        n.input[:] = [x if not x or x in inner else renamed(x) for x in n.input]
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                a.g.CopyFrom(scoped(a.g, lambda x: x if x in inner else renamed(x)))
    for v in out.output:
        if v.name not in inner:
            v.name = renamed(v.name)
    return out


def renamed_node(node: onnx.NodeProto, renamed, name: str) -> onnx.NodeProto:
    """A copy of a node named `name`, its inputs and outputs renamed, and the values its subgraphs read from
    around them renamed too (scoped): a body's node inlined, a node of a control-flow node's subgraph copied in
    its place (graph/subgraphs.py)."""
    copy = onnx.NodeProto()
    copy.CopyFrom(node)
    copy.name = name
    copy.input[:] = [renamed(x) for x in node.input]
    copy.output[:] = [renamed(x) for x in node.output]
    for a in copy.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            a.g.CopyFrom(scoped(a.g, renamed))
    return copy


def _inlined(node: onnx.NodeProto, body: onnx.FunctionProto, prefix: str) -> list[onnx.NodeProto]:
    """The body's nodes with its inputs and outputs named as the node's (an input the node leaves out: ''), its
    other values prefixed, and each attribute that refers to one of the node's (its defaults included) taking that
    one's value (dropped where the node has none)."""
    names = {name: (node.input[i] if i < len(node.input) else "") for i, name in enumerate(body.input)}
    names.update({name: node.output[i] for i, name in enumerate(body.output) if i < len(node.output)})
    values = {a.name: a for a in node.attribute}

    def renamed(name: str) -> str:
        return names.get(name, prefix + name) if name else ""
    nodes = []
    for j, inner in enumerate(body.node):
        copy = renamed_node(inner, renamed, prefix + (inner.name or f"{inner.op_type}.{j}"))
        attributes = list(copy.attribute)
        del copy.attribute[:]
        for a in attributes:
            if not a.ref_attr_name:
                copy.attribute.append(a)
            elif a.ref_attr_name in values:
                value = onnx.AttributeProto()
                value.CopyFrom(values[a.ref_attr_name])
                value.name = a.name
                copy.attribute.append(value)
        nodes.append(copy)
    return nodes
