"""Issue 23 item 12: previews and change-request diffs grouped by identical outcome, coloured,
without FedPortal's own annotation noise."""

from federation.preview_groups import clean_diff, diff_lines, group_previews

NOISE_DIFF = """--- live
+++ rendered
@@ -1,6 +1,6 @@
 metadata:
   annotations:
-    fedportal.io/revision: '1'
+    fedportal.io/revision: '2'
   labels:
     app: web
"""
IMAGE_DIFF = NOISE_DIFF.replace("    app: web\n", "    app: web\n-  image: nginx:1.25\n+  image: nginx:1.27\n")


def row(cluster, diff, action="update", message="1 field(s) change."):
    return {"cluster": cluster, "action": action, "diff": diff, "message": message, "warnings": [], "replicas": None}


def test_identical_diffs_form_one_group_and_the_odd_one_is_expanded():
    rows = [row(f"c{i:03}", IMAGE_DIFF) for i in range(180)] + [row("odd", IMAGE_DIFF.replace("1.27", "1.28"))]
    groups = group_previews(rows)
    assert [(g.size, g.expanded) for g in groups] == [(180, False), (1, True)]
    assert groups[0].clusters[:2] == ["c000", "c001"] and groups[1].clusters == ["odd"]


def test_fedportal_annotation_is_not_a_change():
    assert "fedportal.io" not in clean_diff(NOISE_DIFF)
    groups = group_previews([row("a", NOISE_DIFF), row("b", IMAGE_DIFF)])
    assert groups[0].diff == ""  # only the revision annotation differed
    assert "fedportal.io" not in groups[1].diff and "+  image: nginx:1.27" in groups[1].diff


def test_diff_lines_carry_their_colour_class():
    kinds = [kind for kind, _ in diff_lines(IMAGE_DIFF)]
    assert kinds[:3] == ["diff-file", "diff-file", "diff-hunk"]
    assert kinds.count("diff-add") == 2 and kinds.count("diff-del") == 2


def test_one_group_only_is_shown_expanded_unless_nothing_changes():
    assert [g.expanded for g in group_previews([row("a", IMAGE_DIFF), row("b", IMAGE_DIFF)])] == [True]
    assert [g.expanded for g in group_previews([row("a", "", action="unchanged", message="No change.")])] == [False]


def test_group_header_says_1_replica_and_same_on_n_clusters():
    from django.template.loader import render_to_string

    one = group_previews([{**row("a", IMAGE_DIFF), "replicas": 1}])[0]
    html = render_to_string("federation/partials/preview_group.html", {"group": one})
    assert "1 replica</span>" in html and "1 replicas" not in html
    many = group_previews([{**row(n, IMAGE_DIFF), "replicas": 2} for n in ("a", "b", "c")])[0]
    html = render_to_string("federation/partials/preview_group.html", {"group": many})
    assert "Same on 3 clusters" in html and "2 replicas</span>" in html
    assert '<span class="diff-add">+  image: nginx:1.27</span>' in html


def test_a_diff_without_fedportals_own_metadata_has_no_empty_map_and_hunks_that_count_its_lines():
    import re

    from federation.diffs import unified_yaml_diff
    from federation.preview_groups import without_own_metadata

    manifest = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": "shop",
            "annotations": {"fedportal.io/revision": "1"},
            "labels": {"fedportal.io/managed": "true", "team": "review"},
        },
    }
    shown = without_own_metadata(manifest)
    assert shown["metadata"] == {"name": "shop", "labels": {"team": "review"}}
    assert manifest["metadata"]["annotations"] == {"fedportal.io/revision": "1"}  # the caller's object is kept
    diff = unified_yaml_diff(None, shown, after_label="rendered")
    lines = diff.splitlines()
    added = int(re.fullmatch(r"@@ -0,0 \+1,(\d+) @@", lines[2]).group(1))
    assert added == len([line for line in lines[3:] if line.startswith("+")]) == 6
    assert "annotations" not in diff
    assert without_own_metadata({"kind": "X"}) == {"kind": "X"}


def test_diff_lines_are_one_block_each_without_a_blank_line_between_them():
    from django.template.loader import render_to_string

    html = render_to_string(
        "federation/partials/preview_group.html", {"group": group_previews([row("a", IMAGE_DIFF)])[0]}
    )
    pre = html[html.index('<pre class="diff">') : html.index("</pre>")]
    assert "\n" not in pre  # each line is a display:block span: a newline between them was a blank line
    assert pre.count("<span") == len(diff_lines(clean_diff(IMAGE_DIFF)))  # clean_diff: stored diffs made before
