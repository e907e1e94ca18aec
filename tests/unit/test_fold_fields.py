"""The fold hash's and the size hash's field names have one owner on each side, and they agree: a fold written by
admission comes back whole through the flush's claim and read."""

import json
import re

import pytest

from digest import fold_store
from digest.user_claims import claim_users
from pipeline.admission.fold_fields import FOLD, SIZE
from pipeline.conf import sluice_settings
from pipeline.connections import LUA_DIR
from pipeline.redis import keys
from tests.digest_helpers import fold

LUA = (LUA_DIR / "include" / "fold_fields.lua").read_text()
pytestmark = pytest.mark.django_db


def lua_table(name):
    body = re.search(rf"local {name} = \{{(.*?)\}}", LUA, re.S)[1]
    return dict(re.findall(r"(\w+) = '([^']*)'", body))


def test_python_and_lua_name_the_same_fields():
    assert lua_table("FOLD") == dict(FOLD)
    assert lua_table("SIZE") == dict(SIZE)


def test_no_script_spells_a_fold_field_itself():
    # Every script reads and writes them through FOLD and SIZE: a field spelt by its letters is a second owner.
    from pipeline.admission.scripts import script as admission

    lua = [*admission.folder.glob("**/*.lua"), *fold_store.script.folder.glob("**/*.lua")]
    field = r"'(?:[npflkrzb]|ec|kc|c:|e:|kk:)'"
    spelt = re.compile(r"redis\.call\('H\w+', (?:key|k\.size|size|fold|KEYS\[\d\])[^)]*" + field)
    offenders = [path.name for path in lua if spelt.search(path.read_text())]
    assert not offenders


def test_a_fold_written_by_admission_is_read_back_by_the_flush(redis_client):
    fold(7, kind="task.comment", entity_id="t1", payload={"title": "first"})
    fold(7, kind="task.comment", entity_id="t1", payload={"title": "second"})
    claimed = claim_users("f1", 10, 10, 60, redis_client)
    [back] = fold_store.read_claimed("f1", claimed, redis_client)
    assert (back.kind, back.entity_id, back.count, back.grain) == ("task.comment", "t1", 2, "entity")
    assert json.loads(back.payload_json) == {"title": "second"}
    assert back.first_seen <= back.last_seen
    assert back.channels == tuple(sorted(sluice_settings().kinds["task.comment"].channels))
    size = redis_client.hgetall(keys.fold_store_size())
    assert int(size[SIZE["keys"].encode()]) == 1
    assert int(size[SIZE["bytes"].encode()]) == len(back.payload_json)
