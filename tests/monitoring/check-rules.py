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
     (">= -Inf"; not right of "unless"), so the series meant not to fire fire
     too; a rule without such a comparison gets "or on() vector(1)" instead.
     The tests must fail with more alerts than they expect (their
     must-not-fire cases are checked).
5. control: the first rule's tests stripped of their must-not-fire cases
   must not pass the "always" check of 4.

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
    # Not in what "unless" takes away: passing everything there would take everything away.
    keep, sep, away = expr.partition(" unless ")
    always, n = NUMERIC_COMPARISON.subn(">= -Inf", keep)
    return always + sep + away if n else f"({expr}) or on() vector(1)"


def extra_alert(text):
    """True when one of promtool's failed evaluations got more alerts than it expected."""
    for block in re.split(r"^\s*alertname: ", text, flags=re.M)[1:]:
        exp, _, got = block.partition("got:")
        if got.count("Labels:") > exp.count("Labels:"):
            return True
    return False


def sabotaged(rules_doc, tests_doc, rules, rules_name, hows=("never", "always")):
    """[(alert, how, expr, failed as it must, promtool's text)] for each rule sabotaged each way.

    One promtool run for every copy (its start-up and the TSDB of each test group are the slow
    part): each copy has its own directory, the tests that name the rule beside it.
    """
    with tempfile.TemporaryDirectory(prefix="nvmevol-rules.") as tmp:
        cases = []
        for g, i, r in rules:
            for how in hows:
                doc = yaml.safe_load(yaml.safe_dump(rules_doc))
                target = next(x for x in doc["groups"] if x["name"] == g["name"])["rules"][i]
                target["expr"] = sabotage(r["expr"], how)
                d = os.path.join(tmp, f"{len(cases):02d}-{how}")
                os.mkdir(d)
                with open(os.path.join(d, rules_name), "w") as f:
                    yaml.safe_dump(doc, f, sort_keys=False)
                mine = dict(tests_doc, tests=[t for t in tests_doc["tests"]
                                              if any(a["alertname"] == r["alert"] for a in t.get("alert_rule_test", []))])
                with open(os.path.join(d, "t.yml"), "w") as f:
                    yaml.safe_dump(mine, f, sort_keys=False)
                cases.append((r["alert"], how, target["expr"], os.path.join(d, "t.yml")))
        _, out = promtool("test", "rules", *[c[3] for c in cases])
    # promtool prints "Unit Testing:  FILE" and then that file's outcome.
    sections = {}
    for part in re.split(r"^Unit Testing:\s+", out, flags=re.M)[1:]:
        path, _, rest = part.partition("\n")
        sections[path.strip()] = rest
    found = []
    for alert, how, expr, path in cases:
        text = sections.get(path, "") or out
        ok = "FAILED" in text and alert in text and "SUCCESS" not in text
        if how == "always":
            ok = ok and extra_alert(text)
        found.append((alert, how, expr, ok, text))
    return found


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

    for alert, how, expr, ok, text in sabotaged(rules_doc, tests_doc, rules, os.path.basename(rules_path)):
        short = expr[:60] + ("..." if len(expr) > 60 else "")
        result(ok, f"{alert}: the tests fail when it {how} fires (expr: {short})",
               "" if ok else f"promtool said:\n{text[:1500]}")

    # Control: the first rule's tests without their must-not-fire cases (the series left out of
    # exp_alerts, the evals that expect nothing) must not pass the "always" check.
    g, i, r = rules[0]
    weak = yaml.safe_load(yaml.safe_dump(tests_doc))
    for t in weak["tests"]:
        evals = [a for a in t.get("alert_rule_test", []) if a["alertname"] == r["alert"]]
        if not evals:
            continue
        firing = [e["exp_labels"] for a in evals for e in a.get("exp_alerts") or []]
        t["alert_rule_test"] = [a for a in evals if a.get("exp_alerts")]
        t["input_series"] = [x for x in t["input_series"]
                             if any(all(f'{k}="{v}"' in x["series"] for k, v in lab.items() if k != "severity")
                                    for lab in firing)]
    got = sabotaged(rules_doc, weak, [rules[0]], os.path.basename(rules_path), ("always",))
    result(not got[0][3], f"control: {r['alert']}'s tests without a must-not-fire case fail the \"always\" check")

    return finish()


if __name__ == "__main__":
    sys.exit(main())
