"""Build small .tflite files in memory (no TensorFlow) and run them in LiteRT, for the tests.

    w = TFLiteWriter()
    x = w.tensor("x", [1, 4], np.float32)
    y = w.tensor("y", [1, 4], np.float32)
    w.op("RELU", [x], [y])
    (out,) = run_litert(w.build([x], [y]), [np.ones((1, 4), np.float32)])

The flatbuffer tables are written with the `tflite` package's flatc-generated builder functions
(tflite.TensorStart, tflite.Conv2DOptionsAddPadding, ...); builtin options are found from the operator's name
and set field by field from a dict with the schema's snake_case field names.
"""
from __future__ import annotations

import flatbuffers
import numpy as np
import tflite

# Operators whose options table is not named after them (the others: "DEPTHWISE_CONV_2D" -> DepthwiseConv2DOptions).
_IRREGULAR_OPTIONS = {
    **dict.fromkeys(["AVERAGE_POOL_2D", "MAX_POOL_2D", "L2_POOL_2D"], "Pool2DOptions"),
    **dict.fromkeys(["MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD", "REDUCE_ANY", "REDUCE_ALL"],
                    "ReducerOptions"),
    **dict.fromkeys(["MAXIMUM", "MINIMUM"], "MaximumMinimumOptions"),
    **dict.fromkeys(["RANDOM_UNIFORM", "RANDOM_STANDARD_NORMAL", "MULTINOMIAL"], "RandomOptions"),
    "L2_NORMALIZATION": "L2NormOptions",
    "UNIDIRECTIONAL_SEQUENCE_RNN": "SequenceRNNOptions",
    "CONV_3D_TRANSPOSE": "Conv3DOptions",
}
# Options tables by lower-case name without underscores, e.g. "conv2doptions" -> "Conv2DOptions".
_OPTIONS_BY_KEY = {name.lower(): name for name in vars(tflite.BuiltinOptions) if name.endswith("Options")}

# Enum-valued option fields and their enums; any other field ending in "_type" holds a TensorType.
_ENUM_FIELDS = {
    "padding": tflite.Padding,
    "fused_activation_function": tflite.ActivationFunctionType,
    "weights_format": tflite.FullyConnectedOptionsWeightsFormat,
    "mode": tflite.MirrorPadMode,
    "kernel_type": tflite.LSTMKernelType,
    "combiner": tflite.CombinerType,
    "reduce_function": tflite.ReduceWindowFunction,
    "type": tflite.LSHProjectionType,
}


def options_table(builtin: str) -> str:
    """The name of the builtin options table the schema pairs with operator `builtin`, e.g. "Conv2DOptions"."""
    name = _IRREGULAR_OPTIONS.get(builtin) or _OPTIONS_BY_KEY.get(builtin.replace("_", "").lower() + "options")
    if name is None:
        raise ValueError(f"no builtin options table known for {builtin}")
    return name


def _camel(snake: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in snake.split("_"))


def _enum_value(field: str, member: str) -> int:
    enum = _ENUM_FIELDS.get(field) or (tflite.TensorType if field.endswith("_type") else None)
    if enum is None or not hasattr(enum, member):
        raise ValueError(f"option {field}: no enum member {member!r}")
    return getattr(enum, member)


class TFLiteWriter:
    """Collects tensors, constant buffers and operators of one subgraph; build() writes the model."""

    def __init__(self):
        self.builder = flatbuffers.Builder(1024)
        self.tensors = []  # offsets of the finished Tensor tables
        self.buffers = [self._buffer(b"")]  # buffer 0: the empty sentinel that activations point to
        self.operators = []  # offsets of the finished Operator tables
        self.opcodes = {}  # (builtin code, version) -> index in the operator_codes vector

    def tensor(self, name: str, shape, dtype, data=None, scale=None, zero_point=None, axis: int = 0,
               variable: bool = False, signature=None) -> int:
        """Add a tensor; returns its index. dtype: a numpy dtype (float32, int8, uint8, int16, int32, int64, bool).
        data: a numpy array for a constant (written to a buffer of its own), None for an activation (buffer 0).
        scale/zero_point: a float or a 1-D sequence (per channel along `axis`, the quantized_dimension);
        zero_point defaults to 0s. variable: a variable tensor (is_variable), the state an operator such as SVDF
        keeps between invocations. signature: the shape_signature, -1 where a dimension is free (TFLite's
        converter then writes a placeholder in the shape: 1 for the batch, and for what a RESHAPE computes)."""
        b = self.builder
        dtype = np.dtype(dtype)
        buffer = 0
        if data is not None:
            buffer = len(self.buffers)
            self.buffers.append(self._buffer(np.asarray(data, dtype.newbyteorder("<")).tobytes()))
        quantization = None
        if scale is not None:
            scales = np.atleast_1d(np.asarray(scale, np.float32))
            zero_points = np.atleast_1d(np.asarray(0 if zero_point is None else zero_point, np.int64))
            scale_vec = b.CreateNumpyVector(scales)
            zp_vec = b.CreateNumpyVector(np.broadcast_to(zero_points, scales.shape).copy())
            tflite.QuantizationParametersStart(b)
            tflite.QuantizationParametersAddScale(b, scale_vec)
            tflite.QuantizationParametersAddZeroPoint(b, zp_vec)
            tflite.QuantizationParametersAddQuantizedDimension(b, axis)
            quantization = tflite.QuantizationParametersEnd(b)
        name_str = b.CreateString(name)
        shape_vec = b.CreateNumpyVector(np.asarray(shape, np.int32))
        if signature is not None:
            signature_vec = b.CreateNumpyVector(np.asarray(signature, np.int32))
        tflite.TensorStart(b)
        tflite.TensorAddShape(b, shape_vec)
        if signature is not None:
            tflite.TensorAddShapeSignature(b, signature_vec)
        tflite.TensorAddType(b, getattr(tflite.TensorType, dtype.name.upper()))
        tflite.TensorAddBuffer(b, buffer)
        tflite.TensorAddName(b, name_str)
        if variable:
            tflite.TensorAddIsVariable(b, True)
        if quantization is not None:
            tflite.TensorAddQuantization(b, quantization)
        self.tensors.append(tflite.TensorEnd(b))
        return len(self.tensors) - 1

    def op(self, builtin: str, inputs, outputs, options: dict | None = None, version: int = 1,
           intermediates=()) -> None:
        """Add an operator. builtin: the BuiltinOperator name ("CONV_2D", ...); inputs/outputs: tensor indices
        (-1 for an omitted optional input). options: the fields of the options table the schema pairs with the
        operator, by their snake_case schema names; enums by member name ("SAME", "RELU6"), vectors as lists,
        bools as bools. Unset fields take the schema's defaults (stride_w/stride_h default to 0, so set them);
        options=None writes no table. intermediates: tensor indices whose quantization an 8-bit LSTM reads."""
        b = self.builder
        code = getattr(tflite.BuiltinOperator, builtin)
        opcode_index = self.opcodes.setdefault((code, version), len(self.opcodes))
        if options is not None:
            table = options_table(builtin)
            options_offset = self._options(table, options)
        inputs_vec = b.CreateNumpyVector(np.asarray(inputs, np.int32))
        outputs_vec = b.CreateNumpyVector(np.asarray(outputs, np.int32))
        if intermediates:
            intermediates_vec = b.CreateNumpyVector(np.asarray(intermediates, np.int32))
        tflite.OperatorStart(b)
        tflite.OperatorAddOpcodeIndex(b, opcode_index)
        tflite.OperatorAddInputs(b, inputs_vec)
        tflite.OperatorAddOutputs(b, outputs_vec)
        if intermediates:
            tflite.OperatorAddIntermediates(b, intermediates_vec)
        if options is not None:
            tflite.OperatorAddBuiltinOptionsType(b, getattr(tflite.BuiltinOptions, table))
            tflite.OperatorAddBuiltinOptions(b, options_offset)
        self.operators.append(tflite.OperatorEnd(b))

    def build(self, inputs, outputs, description: str = "cglow test") -> bytes:
        """The model: schema version 3, one subgraph with these input and output tensor indices, file
        identifier "TFL3". Each operator code carries both deprecated_builtin_code (capped at 127) and
        builtin_code, as TFLite's own writer does. Call it once: it finishes the writer's flatbuffer."""
        b = self.builder
        codes = []
        for code, version in self.opcodes:  # in index order: dicts keep insertion order
            tflite.OperatorCodeStart(b)
            tflite.OperatorCodeAddDeprecatedBuiltinCode(b, min(code, 127))
            tflite.OperatorCodeAddBuiltinCode(b, code)
            tflite.OperatorCodeAddVersion(b, version)
            codes.append(tflite.OperatorCodeEnd(b))
        tensors_vec = self._offsets(self.tensors)
        inputs_vec = b.CreateNumpyVector(np.asarray(inputs, np.int32))
        outputs_vec = b.CreateNumpyVector(np.asarray(outputs, np.int32))
        operators_vec = self._offsets(self.operators)
        tflite.SubGraphStart(b)
        tflite.SubGraphAddTensors(b, tensors_vec)
        tflite.SubGraphAddInputs(b, inputs_vec)
        tflite.SubGraphAddOutputs(b, outputs_vec)
        tflite.SubGraphAddOperators(b, operators_vec)
        subgraph = tflite.SubGraphEnd(b)
        codes_vec, subgraphs_vec, buffers_vec = (self._offsets(v) for v in (codes, [subgraph], self.buffers))
        description_str = b.CreateString(description)
        tflite.ModelStart(b)
        tflite.ModelAddVersion(b, 3)
        tflite.ModelAddOperatorCodes(b, codes_vec)
        tflite.ModelAddSubgraphs(b, subgraphs_vec)
        tflite.ModelAddDescription(b, description_str)
        tflite.ModelAddBuffers(b, buffers_vec)
        b.Finish(tflite.ModelEnd(b), file_identifier=b"TFL3")
        return bytes(b.Output())

    def _buffer(self, data: bytes) -> int:
        """A Buffer table; non-empty data goes in a uint8 vector aligned to 16 bytes, as TFLite's converter does."""
        b = self.builder
        if data:
            b.StartVector(1, len(data), 16)
            b.head -= len(data)
            b.Bytes[b.head:b.head + len(data)] = data
            data_vec = b.EndVector()
        tflite.BufferStart(b)
        if data:
            tflite.BufferAddData(b, data_vec)
        return tflite.BufferEnd(b)

    def _options(self, table: str, options: dict) -> int:
        """The options table `table` with `options` set; vectors are written before the table is started."""
        b = self.builder
        values = {}
        for field, value in options.items():
            if isinstance(value, str):
                value = _enum_value(field, value)
            elif isinstance(value, (list, tuple, np.ndarray)):
                is_float = np.asarray(value).dtype.kind == "f"  # BUCKETIZE's boundaries; the rest are int vectors
                value = b.CreateNumpyVector(np.asarray(value, np.float32 if is_float else np.int32))
            values[field] = value
        getattr(tflite, f"{table}Start")(b)
        for field, value in values.items():
            add = getattr(tflite, f"{table}Add{_camel(field)}", None)
            if add is None:
                raise ValueError(f"{table} has no field {field}")
            add(b, value)
        return getattr(tflite, f"{table}End")(b)

    def _offsets(self, offsets: list[int]) -> int:
        """A vector of tables."""
        b = self.builder
        b.StartVector(4, len(offsets), 4)
        for offset in reversed(offsets):
            b.PrependUOffsetTRelative(offset)
        return b.EndVector()


def run_litert(model: bytes, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Run `model` in the LiteRT interpreter with the reference kernels (BUILTIN_REF, whose integer arithmetic is
    TFLite Micro's), feeding `inputs` in the subgraph's input order; returns copies of the outputs, in order."""
    return run_litert_sequence(model, [inputs])[0]


def run_litert_sequence(model: bytes, invocations: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
    """Invoke one interpreter of `model` once per list of inputs, in order: the variable tensors (the state of
    SVDF and LSTM operators) start at zero and carry over from one invocation to the next. Returns each
    invocation's outputs."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    interpreter = Interpreter(model_content=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    interpreter.allocate_tensors()
    results = []
    for inputs in invocations:
        for detail, value in zip(interpreter.get_input_details(), inputs, strict=True):
            interpreter.set_tensor(detail["index"], value)  # raises on a wrong dtype or shape
        interpreter.invoke()
        results.append([interpreter.get_tensor(detail["index"]) for detail in interpreter.get_output_details()])
    return results
