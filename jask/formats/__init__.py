"""The file formats other tools write, opened as DiskArrays: one module per format.

Formats whose arrays are contiguous bytes at an offset (safetensors, stored .npz members,
contiguous HDF5 datasets) open them in place as raw arrays. Chunked and compressed ones
(Zarr, chunked HDF5, deflated .npz members) hand the engine a chunk table
(``_chunked.open_chunked``): where every encoded chunk of an array lies and which codecs
decode it. The engine reads, decodes and caches chunks within the memory budget; the arrays
then work with every Jask op, read-only.
"""
