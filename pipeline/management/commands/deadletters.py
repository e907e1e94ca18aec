"""manage.py deadletters list|replay|discard: the messages that could not be sent, and what to do with them."""

import json
import re
from collections import Counter
from datetime import UTC, datetime

from django.core.management.base import BaseCommand, CommandError
from redis.exceptions import RedisError

from pipeline.broker import deadletters

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def duration(text):
    """Seconds in "90s", "15m", "1h" or "2d" (a bare number is seconds)."""
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", text or "")
    if not found:
        raise CommandError(f"--older-than takes a duration such as 90s, 15m, 1h or 2d, got {text!r}")
    return float(found[1]) * UNITS[found[2] or "s"]


class Command(BaseCommand):
    help = "List, replay or discard dead letters: messages whose sends failed for good, kept in Redis."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=("list", "replay", "discard"))
        parser.add_argument("--reason", choices=sorted(set(deadletters.REASONS)), help="only this reason")
        parser.add_argument("--kind", help="only this kind")
        parser.add_argument("--class", dest="klass", choices=("critical", "routine", "background"))
        parser.add_argument("--older-than", help="only letters at least this old: 90s, 15m, 1h, 2d")
        parser.add_argument("--id", action="append", dest="ids", help="only this entry id (repeatable)")
        parser.add_argument("--limit", type=int, help="at most this many letters")
        parser.add_argument("--json", action="store_true", help="list: one JSON object per line")
        parser.add_argument("--yes", action="store_true", help="discard: really forget them")

    def handle(self, action, **options):
        older = duration(options["older_than"]) if options["older_than"] is not None else None
        if options["limit"] is not None and options["limit"] < 1:
            raise CommandError("--limit must be at least 1")
        try:
            letters = deadletters.entries(
                reason=options["reason"],
                kind=options["kind"],
                klass=options["klass"],
                older_than_s=older,
                ids=set(options["ids"]) if options["ids"] else None,
                limit=options["limit"],
            )
            getattr(self, f"_{action}")(letters, options)
        except RedisError as exc:
            raise CommandError(f"Redis is unavailable: {type(exc).__name__}: {exc}") from exc

    def _list(self, letters, options):
        for letter in letters:
            if options["json"]:
                self.stdout.write(json.dumps({k: v for k, v in vars(letter).items() if k != "kwargs"}))
                continue
            when = datetime.fromtimestamp(letter.at, UTC).strftime("%Y-%m-%d %H:%M:%S")
            channels = ",".join(letter.channels) if letter.channels else "all"
            self.stdout.write(
                f"{letter.id}  {when}  {letter.klass:10s} {letter.kind:24s} {letter.reason:18s} "
                f"attempts {letter.attempts}  channels {channels}  {letter.error}"
            )
        if not options["json"]:
            self.stdout.write(f"{len(letters)} dead letters (of {deadletters.size()} kept)")

    def _replay(self, letters, options):
        results = Counter()
        for letter in letters:
            results[deadletters.replay(letter)] += 1
        self.stdout.write(
            f"replayed {results[deadletters.REPLAYED]}; "
            f"left for later (queue full) {results[deadletters.FULL]}; "
            f"already gone {results[deadletters.GONE]}"
        )
        if results[deadletters.FULL]:
            self.stderr.write("some queues were full: run replay again once they drain")

    def _discard(self, letters, options):
        if not options["yes"]:
            raise CommandError(f"this forgets {len(letters)} dead letters for good: add --yes")
        self.stdout.write(f"discarded {deadletters.discard(letters)}")
