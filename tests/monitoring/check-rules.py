#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The alert rules' own tests, and proof that they can fail.

1. promtool check rules examples/monitoring/alerts.yml
2. promtool test rules examples/monitoring/alerts.test.yml
3. every rule has a test that expects it to fire, and one eval that expects
   nothing of it (a case that must not fire, or a time before its "for")
4. per rule, two sabotaged copies of alerts.yml, each of which must make
   promtool test rules fail:
   - "never": the rule's expression matches nothing (its fire case is checked);
   - "always": every comparison with a number in it passes everything
     (">= -Inf"), so the series meant not to fire fire too; a rule without
     such a comparison gets "or on() vector(1)" instead. Either way an alert
     the tests do not expect appears (their must-not-fire cases are checked).

Usage: check-rules.py [RULES.yml TESTS.yml]. Ends with "N passed, N failed".
"""
import os
import re
import subprocess
import sys
import tempfile

import yaml

from tally import finish, result

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
RULES = os.path.join(REPO, "examples/monitoring/alerts.yml")
TESTS = os.path.join(REPO, "examples/monitoring/alerts.test.yml")

def promtool(*args, cwd=None):
    # One stream: promtool prints a file's name on stdout and its failures on stderr.
    p = subprocess.run(["promtool", *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=300)
    return p.returncode, p.stdout


NUMERIC_COMPARISON = re.compile(r"(==|!=|>=|<=|>|<)\s*-?[0-9][0-9.e+]*(?![0-9a-zA-Z_])")


def sabotage(expr, how):
    if how == "never":
        return "vector(0) > 1"
    always, n = NUMERIC_COMPARISON.subn(">= -Inf", expr)
    return always if n else f"({expr}) or on() vector(1)"


def main():
    rules_path, tests_path = (sys.argv[1], sys.argv[2]) if len(sys.argv) == 3 else (RULES, TESTS)
    rc, out = promtool("check", "rules", rules_path)
    result(rc == 0, "promtool check rules accepts alerts.yml", out if rc else "")
    rc, out = promtool("test", "rules", os.path.basename(tests_path), cwd=os.path.dirname(tests_path))
    result(rc == 0, "promtool test rules: every case of alerts.test.yml holds", out if rc else "")

    with open(rules_path) as f:
        rules_doc = yaml.safe_load(f)
    with open(tests_path) as f:
        tests_doc = yaml.safe_load(f)
    rules = [(g, i, r) for g in rules_doc["groups"] for i, r in enumerate(g["rules"]) if "alert" in r]
    fires, quiet = set(), set()
    for t in tests_doc.get("tests", []):
        for a in t.get("alert_rule_test", []):
            (fires if a.get("exp_alerts") else quiet).add(a["alertname"])
    for _, _, r in rules:
        name = r["alert"]
        result(name in fires and name in quiet, f"{name}: a test expects it to fire, and one eval expects nothing")

    # One promtool run for every sabotaged copy (its start-up is most of the time): each copy
    # has its own directory with the tests beside it, as they name "alerts.yml".
    with tempfile.TemporaryDirectory(prefix="nvmevol-rules.") as tmp:
        cases = []
        for g, i, r in rules:
            for how in ("never", "always"):
                doc = yaml.safe_load(yaml.safe_dump(rules_doc))
                target = next(x for x in doc["groups"] if x["name"] == g["name"])["rules"][i]
                target["expr"] = sabotage(r["expr"], how)
                d = os.path.join(tmp, f"{len(cases):02d}-{how}")
                os.mkdir(d)
                with open(os.path.join(d, os.path.basename(rules_path)), "w") as f:
                    yaml.safe_dump(doc, f, sort_keys=False)
                # Only the groups that test this rule: each group is a fresh TSDB, the slow part.
                mine = dict(tests_doc, tests=[t for t in tests_doc["tests"]
                                              if any(a["alertname"] == r["alert"] for a in t.get("alert_rule_test", []))])
                with open(os.path.join(d, "t.yml"), "w") as f:
                    yaml.safe_dump(mine, f, sort_keys=False)
                cases.append((r["alert"], how, target["expr"], os.path.join(d, "t.yml")))
        rc, out = promtool("test", "rules", *[c[3] for c in cases])
        # promtool prints "Unit Testing:  FILE" and then that file's outcome.
        sections = {}
        for part in re.split(r"^Unit Testing:\s+", out, flags=re.M)[1:]:
            path, _, rest = part.partition("\n")
            sections[path.strip()] = rest
        for alert, how, expr, path in cases:
            text = sections.get(path, "")
            ok = "FAILED" in text and alert in text and "SUCCESS" not in text
            short = expr[:60] + ("..." if len(expr) > 60 else "")
            result(ok, f"{alert}: the tests fail when it {how} fires (expr: {short})",
                   "" if ok else f"promtool said:\n{text[:1500] or out[:1500]}")

    return finish()


if __name__ == "__main__":
    sys.exit(main())
