"""Formats users already have, opened in place as read-only DiskArrays.

Each front-end module reads its format's metadata and hands the engine a chunk
table (``_chunked.open_chunked``): where every encoded chunk of an array lies
and which codecs decode it. The engine reads, decodes and caches chunks within
the memory budget; the arrays then work with every Jask op.
"""
