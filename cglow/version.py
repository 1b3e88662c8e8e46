"""The version of cglow, which every generated file names (pyproject.toml states it too)."""
__version__ = "0.1.0"
