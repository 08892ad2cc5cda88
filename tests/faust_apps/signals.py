"""Rebalance signals as a Faust user connects them (``import faust`` changed only): two workers
of this app split the topic's partitions, and each prints what it was given and what it lost.

    python signals.py worker -l info
"""
import streamkit as faust

app = faust.App("faust-signals", broker="kafka://localhost:9092", store="memory://", topic_partitions=4)
events_topic = app.topic("signal-events", value_type=str)


def mine(tps):
    return sorted(tp.partition for tp in tps if tp.topic == events_topic.get_topic_name())


@app.agent(events_topic)
async def consume(stream):
    async for value in stream:
        print(f"GOT {value}", flush=True)


@app.on_partitions_assigned.connect
async def on_assigned(app, assigned, **kwargs):
    print(f"ASSIGNED {mine(assigned)}", flush=True)


@app.on_partitions_revoked.connect
async def on_revoked(app, revoked, **kwargs):
    print(f"REVOKED {mine(revoked)}", flush=True)


@app.on_rebalance_complete.connect
async def on_rebalance_complete(app, **kwargs):
    print("REBALANCE complete", flush=True)


@app.on_worker_init.connect
def on_worker_init(app, **kwargs):
    print("WORKER init", flush=True)


if __name__ == "__main__":
    app.main()
