"""Timers, crontab, tasks, a service and a channel, as a Faust user writes them (``import faust``
changed only). Each prints what it did, which the test reads from the worker's output.

    RUN_TAG=x python scheduling.py worker -l info
"""
import os

import streamkit as faust

RUN_TAG = os.environ.get("RUN_TAG", "")

app = faust.App("faust-scheduling", broker="kafka://localhost:9092", store="memory://")
shouted = app.topic("scheduling-shouted", value_type=str)
words = app.channel(value_type=str)


@app.agent(words)
async def shout(stream):
    async for word in stream:
        await app.send(shouted, value=word.upper())
        print(f"SHOUTED {word.upper()}", flush=True)


@app.task
async def feed_the_channel():
    for word in ("alpha", "beta", "gamma"):
        await words.send(value=word + RUN_TAG)
    print("TASK fed the channel", flush=True)


@app.task(on_leader=True)
async def leader_task(app):
    print(f"LEADER TASK is_leader={app.is_leader()}", flush=True)


@app.timer(interval=0.5)
async def every_half_second():
    print("TIMER tick", flush=True)


@app.timer(interval=0.5, on_leader=True)
async def leader_tick():
    print("LEADER TIMER tick", flush=True)


@app.crontab("* * * * * */2", timezone="Europe/Oslo")
async def every_two_seconds():
    print("CRONTAB fired", flush=True)


@app.service
class Heartbeat(faust.Service):
    async def on_start(self):
        print("SERVICE started", flush=True)

    @faust.Service.task
    async def _beat(self):
        print("SERVICE background task ran", flush=True)

    async def on_stop(self):
        print("SERVICE stopped", flush=True)


@app.on_before_shutdown.connect
def before_shutdown(app, **kwargs):
    print("SIGNAL on_before_shutdown", flush=True)


if __name__ == "__main__":
    app.main()
