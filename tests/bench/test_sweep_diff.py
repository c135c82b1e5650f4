"""bench/sweep/diff.py: the fields two sweeps differ in, checked by hand on small sweeps."""

from __future__ import annotations

from bench.sweep import UNSET, FieldChange, describe_changes, parse_sweep, sweep_changes

BASE = """
name: small
model: sim-tiny
server: {backend: sim, args: {max-running-requests: 8}}
grid: {batch_sizes: [1, 4], spec_modes: [v2], steps: [2]}
workload: [{input_len: 32, output_len: 16}, {input_len: 64, output_len: 16}]
measure: {min_window_s: 10}
repeats: 2
"""


def _changes(old: str, new: str) -> list[FieldChange]:
    return sweep_changes(parse_sweep(old), parse_sweep(new))


def test_the_same_sweep_in_other_words_has_no_changes() -> None:
    # Comments, block style instead of flow style, another key order, a default spelled out, 10 for 10.0.
    reworded = """
# the same sweep, written out by hand
repeats: 2
name: small
model: sim-tiny
server:
  backend: sim
  args:
    max-running-requests: 8   # a comment
grid:
  spec_modes: [v2]
  batch_sizes: [1, 4]
  steps: [2]
  topk: [1]                   # the default
workload:
  - {input_len: 32, output_len: 16}
  - {output_len: 16, input_len: 64}
measure:
  min_window_s: 10.0
"""
    assert _changes(BASE, reworded) == []
    assert _changes(BASE, BASE) == []


def test_a_nested_field_is_named_by_its_dotted_path() -> None:
    changed = BASE.replace("min_window_s: 10", "min_window_s: 5, cpu_probe: server")
    assert _changes(BASE, changed) == [
        FieldChange("measure.min_window_s", 10.0, 5.0),
        FieldChange("measure.cpu_probe", "runner", "server"),
    ]


def test_a_list_of_values_changes_as_a_whole_and_a_list_of_workloads_per_entry() -> None:
    changed = BASE.replace("batch_sizes: [1, 4]", "batch_sizes: [1, 8]").replace(
        "{input_len: 64, output_len: 16}", "{input_len: 64, output_len: 16, seed: 7}"
    )
    assert _changes(BASE, changed) == [
        FieldChange("grid.batch_sizes", [1, 4], [1, 8]),
        FieldChange("workload[1].seed", 1, 7),
    ]
    one_workload = BASE.replace("[{input_len: 32, output_len: 16}, {input_len: 64, output_len: 16}]", "{}")
    (change,) = _changes(BASE, one_workload)  # a list against one mapping: the field as a whole
    assert change.path == "workload" and isinstance(change.old, list) and isinstance(change.new, dict)


def test_a_key_one_side_lacks_is_unset_and_a_flag_value_keeps_its_type() -> None:
    added = BASE.replace("{max-running-requests: 8}", "{max-running-requests: 8, disable-radix-cache: true}")
    assert _changes(BASE, added) == [FieldChange("server.args.disable-radix-cache", UNSET, True)]
    assert _changes(added, BASE) == [FieldChange("server.args.disable-radix-cache", True, UNSET)]
    # `1` and `true` are the same to Python, not to SGLang's argument parser.
    as_int = BASE.replace("{max-running-requests: 8}", "{max-running-requests: 8, disable-radix-cache: 1}")
    assert _changes(added, as_int) == [FieldChange("server.args.disable-radix-cache", True, 1)]


def test_describe_lists_old_and_new_values_then_how_many_more() -> None:
    changes = [FieldChange("measure.min_window_s", 10.0, 5.0), FieldChange("warmup.after_start_s", None, 3.0)]
    assert describe_changes(changes) == "measure.min_window_s: 10.0 -> 5.0, warmup.after_start_s: null -> 3.0"
    assert describe_changes([FieldChange("server.env.X", UNSET, "1")]) == 'server.env.X: (unset) -> "1"'
    many = [FieldChange(f"server.env.V{i}", i, i + 1) for i in range(13)]
    text = describe_changes(many)
    assert text.count(" -> ") == 10 and text.endswith("server.env.V9: 9 -> 10, and 3 more")
    long = describe_changes([FieldChange("grid.batch_sizes", list(range(100)), [1])])
    assert len(long) < 100 and "..." in long


def test_a_default_left_out_or_written_out_is_the_same_and_a_changed_default_is_named() -> None:
    """Fields whose default depends on the sweep compare as resolved: the value the runner uses."""
    gpu = BASE.replace("backend: sim", "backend: sglang").replace(
        "measure: {min_window_s: 10}", "measure: {}"
    )
    spelled = gpu.replace(
        "measure: {}", "measure: {min_window_s: 10, drift_check: true}\nwarmup: {after_start_s: 10}"
    )
    assert _changes(gpu, spelled) == []  # SGLang's defaults: 10 s windows, warmup after start, drift check on
    targeted = gpu.replace("measure: {}", "measure: {ratio_target: 0.05}").replace("[v2]", "[v1, v2]")
    assert (
        _changes(targeted, targeted.replace("ratio_target: 0.05", "ratio_target: 0.05, max_repeats: 6")) == []
    )
    # The same text on another backend resolves differently: the change is named by the values in use.
    assert _changes(gpu, gpu.replace("backend: sglang", "backend: sim")) == [
        FieldChange("server.backend", "sglang", "sim"),
        FieldChange("warmup.after_start_s", 10.0, 0.0),
        FieldChange("measure.min_window_s", 10.0, 0.0),
        FieldChange("measure.drift_check", True, False),  # on for GPU servers, off for an unpaired stand-in
    ]
