"""docs/redis.md's ACL rules are the code's: the block a user copies is exactly pipeline.redis.addresses.acl_rules()."""

import re

from pipeline.redis.addresses import acl_rules
from sluice_tools.processes import ROOT

QUEUES = ["critical", "routine", "background"]


def documented_rules():
    text = (ROOT / "docs" / "redis.md").read_text()
    block = re.search(r"```\nACL SETUSER sluice on >CHANGE-ME\n(.*?)```", text, re.S)
    assert block, "docs/redis.md has no ACL SETUSER block"
    return block[1].split()


def test_the_documented_acl_rules_are_the_codes():
    assert documented_rules() == acl_rules(QUEUES).split()
