"""A topic's name: how long it may be and what it may hold, checked as an entity id is (notify_topic(), ingest)."""

import re

from .exceptions import InvalidTopic

#: The longest topic name (an ingest token's service prefix included).
MAX_TOPIC_LENGTH = 200
# What a topic name must not hold, as for an entity id: control characters and lone surrogates.
_TOPIC_REFUSED = re.compile("[\x00-\x1f\x7f\ud800-\udfff]")


def check_topic(topic, limit=MAX_TOPIC_LENGTH):
    """``topic`` if it is a usable topic name, else raise InvalidTopic naming what is wrong."""
    if not isinstance(topic, str):
        raise InvalidTopic(f"topic must be a string, got {type(topic).__name__}")
    if not topic.strip():
        raise InvalidTopic("topic must not be empty")
    if len(topic) > limit:
        raise InvalidTopic(f"topic is {len(topic)} characters; the limit is {limit}")
    if _TOPIC_REFUSED.search(topic):
        raise InvalidTopic("topic must not contain control characters or lone surrogates")
    return topic
