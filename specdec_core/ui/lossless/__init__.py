"""The lossless page's parts (where the promise of speculative decoding ends)."""
