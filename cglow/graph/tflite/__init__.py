"""TensorFlow Lite input: a .tflite file (identifier TFL3) into the typed graph (importer.py)."""
