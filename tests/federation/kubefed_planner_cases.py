"""KubeFed's planner test table, carried over as data.

Source: kubernetes-sigs/kubefed, pkg/controller/util/planner/planner_test.go (commit 16fb85390),
Copyright 2016 The Kubernetes Authors, licensed under the Apache License, Version 2.0
(http://www.apache.org/licenses/LICENSE-2.0). Every call of doCheck, doCheckWithExisting and
doCheckWithExistingAndCapacity is one row here, in the file's order, under its test's name.

Row: (test, rebalance, preferences, totalReplicas, clusters, current, capacity, replicas, overflow).
doCheck and doCheckWithExisting run with rebalance false and no capacity and expect no overflow;
every call uses the key "".
"""

CASES = [
    # TestEqual
    ("TestEqual", False, {"*": {"weight": 1}}, 50, ["A", "B", "C"], {}, {}, {"A": 16, "B": 17, "C": 17}, {}),
    ("TestEqual", False, {"*": {"weight": 1}}, 50, ["A", "B"], {}, {}, {"A": 25, "B": 25}, {}),
    ("TestEqual", False, {"*": {"weight": 1}}, 1, ["A", "B"], {}, {}, {"A": 0, "B": 1}, {}),
    ("TestEqual", False, {"*": {"weight": 1}}, 1, ["A", "B", "C", "D"], {}, {}, {"A": 0, "B": 0, "C": 0, "D": 1}, {}),
    ("TestEqual", False, {"*": {"weight": 1}}, 1, ["A"], {}, {}, {"A": 1}, {}),
    ("TestEqual", False, {"*": {"weight": 1}}, 1, [], {}, {}, {}, {}),
    # TestEqualWithExisting
    ("TestEqualWithExisting", False, {"*": {"weight": 1}}, 50, ["A", "B", "C"], {"C": 30}, {}, {"A": 10, "B": 10, "C": 30}, {}),
    ("TestEqualWithExisting", False, {"*": {"weight": 1}}, 50, ["A", "B"], {"A": 30}, {}, {"A": 30, "B": 20}, {}),
    ("TestEqualWithExisting", False, {"*": {"weight": 1}}, 15, ["A", "B"], {"A": 0, "B": 8}, {}, {"A": 7, "B": 8}, {}),
    ("TestEqualWithExisting", False, {"*": {"weight": 1}}, 15, ["A", "B"], {"A": 1, "B": 8}, {}, {"A": 7, "B": 8}, {}),
    ("TestEqualWithExisting", False, {"*": {"weight": 1}}, 15, ["A", "B"], {"A": 4, "B": 8}, {}, {"A": 7, "B": 8}, {}),
    ("TestEqualWithExisting", False, {"*": {"weight": 1}}, 15, ["A", "B"], {"A": 5, "B": 8}, {}, {"A": 7, "B": 8}, {}),
    ("TestEqualWithExisting", False, {"*": {"weight": 1}}, 15, ["A", "B"], {"A": 6, "B": 8}, {}, {"A": 7, "B": 8}, {}),
    ("TestEqualWithExisting", False, {"*": {"weight": 1}}, 15, ["A", "B"], {"A": 7, "B": 8}, {}, {"A": 7, "B": 8}, {}),
    ("TestEqualWithExisting", False, {"*": {"weight": 1}}, 500000, ["A", "B"], {"A": 300000}, {}, {"A": 300000, "B": 200000}, {}),
    ("TestEqualWithExisting", False, {"*": {"weight": 1}}, 50, ["A", "B"], {"A": 10}, {}, {"A": 25, "B": 25}, {}),
    ("TestEqualWithExisting", False, {"*": {"weight": 1}}, 50, ["A", "B"], {"A": 10, "B": 70}, {}, {"A": 0, "B": 50}, {}),
    ("TestEqualWithExisting", False, {"*": {"weight": 1}}, 1, ["A", "B"], {"A": 30}, {}, {"A": 1, "B": 0}, {}),
    ("TestEqualWithExisting", False, {"*": {"weight": 1}}, 50, ["A", "B"], {"A": 10, "B": 20}, {}, {"A": 25, "B": 25}, {}),
    # TestWithExistingAndCapacity
    ("TestWithExistingAndCapacity", True, {"*": {"weight": 1}}, 50, ["A", "B", "C"], {}, {"C": 10},
     {"A": 20, "B": 20, "C": 10}, {"C": 7}),
    ("TestWithExistingAndCapacity", True, {"A": {"weight": 10000}, "B": {"weight": 1}}, 50, ["B", "C"], {}, {"B": 10},
     {"B": 10, "C": 0}, {"B": 40}),
    ("TestWithExistingAndCapacity", True, {"A": {"weight": 1}, "B": {"weight": 2}}, 60, ["A", "B", "C"], {}, {"B": 10},
     {"A": 50, "B": 10, "C": 0}, {"B": 30}),
    ("TestWithExistingAndCapacity", True,
     {"A": {"weight": 10000, "maxReplicas": 10}, "B": {"weight": 1}, "C": {"weight": 1, "maxReplicas": 21},
      "D": {"weight": 1, "maxReplicas": 10}},
     71, ["A", "B", "C", "D"], {}, {"C": 10}, {"A": 10, "B": 41, "C": 10, "D": 10}, {"C": 11}),
    ("TestWithExistingAndCapacity", False, {"A": {"weight": 1}, "B": {"weight": 1}}, 60, ["A", "B", "C"], {},
     {"A": 10, "B": 10}, {"A": 10, "B": 10, "C": 0}, {"A": 20, "B": 20}),
    ("TestWithExistingAndCapacity", False, {"A": {"weight": 1}, "B": {"weight": 5}}, 60, ["A", "B", "C"], {}, {"B": 10},
     {"A": 50, "B": 10, "C": 0}, {}),
    ("TestWithExistingAndCapacity", False, {"*": {"minReplicas": 20, "weight": 0}}, 50, ["A", "B", "C"], {}, {"B": 10},
     {"A": 20, "B": 10, "C": 20}, {}),
    ("TestWithExistingAndCapacity", True, {"*": {"minReplicas": 20, "weight": 1}}, 60, ["A", "B"], {}, {"B": 10},
     {"A": 50, "B": 10}, {"B": 15}),
    # TestMin
    ("TestMin", False, {"*": {"minReplicas": 2, "weight": 0}}, 50, ["A", "B", "C"], {}, {}, {"A": 2, "B": 2, "C": 2}, {}),
    ("TestMin", False, {"*": {"minReplicas": 20, "weight": 0}}, 50, ["A", "B", "C"], {}, {}, {"A": 10, "B": 20, "C": 20}, {}),
    ("TestMin", False, {"*": {"minReplicas": 20, "weight": 0}, "A": {"minReplicas": 100, "weight": 1}}, 50, ["A", "B", "C"],
     {}, {}, {"A": 50, "B": 0, "C": 0}, {}),
    ("TestMin", False, {"*": {"minReplicas": 10, "weight": 1, "maxReplicas": 12}}, 50, ["A", "B", "C"], {}, {},
     {"A": 12, "B": 12, "C": 12}, {}),
    # TestMax
    ("TestMax", False, {"*": {"weight": 1, "maxReplicas": 2}}, 50, ["A", "B", "C"], {}, {}, {"A": 2, "B": 2, "C": 2}, {}),
    ("TestMax", False, {"*": {"weight": 0, "maxReplicas": 2}}, 50, ["A", "B", "C"], {}, {}, {"A": 0, "B": 0, "C": 0}, {}),
    # TestWeight
    ("TestWeight", False, {"A": {"weight": 1}, "B": {"weight": 2}}, 60, ["A", "B", "C"], {}, {}, {"A": 20, "B": 40, "C": 0}, {}),
    ("TestWeight", False, {"A": {"weight": 10000}, "B": {"weight": 1}}, 50, ["A", "B", "C"], {}, {}, {"A": 50, "B": 0, "C": 0}, {}),
    ("TestWeight", False, {"A": {"weight": 10000}, "B": {"weight": 1}}, 50, ["B", "C"], {}, {}, {"B": 50, "C": 0}, {}),
    ("TestWeight", False, {"A": {"weight": 10000, "maxReplicas": 10}, "B": {"weight": 1}, "C": {"weight": 1}}, 50,
     ["A", "B", "C"], {}, {}, {"A": 10, "B": 20, "C": 20}, {}),
    ("TestWeight", False,
     {"A": {"weight": 10000, "maxReplicas": 10}, "B": {"weight": 1}, "C": {"weight": 1, "maxReplicas": 10}}, 50,
     ["A", "B", "C"], {}, {}, {"A": 10, "B": 30, "C": 10}, {}),
    ("TestWeight", False,
     {"A": {"weight": 10000, "maxReplicas": 10}, "B": {"weight": 1}, "C": {"weight": 1, "maxReplicas": 21},
      "D": {"weight": 1, "maxReplicas": 10}},
     71, ["A", "B", "C", "D"], {}, {}, {"A": 10, "B": 30, "C": 21, "D": 10}, {}),
    ("TestWeight", False,
     {"A": {"weight": 10000, "maxReplicas": 10}, "B": {"weight": 1}, "C": {"weight": 1, "maxReplicas": 21},
      "D": {"weight": 1, "maxReplicas": 10}, "E": {"weight": 1}},
     91, ["A", "B", "C", "D", "E"], {}, {}, {"A": 10, "B": 25, "C": 21, "D": 10, "E": 25}, {}),
]
