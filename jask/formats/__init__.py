"""Readers and writers of the file formats users already have (each format one module)."""
