"""The Faust changelog records tests/unit/tables/test_faust_changelogs.py restores are Faust's own
bytes: faust-streaming 0.15.3 computes them here, by the calls its tables make (a tumbling
window's range, its json codec on ``(key, range)``; a SetTable's ``(operation, key)`` and element)."""
import json
import subprocess

from tests.faust_apps.faust_env import faust_python
from tests.unit.tables.test_faust_changelogs import FAUST_SET, FAUST_WINDOWED

FAUST_SIDE = """
import json
from faust import TumblingWindow
from faust.serializers import codecs
from faust.tables.sets import OPERATION_ADD, OPERATION_DISCARD, OPERATION_UPDATE

def record(key, value):  # Table.send_changelog: the json codec for the key and the value
    return [codecs.dumps("json", key).decode(), codecs.dumps("json", value).decode()]

[window] = TumblingWindow(10).ranges(1600000005.0)  # Table._set_windowed: one record per range
print(json.dumps({
    "windowed": [record(("counter", window), 3)],
    # ChangeloggedSet.add, .update ([added, removed] sets), .discard: send_changelog_event(key, operation, value)
    "set": [record((OPERATION_ADD, "oslo"), "bob"), record((OPERATION_UPDATE, "rome"), [{"carol"}, set()]),
            record((OPERATION_DISCARD, "oslo"), "bob")],
}))
"""


def test_the_restored_records_are_what_faust_writes(tmp_path):
    out = subprocess.run([str(faust_python()), "-c", FAUST_SIDE], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    faust = json.loads(out.stdout.strip().splitlines()[-1])
    ours = {"windowed": FAUST_WINDOWED, "set": FAUST_SET}
    assert faust == {name: [[k.decode(), v.decode()] for k, v in records] for name, records in ours.items()}
