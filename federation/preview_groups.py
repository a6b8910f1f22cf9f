"""Preview and change-request diffs at fleet scale: clusters whose outcome is identical (same
action, same rendered manifest or diff, same message and warnings) form one group, shown once as
"same on N clusters"; the groups that differ from the majority are shown expanded. Diff lines carry
a class for colour, and FedPortal's own bookkeeping (the fedportal.io/ revision annotation and
managed label it writes on every object) is left out of diffs: it changes on every revision and
says nothing a reviewer needs.

Works on ``propagation.ClusterPreview`` objects and on the dicts a change request stores."""

from dataclasses import dataclass, field

OWN_KEYS = "fedportal.io/"
QUIET_ACTIONS = ("unchanged", "skip")


def value(item, key, default=None):
    return item.get(key, default) if isinstance(item, dict) else getattr(item, key, default)


def cluster_name(item) -> str:
    cluster = value(item, "cluster")
    return getattr(cluster, "name", None) or str(cluster)


def without_own_metadata(obj):
    """``obj`` without FedPortal's own labels and annotations (a map left empty is dropped), so a diff
    made of it neither shows them nor counts them in its hunk headers."""
    metadata = obj.get("metadata") if isinstance(obj, dict) else None
    if not isinstance(metadata, dict):
        return obj
    metadata = dict(metadata)
    for key in ("labels", "annotations"):
        if isinstance(metadata.get(key), dict):
            kept = {k: v for k, v in metadata[key].items() if not str(k).startswith(OWN_KEYS)}
            if kept:
                metadata[key] = kept
            else:
                metadata.pop(key)
    return {**obj, "metadata": metadata}


def clean_diff(text: str) -> str:
    """The unified diff without lines about FedPortal's own labels/annotations (diffs stored before
    ``without_own_metadata`` was applied to what is diffed)."""
    return "\n".join(line for line in (text or "").splitlines() if OWN_KEYS not in line)


def diff_lines(text: str) -> list[tuple[str, str]]:
    """(css class, line) per line of a unified diff: added, removed, hunk header or context."""
    lines = []
    for line in (text or "").splitlines():
        if line.startswith(("+++", "---")):
            kind = "diff-file"
        elif line.startswith("@@"):
            kind = "diff-hunk"
        elif line.startswith("+"):
            kind = "diff-add"
        elif line.startswith("-"):
            kind = "diff-del"
        else:
            kind = "diff-ctx"
        lines.append((kind, line))
    return lines


def has_changes(text: str) -> bool:
    return any(kind in ("diff-add", "diff-del") for kind, _ in diff_lines(text))


@dataclass
class PreviewGroup:
    items: list
    action: str
    message: str
    replicas: int | None
    warnings: list
    diff: str
    rendered_yaml: str
    expanded: bool = False
    clusters: list[str] = field(default_factory=list)
    resource: str = ""  # an unjoin request lists one row per resource on its cluster
    severity: str = ""  # "critical" for a change that deletes a Namespace from a member
    replicas_before: int | None = None  # the live replicas, to show a replica move

    @property
    def size(self) -> int:
        return len(self.items)

    @property
    def first(self):
        return self.items[0]

    @property
    def lines(self) -> list[tuple[str, str]]:
        return diff_lines(self.diff)


def group_previews(items) -> list[PreviewGroup]:
    groups: dict[tuple, PreviewGroup] = {}
    for item in items:
        diff = clean_diff(value(item, "diff", ""))
        if diff and not has_changes(diff):
            diff = ""  # only FedPortal's own annotation changed
        rendered = clean_diff(value(item, "rendered_yaml", ""))
        before = value(item, "replicas_before", value(item, "live_replicas"))
        key = (
            value(item, "resource"),
            value(item, "action"),
            diff,
            rendered if not diff else "",
            value(item, "message", ""),
            tuple(value(item, "warnings", None) or ()),
            value(item, "replicas"),
            value(item, "severity", ""),
            before,
        )
        group = groups.get(key)
        if group is None:
            group = groups[key] = PreviewGroup(
                [],
                value(item, "action"),
                value(item, "message", ""),
                value(item, "replicas"),
                list(value(item, "warnings", None) or ()),
                diff,
                rendered,
                resource=value(item, "resource") or "",
                severity=value(item, "severity", "") or "",
                replicas_before=before,
            )
        group.items.append(item)
        group.clusters.append(cluster_name(item))
    result = list(groups.values())
    majority = max(result, key=lambda g: g.size) if result else None
    for group in result:
        differs = len(result) == 1 or group is not majority or group.size == 1
        group.expanded = differs and group.action not in QUIET_ACTIONS
    return result
