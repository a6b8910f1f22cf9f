"""Column specs shared by the drift pages' HTML tables and their CSV exports."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Column:
    field: str  # "name", or a path into the row: "kubelets__oldest"
    header: str
    html: bool = True
    csv: bool = True
    link: bool = False  # HTML: link the cell to the row's detail page
    kind: str = "text"  # HTML rendering hint: text, code, state, severity, bool


@dataclass(frozen=True)
class Cell:
    column: Column
    value: object


class RowTable:
    """A table of rows computed in Python (dicts and objects; no queryset behind them)."""

    columns: tuple[Column, ...] = ()

    @classmethod
    def html_columns(cls) -> list[Column]:
        return [c for c in cls.columns if c.html]

    @classmethod
    def csv_columns(cls) -> list[Column]:
        return [c for c in cls.columns if c.csv]

    @classmethod
    def html_rows(cls, objects) -> list[tuple[object, list[Cell]]]:
        columns = cls.html_columns()
        return [(obj, [Cell(c, resolve(c, obj)) for c in columns]) for obj in objects]

    @classmethod
    def csv_rows(cls, objects):
        for obj in objects:
            yield cls.csv_rows_one(obj)

    @classmethod
    def csv_rows_one(cls, obj) -> list:
        return [_plain(resolve(c, obj)) for c in cls.csv_columns()]


def resolve(column: Column, obj):
    """Column.value, but also stepping into dicts (``compat__incompatible``)."""
    for part in column.field.split("__"):
        if obj is None:
            return None
        obj = obj.get(part) if isinstance(obj, dict) else getattr(obj, part)
    return obj


def _plain(value):
    if value is None or isinstance(value, (int, float, str, bool, list, dict)):
        return value
    return str(value)


class SkewMemberTable(RowTable):
    """The host-vs-member table of the drift matrix page (one row per member)."""

    columns = (
        Column("name", "Cluster", link=True),
        Column("cluster__version_label", "Version", kind="code"),
        Column("cluster__server_version", "gitVersion", html=False),
        Column("host", "Host", html=False),
        Column("host_version", "Host version", html=False),
        Column("difference", "Host − member (minors)"),
        Column("severity", "Severity", kind="severity"),
        Column("rules", "Rules", kind="code"),
        Column("kubelets__oldest", "Oldest kubelet", kind="code"),
        Column("kubelets__newest", "Newest kubelet", kind="code"),
        Column("kubelets__behind", "Kubelet minors behind"),
        Column("kubelets__severity", "Kubelet severity", kind="severity"),
        Column("labels_text", "Labels"),
        Column("cluster__state", "State", kind="state"),
        Column("cluster__isolated", "Isolated", html=False),
        Column("messages", "Findings", html=False),
    )


class CompatCellTable(RowTable):
    """The compatibility matrix's CSV: one row per (federated resource, target cluster)."""

    columns = (
        Column("resource", "Resource"),
        Column("kind", "Kind"),
        Column("cluster", "Cluster"),
        Column("version", "Cluster version"),
        Column("status", "Status"),
        Column("fields", "Unsupported fields"),
        Column("problems", "Problems"),
        Column("min_version", "Minimum version"),
        Column("fix", "Suggested override"),
    )


class ComplianceTable(RowTable):
    """The compliance report: one row per cluster (page and CSV)."""

    columns = (
        Column("name", "Cluster"),
        Column("role", "Role"),
        Column("version", "Version", kind="code"),
        Column("score", "Score"),
        Column("compliant", "Compliant", kind="bool"),
        Column("skew_severity", "Version policy", kind="severity"),
        Column("compat__compatible", "Compatible resources", html=False),
        Column("compat__incompatible", "Incompatible resources"),
        Column("compat__unverifiable", "Unverifiable resources", html=False),
        Column("propagation__failed", "Propagation failures"),
        Column("propagation__out_of_sync", "Open drift"),
        Column("propagation__in_sync", "In sync", html=False),
        Column("isolated", "Isolated", kind="bool"),
        Column("failed_rules_text", "Failed rules", kind="code"),
        Column("explanations", "Explanations", html=False),
    )
