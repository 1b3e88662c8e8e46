"""The ops cglow compiles, one module per op family. Each module ends with its ops' specifications
(graph/registry.OpSpec: shape rule, lowering, int8 form, shape inputs), which importing it declares."""
import importlib
import pkgutil

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    importlib.import_module(f"{__name__}.{_module}")
