"""Faust's windowed_aggregation.py, the import the only line changed, run on the in-memory
transport: its synchronous on_window_close sends each closed window's aggregate with send_soon."""
import warnings

import orjson
import pytest

from streamkit.testing import wait_for
from tests.faust_apps.test_windowing_examples import logged, on_memory


async def test_the_windowed_aggregation_example_sends_each_closed_window():
    module = on_memory("windowed_aggregation")
    app = module.app
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # a coroutine never awaited: a send that never happened
        async with app.running():
            # its timer sends a record every 0.1 s, dated now: a 10 s window closes within about 10 s
            await wait_for(lambda: logged(app, module.SINK), 25, message="a closed window's aggregate sent")
    aggregate = orjson.loads(logged(app, module.SINK)[0].value)
    start = aggregate["date"]
    in_window = [r for r in (orjson.loads(m.value) for m in logged(app, module.TOPIC))
                 if start <= r["date"] < start + module.WINDOW]
    assert aggregate["count"] == len(in_window) > 0
    assert aggregate["mean"] == pytest.approx(sum(r["value"] for r in in_window) / len(in_window))
