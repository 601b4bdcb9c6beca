"""The llm family (problem ``llm``): a decoder language model over heterogeneous devices,
with prefill, decode and the KV cache in the cost model."""
