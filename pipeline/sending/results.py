"""What one message's send can come to besides accepted: the errors a channel backend raises or returns.

Channel backends import them from notifications.channels.base, where the backend contract is stated; the engine
reads them here to decide a message's end (a permanent refusal is kept in the dead letters, anything else retried).
"""


class SendError(Exception):
    """A send failed."""


class TransientSendError(SendError):
    """Worth retrying later: a timeout, a 5xx, a rate limit at the provider."""


class PermanentSendError(SendError):
    """Retrying cannot help: no address, a 4xx, a rejected recipient."""

    #: The dead letters' reason for it.
    reason = "permanent"
