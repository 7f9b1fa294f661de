#!/usr/bin/env python3
"""Tests of scripts/check-module-cycles.py: circles planted in scratch copies
of the workspace's crates are found, at any depth and through every kind of
path, and the workspace as it is passes.

Run: python3 scripts/test_check_module_cycles.py
"""
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import unittest

SCRIPTS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(SCRIPTS)
CHECK = os.path.join(SCRIPTS, "check-module-cycles.py")
CRATES = ["common/src", "ranker/src", "cron/src", "query-api/src", "admin/src"]


def check(*sources):
    return subprocess.run([sys.executable, CHECK, *sources], capture_output=True, text=True)


class PlantedCircles(unittest.TestCase):
    def setUp(self):
        self.scratch = tempfile.mkdtemp(prefix="module-cycles-")
        self.addCleanup(shutil.rmtree, self.scratch)

    def copy_of(self, crate):
        destination = os.path.join(self.scratch, crate.replace("/", "_"))
        shutil.copytree(os.path.join(ROOT, crate), destination)
        return destination

    def plant(self, src, relative, line):
        """Adds `line` to the top of `relative`, below its `//!` docs."""
        path = pathlib.Path(src, relative)
        lines = path.read_text(encoding="utf-8").split("\n")
        at = next(index for index, text_line in enumerate(lines) if not text_line.startswith("//!"))
        lines.insert(at, line)
        path.write_text("\n".join(lines), encoding="utf-8")

    def assert_circle(self, src, *modules):
        result = check(src)
        self.assertEqual(result.returncode, 1, result.stderr)
        for module in modules:
            self.assertIn(module, result.stderr)

    def test_the_workspace_as_it_is_has_no_circle(self):
        result = check(*(os.path.join(ROOT, crate) for crate in CRATES))
        self.assertEqual(result.returncode, 0, result.stderr)

    def test_siblings_inside_a_module_through_super(self):
        # `walk` uses `star_marks`; `star_marks` naming `walk` closes a circle
        # two levels down, which the crate-level check could not see.
        src = self.copy_of("common/src")
        self.plant(src, "store/star_marks.rs", "use super::walk::WalkRequest;")
        self.assert_circle(src, "crate::store::star_marks", "crate::store::walk")

    def test_siblings_through_a_use_group(self):
        src = self.copy_of("common/src")
        self.plant(src, "store/star_marks.rs", "use super::{walk::WalkRequest, IndexKind};")
        self.assert_circle(src, "crate::store::star_marks", "crate::store::walk")

    def test_siblings_through_a_path_in_code(self):
        src = self.copy_of("common/src")
        self.plant(src, "store/star_marks.rs", "fn planted() -> crate::store::walk::WalkPage { todo!() }")
        self.assert_circle(src, "crate::store::star_marks", "crate::store::walk")

    def test_siblings_through_an_aliased_use(self):
        # `as` is taken off the path, not letters off the module's name.
        src = self.copy_of("common/src")
        self.plant(src, "store/star_marks.rs", "use super::walk as walked;")
        self.assert_circle(src, "crate::store::star_marks", "crate::store::walk")

    def test_a_path_after_a_string_with_a_line_continuation_or_a_quote_character(self):
        src = self.copy_of("common/src")
        self.plant(src, "store/star_marks.rs", 'const _A: &str = "one \\\n two";\nconst _B: char = \'"\';\nuse super::walk::WalkRequest;')
        self.assert_circle(src, "crate::store::star_marks", "crate::store::walk")

    def test_through_a_parents_re_export(self):
        # `store` re-exports `walk::WalkPage`; the path names `store`, the item is `walk`'s.
        src = self.copy_of("common/src")
        self.plant(src, "store/star_marks.rs", "use crate::store::WalkPage;")
        self.assert_circle(src, "crate::store::star_marks", "crate::store::walk")

    def test_a_child_module_named_through_self(self):
        src = self.copy_of("common/src")
        nested = os.path.join(src, "store", "star_marks")
        os.makedirs(nested)
        pathlib.Path(nested, "filter.rs").write_text("use crate::store::walk::WalkRequest;\n", encoding="utf-8")
        self.plant(src, "store/star_marks.rs", "mod filter;\nuse self::filter as _;")
        self.plant(src, "store/walk.rs", "use super::star_marks::StarSet as _;")
        self.assert_circle(src, "crate::store::walk")

    def test_top_level_modules_of_another_crate(self):
        src = self.copy_of("query-api/src")
        self.plant(src, "etag.rs", "use crate::server::serve as _;")
        result = check(src)
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn("crate::etag", result.stderr)

    def test_a_path_in_a_comment_string_or_test_module_is_no_dependency(self):
        src = self.copy_of("common/src")
        self.plant(src, "store/star_marks.rs", '// use super::walk::WalkRequest;\nconst _PLANTED: &str = "super::walk::X";')
        path = os.path.join(src, "store", "star_marks.rs")
        with open(path, "a", encoding="utf-8") as file:
            file.write("\n#[cfg(test)]\nmod planted_tests {\n    use super::super::walk::WalkRequest;\n}\n")
        self.assertEqual(check(src).returncode, 0)


if __name__ == "__main__":
    unittest.main()
