"""Word count: sentences in, per-word running counts out.

    streamkit worker -A wordcount:app --web-port 6066   # run the worker (in this directory)
    python wordcount.py feed sample.txt                 # send each line as a sentence
    python wordcount.py show --expect N                 # print the counts once N words were counted
    curl http://127.0.0.1:6066/count/fox/               # ask any worker for one word's count

`split` sends every word keyed by the word, so all occurrences of a word reach the partition
that owns its count. Counts live in a changelog-backed table (RocksDB by default), so they
survive restarts; `/count/{word}/` is answered by whichever worker owns the word.
"""
import asyncio
import os
import sys

import streamkit as sk

app = sk.App("wordcount", broker=os.environ.get("STREAMKIT_BROKER", "127.0.0.1:9092"),
             session_timeout_ms=6000, heartbeat_interval_ms=1000)
sentences = app.topic("wordcount-sentences", value_type=str, partitions=4)
words = app.topic("wordcount-words", key_type=str, value_type=str, partitions=4)
counts_topic = app.topic("wordcount-counts", key_type=str, value_type=int, partitions=4)
counts = app.Table("word-counts", default=int, partitions=4, help="Occurrences of each word.")


@app.agent(sentences)
async def split(stream):
    """Split sentences into lower-case words, keyed by the word."""
    async for sentence in stream:
        for word in sentence.lower().split():
            await words.send(key=word, value=word)


@app.agent(words, sink=[counts_topic])
async def count(stream):
    """Count each word; the running count goes to wordcount-counts keyed by the word."""
    async for word in stream:
        counts[word] += 1
        yield counts[word]


@app.page("/count/{word}/")
@app.table_route(table=counts, match_info="word")
async def word_count(web, request, word):
    return web.json({"word": word, "count": counts[word]})


async def feed(path: str) -> None:
    with open(path) as lines:
        for line in lines:
            if line.strip():
                await sentences.send(value=line.strip())
    await app.flush()
    await app.stop()


def show(expect: int, timeout: float = 60.0) -> None:
    import time

    from streamkit.testing import read_topic

    deadline = time.monotonic() + timeout
    while True:  # the worker may still be joining its group: poll until every word is counted
        latest: dict[str, int] = {}
        for m in read_topic(app.conf, counts_topic.name, timeout=10, idle=1.0):
            word = m.key().decode()
            latest[word] = max(latest.get(word, 0), int(m.value()))
        total = sum(latest.values())
        if total >= expect or time.monotonic() > deadline:
            break
        time.sleep(1.0)
    for word, n in sorted(latest.items(), key=lambda kv: (-kv[1], kv[0]))[:10]:
        print(f"{word:>10} {n}")
    print(f"{len(latest)} distinct words, {total} counted (expected {expect})")
    if total != expect:
        sys.exit(1)


def query(word: str, port: int) -> None:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/count/{word}/", timeout=10) as response:
        print(response.read().decode())


def total(path: str) -> int:
    with open(path) as lines:
        return sum(len(line.split()) for line in lines)


if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    if command == "feed":
        asyncio.run(feed(sys.argv[2]))
    elif command == "show":
        show(int(sys.argv[sys.argv.index("--expect") + 1]))
    elif command == "query":
        query(sys.argv[2], int(sys.argv[sys.argv.index("--port") + 1]))
    elif command == "total":
        print(total(sys.argv[2]))
    else:
        sys.exit(__doc__)
