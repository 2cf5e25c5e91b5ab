"""A Quix Streams exactly-once stateful application (run under .venv-quix): counts the
words of `words` per key in RocksDB state backed by a compacted changelog topic, and
writes each running count to `counts`. Stops after COUNT outputs.

usage: quix_counter.py BOOTSTRAP STATE_DIR COUNT COMMIT_EVERY
(COMMIT_EVERY: a checkpoint, hence changelog writes, every that many messages)
"""
import json
import sys

from quixstreams import Application

bootstrap, state_dir, count, commit_every = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
app = Application(
    broker_address=bootstrap,
    consumer_group="word-counter",
    auto_offset_reset="earliest",
    processing_guarantee="exactly-once",
    state_dir=state_dir,
    commit_interval=0.5,
    commit_every=commit_every,
)
words = app.topic("words", key_deserializer="str", value_deserializer="str")
counts = app.topic("counts", key_serializer="str", value_serializer="json")
sdf = app.dataframe(words)


def tally(value, state):
    n = state.get("count", 0) + 1
    state.set("count", n)
    return n


sdf = sdf.apply(tally, stateful=True).to_topic(counts)
out = app.run(count=count, timeout=60, metadata=True)
print(json.dumps([[o["_key"], o["_value"]] for o in out]))
