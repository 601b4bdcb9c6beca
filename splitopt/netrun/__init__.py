"""Run a split plan as separate processes that exchange the crossing tensors over TCP.

* :mod:`splitopt.netrun.frames`: the wire format (a small frame header, then the packing
  format of :mod:`splitopt.torch.packing`); no pickle, no ``torch.load``.
* :mod:`splitopt.netrun.pacing`: the link shaper (a sender-side pacer: the link's fixed
  latency, then the bytes released at the link's bandwidth against a monotonic clock).
* :mod:`splitopt.netrun.service`: the receiving side, a TCP service that reads only its
  own frames, refuses malformed, oversized or truncated frames and silent peers in one
  logged line and keeps serving.
* :mod:`splitopt.netrun.setup`: what is run (the plan or the breakpoint table's plans,
  the devices and links, the bandwidth schedule), checked before any process starts.
* :mod:`splitopt.netrun.wire`: a crossing tensor's wire form (quantized, bit-packed) and
  the same transmission in one process.
* :mod:`splitopt.netrun.device`: one device's process.
* :mod:`splitopt.netrun.runner`: one process per device of an edge/cloud or chain plan
  (or of every plan of a bandwidth breakpoint table, switching at run time), the
  measurement (ms per part and per link) and the check against the single-process run.

Nothing here imports torch at import time; the functions that need it import it. Units: ms, bytes, bits/s; timeouts in seconds.
"""
