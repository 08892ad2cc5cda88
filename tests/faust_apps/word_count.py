"""Faust's word-count example as a Faust user writes it; the imports are the only lines changed.

    python word_count.py worker -l info      # counts words, serves /count/<word>/
    python word_count.py produce --tag X     # sends the sentences (each word suffixed with X)
"""
import streamkit as faust
from streamkit.cli import option

SENTENCES = [
    "the quick brown fox jumps over the lazy dog",
    "the dog sleeps",
    "a fox is quick",
]

app = faust.App(
    "faust-word-count",
    broker="kafka://localhost:9092",
    store="rocksdb://",
    topic_partitions=4,
)

posts_topic = app.topic("posts", value_type=str)
word_counts = app.Table("word_counts", default=int, help="Keep count of words (str to int).")


@app.agent(posts_topic)
async def shuffle_words(posts):
    async for post in posts:
        for word in post.split():
            await count_words.send(key=word, value=word)


@app.agent(value_type=str)
async def count_words(words):
    """Count words from blog post article body."""
    async for word in words:
        word_counts[word] += 1


@app.page("/count/{word}/")
@app.table_route(table=word_counts, match_info="word")
async def get_count(web, request, word):
    return web.json({word: word_counts[word]})


class EventCounter(faust.Sensor):
    """Counts the events this worker's agents take (Faust's Sensor API)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.events = 0

    def on_stream_event_in(self, tp, offset, stream, event):
        self.events += 1


event_counter = EventCounter()
app.sensors.add(event_counter)


@app.page("/sensor/")
async def sensor_view(web, request):
    return web.json({"events": event_counter.events})


@app.command(option("--tag", default="", help="Suffix that makes this run's words unique."))
async def produce(self, tag):
    for sentence in SENTENCES:
        await posts_topic.send(value=" ".join(word + tag for word in sentence.split()))
    self.say(f"sent {len(SENTENCES)} sentences")


if __name__ == "__main__":
    app.main()
