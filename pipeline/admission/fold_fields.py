"""The field names of a fold's hash and of the fold store's size hash, owned here for Python (the Lua side is
pipeline/lua/include/fold_fields.lua): admission's fold writes them, the flush reads them back (digest.fold_store)."""

from types import MappingProxyType

#: A fold's hash: its events' count, the latest payload, when the first and the last were seen, the latest kind, why
#: it is held, the bytes it charges the store, the distinct entities and kinds a coarser grain counted, and the
#: prefixes of its channel, entity and kind flags.
FOLD = MappingProxyType(
    {
        "count": "n",
        "payload": "p",
        "first_seen": "f",
        "last_seen": "l",
        "kind": "k",
        "reason": "r",
        "bytes": "z",
        "entities": "ec",
        "kinds": "kc",
        "channel": "c:",
        "entity": "e:",
        "kind_seen": "kk:",
    }
)
#: The fold store's size hash: its keys and bytes.
SIZE = MappingProxyType({"keys": "k", "bytes": "b"})
