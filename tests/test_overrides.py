"""Scenario overrides (``--set PATH=VALUE``, ``splitopt.core.overrides``): the path grammar
and its errors on plain JSON data, the library's ``load_instance``/``parse_instance``
with ``overrides``, and the command line: an override changes the answer in the
expected direction, an overridden value is checked exactly like one in the file, and
every bad ``--set`` is one stderr line naming it, exit 2.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from splitopt.api import instance_schema, load_instance, parse_instance
from splitopt.cli.app import app
from splitopt.core.errors import InvalidInstance, InvalidOption
from splitopt.core.overrides import Override, apply_overrides, parse_override, parse_overrides, parse_value
from splitopt.families.edge_cloud.data import uplink

ROOT = Path(__file__).resolve().parent.parent
RESNET = ROOT / "instances" / "resnet50_eyeriss.json"
TOY = ROOT / "tests" / "data" / "toy.json"
PEER = ROOT.parent / "shared" / "peer-instances" / "dnn-partitioning" / "throughput-inputs" / "LayerGraphs" / \
    "bert24_inference.json"
runner = CliRunner()


def data() -> dict:
    """A small document shaped like an instance (no schema needed)."""
    return {
        "name": "d",
        "graph": {"inputs": [{"name": "x"}], "layers": [{"name": "a", "macs": 1}, {"name": "b", "macs": 2},
                                                       {"name": "7", "macs": 3}]},
        "devices": [{"name": "edge", "memory_bytes": 1e6}, {"name": "cloud", "memory_bytes": 1e9}],
        "links": [{"source": "edge", "target": "cloud", "bandwidth_bits_per_s": 1e6},
                  {"source": "cloud", "target": "edge", "bandwidth_bits_per_s": 2e6}],
        "settings": {"objective": "latency", "bit_widths": [4, 8], "latency_ms": {"jetson.nano": 1.0}},
        "edges": [{"sourceId": 1, "destId": 2, "cost": 0.5}],
        "tags": ["t0", "t1"],
    }


def applied(*overrides: str, schema=None) -> dict:
    return apply_overrides(data(), list(overrides), schema)


def refused(*overrides: str, schema=None, label: str = "override") -> str:
    with pytest.raises(InvalidOption) as info:
        apply_overrides(data(), list(overrides), schema, label)
    msg = str(info.value)
    assert "\n" not in msg and len(msg) < 400, msg
    return msg


# ----- values -----------------------------------------------------------------------------

@pytest.mark.parametrize("raw, value", [
    ("5e6", 5e6), ("3", 3), ("-2.5", -2.5), ("true", True), ("false", False), ("null", None), ("[4, 8]", [4, 8]),
    ('{"a": 1}', {"a": 1}), ('"123"', "123"), ("throughput", "throughput"), (" spaced ", "spaced"), ("", ""),
    ("edge->cloud", "edge->cloud"),
])
def test_values_are_json_else_strings(raw, value):
    assert parse_value(raw) == value
    assert type(parse_value(raw)) is type(value)


@pytest.mark.parametrize("raw", ["NaN", "Infinity", "-Infinity", "1e999", "[1, 1e999]"])
def test_non_finite_values_are_refused(raw):
    with pytest.raises(ValueError):
        parse_value(raw)
    with pytest.raises(InvalidOption, match="finite"):
        parse_override(f"settings.objective={raw}", "--set")


# ----- paths ------------------------------------------------------------------------------

def test_dotted_keys_indices_names_and_pairs():
    out = applied("settings.objective=throughput", "graph.layers[1].macs=20", "devices[cloud].memory_bytes=2e9",
                  "links[cloud->edge].bandwidth_bits_per_s=5", "tags[0]=x")
    assert out["settings"]["objective"] == "throughput"
    assert out["graph"]["layers"][1]["macs"] == 20
    assert out["devices"][1]["memory_bytes"] == 2e9
    assert out["links"][1]["bandwidth_bits_per_s"] == 5 and out["links"][0]["bandwidth_bits_per_s"] == 1e6
    assert out["tags"] == ["x", "t1"]


def test_the_input_is_not_changed_and_no_overrides_returns_it():
    original = data()
    before = copy.deepcopy(original)
    apply_overrides(original, ["settings.objective=throughput"])
    assert original == before
    assert apply_overrides(original, []) is original and apply_overrides(original, None) is original


def test_layers_and_inputs_are_short_for_the_graph():
    out = applied("layers[b].macs=9", "layers.0.macs=8", "inputs[x].name=y")
    assert [l["macs"] for l in out["graph"]["layers"]] == [8, 9, 3]
    assert out["graph"]["inputs"][0]["name"] == "y"
    assert "layers" not in out and "inputs" not in out


def test_a_quoted_selector_is_a_name_even_if_it_looks_like_an_index():
    assert applied('layers["7"].macs=70')["graph"]["layers"][2]["macs"] == 70
    assert applied("layers[2].macs=70")["graph"]["layers"][2]["macs"] == 70


def test_brackets_on_an_object_select_a_key_with_dots():
    assert applied("settings.latency_ms[jetson.nano]=2")["settings"]["latency_ms"]["jetson.nano"] == 2


def test_peer_edges_are_selected_by_their_ids():
    assert applied("edges[1->2].cost=0.25")["edges"][0]["cost"] == 0.25


def test_overrides_apply_in_order_and_replace_whole_values():
    out = applied("settings.bit_widths=[2]", "settings.bit_widths[0]=3",
                  'devices[0]={"name": "e", "memory_bytes": 5}', "devices[e].memory_bytes=1")
    assert out["settings"]["bit_widths"] == [3]
    assert out["devices"][0] == {"name": "e", "memory_bytes": 1}


def test_parsed_overrides_keep_their_label():
    ov = parse_override("settings.nope=1", "--set")
    assert isinstance(ov, Override) and ov.value == 1 and [s.token for s in ov.steps] == ["settings", "nope"]
    with pytest.raises(InvalidOption, match=r"^--set settings\.nope=1: no key 'nope' in settings"):
        apply_overrides(data(), [ov])
    assert parse_overrides(None) == ()


# ----- errors -----------------------------------------------------------------------------

@pytest.mark.parametrize("text, fragment", [
    ("settings.objective", "must be PATH=VALUE"),
    ("=3", "the path before '=' is empty"),
    ("settings..objective=1", "empty key"),
    ("settings.=1", "ends with '.'"),
    (".settings=1", "empty key"),
    ("links[0=1", "never closed"),
    ("links]0=1", "has no '['"),
    ("links[]=1", "empty selector"),
    ("[0].x=1", "must start with a key"),
    ("links[0]x=1", "expected '.' or '['"),
])
def test_malformed_overrides_are_one_line(text, fragment):
    with pytest.raises(InvalidOption) as info:
        parse_override(text, "--set")
    msg = str(info.value)
    assert msg.startswith(f"--set {text}: ") and fragment in msg and "\n" not in msg, msg


def test_a_single_string_is_not_a_list_of_overrides():
    with pytest.raises(InvalidOption, match="a list"):
        parse_overrides("settings.objective=x")


def test_a_missing_key_is_named_with_the_keys_there():
    msg = refused("settings.objectiv=throughput", label="--set")
    assert msg.startswith("--set settings.objectiv=throughput: no key 'objectiv' in settings")
    assert "keys: bit_widths, latency_ms, objective" in msg and "only existing keys" in msg


def test_a_missing_step_is_named():
    msg = refused("setings.objective=1")
    assert "no key 'setings' at the top level" in msg and "devices" in msg and "settings" in msg


def test_long_listings_are_cut():
    big = {"items": [{"name": f"n{i}"} for i in range(30)]}
    with pytest.raises(InvalidOption) as info:
        apply_overrides(big, ["items[zz].x=1"])
    msg = str(info.value)
    assert "no item named 'zz' in items (names: n0, n1" in msg and "(30 in all)" in msg and "n29" not in msg, msg


def test_a_selector_that_matches_nothing_lists_the_names():
    assert "no item named 'fog' in devices (names: edge, cloud)" in refused("devices[fog].memory_bytes=1")
    assert "no item 'edge->fog' in links (source->target: edge->cloud, cloud->edge)" in \
        refused("links[edge->fog].latency_ms=1")


def test_a_selector_that_matches_several_items_says_so():
    d = data()
    d["devices"].append({"name": "edge"})
    with pytest.raises(InvalidOption, match=r"2 items named 'edge' in devices \(indices 0, 2\)"):
        apply_overrides(d, ["devices[edge].memory_bytes=1"])


@pytest.mark.parametrize("text, fragment", [
    ("links[2].latency_ms=1", "index 2 is out of range for links (2 items; indices 0..1)"),
    ("links[-1].latency_ms=1", "index -1 is out of range"),
    ("settings.objective[0]=1", "settings.objective is a string, not a list or an object: it has no [0]"),
    ("settings.objective.x=1", "settings.objective is a string, not a list or an object: it has no 'x'"),
    ("devices.edge.memory_bytes=1", "devices is a list: select an item with [index], [name] or [source->target]"),
    ("tags[t0]=1", "the items of tags have no names"),
])
def test_steps_that_do_not_fit_the_data(text, fragment):
    assert fragment in refused(text)


def test_new_keys_only_where_the_schema_names_them():
    schema = instance_schema()
    inst = json.loads(RESNET.read_text())
    assert "objective" not in inst["settings"] and "mesh" not in inst["settings"]
    out = apply_overrides(inst, ["settings.objective=latency", "links[0].bus=b", "layers[conv1].latency_ms={}",
                                 "layers[conv1].latency_ms.tpu=0.5", "layers[conv1].weight_error.3=0.1"], schema)
    assert out["settings"]["objective"] == "latency" and out["links"][0]["bus"] == "b"
    conv1 = out["graph"]["layers"][0]
    assert conv1["latency_ms"] == {"tpu": 0.5} and conv1["weight_error"]["3"] == 0.1
    for text, fragment in [("settings.objectiv=latency", "the schema allows no such key there"),
                           ("source.anything=1", "the schema allows no such key there"),
                           ("layers[conv1].weight_error.w8=1", "the schema allows no such key there"),
                           ("settings.mesh.x=1", "no key 'mesh' in settings")]:
        with pytest.raises(InvalidOption) as info:
            apply_overrides(inst, [text], schema)
        assert fragment in str(info.value), str(info.value)


# ----- the library ------------------------------------------------------------------------

def test_load_instance_with_overrides():
    inst = load_instance(RESNET, overrides=["links[eyeriss->tpu].bandwidth_bits_per_s=5e6",
                                            "devices[eyeriss].memory_bytes=2e6", "settings.problem=split"])
    assert uplink(inst).bandwidth_bits_per_s == 5e6
    assert inst.device_by_name["eyeriss"].memory_bytes == 2e6 and inst.problem == "split"


def test_parse_instance_with_overrides_leaves_the_data_alone():
    raw = json.loads(TOY.read_text())
    before = copy.deepcopy(raw)
    inst = parse_instance(raw, overrides=["layers[a].macs=5"])
    assert inst.layer_by_name["a"].macs == 5 and raw == before


def test_an_overridden_value_is_checked_like_the_file():
    raw = json.loads(TOY.read_text())
    edited = copy.deepcopy(raw)
    edited["devices"][0]["memory_bytes"] = 0
    with pytest.raises(InvalidInstance) as from_file:
        parse_instance(edited)
    with pytest.raises(InvalidInstance) as from_override:
        parse_instance(raw, overrides=["devices[0].memory_bytes=0"])
    assert str(from_file.value) == str(from_override.value)


# ----- the command line -------------------------------------------------------------------

def cli(*args) -> object:
    return runner.invoke(app, [str(a) for a in args])


def one_line(res, *needles: str, code: int = 2) -> str:
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert res.exit_code == code, (res.exit_code, res.stdout, res.stderr)
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def solved(*sets: str) -> dict:
    args = ["solve", RESNET, "--json"]
    for s in sets:
        args += ["--set", s]
    res = cli(*args)
    assert res.exit_code == 0, (res.stdout, res.stderr)
    return json.loads(res.stdout)


def test_bandwidth_moves_the_split_the_expected_way():
    link = "links[eyeriss->tpu].bandwidth_bits_per_s"
    base, slow, fast = solved(), solved(f"{link}=3e4"), solved(f"{link}=3e9")
    sent = {k: r["metrics"]["transmitted_bytes"] for k, r in (("base", base), ("slow", slow), ("fast", fast))}
    # a slower link never sends more; a faster one never sends less, and here sends the raw input
    assert sent["slow"] <= sent["base"] <= sent["fast"], sent
    assert sent["fast"] > sent["base"] and fast["metrics"]["edge_layer_count"] == 0
    assert slow["objective"] > base["objective"] > fast["objective"]
    assert all(r["status"] == "OPTIMAL" for r in (base, slow, fast))


def test_evaluate_with_set_uses_the_edited_instance(tmp_path):
    plan = tmp_path / "plan.json"
    res = cli("solve", TOY, "--output", plan)
    assert res.exit_code == 0, res.stderr
    base = json.loads(cli("evaluate", TOY, plan, "--json").stdout)["metrics"]
    slow = cli("evaluate", TOY, plan, "--json", "--set", "layers[a].macs=1e9")
    assert slow.exit_code == 0, slow.stderr
    assert json.loads(slow.stdout)["metrics"]["total_ms"] > base["total_ms"]


def test_validate_and_pareto_take_set():
    res = cli("validate", RESNET, "--set", "settings.problem=split")
    assert res.exit_code == 0 and "problem split," in res.stdout, res.stdout
    res = cli("pareto", TOY, "--points", "2", "--json", "--set", "layers[a].macs=2e6")
    assert res.exit_code == 0, res.stderr
    one_line(cli("pareto", TOY, "--points", "2", "--set", "layers[zz].macs=1"), "--set layers[zz].macs=1",
             "no item named 'zz'")


@pytest.mark.parametrize("command", ["solve", "validate", "pareto", "evaluate"])
@pytest.mark.parametrize("value, needles", [
    ("links[eyeriss->tpu].bandwidth", ["--set links[eyeriss->tpu].bandwidth:", "must be PATH=VALUE"]),
    ("links[eyeriss->tpu].bandwidth=5e6", ["no key 'bandwidth' in links[eyeriss->tpu]",
                                           "keys: bandwidth_bits_per_s, latency_ms, source, target"]),
    ("devices[edge].memory_bytes=2e6", ["--set devices[edge].memory_bytes=2e6:",
                                        "no item named 'edge' in devices (names: eyeriss, tpu)"]),
    ("links[3].latency_ms=1", ["index 3 is out of range for links"]),
    ("settings.problem[0]=x", ["settings.problem is a string, not a list or an object"]),
    ("settings.error_budget=NaN", ["--set settings.error_budget=NaN:", "finite"]),
])
def test_a_bad_set_is_one_line_exit_2(command, value, needles):
    args = [command, RESNET] + ([RESNET] if command == "evaluate" else []) + ["--set", value]
    one_line(cli(*args), *needles)


def test_a_malformed_set_is_refused_before_reading_the_instance(tmp_path):
    one_line(cli("solve", tmp_path / "missing.json", "--set", "oops"), "--set oops:", "must be PATH=VALUE")


@pytest.mark.parametrize("value, message", [
    ("devices[0].memory_bytes=0", "instance.devices[0].memory_bytes: must be greater than 0, got 0"),
    ("layers[3].weights=-1", "instance.graph.layers[3].weights: must be at least 0, got -1"),
    ("settings.objective=throughput", "instance.settings.objective: 'throughput' is not an objective"),
    ("name=7", "instance.name: 7 is not of type 'string'"),
    ("settings.edge=fog", "instance.settings.edge: unknown device 'fog'"),
])
def test_an_invalid_result_is_the_files_error(value, message):
    one_line(cli("validate", RESNET, "--set", value), "error: " + message)


def test_help_shows_set_with_its_brackets():
    for command in ("solve", "evaluate", "pareto", "validate"):
        res = cli(command, "--help")
        text = " ".join(res.stdout.split())
        assert "--set" in text and "PATH=VALUE" in text and "[source->target]" in text, (command, res.stdout)


@pytest.mark.skipif(not PEER.is_file(), reason="peer instances not beside the checkout")
def test_set_on_a_peer_file():
    res = cli("validate", PEER, "--set", "maxFPGAs=2", "--set", "nodes[node3].cpuLatency=1.5")
    assert res.exit_code == 0 and "2 accelerators" in res.stdout, (res.stdout, res.stderr)
    one_line(cli("validate", PEER, "--set", "nodes[node3].extra=1"), "no key 'extra' in nodes[node3]",
             "only existing keys can be set here")
    one_line(cli("validate", PEER, "--set", "maxFPGAs=-1"), "maxFPGAs", "got -1")
