"""Runs under faust-streaming itself: decodes what the streamkit app wrote (one hex-encoded value
per stdin line) with Faust's own codecs, and prints each as JSON (the class Faust built included).

    python decode_totals.py < values.hex
"""
import json
import sys

import faust
from faust.serializers.registry import Registry


class Total(faust.Record, namespace="bank.Total"):
    user: str
    window_start: float
    total: float


registry = Registry()
for line in sys.stdin:
    if line.strip():
        for declared in (Total, None):  # declared type, and untyped (the blessed key decides)
            value = registry.loads_value(declared, bytes.fromhex(line.strip()))
            print(json.dumps({"class": type(value).__name__, "user": value.user, "total": value.total}))
