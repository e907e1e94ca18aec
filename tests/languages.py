"""A host's SLUICE_USER_LANGUAGE callable, for the tests: each user's language, by user name."""

#: The language of the users the tests name; the others have none (LANGUAGE_CODE).
BY_USERNAME = {"ivan": "ru", "ivan-ru": "ru-RU", "klingon": "tlh"}


def language_of(user):
    """The language code of ``user``, or None."""
    return BY_USERNAME.get(user.username)


def broken(user):
    """A callable that fails: the site's language stands in."""
    raise RuntimeError("the host's lookup failed")
