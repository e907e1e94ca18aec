"""Admission's Lua, in pipeline/admission/lua: its scripts, and the includes they share (include/)."""

from pathlib import Path

from pipeline.connections import Scripts

#: Admission's own scripts (admit_event, fold_handed, push_bounded, record_key).
script = Scripts(Path(__file__).with_name("lua"))
