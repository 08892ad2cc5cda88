"""docs/joins.md's example (examples/shop_joins.py) run as deployed on the test driver, every
output checked; each Python block of the guide is taken from the example, and the topology
picture in the guide is what ``streamkit topology --format mermaid`` prints for it."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

from streamkit.testing.driver import TestDriver
from tests.unit.project.test_examples_and_timers import load_example

ROOT = Path(__file__).resolve().parents[3]
GUIDE = (ROOT / "docs" / "joins.md").read_text()


@pytest.mark.parametrize("partitions", [None, "1"])  # one partition: every order shares a stream time
async def test_the_shop_example_gives_each_join_its_outputs(monkeypatch, tmp_path, partitions):
    if partitions:
        monkeypatch.setenv("STREAMKIT_TOPIC_PARTITIONS", partitions)
    ex = load_example("shop_joins", monkeypatch, tmp_path)
    async with TestDriver(ex.app) as driver:
        await ex.feed(tables_loaded=driver.settle)
        await driver.settle()

        def values(topic):
            return sorted((r.key, tuple(r.value.items()) if isinstance(r.value, dict) else r.value)
                          for r in driver.records(topic))

        assert values(ex.enriched) == [("o1", (("order", "o1"), ("customer", "Ann"))),
                                       ("o2", (("order", "o2"), ("customer", "Bob"))),
                                       ("o3", (("order", "o3"), ("customer", "Ann"))),
                                       ("o4", (("order", "o4"), ("customer", None)))]
        # as of each order's time: 2.0 until minute 5, 3.0 from then
        assert values(ex.priced) == [("o1", (("order", "o1"), ("total", 2.0))),
                                     ("o2", (("order", "o2"), ("total", 4.0))),
                                     ("o3", (("order", "o3"), ("total", 9.0))),
                                     ("o4", (("order", "o4"), ("total", 12.0)))]
        assert dict(ex.profiles.items()) == {"c1": (ex.Customer(name="Ann"), "gold"),
                                             "c2": (ex.Customer(name="Bob"), None)}
        assert values(ex.paid) == [("o1", "pay-o1"), ("o2", "pay-o2")]
        assert values(ex.unpaid) == [("o3", "o3"), ("o4", "o4")]


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", GUIDE, re.S)


def test_every_python_block_of_the_guide_is_in_the_example():
    example = (ROOT / "examples" / "shop_joins.py").read_text()
    blocks = python_blocks()
    assert len(blocks) >= 4
    for block in blocks:
        assert block.strip() in example, f"docs/joins.md shows code examples/shop_joins.py lacks:\n{block}"


def test_the_guides_topology_picture_is_what_the_command_prints():
    command = re.search(r"```bash\n(streamkit topology [^\n]*)\n```", GUIDE).group(1)
    argv = command.split()
    done = subprocess.run([str(Path(sys.executable).with_name("streamkit")), *argv[1:]], cwd=ROOT / "examples",
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    # the picture it prints: the mermaid block after the command
    picture = re.search(r"```bash\nstreamkit topology [^\n]*\n```.*?```mermaid\n(.*?)```", GUIDE, re.S).group(1)
    assert done.stdout.strip() == picture.strip()
