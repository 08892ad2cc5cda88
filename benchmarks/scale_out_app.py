"""The scale-out pipeline as a module, for ``streamkit worker -A scale_out_app:app --processes N``
(``scale_out.py``'s one-command runs, of any ``--kind``): the same ``pipeline.build_app`` and the same sampling as
its separately started workers, configured by ``SCALE_OUT_*`` variables (the supervisor starts
each member with the command's environment). Each member prints ``RESULT {...}`` once it has
run dry and keeps running until the supervisor is stopped."""
from __future__ import annotations

import json
import os
from typing import Any

from pipeline import build_app
from scale_out import KINDS, sample_until_idle, share_assigned


def _setting(name: str) -> str:
    value = os.environ.get(f"SCALE_OUT_{name}")
    if not value:
        raise SystemExit(f"scale_out_app: SCALE_OUT_{name} is not set; scale_out.py sets it for its one-command runs")
    return value


INPUT = _setting("INPUT")
processed = {"n": 0}


def _count(_order: Any) -> None:
    processed["n"] += 1


async def _before_start() -> None:
    await _wait_for_share()


app, _agent = build_app(group=_setting("GROUP"), broker=_setting("BROKER"), driver=_setting("DRIVER"),
                        input_topic=INPUT, output_topic=_setting("OUTPUT"), on_record=_count,
                        before_start=_before_start, stateful=KINDS[_setting("KIND")])
_wait_for_share = share_assigned(app, INPUT, int(_setting("WORKERS")), _setting("GROUP"))


@app.task
async def report_when_dry() -> None:
    result = await sample_until_idle(app, INPUT, processed)
    print("RESULT " + json.dumps(result), flush=True)
