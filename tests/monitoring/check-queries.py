#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Every PromQL expression of the monitoring kit, against a real Prometheus.

Run by tests/monitoring/live.sh while Prometheus scrapes node_exporter's
textfile collector on running nvmevol daemons' metrics directories (one of
them in a qemu guest with XFS project quota and NVMe, so that every family
has series).

- Dashboard targets (Grafana variables replaced: $instance, $partition,
  $volume by ".*", $__rate_interval by 1m): each must return series.
- Dashboard variables (label_values(QUERY, LABEL)): QUERY must return series
  that carry LABEL.
- Alert rules: an alert's expression returns nothing while all is well, so
  each expression must parse and evaluate (the HTTP API answers "success"),
  and each of its vector selectors (the metric name with its label matchers,
  as written, found by scanning the expression with string literals masked)
  must return series (only nvmevol_* and node_* selectors are looked for:
  the kit uses no others). --expect NAME: that alert's whole expression must
  return series now (a condition the run created).
- The rules as the server loaded them (rule_files): each rule's health "ok".

Usage: check-queries.py --url http://127.0.0.1:PORT --dashboard FILE --rules FILE [--expect ALERT]...
Ends with "N passed, N failed".
"""
import argparse
import json
import re
import sys
import urllib.error
import urllib.parse
import urllib.request

import yaml

from tally import finish, result

GRAFANA_VARS = {"instance": ".*", "partition": ".*", "volume": ".*", "__rate_interval": "1m", "__interval": "15s",
                "__range": "1h"}


class Prom:
    def __init__(self, url):
        self.url = url.rstrip("/")

    def get(self, path, **params):
        q = urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(f"{self.url}{path}?{q}", timeout=30) as r:
                return json.load(r)
        except urllib.error.HTTPError as e:
            try:
                return json.load(e)
            except ValueError:
                return {"status": "error", "error": f"HTTP {e.code}"}

    def query(self, expr):
        """(ok, series or error text)."""
        r = self.get("/api/v1/query", query=expr)
        if r.get("status") != "success":
            return False, f"{r.get('errorType', '')}: {r.get('error', r)}"
        return True, r["data"]["result"]


def substitute(expr):
    def var(m):
        name = m.group(1) or m.group(2)
        if name not in GRAFANA_VARS:
            raise KeyError(name)
        return GRAFANA_VARS[name]
    return re.sub(r"\$\{([A-Za-z_]+)(?::[a-z]+)?\}|\$([A-Za-z_]+)", var, expr)


def mask_strings(expr):
    """The expression with the inside of every string literal replaced by '#' (same length)."""
    out, i = [], 0
    while i < len(expr):
        c = expr[i]
        if c in "\"'`":
            j = i + 1
            while j < len(expr) and expr[j] != c:
                j += 2 if expr[j] == "\\" and c != "`" else 1
            out.append(c + "#" * (min(j, len(expr)) - i - 1) + (c if j < len(expr) else ""))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


SELECTOR = re.compile(r"(?<![A-Za-z0-9_:])((?:nvmevol|node)_[A-Za-z0-9_:]*)\s*(\{[^{}]*\})?")


def selectors(expr):
    """[(metric name, selector text)] of the expression's vector selectors of nvmevol_* and node_*."""
    masked = mask_strings(expr)
    found = []
    for m in SELECTOR.finditer(masked):
        text = expr[m.start():m.end()].strip()
        if (m.group(1), text) not in found:
            found.append((m.group(1), text))
    return found


def check_selectors(prom, sels):
    """(all ok, notes): every selector returns series."""
    ok, notes = True, []
    for _, text in sels:
        good, res = prom.query(text)
        if not good or not res:
            ok = False
            notes.append(f"{text}: {res if not good else 'no series'}")
    return ok, notes


def dashboard_targets(panels):
    for p in panels:
        yield from ((p, t) for t in p.get("targets", []))
        yield from dashboard_targets(p.get("panels", []))


def check_dashboard(prom, path):
    with open(path) as f:
        dash = json.load(f)
    all_panels = []

    def walk(ps):
        for p in ps:
            all_panels.append(p)
            walk(p.get("panels", []))
    walk(dash.get("panels", []))
    ids = [p.get("id") for p in all_panels]
    result(len(ids) == len(set(ids)) and None not in ids, f"dashboard: {len(ids)} panels with distinct ids")

    for v in dash.get("templating", {}).get("list", []):
        if v.get("type") != "query":
            continue
        q = v["query"]["query"] if isinstance(v.get("query"), dict) else v.get("query", "")
        m = re.fullmatch(r"\s*label_values\((.*),\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*", q, re.S)
        if not m:
            result(False, f"dashboard variable ${v['name']}: not label_values(QUERY, LABEL): {q}")
            continue
        good, res = prom.query(substitute(m.group(1)))
        ok = good and res and all(m.group(2) in s["metric"] for s in res)
        result(ok, f"dashboard variable ${v['name']}: {q} has values",
               "" if ok else (res if not good else f"{len(res)} series, label {m.group(2)} missing or none"))

    for p, t in dashboard_targets(dash.get("panels", [])):
        what = f"dashboard \"{p.get('title')}\" {t.get('refId')}"
        expr = t.get("expr")
        if not expr or not t.get("datasource"):
            result(False, f"{what}: a target without expr or datasource")
            continue
        try:
            q = substitute(expr)
        except KeyError as e:
            result(False, f"{what}: unknown Grafana variable ${e.args[0]}: {expr}")
            continue
        good, res = prom.query(q)
        if not good:
            result(False, f"{what}: {q}", res)
        else:
            result(bool(res), f"{what}: {len(res)} series: {q}")


def check_rules(prom, path, expect):
    with open(path) as f:
        doc = yaml.safe_load(f)
    rules = [r for g in doc["groups"] for r in g["rules"]]
    for r in rules:
        name = r.get("alert") or r.get("record")
        expr = r["expr"]
        good, res = prom.query(expr)
        if not good:
            result(False, f"alert {name}: the expression does not evaluate", res)
            continue
        sels = selectors(expr)
        ok, notes = check_selectors(prom, sels)
        ok = ok and bool(sels)
        result(ok, f"alert {name}: parses; its {len(sels)} selectors return series (the expression itself: "
               f"{len(res)} series now)",
               "\n".join(notes) if notes else ("" if sels else "no nvmevol_/node_ selector found in it"))
        if name in expect:
            result(bool(res), f"alert {name}: fires for what this run broke: "
                   + ", ".join(sorted({json.dumps(s['metric'], sort_keys=True) for s in res})[:3]))
    missing = sorted(set(expect) - {r.get("alert") for r in rules})
    result(not missing, "every --expect names a rule", ", ".join(missing))

    # The rules as the server itself loaded and evaluated them.
    r = prom.get("/api/v1/rules")
    loaded = {x["name"]: x for g in r.get("data", {}).get("groups", []) for x in g["rules"]}
    for rule in rules:
        name = rule.get("alert") or rule.get("record")
        x = loaded.get(name)
        ok = x is not None and x.get("health") == "ok"
        result(ok, f"alert {name}: loaded by the server, health ok",
               "" if ok else ("not loaded" if x is None else f"health {x.get('health')}: {x.get('lastError')}"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--dashboard", required=True)
    ap.add_argument("--rules", required=True)
    ap.add_argument("--expect", action="append", default=[])
    a = ap.parse_args()
    prom = Prom(a.url)
    check_dashboard(prom, a.dashboard)
    check_rules(prom, a.rules, a.expect)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
