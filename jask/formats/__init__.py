"""The file formats other tools write, opened in place as DiskArrays."""
