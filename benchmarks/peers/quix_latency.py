"""Quix Streams as latency.py's worker (runs in the peers venv): the stateless enrichment of
quix_app.py (``{**value, "processed": True}``, at-least-once, Quix's defaults), for latency.py's
generator and reader, so both frameworks are timed by the same reader.

    python quix_latency.py --broker B --input T --output O --group G

Prints ``READY`` once its consumer owns every partition of the input (as streamkit's worker in
latency.py does, so the generator starts on a running pipeline) and stops when its stdin closes.
"""
import argparse
import sys
import tempfile
import threading

from quixstreams import Application

PARTITIONS = 4


def main() -> None:
    p = argparse.ArgumentParser()
    for name in ("--broker", "--input", "--output", "--group"):
        p.add_argument(name, required=True)
    args = p.parse_args()
    app = Application(broker_address=args.broker, consumer_group=args.group, auto_offset_reset="earliest",
                      processing_guarantee="at-least-once", state_dir=tempfile.mkdtemp(prefix="quix-state-"),
                      loglevel="WARNING")
    source = app.topic(args.input, value_deserializer="json")
    sink = app.topic(args.output, value_serializer="json")
    app.dataframe(source).apply(lambda value: {**value, "processed": True}).to_topic(sink)
    owned: set[int] = set()
    # Quix has no public assignment callback: its own one, handed to its consumer at subscribe, wrapped
    on_assign = app._on_assign  # noqa: SLF001

    def noted(consumer, topic_partitions):
        on_assign(consumer, topic_partitions)
        owned.update(tp.partition for tp in topic_partitions if tp.topic == args.input)
        if len(owned) == PARTITIONS:
            print("READY", flush=True)

    app._on_assign = noted  # noqa: SLF001

    def stop_at_eof() -> None:
        sys.stdin.read()  # until latency.py closes it
        app.stop()

    threading.Thread(target=stop_at_eof, daemon=True).start()
    app.run()


if __name__ == "__main__":
    main()
