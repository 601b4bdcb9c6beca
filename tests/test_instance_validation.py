"""Bad inputs are refused with InvalidInstance / InvalidPlan and a one-line message that
names the offending field and value."""

from __future__ import annotations

import copy
import json
import math

import pytest

from splitopt import InvalidInstance, InvalidPlan, Plan, evaluate, load_instance, load_plan, parse_instance, plan_from_dict
from splitopt.families.edge_cloud.plan import edge_layers, uniform_plan
from splitopt.api import plan_to_dict


def base() -> dict:
    """A valid instance: x -> a -> b -> c, and a skip a -> c."""
    err = {"4": 0.02, "8": 0.01}
    return {
        "format": "splitopt-instance/1",
        "name": "tiny",
        "graph": {
            "inputs": [{"name": "x", "shape": [3, 8, 8], "bits": 8}],
            "layers": [
                {"name": "a", "op": "conv", "inputs": ["x"], "macs": 1e5, "weights": 100,
                 "output_shape": [4, 8, 8], "weight_error": dict(err), "activation_error": dict(err)},
                {"name": "b", "op": "pool", "inputs": ["a"], "macs": 256, "weights": 0,
                 "output_shape": [4, 4, 4], "activation_error": dict(err)},
                {"name": "c", "op": "linear", "inputs": ["b", "a"], "macs": 1e4, "weights": 50,
                 "output_shape": [10], "weight_error": dict(err), "activation_error": dict(err)},
            ],
        },
        "devices": [
            {"name": "edge", "mac_per_s": 1e9, "offchip_bytes_per_s": 1e9, "onchip_bytes": 1e4,
             "memory_bytes": 1e6, "bit_widths": [2, 4, 8, 16]},
            {"name": "cloud", "mac_per_s": 1e12, "offchip_bytes_per_s": 1e10, "onchip_bytes": 1e7,
             "memory_bytes": 1e9, "bit_widths": [8, 16]},
        ],
        "links": [{"source": "edge", "target": "cloud", "bandwidth_bits_per_s": 1e6, "latency_ms": 1.0}],
        "settings": {"problem": "split_bits", "edge": "edge", "cloud": "cloud", "edge_memory_bytes": 1e5,
                     "error_budget": 0.1, "bit_widths": [4, 8], "cloud_bits": 16},
    }


def rejects(data, *fragments, exc=InvalidInstance) -> str:
    """Parse ``data``; assert it raises ``exc`` with a one-line message containing every
    fragment; return the message."""
    with pytest.raises(exc) as info:
        parse_instance(data)
    msg = str(info.value)
    assert "\n" not in msg, msg
    for fragment in fragments:
        assert fragment in msg, f"{fragment!r} not in {msg!r}"
    return msg


def edited(path: str, value, data=None) -> dict:
    """A copy of the base instance with the item at a dotted path (integers index lists)
    replaced by ``value``, or deleted when ``value`` is DELETE."""
    data = copy.deepcopy(base() if data is None else data)
    *parents, last = path.split(".")
    node = data
    for p in parents:
        node = node[int(p)] if isinstance(node, list) else node[p]
    if isinstance(node, list):
        last = int(last)
    if value is DELETE:
        del node[last]
    else:
        node[last] = value
    return data


DELETE = object()


def test_base_is_valid():
    inst = parse_instance(base())
    assert [l.name for l in inst.layers] == ["a", "b", "c"]


# ----- files and JSON ---------------------------------------------------------------------

def test_malformed_json(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"format": "splitopt-instance/1",\n "name": }')
    with pytest.raises(InvalidInstance) as info:
        load_instance(path)
    msg = str(info.value)
    assert str(path) in msg and "malformed JSON" in msg and "line 2" in msg and "\n" not in msg


def test_missing_file(tmp_path):
    path = tmp_path / "nope.json"
    with pytest.raises(InvalidInstance, match="cannot read file") as info:
        load_instance(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_json_literals_are_refused(tmp_path, literal):
    # Python's json accepts these literals; the loader must not
    text = json.dumps(base()).replace('"macs": 256', f'"macs": {literal}')
    assert literal in text
    path = tmp_path / "nan.json"
    path.write_text(text)
    with pytest.raises(InvalidInstance) as info:
        load_instance(path)
    msg = str(info.value)
    assert "instance.graph.layers[1].macs" in msg and "finite" in msg and "\n" not in msg
    assert str(float(literal)) in msg  # nan, inf, -inf


@pytest.mark.parametrize("path, value, where", [
    ("graph.layers.0.macs", math.nan, "instance.graph.layers[0].macs"),
    ("devices.0.mac_per_s", math.inf, "instance.devices[0].mac_per_s"),
    ("settings.error_budget", -math.inf, "instance.settings.error_budget"),
    ("graph.layers.2.weight_error.4", math.nan, "instance.graph.layers[2].weight_error.4"),
])
def test_non_finite_numbers_are_refused(path, value, where):
    rejects(edited(path, value), where, "finite", str(value))


# ----- schema -------------------------------------------------------------------------------

def test_not_an_object():
    rejects([], "instance", "not of type 'object'")


@pytest.mark.parametrize("path, field, where", [
    ("settings", "settings", "instance"),
    ("graph.layers.1.macs", "macs", "instance.graph.layers[1]"),
    ("devices.1.bit_widths", "bit_widths", "instance.devices[1]"),
    ("graph.inputs.0.shape", "shape", "instance.graph.inputs[0]"),
])
def test_missing_field(path, field, where):
    rejects(edited(path, DELETE), where + ":", f"'{field}' is a required property")


def test_missing_field_that_depends_on_others():
    rejects(edited("links.0.bandwidth_bits_per_s", DELETE), "instance.links[0]:", "'bandwidth_bits_per_s' is required",
            "on no bus")
    rejects(edited("settings.cloud", DELETE), "instance.settings.cloud:", "required for problem 'split_bits'")


@pytest.mark.parametrize("path, value, where, shown", [
    ("graph.layers.0.macs", "lots", "instance.graph.layers[0].macs", '"lots"'),
    ("graph.layers.0.macs", True, "instance.graph.layers[0].macs", "true"),
    ("graph.layers.0.inputs", "x", "instance.graph.layers[0].inputs", '"x"'),
    ("graph.inputs.0.bits", 8.5, "instance.graph.inputs[0].bits", "8.5"),
    ("devices.0.onchip_bytes", None, "instance.devices[0].onchip_bytes", "null"),
    ("settings.bit_widths", 8, "instance.settings.bit_widths", "8"),
    ("name", 7, "instance.name", "7"),
])
def test_wrong_type(path, value, where, shown):
    rejects(edited(path, value), where + ":", f"(got {shown})")


@pytest.mark.parametrize("path, value, where", [
    ("graph.layers.0.weights", -5, "instance.graph.layers[0].weights"),
    ("graph.layers.0.macs", -1.5, "instance.graph.layers[0].macs"),
    ("graph.layers.1.output_shape.0", 0, "instance.graph.layers[1].output_shape[0]"),
    ("graph.inputs.0.shape.2", -8, "instance.graph.inputs[0].shape[2]"),
    ("devices.0.onchip_bytes", -1, "instance.devices[0].onchip_bytes"),
    ("devices.0.mac_per_s", 0, "instance.devices[0].mac_per_s"),
    ("links.0.bandwidth_bits_per_s", 0, "instance.links[0].bandwidth_bits_per_s"),
    ("links.0.latency_ms", -2, "instance.links[0].latency_ms"),
    ("settings.edge_memory_bytes", -100, "instance.settings.edge_memory_bytes"),
    ("settings.error_budget", -0.5, "instance.settings.error_budget"),
    ("graph.layers.2.activation_error.8", -0.01, "instance.graph.layers[2].activation_error.8"),
    ("graph.inputs.0.bits", 0, "instance.graph.inputs[0].bits"),
])
def test_negative_or_zero_size(path, value, where):
    rejects(edited(path, value), where + ":", str(value))


def test_unknown_property():
    rejects(edited("graph.layers.0.flops", 5), "instance.graph.layers[0].flops", "unknown field")


def test_wrong_format_and_problem():
    rejects(edited("format", "splitopt-instance/2"), "instance.format", "splitopt-instance/2")
    rejects(edited("settings.problem", "bits_only"), "instance.settings.problem", "bits_only")


def test_bad_latency_override_key():
    rejects(edited("graph.layers.0.latency_ms", {"edge": {"w8-a8": 1.0}}),
            "instance.graph.layers[0].latency_ms.edge", "w8-a8")


# ----- graph consistency ----------------------------------------------------------------

def test_cycle():
    data = edited("graph.layers.0.inputs", ["x", "c"])
    rejects(data, "instance.graph.layers", "cycle", "a -> b -> c -> a")


def test_self_loop():
    rejects(edited("graph.layers.1.inputs", ["b"]), "cycle", "b -> b")


def test_dangling_edge():
    rejects(edited("graph.layers.1.inputs", ["a", "ghost"]),
            "instance.graph.layers[1].inputs", "'ghost'", "dangling")


def test_layer_listed_before_its_input():
    data = base()
    a, b, c = data["graph"]["layers"]
    data["graph"]["layers"] = [b, a, c]  # b reads a, listed before it
    rejects(data, "instance.graph.layers[0]", "'b'", "before its input 'a'")


@pytest.mark.parametrize("edit, where, name", [
    (lambda d: d["graph"]["layers"][2].update(name="a"), "instance.graph.layers[2].name", "'a'"),
    (lambda d: d["graph"]["inputs"].append({"name": "x", "shape": [1], "bits": 8}), "instance.graph.inputs[1].name", "'x'"),
    (lambda d: d["graph"]["inputs"][0].update(name="b") or d["graph"]["layers"][0].update(inputs=["b"]),
     "instance.graph.layers[1].name", "'b'"),
])
def test_duplicate_names(edit, where, name):
    data = base()
    edit(data)
    rejects(data, where, "duplicate", name)


def test_duplicate_device_names():
    data = base()
    data["devices"].append(dict(data["devices"][0], mac_per_s=1.0))
    rejects(data, "instance.devices[2].name", "duplicate", "'edge'")


def test_layer_without_inputs():
    rejects(edited("graph.layers.0.inputs", []), "instance.graph.layers[0].inputs", "'a'", "no inputs")


def test_unread_input():
    data = base()
    data["graph"]["inputs"].append({"name": "y", "shape": [4], "bits": 8})
    rejects(data, "instance.graph.inputs", "'y'", "read by no layer")


# ----- devices, links, settings ------------------------------------------------------------

@pytest.mark.parametrize("key", ["edge", "cloud"])
def test_unknown_device_in_settings(key):
    rejects(edited(f"settings.{key}", "gpu"), f"instance.settings.{key}", "'gpu'", "unknown device")


def test_edge_and_cloud_the_same_device():
    rejects(edited("settings.cloud", "edge"), "instance.settings.cloud", "'edge'")


def test_unknown_device_in_an_extra_link():
    data = base()
    data["links"].append({"source": "cloud", "target": "gpu", "bandwidth_bits_per_s": 1e6})
    rejects(data, "instance.links[1].target", "'gpu'", "unknown device")


def test_unknown_device_in_the_only_link():
    rejects(edited("links.0.target", "gpu"), "instance.links[0].target", "'gpu'")


@pytest.mark.parametrize("links", [[], [{"source": "cloud", "target": "edge", "bandwidth_bits_per_s": 1e6}]])
def test_no_uplink(links):
    rejects(edited("links", links), "links", "no link from edge device 'edge' to cloud device 'cloud'")


def test_unsupported_candidate_bit_width():
    rejects(edited("settings.bit_widths", [3, 8]), "instance.settings.bit_widths", "3 bits", "'edge'")


def test_unsupported_cloud_bits():
    rejects(edited("settings.cloud_bits", 4), "instance.settings.cloud_bits", "4 bits", "'cloud'")


def test_split_needs_cloud_bits_on_the_edge():
    data = edited("devices.0.bit_widths", [4, 8])
    data["settings"]["problem"] = "split"
    rejects(data, "instance.settings.problem", "cloud_bits=16", "'edge'")


def test_unknown_layer_in_edge_required():
    rejects(edited("settings.edge_required", ["a", "ghost"]), "instance.settings.edge_required", "'ghost'")


def test_unknown_device_in_latency_override():
    rejects(edited("graph.layers.1.latency_ms", {"gpu": 1.0}), "instance.graph.layers[1].latency_ms", "'gpu'")


@pytest.mark.parametrize("path, table, bits", [
    ("graph.layers.0.activation_error.4", "activation_error", "4"),
    ("graph.layers.2.weight_error.8", "weight_error", "8"),
])
def test_missing_error_table_entry(path, table, bits):
    idx = path.split(".")[2]
    rejects(edited(path, DELETE), f"instance.graph.layers[{idx}].{table}", "bit-width " + bits)


def test_weightless_layer_needs_no_weight_error():
    parse_instance(base())  # b has weights 0 and no weight_error table


@pytest.mark.parametrize("problem, transmit", [("split_bits", 2), ("split", 8)])
def test_transmit_bits_without_error_entry(problem, transmit):
    data = edited("settings.transmit_bits", transmit)
    data["settings"]["problem"] = problem
    if problem == "split":  # the float problem needs no error tables: drop them
        for layer in data["graph"]["layers"]:
            layer.pop("weight_error", None)
            layer.pop("activation_error", None)
    try:
        inst = parse_instance(data)
    except InvalidInstance as e:  # refusing it at load time is fine too
        assert "transmit_bits" in str(e) and str(transmit) in str(e)
        return
    bits = 16 if problem == "split" else 8
    plan = uniform_plan(inst, ["a", "b"], bits)  # b's output is cut and sent at transmit_bits
    evaluate(inst, plan)


def test_latency_table_missing_a_candidate_pair():
    data = edited("graph.layers.0.latency_ms", {"edge": {"w8a8": 1.0, "w4a4": 1.0, "w4a8": 1.0}})
    rejects(data, "instance.graph.layers[0].latency_ms.edge", "w8a4")


# ----- plans ------------------------------------------------------------------------------

def plan_rejects(inst, data, *fragments) -> str:
    with pytest.raises(InvalidPlan) as info:
        plan_from_dict(inst, data)
    msg = str(info.value)
    assert "\n" not in msg, msg
    for fragment in fragments:
        assert fragment in msg, f"{fragment!r} not in {msg!r}"
    return msg


def good_plan() -> dict:
    return {"format": "splitopt-plan/1", "instance": "tiny", "layers": {
        "a": {"device": "edge", "weight_bits": 8, "activation_bits": 4},
        "b": {"device": "edge", "weight_bits": 4, "activation_bits": 8},
        "c": {"device": "cloud"},
    }}


def test_good_plan_round_trips():
    inst = parse_instance(base())
    plan = plan_from_dict(inst, good_plan())
    assert edge_layers(inst, plan) == ["a", "b"]
    assert plan.weight_bits["c"] == 16
    assert plan_from_dict(inst, plan_to_dict(inst, plan)).key() == plan.key()


def test_plan_unknown_layer():
    data = good_plan()
    data["layers"]["zz"] = {"device": "cloud"}
    plan_rejects(parse_instance(base()), data, "plan.layers.zz", "unknown layer")


def test_plan_missing_layer():
    data = good_plan()
    del data["layers"]["b"]
    plan_rejects(parse_instance(base()), data, "plan.layers", "'b'", "missing")


@pytest.mark.parametrize("key, bits", [("weight_bits", 2), ("activation_bits", 16)])
def test_plan_bit_width_not_a_candidate(key, bits):
    data = good_plan()
    data["layers"]["a"][key] = bits
    plan_rejects(parse_instance(base()), data, f"plan.layers.a.{key}", f"{bits} bits", "[4, 8]")


def test_plan_split_problem_allows_only_the_reference_precision():
    inst = parse_instance(edited("settings.problem", "split"))
    plan_rejects(inst, good_plan(), "plan.layers.a.weight_bits", "8 bits", "[16]")


def test_plan_bits_not_an_integer():
    data = good_plan()
    data["layers"]["a"]["weight_bits"] = "8"
    plan_rejects(parse_instance(base()), data, "plan.layers.a.weight_bits", "'8'")
    del data["layers"]["a"]["weight_bits"]
    plan_rejects(parse_instance(base()), data, "plan.layers.a.weight_bits", "missing")


def test_plan_unknown_device():
    data = good_plan()
    data["layers"]["c"]["device"] = "gpu"
    plan_rejects(parse_instance(base()), data, "plan.layers.c.device", "'gpu'")


def test_plan_edge_layer_reading_a_cloud_layer():
    data = good_plan()
    data["layers"]["a"] = {"device": "cloud"}
    plan_rejects(parse_instance(base()), data, "plan.layers.b", "'a'", "closed under predecessors")


def test_plan_cloud_layer_at_wrong_bits():
    data = good_plan()
    data["layers"]["c"]["weight_bits"] = 8
    plan_rejects(parse_instance(base()), data, "plan.layers.c", "weight_bits", "8")


def test_plan_cloud_layer_at_wrong_bits_is_refused():
    data = good_plan()
    data["layers"]["c"]["activation_bits"] = 8
    plan_rejects(parse_instance(base()), data, "plan.layers.c", "cloud_bits=16")


def test_plan_not_an_object_and_wrong_format():
    inst = parse_instance(base())
    plan_rejects(inst, [], "plan", "JSON object")
    plan_rejects(inst, {**good_plan(), "format": "splitopt-plan/9"}, "plan.format", "splitopt-plan/9")
    plan_rejects(inst, {"layers": ["a"]}, "plan.layers")


def test_load_plan_malformed_json(tmp_path):
    inst = parse_instance(base())
    path = tmp_path / "plan.json"
    path.write_text("{'layers': 1}")
    with pytest.raises(InvalidPlan, match="malformed JSON") as info:
        load_plan(inst, path)
    assert str(path) in str(info.value)


def test_load_plan_accepts_solve_output(tmp_path):
    inst = parse_instance(base())
    path = tmp_path / "out.json"
    path.write_text(json.dumps({"status": "OPTIMAL", "plan": good_plan()}))
    assert edge_layers(inst, load_plan(inst, path)) == ["a", "b"]
    bad = good_plan()
    bad["layers"]["a"]["weight_bits"] = 3
    path.write_text(json.dumps({"plan": bad}))
    with pytest.raises(InvalidPlan, match=r"out\.json\.plan\.layers\.a\.weight_bits"):
        load_plan(inst, path)


def test_evaluate_refuses_a_malformed_plan_object():
    inst = parse_instance(base())
    plan = Plan({"a": "cloud", "b": "edge", "c": "cloud"}, {"a": 16, "b": 8, "c": 16}, {"a": 16, "b": 8, "c": 16})
    with pytest.raises(InvalidPlan, match="plan.layers.b"):
        evaluate(inst, plan)
    missing = Plan({"a": "cloud", "b": "cloud"}, {"a": 16, "b": 16}, {"a": 16, "b": 16})
    with pytest.raises(InvalidPlan, match="'c' is missing"):
        evaluate(inst, missing)


def test_evaluate_refuses_a_plan_without_bit_widths():
    inst = parse_instance(base())
    plan = Plan({"a": "edge", "b": "cloud", "c": "cloud"}, {}, {})
    with pytest.raises(InvalidPlan, match="plan.layers.a"):
        evaluate(inst, plan)


@pytest.mark.parametrize("name", ["edge_cloud", "chain", "mesh", "multiview"])
def test_a_family_without_a_foreign_format_refuses_foreign_data_in_one_line(name):
    from splitopt.families.registry import family

    with pytest.raises(InvalidInstance) as err:
        family(name).read({"nodes": [], "edges": []}, "peer.json")
    text = str(err.value)
    assert "\n" not in text and text.startswith("peer.json: ") and f"'{name}' imports no foreign format" in text


# ---- the fast schema check never accepts what jsonschema rejects --------------------------

def _paths(value, prefix=()):
    """Every (container path, key) in parsed JSON, containers first."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield prefix, k
            yield from _paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield prefix, i
            yield from _paths(v, prefix + (i,))


_ODD_VALUES = [None, True, False, 0, -1, 1, 0.5, -0.0, 2**53, 2**53 + 1, 10**400, 1e308, 5e-324, "", "8", "x\n",
               [], [1], {}, {"extra": 1}, {"8": 0.1}, {"8\n": 0.1}, {"w8a8": 1.0}, {"w8a8\n": 1.0}]


def test_fast_schema_check_never_accepts_what_jsonschema_rejects():
    """``schema_holds`` (jsonschema-rs) against ``jsonschema`` on every single-field mutation
    of the base instance: set to an odd value, deleted, or an unknown key added. The fast
    check must not accept an instance the reference rejects (a violation of that would let
    bad input through); that they disagree the other way only costs the slow path."""
    import jsonschema

    from splitopt.api import instance_schema
    from splitopt.core.instance_io import schema_holds

    schema = instance_schema()
    reference = jsonschema.Draft202012Validator(schema)
    raw = base()
    seen = rejected = 0
    for where, key in list(_paths(raw)):
        for change in [("set", v) for v in _ODD_VALUES] + [("delete", None), ("add", None)]:
            data = copy.deepcopy(raw)
            parent = data
            for p in where:
                parent = parent[p]
            if change[0] == "set":
                parent[key] = copy.deepcopy(change[1])
            elif change[0] == "delete":
                if isinstance(parent, list):
                    parent.pop(key)
                else:
                    del parent[key]
            elif isinstance(parent, dict):
                parent[f"unknown_{key}"] = 1
            else:
                continue
            ok_ref = not any(True for _ in reference.iter_errors(data))
            seen += 1
            rejected += not ok_ref
            assert not (schema_holds(data, schema) and not ok_ref), (where, key, change)
    assert seen > 1000 and rejected > seen // 4, (seen, rejected)
