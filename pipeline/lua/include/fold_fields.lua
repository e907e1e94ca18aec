-- The field names of a fold's hash and of the fold store's size hash: one definition for every script that writes
-- or reads them (admission's fold, the flush's claims, give-backs and ends). Their Python side is
-- pipeline/admission/fold_fields.py; tests/unit/test_fold_fields.py holds the two together.
--   FOLD  count (events), payload (the latest), first_seen and last_seen (seconds), kind (the latest event's),
--         reason (why held), bytes (what the fold charges the store), entities and kinds (distinct ones, counted
--         by the coarser grains), and the prefixes of the channel, entity and kind flags
--   SIZE  keys and bytes of the whole store
local FOLD = {
  count = 'n', payload = 'p', first_seen = 'f', last_seen = 'l', kind = 'k', reason = 'r', bytes = 'z',
  entities = 'ec', kinds = 'kc', channel = 'c:', entity = 'e:', kind_seen = 'kk:',
}
local SIZE = {keys = 'k', bytes = 'b'}
