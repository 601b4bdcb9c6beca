"""One device's process of a two-process run (:mod:`splitopt.netrun.runner`): it rebuilds the
model, cuts it by every plan it may run, serves its incoming link and runs its part of
each sample, sending what crosses through its paced outgoing link."""

from __future__ import annotations

import logging
import sys
import time
import traceback
from typing import Any, Mapping, Sequence

from splitopt.core.child_processes import exit_with_parent
from splitopt.core.errors import SplitoptError
from splitopt.netrun.frames import (
    ACK, PLAN, SAMPLE, FrameError, Kind, ack_frame, close_frame, encode, header_bytes, plan_frame, sample_frame,
)
from splitopt.netrun.pacing import Pacer
from splitopt.netrun.service import Connection, FrameService, connect
from splitopt.netrun.wire import wire_pack, wire_transmit, wire_unpack


def build_splits(spec: Mapping[str, Any]):
    """``(inst, splits, run inputs(n), module)``: the model of ``spec`` built and cut by
    each of its plans (one capture, calibrated as ``splitopt run`` does)."""
    from splitopt.api import load_instance, plan_from_dict
    from splitopt.torch.models import build_model
    from splitopt.torch.partition import capture_module, partition

    inst = load_instance(spec["instance"])
    module, rename, example, inputs, calibration = build_model(
        spec["model"], spec["seed"], inst, input_shape=spec.get("input_shape"), input_dtype=spec.get("input_dtype"),
        input_high=spec.get("input_high"))
    module.eval()
    cap = capture_module(module, example, rename=rename, input_bits=int(inst.inputs[0].bits))
    calib = calibration()
    splits = [partition(module, example, plan_from_dict(inst, d), inst, capture=cap, calibration=calib)
              for d in spec["plans"]]
    return inst, splits, inputs, module


def crossing_dtypes(split, example) -> dict[str, Any]:
    """The dtype of every tensor crossing a boundary of ``split`` (one run on
    ``example``, which also warms every part up)."""
    dtypes: dict[str, Any] = {}

    def hook(name, tensor, bits):
        dtypes[name] = tensor.dtype
        return wire_transmit(split)(name, tensor, bits)

    split.run(example, hook)
    return dtypes


def device_main(rank: int, spec: Mapping[str, Any], port_queues: Sequence[Any], results: Any) -> None:
    """Device ``rank``'s process: build, connect, run every sample, report
    ``(rank, report)`` (or ``(rank, {"error": ...})``) on ``results``."""
    exit_with_parent("netrun-parent-watch")
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(message)s")
    service = down = None
    try:
        import torch

        torch.set_num_threads(int(spec["threads"]))
        inst, splits, inputs, _ = build_splits(spec)
        example = inputs(1)
        dtypes = [crossing_dtypes(s, example) for s in splits]
        last = len(spec["devices"]) - 1
        deadline = float(spec["run_timeout_s"])
        timeout, max_frame = float(spec["timeout_s"]), int(spec["max_frame_bytes"])
        if rank > 0:
            service = FrameService(spec["host"], 0, timeout_s=timeout, max_frame_bytes=max_frame,
                                   accept_timeout_s=deadline)
            port_queues[rank - 1].put(service.port)
        pacer = None
        if rank < last:
            port = port_queues[rank].get(timeout=deadline)
            down = connect(spec["host"], port, timeout_s=timeout, max_frame_bytes=max_frame)
            bw, lat = spec["links"][rank]
            pacer = Pacer(bw, lat, chunk_bytes=int(spec["chunk_bytes"]))
        state = _DeviceState(rank, last, spec, splits, dtypes, pacer, down)
        if rank == 0:
            with torch.no_grad():
                state.run_source(inputs(int(spec["warmup"]) + int(spec["samples"])))
        else:
            def session(conn: Connection) -> None:
                with torch.no_grad():
                    state.run_receiver(conn)

            assert service is not None  # rank > 0: opened above
            service.serve(session, sessions=1)
            if service.rejected:
                state.report["rejected"] = list(service.rejected)
        results.put((rank, state.report))
    except BaseException as e:  # noqa: BLE001 - reported to the parent, which ends the run
        text = str(e).splitlines()[0] if str(e) else ""
        results.put((rank, {"error": f"{type(e).__name__}: {text}", "trace": traceback.format_exc()}))
    finally:
        if down is not None:
            down.close()
        if service is not None:
            service.close()


class _DeviceState:
    """One device's parts (one per plan), its outgoing pacer and connection, and its
    per-sample records."""

    def __init__(self, rank: int, last: int, spec: Mapping[str, Any], splits, dtypes, pacer, down) -> None:
        self.rank, self.last, self.spec = rank, last, spec
        self.splits, self.dtypes = splits, dtypes
        self.pacer, self.down = pacer, down
        self.plan = int(spec["initial_plan"])
        self.table_link = spec.get("table_link")
        self.records: list[dict[str, Any]] = []
        self.outputs: dict[int, dict[str, Any]] = {}
        self.switches: list[dict[str, Any]] = []
        self.report: dict[str, Any] = {"records": self.records, "outputs": self.outputs, "switches": self.switches}
        if pacer is not None and self.table_link == rank and spec.get("initial_bandwidth") is not None:
            pacer.set_bandwidth(float(spec["initial_bandwidth"]))

    # -- plan switching
    def switch(self, plan: int, bandwidth: float, sample: int) -> None:
        if not 0 <= plan < len(self.splits):
            raise FrameError(f"PLAN frame plan index {plan} is not below the {len(self.splits)} plans of the table")
        if self.pacer is not None and self.table_link == self.rank:
            self.pacer.set_bandwidth(bandwidth)
        if plan != self.plan:
            self.switches.append({"sample": sample, "from_plan": self.plan, "to_plan": plan, "bandwidth": bandwidth})
        self.plan = plan
        if self.down is not None:
            self.down.sendall(plan_frame(plan, bandwidth))

    # -- one sample on this device, after its inputs are in ``store``
    def step(self, sample: int, store: dict[str, Any], record: dict[str, Any]) -> None:
        split = self.splits[self.plan]
        part = split.parts[self.rank]
        t0 = time.monotonic_ns()
        if part.module is not None:
            result = part.module(*[store[n] for n in part.inputs])
            store.update(zip(part.outputs, result))
        t1 = time.monotonic_ns()
        record["compute_ms"] = (t1 - t0) / 1e6
        record["done_ns"] = t1
        held = {n: store[n].numpy().copy() for n in split.output_names if n in store}
        if held:
            self.outputs[sample] = held
        if self.rank < self.last:
            self.send(sample, split, store, record)

    def send(self, sample: int, split, store: dict[str, Any], record: dict[str, Any]) -> None:
        crossing = split.crossings[self.rank]
        t0 = time.monotonic_ns()
        frames, payload, packed_headers = [], {}, 0
        for name, _, bits in crossing.tensors:
            p = wire_pack(name, store[name], bits, split.ranges)
            frames.append(encode(Kind.TENSOR, name, p.to_bytes()))
            payload[name] = p.payload_bytes
            packed_headers += p.header_bytes
        start = time.monotonic_ns()
        record["pack_ms"] = (start - t0) / 1e6
        head = sample_frame(sample, self.plan, len(frames), start)
        transfer = self.pacer.send(self.down.sendall, [head, *frames], shaped=bool(frames), start_ns=start)
        record["send"] = {"start_ns": transfer.start_ns, "end_ns": transfer.end_ns, "bytes": transfer.bytes,
                          "payload_bytes": payload, "packing_header_bytes": packed_headers,
                          "frame_header_bytes": len(head) + sum(header_bytes(n) for n in payload),
                          "bandwidth_bits_per_s": self.pacer.bandwidth_bits_per_s}
        ack = self.down.read()
        if ack.kind is not Kind.ACK or ACK.unpack(ack.payload)[0] != sample:
            raise FrameError(f"expected the ACK of sample {sample}, got a {ack.kind.name} frame")
        record["ack_ns"] = time.monotonic_ns()

    # -- device 0
    def run_source(self, x) -> None:
        warmup = int(self.spec["warmup"])
        changes = {i + warmup: (p, b) for i, p, b in self.spec["schedule"]}
        try:
            for i in range(x.shape[0]):
                if i in changes:
                    self.switch(changes[i][0], changes[i][1], i)
                record = {"sample": i, "plan": self.plan, "start_ns": time.monotonic_ns()}
                self.step(i, {"input": x[i:i + 1]}, record)
                self.records.append(record)
        finally:
            if self.down is not None:
                try:
                    self.down.sendall(close_frame())
                except FrameError:
                    pass

    # -- devices 1..M-1: one session of the upstream connection
    def run_receiver(self, conn: Connection) -> None:
        while True:
            frame = conn.read()
            if frame.kind is Kind.CLOSE:
                if self.down is not None:
                    self.down.sendall(close_frame())
                return
            if frame.kind is Kind.PLAN:
                plan, bw = PLAN.unpack(frame.payload)
                self.switch(int(plan), float(bw), len(self.records))
                continue
            if frame.kind is not Kind.SAMPLE:
                raise FrameError(f"expected a SAMPLE, PLAN or CLOSE frame, got {frame.kind.name}")
            sample, plan, count, start_ns = SAMPLE.unpack(frame.payload)
            if plan != self.plan:
                raise FrameError(f"SAMPLE frame of sample {sample} is for plan {plan}, this device runs plan "
                                 f"{self.plan}")
            store = self.receive(conn, sample, count)
            record = store.pop("__record__")
            record.update({"sample": sample, "plan": plan, "transfer_start_ns": start_ns})
            self.step(sample, store, record)
            conn.sendall(ack_frame(sample))
            self.records.append(record)

    def receive(self, conn: Connection, sample: int, count: int) -> dict[str, Any]:
        from splitopt.torch.packing import PackedTensor

        split = self.splits[self.plan]
        crossing = split.crossings[self.rank - 1]
        want = crossing.tensors
        if count != len(want):
            raise FrameError(f"SAMPLE frame of sample {sample} announces {count} tensors, plan {self.plan} sends "
                             f"{len(want)} on this link")
        frames = [conn.read() for _ in range(count)]
        received_ns = time.monotonic_ns()
        store: dict[str, Any] = {}
        for frame, (name, elements, bits) in zip(frames, want):
            if frame.kind is not Kind.TENSOR or frame.name != name:
                raise FrameError(f"expected TENSOR frame '{name}', got {frame.kind.name} '{frame.name[:60]}'")
            try:
                p = PackedTensor.from_bytes(frame.payload)
            except (ValueError, SplitoptError) as e:
                raise FrameError(f"TENSOR frame '{name}': {e}") from None
            if p.bits != bits or p.elements != elements or (p.shape and p.shape[0] != 1):
                raise FrameError(f"TENSOR frame '{name}': {p.bits} bits, shape {p.shape}; the plan sends "
                                 f"{elements} elements at {bits} bits with batch 1")
            store[name] = wire_unpack(p, self.dtypes[self.plan][name])
        store["__record__"] = {"received_ns": received_ns, "unpack_ms": (time.monotonic_ns() - received_ns) / 1e6}
        return store
