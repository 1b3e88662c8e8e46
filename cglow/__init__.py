"""cglow: ONNX models to one self-contained, portable C99 file."""
from .version import __version__  # noqa: F401 (the package's own name for it)
from .compiler import CompiledModel, compile_model  # noqa: E402
from .errors import CglowError  # noqa: E402
from .tools.host import HostModel, build  # noqa: E402

__all__ = ["CglowError", "CompiledModel", "HostModel", "build", "compile_model", "__version__"]
