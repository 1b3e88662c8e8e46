"""Quantized models: the QOperator form rewritten to QDQ at import (qoperator.py), QDQ pairs folded into
integer ops (fold.py, with tables for unary ops, table.py), and 8-bit graph inputs and outputs (io.py)."""
