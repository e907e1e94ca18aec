"""manage.py activity --user <pk> [--kind K] [--since ISO|1d]: a user's notifications, step by step, in words."""

import json

from django.core.management.base import BaseCommand, CommandError
from django.http import Http404

from notifications.activity import queries
from notifications.activity.admin import user_of
from notifications.activity.tasks import drain
from notifications.activity.words import Words, as_dict


class Command(BaseCommand):
    help = (
        "Print a user's activity log (every decision and send of their notifications, oldest first), or every step of "
        "one notification."
    )

    def add_arguments(self, parser):
        parser.add_argument("--user", help="the user's primary key")
        parser.add_argument("--notification", help="every step of this notification id instead (a digest's too)")
        parser.add_argument("--kind", default="", help="only this kind")
        parser.add_argument("--channel", default="", help="only this channel")
        parser.add_argument("--outcome", default="", help="only this outcome (accepted, folded, sent ...)")
        parser.add_argument("--since", help="only steps since this ISO 8601 time, or this long ago: 90s, 15m, 12h, 1d")
        parser.add_argument(
            "--limit", type=int, default=100, help=f"the newest this many (at most {queries.MAX_LIMIT})"
        )
        parser.add_argument("--drain", action="store_true", help="drain the Redis buffers into the database first")
        parser.add_argument("--json", action="store_true", help="one JSON object per line")

    def handle(self, **options):
        if bool(options["user"]) == bool(options["notification"]):
            raise CommandError("give --user <pk> or --notification <id>")
        if not 1 <= options["limit"] <= queries.MAX_LIMIT:
            raise CommandError(f"--limit must be between 1 and {queries.MAX_LIMIT}")
        try:
            since = queries.parse_since(options["since"]) if options["since"] else None
        except ValueError as exc:
            raise CommandError(f"--since: {exc}") from None
        if options["drain"]:
            drain()
        if options["notification"]:
            own, carried, carriers = queries.steps(options["notification"])
            if not own:
                raise CommandError(f"no steps recorded for notification {options['notification']!r}")
            self._print(own, options["json"])
            if carried:
                if not options["json"]:
                    self.stdout.write("carried:")
                self._print(carried, options["json"])
            for digest in carriers:
                self.stdout.write(f"carried by digest {digest.notification_id} at {digest.at.isoformat()}")
            return
        try:
            user = user_of(options["user"])
        except Http404:
            raise CommandError(f"no user with primary key {options['user']!r}") from None
        entries = queries.timeline(
            user.pk,
            kind=options["kind"],
            channel=options["channel"],
            outcome=options["outcome"],
            since=since,
            limit=options["limit"],
        )
        self._print(list(reversed(entries)), options["json"])

    def _print(self, entries, as_json):
        cache = {}
        for entry in entries:
            words = cache.get(entry.user_id) or cache.setdefault(entry.user_id, Words(entry.user))
            said = str(words.say(entry))
            if as_json:
                self.stdout.write(json.dumps(as_dict(entry, said), ensure_ascii=False))
            else:
                where = f" [{entry.channel}]" if entry.channel else ""
                at = entry.at.isoformat(timespec="milliseconds")
                self.stdout.write(f"{at}  {entry.kind} {entry.entity_id}{where}: {said}  ({entry.notification_id})")
