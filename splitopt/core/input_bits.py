"""Bits per element of a profiled model's raw input: what a plan that runs the first layer
elsewhere sends of it. The torch and ONNX bridges use the one rule here and record which
part of it applied in the instance's ``source["input_bits"]``:

* a floating-point input (an image) is counted at ``FLOAT_INPUT_BITS`` (8: the camera's
  pixels), as before;
* an integer input (token ids) at ``ceil(log2(V))`` bits when its range ``[0, V)`` is
  known: the caller's ``--input-high`` V, else the ``num_embeddings`` (rows) of the
  embedding table the input indexes directly;
* otherwise at its dtype's width (int64: 64, int32: 32), the most it can take.
"""

from __future__ import annotations

#: bits of a floating-point input (an 8-bit image)
FLOAT_INPUT_BITS = 8


def range_bits(high: int) -> int:
    """Bits that hold every integer in ``[0, high)``: ``ceil(log2(high))``, at least 1
    (computed exactly, as the bit length of ``high - 1``)."""
    return max(1, (int(high) - 1).bit_length())


def integer_input_bits(dtype_bits: int, input_high: int | None = None,
                       embedding_rows: int | None = None) -> tuple[int, str]:
    """(bits, the rule that gave them) of an integer input of ``dtype_bits`` bits; see the
    module docstring."""
    if input_high is not None:
        return range_bits(input_high), f"ceil(log2({input_high})): ids in [0, {input_high}) by --input-high"
    if embedding_rows is not None:
        return range_bits(embedding_rows), (f"ceil(log2({embedding_rows})): ids index an embedding of "
                                            f"{embedding_rows} rows")
    return dtype_bits, f"the dtype's width ({dtype_bits} bits): no known range of the ids"
