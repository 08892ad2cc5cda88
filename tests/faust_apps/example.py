"""The ``example`` module of Faust's testing guide (``import faust`` changed only): an agent that
calls another agent."""
import streamkit as faust

app = faust.App('example-test-agent-call')


@app.agent()
async def foo(stream):
    async for value in stream:
        await bar.send(value)
        yield value


@app.agent()
async def bar(stream):
    async for value in stream:
        yield value + 'YOLO'
