"""The Python API: entry points that tie the layers together."""
