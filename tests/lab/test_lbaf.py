"""LBDatafile traces: every malformed field is one line naming the file and the key path (issue 8 item 5)."""

from __future__ import annotations

import copy
import json

import pytest

from hermes.errors import MeshError
from hermes.lab.lbaf import dataset_from_assignment, read_lbdatafile, write_lbdatafile


def _good(tmp_path):
    data = dataset_from_assignment([1.0, 2.0, 3.0], [0, 1, 1], 2)
    write_lbdatafile(tmp_path / "t", data)
    return json.loads((tmp_path / "t.1.json").read_text())


def _set(doc, path, value):
    """doc with the value at a key path (a list of keys and indices) replaced; ``...`` deletes it."""
    out = copy.deepcopy(doc)
    cur = out
    for k in path[:-1]:
        cur = cur[k]
    if value is ...:
        del cur[path[-1]]
    else:
        cur[path[-1]] = value
    return out


TASK = ["phases", 0, "tasks", 0]
# (what is changed in rank 1's file, value, expected words of the one-line message)
MALFORMED = [
    (["metadata"], [], "metadata: must be a mapping of keys, got a list"),
    (["phases"], 3, "phases: must be a valid list"),
    (["phases", 0, "id"], ..., "phases.0.id: Field required"),
    (["phases", 0, "id"], "0", "phases.0.id: must be a valid integer"),
    (["phases", 0, "tasks"], ..., "phases.0.tasks: Field required"),
    (TASK, 7, "phases.0.tasks.0: must be a mapping of keys, got a number"),
    ([*TASK, "entity", "home"], "1", "phases.0.tasks.0.entity.home: must be a valid integer"),
    ([*TASK, "entity", "home"], 1.5, "phases.0.tasks.0.entity.home: must be a valid integer"),
    ([*TASK, "entity", "home"], ..., "phases.0.tasks.0.entity.home: Field required"),
    ([*TASK, "entity", "migratable"], 1, "entity.migratable: must be a valid boolean"),
    ([*TASK, "entity", "seq_id"], ..., "either id (bit-encoded) or seq_id"),
    ([*TASK, "entity", "seq_id"], True, "entity.seq_id: must be a valid integer"),
    ([*TASK, "entity", "seq_id"], -1, "entity.seq_id: must be at least 0"),
    ([*TASK, "entity", "seq_id"], 2**64, "entity.seq_id: must be at most"),
    ([*TASK, "entity", "collection_id"], ..., "needs a collection_id"),
    ([*TASK, "entity"], [], "phases.0.tasks.0.entity: must be a mapping of keys, got a list"),
    ([*TASK, "time"], "fast", "phases.0.tasks.0.time: must be a valid number"),
    ([*TASK, "time"], -1.0, "phases.0.tasks.0.time: must be at least 0"),
    ([*TASK, "time"], "BIG", "phases.0.tasks.0.time: must be a finite number"),  # 1e400 reads as inf
    ([*TASK, "node"], None, "phases.0.tasks.0.node: must be a valid integer"),
    ([*TASK, "resource"], 3, "phases.0.tasks.0.resource: must be a valid string"),
    ([*TASK, "subphases"], [{"id": 0}], "phases.0.tasks.0.subphases.0.time: Field required"),
    (["phases", 0, "communications"], [{"type": "SendRecv", "from": {"type": "object", "seq_id": 1},
                                        "to": {"type": "object", "seq_id": 2}, "messages": "1", "bytes": 8.0}],
     "phases.0.communications.0.messages: must be a valid integer"),
    (["phases", 0, "communications"], [{"type": "SendRecv", "from": {"type": "object"},
                                        "to": {"type": "object", "seq_id": 2}, "messages": 1, "bytes": 8.0}],
     "phases.0.communications.0.from: either id"),
    (["phases", 0, "communications"], [{"type": "SendRecv", "from": {"type": "object", "seq_id": 1},
                                        "to": {"type": "object", "seq_id": 2}, "messages": 1}],
     "phases.0.communications.0.bytes: Field required"),
    (["metadata", "rank"], "1", "metadata.rank: must be a valid integer"),
    (["metadata", "shared_node"], {"id": 0}, "metadata.shared_node.size: Field required"),
    (["type"], "LBStatsfile", "type: must be 'LBDatafile'"),
]


@pytest.mark.parametrize("path, value, message", MALFORMED, ids=[m for _, _, m in MALFORMED])
def test_malformed_field_is_one_line_naming_file_and_key(tmp_path, path, value, message):
    doc = _set(_good(tmp_path), path, value)
    (tmp_path / "t.1.json").write_text(json.dumps(doc).replace('"BIG"', "1e400"))
    with pytest.raises(MeshError) as err:
        read_lbdatafile(tmp_path / "t")
    text = str(err.value)
    assert "\n" not in text and text.startswith(f"{tmp_path / 't.1.json'}: ")
    assert message in text, text


@pytest.mark.parametrize("content, message", [
    (b"[1, 2]", "must hold a JSON object"),
    (b'{"type": "LBDatafile", "phases": [{"id": 0, "tasks": [{"time": NaN}]}]}', "not JSON .NaN is not a JSON"),
    (b'{"phases": []}', "type must be 'LBDatafile'"),
    (b"{" * 100_000, "nested 100000 levels deep"),
])
def test_not_an_lbdatafile(tmp_path, content, message):
    write_lbdatafile(tmp_path / "t", dataset_from_assignment([1.0, 2.0], [0, 1], 2))
    (tmp_path / "t.1.json").write_bytes(content)
    with pytest.raises(MeshError, match=message):
        read_lbdatafile(tmp_path / "t")


def test_a_directory_is_not_a_trace(tmp_path):
    (tmp_path / "d.0.json").mkdir()
    with pytest.raises(MeshError, match="is a directory"):
        read_lbdatafile(tmp_path / "d")
    with pytest.raises(MeshError, match="is a directory"):
        read_lbdatafile(tmp_path / "d", n_ranks=1)


def test_the_written_form_passes_the_schema_and_round_trips(tmp_path):
    data = dataset_from_assignment([0.0, 2.5, 1e100], [1, 0, 1], 2, ids=[7, 2**62, 0])
    write_lbdatafile(tmp_path / "w", data)
    back = read_lbdatafile(tmp_path / "w")
    assert back.ids.tolist() == [0, 7, 2**62] and back.loads.tolist() == [1e100, 0.0, 2.5]
