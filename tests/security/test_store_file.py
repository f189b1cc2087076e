"""A security store file is replaced whole and durably, readable by its owner only, and re-read by a
watcher only when it was replaced."""

from __future__ import annotations

import os
import stat

from mmlog.security.store_file import WatchedFile, load_json, save_json


def test_a_saved_store_is_its_owners_alone_and_leaves_no_temporary_file(tmp_path):
    path = tmp_path / "credentials.json"
    save_json(path, {"users": {"alice": 1}})
    save_json(path, {"users": {"alice": 2}})
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert load_json(path) == {"users": {"alice": 2}}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["credentials.json"]


def test_a_watcher_re_reads_only_a_replaced_file(tmp_path):
    path = tmp_path / "acls.json"
    reads = []
    watched = WatchedFile(path, lambda doc: reads.append(doc) or doc)
    assert watched.check() is None and watched.generation == 1  # no file yet: parsed as None once
    assert watched.check() is None and watched.generation == 1
    save_json(path, {"acls": []})
    assert watched.check() == {"acls": []} and watched.generation == 2
    assert watched.check() == {"acls": []} and watched.generation == 2
    assert reads == [None, None, {"acls": []}]
