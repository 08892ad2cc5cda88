"""A worker app for process-level tests: copies every input record to the output topic.

Configured by environment so each test uses its own topics and group:
PIPE_APP_ID, PIPE_IN, PIPE_OUT, PIPE_PARTITIONS (plus any STREAMKIT_* setting).
"""
import os

import streamkit as sk

app = sk.App(os.environ.get("PIPE_APP_ID", "pipeline"), commit_interval=0.5,
             session_timeout_ms=6000, heartbeat_interval_ms=1000)
partitions = int(os.environ.get("PIPE_PARTITIONS", "6"))
source = app.topic(os.environ.get("PIPE_IN", "pipe-in"), key_type=str, value_type=int, partitions=partitions)
output = app.topic(os.environ.get("PIPE_OUT", "pipe-out"), key_type=str, value_type=int, partitions=partitions)


@app.agent(source, sink=[output])
async def copy(stream):
    """Copy each record to the output topic."""
    async for value in stream:
        yield value
